import path from "node:path";
import { DuckDBInstance } from "@duckdb/node-api";
import { describe, expect, it } from "vitest";
import { duckdbStorageType } from "../../src/model/column-types.js";
import { quoteLiteral } from "../../src/model/sql.js";
import { PostgresSink } from "../../src/sinks/postgres/postgres-sink.js";
import type { SinkColumn, SinkLayout, SinkMode, SinkPartitionWrite } from "../../src/sinks/sink.js";
import { tempDir } from "../support/lake-fixture.js";
import { postgresAvailable } from "../support/postgres.js";
import { usePostgres } from "../support/shared-services.js";
import { TEST_SOURCE } from "../support/sink-runs.js";

/*
 * Every value arrives as the lake holds it: each column type the sink sends, with the values a CSV transfer can get
 * wrong (NULL against an empty string, quotes, delimiters, line breaks, backslashes, COPY's own markers, the extremes
 * of numbers and times), in both modes, and in an upsert's merged and straight-COPYed rows alike.
 */

const postgres = usePostgres("values");

/** Column name, declared lake type, and each row's value as a DuckDB literal; `expected` is PostgreSQL's text of it (null for NULL). */
const COLUMNS: readonly { readonly name: string; readonly type: string; readonly values: readonly string[]; readonly expected: readonly (string | null)[] }[] = [
  { name: "id", type: "BIGINT", values: ["1", "2", "3", "4"], expected: ["1", "2", "3", "4"] },
  {
    name: "note",
    type: "VARCHAR",
    values: ["''", "NULL", `'a"b,c''d' || chr(9) || 'tab'`, "'line 1' || chr(10) || 'line 2' || chr(13) || chr(10)"],
    expected: ["", null, `a"b,c'd\ttab`, "line 1\nline 2\r\n"],
  },
  { name: "marker", type: "VARCHAR", values: [`'\\.'`, `'\\N'`, "'NULL'", "' back\\slash\\t '"], expected: ["\\.", "\\N", "NULL", " back\\slash\\t "] },
  { name: "flag", type: "BOOLEAN", values: ["true", "false", "NULL", "true"], expected: ["true", "false", null, "true"] },
  { name: "tiny", type: "TINYINT", values: ["-128", "127", "0", "NULL"], expected: ["-128", "127", "0", null] },
  { name: "big", type: "BIGINT", values: ["-9223372036854775808", "9223372036854775807", "0", "NULL"], expected: ["-9223372036854775808", "9223372036854775807", "0", null] },
  { name: "ubig", type: "UBIGINT", values: ["18446744073709551615", "0", "1", "NULL"], expected: ["18446744073709551615", "0", "1", null] },
  {
    name: "huge",
    type: "HUGEINT",
    values: ["99999999999999999999999999999999999999", "-99999999999999999999999999999999999999", "0", "NULL"],
    expected: ["99999999999999999999999999999999999999", "-99999999999999999999999999999999999999", "0", null],
  },
  { name: "amount", type: "DECIMAL(38,10)", values: ["'1234567890123456789012345678.0123456789'", "'-0.0000000001'", "'0'", "NULL"], expected: ["1234567890123456789012345678.0123456789", "-0.0000000001", "0.0000000000", null] },
  { name: "ratio", type: "DOUBLE", values: ["1e300", "'-inf'", "'nan'", "0.1"], expected: ["1e+300", "-Infinity", "NaN", "0.1"] },
  { name: "small", type: "FLOAT", values: ["3.4e38", "'inf'", "1.5", "NULL"], expected: ["3.4e+38", "Infinity", "1.5", null] },
  { name: "d", type: "DATE", values: ["'0001-01-01'", "'9999-12-31'", "'2026-02-28'", "NULL"], expected: ["0001-01-01", "9999-12-31", "2026-02-28", null] },
  { name: "t", type: "TIME", values: ["'00:00:00'", "'23:59:59.999999'", "'12:00:00.5'", "NULL"], expected: ["00:00:00", "23:59:59.999999", "12:00:00.5", null] },
  {
    name: "ts",
    type: "TIMESTAMP",
    values: ["'2026-11-01 00:00:00.000001'", "'1970-01-01 00:00:00'", "'9999-12-31 23:59:59.999999'", "NULL"],
    expected: ["2026-11-01 00:00:00.000001", "1970-01-01 00:00:00", "9999-12-31 23:59:59.999999", null],
  },
  { name: "tstz", type: "TIMESTAMPTZ", values: ["'2026-11-01 00:00:00.123456+02'", "'2026-06-01 12:00:00+00'", "NULL", "'1999-12-31 23:00:00-01'"], expected: ["2026-10-31 22:00:00.123456+00", "2026-06-01 12:00:00+00", null, "2000-01-01 00:00:00+00"] },
  { name: "u", type: "UUID", values: ["'550e8400-e29b-41d4-a716-446655440000'", "NULL", "'00000000-0000-0000-0000-000000000000'", "'ffffffff-ffff-ffff-ffff-ffffffffffff'"], expected: ["550e8400-e29b-41d4-a716-446655440000", null, "00000000-0000-0000-0000-000000000000", "ffffffff-ffff-ffff-ffff-ffffffffffff"] },
];

function layoutOf(mode: SinkMode): SinkLayout {
  const columns: SinkColumn[] = COLUMNS.map((c) => ({ name: c.name, type: c.type, nullable: c.name !== "id" }));
  return { lakeTable: "values", source: TEST_SOURCE, columns: [...columns, { name: "day", type: "VARCHAR", nullable: false }], partitionKeys: ["day"], mode, primaryKey: mode === "upsert" ? ["id"] : [] };
}

async function workspace(mode: SinkMode) {
  const { url, query } = await postgres.database();
  const { dir, cleanup } = tempDir("lakeswap-values-");
  postgres.onCleanup(cleanup);
  const layout = layoutOf(mode);
  const sink = new PostgresSink({ kind: "postgres", url, maskedUrl: url, schema: "public", table: "vals", mode, primaryKey: layout.primaryKey, hardDelete: false });
  postgres.onCleanup(() => sink.close());
  const duck = await DuckDBInstance.create(":memory:");
  const connection = await duck.connect();
  await connection.run("SET TimeZone = 'UTC'");
  postgres.onCleanup(() => {
    connection.closeSync();
    duck.closeSync();
  });
  let runs = 0;
  return {
    sink,
    layout,
    /** A run of rows given as [values of row `index` (0..3) of COLUMNS, id], stored as the lake stores each type. */
    async run(day: string, rows: readonly (readonly [index: number, id: number])[]): Promise<SinkPartitionWrite> {
      runs += 1;
      const file = path.join(dir, `run-${runs}.parquet`);
      const select = ([index, id]: readonly [number, number]): string =>
        COLUMNS.map((c) => `CAST(CAST(${c.name === "id" ? String(id) : c.values[index]} AS ${c.type}) AS ${duckdbStorageType(c.type)}) AS ${c.name}`).join(", ");
      await connection.run(`COPY (${rows.map((row) => `SELECT ${select(row)}`).join(" UNION ALL ")}) TO ${quoteLiteral(file)} (FORMAT parquet)`);
      return { partition: { keys: ["day"], values: [day] }, path: `day=${day}`, runId: `run-${runs}`, signature: `sig-${runs}`, files: [file] };
    },
    /** Every row of the target as PostgreSQL's text of each column (instants in UTC), in id order. */
    async rows(): Promise<(string | null)[][]> {
      const text = COLUMNS.map((c) => (c.type === "TIMESTAMPTZ" ? `(${c.name} AT TIME ZONE 'UTC')::text || '+00' AS ${c.name}` : `${c.name}::text AS ${c.name}`)).join(", ");
      const result = await query<Record<string, string | null>>(`SELECT ${text}, day FROM vals ORDER BY vals.id`);
      return result.map((row) => [...COLUMNS.map((c) => row[c.name] ?? null), row.day ?? null]);
    },
  };
}

/** The expected text of row `index` of COLUMNS, with its id and day. */
function expectedRow(index: number, id: number, day: string): (string | null)[] {
  return [...COLUMNS.map((c) => (c.name === "id" ? String(id) : c.expected[index]!)), day];
}

describe.skipIf(!postgresAvailable())("PostgreSQL sink: every type and edge value exactly", () => {
  it("partition_replace sends each value as the lake holds it, NULL and empty text apart", async () => {
    const ws = await workspace("partition_replace");
    await ws.sink.prepare(ws.layout);
    expect(await ws.sink.write(ws.layout, await ws.run("2026-11-01", [[0, 1], [1, 2], [2, 3], [3, 4]]))).toEqual({ rows: 4 });
    expect(await ws.rows()).toEqual([0, 1, 2, 3].map((i) => expectedRow(i, i + 1, "2026-11-01")));
  });

  it("upsert sends them the same, whether a row is merged or COPYed straight in, and when a key moved from another partition", async () => {
    const ws = await workspace("upsert");
    await ws.sink.prepare(ws.layout);
    // A new partition: its rows straight in.
    expect(await ws.sink.write(ws.layout, await ws.run("2026-11-01", [[3, 1], [2, 2]]))).toEqual({ rows: 2 });
    // The partition again: ids 1 and 2 merged (every value changes), ids 3 and 4 new.
    expect(await ws.sink.write(ws.layout, await ws.run("2026-11-01", [[0, 1], [1, 2], [2, 3], [3, 4]]))).toEqual({ rows: 4 });
    // A new partition whose id 3 lives in day 1 (it moved): merged whole, id 3 now in day 2.
    expect(await ws.sink.write(ws.layout, await ws.run("2026-11-02", [[0, 101], [1, 3]]))).toEqual({ rows: 2 });
    await ws.sink.close();
    expect(await ws.rows()).toEqual([
      expectedRow(0, 1, "2026-11-01"),
      expectedRow(1, 2, "2026-11-01"),
      expectedRow(1, 3, "2026-11-02"),
      expectedRow(3, 4, "2026-11-01"),
      expectedRow(0, 101, "2026-11-02"),
    ]);
  });
});
