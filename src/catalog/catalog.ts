import { LakeswapError } from "../model/errors.js";
import type { Partition } from "../model/partition.js";
import type { TableDefinition } from "../model/table.js";
import type { IcebergCatalog } from "./iceberg-catalog.js";

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
  /**
   * The names of the run's data files within its location, where the catalog keeps them with the pointer (the
   * embedded catalog's pointer state): a reader of the current runs then lists no run folder.
   */
  readonly runFiles?: readonly string[];
}

/** Why a pointer moved. */
export type PointerMoveKind = "swap" | "rollback";

/** One pointer move: the swap, a rollback, or a roll forward. */
export interface PointerMove {
  readonly partition: Partition;
  readonly runId: string;
  /** The store key prefix of the run the pointer moves to, ending in '/' (the lake's layout places runs: ../lake/layout.ts). */
  readonly location: string;
  readonly previousRunId?: string;
  readonly signature?: string;
  readonly kind: PointerMoveKind;
  /** The names of the run's data files within `location`, as audited (kept with the pointer where the catalog can). */
  readonly runFiles?: readonly string[];
  /**
   * The run was written under the definition passed with the move, which the catalog does not hold yet (a rebuild by
   * swap: ../lake/operations/rebuild-schema.ts): where partitions carry columns of their own (Glue), the partition
   * gets that definition's, not the table's as the catalog holds them.
   */
  readonly newColumns?: true;
}

/**
 * The writer's fence (../lake/lease.ts): the catalog calls it right before each call that moves or removes
 * pointers (each retry of one too), and makes no call once it throws (LEASE_LOST: another writer
 * took the table over). The rule lives in the core; an adapter only calls it.
 */
export type Fence = () => Promise<void>;

/** What a catalog can do; the core reads these and chooses. */
export interface CatalogCapabilities {
  /** The most pointer moves one `movePointers` call takes (the core sends them in batches of this size; Infinity: any number). */
  readonly maxBatchUpdate: number;
  /** The most partitions one `removePointers` call takes (likewise). */
  readonly maxBatchRemove: number;
  /**
   * A pointer occupies its partition's own path in the store (a symlink `<table>/day=…`), so runs cannot be written
   * under it: the lake lays them out beside the pointers instead (../lake/layout.ts `runsPrefix`). False where a
   * pointer is a location held elsewhere (Glue), and runs sit under the partition's path, as Hive lays them out.
   */
  readonly pointersInStore: boolean;
  /**
   * Every reader of the table reads each run by column name under the table's definition (the embedded lake's
   * readers: lakeswap's queries, the catalog file's views): a rebuild by swap moves the definition first, and a run
   * not rewritten yet reads as the rewrite will write it. False where readers read a partition under columns the
   * catalog keeps per partition (Glue): the pointers move first, each partition with its new columns.
   */
  readonly readsRunsByName: boolean;
}

/**
 * The catalog port: table definitions and partition pointers. Moving a pointer
 * is the swap, and must be atomic per partition: readers see the old run or the
 * new one, never nothing. Pointers move and go in batches only, of at most the
 * catalog's `capabilities` (the core splits larger ones).
 */
export interface Catalog {
  readonly capabilities: CatalogCapabilities;
  /**
   * Where the catalog keeps the pointers of `iceberg: true` tables' Iceberg views itself (Glue: a table of type
   * ICEBERG per table); absent where they live in the store beside the metadata (the embedded lake's `version-hint.text`).
   */
  readonly iceberg?: IcebergCatalog;
  /**
   * Prepares the catalog and cleans what an earlier killed process left (temporary links and staged states), except
   * for a read-only command, which changes nothing in the lake.
   */
  open(options?: { readonly readOnly?: boolean }): Promise<void>;
  getTable(name: string): Promise<TableDefinition | undefined>;
  listTables(): Promise<TableDefinition[]>;
  /**
   * Creates a table; declaring the same definition again is a no-op. A table of that name with another definition is
   * never written over: a declaration it could not become is refused naming why (model/table.ts `tableChange`; Glue
   * makes a table without partitions again with other partition keys), any other is TableCreatedMeanwhileError
   * (another writer created the table since the caller read the catalog), for the caller to judge the declaration
   * against that table and make a change with `updateTable`, under the table's lease.
   */
  createTable(table: TableDefinition): Promise<void>;
  /**
   * Writes a table's changed definition over the one the catalog holds: a schema change in place
   * (model/schema-change.ts), a switch to another layout of it (`table.layout`: every reader reads that layout from
   * then on), or the undoing of either by a rollback. The caller holds the table's lease and has judged the
   * change. Where partitions carry columns of their own (Glue's StorageDescriptor), every partition's are set to the
   * table's in the same step, so that no partition's columns ever disagree with the table's. `fence` is called right
   * before each call that writes (a writer that lost the lease must not write a partition's old Location back).
   */
  updateTable(table: TableDefinition, fence?: Fence): Promise<void>;
  /**
   * Why readers of this catalog could not read a table rebuilt by swap from `existing` to `wanted` (model/schema-change.ts)
   * while its pointers move batch by batch, each moved partition under `wanted`'s columns and the table still under
   * `existing`'s until the last step; undefined (or absent) where they can. Glue: Athena reads a partition's column
   * under a table column of another type only where it coerces one to the other.
   */
  rebuildRefusal?(existing: TableDefinition, wanted: TableDefinition): string | undefined;
  /**
   * Removes a table's definition and whatever catalog state is left for it. The layouts of a table whose partition keys
   * changed (model/table.ts `layout`) the lake drops first, each with `dropLayout` where the catalog has that.
   */
  dropTable(name: string): Promise<void>;
  /**
   * Makes the place where a new layout of a table (`table.layout`, ../lake/operations/relayout.ts) keeps its pointers,
   * where the catalog keeps one per layout (Glue: a table `<table>__layout_<token>` of the layout's partition keys and
   * columns, which readers read only once the table is switched to it by `updateTable`). Absent where pointers need
   * no place made first (the embedded lake's).
   */
  createLayout?(table: TableDefinition): Promise<void>;
  /** Removes what `createLayout` made for a layout GC removed (its pointers are gone already); never the table's current layout. */
  dropLayout?(table: TableDefinition): Promise<void>;
  /**
   * Called once this process holds the table's writer lease, until the returned release: meanwhile the table's
   * definition changes only through this catalog object, so a catalog whose reads are remote calls may read it once
   * and then keep it, reading it again after its own writes (Glue: one GetTable per table and command, not one per
   * question a sync asks). Absent where reads are local.
   */
  holdTable?(name: string): () => void;
  getPointer(table: TableDefinition, partition: Partition): Promise<Pointer | undefined>;
  listPointers(table: TableDefinition): Promise<Pointer[]>;
  /**
   * Moves one batch of pointers (at most `maxBatchUpdate`), each to a completely written run, each atomically;
   * `fence` is called right before each call that moves them. Every entry is checked: what did not move is a
   * `PointerBatchError` naming it.
   */
  movePointers(table: TableDefinition, moves: readonly PointerMove[], fence?: Fence): Promise<void>;
  /** Removes one batch of pointers (at most `maxBatchRemove`); readers stop seeing the partitions. A partition already gone is fine. */
  removePointers(table: TableDefinition, partitions: readonly Partition[], fence?: Fence): Promise<void>;
}

/** Some entries of a batch of pointer moves or removals failed, each named with the catalog's reason; the others went through. */
export class PointerBatchError extends LakeswapError {
  /**
   * `failed` names each entry that did not go through (`day=2026-11-01 (InternalServiceException: …)`), `total` is how
   * many the batch held.
   */
  constructor(
    readonly action: "move" | "remove",
    readonly table: string,
    readonly failed: readonly string[],
    readonly total: number,
  ) {
    const detail = failed.slice(0, 5).join("; ");
    super(
      "PARTIAL_FAILURE",
      action === "move"
        ? `${failed.length} of ${total} partition pointers of ${table} did not move: ${detail}; the others did. Rerun to move the rest.`
        : `${failed.length} partitions of ${table} could not be removed: ${detail}`,
      { retryable: true },
    );
    this.name = "PointerBatchError";
  }
}
