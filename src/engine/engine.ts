import type { Partition } from "../core/partition.js";
import type { TableDefinition } from "../core/table.js";

/** One partition as a query sees it: the current run and its files (store keys). */
export interface PartitionSnapshot {
  readonly partition: Partition;
  readonly runId: string;
  readonly files: readonly string[];
}

/** A table as of one moment: each partition's current run, resolved once so a query reads one consistent state. */
export interface TableSnapshot {
  readonly table: TableDefinition;
  readonly partitions: readonly PartitionSnapshot[];
}

/** Build one run of one partition from a SELECT, into a fresh run prefix. */
export interface BuildRequest {
  readonly table: TableDefinition;
  readonly partition: Partition;
  /** A single SELECT producing the table's columns (partition columns may be left out). */
  readonly select: string;
  readonly runId: string;
  /** The store key prefix of the new run, ending in '/'; nothing exists there yet. */
  readonly runPrefix: string;
  /** Lake tables the SELECT may read, by name. */
  readonly sources: readonly TableSnapshot[];
  /** The declared inputs of a derived partition: what the SELECT sees of these tables. */
  readonly inputPartitions?: readonly { readonly table: string; readonly partitions: readonly string[] }[];
  /** The SELECT reads a landed delivery (raw layer), which lives in the landing engine. */
  readonly landed?: boolean;
}

/** The runs to write from a landed delivery, one per partition. */
export interface LandedRunsRequest {
  readonly table: TableDefinition;
  readonly delivery: LandedDelivery;
  readonly runs: readonly { readonly partition: Partition; readonly runId: string; readonly runPrefix: string }[];
}

/** What a build wrote. */
export interface BuildResult {
  /** The engine's own count of the rows it wrote, where it has one (DuckDB's COPY); the lake's audit checks it against the files. */
  readonly rows?: number;
  readonly files: readonly { readonly key: string; readonly size: number }[];
}

/** Rows of a query, with JSON-safe values. */
export interface QueryResult {
  readonly columns: readonly string[];
  readonly rows: readonly (readonly unknown[])[];
}

/**
 * The engine port: builds runs and answers queries over the current pointers.
 * It never moves a pointer; that is the core's job.
 */
export interface Engine {
  readonly capabilities: EngineCapabilities;
  build(request: BuildRequest): Promise<BuildResult>;
  /** Lands a delivery's files (raw layer): typed rows, bad rows apart, a signature per partition. */
  land(request: LandRequest): Promise<LandedDelivery>;
  /** Frees what `land` holds. */
  releaseLanding(delivery: LandedDelivery): Promise<void>;
  /** Evaluates partition map expressions over upstream partition values, one output row per input row. */
  mapPartitions(request: PartitionMapRequest): Promise<string[][]>;
  query(sql: string, sources: readonly TableSnapshot[]): Promise<QueryResult>;
  /** The tables a SELECT names, CTE names aside (DuckDB's parser); undefined when the parser cannot read the SQL. */
  tablesRead(select: string): Promise<string[] | undefined>;
  /**
   * Rows of each of the given Parquet files (store keys), in order, read from
   * their footers: the audit of new runs, which never takes an engine's word
   * for it. Fails naming a file whose footer cannot be read.
   */
  countFileRows(files: readonly { readonly key: string; readonly size: number }[]): Promise<number[]>;
  /**
   * Writes the runs of many partitions of a landed delivery in one pass (raw
   * layer): one read of the delivery, each run's files in its own fresh run
   * prefix. The results are in the order of `request.runs`; a run whose
   * partition has no rows in the delivery gets no files.
   */
  writeLandedRuns(request: LandedRunsRequest): Promise<BuildResult[]>;
  /** Rows in one run of a partition (Parquet metadata is enough where the engine can read the files). */
  countRows(table: TableDefinition, run: PartitionSnapshot): Promise<number>;
  close(): Promise<void>;
}

/** Land one delivery of source files into the engine, ready to build raw partitions from. */
export interface LandRequest {
  /** Local paths or globs of the delivery's files. */
  readonly files: readonly string[];
  readonly format: "csv" | "jsonl" | "parquet";
  readonly header: boolean;
  readonly delimiter: string;
  readonly columns: readonly { readonly name: string; readonly type: string; readonly nullable: boolean }[];
  /** Partition keys, each an expression over the source columns. */
  readonly partition: readonly { readonly key: string; readonly expression: string }[];
  readonly signatureColumns: readonly string[];
}

/** One partition of a landed delivery, with its content signature. */
export interface LandedPartition {
  readonly partition: Partition;
  readonly rows: number;
  readonly signature: string;
}

/** A bad row of a delivery. */
export interface RejectedRow {
  readonly file: string;
  readonly line: number | null;
  readonly reason: string;
  readonly raw: string | null;
}

/** A delivery landed in the engine: where its good and bad rows are, and what they hold. */
export interface LandedDelivery {
  /** The files read (globs expanded). */
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
}

/**
 * How raw signatures are computed (docs/signatures.md, "Two forms, one
 * algorithm"): `native` with lakeswap's DuckDB extension, `sql` in plain DuckDB
 * SQL. The signatures are the same either way; the native form is faster.
 */
export interface Signing {
  readonly form: "native" | "sql";
  /** Why the form is not native, when it is not (not built, switched off, failed its check). */
  readonly reason?: string;
}

/** What an engine can do. */
export interface EngineCapabilities {
  /** Can land source files (raw layer) itself. */
  readonly landsFiles: boolean;
  /** Reads lake tables from their run files (DuckDB), rather than through the catalog (Athena reads Glue). */
  readonly readsRunFiles: boolean;
}

/** Evaluate a derived layer's partition map over upstream partition values. */
export interface PartitionMapRequest {
  readonly fromKeys: readonly string[];
  /** One row of upstream partition values per upstream partition, in `fromKeys` order. */
  readonly values: readonly (readonly string[])[];
  readonly map: readonly { readonly key: string; readonly expression: string }[];
}
