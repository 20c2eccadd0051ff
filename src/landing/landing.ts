import type { AuditFinding, AuditSpec } from "../model/audit.js";
import type { TimeFormat } from "../model/column-types.js";
import type { Partition } from "../model/partition.js";
import type { TableDefinition } from "../model/table.js";
import type { Signing } from "../model/signature.js";
import type { BuildRequest, BuildResult, PartitionSnapshot } from "../model/build.js";

/**
 * The landing port: lakeswap's own local work, the same whether the lake is
 * embedded or on AWS. It lands a delivery once (reads, validates, partitions
 * and signs every row), writes the runs of the raw partitions that changed
 * in one pass, builds from landed rows (dead letters), evaluates partition
 * maps, parses a layer's SQL for the tables it reads, and audits new runs:
 * their rows from their Parquet footers, their data by the layer's audits.
 * Users' SQL (partition maps, `sql:` audits) runs only in instances that
 * reach no file but what it reads.
 */
export interface Landing {
  /**
   * The files a delivery's paths or globs name, and its id (a digest of their
   * names and bytes), without landing it. `known` is what an earlier identify
   * of the same paths found: its id is taken without reading the files again
   * when they are the same files, unchanged since (`IdentifiedFiles`).
   * `readAhead`: the request the delivery is to be landed with, if it is;
   * where the files must be read to name them, what landing reads of them
   * first may be read at the same time, for `land` to take if the files are
   * still as they were then.
   */
  identify(files: readonly string[], known?: IdentifiedFiles, readAhead?: LandRequest): Promise<IdentifiedDelivery>;
  /** Lands a delivery's files: typed rows, bad rows apart, a signature per partition. */
  land(request: LandRequest): Promise<LandedDelivery>;
  /**
   * Upsert: merges a landed delivery into a table's current rows by primary
   * key. The result is a landed delivery of the partitions it touches (those
   * the delivery has rows for, and those that hold one of its keys now, so a
   * key that moves leaves its old partition), each with the rows it holds
   * after the merge and their signature. Freed with `releaseLanding`, before
   * the delivery it was made from.
   */
  mergeLanded(request: MergeRequest): Promise<LandedDelivery>;
  /**
   * `write: append`: each part's rows at or before a line of its file and after it, signed apart (a file that grew at
   * its end since it was appended: its rows before the line are those appended then), in the order of `splits`.
   */
  splitParts(request: SplitPartsRequest): Promise<SplitPart[]>;
  /**
   * `write: append`: of each part, the rows its partition's current run does not hold, by row content (the signed
   * columns): of n rows of the part alike where the run holds m, the last n - m by line. In the order of `parts`.
   */
  differenceParts(request: DifferencePartsRequest): Promise<PartDifference[]>;
  /** Frees what `land` (or `mergeLanded`) holds. */
  releaseLanding(delivery: LandedDelivery): Promise<void>;
  /**
   * Writes the runs of many partitions of a landed delivery in one pass; the
   * results are in the order of `request.runs`, a run whose partition has no
   * rows gets no files.
   */
  writeLandedRuns(request: LandedRunsRequest): Promise<BuildResult[]>;
  /**
   * Writes each partition of a landed delivery into one Parquet file of its own in the local folder `dir`, rows
   * in the order they were landed (the same delivery gives the same files): an ingested segment's files, before
   * they are stored. Partitions without rows get no file.
   */
  writeLandedFiles(request: { readonly table: TableDefinition; readonly delivery: LandedDelivery; readonly dir: string }): Promise<LandedFile[]>;
  /**
   * Writes a landed delivery's bad rows as JSONL to a local file, one object per row with `line`, `reason` and
   * `raw`, and `received_at` (ISO, UTC) from `receivedAt`: the receive time of the request each line came in,
   * as (first line, milliseconds since the epoch) pairs, ascending. Returns the rows written.
   */
  writeRejected(request: {
    readonly delivery: LandedDelivery;
    readonly file: string;
    readonly receivedAt: readonly (readonly [number, number])[];
    /** Text fields added to every row (the namespace, the segment). */
    readonly fields?: Readonly<Record<string, string>>;
  }): Promise<number>;
  /** Builds one run from a SELECT over a landed delivery's relations (the dead letters of a delivery). */
  buildLanded(request: BuildRequest): Promise<BuildResult>;
  /** Evaluates partition map expressions over upstream partition values, one output row per input row. */
  mapPartitions(request: PartitionMapRequest): Promise<string[][]>;
  /** The tables a SELECT names, CTE names aside; undefined when the parser cannot read the SQL. */
  tablesRead(select: string): Promise<string[] | undefined>;
  /**
   * Rows of each of the given Parquet files (store keys), in order, read from
   * their footers: the audit of new runs, which never takes an engine's word
   * for it. Fails naming a file whose footer cannot be read.
   */
  countFileRows(files: readonly { readonly key: string; readonly size: number }[]): Promise<number[]>;
  /**
   * Rewrites Parquet files of a table (store keys) into one new file at
   * `targetKey`, rows as they are: a run that `write: append` has grown to
   * many files is compacted into its next run. The sources are left alone.
   */
  compactFiles(request: { readonly table: TableDefinition; readonly files: readonly string[]; readonly targetKey: string }): Promise<{ readonly key: string; readonly size: number }>;
  /**
   * Rewrites a run's files (store keys) into files of about `fileBytes` each, staged, and signs them as written (read
   * back): the new run is placed only when the caller has compared its signature with the partition's.
   */
  compactRun(request: CompactRunRequest): Promise<StagedCompaction>;
  /**
   * The data audits of staged runs (write-audit-publish), read from their files before any pointer moves: each
   * audit's failing rows per staged partition (row_count is the core's, from the counts it has). An audit that
   * cannot run (a value that does not fit its column's type, a `sql:` audit that fails) throws, naming it.
   */
  auditRuns(request: AuditRunsRequest): Promise<AuditFinding[]>;
  /** A hint, which never fails: a delivery with these partition expressions is likely to land soon (DuckDB gets ready and checks them). */
  prepare?(partitionExpressions?: readonly string[]): void;
  close(): Promise<void>;
}

/**
 * What `Landing.compactRun` rewrites: a run's files into a new run of the same table and partition, each column read
 * by name and cast to `table`'s type (a rebuild by swap: a value the new type cannot hold fails the rewrite, naming it).
 */
export interface CompactRunRequest {
  readonly table: TableDefinition;
  /** Columns renamed (new name to old name): a file that lacks the new name gives the old one's values. */
  readonly renames?: Readonly<Record<string, string>>;
  /**
   * A rebuild's declared type of each column before (by its new name): a column whose declared type changes has each
   * value converted and checked, also where both types are stored alike (SMALLINT and UTINYINT, VARCHAR and TIME).
   */
  readonly previousTypes?: Readonly<Record<string, string>>;
  /** The columns the run's signature covers (a dataset's signed columns); default: every column. */
  readonly signatureColumns?: readonly string[];
  readonly files: readonly string[];
  /** The new run's id. */
  readonly runId: string;
  /** The run whose files these are (a rebuild's: its partition's current run), named where a value does not fit. */
  readonly from?: string;
  /** The new run's store key prefix, ending in '/'; nothing exists there yet. */
  readonly runPrefix: string;
  /** About how large each new file grows before the next is begun. */
  readonly fileBytes: number;
}

/** Rows and signature lane sums (decimal text, modulo 2^64). */
export interface SignedRows {
  readonly rows: number;
  readonly upper: string;
  readonly lower: string;
}

/** A compacted run, staged: its rows and signature lanes (of the files as written), to place as the new run or discard. */
export interface StagedCompaction {
  readonly rows: number;
  readonly lanes: { readonly upper: string; readonly lower: string };
  /** The written files' raw signature under the table's columns (an added column signed apart, as landing signs it). */
  readonly signature: string;
  /**
   * The source files signed two ways, for a table whose files differ in columns (an ingested table that gained some):
   * each file under the columns it has (as its segment was counted), and all of them under the table's columns (as
   * the compacted files are signed).
   */
  signSources(): Promise<{ readonly asWritten: SignedRows; readonly asDeclared: SignedRows }>;
  /** Places the staged files at the run's prefix, durable (or uploaded), and returns them. */
  place(): Promise<readonly { readonly key: string; readonly size: number }[]>;
  discard(): Promise<void>;
}

/** What `Landing.auditRuns` audits. */
export interface AuditRunsRequest {
  readonly table: TableDefinition;
  readonly audits: readonly AuditSpec[];
  /** The staged runs, each with its partition and files (store keys). */
  readonly staged: readonly PartitionSnapshot[];
  /**
   * The current runs of the table's other partitions: with the staged runs, the table as it will be after the swap
   * (for `unique` across the table and `freshness`). Read only by those audits.
   */
  readonly others: readonly PartitionSnapshot[];
  /** The moment freshness is measured from. */
  readonly now: Date;
}

/** A delivery's files and id, and whether its files were read (hashed) to name it. */
export interface IdentifiedDelivery {
  readonly files: readonly string[];
  readonly id: string;
  readonly identified: IdentifiedFiles;
  readonly hashed: boolean;
}

/**
 * What identifying a delivery found out, kept so that the same files, unchanged,
 * are not read again to be named: their device, inode, size, and modification
 * and change times (nanoseconds, as decimal text), the id, and when the files
 * were hashed (ms since the epoch). The id is reused only where the files were
 * already settled when they were hashed: changed more than a few seconds
 * before (so that a later write, even within the file system's timestamp
 * granularity, shows as a later change time).
 */
export interface IdentifiedFiles {
  readonly files: readonly string[];
  readonly states: readonly FileState[];
  readonly id: string;
  readonly hashedAt: number;
}

export interface FileState {
  readonly dev: string;
  readonly ino: string;
  readonly size: string;
  readonly mtimeNs: string;
  readonly ctimeNs: string;
}

/** The runs to write from a landed delivery, one per partition. */
export interface LandedRunsRequest {
  readonly table: TableDefinition;
  readonly delivery: LandedDelivery;
  readonly runs: readonly LandedRun[];
}

/** One run written from a landed delivery: a partition's rows, or (`files`) only those that came from these files. */
export interface LandedRun {
  readonly partition: Partition;
  readonly runId: string;
  readonly runPrefix: string;
  /**
   * `write: append`: the delivery's files (as `LandedDelivery.files` names them) whose rows of the partition the run
   * takes, the others' being there already; absent: the rows of every file. Needs a delivery landed with `fileParts`.
   */
  readonly files?: readonly string[];
  /**
   * `write: append`: of some of `files` (a file that grew at its end since the partition's last append), only the rows
   * after this line (`LandedPart.through`), by file name.
   */
  readonly after?: Readonly<Record<string, number>>;
  /** `write: append`: of some of `after`'s files, lines at or before their `after` whose rows the run takes too (fixed bad rows). */
  readonly retaken?: Readonly<Record<string, readonly number[]>>;
}

/** A declared column of a delivery. */
export interface LandColumn {
  readonly name: string;
  readonly type: string;
  readonly nullable: boolean;
  /**
   * Set on the time field of an ingested namespace (TIMESTAMP, TIMESTAMPTZ or DATE), whose value names the
   * event's partition: read in this format, and a bad row when it is not a time in years 0001 to 9999
   * (±infinity, year 10000). Unset for every other column.
   */
  readonly eventTime?: TimeFormat;
  /**
   * A column added to the table in place (model/schema-change.ts): a delivery may lack it (one exported before it was
   * added: its rows hold NULL there, and sign as they did), and it is signed apart where it holds a value.
   */
  readonly added?: true;
  /** The type the signature names for a column widened in place (its type before); absent: `type`. */
  readonly signedAs?: string;
  /**
   * The name the column has in the delivery's files (`source.fields`): the CSV header, JSONL field or Parquet column
   * it is read from, matched as the column's own name is, whatever its case. Absent: the column's own name.
   */
  readonly field?: string;
}

/** Land one delivery of source files into the engine, ready to build raw partitions from. */
export interface LandRequest {
  /** Local paths or globs of the delivery's files. */
  readonly files: readonly string[];
  readonly format: "csv" | "jsonl" | "parquet";
  readonly header: boolean;
  readonly delimiter: string;
  readonly columns: readonly LandColumn[];
  /** Partition keys, each an expression over the source columns. */
  readonly partition: readonly { readonly key: string; readonly expression: string }[];
  readonly signatureColumns: readonly string[];
  /**
   * JSONL (ingest): what to do with fields the columns do not declare. `keep` puts them, as one JSON object, in
   * `column` (a declared VARCHAR column that is not read from a field; NULL when there are none); `deadletter`
   * makes such a line a bad row. Without it, undeclared fields are ignored.
   */
  readonly unknownFields?: { readonly mode: "keep" | "deadletter"; readonly column?: string };
  /**
   * JSONL: a declared field that no line of a file gives (in any case). `refuse` (default): the load stops naming
   * the file and the field, as for a CSV header that lacks a column. `null` (ingest, where each event stands
   * alone): it is NULL in every line, a bad row where the column is not nullable.
   */
  readonly absentFields?: "refuse" | "null";
  /**
   * The delivery's id when the caller names it (an ingested segment: its id names its bytes, which the collector
   * wrote itself); then the files are not hashed to name it.
   */
  readonly id?: string;
  /**
   * The raw table, when every partition of the delivery is expected to be
   * built (a first load, a full refresh): landing then writes every
   * partition's files while it signs the rows, in the same pass over the
   * machine's cores, and `writeLandedRuns` only moves them into their runs.
   * Files of partitions the plan does not build are dropped unread. Not
   * done for a delivery with bad rows.
   */
  readonly writeAhead?: TableDefinition;
  /**
   * `write: append`: each partition also signed per file of the delivery (`LandedPartition.parts`), and its rows kept
   * with their file, so that a partition's run can take the rows of some files only (`LandedRun.files`).
   */
  readonly fileParts?: boolean;
  /**
   * An append: a CSV or JSONL file modified at or after this time (ms since the epoch) whose last record is not written
   * whole (no line end, a quote left open) has it held back, neither landed nor rejected (`LandedDelivery.unterminated`).
   */
  readonly holdUnterminatedSince?: number;
}

/**
 * How a delivery is merged into a table by key: for each touched partition,
 * the current rows whose key the delivery does not hold, plus the delivery's
 * rows (one per key: the greatest by `orderBy`; a row whose `deleteFlag` is
 * true removes its key).
 */
export interface MergeRequest {
  readonly table: TableDefinition;
  readonly delivery: LandedDelivery;
  /** Every partition's current run (a key may move between partitions), files as store keys. */
  readonly current: readonly PartitionSnapshot[];
  /** The declared columns (the signature is computed over the declared types) and which of them are signed. */
  readonly columns: readonly { readonly name: string; readonly type: string; readonly nullable: boolean; readonly added?: true; readonly signedAs?: string }[];
  readonly signatureColumns: readonly string[];
  readonly primaryKey: readonly string[];
  /** Picks the row of a key that the delivery holds several times: the greatest wins; without it, such a key is an error. */
  readonly orderBy: readonly string[];
  /** A BOOLEAN column: a delivery row where it is true deletes its key. */
  readonly deleteFlag?: string;
  /** Names the dataset in messages (`datasets.<name>`). */
  readonly dataset: string;
}

/** One partition of a landed delivery, with its content signature. */
export interface LandedPartition {
  readonly partition: Partition;
  readonly rows: number;
  readonly signature: string;
  /** The signature's two lane sums (decimal, modulo 2^64): what an ingested partition adds up segment by segment. */
  readonly lanes?: { readonly upper: string; readonly lower: string };
  /** With `LandRequest.fileParts`: the partition's rows of each file that has some, signed apart, in the delivery's file order. */
  readonly parts?: readonly LandedPart[];
}

/** The rows of one partition that one file of a delivery holds, and their signature (a raw signature, as a partition's). */
export interface LandedPart {
  readonly file: string;
  readonly rows: number;
  readonly signature: string;
  /**
   * The last line (a CSV record's first line, a Parquet row's number, from 1) of the file that holds a row of the part;
   * absent where the landing does not know its rows' lines (a large CSV read in place).
   */
  readonly through?: number;
  /**
   * The content of the part's first row, by line (./duckdb/signature-sql.ts `rowContentKey`, as decimal text),
   * where `through` is known: a copy of a file, or the file renamed, has the same one while its first row stays.
   */
  readonly head?: string;
}

/** A file's part of a partition, split at a line: what `Landing.splitParts` signs. */
interface PartSplit {
  readonly partition: Partition;
  readonly file: string;
  readonly through: number;
  /** Lines at or before `through` signed with the rows after it (bad rows when the file was appended: `AppendedFile.skipped`). */
  readonly skipped?: readonly number[];
  /**
   * Split instead at the line of the part's rows-th row (in line order), `through` and `skipped` aside: the rows taken
   * before, wherever lines without a row (bad or blank ones) were since removed or added among them.
   */
  readonly rows?: number;
}

/** The rows of a part at or before the line of a `PartSplit`, and those after it, each counted and signed. */
export interface SplitPart {
  /** The line split at: `through`, or with `rows` the line of that row (past every line where the part has fewer rows). */
  readonly through: number;
  readonly before: { readonly rows: number; readonly signature: string };
  readonly after: { readonly rows: number; readonly signature: string };
}

/** The parts of a landed delivery (landed with `fileParts`) to split at a line, and the columns they are signed by. */
export interface SplitPartsRequest {
  readonly delivery: LandedDelivery;
  readonly columns: MergeRequest["columns"];
  readonly signatureColumns: readonly string[];
  /** The delivery's partition keys. */
  readonly keys: readonly string[];
  readonly splits: readonly PartSplit[];
}

/** The parts of a landed delivery (landed with `fileParts`) to take the rows of that their partitions do not hold. */
export interface DifferencePartsRequest extends Omit<SplitPartsRequest, "splits"> {
  /** The table the current runs' files are read under (by column name, cast to the declared types). */
  readonly table: TableDefinition;
  readonly parts: readonly DifferencePart[];
}

/** A part to take by difference, with its partition's current run's files (store keys; none: the partition holds no row). */
interface DifferencePart {
  readonly partition: Partition;
  readonly file: string;
  readonly current: readonly string[];
  /**
   * Parts of one partition with the same family (files that continue one recorded file: a file and its copy) take the
   * union of their rows: each only the rows that neither the run nor a part of the family before it (in `parts`) holds,
   * by content, as many times as it holds them past the most either holds.
   */
  readonly family?: string;
}

/** A part's rows its partition does not hold: those after line `after`, and those at the lines `retaken` (at or before it). */
export interface PartDifference {
  readonly after: number;
  readonly retaken: readonly number[];
  readonly rows: number;
  readonly signature: string;
}

/** One partition of a landed delivery written to a local Parquet file. */
export interface LandedFile {
  readonly partition: Partition;
  readonly file: string;
  readonly rows: number;
  readonly bytes: number;
}

/** A bad row of a delivery. */
export interface RejectedRow {
  readonly file: string;
  readonly line: number | null;
  readonly reason: string;
  readonly raw: string | null;
}

/**
 * What landing a delivery found, without its rows: enough to plan the raw
 * layer. Kept in the lake for deliveries without bad rows, so that the same
 * delivery again (same bytes, same dataset declaration) is planned without
 * being read again.
 */
export interface LandingSummary {
  readonly id: string;
  readonly files: readonly string[];
  readonly rowsRead: number;
  readonly rowsLoaded: number;
  readonly rowsRejected: number;
  readonly partitions: readonly LandedPartition[];
  readonly signing: Signing;
  readonly unterminated?: readonly string[];
}

/** A delivery landed in the engine: where its good and bad rows are, and what they hold. */
export interface LandedDelivery {
  /** The files read (globs expanded). */
  /** The delivery's id: a digest of its files' names and contents, so a rerun of the same delivery gets the same id. */
  readonly id: string;
  readonly files: readonly string[];
  /** The relation of the good rows (declared columns + partition keys), readable by build SELECTs. */
  readonly relation: string;
  /** The relation of the bad rows (file, line, reason, raw). */
  readonly rejectedRelation: string;
  readonly rowsRead: number;
  readonly rowsLoaded: number;
  readonly rowsRejected: number;
  /** The first bad rows, for messages. */
  readonly firstRejects: readonly RejectedRow[];
  readonly partitions: readonly LandedPartition[];
  /** How the raw signatures were computed. */
  readonly signing: Signing;
  /** With `LandRequest.fileParts`: the bad rows by the file they are in (each bad row in one), in the order of their files' names. */
  readonly rejectedFiles?: readonly RejectedFile[];
  /** With `LandRequest.holdUnterminatedSince`: the files whose last record, not written whole, was held back (none: absent). */
  readonly unterminated?: readonly string[];
}

/** The bad rows one file of a delivery holds (`write: append` keeps each file's dead letters apart). */
export interface RejectedFile {
  readonly file: string;
  /** The file's id: a digest of its name and bytes, as a delivery of that file alone is named. */
  readonly id: string;
  readonly rows: number;
  /** A digest of its bad rows (line, reason, raw): the same file landed under another declaration may have others. */
  readonly digest: string;
  /** The lines its bad rows span, in order, where each has a line and they are at most MAX_KNOWN_BAD_LINES lines. */
  readonly lines?: readonly number[];
}

/** The most lines of a file's bad rows that an append keeps (`RejectedFile.lines`, `AppendedFile.skipped`). */
export const MAX_KNOWN_BAD_LINES = 1000;


/** Evaluate a derived layer's partition map over upstream partition values. */
export interface PartitionMapRequest {
  readonly fromKeys: readonly string[];
  /** One row of upstream partition values per upstream partition, in `fromKeys` order. */
  readonly values: readonly (readonly string[])[];
  readonly map: readonly { readonly key: string; readonly expression: string }[];
}

export type { Signing } from "../model/signature.js";
