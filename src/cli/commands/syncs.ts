import type { Command } from "commander";
import { loadPipelineConfig } from "../../config/pipeline-config.js";
import { formatTable, report } from "../output.js";
import { positiveCount, wantsJson, withLake } from "../context.js";

/** `lakeswap syncs`: the recorded syncs, newest first, with what each moved. */
export function registerSyncs(program: Command): void {
  program
    .command("syncs")
    .description("list the recorded syncs, newest first: id, time, config, partitions moved (undo one with rollback --sync ID)")
    .option("--limit <n>", "only the newest n (a whole number from 1)", positiveCount("--limit"))
    .option("-c, --config <file>", "reach the lake of this pipeline config (lakeswap.yaml), as sync does")
    .option("--json", "print the records as JSON")
    .action(async (options: { limit?: number; config?: string }, command: Command) => {
      const config = options.config !== undefined ? loadPipelineConfig(options.config) : undefined;
      await withLake(command, async (lake) => {
        const all = await lake.syncs({ skipUnreadable: true });
        const records = options.limit !== undefined ? all.slice(0, options.limit) : all;
        report(wantsJson(command), records, () => {
          if (records.length === 0) return "no sync has been recorded in this lake yet";
          return formatTable(
            ["sync", "started", "finished", "moved", "tables", "config"],
            records.map((r) => [
              r.syncId,
              r.startedAt,
              r.finishedAt ?? "(did not finish)",
              r.moves.length,
              [...new Set(r.moves.map((m) => m.table))].join(", "),
              r.config,
            ]),
          );
        });
      }, { ...config, readOnly: true });
    });
}
