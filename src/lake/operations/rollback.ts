import { InvalidInputError, NotFoundError } from "../../model/errors.js";
import { parsePartitionPath, partitionPath, type Partition } from "../../model/partition.js";
import { isRunId } from "../../model/run-id.js";
import { ensureManifest, listRuns, readManifest, runFiles, runPrefix, type LakeContext } from "../runs.js";
import { movePointers, removePointers } from "../commit/move.js";
import type { SyncMove } from "../sync-record.js";
import type { TableDefinition } from "../../model/table.js";

/** What a rollback did. */
export interface RollbackResult {
  readonly table: string;
  readonly partition: string;
  readonly fromRunId: string;
  readonly toRunId: string;
  readonly rows?: number;
}

/** What `rollbackSync` did to one partition the sync had moved. */
export interface SyncRollbackEntry {
  readonly table: string;
  readonly partition: string;
  /** `rolled back` to the run before the sync; `removed`: the sync created the partition; `skipped`: see `reason`. */
  readonly action: "rolled back" | "removed" | "skipped";
  /** The run the sync made current. */
  readonly fromRunId: string;
  readonly toRunId?: string;
  readonly reason?: string;
}

/** What `rollbackSync` did. */
export interface SyncRollbackResult {
  readonly syncId: string;
  readonly partitions: readonly SyncRollbackEntry[];
}

/** Checks a run id given on the command line. */
export function checkRunId(table: TableDefinition, runId: string | undefined): void {
  if (runId !== undefined && !isRunId(runId)) {
    throw new InvalidInputError(`'${runId}' is not a run id (YYYYMMDDTHHMMSSZ-xxxxxx); see lakeswap history ${table.name} --partition ...`);
  }
}

/** Moves a partition's pointer back to the newest completed older run, or to `toRunId`; the caller holds the table's lease. */
export async function rollbackPartition(ctx: LakeContext, table: TableDefinition, partition: Partition, toRunId: string | undefined): Promise<RollbackResult> {
  const label = `${table.name}/${partitionPath(partition)}`;
  const current = await ctx.catalog.getPointer(table, partition);
  if (!current) throw new NotFoundError(`partition ${label} has no current run, so there is nothing to roll back`);
  // A writer killed between swap and manifest left the current run without one; record it, so it can be rolled forward to.
  await ensureManifest(ctx, table, current);
  const runs = await listRuns(ctx, table, partition);
  const complete = runs.filter((run) => run.hasManifest && run.files.length > 0);
  let target: string;
  if (toRunId !== undefined) {
    if (toRunId === current.runId) throw new InvalidInputError(`run ${toRunId} is already the current run of ${label}`);
    if (!complete.some((run) => run.runId === toRunId)) {
      throw new NotFoundError(`run ${toRunId} of ${label} does not exist or never completed; runs to choose from: ${complete.map((r) => r.runId).join(", ") || "none"}`);
    }
    target = toRunId;
  } else {
    const newest = complete.filter((run) => run.runId < current.runId).map((run) => run.runId).at(-1);
    if (!newest) throw new NotFoundError(`partition ${label} has no older run to roll back to (current run ${current.runId})`);
    target = newest;
  }
  const manifest = await readManifest(ctx.store, table, partition, target);
  const fence = (): Promise<void> => ctx.leaseCheck(table.name);
  await fence();
  const location = runPrefix(ctx.catalog, table, partition, target);
  await movePointers(ctx.catalog, table, [{ partition, runId: target, location, previousRunId: current.runId, signature: manifest?.signature, kind: "rollback" }], fence);
  return { table: table.name, partition: partitionPath(partition), fromRunId: current.runId, toRunId: target, rows: manifest?.rows };
}

/** One table's share of a sync rollback, under its lease: the moves back are one batch (Glue: 100 per call, every entry checked). */
export async function rollbackMoves(ctx: LakeContext, table: TableDefinition, moves: readonly SyncMove[]): Promise<SyncRollbackEntry[]> {
  const entries: SyncRollbackEntry[] = [];
  const back: { partition: Partition; runId: string; location: string; previousRunId: string; signature?: string }[] = [];
  const removals: Partition[] = [];
  const pointers = new Map((await ctx.catalog.listPointers(table)).map((p) => [partitionPath(p.partition), p]));
  for (const move of moves) {
    const partition = parsePartitionPath(move.partition, table.partitionKeys);
    const skip = (reason: string): void => {
      entries.push({ table: table.name, partition: move.partition, action: "skipped", fromRunId: move.run, reason });
    };
    const current = pointers.get(partitionPath(partition));
    if (move.pending && current?.runId !== move.run && current?.runId === move.previousRun) {
      skip("the sync stopped before it moved this pointer");
      continue;
    }
    if (current?.runId !== move.run) {
      skip(current ? `moved since the sync: run ${current.runId} is current now` : "the partition has no current run any more");
      continue;
    }
    if (move.previousRun === undefined) {
      removals.push(partition);
      entries.push({ table: table.name, partition: move.partition, action: "removed", fromRunId: move.run });
      continue;
    }
    const manifest = await readManifest(ctx.store, table, partition, move.previousRun);
    const files = (await runFiles(ctx, table, partition, move.previousRun)).length;
    if (!manifest || files === 0) {
      skip(`run ${move.previousRun}, current before the sync, no longer exists (garbage-collected?); lakeswap history ${table.name} --partition ${move.partition}`);
      continue;
    }
    back.push({ partition, runId: move.previousRun, location: runPrefix(ctx.catalog, table, partition, move.previousRun), previousRunId: move.run, signature: manifest.signature });
    entries.push({ table: table.name, partition: move.partition, action: "rolled back", fromRunId: move.run, toRunId: move.previousRun });
  }
  const fence = (): Promise<void> => ctx.leaseCheck(table.name);
  await fence();
  if (back.length > 0) await movePointers(ctx.catalog, table, back.map((b) => ({ ...b, kind: "rollback" as const })), fence);
  if (removals.length > 0) await removePointers(ctx.catalog, table, removals, fence);
  return entries;
}
