import type { Partition } from "../core/partition.js";
import type { TableDefinition } from "../core/table.js";

export type {
  LandRequest, LandedDelivery, LandedPartition, LandedRunsRequest, PartitionMapRequest, RejectedRow, Signing,
} from "../landing/landing.js";

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
  /** The SELECT reads a landed delivery's relations (dead letters): it runs in the landing (Landing.buildLanded). */
  readonly landed?: boolean;
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
 * The engine port: builds runs from users' SQL and answers queries over the
 * current pointers (DuckDB embedded, Athena on AWS). It never moves a pointer;
 * that is the core's job. Landing a delivery is the Landing port's.
 */
export interface Engine {
  readonly capabilities: EngineCapabilities;
  build(request: BuildRequest): Promise<BuildResult>;
  query(sql: string, sources: readonly TableSnapshot[]): Promise<QueryResult>;
  /** Rows in one run of a partition (Parquet metadata is enough where the engine can read the files). */
  countRows(table: TableDefinition, run: PartitionSnapshot): Promise<number>;
  close(): Promise<void>;
}

/** What an engine can do. */
export interface EngineCapabilities {
  /** Reads lake tables from their run files (DuckDB), rather than through the catalog (Athena reads Glue). */
  readonly readsRunFiles: boolean;
}

