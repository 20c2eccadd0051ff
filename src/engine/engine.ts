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
  /** The store key prefix of the new run, ending in '/'; nothing exists there yet. */
  readonly runPrefix: string;
  /** Lake tables the SELECT may read, by name. */
  readonly sources: readonly TableSnapshot[];
}

/** What a build wrote. */
export interface BuildResult {
  readonly rows: number;
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
  build(request: BuildRequest): Promise<BuildResult>;
  query(sql: string, sources: readonly TableSnapshot[]): Promise<QueryResult>;
  /** Rows in the given run files (Parquet metadata is enough). */
  countRows(files: readonly string[]): Promise<number>;
  close(): Promise<void>;
}
