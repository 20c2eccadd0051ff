import { createHash } from "node:crypto";
import type { DatasetConfig, PipelineColumn } from "../config/pipeline-config.js";
import type { TableSnapshot } from "../engine/engine.js";
import type { LandRequest, LandedDelivery, LandedPart, LandingSummary, RejectedFile } from "../landing/landing.js";
import type { LakeWriter, PartitionState } from "../lake/lake.js";
import { identifyDelivery, keepLandingSummary, landingSummary } from "../lake/operations/deliveries.js";
import { partitionStates, runManifest } from "../lake/operations/partition-states.js";
import { InvalidInputError, errorMessage } from "../model/errors.js";
import { partitionPath, type Partition } from "../model/partition.js";
import { SIGNATURE_VERSION } from "../model/signature.js";
import { quoteLiteral, quoteRelation } from "../model/sql.js";
import { defineTable, type TableDefinition } from "../model/table.js";
import type { FetchedSource } from "../sources/source.js";
import { emptyDays, fetchedDataset, windowDays } from "./lookback.js";
import type { PipelineContext } from "./pipeline-context.js";
import { planChoices } from "./pipeline-context.js";
import { grownKey, outsideLookback, planRaw, type Appending, type GrownPart, type PlannedPartition } from "./plan.js";
import type { AppendedFile } from "../lake/manifest.js";
import { appendByDifference, type CurrentRuns, type DifferenceCandidate } from "./append-difference.js";
import { loadReport, type LoadReport } from "./sync-report.js";
import type { SyncLog } from "./sync-log.js";

/** The version of what a landing summary holds; a change lands every delivery anew (2: an append's parts per file). */
const LANDING_SUMMARY_VERSION = 2;

/** The columns of a dead-letter table; partitioned by delivery (an append's: by file) so a rerun replaces its own bad rows. */
const DEAD_LETTER_COLUMNS: readonly PipelineColumn[] = [
  { name: "dataset", type: "VARCHAR", nullable: false },
  { name: "file", type: "VARCHAR", nullable: true },
  { name: "line", type: "BIGINT", nullable: true },
  { name: "reason", type: "VARCHAR", nullable: false },
  { name: "raw", type: "VARCHAR", nullable: true },
];

/** The delivery's files as the dataset or `--input` names them (paths come resolved: by the config, or by the command). */
function patterns(ctx: PipelineContext, dataset: DatasetConfig): string[] {
  if (dataset.fetchedFiles) return dataset.fetchedFiles.map((f) => f.file);
  return ctx.options.inputs?.length ? [...ctx.options.inputs] : [dataset.source.path];
}

/**
 * The key a delivery's landing summary is kept under, and the summary when a clean one was kept: the same delivery
 * again (same bytes, same declaration) is planned from what its landing found.
 */
export async function knownDelivery(ctx: PipelineContext, dataset: DatasetConfig): Promise<{ key?: string; summary?: LandingSummary }> {
  const key = await deliveryKey(ctx, dataset);
  if (key === undefined) return {};
  const summary = await landingSummary(ctx.lake, dataset.table, key);
  return { key, summary: summary && summary.rowsRejected === 0 ? summary : undefined };
}

/**
 * The delivery's id (a digest of its files' names and bytes) with everything that decides what landing finds in
 * it (format, columns, partition expressions, signed columns, the signature version). Undefined with
 * --full-refresh, which lands anew.
 */
async function deliveryKey(ctx: PipelineContext, dataset: DatasetConfig): Promise<string | undefined> {
  // An upsert merges the delivery into what the table holds now, which may have changed since: it is landed every time.
  if (ctx.options.fullRefresh || dataset.upsert) return undefined;
  // Named with the request it is landed with if it is not known: what landing reads first is read while it is hashed.
  const { id } = await identifyDelivery(ctx.lake, patterns(ctx, dataset), dataset.table, landRequest(ctx, dataset, false));
  const declaration = JSON.stringify({
    landing: LANDING_SUMMARY_VERSION,
    signature: SIGNATURE_VERSION,
    id,
    source: { format: dataset.source.format, header: dataset.source.header, delimiter: dataset.source.delimiter },
    columns: dataset.columns,
    partition: dataset.partition,
    signed: dataset.signatureColumns,
  });
  return createHash("sha256").update(declaration).digest("hex").slice(0, 32);
}

/** Keeps what landing found; failing to is only a warning (the next sync of the same delivery reads it again). */
export async function keepSummary(ctx: PipelineContext, dataset: DatasetConfig, key: string, delivery: LandedDelivery): Promise<void> {
  try {
    await keepLandingSummary(ctx.lake, dataset.table, key, delivery);
  } catch (error) {
    process.emitWarning(`could not keep the landing summary of delivery ${delivery.id}: ${errorMessage(error)}; its next sync reads it again`);
  }
}

/**
 * Whether every raw partition of a delivery is expected to be built: a full refresh, or a first load (no partition
 * of the raw table has a run), of every partition (no --partition). Then landing writes the runs' files while it
 * signs the rows. A guess made before the write lease: a partition the plan then skips (another writer built it
 * meanwhile) only has its files dropped.
 */
export async function buildsEveryPartition(ctx: PipelineContext, dataset: DatasetConfig): Promise<boolean> {
  // Append and upsert write other rows than the delivery's partitions (more files, or the merge).
  if (ctx.options.partitions?.length || dataset.write !== "partition_replace") return false;
  if (ctx.options.fullRefresh) return true;
  return [...(await partitionStates(ctx.lake, dataset.table)).values()].every((state) => state.runId === "");
}

/** Lands a dataset's delivery once (read, validate, partition, sign); bad rows without a dead-letter table stop it. */
export async function landDelivery(ctx: PipelineContext, dataset: DatasetConfig, writeAhead = false): Promise<LandedDelivery> {
  const delivery = await ctx.landing.land(landRequest(ctx, dataset, writeAhead));
  if (delivery.rowsRejected > 0 && !dataset.deadLetter) {
    await ctx.landing.releaseLanding(delivery);
    throw badRows(dataset, delivery);
  }
  return delivery;
}

function landRequest(ctx: PipelineContext, dataset: DatasetConfig, writeAhead: boolean): LandRequest {
  return {
    writeAhead: writeAhead ? rawTable(dataset) : undefined,
    files: patterns(ctx, dataset),
    format: dataset.source.format,
    header: dataset.source.header,
    delimiter: dataset.source.delimiter,
    columns: dataset.columns,
    partition: dataset.partition,
    signatureColumns: dataset.signatureColumns,
    // An append recognises each file's part of a partition on its own (a glob that now matches one more file).
    fileParts: dataset.write === "append",
    // An append's file changed lately may be halfway through its last line: held back until it ends. Fetched files are whole.
    ...(dataset.write === "append" && !dataset.fetchedFiles ? { holdUnterminatedSince: Date.now() - UNTERMINATED_QUIET_MS } : {}),
  };
}

/** How long an append's file is unchanged before its last line is taken without a line end (a file written whole without one). */
const UNTERMINATED_QUIET_MS = 60_000;

/** The error of a delivery with bad rows and nowhere to keep them: the first bad row, where it is, and the fix. */
function badRows(dataset: DatasetConfig, delivery: LandedDelivery): InvalidInputError {
  const first = delivery.firstRejects[0];
  // A Parquet row has a number but no line; a CSV record may span lines, and a line may be megabytes long.
  const parquet = dataset.source.format === "parquet";
  // An http source's rows are in files of its own, one per day: the day and the row's number name it.
  const fetchedDay = first ? dataset.fetchedFiles?.find((f) => f.file === first.file)?.partition : undefined;
  const where = !first
    ? "the delivery"
    : fetchedDay !== undefined
      ? `datasets.${dataset.name}: the http source's answer for ${fetchedDay}, row ${first.line}`
      : `${first.file}${first.line === null ? "" : parquet ? ` row ${first.line}` : `:${first.line}`}`;
  const text = first?.raw ? first.raw.replaceAll("\r", "\\r").replaceAll("\n", "\\n") : "";
  const shown = text.length > 120 ? `${text.slice(0, 117)}...` : text;
  const fix = fetchedDay !== undefined ? "Declare the columns as the API sends them" : "Fix the file";
  const formatHint = readingHint(first?.reason ?? "");
  return new InvalidInputError(
    `${where}: ${first?.reason ?? "bad row"}${shown ? ` (${parquet ? "row" : "line"}: ${shown})` : ""}; ${delivery.rowsRejected} bad row(s) in all, nothing was loaded. ` +
      `${fix}, or set dead_letter: <table> under datasets.${dataset.name} to load the rest and keep the bad rows there.${formatHint}`,
  );
}

/**
 * How to read a value written in a local format, for the reason of a bad row: a date or time otherwise than ISO 8601
 * (Jan 1 2000, 01/02/2026 10:00) with strptime, a number with a decimal comma (1,50) with replace. Empty for others.
 */
function readingHint(reason: string): string {
  const date = /^column (\w+): '.*' is not a (date \(YYYY-MM-DD\)|timestamp)/.exec(reason)?.[1];
  if (date) {
    return ` If the files write ${date} in another format, declare it VARCHAR and read it with strptime(${date}, '<format>') (e.g. '%b %d %Y' for Jan 1 2000) in the partition expression and the layers.`;
  }
  const comma = /^column (\w+): '-?[\d.' ]*,\d+' is not a number/.exec(reason)?.[1];
  if (comma) {
    return ` If the files write ${comma} with a decimal comma, declare it VARCHAR and read it with CAST(replace(replace(${comma}, '.', ''), ',', '.') AS DECIMAL(p,s)) in the layers.`;
  }
  return "";
}

/** Upsert: the delivery merged into the table's current runs by key (../landing/landing.ts, `MergeRequest`). */
export async function mergeDelivery(ctx: PipelineContext, dataset: DatasetConfig, delivery: LandedDelivery, current: TableSnapshot): Promise<LandedDelivery> {
  const upsert = dataset.upsert!;
  return ctx.landing.mergeLanded({
    // As the writer holds it, under the lease: runs written before a schema change are read by column name, and where
    // the sync changes the partition keys, the new layout's runs under its definition.
    table: current.table,
    delivery,
    current: current.partitions,
    columns: dataset.columns,
    signatureColumns: dataset.signatureColumns,
    primaryKey: upsert.primaryKey,
    orderBy: upsert.orderBy,
    deleteFlag: upsert.deleteFlag,
    dataset: dataset.name,
  });
}

/**
 * The raw layer's plan (./plan.ts) from a delivery (or the summary kept of it): with the days of the lookback
 * window, the days an http source answered empty, and for append the parts each current run was appended from.
 */
export async function planDelivery(
  ctx: PipelineContext,
  dataset: DatasetConfig,
  delivery: Pick<LandingSummary, "partitions">,
  states: ReadonlyMap<string, PartitionState>,
  fetched: FetchedSource | undefined,
  current?: CurrentRuns,
): Promise<{ plan: PlannedPartition[]; appended: Map<string, Appending> }> {
  const choices = planChoices(ctx.options);
  const window = dataset.window ? new Set(datasetWindow(ctx, dataset)) : undefined;
  const keys = dataset.partition.map((p) => p.key);
  const appendedBefore = new Map<string, readonly string[]>();
  const appendedFilesBefore = new Map<string, readonly AppendedFile[]>();
  if (dataset.write === "append") {
    for (const landed of delivery.partitions.filter((l) => choices.selected(l.partition, keys, dataset))) {
      const partition = partitionPath(landed.partition);
      const state = states.get(partition);
      if (!state?.runId || outsideLookback(dataset, landed.partition, state, window)) continue;
      const manifest = await runManifest(ctx.lake, dataset.table, partition, state.runId);
      appendedBefore.set(partition, manifest?.appended ?? []);
      appendedFilesBefore.set(partition, manifest?.appendedFiles ?? []);
    }
  }
  const landed = "relation" in delivery ? (delivery as LandedDelivery) : undefined;
  const grown = landed && !choices.allowDuplicates ? await grownParts(ctx, dataset, landed, { appendedBefore, appendedFilesBefore, current }) : undefined;
  const badLines = new Map((landed?.rejectedFiles ?? []).map((f) => [f.file, f.lines ?? ("unknown" as const)]));
  return planRaw({ dataset, delivery, states, window, appendedBefore, appendedFilesBefore, grown, badLines, emptyDays: emptyDays(dataset, fetched) }, choices);
}

/**
 * `write: append`: the parts of a landed delivery that its partition does not hold, of a file it holds rows of through
 * some line, whose rows through that line sign as they did then: the file only grew at its end (or a bad row of it was
 * fixed in place: its line's row is left out of both), and its rows after the line (and the fixed ones) are what is
 * new. Else, where the run recorded how many rows it took of the file, whose first that many rows (in line order) sign
 * so: lines without a row (bad or blank ones) were removed or added among them, and the rows after are new. A file
 * rewritten or replaced under the same name signs otherwise both ways; so does one whose good rows were edited in place,
 * or that lost track of its bad lines or its name. A part under another name is split against the records of its first
 * row (a copy, a file renamed or rotated: `AppendedFile.head`). Where its name, its first row or a record of a file gone
 * may be what it continues, its rows the partition does not hold are new, by content (./append-difference.ts); else it
 * is new whole.
 */
async function grownParts(
  ctx: PipelineContext,
  dataset: DatasetConfig,
  delivery: LandedDelivery,
  before: {
    readonly appendedBefore: ReadonlyMap<string, readonly string[]>;
    readonly appendedFilesBefore: ReadonlyMap<string, readonly AppendedFile[]>;
    readonly current?: CurrentRuns;
  },
): Promise<Map<string, GrownPart>> {
  const { appendedBefore, appendedFilesBefore } = before;
  const candidates: GrowthCandidate[] = [];
  const byDifference: DifferenceCandidate[] = [];
  // Parts whose first row another file of the partition has (recorded, or new in this delivery): copies of one another.
  const shared = new Set<string>();
  for (const landed of delivery.partitions) {
    const path = partitionPath(landed.partition);
    const held = new Set(appendedBefore.get(path) ?? []);
    const files = new Map((appendedFilesBefore.get(path) ?? []).map((f) => [f.file, f]));
    if (held.has(landed.signature)) continue;
    const parts = landed.parts ?? [];
    const fresh = parts.filter((p) => !held.has(p.signature) && p.through !== undefined);
    // A part with no record of its own (a file renamed inside the glob, copied, or rotated), or whose own record is of
    // another file (its first row another: a new file under the name), may continue a file recorded under another name.
    const unmatched: LandedPart[] = [];
    for (const part of fresh) {
      const taken = files.get(part.file);
      const own = taken ? growthCandidates(landed.partition, path, part, taken) : [];
      candidates.push(...own);
      const sameFile = taken?.head !== undefined && taken.head === part.head;
      if (own.length === 0 && !sameFile) unmatched.push(part);
    }
    const heldFiles = new Set(parts.filter((p) => held.has(p.signature)).map((p) => p.file));
    const orphans = [...files.values()].filter((f) => !heldFiles.has(f.file));
    // The records such a part may continue: of a file whose first row was its first row (a copy, the file renamed or
    // rotated; held or gone), signed against it where it is the only one; and of every other file gone (its first row
    // fixed since, or a record from before first rows were kept), paired with every such part where there are a few such
    // pairs in all.
    const known = (part: LandedPart, f: AppendedFile) => f.head !== undefined && part.head !== undefined;
    // By first row (a delivery of thousands of new files compares each with its few alike, not with all).
    const recordsByHead = groupBy([...files.values()], (f) => f.head);
    const freshByHead = groupBy(fresh, (p) => p.head);
    const sameHead = (part: LandedPart) => (part.head === undefined ? [] : (recordsByHead.get(part.head) ?? []).filter((f) => f.file !== part.file));
    const unknown = (part: LandedPart) => orphans.filter((f) => f.file !== part.file && !(known(part, f) && f.head === part.head));
    // Of two records of its first row or more (copies, a file renamed twice), one the part passed long ago may not know
    // the rows the others took since: such a part is taken by difference below.
    for (const part of unmatched) {
      const records = sameHead(part);
      if (records.length === 1) candidates.push(...growthCandidates(landed.partition, path, part, records[0]!));
    }
    const pairs = unmatched.flatMap((part) => unknown(part).map((f) => [part, f] as const));
    if (pairs.length <= MAX_RENAMED_PAIRS) for (const [part, taken] of pairs) candidates.push(...growthCandidates(landed.partition, path, part, taken));
    // The new parts of a part's first row, itself included (one: none alike).
    const alike = (part: LandedPart) => (part.head === undefined ? [] : (freshByHead.get(part.head) ?? []));
    for (const part of fresh) if (sameHead(part).length > 0 || alike(part).length > 1) shared.add(grownKey(path, part.file));
    // Where no split verifies, a part of a recorded name is taken by difference; so is one of the first row of a record
    // (its rows alike to held ones count as held, as any by difference), and new files of one first row (a file and its
    // copy, both grown: their rows once); and one beside records of files gone, their first rows not known, that were too
    // many to pair, where the partition holds at least half of its rows, or of the smallest such record's.
    for (const part of fresh) {
      const records = sameHead(part);
      // Records whose first row is known and another: a new file's (files moved out of the glob once synced) read nothing.
      const gone = unknown(part).filter((f) => !known(part, f));
      const family = part.head !== undefined ? { family: `${path}\0${part.head}` } : {};
      const kin = alike(part);
      if (files.has(part.file)) byDifference.push({ partition: landed.partition, path, part, ...family });
      else if (records.length > 0 || kin.length > 1) byDifference.push({ partition: landed.partition, path, part, ...family });
      else if (pairs.length > MAX_RENAMED_PAIRS && gone.length > 0) byDifference.push({ partition: landed.partition, path, part, gone: Math.min(...gone.map((f) => f.rows ?? 1)) });
    }
  }
  const grown = new Map<string, GrownPart>();
  const back = candidates.length > 0 ? await verifiedSplits(ctx, dataset, delivery, candidates, grown, shared) : [];
  // A part whose split was taken back is taken by difference, with its family (their rows once).
  const backKeys = new Set(back.map((c) => grownKey(c.path, c.part.file)));
  await appendByDifference(ctx, dataset, delivery, [...back, ...byDifference.filter((c) => !backKeys.has(grownKey(c.path, c.part.file)))], before.current, grown);
  return grown;
}

/**
 * The splits of `candidates` that verify, into `grown` (`grownParts`). Where two parts of a partition or more continue
 * one recorded file (a file and a copy of it, made after it grew), their rows after it may be the same rows; so may the
 * fixed bad rows a part of a first row `shared` with another file takes: those are taken back out of `grown`, to be
 * taken by difference instead, as a family (`DifferenceCandidate.family`): returned so.
 */
async function verifiedSplits(
  ctx: PipelineContext,
  dataset: DatasetConfig,
  delivery: LandedDelivery,
  candidates: readonly GrowthCandidate[],
  grown: Map<string, GrownPart>,
  shared: ReadonlySet<string>,
): Promise<DifferenceCandidate[]> {
  const splits = await ctx.landing.splitParts({
    delivery,
    columns: dataset.columns,
    signatureColumns: dataset.signatureColumns,
    keys: dataset.partition.map((p) => p.key),
    splits: candidates,
  });
  // Of the splits that show a part continues a recorded file, the one that finds the most rows taken already (a rotated
  // file continues the last file recorded under its name, not an older one it began as); on a tie the first, by line
  // (it keeps fixed bad rows apart).
  const taken = new Map<string, number>();
  const chosen = new Map<string, GrowthCandidate>();
  candidates.forEach((c, i) => {
    const split = splits[i]!;
    const key = grownKey(c.path, c.file);
    if (split.before.signature !== c.signature || (taken.get(key) ?? -1) >= split.before.rows) return;
    taken.set(key, split.before.rows);
    chosen.set(key, c);
    grown.set(key, { through: split.through, ...(c.skipped && c.rows === undefined ? { skipped: c.skipped } : {}), ...split.after });
  });
  const continuing = new Map<string, GrowthCandidate[]>();
  for (const c of chosen.values()) {
    const key = grownKey(c.path, c.record);
    continuing.set(key, [...(continuing.get(key) ?? []), c]);
  }
  const back = new Set([...continuing.values()].filter((parts) => parts.length > 1).flatMap((parts) => parts.map((c) => grownKey(c.path, c.file))));
  for (const [key, c] of chosen) if (shared.has(key) && (grown.get(key)?.skipped?.length ?? 0) > 0 && c.rows === undefined) back.add(key);
  for (const key of back) grown.delete(key);
  return [...back].map((key) => {
    const c = chosen.get(key)!;
    return { partition: c.partition, path: c.path, part: c.part, family: `${c.path}\0${c.part.head ?? `record ${c.record}`}` };
  });
}

/** `items` by `key`, those without one left out. */
function groupBy<T>(items: readonly T[], key: (item: T) => string | undefined): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const k = key(item);
    if (k === undefined) continue;
    const group = groups.get(k);
    if (group) group.push(item);
    else groups.set(k, [item]);
  }
  return groups;
}

/** The most (part, recorded file gone) pairs of a partition an append signs to find a file renamed inside its glob. */
const MAX_RENAMED_PAIRS = 16;

/** A split of a part of a landed delivery to sign against a file its partition's run recorded (`grownParts`). */
interface GrowthCandidate {
  readonly partition: Partition;
  readonly path: string;
  readonly part: LandedPart;
  readonly file: string;
  /** The recorded file it would continue. */
  readonly record: string;
  readonly through: number;
  readonly skipped?: readonly number[];
  readonly rows?: number;
  readonly signature: string;
}

/**
 * The splits of `part` that would show it continues the file recorded as `taken`: by line where it reaches past the
 * line taken through (or bad rows then may be fixed now), by rows where it has more rows than were taken.
 */
function growthCandidates(partition: Partition, path: string, part: LandedPart, taken: AppendedFile): GrowthCandidate[] {
  const through = part.through ?? 0;
  const byLine = through > taken.through || (through === taken.through && (taken.skipped?.length ?? 0) > 0);
  const byRows = taken.rows !== undefined && part.rows > taken.rows;
  const candidate = { partition, path, part, file: part.file, record: taken.file, through: taken.through, signature: taken.signature };
  return [...(byLine ? [{ ...candidate, ...(taken.skipped ? { skipped: taken.skipped } : {}) }] : []), ...(byRows ? [{ ...candidate, rows: taken.rows }] : [])];
}

/** The days of a dataset's lookback window (./lookback.ts). */
function datasetWindow(ctx: PipelineContext, dataset: DatasetConfig): string[] {
  return windowDays(dataset.window!, ctx.options.asOf, ctx.options.partitions ?? []);
}

/**
 * Fetches a dataset's window from its http source. The returned dataset lands the fetched files as JSONL, each
 * file's rows in the partition of the day it was asked for; none when not one day could be fetched.
 */
export async function fetchWindow(ctx: PipelineContext, dataset: DatasetConfig): Promise<{ source: FetchedSource; dataset?: DatasetConfig }> {
  const fetchSource = ctx.options.fetchSource;
  if (!fetchSource) {
    throw new InvalidInputError(`datasets.${dataset.name}: its source is an http API, but this Pipeline has no fetchSource option (pass fetchSource from lakeswap's sources)`);
  }
  const key = dataset.window!.key;
  const source = await fetchSource({
    dataset: dataset.name,
    source: dataset.http!,
    key,
    values: datasetWindow(ctx, dataset),
    columns: dataset.columns.map((c) => c.name),
    onFetched: (value, done, total) => ctx.options.onProgress?.({ layer: "fetch", done, total, label: `${dataset.name}/${key}=${value}` }),
  });
  return { source, dataset: fetchedDataset(dataset, source) };
}

/** Writes a delivery's bad rows to the dataset's dead-letter table (partition `delivery=<id>`), and reports the load. */
export async function writeDeadLetters(writer: LakeWriter, log: SyncLog, dataset: DatasetConfig, delivery: LandedDelivery): Promise<LoadReport> {
  if (dataset.deadLetter && delivery.rowsRejected > 0) {
    const moved = { table: dataset.deadLetter, layer: "dead letter", partition: `delivery=${delivery.id}` };
    const result = await writer
      .replace(dataset.deadLetter, moved.partition, {
        select: deadLetterSelect(dataset, delivery),
        landed: true,
        beforeSwap: (move) => log.intend([{ ...moved, run: move.runId, previousRun: move.previousRunId }]),
      })
      .catch((error: unknown) => {
        // Intended as the build started: the pointer did not move.
        log.abandon(moved);
        throw error;
      });
    log.confirm({ ...moved, run: result.runId, previousRun: result.previousRunId });
  }
  return loadReport(dataset, delivery);
}

/** The SELECT of a delivery's dead letters (built where the landed delivery is): of `files` only, where given. */
function deadLetterSelect(dataset: DatasetConfig, delivery: LandedDelivery, files?: readonly string[]): string {
  const where = files ? ` WHERE file IN (${files.map(quoteLiteral).join(", ")})` : "";
  return `SELECT ${quoteLiteral(dataset.name)} AS dataset, file, line, reason, raw FROM ${quoteRelation(delivery.rejectedRelation)}${where} ORDER BY file, line`;
}

/** One partition of a dead-letter table as a delivery fills it: its files, their bad rows, and what builds it. */
export interface DeadLetterPart {
  readonly partition: string;
  readonly files: readonly string[];
  readonly rows: number;
  /** Of the bad rows it holds (`write: append`): the partition is not written again while it holds the same. */
  readonly signature?: string;
  readonly select: string;
}

/**
 * Where a delivery's bad rows are kept. `write: append` (its delivery landed with `fileParts`) keeps each file's in a
 * partition of its own, `delivery=<the file's id>` (files with the same name and bytes share one), so that a file a
 * glob reads again at each sync is kept once; every other mode keeps the delivery's in `delivery=<its id>`.
 */
export function deadLetterParts(dataset: DatasetConfig, delivery: LandedDelivery): DeadLetterPart[] {
  if (dataset.write !== "append" || !delivery.rejectedFiles) {
    return [{ partition: `delivery=${delivery.id}`, files: delivery.files, rows: delivery.rowsRejected, select: deadLetterSelect(dataset, delivery) }];
  }
  const byId = new Map<string, RejectedFile[]>();
  for (const file of delivery.rejectedFiles) byId.set(file.id, [...(byId.get(file.id) ?? []), file]);
  return [...byId].map(([id, files]) => {
    const names = files.map((f) => f.file);
    const content = JSON.stringify([dataset.name, files.map((f) => [f.file, f.rows, f.digest])]);
    return {
      partition: `delivery=${id}`,
      files: names,
      rows: files.reduce((sum, f) => sum + f.rows, 0),
      signature: `${DEAD_LETTER_SIGNATURE_VERSION}:${createHash("sha256").update(content).digest("hex").slice(0, 32)}`,
      select: deadLetterSelect(dataset, delivery, names),
    };
  });
}

/** The version of a dead-letter partition's signature (of the dataset, files and bad rows it holds). */
const DEAD_LETTER_SIGNATURE_VERSION = "dl1";

/** The definitions of the tables a dataset's sync writes, as declared. */
export function declaredTables(dataset: DatasetConfig): TableDefinition[] {
  const definitions: TableDefinition[] = [
    ...(dataset.ingested ? [] : [rawTable(dataset)]),
    ...dataset.layers.map((layer) =>
      defineTable({ name: layer.table, columns: layer.columns, partitionKeys: layer.partitionKeys, compression: layer.compression, iceberg: layer.iceberg, icebergTable: layer.icebergTable }),
    ),
  ];
  if (dataset.deadLetter) definitions.push(defineTable({ name: dataset.deadLetter, columns: DEAD_LETTER_COLUMNS, partitionKeys: ["delivery"] }));
  return definitions;
}

/** The raw table's definition, as declared. */
export function rawTable(dataset: DatasetConfig): TableDefinition {
  return defineTable({ name: dataset.table, columns: dataset.columns, partitionKeys: dataset.partition.map((p) => p.key), compression: dataset.compression, iceberg: dataset.iceberg, icebergTable: dataset.icebergTable });
}
