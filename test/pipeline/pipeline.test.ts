import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Lake } from "../../src/lake/lake.js";
import { runLocation } from "../../src/lake/layout.js";
import { partitionOf } from "../../src/lake/parts.js";
import { defineTable } from "../../src/model/table.js";
import type { PlannedPartition, SyncReport } from "../../src/pipeline/pipeline.js";
import { BACKEND_FACTORIES, selectedBackends, type TestBackend } from "../support/lake-fixture.js";
import { MONTHLY_SQL, PipelineWorkspace, STAGE_SQL, orders, shuffled, toCsv } from "../support/pipeline-fixture.js";
import { rollbackPartition, rollbackSync } from "../../src/lake/operations/rollback.js";
import { pinPartition, unpinPartition } from "../../src/lake/operations/pin.js";
import { listSyncs } from "../../src/lake/operations/syncs.js";
import { replacePartition } from "../../src/lake/operations/replace.js";
import { partitionStates } from "../../src/lake/operations/partition-states.js";
import { readHistory } from "../../src/lake/operations/history.js";

/** What a dead letter of an unsafe partition value says after the value: the rule, and the fix. */
const UNSAFE_RULE = " (a partition value names a folder: use letters, digits, '_', '-' and '.' (a '-' or '.' not first, no '..'), at most 128 characters, not null or __HIVE_DEFAULT_PARTITION__ in any case (readers read those as NULL); make the partition expression give such values, or leave the row out)";

let workspace: PipelineWorkspace | undefined;
let lake: Lake | undefined;
let backend: TestBackend | undefined;
afterEach(async () => {
  await lake?.close();
  await backend?.cleanup();
  workspace?.cleanup();
  lake = undefined;
  backend = undefined;
  workspace = undefined;
});

/** The backend the current describe block runs on. */
let backendName = "local";

async function start(options: { deadLetter?: boolean } = {}): Promise<{ ws: PipelineWorkspace; lake: Lake }> {
  workspace = new PipelineWorkspace(options);
  backend = await BACKEND_FACTORIES[backendName]!();
  lake = await backend.open({ graceMs: 0, leaseWaitMs: 0 });
  return { ws: workspace, lake };
}

/** `layer partition action reason` lines of the partitions a sync or plan built (or failed). */
function built(report: SyncReport | readonly PlannedPartition[]): string[] {
  const partitions = Array.isArray(report) ? (report as readonly PlannedPartition[]) : (report as SyncReport).partitions;
  return partitions
    .filter((p) => p.action !== "skip")
    .map((p) => `${p.layer} ${p.partition} ${p.action} ${p.reason}${"error" in p && p.error ? ` (${p.error})` : ""}`)
    .sort();
}

async function tableRows(lake: Lake, table: string, orderBy: string): Promise<unknown[]> {
  return [...(await lake.query(`SELECT * FROM ${table} ORDER BY ${orderBy}`)).rows];
}

describe.each(selectedBackends())("on the %s backend", (name) => {
  beforeEach(() => {
    backendName = name;
  });

describe("pipelines skip unchanged partitions", () => {
  it("builds everything once; a second sync of the same delivery builds nothing and says why", async () => {
    const { ws, lake } = await start();
    const file = ws.delivery(orders(3));
    const first = await ws.pipeline(lake, { inputs: [file] }).sync();
    expect(built(first)).toEqual([
      "analytics month=2026-11 build new",
      "raw day=2026-11-01 build new",
      "raw day=2026-11-02 build new",
      "raw day=2026-11-03 build new",
      "stage day=2026-11-01 build new",
      "stage day=2026-11-02 build new",
      "stage day=2026-11-03 build new",
    ]);
    expect(first.totals).toMatchObject({ built: 7, skipped: 0, failed: 0 });
    expect(first.loads[0]).toMatchObject({ rowsRead: 30, rowsLoaded: 30, rowsDeadLettered: 0 });
    expect((await lake.query("SELECT count(*) FROM orders_raw")).rows).toEqual([[30]]);
    expect((await lake.query("SELECT count(*) FROM orders_stage")).rows).toEqual([[24]]);
    expect((await lake.query("SELECT order_day, orders FROM orders_monthly ORDER BY 1")).rows).toEqual([
      ["2026-11-01", 8], ["2026-11-02", 8], ["2026-11-03", 8],
    ]);
    const before = await tableRows(lake, "orders_monthly", "order_day");

    const second = await ws.pipeline(lake, { inputs: [file] }).sync();
    expect(built(second)).toEqual([]);
    expect(second.totals).toMatchObject({ built: 0, skipped: 7, failed: 0 });
    expect(second.partitions.every((p) => p.reason === "unchanged")).toBe(true);
    expect(await tableRows(lake, "orders_monthly", "order_day")).toEqual(before);
    expect((await lake.query("SELECT count(*) FROM orders_raw")).rows).toEqual([[30]]);
  });

  it("rebuilds exactly the changed day in raw and stage, and the month in analytics", async () => {
    const { ws, lake } = await start();
    const rows = orders(3);
    await ws.pipeline(lake, { inputs: [ws.delivery(rows)] }).sync();
    const changed = rows.map((r) => (r.id === 203 ? { ...r, amount: "999.99" } : r));
    const report = await ws.pipeline(lake, { inputs: [ws.delivery(changed)] }).sync();
    expect(built(report)).toEqual([
      "analytics month=2026-11 build upstream changed",
      "raw day=2026-11-02 build content changed",
      "stage day=2026-11-02 build upstream changed",
    ]);
    expect((await lake.query("SELECT amount FROM orders_stage WHERE order_id = 203")).rows).toEqual([["999.99"]]);
  });

  it("rebuilds stage and analytics, not raw, when the stage SQL changes", async () => {
    const { ws, lake } = await start();
    const file = ws.delivery(orders(2));
    await ws.pipeline(lake, { inputs: [file] }).sync();
    ws.writeSql("stage.sql", STAGE_SQL.replace("status = 'completed'", "status IN ('completed', 'cancelled')"));
    const plan = await ws.pipeline(lake, { inputs: [file] }).plan();
    expect(built(plan)).toEqual([
      "analytics month=2026-11 build upstream changed",
      "stage day=2026-11-01 build transform changed",
      "stage day=2026-11-02 build transform changed",
    ]);
    const report = await ws.pipeline(lake, { inputs: [file] }).sync();
    expect(built(report)).toEqual(built(plan));
    expect((await lake.query("SELECT count(*) FROM orders_stage")).rows).toEqual([[20]]);

    ws.writeSql("monthly.sql", `-- a comment changes the fingerprint too\n${MONTHLY_SQL}`);
    expect(built(await ws.pipeline(lake, { inputs: [file] }).sync())).toEqual(["analytics month=2026-11 build transform changed"]);
  });

  it("builds nothing when only updated_at changed or the rows come in another order", async () => {
    const { ws, lake } = await start();
    const rows = orders(3);
    await ws.pipeline(lake, { inputs: [ws.delivery(rows)] }).sync();
    const touched = rows.map((r) => ({ ...r, updatedAt: "2026-11-11 07:30:00" }));
    expect(built(await ws.pipeline(lake, { inputs: [ws.delivery(touched)] }).sync())).toEqual([]);
    expect(built(await ws.pipeline(lake, { inputs: [ws.delivery(shuffled(rows, 42))] }).sync())).toEqual([]);
    // A duplicated row is a change: the rerun must not hide it.
    expect(built(await ws.pipeline(lake, { inputs: [ws.delivery([...rows, rows[0]!])] }).sync())).toContain(
      "raw day=2026-11-01 build content changed",
    );
  });

  it("rebuilds a partition after a rollback, unless it is pinned", async () => {
    const { ws, lake } = await start();
    const rows = orders(2);
    await ws.pipeline(lake, { inputs: [ws.delivery(rows)] }).sync();
    const changed = rows.map((r) => (r.id === 101 ? { ...r, amount: "5.00" } : r));
    const file = ws.delivery(changed);
    await ws.pipeline(lake, { inputs: [file] }).sync();

    await rollbackPartition(lake, "orders_stage", "day=2026-11-01");
    await pinPartition(lake, "orders_stage", "day=2026-11-01");
    const pinned = await ws.pipeline(lake, { inputs: [file] }).plan();
    expect(pinned.find((p) => p.layer === "stage" && p.partition === "day=2026-11-01")).toMatchObject({ action: "skip", reason: "pinned" });
    // Analytics follows what stage holds now: the rolled-back day feeds the month.
    expect(built(await ws.pipeline(lake, { inputs: [file] }).sync())).toEqual(["analytics month=2026-11 build upstream changed"]);
    expect(built(await ws.pipeline(lake, { inputs: [file] }).sync())).toEqual([]);
    // Stage still holds the rolled-back (first) delivery's amount, not the changed one (5.00).
    expect((await lake.query("SELECT amount FROM orders_stage WHERE order_id = 101")).rows).toEqual([["11.07"]]);

    expect(await unpinPartition(lake, "orders_stage", "day=2026-11-01")).toBe(true);
    expect(built(await ws.pipeline(lake, { inputs: [file] }).sync())).toEqual([
      "analytics month=2026-11 build upstream changed",
      "stage day=2026-11-01 build rolled back",
    ]);
    expect((await lake.query("SELECT amount FROM orders_stage WHERE order_id = 101")).rows).toEqual([["5.00"]]);
  });

  it("rebuilds, once, a partition signed by an older signature algorithm, and says so", async () => {
    const { ws, lake } = await start();
    const file = ws.delivery(orders(2));
    await ws.pipeline(lake, { inputs: [file] }).sync();
    // What a lake signed before version 2 holds: the same run, with a v1 signature.
    const catalog = lake.parts.catalog;
    const table = await lake.table("orders_raw");
    const partition = partitionOf(table, "day=2026-11-01");
    const pointer = (await catalog.getPointer(table, partition))!;
    const location = runLocation(catalog, table, partition, pointer.runId);
    await catalog.movePointers(table, [{ partition, runId: pointer.runId, location, previousRunId: pointer.previousRunId, signature: `v1:${"0".repeat(64)}`, kind: "swap" }]);

    expect(built(await ws.pipeline(lake, { inputs: [file] }).plan())).toEqual(["raw day=2026-11-01 build signature version changed"]);
    // Raw rebuilds the same rows, so stage and analytics, whose inputs are signed as before, stay.
    expect(built(await ws.pipeline(lake, { inputs: [file] }).sync())).toEqual(["raw day=2026-11-01 build signature version changed"]);
    expect(built(await ws.pipeline(lake, { inputs: [file] }).sync())).toEqual([]);
  });

  it("undoes a whole sync with one rollback: every pointer it moved goes back, partitions it created go away", async () => {
    const { ws, lake } = await start();
    const rows = orders(2);
    const first = await ws.pipeline(lake, { inputs: [ws.delivery(rows)] }).sync();
    const before = {
      raw: await tableRows(lake, "orders_raw", "order_id"),
      monthly: await tableRows(lake, "orders_monthly", "order_day"),
    };
    // The next delivery corrects day 1 and adds day 3.
    const next = [...rows.map((r) => (r.id === 103 ? { ...r, amount: "999.99" } : r)), ...orders(3).filter((r) => r.id >= 300)];
    const second = await ws.pipeline(lake, { inputs: [ws.delivery(next)] }).sync();
    expect(built(second)).toEqual([
      "analytics month=2026-11 build upstream changed",
      "raw day=2026-11-01 build content changed",
      "raw day=2026-11-03 build new",
      "stage day=2026-11-01 build upstream changed",
      "stage day=2026-11-03 build new",
    ]);
    expect((await listSyncs(lake)).map((r) => [r.syncId, r.moves.length, r.finishedAt !== undefined])).toEqual([
      [second.syncId, 5, true],
      [first.syncId, 5, true],
    ]);

    const undone = await rollbackSync(lake, "last");
    expect(undone.syncId).toBe(second.syncId);
    const byPartition = (entries: typeof undone.partitions) => entries.map((p) => `${p.table} ${p.partition} ${p.action}`).sort();
    expect(byPartition(undone.partitions)).toEqual([
      "orders_monthly month=2026-11 rolled back",
      "orders_raw day=2026-11-01 rolled back",
      "orders_raw day=2026-11-03 removed",
      "orders_stage day=2026-11-01 rolled back",
      "orders_stage day=2026-11-03 removed",
    ]);
    // Every moved pointer is back on the run the first sync made.
    const firstRuns = new Map(first.partitions.map((p) => [`${p.table} ${p.partition}`, p.run]));
    for (const p of undone.partitions.filter((e) => e.action === "rolled back")) expect(p.toRunId).toBe(firstRuns.get(`${p.table} ${p.partition}`));
    expect(await tableRows(lake, "orders_raw", "order_id")).toEqual(before.raw);
    expect(await tableRows(lake, "orders_monthly", "order_day")).toEqual(before.monthly);

    // Undoing it again finds nothing it moved still in place.
    const again = await rollbackSync(lake, second.syncId);
    expect(again.partitions.every((p) => p.action === "skipped")).toBe(true);
    expect(again.partitions.find((p) => p.partition === "day=2026-11-03")?.reason).toMatch(/no current run/);
    // As after any rollback, the next sync of the same delivery rebuilds what was rolled back.
    expect(built(await ws.pipeline(lake, { inputs: [ws.delivery(next)] }).plan())).toEqual([
      "analytics month=2026-11 build rolled back",
      "raw day=2026-11-01 build rolled back",
      "raw day=2026-11-03 build new",
      "stage day=2026-11-01 build rolled back",
      "stage day=2026-11-03 build new",
    ]);
  });

  it("leaves alone, and reports, the partitions of a sync that moved since", async () => {
    const { ws, lake } = await start();
    const rows = orders(2);
    const first = await ws.pipeline(lake, { inputs: [ws.delivery(rows)] }).sync();
    await ws.pipeline(lake, { inputs: [ws.delivery(rows.map((r) => (r.id === 103 ? { ...r, amount: "999.99" } : r)))] }).sync();

    const undone = await rollbackSync(lake, first.syncId);
    const summary = undone.partitions.map((p) => `${p.table} ${p.partition} ${p.action}`).sort();
    // Day 1 and the month moved with the second sync; day 2 was created by the first and is still its run.
    expect(summary).toEqual([
      "orders_monthly month=2026-11 skipped",
      "orders_raw day=2026-11-01 skipped",
      "orders_raw day=2026-11-02 removed",
      "orders_stage day=2026-11-01 skipped",
      "orders_stage day=2026-11-02 removed",
    ]);
    expect(undone.partitions.find((p) => p.table === "orders_raw" && p.partition === "day=2026-11-01")?.reason).toMatch(/moved since the sync: run \S+ is current now/);
    expect((await lake.query("SELECT DISTINCT CAST(CAST(order_ts AS DATE) AS VARCHAR) FROM orders_raw")).rows).toEqual([["2026-11-01"]]);
    await expect(rollbackSync(lake, "20261129T000000Z-000000")).rejects.toThrow(/no sync 20261129T000000Z-000000 is recorded/);
  });

  it("always rebuilds, and does not sign, a partition whose upstream was never signed", async () => {
    const { ws, lake } = await start();
    const file = ws.delivery(orders(2));
    await ws.pipeline(lake, { inputs: [file] }).sync();
    // Someone replaced a raw partition by hand: its run has no signature. Pinned, so the sync leaves it.
    await replacePartition(lake, "orders_raw", "day=2026-11-01", {
      select: "SELECT order_id, customer_id, amount, status, order_ts, updated_at FROM orders_raw WHERE day = '2026-11-01'",
    });
    await pinPartition(lake, "orders_raw", "day=2026-11-01");
    for (let round = 0; round < 2; round += 1) {
      const report = await ws.pipeline(lake, { inputs: [file] }).sync();
      expect(built(report)).toEqual(["analytics month=2026-11 build never signed", "stage day=2026-11-01 build never signed"]);
    }
    const states = await partitionStates(lake, "orders_stage");
    expect(states.get("day=2026-11-01")?.signature).toBeUndefined();
    expect(states.get("day=2026-11-02")?.signature).toMatch(/^v3:[0-9a-f]{64}$/);
  });

  it("forces every partition with fullRefresh, and limits the work to the partitions asked for", async () => {
    const { ws, lake } = await start();
    const file = ws.delivery(orders(3));
    await ws.pipeline(lake, { inputs: [file] }).sync();
    const forced = await ws.pipeline(lake, { inputs: [file], fullRefresh: true }).plan();
    expect(forced.every((p) => p.action === "build" && p.reason === "forced")).toBe(true);
    const only = await ws.pipeline(lake, { inputs: [file], fullRefresh: true, partitions: ["day=2026-11-02"] }).sync();
    expect(built(only)).toEqual([
      "analytics month=2026-11 build forced",
      "raw day=2026-11-02 build forced",
      "stage day=2026-11-02 build forced",
    ]);
  });

  it("collects superseded runs once per layer: after three changing syncs each partition keeps current, previous and nothing older", async () => {
    const { ws, lake } = await start();
    for (const cents of ["10", "20", "30"]) {
      const report = await ws.pipeline(lake, { inputs: [ws.delivery(orders(2).map((r) => ({ ...r, amount: `${r.id}.${cents}` })))] }).sync();
      expect(report.totals.failed).toBe(0);
    }
    for (const table of ["orders_raw", "orders_stage"]) {
      for (const history of await readHistory(lake, table)) {
        expect(history.runs.map((r) => r.state), `${table}/${history.partition}`).toEqual(["current", "previous"]);
      }
    }
    expect((await lake.query("SELECT count(*) FROM orders_raw WHERE amount - floor(amount) = 0.30")).rows).toEqual([[20]]);
  });

  it("a failed partition does not stop the others; the rerun redoes only what failed", async () => {
    const { ws, lake } = await start();
    // A negative amount makes the stage SQL fail for its day, like a transform that meets data it cannot handle.
    ws.writeSql(
      "stage.sql",
      `SELECT order_id, customer_id, amount, order_ts FROM orders_raw WHERE day = {{ day }} AND status = 'completed' ` +
        `AND CASE WHEN amount < 0 THEN error('stage failed on purpose for ' || {{ day }}) ELSE true END\n`,
    );
    const rows = orders(3);
    const broken = rows.map((r) => (r.id === 201 ? { ...r, amount: "-1.00" } : r));
    const first = await ws.pipeline(lake, { inputs: [ws.delivery(broken)] }).sync();
    expect(built(first)).toContainEqual(expect.stringMatching(/^stage day=2026-11-02 failed new \(.*stage failed on purpose/));
    expect(first.partitions.find((p) => p.action === "failed")?.error).toMatch(/stage failed on purpose for 2026-11-02/);
    expect(first.totals.failed).toBe(1);
    expect(first.layers.find((l) => l.layer === "stage")).toMatchObject({ built: 2, failed: 1 });

    const rerun = await ws.pipeline(lake, { inputs: [ws.delivery(rows)] }).sync();
    expect(built(rerun)).toEqual([
      "analytics month=2026-11 build upstream changed",
      "raw day=2026-11-02 build content changed",
      "stage day=2026-11-02 build new",
    ]);
    expect((await lake.query("SELECT count(*) FROM orders_monthly")).rows).toEqual([[3]]);
  });
});

describe("a layer reads only its declared inputs", () => {
  /** A customers table in the lake, with one partition. */
  /** Customers 0-12, each with the segment `segmentOf` gives it (SQL both DuckDB and Trino run). */
  function customersSql(segmentOf: (id: number) => string): string {
    const rows = Array.from({ length: 13 }, (_, id) => `(CAST(${id} AS BIGINT), '${segmentOf(id)}')`);
    return `SELECT customer_id, segment FROM (VALUES ${rows.join(", ")}) AS c (customer_id, segment)`;
  }
  async function customers(lake: Lake, segment: string): Promise<void> {
    await lake.createTable(defineTable({ name: "customers", columns: [{ name: "customer_id", type: "BIGINT" }, { name: "segment", type: "VARCHAR" }], partitionKeys: ["k"] }));
    await replacePartition(lake, "customers", "k=all", { select: customersSql(() => segment) });
  }
  const joined =
    "SELECT o.order_id, o.customer_id, o.amount, o.order_ts FROM orders_raw o JOIN customers c ON c.customer_id = o.customer_id " +
    "WHERE o.day = {{ day }} AND c.segment <> 'blocked'\n";

  it("refuses, at plan time and naming the table, a layer that reads a table it does not declare", async () => {
    const { ws, lake } = await start();
    await customers(lake, "retail");
    ws.writeSql("stage.sql", joined);
    const file = ws.delivery(orders(2));
    for (const run of [() => ws.pipeline(lake, { inputs: [file] }).plan(), () => ws.pipeline(lake, { inputs: [file] }).sync()]) {
      const error = await run().then(() => undefined, (e: unknown) => e);
      expect(error).toMatchObject({ code: "INVALID_INPUT", exitCode: 2 });
      expect(String(error)).toMatch(/stage .*reads table 'customers', which it does not declare.*inputs\.tables: \[customers\]/);
    }
    // Nothing was built: the refusal comes before the first swap.
    expect((await lake.listTables()).map((t) => t.name)).not.toContain("orders_stage");
  });

  it("refuses, before anything is built, a layer whose SQL is more than one statement", async () => {
    const { ws, lake } = await start();
    ws.writeSql("stage.sql", "SELECT order_id, customer_id, amount, order_ts FROM orders_raw WHERE day = {{ day }}; SELECT 42\n");
    const error = await ws.pipeline(lake, { inputs: [ws.delivery(orders(1))] }).sync().then(() => undefined, (e: unknown) => e);
    expect(error).toMatchObject({ code: "INVALID_INPUT", exitCode: 2 });
    expect(String(error)).toMatch(/layers\.stage .*: the SQL is 2 statements/);
    expect(await lake.listTables()).toEqual([]);
  });

  it("refuses a layer that reads its own table (it would double on a full refresh)", async () => {
    const { ws, lake } = await start();
    ws.writeSql("stage.sql", "SELECT order_id, customer_id, amount, order_ts FROM orders_raw WHERE day = {{ day }} UNION ALL SELECT order_id, customer_id, amount, order_ts FROM orders_stage\n");
    await expect(ws.pipeline(lake, { inputs: [ws.delivery(orders(1))] }).sync()).rejects.toThrow(/reads its own table 'orders_stage'/);
  });

  it("rebuilds a layer whose whole-table input (inputs.tables) changed, and only then", async () => {
    const { ws, lake } = await start();
    await customers(lake, "retail");
    ws.writeSql("stage.sql", joined);
    const fs = await import("node:fs");
    fs.writeFileSync(ws.configFile, fs.readFileSync(ws.configFile, "utf8").replace("        sql: sql/stage.sql\n", "        sql: sql/stage.sql\n        inputs: {tables: [customers]}\n"));
    const file = ws.delivery(orders(2));
    const first = await ws.pipeline(lake, { inputs: [file] }).sync();
    expect(first.totals.failed).toBe(0);
    expect(first.layers.find((l) => l.layer === "stage")).toMatchObject({ built: 2 });
    const again = await ws.pipeline(lake, { inputs: [file] }).sync();
    expect(again.totals.built).toBe(0);

    await replacePartition(lake, "customers", "k=all", { select: customersSql((id) => (id === 1 ? "blocked" : "retail")) });
    const changed = await ws.pipeline(lake, { inputs: [file] }).sync();
    expect(built(changed)).toEqual([
      "analytics month=2026-11 build upstream changed",
      "stage day=2026-11-01 build upstream changed",
      "stage day=2026-11-02 build upstream changed",
    ]);
    const blocked = orders(2).filter((r) => r.customer === 1).length;
    expect(blocked).toBeGreaterThan(0);
    expect((await lake.query("SELECT count(*) FROM orders_stage")).rows).toEqual([[20 - blocked]]);
  });
});

describe("bad rows", () => {
  const header = "order_id,customer_id,amount,status,order_ts,updated_at";
  const good = orders(2).map((r) => `${r.id},${r.customer},${r.amount},${r.status},${r.ts},${r.updatedAt}`);

  it("stop the load with an error naming the file and line when there is no dead-letter table", async () => {
    const { ws, lake } = await start();
    const file = ws.delivery([header, good[0], good[1], "103,1,not-a-number,completed,2026-11-01 10:00:00,", ...good.slice(2)].join("\n"));
    await expect(ws.pipeline(lake, { inputs: [file] }).sync()).rejects.toThrow(
      new RegExp(`${file.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")}:4: .*amount.*not-a-number.*dead_letter`),
    );
    expect(await lake.listTables()).toEqual([]);
  });

  it("go to the dead-letter table with their reason and raw text while the rest loads", async () => {
    const { ws, lake } = await start({ deadLetter: true });
    const lines = [
      header,
      ...good,
      "900,1,abc,completed,2026-11-01 10:00:00,",
      "901,1,1.00,completed",
      "902,1,2.00,completed,,",
      "903,1,3.00,completed,1999-01-01 00:00:00,",
      ",1,4.00,completed,2026-11-01 10:00:00,",
    ];
    const file = ws.delivery(lines.join("\n"));
    const report = await ws.pipeline(lake, { inputs: [file] }).sync();
    const load = report.loads[0]!;
    expect(load).toMatchObject({ rowsRead: good.length + 5, rowsLoaded: good.length + 1, rowsDeadLettered: 4 });
    expect(load.rowsRead).toBe(load.rowsLoaded + load.rowsDeadLettered);
    const dead = await lake.query("SELECT line, reason, raw FROM orders_rejected ORDER BY line");
    expect(dead.rows).toEqual([
      [good.length + 2, expect.stringMatching(/amount.*abc/), "900,1,abc,completed,2026-11-01 10:00:00,"],
      [good.length + 3, expect.stringMatching(/the line has 4 fields, but the header of this file has 6/), "901,1,1.00,completed"],
      [good.length + 4, expect.stringMatching(/partition key day is NULL/), "902,1,2.00,completed,,"],
      [good.length + 6, expect.stringMatching(/order_id is NULL but is declared not nullable/), ",1,4.00,completed,2026-11-01 10:00:00,"],
    ]);
    // The 1999 row is a valid row of another partition: it loads.
    expect((await lake.query("SELECT count(*) FROM orders_raw WHERE day = '1999-01-01'")).rows).toEqual([[1]]);
    // Rerunning the same delivery replaces its dead letters instead of adding them again.
    await ws.pipeline(lake, { inputs: [file] }).sync();
    expect((await lake.query("SELECT count(*) FROM orders_rejected")).rows).toEqual([[4]]);
  });

  it("routes rows whose partition value is unsafe to the dead-letter table", async () => {
    const { ws, lake } = await start({ deadLetter: true });
    const config = (await import("node:fs")).readFileSync(ws.configFile, "utf8").replace("strftime(order_ts, '%Y-%m-%d')", "coalesce(status, 'x')");
    (await import("node:fs")).writeFileSync(ws.configFile, config);
    // Spellings of NULL (DuckDB's hive reader reads `null` in any case, Hive and Athena __HIVE_DEFAULT_PARTITION__, as a
    // NULL value) would land as partitions that every reader sees as one NULL group: refused as a NULL value is.
    const nullish = ["null", "NULL", "Null", "__HIVE_DEFAULT_PARTITION__", "__hive_default_partition__"];
    const lines = ["1,1,1.00,ok,2026-11-01 10:00:00,", "2,1,1.00,../../etc,2026-11-01 10:00:00,", "3,1,1.00,it's,2026-11-01 10:00:00,", "4,1,1.00,nullable,2026-11-01 10:00:00,"];
    const file = ws.delivery([header, ...lines, ...nullish.map((v, i) => `${10 + i},1,1.00,${v},2026-11-01 10:00:00,`)].join("\n"));
    const report = await ws.pipeline(lake, { inputs: [file] }).sync();
    expect(report.loads[0]).toMatchObject({ rowsRead: 9, rowsLoaded: 2, rowsDeadLettered: 7 });
    const readAsNull = ", which readers read as a NULL partition value, not as text: make the partition expression give another value for it (a CASE), or leave the row out";
    expect((await lake.query("SELECT reason FROM orders_rejected ORDER BY line")).rows).toEqual([
      [`partition key day has the unsafe value '../../etc'${UNSAFE_RULE}`],
      [`partition key day has the unsafe value 'it's'${UNSAFE_RULE}`],
      ...nullish.map((v) => [`partition key day has the value '${v}'${readAsNull}`]),
    ]);
    // Every partition that landed reads back as its text: none is NULL to a reader.
    expect((await lake.query("SELECT day, day IS NULL, count(*) FROM orders_raw GROUP BY day ORDER BY day")).rows).toEqual([["nullable", false, 1], ["ok", false, 1]]);
  });

  it("reads JSONL and reports a bad line with its number", async () => {
    const { ws, lake } = await start({ deadLetter: true });
    const config = (await import("node:fs")).readFileSync(ws.configFile, "utf8").replace("format: csv", "format: jsonl");
    (await import("node:fs")).writeFileSync(ws.configFile, config);
    const rows = orders(1, 3).map((r) => JSON.stringify({ order_id: r.id, customer_id: r.customer, amount: Number(r.amount), status: r.status, order_ts: r.ts, updated_at: null }));
    const file = ws.delivery([rows[0], "{not json", rows[1], rows[2]].join("\n"));
    const report = await ws.pipeline(lake, { inputs: [file] }).sync();
    expect(report.loads[0]).toMatchObject({ rowsRead: 4, rowsLoaded: 3, rowsDeadLettered: 1 });
    expect((await lake.query("SELECT line, reason, raw FROM orders_rejected")).rows).toEqual([[2, "not valid JSON", "{not json"]]);
    expect(toCsv([]).startsWith("order_id")).toBe(true);
  });
});
});
