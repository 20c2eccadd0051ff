import {
  BatchCreatePartitionCommand, BatchDeletePartitionCommand, BatchUpdatePartitionCommand, CreateDatabaseCommand, DeleteDatabaseCommand,
  CreateTableCommand, DeleteTableCommand, GetDatabaseCommand, GetPartitionCommand, GetPartitionsCommand, GetTableCommand, GetTablesCommand,
  UpdateTableCommand, type Column, type ErrorDetail, type GlueClient, type Partition as GluePartition, type PartitionInput, type Table as GlueTable,
} from "@aws-sdk/client-glue";
import { LakeswapError, TableCreatedMeanwhileError } from "../model/errors.js";
import { faultPoint } from "../shared/faults.js";
import { partitionPath, type Partition } from "../model/partition.js";
import { withRetry } from "../shared/retry.js";
import type { AdaptiveLimit } from "../shared/adaptive-limit.js";
import { sameDeclaration, storageName, tableChange, type TableDefinition } from "../model/table.js";
import { GlueIcebergTables } from "./glue-iceberg.js";
import { ATHENA_WIDENS, athenaRebuildRefusal } from "./athena-columns.js";
import { HeldReads } from "./held-reads.js";
import {
  LAYOUT_OF, NO_RUN, POINTER_PARAMETERS, tablePointerOf, VIEW, VIEW_PARAMETERS, declaredParameters, definitionOf, entryErrors, newTableInput, partitionInput, pointerOf, pointerParameters,
  sameColumns, storageDescriptor, viewInput,
} from "./glue-shapes.js";
import { PointerBatchError, type Catalog, type Fence, type Pointer, type PointerMove } from "./catalog.js";

/** Where the Glue catalog keeps tables, and how it reaches their data. */
export interface GlueCatalogOptions {
  readonly database: string;
  /** The Data Catalog id (account), when not the caller's own. */
  readonly catalogId?: string;
  /** The s3:// URI of a store key: table roots and run folders live in the lake's store. */
  readonly uriOf: (key: string) => string;
  /** An auto-tuned limit every Glue call runs through (the collector's ATHENA_GLUE_CONTROL_PLANE_CONCURRENCY); none by default. */
  readonly limit?: AdaptiveLimit;
}

/**
 * The AWS catalog: table definitions and partition pointers in the Glue Data
 * Catalog. The swap is one `UpdatePartition` (or `CreatePartition`) that sets
 * the partition's Location and its Parameters (run id, previous run,
 * signature) together; batch calls check every per-entry error.
 */
export class GlueCatalog implements Catalog {
  /** Glue's limits per batch call: BatchCreatePartition and BatchUpdatePartition take 100 entries, BatchDeletePartition 25. */
  readonly capabilities = { maxBatchUpdate: 100, maxBatchRemove: 25, pointersInStore: false, readsRunsByName: false } as const;

  /** The Iceberg tables of `iceberg: true` tables, beside their Hive tables (./glue-iceberg.ts). */
  readonly iceberg: GlueIcebergTables;
  /** The columns the Glue table held when a definition was last moved with (its JSON): read once per table and definition. */
  private readonly seenColumns = new Map<string, { definition: string; columns: Column[] }>();
  /** The GetTable answers of the tables whose writer lease this process holds (holdTable), forgotten when this catalog writes them. */
  private readonly held = new HeldReads<GlueTable | undefined>();

  constructor(
    private readonly client: GlueClient,
    private readonly options: GlueCatalogOptions,
  ) {
    this.iceberg = new GlueIcebergTables(client, options);
  }

  private get ids(): { CatalogId?: string; DatabaseName: string } {
    return { CatalogId: this.options.catalogId, DatabaseName: this.options.database };
  }

  async open(): Promise<void> {
    try {
      await this.send("GetDatabase", () => this.client.send(new GetDatabaseCommand({ CatalogId: this.options.catalogId, Name: this.options.database })));
    } catch (error) {
      if (!isError(error, "EntityNotFoundException")) throw error;
      try {
        await this.send("CreateDatabase", () =>
          this.client.send(new CreateDatabaseCommand({ CatalogId: this.options.catalogId, DatabaseInput: { Name: this.options.database, Description: "lakeswap tables" } })),
        );
      } catch (createError) {
        if (!isError(createError, "AlreadyExistsException")) throw createError;
      }
    }
  }

  async getTable(name: string): Promise<TableDefinition | undefined> {
    const table = await this.glueTable(name);
    return table ? definitionOf(table) : undefined;
  }

  async listTables(): Promise<TableDefinition[]> {
    // A layout's own Glue table carries no definition (createLayout): only the table it is a layout of is listed.
    const tables = (await this.allGlueTables()).flatMap((table) => definitionOf(table) ?? []);
    return tables.sort((a, b) => (a.name < b.name ? -1 : 1));
  }

  /** Every table of the database, following NextToken to the last page. */
  private async allGlueTables(): Promise<GlueTable[]> {
    const tables: GlueTable[] = [];
    let token: string | undefined;
    do {
      const page = await this.send("GetTables", () => this.client.send(new GetTablesCommand({ ...this.ids, NextToken: token })));
      tables.push(...(page.TableList ?? []));
      token = page.NextToken;
    } while (token);
    return tables;
  }

  async createTable(table: TableDefinition): Promise<void> {
    // The database may have been removed since the catalog was opened (removeDatabaseIfEmpty).
    await this.open();
    const live = await this.glueTable(table.name);
    if (live) {
      const liveKeys = (live.PartitionKeys ?? []).map((k) => k.Name ?? "");
      // A table switched to another layout of it is a view over that layout (updateTable), whose keys its definition names.
      if (live.TableType !== VIEW && liveKeys.join(",") !== table.partitionKeys.join(",")) {
        if ((await this.partitionsOf(table.name, 1)).length > 0) {
          throw new LakeswapError(
            "CONFLICT",
            `Glue table ${this.options.database}.${table.name} is partitioned by (${liveKeys.join(", ")}), not (${table.partitionKeys.join(", ")}), and has partitions; ` +
              `lakeswap will not drop them. Drop the table (lakeswap drop-table ${table.name}) or declare its keys as they are.`,
          );
        }
        // An empty table with the wrong layout is rebuilt with the declared one.
        await this.held.writing(table.name, () => this.send("DeleteTable", () => this.client.send(new DeleteTableCommand({ ...this.ids, Name: table.name }))));
      } else {
        const existing = definitionOf(live);
        if (!existing) throw new LakeswapError("CONFLICT", `Glue table ${this.options.database}.${table.name} exists but was not created by lakeswap; choose another name`);
        // The same definition again is a no-op, one that cannot be is refused naming why (tableChange); a change is never
        // written over it here: the caller judges the declaration against that table, and makes a change with updateTable.
        if (tableChange(existing, table) === "same") return;
        throw new TableCreatedMeanwhileError(table.name, `Glue database ${this.options.database}`);
      }
    }
    const input = newTableInput(table, this.options.uriOf);
    try {
      await this.held.writing(table.name, () => this.send("CreateTable", () => this.client.send(new CreateTableCommand({ ...this.ids, TableInput: input }))));
    } catch (error) {
      // Another writer created it since it was read: as declared here, or not written over.
      if (!isError(error, "AlreadyExistsException")) throw error;
      const created = await this.glueTable(table.name);
      const definition = created ? definitionOf(created) : undefined;
      if (!definition || !sameDeclaration(definition, table)) throw new TableCreatedMeanwhileError(table.name, `Glue database ${this.options.database}`);
    }
    if (table.ingest) await this.untilLive(table);
  }

  /**
   * The Glue table of a new layout of a table (lake/operations/relayout.ts), with the layout's partition keys and
   * columns and no partition yet: the layout's pointers are its partitions. Nobody reads it until `updateTable` switches
   * the table to it. Made again by a rerun, it is kept (a layout of another table of that name is refused).
   */
  async createLayout(table: TableDefinition): Promise<void> {
    const storage = storageName(table);
    if (storage === table.name) return;
    try {
      await this.held.writing(storage, () => this.send("CreateTable", () => this.client.send(new CreateTableCommand({ ...this.ids, TableInput: newTableInput(table, this.options.uriOf) }))));
    } catch (error) {
      if (!isError(error, "AlreadyExistsException")) throw error;
      const of = (await this.glueTable(storage, true))?.Parameters?.[LAYOUT_OF];
      if (of !== table.name) {
        throw new LakeswapError("CONFLICT", `Glue table ${this.options.database}.${storage} exists and is not a layout of ${table.name}; drop it, or rerun (the next layout gets another name)`);
      }
    }
    await this.untilLive(table);
  }

  /** Drops the Glue table of a layout GC removed (its partitions are gone); the table's own entry is never dropped here. */
  async dropLayout(table: TableDefinition): Promise<void> {
    const storage = storageName(table);
    if (storage !== table.name) await this.deleteTable(storage);
  }

  /** What Athena could not read while a rebuild's pointers move (./athena-columns.ts). */
  readonly rebuildRefusal = athenaRebuildRefusal;
  /** Writes a table's changed definition and columns over the live ones, and every partition's columns (changeColumns); `fence` before each partition batch. */
  async updateTable(table: TableDefinition, fence?: Fence): Promise<void> {
    const storage = storageName(table);
    if (storage === table.name) {
      const live = await this.glueTable(table.name);
      if (!live) throw new LakeswapError("STORE_ERROR", `Glue table ${this.options.database}.${table.name} is gone; rerun (lakeswap declares it again)`);
      // A table that was a view over another layout of it is a table again at its last step (putTable): a rollback of a change of partition keys.
      await this.changeColumns(table, live, fence);
      return;
    }
    // A table in a layout of its own (lake/operations/relayout.ts): that layout's Glue table takes the columns (and its
    // partitions theirs); then, in one UpdateTable, the table becomes a view over it, which every reader reads from then on.
    let live = await this.glueTable(storage, true);
    if (!live) {
      await this.createLayout(table);
      live = await this.glueTable(storage, true);
    }
    if (!live) throw new LakeswapError("STORE_ERROR", `Glue table ${this.options.database}.${storage} (a layout of ${table.name}) is gone; rerun`);
    await this.changeColumns(table, live, fence);
    await this.putView(table);
  }

  /**
   * Makes the table's own Glue entry an Athena view over the Glue table of its layout (`SELECT *`, the columns and then
   * the partition keys as the layout has them), in one UpdateTable on the version just read, with the table's
   * definition: readers of the table read the new layout from this call on, through Athena's pruning of the view's
   * partition keys. What the entry held as a table stays (its partitions, the Location of a table without keys): a
   * rollback makes it the table it was (putTable).
   */
  private async putView(table: TableDefinition): Promise<void> {
    await this.held.writing(table.name, () => withRetry(`glue:UpdateTable on table ${table.name}`, async () => {
      const live = await this.glueTable(table.name, true);
      if (!live) throw new LakeswapError("STORE_ERROR", `Glue table ${this.options.database}.${table.name} is gone; rerun (lakeswap declares it again)`);
      const input = viewInput(table, this.options.database, live);
      await this.client.send(new UpdateTableCommand({ ...this.ids, VersionId: live.VersionId, TableInput: input }));
    }));
    for (let attempt = 0; (await this.glueTable(table.name, true))?.Parameters?.["lakeswap.definition"] !== JSON.stringify(table); attempt++) {
      if (attempt >= 20) throw new LakeswapError("STORE_ERROR", `Glue table ${this.options.database}.${table.name} still does not show its new layout after ${attempt} reads; rerun, or check the table in the Glue console`);
      await new Promise((resolve) => setTimeout(resolve, Math.min(2000, 100 * 2 ** attempt)));
    }
  }

  /**
   * A table whose columns change, in steps that keep every Athena query valid (a partition column type neither the
   * table's nor one Athena widens to it, ATHENA_WIDENS, is HIVE_PARTITION_SCHEMA_MISMATCH) and that a rerun finishes:
   * 1. a column whose type changes as Athena does not widen (DECIMAL precision) leaves every partition's columns: its files are read by name as the table's type;
   * 2. the table's columns before the partitions': a partition narrower than its table is read (int as bigint), a wider one is not;
   * 3. every partition's columns set to the table's (GetPartitions, then BatchUpdatePartition of 100);
   * 4. last, the definition and compression: until then getTable gives the old definition, so a rerun plans it again.
   */
  private async changeColumns(table: TableDefinition, live: GlueTable, fence?: Fence): Promise<void> {
    this.seenColumns.delete(storageName(table));
    const columns = storageDescriptor(table, "").Columns ?? [];
    // No partition to change (none yet, or a rerun after step 3): one UpdateTable.
    if (table.partitionKeys.length > 0 && (await this.partitionsOf(storageName(table))).some((p) => !sameColumns(p.StorageDescriptor?.Columns ?? [], columns))) {
      const was = live.StorageDescriptor?.Columns ?? [];
      const typeOf = (name?: string) => columns.find((c) => c.Name === name)?.Type;
      const stepping = was.filter((c) => typeOf(c.Name) !== undefined && typeOf(c.Name) !== c.Type && !ATHENA_WIDENS[c.Type ?? ""]?.includes(typeOf(c.Name) ?? ""));
      if (stepping.length > 0) await this.setPartitionColumns(table, was.filter((c) => !stepping.includes(c)), fence);
      if (!sameColumns(was, columns)) await this.putTable(table, false);
      await this.setPartitionColumns(table, columns, fence);
    }
    await this.putTable(table, true);
  }

  /** One UpdateTable of the table as read (again each attempt) with the declared columns, and definition where `definition`; then untilLive. */
  private async putTable(table: TableDefinition, definition: boolean): Promise<void> {
    const name = storageName(table);
    await this.held.writing(name, () => withRetry(`glue:UpdateTable on table ${name}`, async () => {
      const live = await this.glueTable(name, true);
      if (!live) throw new LakeswapError("STORE_ERROR", `Glue table ${this.options.database}.${name} is gone; rerun (lakeswap declares it again)`);
      const declared = { ...declaredParameters(table), "parquet.compression": table.compression.toUpperCase() };
      const storage = storageDescriptor(table, live.StorageDescriptor?.Location ?? `${this.options.uriOf(name)}/`);
      // Always a table of the declared partition keys: one that was a view over another layout of it (putView) is a table again, its partitions as they were.
      const input = { Name: name, TableType: "EXTERNAL_TABLE", PartitionKeys: table.partitionKeys.map((key) => ({ Name: key, Type: "string" })) };
      const parameters = Object.fromEntries(Object.entries(live.Parameters ?? {}).filter(([key]) => live.TableType !== VIEW || !VIEW_PARAMETERS.includes(key)));
      const changed = definition ? { Parameters: { ...parameters, ...declared }, StorageDescriptor: { ...live.StorageDescriptor, ...storage } } : { Parameters: parameters, StorageDescriptor: { ...live.StorageDescriptor, Columns: storage.Columns } };
      await this.client.send(new UpdateTableCommand({ ...this.ids, VersionId: live.VersionId, TableInput: { ...input, ...changed } }));
    }));
    await this.untilLive(table);
  }

  /** Sets the columns of every partition whose differ, keeping the rest (Location, pointer Parameters): batches of 100, every entry checked. */
  private async setPartitionColumns(table: TableDefinition, columns: readonly Column[], fence?: Fence): Promise<void> {
    const stale = (await this.partitionsOf(storageName(table))).filter((p) => !sameColumns(p.StorageDescriptor?.Columns ?? [], columns));
    const input = (p: GluePartition): PartitionInput =>
      ({ Values: p.Values, Parameters: p.Parameters, LastAccessTime: p.LastAccessTime, LastAnalyzedTime: p.LastAnalyzedTime, StorageDescriptor: { ...p.StorageDescriptor, Columns: [...columns] } });
    for (let start = 0; start < stale.length; start += this.capabilities.maxBatchUpdate) {
      let pending = stale.slice(start, start + this.capabilities.maxBatchUpdate);
      await withRetry(`glue:BatchUpdatePartition (columns) on table ${table.name}`, async () => {
        const failed = await this.batchUpdate(storageName(table), pending, (p) => ({ values: p.Values ?? [], input: input(p) }), fence);
        // A partition removed meanwhile has no columns left to set.
        const again = failed.filter(({ detail }) => detail?.ErrorCode !== "EntityNotFoundException");
        pending = again.map(({ item }) => item);
        if (again.length === 0) return;
        const named = again.slice(0, 5).map(({ item, detail }) => `${(item.Values ?? []).join("/")} (${detail?.ErrorCode}: ${detail?.ErrorMessage ?? ""})`);
        throw new LakeswapError("PARTIAL_FAILURE", `${again.length} partitions of ${table.name} did not take the table's columns: ${named.join("; ")}; rerun to finish`, { retryable: true });
      }, { attempts: 5 });
    }
  }

  /** Reads GetTable until its layout (columns, partition keys) is the declared one: the catalog's reads may lag its writes. */
  private async untilLive(table: TableDefinition): Promise<void> {
    const wanted = JSON.stringify({ columns: storageDescriptor(table, "").Columns, keys: table.partitionKeys });
    for (let attempt = 0; ; attempt++) {
      const live = await this.glueTable(storageName(table), true);
      const seen = JSON.stringify({ columns: live?.StorageDescriptor?.Columns?.map((c) => ({ Name: c.Name, Type: c.Type })), keys: (live?.PartitionKeys ?? []).map((k) => k.Name) });
      if (seen === wanted) return;
      if (attempt >= 20) throw new LakeswapError("STORE_ERROR", `Glue table ${this.options.database}.${storageName(table)} still does not show the declared columns and partition keys after ${attempt} reads; rerun, or check the table in the Glue console`);
      await new Promise((resolve) => setTimeout(resolve, Math.min(2000, 100 * 2 ** attempt)));
    }
  }

  /** Drops the table's Glue entry (a table, or a view over a layout of it: the lake drops its layouts' tables first, dropLayout). */
  async dropTable(name: string): Promise<void> {
    await this.deleteTable(name);
  }

  private async deleteTable(name: string): Promise<void> {
    try {
      await this.held.writing(name, () => this.send("DeleteTable", () => this.client.send(new DeleteTableCommand({ ...this.ids, Name: name }))));
    } catch (error) {
      if (!isError(error, "EntityNotFoundException")) throw error;
    }
  }

  /** Removes the Glue database when no table is left in it (the demo's teardown); not part of the Catalog port. */
  async removeDatabaseIfEmpty(): Promise<boolean> {
    const page = await this.send("GetTables", () => this.client.send(new GetTablesCommand({ ...this.ids, MaxResults: 1 })));
    if ((page.TableList ?? []).length > 0) return false;
    try {
      await this.send("DeleteDatabase", () => this.client.send(new DeleteDatabaseCommand({ CatalogId: this.options.catalogId, Name: this.options.database })));
    } catch (error) {
      if (!isError(error, "EntityNotFoundException")) throw error;
    }
    return true;
  }

  async getPointer(table: TableDefinition, partition: Partition): Promise<Pointer | undefined> {
    if (table.partitionKeys.length === 0) return tablePointerOf(table, await this.glueTable(storageName(table)));
    try {
      const response = await this.send("GetPartition", () => this.client.send(new GetPartitionCommand({ ...this.ids, TableName: storageName(table), PartitionValues: [...partition.values] })));
      return response.Partition ? pointerOf(table, response.Partition) : undefined;
    } catch (error) {
      if (isError(error, "EntityNotFoundException")) return undefined;
      throw error;
    }
  }

  async listPointers(table: TableDefinition): Promise<Pointer[]> {
    if (table.partitionKeys.length === 0) {
      const pointer = tablePointerOf(table, await this.glueTable(storageName(table)));
      return pointer ? [pointer] : [];
    }
    const pointers = (await this.partitionsOf(storageName(table))).map((p) => pointerOf(table, p));
    return pointers.sort((a, b) => (partitionPath(a.partition) < partitionPath(b.partition) ? -1 : 1));
  }

  /**
   * Moves one batch of pointers: BatchCreatePartition for partitions the writer found no pointer for,
   * BatchUpdatePartition for the others. Every entry's result is checked: an update of a partition that
   * does not exist becomes a create, a create of one that exists becomes an update, other failed entries
   * are retried with backoff, and what still fails is reported by partition.
   */
  async movePointers(table: TableDefinition, moves: readonly PointerMove[], fence?: Fence): Promise<void> {
    assertBatch("movePointers", moves.length, this.capabilities.maxBatchUpdate);
    if (table.partitionKeys.length === 0) {
      // One unit: the last move is where it ends, as one after the other would.
      const last = moves.at(-1);
      if (last) await this.moveTablePointer(table, last, fence);
      return;
    }
    const columns = moves.some((move) => move.newColumns) ? (storageDescriptor(table, "").Columns ?? []) : await this.liveColumns(table);
    const entry = (move: PointerMove) => ({ values: move.partition.values, input: partitionInput(table, columns, move, this.options.uriOf) });
    let creates = moves.filter((move) => move.previousRunId === undefined);
    let updates = moves.filter((move) => move.previousRunId !== undefined);
    const reasons = new Map<string, string>();
    const failed = (move: PointerMove, detail: ErrorDetail | undefined): void => {
      reasons.set(partitionPath(move.partition), `${detail?.ErrorCode}: ${detail?.ErrorMessage ?? ""}`);
    };
    // One round sends every pending entry; entries that failed go again in the next round, with the shared retry's backoff.
    const round = async (): Promise<void> => {
      const retryCreates: PointerMove[] = [];
      const retryUpdates: PointerMove[] = [];
      for (const { item: move, detail } of await this.batchCreate(table, creates, columns, fence)) {
        // It exists after all (registered by another tool, or created concurrently): updated like any other.
        if (detail?.ErrorCode === "AlreadyExistsException") updates.push(move);
        else {
          retryCreates.push(move);
          failed(move, detail);
        }
      }
      for (const { item: move, detail } of await this.batchUpdate(storageName(table), updates, entry, fence)) {
        if (detail?.ErrorCode === "EntityNotFoundException") retryCreates.push(move);
        else {
          retryUpdates.push(move);
          failed(move, detail);
        }
      }
      creates = retryCreates;
      updates = retryUpdates;
      const pending = [...updates, ...creates];
      if (pending.length === 0) return;
      const named = pending.map((m) => `${partitionPath(m.partition)} (${reasons.get(partitionPath(m.partition)) ?? "not found, then created concurrently"})`);
      throw new PointerBatchError("move", table.name, named, moves.length);
    };
    await withRetry(`glue:Batch*Partition on table ${table.name}`, round, { attempts: 5 });
  }

  /** One BatchCreatePartition of `moves` (none when empty), right after the fence; the entries that failed, with Glue's reason. */
  private async batchCreate(table: TableDefinition, moves: readonly PointerMove[], columns: readonly Column[], fence: Fence | undefined): Promise<{ item: PointerMove; detail?: ErrorDetail }[]> {
    if (moves.length === 0) return [];
    const PartitionInputList = moves.map((move) => partitionInput(table, columns, move, this.options.uriOf));
    const response = await this.send("BatchCreatePartition", () => this.fenced(fence, () => this.client.send(new BatchCreatePartitionCommand({ ...this.ids, TableName: storageName(table), PartitionInputList }))));
    faultPoint("during-batch-swap");
    return entryErrors(moves, (move) => move.partition.values, (response.Errors ?? []).map((error) => ({ values: error.PartitionValues, detail: error.ErrorDetail })));
  }

  /** One BatchUpdatePartition of `items` (none when empty; `entry` gives each one's values and input), right after the fence; the entries that failed, with Glue's reason. */
  private async batchUpdate<T>(table: string, items: readonly T[], entry: (item: T) => { values: readonly string[]; input: PartitionInput }, fence?: Fence): Promise<{ item: T; detail?: ErrorDetail }[]> {
    if (items.length === 0) return [];
    const entries = items.map(entry).map(({ values, input }) => ({ PartitionValueList: [...values], PartitionInput: input }));
    const response = await this.send("BatchUpdatePartition", () =>
      this.fenced(fence, () => this.client.send(new BatchUpdatePartitionCommand({ ...this.ids, TableName: table, Entries: entries }))),
    );
    faultPoint("during-batch-swap");
    return entryErrors(items, (item) => entry(item).values, (response.Errors ?? []).map((error) => ({ values: error.PartitionValueList, detail: error.ErrorDetail })));
  }

  /** Deletes one batch of partitions, checking every entry (a partition already gone is fine). */
  async removePointers(table: TableDefinition, partitions: readonly Partition[], fence?: Fence): Promise<void> {
    assertBatch("removePointers", partitions.length, this.capabilities.maxBatchRemove);
    if (table.partitionKeys.length === 0) {
      if (partitions.length > 0) await this.updateTableLocation(table, `${storageName(table)}/${NO_RUN}`, () => ({}), fence);
      return;
    }
    if (partitions.length === 0) return;
    // The partitions of a table's first layout stay on its Glue entry while that entry is a view over a later layout
    // (putView), where Glue changes none of them (InvalidInputException: a view has no partition keys). Nobody reads
    // them there; they go with the entry (dropTable), or are read again once a rollback makes it the table it was.
    if (storageName(table) === table.name && (await this.glueTable(table.name))?.TableType === VIEW) return;
    const PartitionsToDelete = partitions.map((p) => ({ Values: [...p.values] }));
    const response = await this.send("BatchDeletePartition", () => this.fenced(fence, () => this.client.send(new BatchDeletePartitionCommand({ ...this.ids, TableName: storageName(table), PartitionsToDelete }))));
    const failed = (response.Errors ?? []).filter((error) => error.ErrorDetail?.ErrorCode !== "EntityNotFoundException").map((error) => `${(error.PartitionValues ?? []).join("/")}: ${error.ErrorDetail?.ErrorCode}`);
    if (failed.length > 0) throw new PointerBatchError("remove", table.name, failed, partitions.length);
  }

  /**
   * The swap of a table without partition keys: one UpdateTable that sets its
   * Location and its Parameters (run, previous run, signature) together, on the
   * version of the table just read (a concurrent change fails it, never mixes).
   */
  private async moveTablePointer(table: TableDefinition, move: PointerMove, fence?: Fence): Promise<void> {
    await this.updateTableLocation(table, move.location.replace(/\/$/, ""), () => pointerParameters(move), fence);
  }

  private async updateTableLocation(table: TableDefinition, key: string, pointerParameters: () => Record<string, string>, fence?: Fence): Promise<void> {
    const name = storageName(table);
    await this.held.writing(name, () => withRetry(`glue:UpdateTable on table ${name}`, async () => {
      const live = await this.glueTable(name, true);
      if (!live) throw new LakeswapError("NOT_FOUND", `Glue table ${this.options.database}.${table.name} does not exist; its pointer cannot move`);
      const kept = Object.fromEntries(Object.entries(live.Parameters ?? {}).filter(([name]) => !POINTER_PARAMETERS.includes(name)));
      await fence?.();
      // The columns Glue holds (a schema change writes them), never an older definition's the caller may have read.
      const storage = { ...storageDescriptor(table, `${this.options.uriOf(key)}/`), ...(live.StorageDescriptor?.Columns ? { Columns: live.StorageDescriptor.Columns } : {}) };
      const input = { Name: name, TableType: live.TableType ?? "EXTERNAL_TABLE", Parameters: { ...kept, ...pointerParameters() }, StorageDescriptor: storage, PartitionKeys: [] };
      await this.client.send(new UpdateTableCommand({ ...this.ids, VersionId: live.VersionId, TableInput: input }));
    }));
  }

  /** The Glue table's columns, for the partitions a move writes: a change killed before its last step holds them under the old definition. */
  private async liveColumns(table: TableDefinition): Promise<Column[]> {
    const definition = JSON.stringify(table);
    const seen = this.seenColumns.get(storageName(table));
    if (seen?.definition === definition) return seen.columns;
    const columns = (await this.glueTable(storageName(table)))?.StorageDescriptor?.Columns ?? storageDescriptor(table, "").Columns ?? [];
    this.seenColumns.set(storageName(table), { definition, columns });
    return columns;
  }

  holdTable(name: string): () => void {
    return this.held.hold(name);
  }

  /** The table as Glue holds it: read once while this process holds its lease (holdTable), unless `fresh` (a read a write's VersionId comes from). */
  private async glueTable(name: string, fresh = false): Promise<GlueTable | undefined> {
    return fresh ? this.readGlueTable(name) : this.held.read(name, () => this.readGlueTable(name));
  }

  private async readGlueTable(name: string): Promise<GlueTable | undefined> {
    try {
      return (await this.send("GetTable", () => this.client.send(new GetTableCommand({ ...this.ids, Name: name })))).Table;
    } catch (error) {
      if (isError(error, "EntityNotFoundException")) return undefined;
      throw error;
    }
  }

  /** Every partition of a table, following NextToken to the last page (or the first `limit`). */
  private async partitionsOf(table: string, limit?: number): Promise<GluePartition[]> {
    const partitions: GluePartition[] = [];
    let token: string | undefined;
    do {
      const page = await this.send("GetPartitions", () =>
        // Pages of 1,000, the most Glue returns at once: a listing of a table of 10,000 partitions is 10 calls.
        this.client.send(new GetPartitionsCommand({ ...this.ids, TableName: table, NextToken: token, MaxResults: limit ?? 1000 })),
      );
      partitions.push(...(page.Partitions ?? []));
      token = limit !== undefined && partitions.length >= limit ? undefined : page.NextToken;
    } while (token);
    return partitions;
  }

  /** A call that moves pointers, right after the writer's fence (every attempt of it: a retry may come long after). */
  private async fenced<T>(fence: Fence | undefined, call: () => Promise<T>): Promise<T> {
    await fence?.();
    faultPoint("after-fence");
    return call();
  }

  private send<T>(operation: string, call: () => Promise<T>): Promise<T> {
    const limit = this.options.limit;
    return withRetry(`glue:${operation} on database ${this.options.database}`, limit ? () => limit.run(call) : call);
  }
}

function isError(error: unknown, name: string): boolean {
  return (error as { name?: string }).name === name;
}

/** A batch larger than the catalog takes is the caller's mistake: the lake splits batches by the catalog's capabilities. */
function assertBatch(call: string, size: number, most: number): void {
  if (size > most) throw new Error(`GlueCatalog.${call} takes at most ${most} entries per call, not ${size}: split the batch (../lake/commit/move.ts)`);
}
