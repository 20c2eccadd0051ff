import type { TableDefinition } from "../model/table.js";
import type { SchemaField } from "./iceberg/table-metadata.js";

/** Where a catalog says an Iceberg table's current metadata is, and the catalog's version of that entry (what a commit compares). */
export interface IcebergHead {
  /** The absolute URI of the current metadata file (`s3://…/metadata/00003-<uuid>.metadata.json`). */
  readonly metadataLocation: string;
  /** The catalog's version of the entry the head was read from (Glue's `VersionId`): a commit succeeds only while it is still current. */
  readonly version: string;
  /** The entry's other properties (Glue table parameters another tool may have set), which a commit keeps. */
  readonly properties: Readonly<Record<string, string>>;
}

/** How a commit ended: the head moved to the new metadata, or another writer moved (or created) it first and nothing was written over. */
export type IcebergCommitOutcome = "committed" | "conflict";

/**
 * The Iceberg side of a catalog that holds Iceberg tables' pointers itself (Glue: a table of type ICEBERG whose
 * `metadata_location` names the current metadata file), for the Iceberg view of an `iceberg: true` table. A commit is
 * one compare-and-swap of the head, as pyiceberg's and Trino's Glue catalogs make it. Catalogs without one (the
 * embedded lake) keep the pointer in the store (`version-hint.text`).
 */
export interface IcebergCatalog {
  /** Where the Iceberg table of `table` is, for messages (`lakeswap_db.orders_iceberg`). */
  nameOf(table: TableDefinition): string;
  /** Refuses, naming the column and the fix, a table whose Iceberg view this catalog cannot hold (a column type it has none for). */
  assertPublishable(table: TableDefinition): void;
  /** The head of the Iceberg table published for `table`, or undefined when none was committed yet. */
  head(table: TableDefinition): Promise<IcebergHead | undefined>;
  /**
   * Moves the head from `expected` (undefined: creates the catalog entry) to `metadataLocation`, with `location` the
   * table's base location; `fence` is called right before the call that moves it. "conflict" when the entry is no longer
   * at `expected` (or already exists): the caller reads the head again and derives its commit afresh.
   */
  commit(
    table: TableDefinition,
    change: { readonly metadataLocation: string; readonly location: string; readonly expected?: IcebergHead; readonly fields?: readonly SchemaField[] },
    fence: () => Promise<void>,
  ): Promise<IcebergCommitOutcome>;
  /** Removes the catalog entry of the Iceberg table of `table` (gone already is fine); its files are the caller's to delete. */
  drop(table: TableDefinition): Promise<void>;
}
