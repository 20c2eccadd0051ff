import type { Pointer } from "../../catalog/catalog.js";
import type { Partition } from "../../model/partition.js";
import { runIdTime } from "../../model/run-id.js";
import type { TableDefinition } from "../../model/table.js";
import { faultPoint } from "../../shared/faults.js";
import { readTally } from "../ingest-tally.js";
import type { RetentionReason } from "../retention.js";
import { listRuns, type LakeContext } from "../runs.js";

/** What GC decided (and, unless dry-run, did) for one ingested partition's runs. */
interface IngestedGc {
  readonly kept: { runId: string; reason: RetentionReason }[];
  readonly removed: { runId: string; reason: RetentionReason; bytes: number }[];
}

/**
 * GC of one partition of an ingested table that keeps runs. Its run is the one its tally names (and its pointer, but
 * for a process killed between the two: both stay). An ingested table is never rolled back, so a run a compaction
 * replaced goes once the grace window has passed since the replacement (a reader that listed it just before may still
 * read it until then), and so does a run a killed landing began and nothing names; runs a pending catalog change names
 * stay.
 */
export async function collectIngestedPartition(
  ctx: LakeContext,
  table: TableDefinition,
  partition: Partition,
  pointer: Pointer | undefined,
  pending: ReadonlySet<string>,
  options: { readonly dryRun: boolean; readonly graceMs: number; readonly now?: Date },
): Promise<IngestedGc> {
  const now = (options.now ?? new Date()).getTime();
  const [tally, runs] = await Promise.all([readTally(ctx.store, table.name, partition), listRuns(ctx, table, partition)]);
  const since = tally.since !== undefined ? Date.parse(tally.since) : tally.run !== undefined ? runIdTime(tally.run).getTime() : now;
  const result: IngestedGc = { kept: [], removed: [] };
  const doomed: typeof runs = [];
  for (const run of runs) {
    const reason: RetentionReason | undefined =
      run.runId === tally.run || run.runId === pointer?.runId
        ? "current"
        : pending.has(run.runId)
          ? "pending catalog change"
          : now - runIdTime(run.runId).getTime() < options.graceMs
            ? "within grace window"
            : now - since < options.graceMs
              ? "replaced within grace window"
              : undefined;
    if (reason !== undefined) result.kept.push({ runId: run.runId, reason });
    else doomed.push(run);
  }
  // Decided from what was read just now: delete only if no other writer took the table over meanwhile.
  if (!options.dryRun && doomed.length > 0) await ctx.leaseCheck(table.name);
  for (const run of doomed) {
    if (!options.dryRun) {
      await ctx.store.delete([...run.files.map((f) => f.key), ...run.markers]);
      faultPoint("during-gc");
    }
    result.removed.push({ runId: run.runId, reason: "superseded", bytes: run.files.reduce((sum, f) => sum + f.size, 0) });
  }
  return result;
}
