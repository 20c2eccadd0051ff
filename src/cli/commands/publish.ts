import type { Command } from "commander";
import { schemaRestoreLines } from "../reports/schema-restores.js";
import { loadPipelineConfig } from "../../config/pipeline-config.js";
import { LakeswapError } from "../../model/errors.js";
import { checkSyncId } from "../../lake/sync-record.js";
import type { Lake } from "../../lake/lake.js";
import { discardSync, publishSync } from "../../lake/operations/publish.js";
import { formatTable, report } from "../output.js";
import { addWaitOptions, wantsJson, withLake } from "../context.js";

/** `lakeswap publish SYNC_ID` and `lakeswap discard SYNC_ID`: a held sync's staged runs moved in, or dropped. */
export function registerPublish(program: Command): void {
  heldSyncCommand(program, "publish", "move the pointers of a held sync (sync --hold, or all_or_nothing) to its staged runs, all in one publication", async (lake, syncId, command) => {
      const result = await publishSync(lake, syncId);
    report(wantsJson(command), result, () => {
      const rows = [
        ...result.published.map((p) => [p.table, p.partition, "published", p.runId, ""]),
        ...result.refused.map((r) => [r.table, r.partition, "refused", "", r.reason]),
      ];
      return [
        `sync ${result.syncId}: ${result.published.length} partition(s) published, ${result.refused.length} refused` +
          (result.published.length > 0 ? ` (undo with: lakeswap rollback --sync ${result.syncId})` : ""),
        ...(rows.length > 0 ? ["", formatTable(["table", "partition", "action", "run", "reason"], rows)] : []),
      ].join("\n");
    });
    if (result.refused.length > 0) {
      throw new LakeswapError("PARTIAL_FAILURE", `${result.refused.length} partition(s) of sync ${result.syncId} were not published (see the reasons); rerun the sync for them`);
    }
  });
  heldSyncCommand(program, "discard", "drop a held sync: nothing moves, its staged runs are removed by gc after the grace window", async (lake, syncId, command) => {
    const result = await discardSync(lake, syncId);
    report(wantsJson(command), result, () =>
      [`sync ${result.syncId} discarded: its ${result.runs} staged run(s) will never be current; gc removes them after the grace window`, ...schemaRestoreLines(result.schemas)].join("\n"),
    );
  });
}

/** A command on one held sync (`<name> <sync>`, `last` for the newest held one), with -c, --json and the wait options. */
function heldSyncCommand(program: Command, name: string, description: string, work: (lake: Lake, syncId: string, command: Command) => Promise<void>): void {
  addWaitOptions(
    program
      .command(`${name} <sync>`)
      .description(description)
      .option("-c, --config <file>", "reach the lake of this pipeline config (lakeswap.yaml), as sync does")
      .option("--json", "print the result as JSON"),
  ).action(async (sync: string, options: { config?: string }, command: Command) => {
    const syncId = checkSyncId(sync);
    const config = options.config !== undefined ? loadPipelineConfig(options.config) : undefined;
    await withLake(command, (lake) => work(lake, syncId, command), config);
  });
}
