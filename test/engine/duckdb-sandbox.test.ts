// Issue 9, item 7: users' SQL is one SELECT, and the DuckDB instance that runs it reaches only the lake.
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DuckDBConnection } from "@duckdb/node-api";
import { InvalidInputError } from "../../src/model/errors.js";
import type { Lake } from "../../src/lake/lake.js";
import { defineTable } from "../../src/model/table.js";
import { openEmbeddedLake } from "../../src/open/open-lake.js";
import { openRestrictedDuckDb } from "../../src/duckdb/duckdb-open.js";
import { SharedDuckDb } from "../../src/duckdb/shared-duckdb.js";
import { runMain } from "../support/main-cli.js";
import { tempDir } from "../support/lake-fixture.js";
import { replacePartition } from "../../src/lake/operations/replace.js";

let dir: string;
let cleanup: () => void;
let lake: Lake;
let outside: string;

beforeAll(async () => {
  ({ dir, cleanup } = tempDir("lakeswap-sandbox-"));
  outside = path.join(dir, "outside");
  mkdirSync(outside);
  writeFileSync(path.join(outside, "secret.csv"), "secret\n42\n");
  lake = await openEmbeddedLake(path.join(dir, "lake"));
  await lake.createTable(defineTable({ name: "orders", columns: [{ name: "id", type: "BIGINT" }], partitionKeys: ["day"] }));
  await replacePartition(lake, "orders", "day=2026-11-01", { select: "SELECT range AS id FROM range(10)" });
});
afterAll(async () => {
  await lake.close();
  cleanup();
});

describe("a layer's SQL and --sql are exactly one SELECT", () => {
  it("refuses the issue's multi-statement --sql before running anything: no file is written", async () => {
    const evil = path.join(outside, "evil.csv");
    const sql = `SELECT 1 AS id FROM range(1)) AS q LIMIT 0; COPY (SELECT 42) TO '${evil}'; SELECT * FROM (SELECT 1 AS id`;
    await expect(replacePartition(lake, "orders", "day=2026-11-02", { select: sql })).rejects.toThrow(InvalidInputError);
    await expect(replacePartition(lake, "orders", "day=2026-11-02", { select: `SELECT 1 AS id; COPY (SELECT 42) TO '${evil}'` })).rejects.toThrow(
      /the SQL is 2 statements: lakeswap runs exactly one SELECT/,
    );
    expect(existsSync(evil)).toBe(false);
    expect(await lake.pointer("orders", "day=2026-11-02")).toBeUndefined();
  });

  it("lakeswap query runs one SELECT only", async () => {
    const evil = path.join(outside, "query.csv");
    await expect(lake.query(`COPY (SELECT 42) TO '${evil}'`)).rejects.toThrow(/the query is not a SELECT/);
    expect(existsSync(evil)).toBe(false);
    expect((await lake.query("SELECT count(*) AS n FROM orders")).rows).toEqual([[10]]);
  });
});

describe("the engine that runs users' SQL reaches only the lake", () => {
  it("a layer SELECT cannot read a file outside the lake; the pointer does not move", async () => {
    const before = await lake.pointer("orders", "day=2026-11-01");
    const error = await replacePartition(
      lake, "orders", "day=2026-11-01", { select: `SELECT CAST(secret AS BIGINT) AS id FROM read_csv('${path.join(outside, "secret.csv")}')` })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidInputError);
    expect((error as Error).message).toMatch(/the SQL calls the table function read_csv\('.*secret.csv'\), which reads files/);
    expect(await lake.pointer("orders", "day=2026-11-01")).toEqual(before);
  });

  it("nor a query, nor can it switch the restriction off", async () => {
    await expect(lake.query(`SELECT * FROM read_text('${path.join(outside, "secret.csv")}')`)).rejects.toThrow(/calls the table function read_text/);
    await expect(lake.query(`SELECT * FROM '${path.join(dir, "lake")}-other/x.csv'`)).rejects.toThrow(/reads the file '.*' as a table/);
    await expect(lake.query("SET enable_external_access = true")).rejects.toThrow(/not a SELECT/);
  });

  it("a layer cannot read a lake table's files by path, which would bypass its declared inputs (issue 25, item 10)", async () => {
    const files = path.join(dir, "lake", "orders", "**", "*.parquet");
    await expect(replacePartition(lake, "orders", "day=2026-11-04", { select: `SELECT id FROM read_parquet('${files}')` })).rejects.toThrow(
      /the SQL calls the table function read_parquet\('.*\*\.parquet'\), which reads files or the engine's state: .*declare it in inputs.tables/,
    );
    expect(await lake.pointer("orders", "day=2026-11-04")).toBeUndefined();
  });

  it("still reads the lake's tables and writes runs", async () => {
    const result = await replacePartition(lake, "orders", "day=2026-11-03", { select: "SELECT id + 100 AS id FROM orders WHERE day = '2026-11-01'" });
    expect(result.rows).toBe(10);
  });
});

describe("the user-SQL instance's allowed folders are the lake tables it is opened for (issue 25, item 10)", () => {
  it("reaches neither the working folder's .tmp (DuckDB's default temporary folder) nor the lake's metadata nor another table", async () => {
    const work = path.join(dir, "work");
    mkdirSync(path.join(work, ".tmp"), { recursive: true });
    writeFileSync(path.join(work, ".tmp", "secret.txt"), "top secret\n");
    const cwd = process.cwd();
    process.chdir(work);
    const restricted = await openRestrictedDuckDb([path.join(dir, "lake", "orders")]);
    try {
      const connection = await restricted.instance.connect();
      const read = async (file: string) => {
        try {
          return String((await connection.runAndReadAll(`SELECT content FROM read_text('${file}')`)).getRowsJS()[0]?.[0]);
        } catch (error) {
          return (error as Error).message;
        }
      };
      expect(await read(".tmp/secret.txt")).toMatch(/Permission Error: Cannot access file/);
      expect(await read(path.join(work, ".tmp", "secret.txt"))).toMatch(/Permission Error: Cannot access file/);
      mkdirSync(path.join(dir, "lake", "other"), { recursive: true });
      writeFileSync(path.join(dir, "lake", "other", "x.txt"), "other table\n");
      expect(await read(path.join(dir, "lake", "other", "x.txt"))).toMatch(/Permission Error: Cannot access file/);
      const tablesFolder = path.join(dir, "lake", "_lakeswap", "tables");
      expect(await read(path.join(tablesFolder, "orders.json"))).toMatch(/Permission Error: Cannot access file/);
      writeFileSync(path.join(dir, "lake", "orders", "readable.txt"), "the table's own folder\n");
      expect(await read(path.join(dir, "lake", "orders", "readable.txt"))).toBe("the table's own folder\n");
      connection.closeSync();
    } finally {
      await restricted.close();
      process.chdir(cwd);
    }
  });

  it("lakeswap query refuses read_text('.tmp/secret.txt') run from a folder that has one (exit 2, nothing printed of it)", async () => {
    const work = path.join(dir, "work2");
    mkdirSync(path.join(work, ".tmp"), { recursive: true });
    writeFileSync(path.join(work, ".tmp", "secret.txt"), "top secret\n");
    const cwd = process.cwd();
    process.chdir(work);
    try {
      const result = await runMain(["--lake", path.join(dir, "lake"), "query", "SELECT content FROM read_text('.tmp/secret.txt')"]);
      expect(result.code).toBe(2);
      expect(result.stderr).toMatch(/lakeswap: the query calls the table function read_text\('.tmp\/secret.txt'\), which reads files/);
      expect(result.stdout + result.stderr).not.toMatch(/top secret/);
    } finally {
      process.chdir(cwd);
    }
  });
});

describe("expressions are exactly one expression", () => {
  it("an instance opened ahead of its builds (Engine.prepare) reaches only the folders it was opened for, and none for expressions", async () => {
    const shared = new SharedDuckDb();
    const lakeFolder = path.join(dir, "lake", "orders");
    try {
      shared.prepare({ folders: [lakeFolder] });
      shared.prepare({ folders: [] });
      const read = (folders: string[], file: string) =>
        shared.withConnection(async (connection) => (await connection.runAndReadAll(`SELECT count(*) FROM read_csv('${file}')`)).getRowsJS(), { folders });
      await expect(read([lakeFolder], path.join(outside, "secret.csv"))).rejects.toThrow(/Permission Error/);
      await expect(read([], path.join(outside, "secret.csv"))).rejects.toThrow(/Permission Error/);
      writeFileSync(path.join(lakeFolder, "inside.csv"), "a\n1\n");
      await expect(read([lakeFolder], path.join(lakeFolder, "inside.csv"))).resolves.toEqual([[1n]]);
      await expect(shared.withConnection((connection) => connection.run("SET enable_external_access = true"), { folders: [] })).rejects.toThrow(/lock/i);
      // Expressions (no FROM, no subquery: the parser's check) run in an instance already open for users' SQL: as locked.
      const expressions = <T>(work: (connection: DuckDBConnection) => Promise<T>) => shared.withConnection(work, "expressions");
      await expect(expressions(async (connection) => (await connection.runAndReadAll(`SELECT count(*) FROM read_csv('${path.join(outside, "secret.csv")}')`)).getRowsJS())).rejects.toThrow(/Permission Error/);
      await expect(expressions((connection) => connection.run("SET enable_external_access = true"))).rejects.toThrow(/lock/i);
      await expect(expressions(async (connection) => (await connection.runAndReadAll("SELECT substr('2026-11-01', 1, 7)")).getRowsJS())).resolves.toEqual([["2026-11"]]);
    } finally {
      await shared.close();
    }
  });

  it("one instance prepared for a sync's builds serves each build over some of its folders, and reaches nothing else", async () => {
    const shared = new SharedDuckDb();
    const [raw, stage, monthly] = ["raw", "stage", "monthly"].map((table) => path.join(dir, "lake", `prepared_${table}`));
    try {
      for (const folder of [raw, stage, monthly]) mkdirSync(folder!, { recursive: true });
      shared.prepare({ folders: [monthly!, raw!, stage!] });
      const allowed = (folders: string[]) =>
        shared.withConnection(async (connection) => String((await connection.runAndReadAll("SELECT current_setting('allowed_directories')")).getRowsJS()[0]?.[0]), { folders });
      const prepared = await allowed([monthly!, raw!, stage!]);
      // The stage build (raw into stage) and the monthly one (stage into monthly) start no instance of their own.
      expect(await allowed([raw!, stage!])).toBe(prepared);
      expect(await allowed([monthly!, stage!])).toBe(prepared);
      for (const folder of [raw, stage, monthly]) expect(prepared).toContain(`${folder}/`);
      writeFileSync(path.join(stage!, "inside.csv"), "a\n1\n");
      const read = (file: string) => shared.withConnection(async (connection) => (await connection.runAndReadAll(`SELECT count(*) FROM read_csv('${file}')`)).getRowsJS(), { folders: [raw!, stage!] });
      await expect(read(path.join(stage!, "inside.csv"))).resolves.toEqual([[1n]]);
      await expect(read(path.join(outside, "secret.csv"))).rejects.toThrow(/Permission Error/);
      // A build over a folder the prepared set lacks gets an instance of its own, reaching only its folders.
      const other = path.join(dir, "lake", "prepared_other");
      mkdirSync(other, { recursive: true });
      const own = await allowed([other, stage!]);
      expect(own).not.toBe(prepared);
      expect(own).not.toContain(`${raw}/`);
      // SQL that may reach no folder is not served by the prepared instance.
      expect(await allowed([])).not.toContain(`${stage}/`);
    } finally {
      await shared.close();
    }
  });

  it("refuses an inputs.map expression that would run more", async () => {
    await expect(
      lake.landing.mapPartitions({ fromKeys: ["day"], values: [["2026-11-01"]], map: [{ key: "month", expression: "substr(day, 1, 7) AS month FROM t; COPY (SELECT 1) TO '/tmp/x'; SELECT 1" }] }),
    ).rejects.toThrow(/inputs.map expression of 'month' '.*' is not allowed: it makes 3 statements/);
    await expect(
      lake.landing.mapPartitions({ fromKeys: ["day"], values: [["2026-11-01"]], map: [{ key: "month", expression: "substr(day, 1, 7)" }] }),
    ).resolves.toEqual([["2026-11"]]);
  });

  it("refuses a partition expression with a subquery before reading the delivery", async () => {
    const file = path.join(dir, "delivery.csv");
    writeFileSync(file, "id\n1\n");
    await expect(
      lake.landing.land({
        files: [file], format: "csv", header: true, delimiter: ",", columns: [{ name: "id", type: "BIGINT", nullable: true }],
        partition: [{ key: "day", expression: `(SELECT content FROM read_text('${path.join(outside, "secret.csv")}'))` }], signatureColumns: ["id"],
      }),
    ).rejects.toThrow(/partition expression of 'day' '.*' is not allowed: it contains a subquery/);
  });
});

describe("a build's SELECT reads the lake tables by name", () => {
  it("a column it lacks is named with the line of the SELECT it is on, and no path of the lake's runs", async () => {
    const error = await replacePartition(lake, "orders", "day=2026-12-03", { select: "-- from the orders of day 1\nSELECT id, nope\nFROM orders\n" }).catch((e: unknown) => e);
    expect(String(error)).toMatch(/Referenced column "nope" not found/);
    expect(String(error)).toMatch(/LINE 2: SELECT id, nope/);
    expect(String(error)).not.toContain("run=");
    expect(await lake.pointer("orders", "day=2026-12-03")).toBeUndefined();
  });

  it("its own WITH of a lake table's name reads its own rows, as it would over a view; a table read twice reads its rows each time", async () => {
    await replacePartition(lake, "orders", "day=2026-12-04", { select: "WITH orders AS (SELECT 7 AS id) SELECT id FROM orders" });
    await replacePartition(lake, "orders", "day=2026-12-05", {
      select: "SELECT a.id + b.id AS id FROM orders a JOIN orders b ON a.id = b.id AND a.day = b.day WHERE a.day = '2026-11-01'",
    });
    const rows = await lake.query("SELECT day, count(*), sum(id) FROM orders WHERE day IN ('2026-12-04', '2026-12-05') GROUP BY day ORDER BY day");
    expect(rows.rows).toEqual([["2026-12-04", 1, 7], ["2026-12-05", 10, 90]]);
  });
});
