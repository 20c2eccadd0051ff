import type { Command } from "commander";
import { loadPipelineConfig } from "../../config/pipeline-config.js";
import { LakeswapError, errorMessage } from "../../model/errors.js";
import { formatTable, report } from "../output.js";
import { positiveCount, wantsJson, withLake } from "../context.js";
import { listSyncs } from "../../lake/operations/syncs.js";

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
        const unreadable: unknown[] = [];
        const all = await listSyncs(lake, { skipUnreadable: true, onUnreadable: (error) => unreadable.push(error) });
        const records = options.limit !== undefined ? all.slice(0, options.limit) : all;
        report(wantsJson(command), records, () => {
          if (records.length === 0) return unreadable.length > 0 ? "" : "no sync has been recorded in this lake yet";
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
        // The readable records are listed; an unreadable one is the error of the command (exit 8), named, and with
        // --json part of the same document ({result, error}).
        if (unreadable.length > 0) throw unreadableRecords(unreadable);
      }, { ...config, readOnly: true });
    });
}

/** One STORE_ERROR for the sync records that could not be read, each named by its own message. */
function unreadableRecords(errors: readonly unknown[]): LakeswapError {
  const messages = errors.map(errorMessage);
  return new LakeswapError("STORE_ERROR", messages.length === 1 ? messages[0]! : `${messages.length} sync records are unreadable: ${messages.join("; ")}`);
}
