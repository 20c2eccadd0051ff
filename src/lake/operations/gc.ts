import type { Pointer } from "../../catalog/catalog.js";
import { errorMessage } from "../../model/errors.js";
import { faultPoint } from "../../shared/faults.js";
import { manifestKey } from "../layout.js";
import type { OutboxEntry } from "../outbox.js";
import { partitionPath, type Partition } from "../../model/partition.js";
import { planRetention, type PartitionGcReport, type RecordedSwap } from "../retention.js";
import { knownPartitions } from "./history.js";
import { currentPointers, listRuns, listRunsOf, readManifest, runPrefix, type LakeContext, type RunListing } from "../runs.js";
import { expireSnapshots, removeUnreferencedMetadata } from "./expire-snapshots.js";
import { parsePartitionPath } from "../../model/partition.js";
import { mapLimited } from "../../shared/map-limited.js";
import { ingestedInPlace, storageName, type TableDefinition } from "../../model/table.js";
import { collectIngestedPartition } from "./gc-ingested.js";
import type { HasLakeParts } from "../parts.js";
import { isScratchTable, isScratchTableOf } from "../scratch-tables.js";
import { collectLayouts } from "./relayout.js";

/** Partitions GC after a swap lists at once. */
const GC_CONCURRENCY = 16;

export type { PartitionGcReport } from "../retention.js";

/** What GC of one table needs besides the partitions: the pointers and the table's pending outbox entries, read once. */
interface GcState {
  readonly pointers: ReadonlyMap<string, Pointer>;
  readonly pending: readonly OutboxEntry[];
  /** The runs of the partitions collected, listed together (../runs.ts listRunsOf); a partition not in it is listed on its own. */
  readonly runs?: ReadonlyMap<string, readonly RunListing[]>;
}

/**
 * Reads the pointers (of `partitions`, else every one) and pending changes of a table once, for GC of many of its
 * partitions.
 */
async function gcState(
  ctx: LakeContext & { readonly outbox: { pending(table?: string): Promise<OutboxEntry[]> } },
  table: TableDefinition,
  partitions?: readonly Partition[],
): Promise<GcState> {
  const pointers = partitions ? await currentPointers(ctx, table, partitions) : new Map((await ctx.catalog.listPointers(table)).map((p) => [partitionPath(p.partition), p]));
  return { pointers, pending: await ctx.outbox.pending(table.name) };
}

/** The state, with the runs of `partitions` listed together where they are runs (not an ingested table's files). */
async function withRuns(ctx: LakeContext, table: TableDefinition, partitions: readonly Partition[], state: GcState): Promise<GcState> {
  return table.ingest ? state : { ...state, runs: await listRunsOf(ctx, table, partitions) };
}

const pendingIndex = new WeakMap<readonly OutboxEntry[], Map<string, Set<string>>>();

/** The runs pending outbox entries name, by partition: indexed once per state, not searched once per partition. */
function pendingRuns(state: GcState): Map<string, Set<string>> {
  let index = pendingIndex.get(state.pending);
  if (!index) {
    index = new Map();
    for (const move of state.pending.flatMap((entry) => entry.moves)) {
      const runs = index.get(move.partition) ?? new Set<string>();
      runs.add(move.runId);
      runs.add(move.previousRunId ?? "");
      index.set(move.partition, runs);
    }
    pendingIndex.set(state.pending, index);
  }
  return index;
}

/**
 * GC of one partition: runs outside the retention rule are deleted, files
 * first and manifest last (a run with a manifest but no files is only a
 * leftover record). The current, previous and rollback-target runs, runs a
 * pending outbox entry names, and runs within the grace window stay.
 */
async function collectPartition(
  ctx: LakeContext,
  table: TableDefinition,
  partition: Partition,
  state: GcState,
  options: { readonly dryRun: boolean; readonly graceMs: number },
): Promise<PartitionGcReport> {
  const path = partitionPath(partition);
  // An ingested table from before runs has none: every file in its partition folders is data, never garbage.
  if (ingestedInPlace(table)) return { table: table.name, partition: path, kept: [], removed: [] };
  const pointer = state.pointers.get(path);
  if (table.ingest) return { table: table.name, partition: path, ...(await collectIngestedPartition(ctx, table, partition, pointer, pendingRuns(state).get(path) ?? new Set(), options)) };
  const runs = state.runs?.get(path) ?? (await listRuns(ctx, table, partition));
  const candidates = runs.map((run) => ({ runId: run.runId, published: run.hasManifest, hasFiles: run.files.length > 0 }));
  const plan = (swaps?: readonly RecordedSwap[]) =>
    planRetention({
      runs: candidates,
      currentRunId: pointer?.runId,
      previousRunId: pointer?.previousRunId,
      protectedRunIds: pendingRuns(state).get(path) ?? new Set(),
      swaps,
      now: new Date(),
      graceMs: options.graceMs,
    });
  let decisions = plan();
  // A run about to go that was current less than the grace window ago stays: a reader of the catalog file written
  // then may still read it. The swaps that could have ended it are those to newer runs, read from their manifests.
  const oldest = decisions.find((d) => !d.keep && byIdPublished(runs, d.runId))?.runId;
  if (oldest !== undefined) decisions = plan(await recordedSwaps(ctx, table, partition, runs.filter((run) => run.hasManifest && run.runId > oldest).map((run) => run.runId)));
  const byId = new Map(runs.map((run) => [run.runId, run]));
  const removed: PartitionGcReport["removed"][number][] = [];
  // Decided from what was read just now: delete only if no other writer took the table over meanwhile.
  if (!options.dryRun && decisions.some((d) => !d.keep)) await ctx.leaseCheck(table.name);
  for (const decision of decisions.filter((d) => !d.keep)) {
    const run = byId.get(decision.runId);
    const files = run?.files ?? [];
    if (!options.dryRun) {
      await ctx.store.delete([...files.map((f) => f.key), ...(run?.markers ?? [])]);
      faultPoint("during-gc");
      await ctx.store.delete([manifestKey(storageName(table), partition, decision.runId)]);
    }
    removed.push({ runId: decision.runId, reason: decision.reason, bytes: files.reduce((sum, f) => sum + f.size, 0) });
  }
  return { table: table.name, partition: path, kept: decisions.filter((d) => d.keep).map(({ runId, reason }) => ({ runId, reason })), removed };
}

/** Whether `runId` is among `runs` with a manifest. */
function byIdPublished(runs: readonly { readonly runId: string; readonly hasManifest: boolean }[], runId: string): boolean {
  return runs.some((run) => run.runId === runId && run.hasManifest);
}

/** The swaps the manifests of `runIds` record (`swappedAt`: taken as the batch's pointers were about to move, milliseconds before). */
async function recordedSwaps(ctx: LakeContext, table: TableDefinition, partition: Partition, runIds: readonly string[]): Promise<RecordedSwap[]> {
  const manifests = await mapLimited(runIds, GC_CONCURRENCY, (runId) => readManifest(ctx.store, table, partition, runId));
  return manifests.flatMap((m) => (m ? [{ runId: m.runId, previousRunId: m.previousRunId, ...(m.rebuiltFrom !== undefined ? { rebuiltFrom: m.rebuiltFrom } : {}), swappedAt: new Date(m.swappedAt) }] : []));
}

/** GC right after swaps: the swaps stand whatever happens here; what GC could not remove now, the next GC removes. */
export async function collectAfterSwap(
  ctx: LakeContext & { readonly outbox: { pending(table?: string): Promise<OutboxEntry[]> } },
  table: TableDefinition,
  partitions: readonly Partition[],
): Promise<PartitionGcReport[]> {
  const failed = (partition: Partition, error: unknown): PartitionGcReport => ({
    table: table.name,
    partition: partitionPath(partition),
    kept: [],
    removed: [],
    error: errorMessage(error),
  });
  let state: GcState;
  try {
    state = await withRuns(ctx, table, partitions, await gcState(ctx, table, partitions));
  } catch (error) {
    return partitions.map((partition) => failed(partition, error));
  }
  try {
    await expireBeforeGc(ctx, table, () => mapLimited(partitions, GC_CONCURRENCY, (partition) => collectPartition(ctx, table, partition, state, { dryRun: true, graceMs: ctx.graceMs })));
  } catch (error) {
    // No snapshot could be expired: nothing is deleted, so none keeps naming a deleted run.
    return partitions.map((partition) => failed(partition, error));
  }
  // Partitions are listed (and collected) a few at a time, each with its own lease check before it deletes anything.
  const reports = await mapLimited(partitions, GC_CONCURRENCY, async (partition) => {
    try {
      return await collectPartition(ctx, table, partition, state, { dryRun: false, graceMs: ctx.graceMs });
    } catch (error) {
      return failed(partition, error);
    }
  });
  await expireSnapshots(ctx, table, removedRuns(ctx, table, reports)).catch(() => undefined);
  return reports;
}

/**
 * An `iceberg: true` table's snapshots that name runs GC is about to delete expire first (./expire-snapshots.ts):
 * `plan` is GC's dry run of the same partitions. A run that became old enough between that plan and the deletion
 * is caught by the expiry GC runs after deleting.
 */
async function expireBeforeGc(ctx: LakeContext, table: TableDefinition, plan: () => Promise<PartitionGcReport[]>): Promise<void> {
  if (!table.iceberg) return;
  await expireSnapshots(ctx, table, removedRuns(ctx, table, await plan()));
}

/** The store key prefixes of the runs GC reports removed (or would remove). */
function removedRuns(ctx: LakeContext, table: TableDefinition, reports: readonly PartitionGcReport[]): string[] {
  return reports.flatMap((report) => report.removed.map((run) => runPrefix(ctx.catalog, table, parsePartitionPath(report.partition, table.partitionKeys), run.runId)));
}

/** Progress of work that spans several partitions. */
export type ProgressListener = (event: { readonly done: number; readonly total: number; readonly label: string }) => void;

/** Garbage-collects runs outside the retention rule, in one table or in all, each under its lease (a dry run takes none). */
export async function collectGarbage(
  lake: HasLakeParts,
  tableName: string | undefined,
  options: { dryRun?: boolean; graceMs?: number; onProgress?: ProgressListener } = {},
): Promise<PartitionGcReport[]> {
  const parts = lake.parts;
  const listed = await parts.catalog.listTables();
  const tables = tableName !== undefined ? [await parts.table(tableName)] : listed.filter((t) => !isScratchTable(t.name));
  // Scratch tables a killed held sync left (../commit/staged-reads.ts): dropped under their table's lease, orphans at the end.
  const scratch = options.dryRun ? [] : listed.map((t) => t.name).filter(isScratchTable);
  const reports: PartitionGcReport[] = [];
  for (const table of tables) {
    const collect = async (): Promise<void> => {
      for (const name of scratch.filter((n) => isScratchTableOf(n, table.name))) await parts.catalog.dropTable(name);
      const { partitions, runs } = await knownPartitions(parts, table);
      const state: GcState = { ...(await gcState(parts, table)), ...(table.ingest ? {} : { runs }) };
      const graceMs = options.graceMs ?? parts.graceMs;
      if (!options.dryRun) await expireBeforeGc(parts, table, () => mapLimited(partitions, GC_CONCURRENCY, (partition) => collectPartition(parts, table, partition, state, { dryRun: true, graceMs })));
      const start = reports.length;
      for (const [index, partition] of partitions.entries()) {
        options.onProgress?.({ done: index, total: partitions.length, label: `${table.name}/${partitionPath(partition)}` });
        reports.push(await collectPartition(parts, table, partition, state, { dryRun: options.dryRun ?? false, graceMs }));
      }
      if (!options.dryRun) {
        await expireSnapshots(parts, table, removedRuns(parts, table, reports.slice(start)));
        await removeUnreferencedMetadata(parts, table);
      }
      // The layouts a change of partition keys left behind (../operations/relayout.ts).
      reports.push(...(await collectLayouts(parts, table, { graceMs, dryRun: options.dryRun ?? false })));
    };
    if (options.dryRun) await collect();
    // GC moves no pointer; under the lease it brings a view left stale by a killed writer up to date.
    else await parts.withLease(table.name, `gc ${table.name}`, collect, { catalogFile: "stale" });
  }
  // A scratch table whose table is gone cannot be read by any sync.
  const orphans = tableName !== undefined ? [] : scratch.filter((n) => !listed.some((t) => !isScratchTable(t.name) && isScratchTableOf(n, t.name)));
  for (const name of orphans) await parts.catalog.dropTable(name);
  return reports;
}
