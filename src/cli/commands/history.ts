import type { Command } from "commander";
import { formatTable, report } from "../output.js";
import { assertTableName } from "../../model/sql.js";
import { configSource, wantsJson, withLake } from "../context.js";
import { readHistory } from "../../lake/operations/history.js";

/** `lakeswap history`: a partition's runs with time, rows and which one is current. */
export function registerHistory(program: Command): void {
  program
    .command("history <table>")
    .description("list the runs of a table's partitions: id, time, rows, current or not")
    .option("--partition <spec>", "only this partition")
    .option("-c, --config <file>", "reach the lake of this pipeline config (lakeswap.yaml), as sync does")
    .option("--json", "print the history as JSON")
    .action(async (name: string, options: { partition?: string; config?: string }, command: Command) => {
      assertTableName(name);
      await withLake(command, async (lake) => {
        const histories = await readHistory(lake, name, options.partition);
        report(wantsJson(command), histories, () => {
          const rows = histories.flatMap((h) =>
            h.runs.map((run) => [h.partition || "(whole table)", run.runId, run.createdAt, run.rows ?? "?", run.bytes, run.state]),
          );
          return rows.length === 0 ? `table ${name} has no runs yet` : formatTable(["partition", "run", "created", "rows", "bytes", "state"], rows);
        });
      }, configSource(options.config, { readOnly: true }));
    });
}
