import type { Command } from "commander";
import { schemaRestoreLines } from "../reports/schema-restores.js";
import { loadPipelineConfig } from "../../config/pipeline-config.js";
import { InvalidInputError, NotFoundError } from "../../model/errors.js";
import { assertTableName } from "../../model/sql.js";
import { checkSyncId } from "../../lake/sync-record.js";
import { formatTable, report } from "../output.js";
import { addWaitOptions, wantsJson, withLake } from "../context.js";
import { rollbackPartition, rollbackSync } from "../../lake/operations/rollback.js";

interface Options {
  config?: string;
  partition?: string;
  to?: string;
  sync?: string;
}

/** `lakeswap rollback`: moves a partition's pointer back one run, or to a named run; or every pointer one sync moved. */
export function registerRollback(program: Command): void {
  addWaitOptions(
    program
      .command("rollback [table]")
      .description("point a partition back to its newest older run, or to --to RUN; or undo a whole sync with --sync ID")
      .option("--partition <spec>", "the partition: day=2026-11-01 (none for a table without partition keys)")
      .option("--to <run>", "the run id to point to (see lakeswap history)")
      .option("--sync <id>", "move back every pointer that sync moved ('last' for the newest; see lakeswap syncs)")
      .option("-c, --config <file>", "reach the lake of this pipeline config (lakeswap.yaml), as sync does")
      .option("--json", "print the result as JSON"),
  ).action(async (name: string | undefined, options: Options, command: Command) => {
    if (options.sync !== undefined) {
      if (name !== undefined || options.partition !== undefined || options.to !== undefined) {
        throw new InvalidInputError("--sync rolls back every partition of that sync: give it alone, without a table, --partition or --to");
      }
      const syncId = checkSyncId(options.sync);
      const config = options.config !== undefined ? loadPipelineConfig(options.config) : undefined;
      await withLake(command, async (lake) => {
        const result = await rollbackSync(lake, syncId);
        report(wantsJson(command), result, () => {
          const rows = result.partitions.map((p) => [p.table, p.partition, p.action, p.fromRunId, p.toRunId ?? (p.action === "removed" ? "(none)" : ""), p.reason]);
          const counts = (action: string) => result.partitions.filter((p) => p.action === action).length;
          return [
            `sync ${result.syncId}: ${counts("rolled back")} partition(s) rolled back, ${counts("removed")} removed (new in that sync), ${counts("skipped")} skipped`,
            ...(rows.length > 0 ? ["", formatTable(["table", "partition", "action", "from run", "to run", "reason"], rows)] : []),
            ...schemaRestoreLines(result.schemas),
            ...(result.unfinished ?? []).map(
              (u) =>
                `\nwarning: sync ${u.syncId} never finished (it was killed or stopped before this sync reran it), and ${u.partitions.length} partition(s) hold its runs again, ` +
                `a state no sync finished (${u.partitions.slice(0, 5).join(", ")}${u.partitions.length > 5 ? ", ..." : ""}). lakeswap rollback --sync ${u.syncId} moves them back to before it`,
            ),
          ].join("\n");
        });
        // Not one pointer moved back: a script that reads the exit code must not take the sync as undone.
        if (result.partitions.length > 0 && result.partitions.every((p) => p.action === "skipped") && !(result.schemas ?? []).some((s) => s.action === "restored")) {
          throw new NotFoundError(`nothing of sync ${result.syncId} was rolled back: every partition it moved was skipped (see the reasons: moved since, or its run before is gone)`);
        }
      }, config);
      return;
    }
    if (name === undefined) {
      throw new InvalidInputError("give a table and --partition (lakeswap rollback orders --partition day=2026-11-01), or --sync ID to undo a whole sync");
    }
    const table = assertTableName(name);
    // A table without partition keys is one unit: its rollback names no partition (the lake says so if the table has keys).
    const partition = options.partition ?? "";
    const config = options.config !== undefined ? loadPipelineConfig(options.config) : undefined;
    await withLake(command, async (lake) => {
      const result = await rollbackPartition(lake, table, partition, { toRunId: options.to });
      report(wantsJson(command), result, () =>
        `${result.partition ? `${result.table}/${result.partition}` : result.table}: rolled back from run ${result.fromRunId} to run ${result.toRunId}${result.rows !== undefined ? ` (${result.rows} rows)` : ""}`,
      );
    }, config);
  });
}
