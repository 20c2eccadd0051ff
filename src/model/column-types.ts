/**
 * One mapping from each declared column type (as `normalizeColumnType` spells
 * it) to what holds it on every backend: the DuckDB type its Parquet files
 * store, the Glue (Hive) type of the catalog column, and the Trino type an
 * Athena build casts to. Both backends write the same physical type, so a
 * table reads the same on either and Athena never meets a type it lacks.
 *
 * Types Trino and Hive have no equal for are stored as the nearest exact one:
 * unsigned integers as the next wider signed integer (UBIGINT as
 * DECIMAL(20,0)), HUGEINT as DECIMAL(38,0) (a value beyond 38 digits fails the
 * cast), TIME and UUID as their canonical text. Signatures are computed over
 * the declared type before this cast (docs/signatures.md), so they do not
 * change with it.
 */

import { InvalidInputError } from "./errors.js";

/**
 * How an event time field's text or number is read (`time.format` of an ingest namespace): ISO 8601 text
 * (`2025-03-04T10:15:00Z`, the default), or a number of milliseconds or seconds since 1970-01-01T00:00:00Z.
 */
export type TimeFormat = "iso8601" | "epoch_ms" | "epoch_s";

/** The time formats, for the config schema and messages. */
export const TIME_FORMATS: readonly TimeFormat[] = ["iso8601", "epoch_ms", "epoch_s"];

/** Where one declared column type lives on each backend. */
export interface ColumnStorage {
  /** The DuckDB type of the column in the written Parquet files (and of a local query's view). */
  readonly duckdb: string;
  /** The Glue (Hive DDL) type of the catalog column. */
  readonly glue: string;
  /** The Trino type an Athena build casts the column to; it reads back as `glue`. */
  readonly trino: string;
  /** The Iceberg primitive type of the column as its Parquet files store it (`duckdb`), for an `iceberg: true` table's schema. */
  readonly iceberg: string;
}

const STORAGE: Readonly<Record<string, ColumnStorage>> = {
  BOOLEAN: { duckdb: "BOOLEAN", glue: "boolean", trino: "BOOLEAN", iceberg: "boolean" },
  TINYINT: { duckdb: "TINYINT", glue: "tinyint", trino: "TINYINT", iceberg: "int" },
  SMALLINT: { duckdb: "SMALLINT", glue: "smallint", trino: "SMALLINT", iceberg: "int" },
  INTEGER: { duckdb: "INTEGER", glue: "int", trino: "INTEGER", iceberg: "int" },
  BIGINT: { duckdb: "BIGINT", glue: "bigint", trino: "BIGINT", iceberg: "long" },
  // No unsigned types in Trino or Hive: the next wider signed type holds every value exactly.
  UTINYINT: { duckdb: "SMALLINT", glue: "smallint", trino: "SMALLINT", iceberg: "int" },
  USMALLINT: { duckdb: "INTEGER", glue: "int", trino: "INTEGER", iceberg: "int" },
  UINTEGER: { duckdb: "BIGINT", glue: "bigint", trino: "BIGINT", iceberg: "long" },
  UBIGINT: { duckdb: "DECIMAL(20,0)", glue: "decimal(20,0)", trino: "DECIMAL(20,0)", iceberg: "decimal(20, 0)" },
  HUGEINT: { duckdb: "DECIMAL(38,0)", glue: "decimal(38,0)", trino: "DECIMAL(38,0)", iceberg: "decimal(38, 0)" },
  FLOAT: { duckdb: "FLOAT", glue: "float", trino: "REAL", iceberg: "float" },
  DOUBLE: { duckdb: "DOUBLE", glue: "double", trino: "DOUBLE", iceberg: "double" },
  VARCHAR: { duckdb: "VARCHAR", glue: "string", trino: "VARCHAR", iceberg: "string" },
  BLOB: { duckdb: "BLOB", glue: "binary", trino: "VARBINARY", iceberg: "binary" },
  DATE: { duckdb: "DATE", glue: "date", trino: "DATE", iceberg: "date" },
  // Parquet has no time-of-day type that Hive reads; the text 'HH:MM:SS[.ffffff]' sorts and compares as the time does.
  TIME: { duckdb: "VARCHAR", glue: "string", trino: "VARCHAR", iceberg: "string" },
  TIMESTAMP: { duckdb: "TIMESTAMP", glue: "timestamp", trino: "TIMESTAMP", iceberg: "timestamp" },
  // An instant, stored UTC-adjusted; Hive and Athena's Parquet tables read it as a UTC timestamp.
  TIMESTAMPTZ: { duckdb: "TIMESTAMPTZ", glue: "timestamp", trino: "TIMESTAMP", iceberg: "timestamptz" },
  // Parquet's UUID is 16 raw bytes, which Athena reads as wrong text: the lowercase canonical text instead.
  UUID: { duckdb: "VARCHAR", glue: "string", trino: "VARCHAR", iceberg: "string" },
};

/** The storage of a declared (normalized) column type on every backend; DECIMAL(p,s) is itself everywhere. */
export function columnStorage(type: string): ColumnStorage {
  const known = STORAGE[type];
  if (known) return known;
  const decimal = /^DECIMAL\((\d+),(\d+)\)$/.exec(type);
  if (decimal) return { duckdb: type, glue: `decimal(${decimal[1]},${decimal[2]})`, trino: type, iceberg: `decimal(${decimal[1]}, ${decimal[2]})` };
  // normalizeColumnType admits nothing else; a type outside this table is a programming error, never a guess.
  throw new Error(`column type '${type}' has no storage mapping (src/model/column-types.ts)`);
}

/** The DuckDB type a column's values are cast to before they are written. */
export function duckdbStorageType(type: string): string {
  return columnStorage(type).duckdb;
}

/** The Glue (Hive) type of a declared column type. */
export function glueColumnType(type: string): string {
  return columnStorage(type).glue;
}

/** The Trino type an Athena build casts a declared column type to. */
export function trinoColumnType(type: string): string {
  return columnStorage(type).trino;
}

/** The Iceberg type of a declared column type (what its Parquet files hold). */
export function icebergColumnType(type: string): string {
  return columnStorage(type).iceberg;
}

/**
 * The Glue column type of each Iceberg primitive type, as Iceberg's own Glue catalog writes it (Athena reads an
 * Iceberg table's schema from its metadata file; these columns are what the Glue console and crawlers show). Both
 * timestamps are `timestamp` there. Iceberg types Athena cannot read (time, uuid, fixed) have none.
 */
const ICEBERG_GLUE: Readonly<Record<string, string>> = {
  boolean: "boolean",
  int: "int",
  long: "bigint",
  float: "float",
  double: "double",
  string: "string",
  binary: "binary",
  date: "date",
  timestamp: "timestamp",
  timestamptz: "timestamp",
};

/**
 * The Glue column type of a column of an `iceberg: true` table's Glue Iceberg table, from its Iceberg type; a type
 * without one Athena reads is refused, naming the column and the fix.
 */
export function icebergGlueColumnType(column: string, type: string): string {
  const iceberg = icebergColumnType(type);
  const decimal = /^decimal\((\d+), (\d+)\)$/.exec(iceberg);
  const glue = decimal ? `decimal(${decimal[1]},${decimal[2]})` : ICEBERG_GLUE[iceberg];
  if (glue === undefined) {
    throw new InvalidInputError(
      `column '${column}' is ${type}, stored as Iceberg type '${iceberg}', which Athena does not read in an Iceberg table; ` +
        "declare it as another type (VARCHAR holds any value as text), or leave out iceberg: true (or --iceberg)",
    );
  }
  return glue;
}

/** The declared type of each Iceberg primitive type lakeswap writes, read back where no declaration names the column. */
const ICEBERG_DECLARED: Readonly<Record<string, string>> = {
  boolean: "BOOLEAN",
  int: "INTEGER",
  long: "BIGINT",
  float: "FLOAT",
  double: "DOUBLE",
  string: "VARCHAR",
  binary: "BLOB",
  date: "DATE",
  timestamp: "TIMESTAMP",
  timestamptz: "TIMESTAMPTZ",
};

/**
 * A declared type that reads a column of Iceberg type `type` as its files hold it (an earlier snapshot's schema,
 * which the table's definition may no longer name): undefined for a type lakeswap never writes.
 */
export function declaredTypeOfIceberg(type: string): string | undefined {
  const decimal = /^decimal\((\d+), ?(\d+)\)$/.exec(type);
  return decimal ? `DECIMAL(${decimal[1]},${decimal[2]})` : ICEBERG_DECLARED[type];
}

/** Every declared type this module maps (DECIMAL(p,s) aside), for tests and messages. */
export const MAPPED_TYPES: readonly string[] = Object.keys(STORAGE);

/** The PostgreSQL type (as `format_type` prints it) a sink's target column of each declared type has. */
const POSTGRES: Readonly<Record<string, string>> = {
  BOOLEAN: "boolean",
  TINYINT: "smallint",
  SMALLINT: "smallint",
  INTEGER: "integer",
  BIGINT: "bigint",
  UTINYINT: "smallint",
  USMALLINT: "integer",
  UINTEGER: "bigint",
  UBIGINT: "numeric(20,0)",
  HUGEINT: "numeric(38,0)",
  FLOAT: "real",
  DOUBLE: "double precision",
  VARCHAR: "text",
  DATE: "date",
  TIME: "time without time zone",
  TIMESTAMP: "timestamp without time zone",
  TIMESTAMPTZ: "timestamp with time zone",
  UUID: "uuid",
};

/** The PostgreSQL type of a declared column type, or undefined where a sink cannot send it (BLOB). */
export function postgresColumnType(type: string): string | undefined {
  const known = POSTGRES[type];
  if (known) return known;
  const decimal = /^DECIMAL\((\d+),(\d+)\)$/.exec(type);
  return decimal ? `numeric(${decimal[1]},${decimal[2]})` : undefined;
}
