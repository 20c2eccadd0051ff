import type { PointerMove } from "../../catalog/catalog.js";
import { parsePartitionPath, type Partition } from "../../model/partition.js";
import type { TableDefinition } from "../../model/table.js";
import { mapLimited } from "../../shared/map-limited.js";
import type { RunManifest } from "../manifest.js";
import type { OutboxEntry } from "../outbox.js";
import { currentPointers, readManifest, runFileNames, runPrefix, runsStillThere, writeManifest } from "../runs.js";
import { movePointers } from "./move.js";
import { parseSyncRecord, syncRecordKey } from "../sync-record.js";
import type { SwapContext } from "./swap.js";

/** Manifests written at once. */
const IO_CONCURRENCY = 16;

/**
 * An empty run (`--allow-empty`, an emptied upsert partition): on S3 it has no object at all, so its files cannot
 * prove it exists. An outbox entry is written only after its runs were audited, and its manifest saying 0 rows
 * and no files is that proof: the run is complete, and as legitimate a target as any.
 */
function recordedEmpty(manifest: RunManifest | undefined): boolean {
  return manifest !== undefined && manifest.rows === 0 && manifest.files.length === 0;
}

/**
 * Finishes the pointer moves of one outbox entry a dead writer recorded but
 * never confirmed, under the table's lease. A move is applied if the pointer
 * is still where the writer left it (or already moved, where its state may
 * not have been written); if it moved on since, the move is stale and dropped.
 */
async function replayEntry(ctx: SwapContext, table: TableDefinition | undefined, entry: OutboxEntry): Promise<{ applied: number; stale: number }> {
  if (!table) {
    await ctx.outbox.acknowledge(entry);
    return { applied: 0, stale: 0 };
  }
  // Moves in a layout the table does not read: a new one whose writer died before it switched to it (abandoned: the
  // next change of partition keys builds another), or the one the table was switched away from since.
  if (entry.layout !== table.layout) {
    await ctx.outbox.acknowledge(entry);
    return { applied: 0, stale: entry.moves.length };
  }
  // Part of a held sync's publication that never committed (killed before its record said so): nothing of it moves.
  if (entry.publish !== undefined && !(await publicationCommitted(ctx, entry.publish))) {
    await ctx.outbox.acknowledge(entry);
    return { applied: 0, stale: entry.moves.length };
  }
  const partitions = entry.moves.map((move) => parsePartitionPath(move.partition, table.partitionKeys));
  const currents = await currentPointers(ctx, table, partitions);
  // The runs of the moves whose pointer is still where the writer left it, looked for at once.
  const waiting = entry.moves.flatMap((move, i) => (currents.get(move.partition)?.runId === move.previousRunId && move.runId !== move.previousRunId ? [i] : []));
  const found = await runsStillThere(ctx, table, waiting.map((i) => ({ partition: partitions[i]!, runId: entry.moves[i]!.runId, recordedEmpty: recordedEmpty(entry.moves[i]!.manifest) })));
  const there = new Set(waiting.filter((_, k) => found[k]));
  const apply: PointerMove[] = [];
  const manifests: { partition: Partition; manifest: RunManifest }[] = [];
  let stale = 0;
  for (const [index, move] of entry.moves.entries()) {
    const partition = partitions[index] as Partition;
    const current = currents.get(move.partition);
    const location = runPrefix(ctx.catalog, table, partition, move.runId);
    const names = move.manifest ? runFileNames(location, move.manifest.files) : undefined;
    const pointerMove: PointerMove = { partition, runId: move.runId, location, previousRunId: move.previousRunId, signature: move.signature, kind: move.kind, runFiles: names };
    if (current?.runId === move.runId) {
      // Moved already; its pointer state may be missing (killed between the move and the state): set it again.
      if (current.signature !== move.signature || current.previousRunId !== move.previousRunId || current.movedBy !== move.kind) apply.push(pointerMove);
    } else if (there.has(index)) {
      apply.push(pointerMove);
    } else {
      stale += 1;
      continue;
    }
    if (move.manifest) manifests.push({ partition, manifest: move.manifest });
  }
  if (apply.length > 0) await movePointers(ctx.catalog, table, apply, () => ctx.leaseCheck(table.name));
  await mapLimited(manifests, IO_CONCURRENCY, async ({ partition, manifest }) => {
    if (!(await readManifest(ctx.store, table, partition, manifest.runId))) await writeManifest(ctx.store, table, partition, manifest);
  });
  await ctx.outbox.acknowledge(entry);
  return { applied: entry.moves.length - stale, stale };
}

/** Whether held sync `syncId`'s publication committed: its record says it is being (or was) published. */
async function publicationCommitted(ctx: SwapContext, syncId: string): Promise<boolean> {
  const stored = await ctx.store.get(syncRecordKey(syncId));
  const status = stored ? parseSyncRecord(stored.body)?.held?.status : undefined;
  return status === "publishing" || status === "published";
}

/** Replays `entries` of one table (whose lease the caller holds), oldest first. */
export async function replayEntries(ctx: SwapContext, table: TableDefinition | undefined, entries: readonly OutboxEntry[]): Promise<{ applied: number; stale: number }> {
  let applied = 0;
  let stale = 0;
  for (const entry of entries) {
    const result = await replayEntry(ctx, table, entry);
    applied += result.applied;
    stale += result.stale;
  }
  return { applied, stale };
}
