import type { Pointer, PointerMove } from "../../catalog/catalog.js";
import { IngestFileConflictError, InvalidInputError, LakeswapError } from "../../model/errors.js";
import { ingestPartitionPrefix, runLocation } from "../layout.js";
import type { HasLakeParts } from "../parts.js";
import { movePointers } from "../commit/move.js";
import { partitionPath, type Partition } from "../../model/partition.js";
import { newRunIdAfter } from "../../model/run-id.js";
import { mapLimited } from "../../shared/map-limited.js";
import { faultPoint } from "../../shared/faults.js";
import { finishRawSignature } from "../../model/signature.js";
import type { SwapContext } from "../commit/swap.js";
import { ingestedInPlace, type TableDefinition } from "../../model/table.js";
import { readTally, writeTally, type Tally } from "../ingest-tally.js";

/** The signature lanes are summed modulo 2^64, as `finishRawSignature` reduces them. */
const LANE = 1n << 64n;

/** What one collector segment added to one partition of an ingested table: its rows, their signature lane sums, and its file. */
export interface SegmentContribution {
  readonly partition: Partition;
  readonly rows: number;
  readonly upper: string;
  readonly lower: string;
  /** The segment's Parquet file of this partition (a local path) and its id, stored in the partition's run; absent: counted only. */
  readonly file?: { readonly fileId: string; readonly path: string };
}

/** One segment of one collector: `collector` is the write-ahead log's id, `sequence` the segment's number in it. */
export interface SegmentId {
  readonly collector: string;
  readonly sequence: number;
}

/** What registering a segment did to each partition it touched. */
export interface RegisteredPartition {
  readonly partition: string;
  readonly rows: number;
  readonly signature: string;
  /** The catalog learned of the partition now (Glue: BatchCreatePartition); false: its registration was updated. */
  readonly created: boolean;
  /** The segment was counted already (a retry after a crash): nothing was added. */
  readonly alreadyCounted: boolean;
}

/** Partitions of one segment read, stored and counted at the same time. */
const PARTITIONS_AT_ONCE = 16;

/**
 * Registers what one segment added to an ingested table, under the table's lease: each partition's file stored in the
 * partition's run (or its folder, in a table from before runs), then each tally, then the pointers.
 */
export async function registerIngested(lake: HasLakeParts, tableName: string, segment: SegmentId, contributions: readonly SegmentContribution[]): Promise<RegisteredPartition[]> {
  const table = await lake.parts.table(tableName);
  if (!table.ingest) throw new LakeswapError("CONFLICT", `table '${table.name}' is not an ingested table; events cannot be written to it`);
  return lake.parts.withLease(table.name, `ingest ${table.name}`, () => registerSegment(lake.parts, table, segment, contributions));
}

/** A partition's state before a segment is counted in it. */
interface Counting {
  readonly contribution: SegmentContribution;
  readonly before: Tally;
  readonly current: Pointer | undefined;
  readonly alreadyCounted: boolean;
  /** The run the partition's files are in (runs layout), or undefined (files in the partition's folder). */
  readonly run: string | undefined;
}

/**
 * Registers what one segment added to an ingested table, under the table's lease (the caller holds it): first each
 * partition's file, stored exactly once in the run the tally names (a new one for a new partition), then each tally
 * (rows and lane sums, with the segment counted once, whatever is retried), then the pointers, carrying each
 * partition's signature, through the outbox in the catalog's batches (Glue: BatchCreatePartition for new partitions,
 * BatchUpdatePartition for known ones). A segment already counted in a partition stores nothing there: its rows may
 * have been compacted into another run since. A process killed at any step leaves a state the next registration of
 * the same segment finishes: a file stored already is found (with the same rows), a tally already counted is not
 * added again, and a pointer behind its tally is moved.
 */
async function registerSegment(ctx: SwapContext, table: TableDefinition, segment: SegmentId, contributions: readonly SegmentContribution[]): Promise<RegisteredPartition[]> {
  await ctx.leaseCheck(table.name);
  const counting = await mapLimited(contributions, PARTITIONS_AT_ONCE, async (contribution): Promise<Counting> => {
    // The partition's tally and its registration, read together (each read once).
    const [before, current] = await Promise.all([readTally(ctx.store, table.name, contribution.partition), ctx.catalog.getPointer(table, contribution.partition)]);
    const alreadyCounted = (before.counted[segment.collector] ?? -1) >= segment.sequence;
    const run = ingestedInPlace(table) ? undefined : (before.run ?? current?.runId ?? newRunIdAfter(undefined));
    if (!alreadyCounted && contribution.file) await storeFile(ctx, table, contribution, run);
    return { contribution, before, current, alreadyCounted, run };
  });
  faultPoint("ingest-after-upload");
  const now = new Date().toISOString();
  const tallied = await mapLimited(counting, PARTITIONS_AT_ONCE, async (c) => {
    const { contribution, before } = c;
    const tally: Tally = c.alreadyCounted
      ? before
      : {
          format: 1,
          rows: before.rows + contribution.rows,
          upper: ((BigInt(before.upper) + BigInt(contribution.upper)) % LANE).toString(),
          lower: ((BigInt(before.lower) + BigInt(contribution.lower)) % LANE).toString(),
          counted: { ...before.counted, [segment.collector]: segment.sequence },
          ...(c.run !== undefined ? { run: c.run, since: before.run === c.run ? before.since : now } : {}),
          at: now,
        };
    if (!c.alreadyCounted) await writeTally(ctx.store, table.name, contribution.partition, tally);
    return { ...c, tally };
  });
  const moves: PointerMove[] = [];
  const results: RegisteredPartition[] = [];
  for (const { contribution, tally, alreadyCounted, current, run } of tallied) {
    const signature = finishRawSignature(table.columns, tally.rows, BigInt(tally.upper), BigInt(tally.lower));
    results.push({ partition: partitionPath(contribution.partition), rows: tally.rows, signature, created: current === undefined, alreadyCounted });
    const move = pointerMove(ctx, table, contribution.partition, current, run, signature);
    if (move) moves.push(move);
  }
  await movePointersRecorded(ctx, table, moves);
  return results;
}

/**
 * Where an ingested partition's pointer goes for `signature`: to the tally's run (which it already names, but for a
 * process killed between the tally and the pointer), or, in a table from before runs, to a new registration id;
 * undefined when the pointer is there already.
 */
export function pointerMove(ctx: SwapContext, table: TableDefinition, partition: Partition, current: Pointer | undefined, run: string | undefined, signature: string): PointerMove | undefined {
  if (current?.signature === signature && (run === undefined || current.runId === run)) return undefined;
  const runId = run ?? newRunIdAfter(current?.runId);
  const previousRunId = current?.runId === runId ? current.previousRunId : current?.runId;
  return { partition, runId, location: runLocation(ctx.catalog, table, partition, runId), previousRunId, signature, kind: "swap" };
}

/** Moves pointers through the outbox: recorded before they are sent, so a process killed from there on leaves moves the next lake open finishes. */
export async function movePointersRecorded(ctx: SwapContext, table: TableDefinition, moves: readonly PointerMove[]): Promise<void> {
  if (moves.length === 0) return;
  const entry = await ctx.outbox.record(
    table,
    moves.map((move) => ({ partition: partitionPath(move.partition), runId: move.runId, previousRunId: move.previousRunId, signature: move.signature, kind: move.kind })),
  );
  await movePointers(ctx.catalog, table, moves, () => ctx.leaseCheck(table.name));
  await ctx.outbox.acknowledge(entry);
}

/**
 * Stores a segment's file of one partition exactly once, at `<run location><fileId>.parquet` (or in the partition's
 * folder, in a table from before runs): a retry after a crash finds an object there and checks that it holds the same
 * rows (its footer's count).
 */
async function storeFile(ctx: SwapContext, table: TableDefinition, contribution: SegmentContribution, run: string | undefined): Promise<void> {
  const { partition, file, rows } = contribution;
  if (!file) return;
  if (!/^[A-Za-z0-9_-]{1,128}$/.test(file.fileId)) throw new InvalidInputError(`'${file.fileId}' is not a segment file id (letters, digits, '_', '-')`);
  const prefix = run === undefined ? ingestPartitionPrefix(table, partition) : runLocation(ctx.catalog, table, partition, run);
  const key = `${prefix}${file.fileId}.parquet`;
  if (await ctx.store.putFileIfAbsent(key, file.path)) return;
  const [existing] = await ctx.store.list(key);
  const [found] = existing ? await ctx.landing.countFileRows([{ key, size: existing.size }]) : [undefined];
  if (found !== rows) {
    throw new IngestFileConflictError(
      `${ctx.store.description}/${key} already exists with ${found ?? "unreadable"} rows, not the ${rows} this segment holds; two collectors may share one write-ahead log id`,
      `${ctx.store.description}/${key}`,
    );
  }
}
