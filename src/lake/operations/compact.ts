import type { Pointer } from "../../catalog/catalog.js";
import { InvalidInputError, LakeswapError, RunTakenError } from "../../model/errors.js";
import { partitionPath, type Partition } from "../../model/partition.js";
import { newRunIdAfter, runIdTime } from "../../model/run-id.js";
import { finishRawSignature } from "../../model/signature.js";
import { ingestedInPlace, type TableDefinition } from "../../model/table.js";
import { faultPoint } from "../../shared/faults.js";
import { isScratchTable } from "../scratch-tables.js";
import { readTally, writeTally, type Tally } from "../ingest-tally.js";
import { runLocation } from "../layout.js";
import { partitionOf, type HasLakeParts, type LakeParts, type PartitionInput } from "../parts.js";
import { listRunFiles, type RunFile } from "../runs.js";
import type { StagedCompaction } from "../../landing/landing.js";
import { movePointersRecorded, pointerMove } from "./register-segment.js";
import type { ProgressListener } from "./gc.js";

/** A partition is closed once nothing was added to it for this long (`--older-than`). */
export const DEFAULT_COMPACT_OLDER_THAN_MS = 2 * 3600_000;

/** About how large each compacted file grows (`--target-size`): Athena reads files of this order best. */
export const DEFAULT_COMPACT_FILE_BYTES = 128 * 1024 * 1024;

/** How often a partition that got new events while it was compacted is compacted again before it is left for the next run. */
const ATTEMPTS = 3;

/** What compaction did, or would do, to one partition. */
export interface PartitionCompaction {
  readonly table: string;
  readonly partition: string;
  readonly status: "compacted" | "would compact" | "skipped" | "refused";
  /** Why a partition was skipped or refused. */
  readonly reason?: string;
  /** The run's files and bytes before. */
  readonly files: number;
  readonly bytes: number;
  readonly rows: number;
  /** The new run's files and bytes (compacted). */
  readonly filesAfter?: number;
  readonly bytesAfter?: number;
  readonly runId?: string;
  readonly previousRunId?: string;
}

export interface CompactOptions {
  /** Only these partitions (of a named table). */
  readonly partitions?: readonly PartitionInput[];
  readonly olderThanMs?: number;
  readonly fileBytes?: number;
  readonly dryRun?: boolean;
  readonly now?: () => Date;
  readonly onProgress?: ProgressListener;
}

/**
 * Compacts the closed partitions of ingested tables (one, or every one that keeps runs): each partition whose run
 * holds more files than its bytes need is rewritten into a new run of files of about `fileBytes`, checked to carry
 * the partition's signature, and its pointer moved to it by the same swap as every other write. Events that arrive
 * meanwhile make the partition's compaction start over (a few times), and those that arrive later land in the new run.
 */
export async function compactTables(lake: HasLakeParts, tableName: string | undefined, options: CompactOptions = {}): Promise<PartitionCompaction[]> {
  const parts = lake.parts;
  const tables = tableName !== undefined ? [await parts.table(tableName)] : (await parts.catalog.listTables()).filter((t) => t.ingest && !isScratchTable(t.name));
  const reports: PartitionCompaction[] = [];
  for (const table of tables) {
    if (!table.ingest) throw new InvalidInputError(`table '${table.name}' is not an ingested table: compaction rewrites the many small files lakeswap serve and lakeswap ingest add; other tables are rewritten whole by each build`);
    if (ingestedInPlace(table)) {
      const why = `ingested by a lakeswap from before ingested tables kept runs: its files sit in its partitions' own folders, and moving readers to compacted files could not be one atomic step`;
      if (tableName !== undefined) throw new LakeswapError("CONFLICT", `table '${table.name}' was ${why}; events ingested into a new table are compactable`);
      reports.push({ table: table.name, partition: "", status: "skipped", reason: `the table was ${why}`, files: 0, bytes: 0, rows: 0 });
      continue;
    }
    const wanted = options.partitions?.map((p) => partitionPath(partitionOf(table, p, true)));
    const pointers = (await parts.catalog.listPointers(table)).filter((p) => wanted === undefined || wanted.includes(partitionPath(p.partition)));
    for (const missing of (wanted ?? []).filter((path) => !pointers.some((p) => partitionPath(p.partition) === path))) {
      throw new InvalidInputError(`table '${table.name}' has no partition ${missing}; lakeswap tables ${table.name} lists its partitions`);
    }
    for (const [index, pointer] of pointers.entries()) {
      options.onProgress?.({ done: index, total: pointers.length, label: `${table.name}/${partitionPath(pointer.partition)}` });
      reports.push(await compactPartition(parts, table, pointer.partition, options));
    }
  }
  return reports;
}

/** Compacts one partition, starting over while new events arrive during its rewrite. */
async function compactPartition(parts: LakeParts, table: TableDefinition, partition: Partition, options: CompactOptions): Promise<PartitionCompaction> {
  let last: PartitionCompaction | undefined;
  for (let attempt = 1; attempt <= ATTEMPTS; attempt += 1) {
    const outcome = await compactOnce(parts, table, partition, options);
    if (outcome !== "changed") return outcome;
    last = { table: table.name, partition: partitionPath(partition), status: "skipped", reason: `events arrived while it was compacted, ${ATTEMPTS} times: compact it again once it is closed`, files: 0, bytes: 0, rows: 0 };
  }
  return last as PartitionCompaction;
}

/** One attempt: read the run, rewrite it aside, check its signature, then (under the lease, nothing added since) swap. */
async function compactOnce(parts: LakeParts, table: TableDefinition, partition: Partition, options: CompactOptions): Promise<PartitionCompaction | "changed"> {
  const path = partitionPath(partition);
  const now = options.now?.() ?? new Date();
  const [tally, found] = await Promise.all([readTally(parts.store, table.name, partition), parts.catalog.getPointer(table, partition)]);
  const pointer = options.dryRun ? found : await followTally(parts, table, partition, tally, found);
  const run = tally.run ?? pointer?.runId;
  if (run === undefined || !pointer) return { table: table.name, partition: path, status: "skipped", reason: "nothing is registered in it", files: 0, bytes: 0, rows: 0 };
  const files = await listRunFiles(parts.store, runLocation(parts.catalog, table, partition, run));
  const bytes = files.reduce((sum, f) => sum + f.size, 0);
  const base = { table: table.name, partition: path, files: files.length, bytes, rows: tally.rows };
  const fileBytes = options.fileBytes ?? DEFAULT_COMPACT_FILE_BYTES;
  const skip = skipReason(tally, pointer, files, bytes, fileBytes, now, options.olderThanMs ?? DEFAULT_COMPACT_OLDER_THAN_MS);
  if (skip !== undefined) return { ...base, status: "skipped", reason: skip };
  const runId = newRunIdAfter(run, now);
  if (options.dryRun) return { ...base, status: "would compact", runId, previousRunId: run };
  const staged = await parts.landing.compactRun({ table, files: files.map((f) => f.key), runId, runPrefix: runLocation(parts.catalog, table, partition, runId), fileBytes });
  const expected = finishRawSignature(table.columns, tally.rows, BigInt(tally.upper), BigInt(tally.lower));
  const written = finishRawSignature(table.columns, staged.rows, BigInt(staged.lanes.upper), BigInt(staged.lanes.lower));
  const refusal = written === expected ? undefined : await signedAgain(staged, tally).catch(async (error: unknown) => {
    await staged.discard();
    throw error;
  });
  if (refusal !== undefined) {
    await staged.discard();
    // A landing in flight stores its file before it counts it (both under the lease): the file read beside a tally
    // that does not count it yet is that landing's, once the tally has changed since.
    if (!sameTally(await parts.withLease(table.name, `compact ${table.name}`, () => readTally(parts.store, table.name, partition)), tally)) return "changed";
    const reason =
      `its ${files.length} files hold ${staged.rows} rows with signature ${written}, and its tally counts ${tally.rows} rows with signature ${expected}: ` +
      `${refusal}; nothing was compacted`;
    return { ...base, status: "refused", reason };
  }
  // Placed before the lease (an upload may take a while; collectors wait for the lease): a run nothing names yet,
  // which GC removes after the grace window if this process dies before it is named.
  const placed = await staged.place().catch((error: unknown) => {
    // Another compaction of the partition issued the same run id (it read the same run): this one starts over, with a new id.
    if (error instanceof RunTakenError) return "taken" as const;
    throw error;
  });
  if (placed === "taken") return "changed";
  faultPoint("compact-after-place");
  const swapped = await parts.withLease(table.name, `compact ${table.name}`, async () => {
    await parts.leaseCheck(table.name);
    const [latest, current] = await Promise.all([readTally(parts.store, table.name, partition), parts.catalog.getPointer(table, partition)]);
    if (!sameTally(latest, tally)) return false;
    await writeTally(parts.store, table.name, partition, { ...latest, upper: staged.lanes.upper, lower: staged.lanes.lower, run: runId, since: new Date().toISOString() });
    faultPoint("compact-after-tally");
    const move = pointerMove(parts, table, partition, current, runId, written);
    await movePointersRecorded(parts, table, move ? [move] : []);
    faultPoint("compact-after-move");
    return true;
  });
  if (!swapped) {
    await parts.store.delete(placed.map((f) => f.key));
    return "changed";
  }
  const resigned = written === expected ? {} : { reason: "signed again under the table's columns: its files were written before columns were added to the table" };
  return { ...base, status: "compacted", ...resigned, filesAfter: placed.length, bytesAfter: placed.reduce((sum, f) => sum + f.size, 0), runId, previousRunId: run };
}

/**
 * Why a compaction whose files do not sign as the partition's tally is refused, or undefined where it goes on: a
 * day whose segments were counted under fewer columns (columns were added to the table since) is checked file by file
 * under each file's own columns against the tally, and the compacted files against the sources read under the table's
 * columns; it is then signed again, under the table's columns (its content is the same; its signature was summed
 * over segments of different columns).
 */
async function signedAgain(staged: StagedCompaction, tally: Tally): Promise<string | undefined> {
  const { asWritten, asDeclared } = await staged.signSources();
  if (asWritten.rows !== tally.rows || asWritten.upper !== tally.upper || asWritten.lower !== tally.lower) {
    return "a landing may have been interrupted (the collector finishes it when it restarts), or files were changed by hand";
  }
  if (asDeclared.rows !== staged.rows || asDeclared.upper !== staged.lanes.upper || asDeclared.lower !== staged.lanes.lower) {
    return "the compacted files do not hold the rows of the files they were written from";
  }
  return undefined;
}

/**
 * A pointer behind its tally's run (a compaction killed between writing the tally and moving the pointer) is moved to
 * it first, under the lease: the tally is written first, so it names the run whose files it counts.
 */
async function followTally(parts: LakeParts, table: TableDefinition, partition: Partition, tally: Tally, pointer: Pointer | undefined): Promise<Pointer | undefined> {
  if (tally.run === undefined || pointer === undefined || pointer.runId === tally.run) return pointer;
  return parts.withLease(table.name, `compact ${table.name}`, async () => {
    const [latest, current] = await Promise.all([readTally(parts.store, table.name, partition), parts.catalog.getPointer(table, partition)]);
    const move = pointerMove(parts, table, partition, current, latest.run, finishRawSignature(table.columns, latest.rows, BigInt(latest.upper), BigInt(latest.lower)));
    await movePointersRecorded(parts, table, move ? [move] : []);
    return parts.catalog.getPointer(table, partition);
  });
}

/** Why a partition is left as it is: still open, or compact already. Undefined: compact it. */
function skipReason(tally: Tally, pointer: Pointer, files: readonly RunFile[], bytes: number, fileBytes: number, now: Date, olderThanMs: number): string | undefined {
  const last = tally.at !== undefined ? Date.parse(tally.at) : runIdTime(pointer.runId).getTime();
  const quiet = now.getTime() - last;
  if (quiet < olderThanMs) return `open: events were added ${Math.max(0, Math.round(quiet / 60_000))} min ago (closed after ${Math.round(olderThanMs / 60_000)} min without new events; --older-than)`;
  const needed = Math.max(1, Math.ceil(bytes / fileBytes));
  if (files.length <= needed) return files.length === 1 ? "compact already: one file" : `compact already: ${files.length} files for ${bytes} bytes`;
  return undefined;
}

/** Whether nothing was counted in a partition since `before` was read (and its run is the same). */
function sameTally(after: Tally, before: Tally): boolean {
  return after.rows === before.rows && after.upper === before.upper && after.lower === before.lower && after.run === before.run && JSON.stringify(after.counted) === JSON.stringify(before.counted);
}
