import { LakeswapError } from "../model/errors.js";
import type { Partition } from "../model/partition.js";

/** A target that cannot be reached any more (a connection refused or lost): the writes that follow would fail the same way. */
export class TargetUnavailableError extends LakeswapError {
  constructor(message: string, cause: unknown) {
    super("STORE_ERROR", message, { retryable: true, cause });
    this.name = "TargetUnavailableError";
  }
}

/** How a sink writes one partition: `upsert` merges rows by primary key, `partition_replace` swaps the partition's rows. */
export type SinkMode = "upsert" | "partition_replace";

/** A column of a sink's target table: a lake column (declared type) or a partition key (text). */
export interface SinkColumn {
  readonly name: string;
  /** The declared lake type, normalized (`BIGINT`, `DECIMAL(10,2)`, ...). */
  readonly type: string;
  readonly nullable: boolean;
}

/** The lake a sink's rows come from (with `SinkLayout.lakeTable`, the source of a target's partitions). */
export interface SinkSource {
  /** The lake's id (../lake/lake-identity.ts): the same wherever the lake is moved or copied to. */
  readonly lakeId: string;
  /** Where the lake is (its folder, or `s3://bucket/prefix`), for messages. */
  readonly location: string;
}

/** What a sink writes: the lake table's columns (partition keys included), and how. */
export interface SinkLayout {
  /** The lake table the rows come from. */
  readonly lakeTable: string;
  /** Its lake: a target may hold partitions of several lakes or lake tables, and each source writes and removes only its own. */
  readonly source: SinkSource;
  readonly columns: readonly SinkColumn[];
  readonly partitionKeys: readonly string[];
  readonly mode: SinkMode;
  /** The key `upsert` merges on (empty for `partition_replace`). */
  readonly primaryKey: readonly string[];
  /** Upsert: a key the lake no longer holds is deleted (true) or kept and marked deleted (default false). */
  readonly hardDelete?: boolean;
  /** Upsert, soft delete: a BOOLEAN column of the layer that a marked row gets set true (the dataset's `delete_flag`). */
  readonly deleteFlag?: string;
}

/** One partition to send: its current run in the lake and the signature the sink records with it. */
export interface SinkPartitionWrite {
  readonly partition: Partition;
  /** The partition's path, `day=2026-11-01`: the key of the sink's state row. */
  readonly path: string;
  readonly runId: string;
  readonly signature: string;
  /** The run's Parquet files, as local paths (an embedded lake); empty when `remote` names them. */
  readonly files: readonly string[];
  /** The run's files in a remote store (an S3 lake): their keys, and how to read one; the sink copies them to a temporary folder. */
  readonly remote?: { readonly keys: readonly string[]; read(key: string): Promise<Uint8Array> };
  /**
   * The partitions this sync writes next, in order (at most a few): a sink may start reading their rows while
   * it writes this one, and must remove what it read ahead by `close` if their writes never come. Default none.
   */
  readonly upcoming?: readonly SinkPartitionWrite[];
}

/** A partition of the target that another source (another lake, or another table of this lake) sent: not this source's to write or remove. */
export class OtherSourceError extends LakeswapError {
  constructor(message: string) {
    super("CONFLICT", message);
    this.name = "OtherSourceError";
  }
}

/**
 * A target outside the lake (PostgreSQL). Each partition is written in one
 * transaction of the target, together with the signature it records, so a
 * write is applied whole or not at all and a rerun skips what it already holds.
 */
export interface Sink {
  /** The target as messages and reports show it, never with a password (`postgres://app@db:5432/x analytics.orders`). */
  readonly description: string;
  /**
   * How many partitions' writes the caller may have in flight at once (each still one transaction of its own), and
   * how many it may name as `upcoming` beyond them. Default 1: one write at a time.
   */
  readonly concurrentWrites?: number;
  /**
   * Creates the target and state tables if missing, refuses a target that differs; returns the signature recorded for
   * each partition this source sent, and the partitions another source (lake or lake table) sent.
   */
  prepare(layout: SinkLayout): Promise<SinkState>;
  /** Writes one partition and its state row in one transaction; returns the rows sent. */
  write(layout: SinkLayout, partition: SinkPartitionWrite): Promise<{ readonly rows: number }>;
  /**
   * Removes one partition's rows (partition_replace; upsert: deletes or marks its keys) and its state row in one
   * transaction (a partition the lake no longer has); returns the rows removed or marked. A write or removal of a
   * partition that another source sent meanwhile is rolled back and fails (`OtherSourceError`).
   */
  remove(layout: SinkLayout, partition: Partition, path: string): Promise<{ readonly rows: number }>;
  /** Ends the connection and removes anything read ahead for writes that did not come. */
  close(): Promise<void>;
}

/** What a target records of the partitions sent to it. */
export interface SinkState {
  /** The partitions this source (`SinkLayout.source` and `lakeTable`) sent, with the signature each was sent with. */
  readonly recorded: Map<string, string>;
  /** The partitions another source sent: this source neither writes nor removes them. */
  readonly others: ReadonlyMap<string, OtherSourcePartition>;
}

/** A partition of the target that another source sent. */
export interface OtherSourcePartition {
  /** That source, as messages name it (`lake table orders of /data/lake (lake id …)`). */
  readonly source: string;
  /** Why this source does not send the partition, and how to hand it over. */
  readonly refusal: string;
}

/** A sink as declared in the config: which kind, and its settings. */
export interface SinkSpec {
  readonly kind: "postgres";
  /** The connection URL, with its password: never printed (use `maskedUrl`). */
  readonly url: string;
  readonly maskedUrl: string;
  readonly schema: string;
  readonly table: string;
  readonly mode: SinkMode;
  readonly primaryKey: readonly string[];
  /** Upsert: delete a key the lake no longer holds (`hard_delete: true`) rather than mark it (default). */
  readonly hardDelete: boolean;
  /** Upsert on a raw layer with a `delete_flag`: the column a soft delete sets true. */
  readonly deleteFlag?: string;
  /**
   * How a partition_replace target the sink creates is laid out: `native` (default), partitioned by LIST on its
   * partition columns, each partition a leaf table swapped whole; `index`, a plain table with an index on them.
   */
  readonly partitioning?: "native" | "index";
}

/** Opens the adapter of a declared sink (the CLI and `openSinkFor` supply it; core never imports an adapter). */
export type SinkOpener = (spec: SinkSpec) => Promise<Sink>;
