// Issue 9, item 7: users' SQL is one SELECT, and the DuckDB instance that runs it reaches only the lake.
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { InvalidInputError } from "../../src/core/errors.js";
import type { Lake } from "../../src/core/lake.js";
import { defineTable } from "../../src/core/table.js";
import { openEmbeddedLake } from "../../src/open-lake.js";
import { tempDir } from "../support/lake-fixture.js";

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
  await lake.replacePartition("orders", "day=2026-11-01", { select: "SELECT range AS id FROM range(10)" });
});
afterAll(async () => {
  await lake.close();
  cleanup();
});

describe("a layer's SQL and --sql are exactly one SELECT", () => {
  it("refuses the issue's multi-statement --sql before running anything: no file is written", async () => {
    const evil = path.join(outside, "evil.csv");
    const sql = `SELECT 1 AS id FROM range(1)) AS q LIMIT 0; COPY (SELECT 42) TO '${evil}'; SELECT * FROM (SELECT 1 AS id`;
    await expect(lake.replacePartition("orders", "day=2026-11-02", { select: sql })).rejects.toThrow(InvalidInputError);
    await expect(lake.replacePartition("orders", "day=2026-11-02", { select: `SELECT 1 AS id; COPY (SELECT 42) TO '${evil}'` })).rejects.toThrow(
      /the SQL is 2 statements: a layer's SQL is exactly one SELECT/,
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
    const error = await lake
      .replacePartition("orders", "day=2026-11-01", { select: `SELECT CAST(secret AS BIGINT) AS id FROM read_csv('${path.join(outside, "secret.csv")}')` })
      .catch((e: unknown) => e);
    expect((error as Error).message).toMatch(/Permission Error: Cannot access file .*secret.csv.* disabled by configuration/);
    expect(await lake.pointer("orders", "day=2026-11-01")).toEqual(before);
  });

  it("nor a query, nor can it switch the restriction off", async () => {
    await expect(lake.query(`SELECT * FROM read_text('${path.join(outside, "secret.csv")}')`)).rejects.toThrow(/Cannot access file/);
    await expect(lake.query(`SELECT * FROM read_text('${path.join(dir, "lake")}-other/x')`)).rejects.toThrow(/Cannot access file/);
    await expect(lake.query("SET enable_external_access = true")).rejects.toThrow(/not a SELECT/);
  });

  it("still reads the lake's tables and writes runs", async () => {
    const result = await lake.replacePartition("orders", "day=2026-11-03", { select: "SELECT id + 100 AS id FROM orders WHERE day = '2026-11-01'" });
    expect(result.rows).toBe(10);
  });
});

describe("expressions are exactly one expression", () => {
  it("refuses an inputs.map expression that would run more", async () => {
    await expect(
      lake.mapPartitions({ fromKeys: ["day"], values: [["2026-11-01"]], map: [{ key: "month", expression: "substr(day, 1, 7) AS month FROM t; COPY (SELECT 1) TO '/tmp/x'; SELECT 1" }] }),
    ).rejects.toThrow(/inputs.map expression of 'month' '.*' is not allowed: it makes 3 statements/);
    await expect(
      lake.mapPartitions({ fromKeys: ["day"], values: [["2026-11-01"]], map: [{ key: "month", expression: "substr(day, 1, 7)" }] }),
    ).resolves.toEqual([["2026-11"]]);
  });

  it("refuses a partition expression with a subquery before reading the delivery", async () => {
    const file = path.join(dir, "delivery.csv");
    writeFileSync(file, "id\n1\n");
    await expect(
      lake.landDelivery({
        files: [file], format: "csv", header: true, delimiter: ",", columns: [{ name: "id", type: "BIGINT", nullable: true }],
        partition: [{ key: "day", expression: `(SELECT content FROM read_text('${path.join(outside, "secret.csv")}'))` }], signatureColumns: ["id"],
      }),
    ).rejects.toThrow(/partition expression of 'day' '.*' is not allowed: it contains a subquery/);
  });
});
