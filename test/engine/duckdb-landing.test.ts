import { writeFileSync } from "node:fs";
import path from "node:path";
import { DuckDBInstance } from "@duckdb/node-api";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DuckDbLanding } from "../../src/landing/duckdb/duckdb-landing.js";
import { SharedDuckDb } from "../../src/duckdb/shared-duckdb.js";
import { landDelivery } from "../../src/landing/duckdb/land-delivery.js";
import type { LandRequest } from "../../src/landing/landing.js";
import { LocalStore } from "../../src/store/local-store.js";
import { tempDir } from "../support/lake-fixture.js";
import { METADATA_FOLDERS } from "../../src/lake/layout.js";

/** What a dead letter of an unsafe partition value says after the value: the rule, and the fix. */
const UNSAFE_RULE = " (a partition value names a folder: use letters, digits, '_', '-' and '.' (a '-' or '.' not first, no '..'), at most 128 characters, not null or __HIVE_DEFAULT_PARTITION__ in any case (readers read those as NULL); make the partition expression give such values, or leave the row out)";

let workspace: ReturnType<typeof tempDir>;
let duckdb: SharedDuckDb;
let engine: DuckDbLanding;
beforeAll(() => {
  workspace = tempDir("lakeswap-landing-");
  duckdb = new SharedDuckDb();
  engine = new DuckDbLanding(new LocalStore(path.join(workspace.dir, "lake"), { folders: METADATA_FOLDERS }), { duckdb });
});
afterAll(async () => {
  await engine.close();
  workspace.cleanup();
});

const COLUMNS = [
  { name: "id", type: "BIGINT", nullable: false },
  { name: "note", type: "VARCHAR", nullable: true },
  { name: "day", type: "VARCHAR", nullable: true },
];
const request = (files: string[], format: LandRequest["format"], partition = [{ key: "p", expression: "day" }]): LandRequest => ({
  files, format, header: true, delimiter: ",", columns: COLUMNS, partition, signatureColumns: ["id", "note"],
});

/**
 * Lands with the engine (counts, signatures), and again into a DuckDB instance of the test's own to read what landed
 * and what was refused (the engine's queries reach only the lake, not its landing tables).
 */
async function land(req: LandRequest) {
  const delivery = await engine.land(req);
  await engine.releaseLanding(delivery);
  const instance = await DuckDBInstance.create(":memory:");
  const connection = await instance.connect();
  try {
    await landDelivery(connection, req, { landed: "landed", rejected: "rejected" });
    const good = (await connection.runAndReadAll(`SELECT id, p FROM landed ORDER BY id`)).getRowsJS();
    const bad = (await connection.runAndReadAll(`SELECT line, reason, raw FROM rejected ORDER BY line`)).getRowsJS();
    return { delivery, good: good.map((r) => [Number(r[0]), r[1]]), bad: bad.map((r) => [r[0] === null ? null : Number(r[0]), r[1], r[2]]) };
  } finally {
    connection.closeSync();
    instance.closeSync();
  }
}

describe("landing a delivery", () => {
  it("refuses every row of a bad partition value, however many share it, and keeps the rest", async () => {
    const file = path.join(workspace.dir, "keys.csv");
    const lines = ["id,note,day", ...Array.from({ length: 30 }, (_, i) => `${i},n${i},${i % 3 === 0 ? "../up" : i % 3 === 1 ? "2026-11-01" : ""}`)];
    writeFileSync(file, `${lines.join("\n")}\n`);
    const { delivery, good, bad } = await land(request([file], "csv"));
    expect(delivery).toMatchObject({ rowsRead: 30, rowsLoaded: 10, rowsRejected: 20 });
    expect(good.every(([, p]) => p === "2026-11-01")).toBe(true);
    expect(bad.filter(([, reason]) => reason === `partition key p has the unsafe value '../up'${UNSAFE_RULE}`)).toHaveLength(10);
    expect(bad.filter(([, reason]) => reason === "partition key p is NULL: its expression day gives NULL for this row")).toHaveLength(10);
    // Each keeps its line number and its text as it is in the file.
    expect(bad.filter(([, reason]) => reason?.toString().includes("../up")).map(([line, , raw]) => [line, raw])).toEqual(
      Array.from({ length: 10 }, (_, k) => [3 * k + 2, `${3 * k},n${3 * k},../up`]),
    );
  });

  it("keeps a Parquet row whose value does not convert out, with its line and the column, and loads the rest", async () => {
    const file = path.join(workspace.dir, "mixed.parquet");
    const instance = await DuckDBInstance.create(":memory:");
    const connection = await instance.connect();
    await connection.run(`COPY (SELECT * FROM (VALUES ('1', 'a', 'x'), ('two', 'b', 'x'), ('3', NULL, 'y')) t(id, note, day)) TO '${file}' (FORMAT PARQUET)`);
    connection.closeSync();
    instance.closeSync();
    const { delivery, good, bad } = await land(request([file], "parquet"));
    expect(delivery).toMatchObject({ rowsRead: 3, rowsLoaded: 2, rowsRejected: 1 });
    expect(good).toEqual([[1, "x"], [3, "y"]]);
    expect(bad).toEqual([[2, "column id: 'two' is not an integer", null]]);
  });

  it("says whether the partition expression or the file is wrong, before anything lands", async () => {
    const file = path.join(workspace.dir, "ok.csv");
    writeFileSync(file, "id,note,day\n1,a,x\n");
    await expect(engine.land(request([file], "csv", [{ key: "p", expression: "strftime(order_ts, '%Y')" }]))).rejects.toThrow(
      /the partition expression of key p, strftime\(order_ts, '%Y'\), does not work on the declared columns \(id, note, day\): Referenced column "order_ts" not found/,
    );
    await expect(engine.land(request([path.join(workspace.dir, "missing.parquet")], "parquet"))).rejects.toThrow(/missing\.parquet/);
  });
});

describe("landing doubles and floats for their signature", () => {
  const FLOAT_COLUMNS = [
    { name: "id", type: "BIGINT", nullable: false },
    { name: "x", type: "DOUBLE", nullable: true },
    { name: "y", type: "FLOAT", nullable: true },
  ];
  let counter = 0;
  /** Lands `x,y` lines (id 1, 2, ...) as CSV; returns the one partition's signature. */
  async function signatureOf(lines: string[]): Promise<string | undefined> {
    const file = path.join(workspace.dir, `floats-${counter++}.csv`);
    writeFileSync(file, `id,x,y\n${lines.map((line, i) => `${i + 1},${line}`).join("\n")}\n`);
    const req: LandRequest = {
      files: [file], format: "csv", header: true, delimiter: ",", columns: FLOAT_COLUMNS,
      partition: [{ key: "p", expression: "'all'" }], signatureColumns: ["id", "x", "y"],
    };
    const delivery = await engine.land(req);
    try {
      expect(delivery.partitions).toHaveLength(1);
      return delivery.partitions[0]!.signature;
    } finally {
      await engine.releaseLanding(delivery);
    }
  }

  it("signs -0 as 0 and refuses a NaN (issue 25: it landed as NULL); tells 0.1 from the next double", async () => {
    const zero = await signatureOf(["0,0", "1.5,-2.25"]);
    expect(zero).toMatch(/^v3:[0-9a-f]{64}$/);
    expect(await signatureOf(["-0.0,-0", "1.5,-2.25"])).toBe(zero);
    expect(await signatureOf(["0.0e5,0.000", "1.50,-2.250"])).toBe(zero);

    const missing = await signatureOf([",", "1.5,-2.25"]);
    expect(missing).not.toBe(zero);

    const tenth = await signatureOf(["0.1,0.1", "1.5,-2.25"]);
    expect(await signatureOf(["0.10000000000000002,0.1", "1.5,-2.25"])).not.toBe(tenth);
    // A FLOAT holds fewer digits: both texts round to the same float.
    expect(await signatureOf(["0.1,0.10000000000000002", "1.5,-2.25"])).toBe(tenth);

    // NaN is a bad row, never a NULL; -0 and infinity land as they are.
    const file = path.join(workspace.dir, "nan.csv");
    writeFileSync(file, "id,x,y\n1,NaN,1\n2,-0.0,inf\n3,1,-nan\n");
    const instance = await DuckDBInstance.create(":memory:");
    const connection = await instance.connect();
    try {
      const req: LandRequest = {
        files: [file], format: "csv", header: true, delimiter: ",", columns: FLOAT_COLUMNS,
        partition: [{ key: "p", expression: "'all'" }], signatureColumns: ["id", "x", "y"],
      };
      await landDelivery(connection, req, { landed: "landed", rejected: "rejected" });
      const rows = (await connection.runAndReadAll("SELECT id, x, y FROM landed ORDER BY id")).getRowsJS();
      expect(rows.map((r) => r.map((v) => (typeof v === "bigint" ? Number(v) : v)))).toEqual([[2, -0, Infinity]]);
      const rejected = (await connection.runAndReadAll("SELECT line, reason FROM rejected ORDER BY line")).getRowsJS();
      const reason = "is NaN, which lakeswap does not store (DuckDB and Athena compare NaN differently): send null, or an empty field, for a missing value";
      expect(rejected).toEqual([[2n, `column x: 'NaN' ${reason}`], [4n, `column y: '-nan' ${reason}`]]);
    } finally {
      connection.closeSync();
      instance.closeSync();
    }
  });
});

describe("where a delivery lands", () => {
  /** The landing instance's relations, by catalog. */
  async function relationsOf(of: SharedDuckDb): Promise<string[]> {
    return of.withConnection(async (connection) => {
      const rows = await connection.runAndReadAll(
        `SELECT database_name || '.' || table_name FROM duckdb_tables() UNION ALL SELECT database_name || '.' || view_name FROM duckdb_views() WHERE NOT internal`,
      );
      return rows.getRowsJS().map((row) => String(row[0]));
    });
  }

  it("lands what fits well within the memory limit in memory and the rest in the database file, with the same rows, signatures and bad rows, and leaves nothing behind", async () => {
    // 60,000 rows (about 10 MB): a quarter of the small limit is less, so that engine lands it in its database file.
    const file = path.join(workspace.dir, "placement.csv");
    const lines = ["id,note,day", ...Array.from({ length: 60_000 }, (_, i) => `${i},note ${i} ${"x".repeat(140)},${i % 7 === 0 ? "../x" : `2026-11-0${1 + (i % 3)}`}`)];
    writeFileSync(file, `${lines.join("\n")}\n`);
    const previous = process.env.LAKESWAP_MEMORY_LIMIT;
    process.env.LAKESWAP_MEMORY_LIMIT = "32MB";
    const smallDuckdb = new SharedDuckDb();
    const small = new DuckDbLanding(new LocalStore(path.join(workspace.dir, "lake-small"), { folders: METADATA_FOLDERS }), { duckdb: smallDuckdb });
    try {
      const inMemory = await engine.land(request([file], "csv"));
      const onDisk = await small.land(request([file], "csv"));
      expect(inMemory.relation).toMatch(/^lakeswap_memory\.landed_/);
      expect(onDisk.relation).toMatch(/^landed_/);
      for (const delivery of [inMemory, onDisk]) expect(delivery).toMatchObject({ rowsRead: 60_000, rowsRejected: 8572, rowsLoaded: 51_428 });
      expect(onDisk.partitions).toEqual(inMemory.partitions);
      expect(onDisk.firstRejects).toEqual(inMemory.firstRejects);
      // A Parquet delivery is read in place: only its views and bad rows are made, in memory whatever its size.
      const parquet = path.join(workspace.dir, "placement.parquet");
      const instance = await DuckDBInstance.create(":memory:");
      const connection = await instance.connect();
      await connection.run(`COPY (SELECT * FROM read_csv('${file}', header = true, all_varchar = true)) TO '${parquet}' (FORMAT PARQUET)`);
      connection.closeSync();
      instance.closeSync();
      const typed = await small.land(request([parquet], "parquet"));
      expect(typed.relation).toMatch(/^lakeswap_memory\.landed_/);
      expect(typed.partitions).toEqual(inMemory.partitions);

      expect((await relationsOf(duckdb)).some((name) => name.startsWith("lakeswap_memory.landed_"))).toBe(true);
      expect((await relationsOf(smallDuckdb)).some((name) => name.startsWith("landing.landed_"))).toBe(true);
      for (const delivery of [inMemory, typed]) await (delivery === inMemory ? engine : small).releaseLanding(delivery);
      await small.releaseLanding(onDisk);
      // A collector lands segment after segment for as long as it runs: each release leaves nothing in either catalog.
      expect(await relationsOf(duckdb)).toEqual([]);
      expect(await relationsOf(smallDuckdb)).toEqual([]);
    } finally {
      await small.close();
      if (previous === undefined) delete process.env.LAKESWAP_MEMORY_LIMIT;
      else process.env.LAKESWAP_MEMORY_LIMIT = previous;
    }
  });
});
