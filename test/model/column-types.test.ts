import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { MAPPED_TYPES, columnStorage } from "../../src/model/column-types.js";
import type { Lake } from "../../src/lake/lake.js";
import { defineTable, normalizeColumnType } from "../../src/model/table.js";
import { BACKEND_FACTORIES, selectedBackends, type TestBackend } from "../support/lake-fixture.js";
import { replacePartition } from "../../src/lake/operations/replace.js";

// Item 13 of issue 9: one mapping from each declared type to DuckDB storage, Glue and Trino, the same on both backends.
// Unsigned integers, HUGEINT, TIME and UUID are written as types Trino and Hive have (the emulated Athena refuses a
// Parquet column Trino cannot read as the Glue type, and a CAST to a type Trino lacks, as Athena does).

const COLUMNS = [
  { name: "ut", type: "UTINYINT", sql: "CAST(255 AS UTINYINT)", text: "255" },
  { name: "us", type: "USMALLINT", sql: "CAST(65535 AS USMALLINT)", text: "65535" },
  { name: "ui", type: "UINTEGER", sql: "CAST(4294967295 AS UINTEGER)", text: "4294967295" },
  { name: "ub", type: "UBIGINT", sql: "CAST('18446744073709551615' AS UBIGINT)", text: "18446744073709551615" },
  // Above 2^53: a DOUBLE would round it.
  { name: "hi", type: "HUGEINT", sql: "CAST('12345678901234567890123456789012345678' AS HUGEINT)", text: "12345678901234567890123456789012345678" },
  { name: "tm", type: "TIME", sql: "TIME '12:34:56.123456'", text: "12:34:56.123456" },
  { name: "uu", type: "UUID", sql: "UUID '8C0E4A5B-1D2F-4E3A-9B7C-6D5E4F3A2B1C'", text: "8c0e4a5b-1d2f-4e3a-9b7c-6d5e4f3a2b1c" },
  { name: "bi", type: "BIGINT", sql: "CAST(-9007199254740993 AS BIGINT)", text: "-9007199254740993" },
  { name: "de", type: "DECIMAL(20,2)", sql: "CAST('123456789012345678.91' AS DECIMAL(20,2))", text: "123456789012345678.91" },
  { name: "vc", type: "VARCHAR", sql: "'héllo'", text: "héllo" },
] as const;

const RAW = defineTable({ name: "typed_raw", columns: COLUMNS.map(({ name, type }) => ({ name, type })), partitionKeys: ["day"] });
const DERIVED = defineTable({ name: "typed_derived", columns: COLUMNS.map(({ name, type }) => ({ name, type })), partitionKeys: ["day"] });
/** The values as text, in the SQL both DuckDB and Trino accept. */
const AS_TEXT = (table: string) => `SELECT ${COLUMNS.map((c) => `CAST(${c.name} AS VARCHAR) AS ${c.name}`).join(", ")} FROM ${table}`;

describe("column type mapping", () => {
  it("maps every type a table may declare, and maps it the same way for storage, Glue and Trino", () => {
    for (const declared of ["BOOLEAN", "TINYINT", "SMALLINT", "INT", "INTEGER", "LONG", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
      "UBIGINT", "REAL", "FLOAT", "DOUBLE", "TEXT", "STRING", "VARCHAR", "BLOB", "DATE", "TIME", "TIMESTAMP", "TIMESTAMPTZ", "UUID", "DECIMAL(10,2)"]) {
      const storage = columnStorage(normalizeColumnType("c", declared));
      // Trino has no unsigned integers and no HUGEINT: a build never casts to them.
      expect(storage.trino).not.toMatch(/^U(TINY|SMALL|BIG)?INT|^UINTEGER|^HUGEINT/);
      expect(storage.duckdb).not.toMatch(/^U(TINY|SMALL|BIG)?INT|^UINTEGER|^HUGEINT|^TIME$|^UUID$/);
      // An Iceberg primitive type (v2) for what the files hold.
      expect(storage.iceberg).toMatch(/^(boolean|int|long|float|double|string|binary|date|timestamp|timestamptz|decimal\(\d+, \d+\))$/);
    }
    expect(MAPPED_TYPES).toContain("UBIGINT");
    expect(columnStorage("UBIGINT")).toEqual({ duckdb: "DECIMAL(20,0)", glue: "decimal(20,0)", trino: "DECIMAL(20,0)", iceberg: "decimal(20, 0)" });
    expect(columnStorage("HUGEINT")).toEqual({ duckdb: "DECIMAL(38,0)", glue: "decimal(38,0)", trino: "DECIMAL(38,0)", iceberg: "decimal(38, 0)" });
    expect(columnStorage("TIME")).toEqual({ duckdb: "VARCHAR", glue: "string", trino: "VARCHAR", iceberg: "string" });
    expect(columnStorage("UUID")).toEqual({ duckdb: "VARCHAR", glue: "string", trino: "VARCHAR", iceberg: "string" });
    expect(columnStorage("DECIMAL(12,3)")).toEqual({ duckdb: "DECIMAL(12,3)", glue: "decimal(12,3)", trino: "DECIMAL(12,3)", iceberg: "decimal(12, 3)" });
  });
});

describe.each(selectedBackends())("column types on the %s backend", (backendName) => {
  let backend: TestBackend;
  let lake: Lake;

  beforeEach(async () => {
    backend = await BACKEND_FACTORIES[backendName]!();
    lake = await backend.open();
    await lake.createTable(RAW);
    await lake.createTable(DERIVED);
  });

  afterEach(async () => {
    await lake.close();
    await backend.cleanup();
  });

  it("lands unsigned, HUGEINT, TIME and UUID values and reads them back exactly, and a derived build of them succeeds", async () => {
    await replacePartition(lake, RAW.name, "day=1", { select: `SELECT ${COLUMNS.map((c) => `${c.sql} AS ${c.name}`).join(", ")}`, landed: true });
    const expected = [COLUMNS.map((c) => c.text)];
    expect((await lake.query(AS_TEXT(RAW.name))).rows).toEqual(expected);

    // A derived layer built by the lake's engine (Athena on AWS: an UNLOAD that casts each column to its Trino type).
    const built = await replacePartition(lake, DERIVED.name, "day=1", { select: `SELECT * FROM ${RAW.name}` });
    expect(built).toMatchObject({ partition: "day=1" });
    expect((await lake.query(AS_TEXT(DERIVED.name))).rows).toEqual(expected);
  });
});
