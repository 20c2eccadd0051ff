import { partitionPath, type Partition } from "../model/partition.js";
import type { TableDefinition } from "../model/table.js";

/** Where a partition's pointer is: its current run, the run before it, and the signature that moved with it. */
export interface Pointer {
  readonly partition: Partition;
  readonly runId: string;
  /** The run this partition pointed to just before `runId`, when known. */
  readonly previousRunId?: string;
  /** The content signature recorded with the pointer, when the catalog keeps one (Glue Parameters). */
  readonly signature?: string;
  /** What moved the pointer last: a swap to a new run, or a rollback. */
  readonly movedBy?: PointerMoveKind;
}

/** Why a pointer moved. */
export type PointerMoveKind = "swap" | "rollback";

/** One pointer move: the swap, a rollback, or a roll forward. */
export interface PointerMove {
  readonly partition: Partition;
  readonly runId: string;
  readonly previousRunId?: string;
  readonly signature?: string;
  readonly kind: PointerMoveKind;
}

/**
 * The writer's fence (../lake/lease.ts): the catalog calls it right before each call that moves or removes
 * pointers (each batch, each retry of one), and makes no call once it throws (LEASE_LOST: another writer
 * took the table over). The rule lives in the core; an adapter only calls it.
 */
export type Fence = () => Promise<void>;

/** What a catalog can do; the core reads these and chooses. */
export interface CatalogCapabilities {
  /** The most pointer moves one catalog call can carry. */
  readonly maxBatchUpdate: number;
}

/**
 * The catalog port: table definitions and partition pointers. Moving a pointer
 * is the swap, and must be atomic per partition: readers see the old run or the
 * new one, never nothing.
 */
export interface Catalog {
  readonly capabilities: CatalogCapabilities;
  /** Prepares the catalog and cleans what an earlier killed process left (temporary links). */
  open(): Promise<void>;
  getTable(name: string): Promise<TableDefinition | undefined>;
  listTables(): Promise<TableDefinition[]>;
  /** Declares a table; declaring the same definition again is a no-op, a different one is refused. */
  createTable(table: TableDefinition): Promise<void>;
  /** Removes a table's definition and whatever catalog state is left for it. */
  dropTable(name: string): Promise<void>;
  /** The store key prefix under which runs of `partition` (or of every partition) live, ending in '/'. */
  runsPrefix(table: TableDefinition, partition?: Partition): string;
  getPointer(table: TableDefinition, partition: Partition): Promise<Pointer | undefined>;
  listPointers(table: TableDefinition): Promise<Pointer[]>;
  /** Moves one partition's pointer to a completely written run, atomically; `fence` is called right before the call that moves it. */
  movePointer(table: TableDefinition, move: PointerMove, fence?: Fence): Promise<void>;
  /** Moves many pointers, in the catalog's batches (`fence` right before each); every entry is checked, and what did not move is reported. */
  movePointers(table: TableDefinition, moves: readonly PointerMove[], fence?: Fence): Promise<void>;
  /** Removes a partition's pointer; readers stop seeing the partition. */
  removePointer(table: TableDefinition, partition: Partition, fence?: Fence): Promise<void>;
  /** Removes the catalog's own container (Glue database, metadata folder) when no table is left in it. */
  removeIfEmpty(): Promise<boolean>;
  /** Removes many pointers, in the catalog's batches (`fence` right before each). */
  removePointers(table: TableDefinition, partitions: readonly Partition[], fence?: Fence): Promise<void>;
}

/**
 * The store key prefix of one run of a partition, ending in '/'. An ingested table has no runs: every file of a
 * partition sits in the partition's own folder, `<table>/<partition path>/`, whatever the registration's run id.
 */
export function runLocation(catalog: Pick<Catalog, "runsPrefix">, table: TableDefinition, partition: Partition, runId: string): string {
  if (table.ingest) return ingestPartitionPrefix(table, partition);
  return `${catalog.runsPrefix(table, partition)}${runFolder(runId)}/`;
}

/** The folder of an ingested table's partition, `<table>/p_year=2026/p_month=11/p_day=30/`; its segment files are written there. */
export function ingestPartitionPrefix(table: TableDefinition, partition: Partition): string {
  const path = partitionPath(partition);
  return path ? `${table.name}/${path}/` : `${table.name}/`;
}

/** The folder name of a run inside its partition's runs prefix. */
export function runFolder(runId: string): string {
  return `run=${runId}`;
}
