import type { PointerMove } from "../../catalog/catalog.js";
import { IngestFileConflictError, InvalidInputError, LakeswapError } from "../../model/errors.js";
import { ingestPartitionPrefix, ingestTallyKey, runLocation } from "../layout.js";
import type { HasLakeParts } from "../parts.js";
import { movePointers } from "../commit/move.js";
import { partitionPath, type Partition } from "../../model/partition.js";
import { newRunIdAfter } from "../../model/run-id.js";
import { mapLimited } from "../../shared/map-limited.js";
import { finishRawSignature } from "../../model/signature.js";
import type { SwapContext } from "../commit/swap.js";
import type { TableDefinition } from "../../model/table.js";

/** The signature lanes are summed modulo 2^64, as `finishRawSignature` reduces them. */
const LANE = 1n << 64n;

/** What one collector segment added to one partition of an ingested table: its rows and their signature lane sums. */
export interface SegmentContribution {
  readonly partition: Partition;
  readonly rows: number;
  readonly upper: string;
  readonly lower: string;
}

/**
 * An ingested partition's tally: the rows and lane sums of every segment counted in it, and, for each collector
 * (a write-ahead log's id), the last segment counted. Segments of one collector are registered in order, so a
 * segment whose number is not above its collector's last is already counted: registering it again adds nothing.
 */
interface Tally {
  readonly format: 1;
  readonly rows: number;
  readonly upper: string;
  readonly lower: string;
  readonly counted: Readonly<Record<string, number>>;
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

/** Files of one ingested segment stored at the same time. */
const INGEST_FILES_AT_ONCE = 64;

/**
 * Stores the files of one segment of an ingested table, one per partition at `<table>/<partition>/<fileId>.parquet`,
 * each exactly once and a few at a time (on S3 the store's upload limit decides how many requests are in flight):
 * a retry after a crash finds an object there and checks that it holds the same rows (its footer's count).
 */
export async function storeIngestedFiles(
  lake: HasLakeParts,
  tableName: string,
  files: readonly { readonly partition: Partition; readonly fileId: string; readonly file: string; readonly rows: number }[],
): Promise<void> {
  const { store, landing } = lake.parts;
  const table = await lake.parts.table(tableName);
  if (!table.ingest) throw new LakeswapError("CONFLICT", `table '${table.name}' is not an ingested table; events cannot be written to it`);
  await mapLimited(files, INGEST_FILES_AT_ONCE, async ({ partition, fileId, file, rows }) => {
    if (!/^[A-Za-z0-9_-]{1,128}$/.test(fileId)) throw new InvalidInputError(`'${fileId}' is not a segment file id (letters, digits, '_', '-')`);
    const key = `${ingestPartitionPrefix(table, partition)}${fileId}.parquet`;
    if (await store.putFileIfAbsent(key, file)) return;
    const [existing] = await store.list(key);
    const [found] = existing ? await landing.countFileRows([{ key, size: existing.size }]) : [undefined];
    if (found !== rows) {
      throw new IngestFileConflictError(
        `${store.description}/${key} already exists with ${found ?? "unreadable"} rows, not the ${rows} this segment holds; two collectors may share one write-ahead log id`,
        `${store.description}/${key}`,
      );
    }
  });
}

/** Registers what one segment added to an ingested table (tallies, then pointers with signatures), under the table's lease. */
export async function registerIngested(lake: HasLakeParts, tableName: string, segment: SegmentId, contributions: readonly SegmentContribution[]): Promise<RegisteredPartition[]> {
  const table = await lake.parts.table(tableName);
  return lake.parts.withLease(table.name, `ingest ${table.name}`, () => registerSegment(lake.parts, table, segment, contributions));
}

/**
 * Registers what one segment added to an ingested table, under the table's lease (the caller holds it):
 * first each partition's tally (rows and lane sums, with the segment counted once, whatever is retried), then
 * the pointers, carrying each partition's signature, through the outbox in the catalog's batches (Glue:
 * BatchCreatePartition for new partitions, BatchUpdatePartition for known ones). A process killed at any
 * step leaves a state the next registration of the same segment finishes: a tally already counted is not
 * added again, and a pointer behind its tally is moved.
 */
async function registerSegment(
  ctx: SwapContext,
  table: TableDefinition,
  segment: SegmentId,
  contributions: readonly SegmentContribution[],
): Promise<RegisteredPartition[]> {
  if (!table.ingest) throw new LakeswapError("CONFLICT", `table '${table.name}' is not an ingested table; events cannot be registered in it`);
  await ctx.leaseCheck(table.name);
  const tallied = await mapLimited(contributions, 8, async (contribution) => {
    const key = ingestTallyKey(table.name, contribution.partition);
    // The partition's tally and its registration, read together (a few partitions at a time, each read once).
    const [before, current] = await Promise.all([readTally(ctx, key), ctx.catalog.getPointer(table, contribution.partition)]);
    const alreadyCounted = (before.counted[segment.collector] ?? -1) >= segment.sequence;
    const tally: Tally = alreadyCounted
      ? before
      : {
          format: 1,
          rows: before.rows + contribution.rows,
          upper: ((BigInt(before.upper) + BigInt(contribution.upper)) % LANE).toString(),
          lower: ((BigInt(before.lower) + BigInt(contribution.lower)) % LANE).toString(),
          counted: { ...before.counted, [segment.collector]: segment.sequence },
        };
    if (!alreadyCounted) await ctx.store.put(key, `${JSON.stringify(tally)}\n`);
    return { contribution, tally, alreadyCounted, current };
  });
  const moves: PointerMove[] = [];
  const results: RegisteredPartition[] = [];
  for (const { contribution, tally, alreadyCounted, current } of tallied) {
    const signature = finishRawSignature(table.columns, tally.rows, BigInt(tally.upper), BigInt(tally.lower));
    results.push({ partition: partitionPath(contribution.partition), rows: tally.rows, signature, created: current === undefined, alreadyCounted });
    if (current?.signature === signature) continue;
    const runId = newRunIdAfter(current?.runId);
    moves.push({ partition: contribution.partition, runId, location: runLocation(ctx.catalog, table, contribution.partition, runId), previousRunId: current?.runId, signature, kind: "swap" });
  }
  if (moves.length === 0) return results;
  // Recorded before it is sent: a collector killed from here on leaves registrations the next lake open finishes.
  const entry = await ctx.outbox.record(
    table.name,
    moves.map((move) => ({ partition: partitionPath(move.partition), runId: move.runId, previousRunId: move.previousRunId, signature: move.signature, kind: move.kind })),
  );
  await movePointers(ctx.catalog, table, moves, () => ctx.leaseCheck(table.name));
  await ctx.outbox.acknowledge(entry);
  return results;
}

async function readTally(ctx: SwapContext, key: string): Promise<Tally> {
  const object = await ctx.store.get(key);
  if (!object) return { format: 1, rows: 0, upper: "0", lower: "0", counted: {} };
  try {
    const tally = JSON.parse(new TextDecoder().decode(object.body)) as Tally;
    if (typeof tally.rows !== "number" || typeof tally.upper !== "string" || typeof tally.lower !== "string" || typeof tally.counted !== "object") throw new Error("missing fields");
    return tally;
  } catch (error) {
    throw new LakeswapError(
      "STORE_ERROR",
      `the ingest tally ${key} is not readable (${(error as Error).message}); its partition's signature cannot be kept. restore it from a backup (the partition's files themselves are intact and readable)`,
    );
  }
}
