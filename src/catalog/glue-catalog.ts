import {
  BatchCreatePartitionCommand, BatchDeletePartitionCommand, BatchUpdatePartitionCommand, CreateDatabaseCommand, DeleteDatabaseCommand,
  CreateTableCommand, DeleteTableCommand, GetDatabaseCommand, GetPartitionCommand, GetPartitionsCommand, GetTableCommand, GetTablesCommand,
  UpdateTableCommand, type ErrorDetail, type GlueClient, type Partition as GluePartition, type PartitionInput, type StorageDescriptor,
  type Table as GlueTable,
} from "@aws-sdk/client-glue";
import { LakeswapError } from "../model/errors.js";
import { faultPoint } from "../shared/faults.js";
import { WHOLE_TABLE, makePartition, partitionPath, type Partition } from "../model/partition.js";
import { withRetry } from "../shared/retry.js";
import type { AdaptiveLimit } from "../shared/adaptive-limit.js";
import { isRunId } from "../model/run-id.js";
import { glueColumnType } from "../model/column-types.js";
import { parseTableDefinition, tableChange, type TableDefinition } from "../model/table.js";
import { GlueIcebergTables } from "./glue-iceberg.js";
import { PointerBatchError, type Catalog, type Fence, type Pointer, type PointerMove, type PointerMoveKind } from "./catalog.js";

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

const PARQUET_STORAGE = {
  InputFormat: "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
  OutputFormat: "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
  SerdeInfo: { SerializationLibrary: "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe", Parameters: { "serialization.format": "1" } },
} as const;

/** Where a table without partition keys points before its first run (and after its pointer is removed): a prefix nothing is written under. */
const NO_RUN = "_no_run";

const P = { run: "lakeswap.run", previous: "lakeswap.previous_run", signature: "lakeswap.signature", movedBy: "lakeswap.moved_by" } as const;

/**
 * The AWS catalog: table definitions and partition pointers in the Glue Data
 * Catalog. The swap is one `UpdatePartition` (or `CreatePartition`) that sets
 * the partition's Location and its Parameters (run id, previous run,
 * signature) together; batch calls check every per-entry error.
 */
export class GlueCatalog implements Catalog {
  /** Glue's limits per batch call: BatchCreatePartition and BatchUpdatePartition take 100 entries, BatchDeletePartition 25. */
  readonly capabilities = { maxBatchUpdate: 100, maxBatchRemove: 25, pointersInStore: false } as const;

  /** The Iceberg tables of `iceberg: true` tables, beside their Hive tables (./glue-iceberg.ts). */
  readonly iceberg: GlueIcebergTables;

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
    const tables: TableDefinition[] = [];
    let token: string | undefined;
    do {
      const page = await this.send("GetTables", () => this.client.send(new GetTablesCommand({ ...this.ids, NextToken: token })));
      for (const table of page.TableList ?? []) {
        const definition = definitionOf(table);
        if (definition) tables.push(definition);
      }
      token = page.NextToken;
    } while (token);
    return tables.sort((a, b) => (a.name < b.name ? -1 : 1));
  }

  async createTable(table: TableDefinition): Promise<void> {
    // The database may have been removed since the catalog was opened (removeDatabaseIfEmpty).
    await this.open();
    const live = await this.glueTable(table.name);
    if (live) {
      const liveKeys = (live.PartitionKeys ?? []).map((k) => k.Name ?? "");
      if (liveKeys.join(",") !== table.partitionKeys.join(",")) {
        if ((await this.partitionsOf(table.name, 1)).length > 0) {
          throw new LakeswapError(
            "CONFLICT",
            `Glue table ${this.options.database}.${table.name} is partitioned by (${liveKeys.join(", ")}), not (${table.partitionKeys.join(", ")}), and has partitions; ` +
              `lakeswap will not drop them. Drop the table (lakeswap drop-table ${table.name}) or declare its keys as they are.`,
          );
        }
        // An empty table with the wrong layout is rebuilt with the declared one.
        await this.send("DeleteTable", () => this.client.send(new DeleteTableCommand({ ...this.ids, Name: table.name })));
      } else {
        const existing = definitionOf(live);
        if (!existing) throw new LakeswapError("CONFLICT", `Glue table ${this.options.database}.${table.name} exists but was not created by lakeswap; choose another name`);
        if (tableChange(existing, table) === "same") return;
        await this.addColumns(table, live);
        return;
      }
    }
    await this.send("CreateTable", () =>
      this.client.send(
        new CreateTableCommand({
          ...this.ids,
          TableInput: {
            Name: table.name,
            TableType: "EXTERNAL_TABLE",
            Parameters: { classification: "parquet", EXTERNAL: "TRUE", "parquet.compression": table.compression.toUpperCase(), "lakeswap.definition": JSON.stringify(table) },
            // A table without partition keys reads its Location: an empty prefix until its first run, never the folder its runs are written under.
            StorageDescriptor: this.storage(table, `${this.options.uriOf(table.partitionKeys.length === 0 ? `${table.name}/${NO_RUN}` : table.name)}/`),
            PartitionKeys: table.partitionKeys.map((key) => ({ Name: key, Type: "string" })),
          },
        }),
      ),
    );
    if (table.ingest) await this.untilLive(table);
  }

  async updateTable(table: TableDefinition): Promise<void> {
    const live = await this.glueTable(table.name);
    if (!live) throw new LakeswapError("STORE_ERROR", `Glue table ${this.options.database}.${table.name} is gone; rerun (lakeswap declares it again)`);
    await this.addColumns(table, live);
  }

  /**
   * An ingested table that gained columns: one UpdateTable (with the VersionId just read) sets the new columns
   * and definition, keeping its Location and Parameters; then GetTable is read until it shows them, so nothing
   * is written for the new columns before the catalog says they exist.
   */
  private async addColumns(table: TableDefinition, live: GlueTable): Promise<void> {
    const location = live.StorageDescriptor?.Location ?? `${this.options.uriOf(table.name)}/`;
    await this.send("UpdateTable", () =>
      this.client.send(
        new UpdateTableCommand({
          ...this.ids,
          VersionId: live.VersionId,
          TableInput: {
            Name: table.name,
            TableType: live.TableType ?? "EXTERNAL_TABLE",
            Parameters: { ...(live.Parameters ?? {}), "lakeswap.definition": JSON.stringify(table) },
            StorageDescriptor: this.storage(table, location),
            PartitionKeys: live.PartitionKeys ?? [],
          },
        }),
      ),
    );
    await this.untilLive(table);
  }

  /** Reads GetTable until its layout (columns, partition keys) is the declared one: the catalog's reads may lag its writes. */
  private async untilLive(table: TableDefinition): Promise<void> {
    const wanted = JSON.stringify({ columns: this.storage(table, "").Columns, keys: table.partitionKeys });
    for (let attempt = 0; ; attempt++) {
      const live = await this.glueTable(table.name);
      const seen = JSON.stringify({ columns: live?.StorageDescriptor?.Columns?.map((c) => ({ Name: c.Name, Type: c.Type })), keys: (live?.PartitionKeys ?? []).map((k) => k.Name) });
      if (seen === wanted) return;
      if (attempt >= 20) {
        throw new LakeswapError("STORE_ERROR", `Glue table ${this.options.database}.${table.name} still does not show the declared columns and partition keys after ${attempt} reads; rerun, or check the table in the Glue console`);
      }
      await new Promise((resolve) => setTimeout(resolve, Math.min(2000, 100 * 2 ** attempt)));
    }
  }

  async dropTable(name: string): Promise<void> {
    try {
      await this.send("DeleteTable", () => this.client.send(new DeleteTableCommand({ ...this.ids, Name: name })));
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
    if (table.partitionKeys.length === 0) return this.tablePointer(table);
    try {
      const response = await this.send("GetPartition", () =>
        this.client.send(new GetPartitionCommand({ ...this.ids, TableName: table.name, PartitionValues: [...partition.values] })),
      );
      return response.Partition ? this.pointerOf(table, response.Partition) : undefined;
    } catch (error) {
      if (isError(error, "EntityNotFoundException")) return undefined;
      throw error;
    }
  }

  async listPointers(table: TableDefinition): Promise<Pointer[]> {
    if (table.partitionKeys.length === 0) {
      const pointer = await this.tablePointer(table);
      return pointer ? [pointer] : [];
    }
    const pointers = (await this.partitionsOf(table.name)).map((p) => this.pointerOf(table, p));
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
      for (const { move, detail } of await this.batchCreate(table, creates, fence)) {
        // It exists after all (registered by another tool, or created concurrently): updated like any other.
        if (detail?.ErrorCode === "AlreadyExistsException") updates.push(move);
        else {
          retryCreates.push(move);
          failed(move, detail);
        }
      }
      for (const { move, detail } of await this.batchUpdate(table, updates, fence)) {
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
  private async batchCreate(table: TableDefinition, moves: readonly PointerMove[], fence: Fence | undefined): Promise<{ move: PointerMove; detail?: ErrorDetail }[]> {
    if (moves.length === 0) return [];
    const response = await this.send("BatchCreatePartition", () =>
      this.fenced(fence, () =>
        this.client.send(new BatchCreatePartitionCommand({ ...this.ids, TableName: table.name, PartitionInputList: moves.map((move) => this.partitionInput(table, move)) })),
      ),
    );
    faultPoint("during-batch-swap");
    return entryErrors(moves, (response.Errors ?? []).map((error) => ({ values: error.PartitionValues, detail: error.ErrorDetail })));
  }

  /** One BatchUpdatePartition of `moves` (none when empty), right after the fence; the entries that failed, with Glue's reason. */
  private async batchUpdate(table: TableDefinition, moves: readonly PointerMove[], fence: Fence | undefined): Promise<{ move: PointerMove; detail?: ErrorDetail }[]> {
    if (moves.length === 0) return [];
    const entries = moves.map((move) => ({ PartitionValueList: [...move.partition.values], PartitionInput: this.partitionInput(table, move) }));
    const response = await this.send("BatchUpdatePartition", () =>
      this.fenced(fence, () => this.client.send(new BatchUpdatePartitionCommand({ ...this.ids, TableName: table.name, Entries: entries }))),
    );
    faultPoint("during-batch-swap");
    return entryErrors(moves, (response.Errors ?? []).map((error) => ({ values: error.PartitionValueList, detail: error.ErrorDetail })));
  }

  /** Deletes one batch of partitions, checking every entry (a partition already gone is fine). */
  async removePointers(table: TableDefinition, partitions: readonly Partition[], fence?: Fence): Promise<void> {
    assertBatch("removePointers", partitions.length, this.capabilities.maxBatchRemove);
    if (table.partitionKeys.length === 0) {
      if (partitions.length > 0) await this.updateTableLocation(table, `${table.name}/${NO_RUN}`, () => ({}), fence);
      return;
    }
    if (partitions.length === 0) return;
    const response = await this.send("BatchDeletePartition", () =>
      this.fenced(fence, () =>
        this.client.send(new BatchDeletePartitionCommand({ ...this.ids, TableName: table.name, PartitionsToDelete: partitions.map((p) => ({ Values: [...p.values] })) })),
      ),
    );
    const failed = (response.Errors ?? [])
      .filter((error) => error.ErrorDetail?.ErrorCode !== "EntityNotFoundException")
      .map((error) => `${(error.PartitionValues ?? []).join("/")}: ${error.ErrorDetail?.ErrorCode}`);
    if (failed.length > 0) throw new PointerBatchError("remove", table.name, failed, partitions.length);
  }

  /** The pointer of a table without partition keys: its own Location and Parameters. */
  private async tablePointer(table: TableDefinition): Promise<Pointer | undefined> {
    const live = await this.glueTable(table.name);
    const parameters = live?.Parameters ?? {};
    const runId = parameters[P.run];
    if (!live || runId === undefined) return undefined;
    if (!isRunId(runId)) throw new LakeswapError("STORE_ERROR", `Glue table ${table.name} names run '${runId}' in its ${P.run} parameter, which is not a run id`);
    return { partition: WHOLE_TABLE, runId, previousRunId: parameters[P.previous], signature: parameters[P.signature], movedBy: parameters[P.movedBy] as PointerMoveKind | undefined };
  }

  /**
   * The swap of a table without partition keys: one UpdateTable that sets its
   * Location and its Parameters (run, previous run, signature) together, on the
   * version of the table just read (a concurrent change fails it, never mixes).
   */
  private async moveTablePointer(table: TableDefinition, move: PointerMove, fence?: Fence): Promise<void> {
    await this.updateTableLocation(table, move.location.replace(/\/$/, ""), () => {
      const parameters: Record<string, string> = { [P.run]: move.runId, [P.movedBy]: move.kind };
      if (move.previousRunId) parameters[P.previous] = move.previousRunId;
      if (move.signature) parameters[P.signature] = move.signature;
      return parameters;
    }, fence);
  }

  private async updateTableLocation(table: TableDefinition, key: string, pointerParameters: () => Record<string, string>, fence?: Fence): Promise<void> {
    await withRetry(`glue:UpdateTable on table ${table.name}`, async () => {
      const live = await this.glueTable(table.name);
      if (!live) throw new LakeswapError("NOT_FOUND", `Glue table ${this.options.database}.${table.name} does not exist; its pointer cannot move`);
      const kept = Object.fromEntries(Object.entries(live.Parameters ?? {}).filter(([name]) => !(Object.values(P) as string[]).includes(name)));
      await fence?.();
      await this.client.send(
        new UpdateTableCommand({
          ...this.ids,
          VersionId: live.VersionId,
          TableInput: {
            Name: table.name,
            TableType: live.TableType ?? "EXTERNAL_TABLE",
            Parameters: { ...kept, ...pointerParameters() },
            StorageDescriptor: this.storage(table, `${this.options.uriOf(key)}/`),
            PartitionKeys: [],
          },
        }),
      );
    });
  }

  private storage(table: TableDefinition, location: string): StorageDescriptor {
    return {
      Columns: table.columns.map((c) => ({ Name: c.name, Type: glueType(c.type) })),
      Location: location,
      ...PARQUET_STORAGE,
      Compressed: true,
    };
  }

  private partitionInput(table: TableDefinition, move: PointerMove): PartitionInput {
    const parameters: Record<string, string> = { [P.run]: move.runId, [P.movedBy]: move.kind };
    if (move.previousRunId) parameters[P.previous] = move.previousRunId;
    if (move.signature) parameters[P.signature] = move.signature;
    const location = `${this.options.uriOf(move.location.replace(/\/$/, ""))}/`;
    return { Values: [...move.partition.values], StorageDescriptor: this.storage(table, location), Parameters: parameters };
  }

  private pointerOf(table: TableDefinition, partition: GluePartition): Pointer {
    const values = partition.Values ?? [];
    const parsed = makePartition(table.partitionKeys.map((key, i) => [key, values[i] ?? ""] as const));
    const parameters = partition.Parameters ?? {};
    const location = partition.StorageDescriptor?.Location ?? "";
    const runId = parameters[P.run] ?? /run=([^/]+)\/?$/.exec(location)?.[1] ?? "";
    if (!isRunId(runId)) {
      throw new LakeswapError(
        "STORE_ERROR",
        `Glue partition ${table.name}/${partitionPath(parsed)} points to '${location}', which is not a lakeswap run; replace it with lakeswap replace`,
      );
    }
    return {
      partition: parsed,
      runId,
      previousRunId: parameters[P.previous],
      signature: parameters[P.signature],
      movedBy: parameters[P.movedBy] as PointerMoveKind | undefined,
    };
  }

  private async glueTable(name: string): Promise<GlueTable | undefined> {
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

/** The table definition lakeswap stored with a Glue table, or undefined for tables it did not create. */
function definitionOf(table: GlueTable): TableDefinition | undefined {
  const stored = table.Parameters?.["lakeswap.definition"];
  if (!stored) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(stored);
  } catch {
    throw new LakeswapError("STORE_ERROR", `Glue table ${table.Name} has a lakeswap.definition parameter that is not JSON; restore it (lakeswap create-table writes it) or drop the table`);
  }
  return parseTableDefinition(value, `lakeswap.definition of Glue table ${table.Name}`);
}

/** The Hive/Glue type of a declared column type (one mapping for every backend: ../model/column-types.ts). */
function glueType(type: string): string {
  return glueColumnType(type);
}

function isError(error: unknown, name: string): boolean {
  return (error as { name?: string }).name === name;
}

function sameValues(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}

/** The moves whose entries Glue reported as failed, each with its reason (an entry is named by its partition values). */
function entryErrors(
  moves: readonly PointerMove[],
  errors: readonly { values?: readonly string[]; detail?: ErrorDetail }[],
): { move: PointerMove; detail?: ErrorDetail }[] {
  return errors.flatMap((error) => {
    const move = moves.find((m) => sameValues(m.partition.values, error.values ?? []));
    return move ? [{ move, detail: error.detail }] : [];
  });
}

/** A batch larger than the catalog takes is the caller's mistake: the lake splits batches by the catalog's capabilities. */
function assertBatch(call: string, size: number, most: number): void {
  if (size > most) throw new Error(`GlueCatalog.${call} takes at most ${most} entries per call, not ${size}: split the batch (../lake/commit/move.ts)`);
}
