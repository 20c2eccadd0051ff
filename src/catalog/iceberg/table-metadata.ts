import { icebergColumnType } from "../../model/column-types.js";
import { LakeswapError } from "../../model/errors.js";
import type { TableDefinition } from "../../model/table.js";

/**
 * Iceberg table metadata (format v2, the spec's "Table Metadata"), as lakeswap writes it: a schema whose fields are
 * the table's columns and then its partition keys (strings, as the Hive view reads them), one partition spec of
 * identity transforms of the keys, unsorted. A table whose schema changed in place (model/schema-change.ts) gets a
 * new schema beside the earlier ones (`withTableSchema`): field ids are kept by name, never reused.
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

/** One schema of the metadata's `schemas`. */
export type IcebergSchema = TableMetadata["schemas"][number];

/** The schema of a table as first published: its columns (ids from 1), then its partition keys as strings. */
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

/** The metadata's current schema (the one a commit writes its manifests and snapshot with). */
export function currentSchema(metadata: TableMetadata): IcebergSchema | undefined {
  return metadata.schemas.find((s) => s["schema-id"] === metadata["current-schema-id"]);
}

/** Iceberg's type promotions (the spec's "Schema Evolution"): int to long, float to double, a decimal's precision widened. */
function isPromotion(from: string, to: string): boolean {
  if (from === "int" && to === "long") return true;
  if (from === "float" && to === "double") return true;
  const [a, b] = [/^decimal\((\d+), (\d+)\)$/.exec(from), /^decimal\((\d+), (\d+)\)$/.exec(to)];
  return a !== null && b !== null && a[2] === b[2] && Number(b[1]) > Number(a[1]);
}

/**
 * The fields of `to` whose type is a promotion of the same field's type in `from` (by id), as id to both types: the
 * metrics of a file written under `from` are read under `to` (file-metrics.ts `widenBounds`).
 */
export function promotedFields(from: IcebergSchema | undefined, to: IcebergSchema | undefined): Map<number, { readonly from: string; readonly to: string }> {
  const before = new Map((from?.fields ?? []).map((f) => [f.id, f.type]));
  const promoted = new Map<number, { from: string; to: string }>();
  for (const field of to?.fields ?? []) {
    const type = before.get(field.id);
    if (type !== undefined && type !== field.type) promoted.set(field.id, { from: type, to: field.type });
  }
  return promoted;
}

/**
 * The metadata with the table's definition as its current schema. Where the definition's columns (names, order,
 * types) are those of the current schema, the metadata itself. Else a new schema, with the next schema id, is added
 * and made current (earlier snapshots keep naming theirs): every field keeps its id by name, a new column gets the
 * next id after `last-column-id`, the partition spec stays where its source ids still name the keys' fields (else a new
 * spec: `withTableSpec`), and the name mapping follows the new schema. A column whose type changed other than by a
 * promotion (a rebuild by swap rewrote every current file) gets a new id too.
 */
export function withTableSchema(metadata: TableMetadata, table: TableDefinition): TableMetadata {
  const current = currentSchema(metadata);
  const known = new Map((current?.fields ?? []).map((f) => [f.name, f]));
  let lastColumnId = metadata["last-column-id"];
  const fields = icebergSchemaFields(table).map((field): SchemaField => {
    const before = known.get(field.name);
    const retyped = before !== undefined && before.type !== field.type && !isPromotion(before.type, field.type);
    if (retyped && table.rebuilding) {
      throw new LakeswapError("CONFLICT", `the Iceberg table of '${table.name}' waits for the rebuild by swap of its column ${field.name} to finish (some current files still hold ${before.type}): run lakeswap sync to finish it`);
    }
    // Another type than a promotion comes only from a rebuild by swap (model/schema-change.ts), which rewrote every
    // current file: to Iceberg the column was dropped and added again, a new field id (earlier snapshots keep theirs).
    if (before && !retyped) return { ...field, id: before.id };
    lastColumnId += 1;
    return { ...field, id: lastColumnId };
  });
  if (current && JSON.stringify(current.fields) === JSON.stringify(fields)) return metadata;
  const schemaId = Math.max(-1, ...metadata.schemas.map((s) => s["schema-id"])) + 1;
  return withTableSpec(
    {
      ...metadata,
      "last-column-id": lastColumnId,
      schemas: [...metadata.schemas, { type: "struct", "schema-id": schemaId, fields }],
      "current-schema-id": schemaId,
      properties: { ...metadata.properties, [NAME_MAPPING]: nameMapping(fields) },
    },
    table,
    fields,
  );
}

/**
 * The metadata with a partition spec of the table's partition keys as its default (`fields`: the new current schema's).
 * Where the default spec partitions by those keys' fields already, the metadata itself; else (the table's partition
 * keys changed: a new layout, lake/operations/relayout.ts) a new spec, with the next spec id and partition field ids
 * after `last-partition-id`, as Iceberg's partition evolution requires: earlier snapshots' manifests keep theirs.
 */
function withTableSpec(metadata: TableMetadata, table: TableDefinition, fields: readonly SchemaField[]): TableMetadata {
  const spec = metadata["partition-specs"].find((s) => s["spec-id"] === metadata["default-spec-id"]);
  const sourceIds = table.partitionKeys.map((key) => fields.find((f) => f.name === key)?.id);
  const same = (spec?.fields ?? []).length === sourceIds.length && (spec?.fields ?? []).every((f, i) => f["source-id"] === sourceIds[i] && f.name === table.partitionKeys[i]);
  if (same) return metadata;
  const lastPartitionId = metadata["last-partition-id"];
  const specFields: PartitionField[] = table.partitionKeys.map((key, i) => {
    const sourceId = sourceIds[i];
    if (sourceId === undefined) throw new LakeswapError("CONFLICT", `the Iceberg table of '${table.name}' has no field for its partition key ${key}`);
    return { "source-id": sourceId, "field-id": lastPartitionId + 1 + i, name: key, transform: "identity" };
  });
  const specId = Math.max(-1, ...metadata["partition-specs"].map((s) => s["spec-id"])) + 1;
  return {
    ...metadata,
    "partition-specs": [...metadata["partition-specs"], { "spec-id": specId, fields: specFields }],
    "default-spec-id": specId,
    "last-partition-id": Math.max(lastPartitionId, lastPartitionId + specFields.length),
  };
}

/** The partition spec of a table as first published: an identity transform of each partition key. */
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
