import { copyFileSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { DuckDBInstance } from "@duckdb/node-api";
import { afterEach, describe, expect, it } from "vitest";
import type { Lake } from "../../src/lake/lake.js";
import { defineTable } from "../../src/model/table.js";
import { embeddedBackend, type TestBackend } from "../support/lake-fixture.js";
import { replacePartition } from "../../src/lake/operations/replace.js";
import { readHistory } from "../../src/lake/operations/history.js";
import { rollbackPartition } from "../../src/lake/operations/rollback.js";
import { collectGarbage } from "../../src/lake/operations/gc.js";
import { dropTable } from "../../src/lake/operations/drop-table.js";

let backend: (TestBackend & { lakeDir: string }) | undefined;
let lake: Lake | undefined;
afterEach(async () => {
  await lake?.close();
  await backend?.cleanup();
  lake = undefined;
});

async function openLake(graceMs = 0): Promise<Lake> {
  backend = await embeddedBackend();
  lake = await backend.open({ graceMs, leaseWaitMs: 0 });
  return lake;
}

/** Reads with plain DuckDB, no lakeswap code, exactly as the README tells users to. */
async function plainDuckDb(sql: string): Promise<unknown[][]> {
  const instance = await DuckDBInstance.create(":memory:");
  const connection = await instance.connect();
  try {
    return (await connection.runAndReadAll(sql)).getRowsJS();
  } finally {
    connection.closeSync();
    instance.closeSync();
  }
}

const rows = (n: number, tag: string) => `SELECT range AS id, '${tag}' AS tag FROM range(${n})`;

describe("the embedded lake", () => {
  it("reads a column named like a run folder (run) from the files, not from the folder name run=<id>", async () => {
    const lake = await openLake();
    await lake.createTable(defineTable({ name: "jobs", columns: [{ name: "run", type: "VARCHAR" }, { name: "id", type: "BIGINT" }], partitionKeys: ["day"] }));
    await replacePartition(lake, "jobs", "day=2026-11-01", { select: "SELECT 'nightly' AS run, 1 AS id" });
    expect((await lake.query("SELECT run, id, day FROM jobs")).rows).toEqual([["nightly", 1, "2026-11-01"]]);
  });

  it("names a table the lake does not have, instead of DuckDB's guess among its own system tables", async () => {
    const lake = await openLake();
    await lake.createTable(defineTable({ name: "orders_raw", columns: [{ name: "id", type: "BIGINT" }], partitionKeys: ["day"] }));
    await replacePartition(lake, "orders_raw", "day=2026-11-01", { select: "SELECT 1 AS id" });
    const failure = await lake.query("SELECT count(*) FROM orders").catch((error: Error) => error);
    expect(failure).toBeInstanceOf(Error);
    expect((failure as Error).message).toMatch(/^query failed: table 'orders' is not in this lake \(lakeswap tables lists its tables/);
    expect((failure as Error).message).not.toMatch(/pg_prepared_statements|Did you mean/);
    // Any other failure keeps DuckDB's own words.
    await expect(lake.query("SELECT no_such_column FROM orders_raw")).rejects.toThrow(/^query failed: Binder Error: .*no_such_column/);
  });

  it("lets plain DuckDB read exactly the current runs, one * per partition key", async () => {
    const lake = await openLake();
    await lake.createTable(defineTable({ name: "events", columns: [{ name: "id", type: "BIGINT" }, { name: "tag", type: "VARCHAR" }], partitionKeys: ["p_year", "p_month", "p_day"] }));
    await replacePartition(lake, "events", "p_year=2025,p_month=03,p_day=04", { select: rows(10, "old") });
    await replacePartition(lake, "events", "p_year=2025,p_month=03,p_day=04", { select: rows(7, "new") });
    await replacePartition(lake, "events", "p_year=2025,p_month=03,p_day=05", { select: rows(3, "other") });
    const glob = path.join(backend!.lakeDir, "events", "*", "*", "*", "*.parquet");
    const result = await plainDuckDb(
      `SELECT p_day, tag, count(*)::INTEGER FROM read_parquet('${glob}', hive_partitioning = true, hive_types = {'p_day': VARCHAR}) GROUP BY ALL ORDER BY ALL`,
    );
    expect(result).toEqual([["04", "new", 7], ["05", "other", 3]]);
    // lakeswap's own query sees the same, with partition columns from the path.
    const mine = await lake.query("SELECT p_year, p_month, p_day, tag, count(*) AS n FROM events GROUP BY ALL ORDER BY ALL");
    expect(mine.rows).toEqual([["2025", "03", "04", "new", 7], ["2025", "03", "05", "other", 3]]);
  });

  it("does not store partition columns in the files", async () => {
    const lake = await openLake();
    await lake.createTable(defineTable({ name: "t", columns: [{ name: "id", type: "BIGINT" }], partitionKeys: ["day"] }));
    await replacePartition(lake, "t", "day=2026-11-01", { select: "SELECT 1 AS id, '2026-11-01' AS day" });
    const schema = await plainDuckDb(`SELECT name FROM parquet_schema('${path.join(backend!.lakeDir, "t", "day=2026-11-01", "*.parquet")}') WHERE name <> 'duckdb_schema'`);
    expect(schema).toEqual([["id"]]);
  });

  it("writes zstd when the table asks for it, snappy by default", async () => {
    const lake = await openLake();
    await lake.createTable(defineTable({ name: "z", columns: [{ name: "id", type: "BIGINT" }], partitionKeys: ["day"], compression: "zstd" }));
    await lake.createTable(defineTable({ name: "s", columns: [{ name: "id", type: "BIGINT" }], partitionKeys: ["day"] }));
    for (const t of ["z", "s"]) await replacePartition(lake, t, "day=1", { select: "SELECT range AS id FROM range(1000)" });
    const codec = async (t: string) =>
      plainDuckDb(`SELECT DISTINCT compression FROM parquet_metadata('${path.join(backend!.lakeDir, t, "day=1", "*.parquet")}')`);
    expect(await codec("z")).toEqual([["ZSTD"]]);
    expect(await codec("s")).toEqual([["SNAPPY"]]);
  });

  it("keeps history, rolls back to a named run, and GC keeps current, previous and the rollback target", async () => {
    const lake = await openLake(0);
    await lake.createTable(defineTable({ name: "t", columns: [{ name: "id", type: "BIGINT" }, { name: "tag", type: "VARCHAR" }], partitionKeys: ["day"] }));
    const ids: string[] = [];
    for (const n of [1, 2, 3, 4]) ids.push((await replacePartition(lake, "t", "day=1", { select: rows(n, `r${n}`) })).runId);
    // Each replace GCs with grace 0: only the current and previous runs remain.
    let history = (await readHistory(lake, "t", "day=1"))[0]!;
    expect(history.runs.map((r) => [r.runId, r.state, r.rows])).toEqual([
      [ids[3], "current", 4],
      [ids[2], "previous", 3],
    ]);
    const back = await rollbackPartition(lake, "t", "day=1", { toRunId: ids[2] });
    expect(back).toMatchObject({ fromRunId: ids[3], toRunId: ids[2], rows: 3 });
    expect((await lake.query("SELECT count(*) AS n, min(tag) AS tag FROM t")).rows).toEqual([[3, "r3"]]);
    history = (await readHistory(lake, "t", "day=1"))[0]!;
    expect(history.runs.map((r) => [r.runId, r.state])).toEqual([
      [ids[3], "previous"],
      [ids[2], "current"],
    ]);
    // A new replace after the rollback: the current, the previous and the newest older run (the rollback target) stay.
    const next = await replacePartition(lake, "t", "day=1", { select: rows(5, "r5") });
    expect(next.previousRunId).toBe(ids[2]);
    expect(next.gc.removed.map((r) => r.runId)).toEqual([]);
    expect(next.gc.kept).toEqual([
      { runId: ids[2], reason: "previous" },
      { runId: ids[3], reason: "rollback target" },
      { runId: next.runId, reason: "current" },
    ]);
  });

  it("GC --dry-run removes nothing; a real GC removes exactly what the dry run listed", async () => {
    const lake = await openLake(24 * 3_600_000);
    await lake.createTable(defineTable({ name: "t", columns: [{ name: "id", type: "BIGINT" }, { name: "tag", type: "VARCHAR" }], partitionKeys: ["day"] }));
    for (const n of [1, 2, 3, 4]) await replacePartition(lake, "t", "day=1", { select: rows(n, `r${n}`) });
    const runsDir = path.join(backend!.lakeDir, "t", "_runs", "day=1");
    expect(readdirSync(runsDir)).toHaveLength(4);
    const planned = await collectGarbage(lake, "t", { dryRun: true, graceMs: 0 });
    expect(readdirSync(runsDir)).toHaveLength(4);
    const done = await collectGarbage(lake, "t", { graceMs: 0 });
    expect(done[0]!.removed.map((r) => r.runId)).toEqual(planned[0]!.removed.map((r) => r.runId));
    expect(done[0]!.removed).toHaveLength(2);
    expect(readdirSync(runsDir)).toHaveLength(2);
    expect((await lake.query("SELECT count(*) FROM t")).rows).toEqual([[4]]);
  });

  it("reads a current run's files as its pointer's state names them (no listing), and lists the run where the state names none, or a name that is not plain", async () => {
    const lake = await openLake();
    await lake.createTable(defineTable({ name: "t", columns: [{ name: "id", type: "BIGINT" }, { name: "tag", type: "VARCHAR" }], partitionKeys: ["day"] }));
    const first = await replacePartition(lake, "t", "day=1", { select: rows(3, "a") });
    const second = await replacePartition(lake, "t", "day=1", { select: rows(5, "b") });
    const stateFile = path.join(backend!.lakeDir, "_lakeswap", "pointers", "t", "day=1.json");
    const state = JSON.parse(readFileSync(stateFile, "utf8")) as { run: string; files?: string[] };
    expect(state).toMatchObject({ run: second.runId, files: [`part-${second.runId}.parquet`] });
    // A file that appeared in the run after its audit (by hand) is not part of the run: the state's names are what was audited.
    const runDir = path.join(backend!.lakeDir, "t", "_runs", "day=1", `run=${second.runId}`);
    copyFileSync(path.join(runDir, `part-${second.runId}.parquet`), path.join(runDir, "stray.parquet"));
    expect((await lake.query("SELECT tag, count(*) FROM t GROUP BY tag")).rows).toEqual([["b", 5]]);
    // A state that names no files, or a path, is not trusted: the run's folder is listed (the stray file then counts).
    for (const files of [undefined, ["../../../escape.parquet"], ["*.parquet"]]) {
      writeFileSync(stateFile, JSON.stringify({ ...state, files }));
      expect((await lake.query("SELECT tag, count(*) FROM t GROUP BY tag")).rows).toEqual([["b", 10]]);
    }
    rmSync(path.join(runDir, "stray.parquet"));
    // A rollback names the target run's files from its manifest.
    await rollbackPartition(lake, "t", "day=1");
    expect(JSON.parse(readFileSync(stateFile, "utf8"))).toMatchObject({ run: first.runId, files: [`part-${first.runId}.parquet`] });
    expect((await lake.query("SELECT tag, count(*) FROM t GROUP BY tag")).rows).toEqual([["a", 3]]);
  });

  it("drops a table with everything it had", async () => {
    const lake = await openLake();
    await lake.createTable(defineTable({ name: "t", columns: [{ name: "id", type: "BIGINT" }], partitionKeys: ["day"] }));
    await replacePartition(lake, "t", "day=1", { select: "SELECT 1 AS id" });
    await dropTable(lake, "t");
    expect(await lake.listTables()).toEqual([]);
    expect(readdirSync(backend!.lakeDir)).toEqual([]);
  });
});
