import { PassThrough } from "node:stream";
import type avro from "avsc";
import type { FileMetrics } from "./file-metrics.js";

/**
 * Iceberg's Avro files (format v2, the spec's "Manifests" and "Manifest Lists"): the spec's schemas with their
 * field ids, and the object container files written and read with avsc, never by hand.
 */

/** A manifest entry's status: 0 existing (carried from an earlier snapshot), 1 added, 2 deleted (by this snapshot). */
type EntryStatus = 0 | 1 | 2;

/** One data file of a manifest (`data_file`, field 2), as lakeswap fills it. */
export interface DataFileEntry {
  readonly status: EntryStatus;
  readonly snapshotId: number;
  readonly sequenceNumber: number;
  readonly fileSequenceNumber: number;
  readonly filePath: string;
  /** Partition values by partition field name (identity transforms of string keys). */
  readonly partition: Readonly<Record<string, string>>;
  readonly recordCount: number;
  readonly fileSizeInBytes: number;
  /** Column sizes, counts and bounds by field id (./file-metrics.ts), where known. */
  readonly metrics?: FileMetrics;
}

/** One manifest of a manifest list (`manifest_file`). */
export interface ManifestFileEntry {
  readonly manifestPath: string;
  readonly manifestLength: number;
  /** The partition spec its entries are written under (absent: 0, the spec a table is first published with). */
  readonly partitionSpecId?: number;
  readonly sequenceNumber: number;
  readonly minSequenceNumber: number;
  readonly addedSnapshotId: number;
  readonly addedFilesCount: number;
  readonly existingFilesCount: number;
  readonly deletedFilesCount: number;
  readonly addedRowsCount: number;
  readonly existingRowsCount: number;
  readonly deletedRowsCount: number;
  /** Per partition field, in spec order: whether a value is null, and the least and greatest value (so engines prune whole manifests). */
  readonly partitions?: readonly PartitionSummary[];
}

/** The summary of one partition field over a manifest's files (`field_summary`, element 508). */
export interface PartitionSummary {
  readonly containsNull: boolean;
  readonly lowerBound?: string;
  readonly upperBound?: string;
}

/** The summaries of string partition fields over the given files' partition values. */
export function summarizePartitions(fields: readonly string[], values: readonly Readonly<Record<string, string | null | undefined>>[]): PartitionSummary[] {
  return fields.map((field) => {
    const present = values.map((v) => v[field]).filter((v): v is string => typeof v === "string").sort();
    return { containsNull: present.length < values.length, lowerBound: present[0], upperBound: present.at(-1) };
  });
}

const optional = (type: unknown): unknown[] => ["null", type];

/** An Avro map of int keys, as Iceberg writes it: an array of key/value records. */
function intMap(name: string, keyId: number, valueId: number, value: string): unknown {
  return {
    type: "array",
    logicalType: "map",
    items: { type: "record", name, fields: [{ name: "key", type: "int", "field-id": keyId }, { name: "value", type: value, "field-id": valueId }] },
  };
}

/** The spec's `manifest_entry` schema for a partition spec of string fields (`fields`: name and field id). */
function manifestEntrySchema(partitionFields: readonly { readonly name: string; readonly fieldId: number }[]): avro.Schema {
  const partition = { type: "record", name: "r102", fields: partitionFields.map((f) => ({ name: f.name, type: optional("string"), default: null, "field-id": f.fieldId })) };
  const dataFile = {
    type: "record",
    name: "r2",
    fields: [
      { name: "content", type: "int", "field-id": 134 },
      { name: "file_path", type: "string", "field-id": 100 },
      { name: "file_format", type: "string", "field-id": 101 },
      { name: "partition", type: partition, "field-id": 102 },
      { name: "record_count", type: "long", "field-id": 103 },
      { name: "file_size_in_bytes", type: "long", "field-id": 104 },
      { name: "column_sizes", type: optional(intMap("k117_v118", 117, 118, "long")), default: null, "field-id": 108 },
      { name: "value_counts", type: optional(intMap("k119_v120", 119, 120, "long")), default: null, "field-id": 109 },
      { name: "null_value_counts", type: optional(intMap("k121_v122", 121, 122, "long")), default: null, "field-id": 110 },
      { name: "nan_value_counts", type: optional(intMap("k138_v139", 138, 139, "long")), default: null, "field-id": 137 },
      { name: "lower_bounds", type: optional(intMap("k126_v127", 126, 127, "bytes")), default: null, "field-id": 125 },
      { name: "upper_bounds", type: optional(intMap("k129_v130", 129, 130, "bytes")), default: null, "field-id": 128 },
      { name: "key_metadata", type: optional("bytes"), default: null, "field-id": 131 },
      { name: "split_offsets", type: optional({ type: "array", items: "long", "element-id": 133 }), default: null, "field-id": 132 },
      { name: "equality_ids", type: optional({ type: "array", items: "int", "element-id": 136 }), default: null, "field-id": 135 },
      { name: "sort_order_id", type: optional("int"), default: null, "field-id": 140 },
    ],
  };
  return {
    type: "record",
    name: "manifest_entry",
    fields: [
      { name: "status", type: "int", "field-id": 0 },
      { name: "snapshot_id", type: optional("long"), default: null, "field-id": 1 },
      { name: "sequence_number", type: optional("long"), default: null, "field-id": 3 },
      { name: "file_sequence_number", type: optional("long"), default: null, "field-id": 4 },
      { name: "data_file", type: dataFile, "field-id": 2 },
    ],
  } as unknown as avro.Schema;
}

/** The spec's `manifest_file` schema (a manifest list's records). */
const MANIFEST_FILE_SCHEMA = {
  type: "record",
  name: "manifest_file",
  fields: [
    { name: "manifest_path", type: "string", "field-id": 500 },
    { name: "manifest_length", type: "long", "field-id": 501 },
    { name: "partition_spec_id", type: "int", "field-id": 502 },
    { name: "content", type: "int", "field-id": 517 },
    { name: "sequence_number", type: "long", "field-id": 515 },
    { name: "min_sequence_number", type: "long", "field-id": 516 },
    { name: "added_snapshot_id", type: "long", "field-id": 503 },
    { name: "added_files_count", type: "int", "field-id": 504 },
    { name: "existing_files_count", type: "int", "field-id": 505 },
    { name: "deleted_files_count", type: "int", "field-id": 506 },
    { name: "added_rows_count", type: "long", "field-id": 512 },
    { name: "existing_rows_count", type: "long", "field-id": 513 },
    { name: "deleted_rows_count", type: "long", "field-id": 514 },
    {
      name: "partitions",
      type: optional({
        type: "array",
        "element-id": 508,
        items: {
          type: "record",
          name: "r508",
          fields: [
            { name: "contains_null", type: "boolean", "field-id": 509 },
            { name: "contains_nan", type: optional("boolean"), default: null, "field-id": 518 },
            { name: "lower_bound", type: optional("bytes"), default: null, "field-id": 510 },
            { name: "upper_bound", type: optional("bytes"), default: null, "field-id": 511 },
          ],
        },
      }),
      default: null,
      "field-id": 507,
    },
    { name: "key_metadata", type: optional("bytes"), default: null, "field-id": 519 },
  ],
} as unknown as avro.Schema;

/**
 * avsc, loaded when a command first writes or reads a manifest: only tables published as Iceberg need it, and loading
 * it cost every command several ms of its start (the CLI bundle makes the import a require on first use).
 */
let avsc: Promise<typeof avro> | undefined;
function loadAvsc(): Promise<typeof avro> {
  avsc ??= import("avsc").then((module) => module.default);
  return avsc;
}

/** Writes records as an Avro object container file (no compression) with the given file metadata. */
async function containerFile(schema: avro.Schema, records: readonly object[], metadata: Readonly<Record<string, string>>): Promise<Buffer> {
  const { streams } = await loadAvsc();
  // The schema itself, not a Type: avsc then writes it to the header as given, field ids included.
  const encoder = new streams.BlockEncoder(schema, {
    codec: "null",
    metadata: Object.fromEntries(Object.entries(metadata).map(([key, value]) => [key, Buffer.from(value)])),
  } as Partial<avro.EncoderOptions>);
  const sink = new PassThrough();
  const chunks: Buffer[] = [];
  sink.on("data", (chunk: Buffer) => chunks.push(chunk));
  const done = new Promise<void>((resolve, reject) => {
    sink.on("end", resolve);
    encoder.on("error", reject);
  });
  encoder.pipe(sink);
  for (const record of records) encoder.write(record);
  encoder.end();
  await done;
  return Buffer.concat(chunks);
}

/** Reads the records of an Avro object container file (the writer's schema from its header). */
export async function readContainerFile(body: Uint8Array): Promise<{ records: Record<string, unknown>[]; metadata: Record<string, string> }> {
  const { streams } = await loadAvsc();
  const decoder = new streams.BlockDecoder();
  const records: Record<string, unknown>[] = [];
  let metadata: Record<string, string> = {};
  decoder.on("metadata", (_type: unknown, _codec: unknown, header: { meta: Record<string, Buffer> }) => {
    metadata = Object.fromEntries(Object.entries(header.meta).map(([key, value]) => [key, value.toString("utf8")]));
  });
  decoder.on("data", (record: Record<string, unknown>) => records.push(record));
  const done = new Promise<void>((resolve, reject) => {
    decoder.on("end", resolve);
    decoder.on("error", reject);
  });
  decoder.end(Buffer.from(body));
  await done;
  return { records, metadata };
}

/** An int-keyed map as Avro holds it (key/value records), or null when empty or unknown. */
function avroMap<V, W = V>(pairs: readonly (readonly [number, V])[] | undefined, convert?: (value: V) => W): { key: number; value: V | W }[] | null {
  if (!pairs || pairs.length === 0) return null;
  return pairs.map(([key, value]) => ({ key, value: convert ? convert(value) : value }));
}

/** The metrics of a manifest's `data_file` record, as ./file-metrics.ts holds them (so a rewritten manifest keeps them). */
export function readMetrics(dataFile: Readonly<Record<string, unknown>>): FileMetrics {
  const pairs = <V>(field: string, convert: (value: unknown) => V): [number, V][] =>
    Array.isArray(dataFile[field]) ? (dataFile[field] as { key: number; value: unknown }[]).map((p) => [Number(p.key), convert(p.value)]) : [];
  return {
    columnSizes: pairs("column_sizes", Number),
    valueCounts: pairs("value_counts", Number),
    nullValueCounts: pairs("null_value_counts", Number),
    lowerBounds: pairs("lower_bounds", (v) => Uint8Array.from(v as Buffer)),
    upperBounds: pairs("upper_bounds", (v) => Uint8Array.from(v as Buffer)),
  };
}

/** A manifest (data files, content 0) with the file metadata the spec requires of one. */
export function writeManifest(
  entries: readonly DataFileEntry[],
  header: { readonly schemaJson: string; readonly schemaId: number; readonly specJson: string; readonly specId: number },
  partitionFields: readonly { readonly name: string; readonly fieldId: number }[],
): Promise<Buffer> {
  const records = entries.map((e) => ({
    status: e.status,
    snapshot_id: e.snapshotId,
    sequence_number: e.sequenceNumber,
    file_sequence_number: e.fileSequenceNumber,
    data_file: {
      content: 0,
      file_path: e.filePath,
      file_format: "PARQUET",
      partition: Object.fromEntries(partitionFields.map((f) => [f.name, e.partition[f.name] ?? null])),
      record_count: e.recordCount,
      file_size_in_bytes: e.fileSizeInBytes,
      column_sizes: avroMap(e.metrics?.columnSizes),
      value_counts: avroMap(e.metrics?.valueCounts),
      null_value_counts: avroMap(e.metrics?.nullValueCounts),
      nan_value_counts: null,
      lower_bounds: avroMap(e.metrics?.lowerBounds, Buffer.from),
      upper_bounds: avroMap(e.metrics?.upperBounds, Buffer.from),
      key_metadata: null,
      split_offsets: null,
      equality_ids: null,
      sort_order_id: null,
    },
  }));
  return containerFile(manifestEntrySchema(partitionFields), records, {
    schema: header.schemaJson,
    "schema-id": String(header.schemaId),
    "partition-spec": header.specJson,
    "partition-spec-id": String(header.specId),
    "format-version": "2",
    content: "data",
  });
}

/** A manifest list with its file metadata (snapshot id, parent, sequence number, format version). */
export function writeManifestList(
  manifests: readonly ManifestFileEntry[],
  header: { readonly snapshotId: number; readonly parentSnapshotId?: number; readonly sequenceNumber: number },
): Promise<Buffer> {
  const records = manifests.map((m) => ({
    manifest_path: m.manifestPath,
    manifest_length: m.manifestLength,
    partition_spec_id: m.partitionSpecId ?? 0,
    content: 0,
    sequence_number: m.sequenceNumber,
    min_sequence_number: m.minSequenceNumber,
    added_snapshot_id: m.addedSnapshotId,
    added_files_count: m.addedFilesCount,
    existing_files_count: m.existingFilesCount,
    deleted_files_count: m.deletedFilesCount,
    added_rows_count: m.addedRowsCount,
    existing_rows_count: m.existingRowsCount,
    deleted_rows_count: m.deletedRowsCount,
    // A string bound is its UTF-8 bytes (the spec's single-value serialization).
    partitions:
      m.partitions?.map((p) => ({
        contains_null: p.containsNull,
        contains_nan: null,
        lower_bound: p.lowerBound === undefined ? null : Buffer.from(p.lowerBound, "utf8"),
        upper_bound: p.upperBound === undefined ? null : Buffer.from(p.upperBound, "utf8"),
      })) ?? null,
    key_metadata: null,
  }));
  return containerFile(MANIFEST_FILE_SCHEMA, records, {
    "snapshot-id": String(header.snapshotId),
    "parent-snapshot-id": header.parentSnapshotId === undefined ? "null" : String(header.parentSnapshotId),
    "sequence-number": String(header.sequenceNumber),
    "format-version": "2",
  });
}
