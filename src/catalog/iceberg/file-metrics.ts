import type { ColumnMetaData, FileMetaData } from "hyparquet";

/**
 * The column metrics of a data file's manifest entry (the spec's `column_sizes`, `value_counts`, `null_value_counts`,
 * `lower_bounds`, `upper_bounds`, keyed by field id), copied from the file's Parquet footer: engines prune files with
 * them. A bound is written only where the footer's statistics give it exactly, in the spec's single-value
 * serialization; otherwise it is left out, which is always safe (an engine then reads the file). Strings and binary
 * values get no bounds: a writer may truncate them in its statistics.
 */
export interface FileMetrics {
  readonly columnSizes: readonly (readonly [number, number])[];
  readonly valueCounts: readonly (readonly [number, number])[];
  readonly nullValueCounts: readonly (readonly [number, number])[];
  readonly lowerBounds: readonly (readonly [number, Uint8Array])[];
  readonly upperBounds: readonly (readonly [number, Uint8Array])[];
}

/** A field of the table's Iceberg schema: id, name (the Parquet column it reads) and Iceberg type. */
interface MetricField {
  readonly id: number;
  readonly name: string;
  readonly type: string;
}

/** Unscaled decimals past this are not recovered from hyparquet's floating-point value: no bound. */
const MAX_EXACT_UNSCALED = 2 ** 50;

/** Metrics of one file from its footer, for the schema's fields found in it (a partition key is not: none for it). */
export function fileMetrics(footer: FileMetaData, fields: readonly MetricField[]): FileMetrics {
  const columnSizes: [number, number][] = [];
  const valueCounts: [number, number][] = [];
  const nullValueCounts: [number, number][] = [];
  const lowerBounds: [number, Uint8Array][] = [];
  const upperBounds: [number, Uint8Array][] = [];
  for (const field of fields) {
    const chunks = footer.row_groups.map((group) => group.columns.find((c) => c.meta_data?.path_in_schema.length === 1 && c.meta_data.path_in_schema[0] === field.name)?.meta_data);
    if (chunks.length === 0 || chunks.some((c) => c === undefined)) continue;
    const columns = chunks as ColumnMetaData[];
    columnSizes.push([field.id, columns.reduce((sum, c) => sum + Number(c.total_compressed_size), 0)]);
    valueCounts.push([field.id, columns.reduce((sum, c) => sum + Number(c.num_values), 0)]);
    const nulls = columns.map((c) => c.statistics?.null_count);
    if (nulls.every((n) => n !== undefined)) nullValueCounts.push([field.id, nulls.reduce((sum, n) => sum + Number(n), 0)]);
    const bounds = columnBounds(field.type, columns);
    if (bounds) {
      lowerBounds.push([field.id, bounds[0]]);
      upperBounds.push([field.id, bounds[1]]);
    }
  }
  return { columnSizes, valueCounts, nullValueCounts, lowerBounds, upperBounds };
}

/** The least and greatest value of a column over its row groups, serialized, or undefined when not exactly known. */
function columnBounds(type: string, columns: readonly ColumnMetaData[]): [Uint8Array, Uint8Array] | undefined {
  const encode = encoder(type, columns[0]?.type);
  if (!encode) return undefined;
  let least: bigint | number | undefined;
  let greatest: bigint | number | undefined;
  for (const column of columns) {
    const stats = column.statistics;
    // A row group of NULLs only has no min or max, and needs none.
    if (stats?.null_count !== undefined && stats.null_count === column.num_values) continue;
    const low = comparable(type, stats?.min_value);
    const high = comparable(type, stats?.max_value);
    if (low === undefined || high === undefined) return undefined;
    if (least === undefined || low < least) least = low;
    if (greatest === undefined || high > greatest) greatest = high;
  }
  if (least === undefined || greatest === undefined) return undefined;
  // -0 and +0 are one value to a filter but two to Iceberg's float order: widen across both.
  if (typeof least === "number" && Object.is(least, 0)) least = -0;
  if (typeof greatest === "number" && Object.is(greatest, -0)) greatest = 0;
  const lower = encode(least);
  const upper = encode(greatest);
  return lower && upper ? [lower, upper] : undefined;
}

/** A statistics value as a number or bigint that orders as the column's values do, or undefined when unusable. */
function comparable(type: string, value: unknown): bigint | number | undefined {
  if (typeof value === "boolean") return value ? 1 : 0;
  if (typeof value === "bigint") return value;
  if (typeof value !== "number" || Number.isNaN(value)) return undefined;
  const decimal = /^decimal\(\d+, (\d+)\)$/.exec(type);
  if (!decimal) return value;
  // hyparquet divided the stored integer by 10^scale: recovered exactly while it is small enough.
  const unscaled = Math.round(value * 10 ** Number(decimal[1]));
  return Math.abs(unscaled) < MAX_EXACT_UNSCALED ? BigInt(unscaled) : undefined;
}

/** The spec's single-value serialization of a value of an Iceberg type stored as the given Parquet type, or undefined. */
function encoder(type: string, physical: string | undefined): ((value: bigint | number) => Uint8Array | undefined) | undefined {
  const fixed = (bytes: number, write: (buffer: Buffer, value: bigint | number) => void) => (value: bigint | number) => {
    const buffer = Buffer.alloc(bytes);
    write(buffer, value);
    return buffer;
  };
  if (type === "boolean") return fixed(1, (b, v) => b.writeUInt8(Number(v)));
  if ((type === "int" || type === "date") && physical === "INT32") return fixed(4, (b, v) => b.writeInt32LE(Number(v)));
  if ((type === "long" || type === "timestamp" || type === "timestamptz") && physical === "INT64") return fixed(8, (b, v) => b.writeBigInt64LE(BigInt(v)));
  if (type === "float" && physical === "FLOAT") return fixed(4, (b, v) => b.writeFloatLE(Number(v)));
  if (type === "double" && physical === "DOUBLE") return fixed(8, (b, v) => b.writeDoubleLE(Number(v)));
  if (type.startsWith("decimal(") && (physical === "INT32" || physical === "INT64")) return (value) => (typeof value === "bigint" ? twosComplement(value) : undefined);
  return undefined;
}

/** A decimal's unscaled value as the spec stores it: big-endian two's complement in the fewest bytes. */
function twosComplement(value: bigint): Uint8Array {
  const bytes: number[] = [];
  let rest = value;
  for (;;) {
    const byte = Number(BigInt.asUintN(8, rest));
    bytes.unshift(byte);
    rest >>= 8n;
    const signBit = (byte & 0x80) !== 0;
    if ((rest === 0n && !signBit) || (rest === -1n && signBit)) return Uint8Array.from(bytes);
  }
}

/** Metrics keyed by other field ids (`ids`: old id to new; a field not in `ids` is left out). */
export function renumberMetrics(metrics: FileMetrics, ids: ReadonlyMap<number, number>): FileMetrics {
  const renumber = <T>(pairs: readonly (readonly [number, T])[]): [number, T][] => pairs.flatMap(([id, value]) => {
    const to = ids.get(id);
    return to === undefined ? [] : [[to, value] as [number, T]];
  });
  return {
    columnSizes: renumber(metrics.columnSizes),
    valueCounts: renumber(metrics.valueCounts),
    nullValueCounts: renumber(metrics.nullValueCounts),
    lowerBounds: renumber(metrics.lowerBounds),
    upperBounds: renumber(metrics.upperBounds),
  };
}

/**
 * The metrics of a file written under an earlier schema, with the bounds of each field promoted since (int to long,
 * float to double) serialized as the promoted type: the spec lets old bounds keep their width, but not every reader
 * decodes a 4-byte bound of a long. Values convert exactly; a decimal's bytes do not depend on its precision.
 */
export function widenBounds(metrics: FileMetrics, promoted: ReadonlyMap<number, { readonly from: string; readonly to: string }>): FileMetrics {
  const widen = (pairs: readonly (readonly [number, Uint8Array])[]): [number, Uint8Array][] => pairs.map(([id, bytes]) => [id, widened(promoted.get(id), bytes)]);
  return { ...metrics, lowerBounds: widen(metrics.lowerBounds), upperBounds: widen(metrics.upperBounds) };
}

function widened(promotion: { readonly from: string; readonly to: string } | undefined, bytes: Uint8Array): Uint8Array {
  if (bytes.length !== 4) return bytes;
  const value = Buffer.from(bytes);
  const wide = Buffer.alloc(8);
  if (promotion?.from === "int" && promotion.to === "long") wide.writeBigInt64LE(BigInt(value.readInt32LE(0)));
  else if (promotion?.from === "float" && promotion.to === "double") wide.writeDoubleLE(value.readFloatLE(0));
  else return bytes;
  return wide;
}
