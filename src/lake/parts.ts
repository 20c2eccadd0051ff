import type { IcebergCommit } from "./commit/iceberg-commit.js";
import type { Catalog } from "../catalog/catalog.js";
import type { CatalogFile } from "../catalog/catalog-file.js";
import type { Engine } from "../engine/engine.js";
import type { Landing } from "../landing/landing.js";
import { InvalidInputError } from "../model/errors.js";
import { orderPartition, parsePartition, type Partition } from "../model/partition.js";
import type { TableDefinition } from "../model/table.js";
import type { ObjectStore } from "../store/object-store.js";
import type { SwapContext } from "./commit/swap.js";
import type { LeaseRecord } from "./lease.js";

/** The ports a lake runs on. */
export interface LakePorts {
  readonly store: ObjectStore;
  readonly catalog: Catalog;
  /** Runs users' SQL: layer builds, replaces, queries. */
  readonly engine: Engine;
  /** lakeswap's own local work: landing deliveries, writing their runs, footers, partition maps. */
  readonly landing: Landing;
  /** The embedded lake's catalog file for plain readers (`lake.duckdb`), updated after every command that holds leases; none on AWS (Glue is the catalog there). */
  readonly catalogFile?: CatalogFile;
}

/** Settings shared by every operation of one lake. */
export interface LakeSettings {
  /** Runs younger than this are never garbage-collected (default 6h). */
  readonly graceMs?: number;
  /** How long a writer waits for another writer's lease (default 2 minutes; 0 = fail at once). */
  readonly leaseWaitMs?: number;
  readonly leaseTtlMs?: number;
  /** Told when this writer has to wait for another one. */
  readonly onLeaseWait?: (holder: LeaseRecord) => void;
  /**
   * For commands that only read (history, tables, query, syncs, plan): the
   * lake is opened without replaying the outbox, so reading never moves a
   * pointer; `pendingChanges()` tells what a writer left unconfirmed.
   */
  readonly readOnly?: boolean;
}

/**
 * What the lake's operations (./operations/) work with: the ports and the outbox of one open lake, and its
 * leases. `Lake` hands it out as `parts`; an operation is a function of it (`rollback(lake, ...)`).
 */
export interface LakeParts extends SwapContext {
  readonly settings: LakeSettings;
  /** A table's definition, or a NotFoundError that lists the tables there are. */
  table(name: string): Promise<TableDefinition>;
  /** Holds the table's writer lease (waiting per the settings) while `work` runs; its pointer moves are fenced by it. */
  withLease<T>(table: string, command: string, work: () => Promise<T>, options?: LeaseOptions): Promise<T>;
  /** Holds the leases of `names` (taken in name order, so two writers of overlapping sets never deadlock) while `work` runs. */
  withLeases<T>(names: readonly string[], command: string, work: () => Promise<T>, options?: LeaseOptions): Promise<T>;
  /**
   * Runs a run of writes (a collector's backlog of segments) with the catalog file's views rewritten at most every
   * `maxLagMs` per table and once at the end, not after each write (../catalog/duckdb-catalog-file.ts: a rewrite binds
   * every file of the table's current runs). Where the lake has no catalog file, just runs `work`.
   */
  deferCatalogFile<T>(work: () => Promise<T>, maxLagMs: number): Promise<T>;
}

/** How a command holds a table's lease. */
export interface LeaseOptions {
  /** Take the kernel lock besides the lease object (default true where the store has kernel locks). */
  readonly kernelLock?: boolean;
  /**
   * What becomes of the catalog file's views of the leased tables when the work is done: `update` (the default: the
   * views of the tables it moved, and of those whose view is stale), `remove` (drop-table), `settled` (a command
   * outside syncs that moves a table a sync writes: as `update`, except that a view of a table that holds a run of a
   * sync that never finished stays as it is, with a warning, until a sync of it finishes), `stale` (a command that
   * moves no pointer, gc: only views left stale by others are rewritten, and not those waiting for a killed sync's rerun).
   */
  readonly catalogFile?: "update" | "remove" | "settled" | "stale";
  /** Added to the summary of the Iceberg snapshot the command commits (an `iceberg: true` table), asked at commit time: `lakeswap.sync-id`. */
  readonly summary?: () => Readonly<Record<string, string>>;
  /** Told the id of the Iceberg snapshot the command committed in a table (not the one that recovered a killed writer's moves). */
  readonly onSnapshot?: (commit: IcebergCommit) => void;
}

/** Whatever hands out a lake's parts: an open `Lake`. */
export interface HasLakeParts {
  readonly parts: LakeParts;
}

/** A partition named by the user: parsed text (`day=2026-11-01`) or a partition. */
export type PartitionInput = string | Partition;

/**
 * The partition of `table` a user named, checked against its keys (a whole-table name for a table without keys).
 * `existing`: the command only names a partition the lake may already hold (history, rollback, pin), which may be one
 * a lakeswap before NULL spellings were refused wrote (`pc=null`); a partition to write (replace) is checked in full.
 */
export function partitionOf(table: TableDefinition, input: PartitionInput, existing = false): Partition {
  if (input === "" && table.partitionKeys.length > 0) {
    throw new InvalidInputError(`table '${table.name}' is partitioned by ${table.partitionKeys.join(", ")}: name a partition, e.g. --partition ${table.partitionKeys.map((k) => `${k}=...`).join(",")}`);
  }
  if (input !== "" && typeof input === "string" && table.partitionKeys.length === 0) {
    throw new InvalidInputError(`table '${table.name}' has no partition keys (it is replaced as a whole): leave out --partition '${input}'`);
  }
  return typeof input === "string" ? parsePartition(input, table.partitionKeys, existing) : orderPartition(input, table.partitionKeys, existing);
}

/** An ingested table is append-only (`lakeswap serve` / `lakeswap ingest` add to it): it is never replaced or rolled back. */
export function notIngested(table: TableDefinition, what: string): TableDefinition {
  if (table.ingest) {
    throw new InvalidInputError(
      `table '${table.name}' is an ingested table (events appended by lakeswap serve / lakeswap ingest); it cannot be ${what}. ` +
        "Build a derived layer from it instead, and replace or roll back that layer's partitions",
    );
  }
  return table;
}
