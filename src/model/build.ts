// The values a build and a query exchange with the lake: what a partition's current run is, and what a build writes.
import type { Partition } from "./partition.js";
import type { TableDefinition } from "./table.js";

/** One partition as a query sees it: the current run and its files (store keys). */
export interface PartitionSnapshot {
  readonly partition: Partition;
  readonly runId: string;
  readonly files: readonly string[];
  /** The signature that moved with the pointer, where there is one: an ingested partition's changes as segments add files to its run. */
  readonly signature?: string;
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
  /**
   * A held sync's staged runs, for an engine that reads tables through the catalog (`readsRunFiles: false`): these
   * partitions of `table` are read from the scratch table `scratch`, whose pointers are the staged runs, instead of
   * `table`'s current runs (`sources` already holds the staged runs' files for an engine that reads them).
   */
  readonly staged?: readonly StagedInput[];
}

/** Some partitions of a table whose staged runs a build reads from a scratch table in the catalog. */
export interface StagedInput {
  readonly table: string;
  readonly scratch: string;
  /** Partition paths (`day=2026-11-01`; "" for a table without partition keys). */
  readonly partitions: readonly string[];
}

/** What a build wrote. */
export interface BuildResult {
  /** The engine's own count of the rows it wrote, where it has one (DuckDB's COPY); the lake's audit checks it against the files. */
  readonly rows?: number;
  readonly files: readonly { readonly key: string; readonly size: number }[];
}
