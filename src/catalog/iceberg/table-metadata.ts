import { icebergColumnType } from "../../model/column-types.js";
import type { TableDefinition } from "../../model/table.js";

/**
 * Iceberg table metadata (format v2, the spec's "Table Metadata"), as lakeswap writes it: one schema whose
 * fields are the table's columns and then its partition keys (strings, as the Hive view reads them), one
 * partition spec of identity transforms of the keys, unsorted.
 */

/** A field of an Iceberg schema. */
export interface SchemaField {
  readonly id: number;
  readonly name: string;
  readonly required: boolean;
  readonly type: string;
}

/** A field of a partition spec. */
export interface PartitionField {
  readonly "source-id": number;
  readonly "field-id": number;
  readonly name: string;
  readonly transform: string;
}

/** One snapshot of the table. */
export interface Snapshot {
  readonly "snapshot-id": number;
  readonly "parent-snapshot-id"?: number;
  readonly "sequence-number": number;
  readonly "timestamp-ms": number;
  readonly "manifest-list": string;
  readonly summary: Readonly<Record<string, string>>;
  readonly "schema-id": number;
}

/** The metadata file's JSON (the fields lakeswap writes; a reader may find more in a file another tool wrote). */
export interface TableMetadata {
  readonly "format-version": 2;
  readonly "table-uuid": string;
  readonly location: string;
  readonly "last-sequence-number": number;
  readonly "last-updated-ms": number;
  readonly "last-column-id": number;
  readonly schemas: readonly { readonly type: "struct"; readonly "schema-id": number; readonly fields: readonly SchemaField[] }[];
  readonly "current-schema-id": number;
  readonly "partition-specs": readonly { readonly "spec-id": number; readonly fields: readonly PartitionField[] }[];
  readonly "default-spec-id": number;
  readonly "last-partition-id": number;
  readonly "sort-orders": readonly { readonly "order-id": number; readonly fields: readonly unknown[] }[];
  readonly "default-sort-order-id": number;
  readonly properties: Readonly<Record<string, string>>;
  readonly "current-snapshot-id": number;
  readonly snapshots: readonly Snapshot[];
  readonly "snapshot-log": readonly { readonly "snapshot-id": number; readonly "timestamp-ms": number }[];
  readonly "metadata-log": readonly { readonly "metadata-file": string; readonly "timestamp-ms": number }[];
  readonly refs: Readonly<Record<string, { readonly "snapshot-id": number; readonly type: "branch" | "tag" }>>;
}

/** The first partition field id the spec assigns (1000), so partition and column ids never meet. */
const FIRST_PARTITION_FIELD_ID = 1000;

/** The schema of a table: its columns (ids from 1), then its partition keys as strings. */
export function icebergSchemaFields(table: TableDefinition): SchemaField[] {
  return [
    ...table.columns.map((column, i) => ({ id: i + 1, name: column.name, required: false, type: icebergColumnType(column.type) })),
    ...table.partitionKeys.map((key, i) => ({ id: table.columns.length + i + 1, name: key, required: false, type: "string" })),
  ];
}

/**
 * The table property that tells readers which Parquet column each field id reads: DuckDB writes no field ids into its
 * files, and without the mapping Iceberg readers (pyiceberg, Trino, Athena, Spark) refuse them or read every column
 * as missing. Partition keys are mapped too: no file holds them, so readers take them from the manifests.
 */
const NAME_MAPPING = "schema.name-mapping.default";

function nameMapping(fields: readonly SchemaField[]): string {
  return JSON.stringify(fields.map((field) => ({ "field-id": field.id, names: [field.name] })));
}

/** The partition spec of a table: an identity transform of each partition key. */
export function tablePartitionSpec(table: TableDefinition): PartitionField[] {
  return table.partitionKeys.map((key, i) => ({
    "source-id": table.columns.length + i + 1,
    "field-id": FIRST_PARTITION_FIELD_ID + i,
    name: key,
    transform: "identity",
  }));
}

/** The metadata of a table that has no snapshot yet (the base the first commit adds one to). */
export function emptyMetadata(table: TableDefinition, uuid: string, location: string, now: number): TableMetadata {
  const fields = icebergSchemaFields(table);
  const spec = tablePartitionSpec(table);
  return {
    "format-version": 2,
    "table-uuid": uuid,
    location,
    "last-sequence-number": 0,
    "last-updated-ms": now,
    "last-column-id": fields.length,
    schemas: [{ type: "struct", "schema-id": 0, fields }],
    "current-schema-id": 0,
    "partition-specs": [{ "spec-id": 0, fields: spec }],
    "default-spec-id": 0,
    "last-partition-id": FIRST_PARTITION_FIELD_ID + spec.length - 1,
    "sort-orders": [{ "order-id": 0, fields: [] }],
    "default-sort-order-id": 0,
    properties: { "write.format.default": "parquet", "lakeswap.table": table.name, [NAME_MAPPING]: nameMapping(fields) },
    "current-snapshot-id": -1,
    snapshots: [],
    "snapshot-log": [],
    "metadata-log": [],
    refs: {},
  };
}

/** Parses a metadata file lakeswap wrote, or says why it is not one. */
export function parseTableMetadata(body: Uint8Array): TableMetadata | string {
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(body).toString("utf8"));
  } catch (error) {
    return `not valid JSON: ${error instanceof Error ? error.message : String(error)}`;
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return "not a JSON object";
  const record = value as Record<string, unknown>;
  if (record["format-version"] !== 2) return `format-version ${String(record["format-version"])}, not 2`;
  for (const field of ["snapshots", "schemas", "partition-specs", "snapshot-log", "metadata-log"]) {
    if (!Array.isArray(record[field])) return `no '${field}' list`;
  }
  for (const field of ["last-sequence-number", "current-snapshot-id", "last-updated-ms"]) {
    if (typeof record[field] !== "number") return `no '${field}' number`;
  }
  return value as TableMetadata;
}

/** The current snapshot of a metadata, if it has one. */
export function currentSnapshot(metadata: TableMetadata): Snapshot | undefined {
  return metadata.snapshots.find((s) => s["snapshot-id"] === metadata["current-snapshot-id"]);
}
