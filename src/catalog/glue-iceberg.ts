import { CreateTableCommand, DeleteTableCommand, GetTableCommand, UpdateTableCommand, type Column as GlueColumn, type GlueClient, type Table as GlueTable, type TableInput } from "@aws-sdk/client-glue";
import { icebergGlueColumnType } from "../model/column-types.js";
import { LakeswapError } from "../model/errors.js";
import type { TableDefinition } from "../model/table.js";
import type { AdaptiveLimit } from "../shared/adaptive-limit.js";
import { isTransient, withRetry } from "../shared/retry.js";
import { icebergSchemaFields, type SchemaField } from "./iceberg/table-metadata.js";
import type { IcebergCatalog, IcebergCommitOutcome, IcebergHead } from "./iceberg-catalog.js";

/** Where the Glue Iceberg tables are kept: the lake's Glue database. */
export interface GlueIcebergOptions {
  readonly database: string;
  readonly catalogId?: string;
  readonly limit?: AdaptiveLimit;
}

/** The name of an `iceberg: true` table's Glue Iceberg table, beside its Hive table, unless it names one (`iceberg_table`): `<table>_iceberg`. */
const SUFFIX = "_iceberg";

/** The parameters Iceberg's Glue catalogs (Iceberg's own, Trino's, pyiceberg's) read and write, and lakeswap's mark. */
const P = { type: "table_type", metadata: "metadata_location", previous: "previous_metadata_location", table: "lakeswap.table" } as const;

/** Glue's answers to a commit that lost a race: the entry exists already, or moved since its VersionId was read. Never retried as they are. */
const LOST_RACE = new Set(["AlreadyExistsException", "ConcurrentModificationException"]);

/**
 * The Iceberg view of an `iceberg: true` table in Glue: a table `<table>_iceberg` of type ICEBERG beside the Hive
 * table, whose `metadata_location` is the pointer. The first commit creates it (CreateTable), later ones move it with
 * UpdateTable on the `VersionId` read (optimistic concurrency, as Trino's Glue catalog commits); a lost race is
 * "conflict", never an overwrite.
 */
export class GlueIcebergTables implements IcebergCatalog {
  constructor(
    private readonly client: GlueClient,
    private readonly options: GlueIcebergOptions,
  ) {}

  nameOf(table: TableDefinition): string {
    return `${this.options.database}.${glueName(table)}`;
  }

  assertPublishable(table: TableDefinition): void {
    this.columns(table);
  }

  async head(table: TableDefinition): Promise<IcebergHead | undefined> {
    const live = await this.glueTable(glueName(table));
    if (!live) return undefined;
    const parameters = live.Parameters ?? {};
    if (parameters[P.type]?.toUpperCase() !== "ICEBERG" || parameters[P.table] !== table.name) {
      throw new LakeswapError(
        "CONFLICT",
        `Glue table ${this.nameOf(table)} exists, and is not the Iceberg table lakeswap publishes table '${table.name}' as: lakeswap will not write over it; drop or rename that Glue table`,
      );
    }
    const metadataLocation = parameters[P.metadata];
    if (!metadataLocation) {
      throw new LakeswapError("STORE_ERROR", `Glue table ${this.nameOf(table)} has no ${P.metadata} parameter; drop it (the next command publishes the current runs again)`);
    }
    return { metadataLocation, version: live.VersionId ?? "", properties: parameters };
  }

  async commit(
    table: TableDefinition,
    change: { readonly metadataLocation: string; readonly location: string; readonly expected?: IcebergHead; readonly fields?: readonly SchemaField[] },
    fence: () => Promise<void>,
  ): Promise<IcebergCommitOutcome> {
    const expected = change.expected;
    const input: TableInput = {
      Name: glueName(table),
      TableType: "EXTERNAL_TABLE",
      Parameters: {
        ...(expected?.properties ?? {}),
        EXTERNAL: "TRUE",
        [P.type]: "ICEBERG",
        [P.table]: table.name,
        [P.metadata]: change.metadataLocation,
        ...(expected ? { [P.previous]: expected.metadataLocation } : {}),
      },
      StorageDescriptor: { Location: change.location, Columns: this.columns(table, change.fields) },
    };
    const ids = { CatalogId: this.options.catalogId, DatabaseName: this.options.database };
    try {
      if (expected) {
        // SkipArchive: a commit per sync would otherwise keep a Glue table version per sync (the metadata log keeps them).
        await this.send("UpdateTable", table, fence, () => this.client.send(new UpdateTableCommand({ ...ids, TableInput: input, VersionId: expected.version, SkipArchive: true })));
      } else {
        await this.send("CreateTable", table, fence, () => this.client.send(new CreateTableCommand({ ...ids, TableInput: input })));
      }
    } catch (error) {
      if (LOST_RACE.has(errorName(error))) return "conflict";
      throw error;
    }
    return "committed";
  }

  async drop(table: TableDefinition): Promise<void> {
    try {
      await this.send("DeleteTable", table, async () => undefined, () =>
        this.client.send(new DeleteTableCommand({ CatalogId: this.options.catalogId, DatabaseName: this.options.database, Name: glueName(table) })),
      );
    } catch (error) {
      if (errorName(error) !== "EntityNotFoundException") throw error;
    }
  }

  /**
   * The Glue columns of the Iceberg table: its schema's fields (columns, then partition keys), with Iceberg's field ids
   * as Iceberg's Glue catalog records them: those of the schema committed (`fields`), else as a new table numbers them.
   */
  private columns(table: TableDefinition, fields: readonly SchemaField[] = icebergSchemaFields(table)): GlueColumn[] {
    const declared = new Map(table.columns.map((c) => [c.name, c.type]));
    return fields.map((field) => {
      const type = declared.get(field.name);
      return {
        Name: field.name,
        Type: type === undefined ? "string" : icebergGlueColumnType(field.name, type),
        Parameters: { "iceberg.field.id": String(field.id), "iceberg.field.optional": String(!field.required), "iceberg.field.current": "true" },
      };
    });
  }

  private async glueTable(name: string): Promise<GlueTable | undefined> {
    try {
      const ids = { CatalogId: this.options.catalogId, DatabaseName: this.options.database };
      return (await this.send("GetTable", undefined, async () => undefined, () => this.client.send(new GetTableCommand({ ...ids, Name: name })))).Table;
    } catch (error) {
      if (errorName(error) === "EntityNotFoundException") return undefined;
      throw error;
    }
  }

  /** One Glue call, right after `fence` (each attempt: a retry may come long after), retried when transient but never when it lost a race. */
  private send<T>(operation: string, table: TableDefinition | undefined, fence: () => Promise<void>, call: () => Promise<T>): Promise<T> {
    const limit = this.options.limit;
    const what = `glue:${operation} on ${table ? this.nameOf(table) : `database ${this.options.database}`}`;
    const attempt = async (): Promise<T> => {
      await fence();
      return limit ? limit.run(call) : call();
    };
    return withRetry(what, attempt, { retryable: (error) => !LOST_RACE.has(errorName(error)) && isTransient(error) });
  }
}

function glueName(table: TableDefinition): string {
  return table.icebergTable ?? `${table.name}${SUFFIX}`;
}

function errorName(error: unknown): string {
  return (error as { name?: string }).name ?? "";
}
