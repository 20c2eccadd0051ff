import type { Command } from "commander";
import { report } from "../output.js";
import { addWaitOptions, wantsJson, withLake } from "../context.js";

/** `lakeswap rollback`: moves a partition's pointer back one run, or to a named run. */
export function registerRollback(program: Command): void {
  addWaitOptions(
    program
      .command("rollback <table>")
      .description("point a partition back to its newest older run, or to --to RUN")
      .requiredOption("--partition <spec>", "the partition: day=2026-11-01")
      .option("--to <run>", "the run id to point to (see lakeswap history)")
      .option("--json", "print the result as JSON"),
  ).action(async (name: string, options: { partition: string; to?: string }, command: Command) => {
    await withLake(command, async (lake) => {
      const result = await lake.rollback(name, options.partition, { toRunId: options.to });
      report(wantsJson(command), result, () =>
        `${result.table}/${result.partition}: rolled back from run ${result.fromRunId} to run ${result.toRunId}${result.rows !== undefined ? ` (${result.rows} rows)` : ""}`,
      );
    });
  });
}
