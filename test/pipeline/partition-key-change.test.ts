import { existsSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { GetPartitionsCommand, GetTableCommand, GetTablesCommand, GlueClient } from "@aws-sdk/client-glue";
import { DuckDBInstance } from "@duckdb/node-api";
import { afterEach, describe, expect, it } from "vitest";
import { loadPipelineConfig } from "../../src/config/pipeline-config.js";
import type { Lake } from "../../src/lake/lake.js";
import { dropTable } from "../../src/lake/operations/drop-table.js";
import { collectGarbage } from "../../src/lake/operations/gc.js";
import { readHistory } from "../../src/lake/operations/history.js";
import { rollbackPartition, rollbackSync } from "../../src/lake/operations/rollback.js";
import { pinPartition } from "../../src/lake/operations/pin.js";
import { Pipeline, type PipelineOptions, type SyncReport } from "../../src/pipeline/pipeline.js";
import { icebirdRows } from "../support/iceberg-kit.js";
import { declarationWorkspace, readAlong } from "../support/pipeline-fixture.js";
import { selectedBackends, type TestBackend } from "../support/lake-fixture.js";
import type { AwsEndpoints } from "../support/aws-services.js";
import type { AwsTarget } from "../../src/config/aws-config.js";

// Issue 31 item 3: a change of partition keys is a new table layout, built aside while every reader reads the old one,
// then switched to in one step, with rollback --sync to the old layout.

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** Days over two months, 4 orders each. */
const DAYS = ["2026-10-29", "2026-10-30", "2026-10-31", "2026-11-01", "2026-11-02"];
const PER_DAY = 4;

const COLUMNS = "{id: {type: BIGINT, nullable: false}, amount: 'DECIMAL(10,2)', ts: TIMESTAMP}";

/** Orders partitioned by `key` (day or month) in raw, and a stage layer partitioned as raw is (its default). */
function yaml(key: "day" | "month", write = "partition_replace"): string {
  const expression = key === "day" ? "strftime(ts, '%Y-%m-%d')" : "strftime(ts, '%Y-%m')";
  return `datasets:
  orders:
    source: {format: csv, path: deliveries/*.csv}
    write: ${write}
    columns: ${COLUMNS}
    partition: {${key}: "${expression}"}
    layers:
      - name: stage
        sql: sql/stage.sql
        columns: {id: BIGINT, amount: 'DECIMAL(10,2)'}
`;
}
const stageSql = (key: "day" | "month"): string => `SELECT id, amount FROM orders_raw WHERE ${key} = {{ ${key} }}\n`;

/** The orders, `id,amount,ts`, in order or reversed. */
function delivery(reversed = false, amount: (id: number) => string = (id) => `${id}.50`): string {
  const rows = DAYS.flatMap((day, d) => Array.from({ length: PER_DAY }, (_, i) => `${(d + 1) * 10 + i},${amount((d + 1) * 10 + i)},${day} 1${i}:00:00`));
  if (reversed) rows.reverse();
  return `id,amount,ts\n${rows.join("\n")}\n`;
}

/** Every order as `<partition value> <id> <amount>`, sorted, under `key`. */
function expected(key: "day" | "month"): string[] {
  return DAYS.flatMap((day, d) => Array.from({ length: PER_DAY }, (_, i) => `${key === "day" ? day : day.slice(0, 7)} ${(d + 1) * 10 + i} ${(d + 1) * 10 + i}.50`)).sort();
}

async function workspace(backendName = "local") {
  const ws = await declarationWorkspace(backendName, "lakeswap-relayout-", cleanups);
  return {
    ...ws,
    lakeDir: (ws.backend as { lakeDir?: string }).lakeDir,
    configure(key: "day" | "month", write?: string): void {
      writeFileSync(ws.configFile, yaml(key, write));
      writeFileSync(path.join(ws.dir, "sql", "stage.sql"), stageSql(key));
    },
  };
}

/**
 * `sync --rebuild-schema` of `file` (by month now) while a reader (a lake opened read-only) reads raw and stage all
 * along: every read sees every id exactly once, under one layout or the other, never an error; raw builds nothing (its
 * new layout holds its rows), stage every month. Returns the sync's report.
 */
async function syncReadAlong(ws: Awaited<ReturnType<typeof workspace>>, file: string): Promise<SyncReport> {
  const reader = await ws.backend.open({ readOnly: true });
  cleanups.push(() => reader.close());
  const ids = async (table: string) => (await reader.query(`SELECT id FROM ${table}`)).rows.map((row) => String(row[0]));
  const { result, reads } = await readAlong({ orders_raw: () => ids("orders_raw"), orders_stage: () => ids("orders_stage") }, () => ws.sync(file, { rebuildSchema: true }));
  expect(reads.filter((r) => r.error !== undefined)).toEqual([]);
  expect(reads.length).toBeGreaterThan(0);
  const all = expected("day").map((row) => row.split(" ")[1]!).sort();
  for (const read of reads) expect(read.rows).toEqual(all);
  // The raw layout holds the rows as they were, under the new keys: the delivery (the same rows) builds nothing there.
  expect(result.partitions.filter((p) => p.layer === "raw").map((p) => [p.partition, p.action])).toEqual([
    ["month=2026-10", "skip"],
    ["month=2026-11", "skip"],
  ]);
  expect(result.partitions.filter((p) => p.layer === "stage").map((p) => [p.partition, p.action, p.reason])).toEqual([
    ["month=2026-10", "build", "new"],
    ["month=2026-11", "build", "new"],
  ]);
  return result;
}

/** `<key value> id amount` of every row of a table, sorted. */
async function rows(lake: Lake, table: string): Promise<string[]> {
  const key = (await lake.table(table)).partitionKeys[0]!;
  const result = await lake.query(`SELECT ${key}, id, amount FROM ${table}`);
  return result.rows.map((row) => row.map((v) => String(v)).join(" ")).sort();
}

/** The same, as the catalog file's view shows them to plain DuckDB. */
async function catalogFileRows(lakeDir: string, table: string, key: string): Promise<string[]> {
  const instance = await DuckDBInstance.create(path.join(lakeDir, "lake.duckdb"), { access_mode: "READ_ONLY" });
  try {
    const connection = await instance.connect();
    const result = await connection.runAndReadAll(`SELECT ${key}, id, CAST(amount AS VARCHAR) FROM ${table}`);
    connection.closeSync();
    return result.getRowsJS().map((row) => row.map((v) => String(v)).join(" ")).sort();
  } finally {
    instance.closeSync();
  }
}

describe("changing a table's partition keys (embedded)", () => {
  it("builds the new layout aside while readers read the old one, switches in one step, resends build nothing, and rollback --sync switches back", async () => {
    const ws = await workspace();
    ws.configure("day");
    const first = ws.deliver(delivery());
    await ws.sync(first);
    expect(await rows(ws.lake, "orders_raw")).toEqual(expected("day"));

    // Without the flag: refused before anything is written, naming the change and the command.
    ws.configure("month");
    const file = ws.deliver(delivery(true));
    await expect(ws.sync(file)).rejects.toThrow(/'orders_raw' cannot change in place: its partition keys change from \(day\) to \(month\).*lakeswap sync --rebuild-schema/);
    expect((await ws.lake.table("orders_raw")).partitionKeys).toEqual(["day"]);
    // The plan names the change and the partitions each new layout is built from.
    const plan = await ws.cli(["plan", "-c", ws.configFile, "--input", file, "--rebuild-schema", "--json"]);
    expect(plan.code, plan.stderr).toBe(0);
    const planned = (JSON.parse(plan.stdout) as { schemaChanges: { table: string; relayout?: boolean; rebuilds?: string[] }[] }).schemaChanges;
    const days = DAYS.map((day) => `day=${day}`);
    expect(planned.map((c) => [c.table, c.relayout, c.rebuilds])).toEqual([
      ["orders_raw", true, days],
      ["orders_stage", true, days],
    ]);

    // A reader reads both tables all along: every read sees every row exactly once, under one layout or the other.
    const report = await syncReadAlong(ws, file);

    expect(report.schemaChanges?.map((s) => [s.table, s.changes[0]])).toEqual([
      ["orders_raw", "its partition keys change from (day) to (month)"],
      ["orders_stage", "its partition keys change from (day) to (month)"],
    ]);
    const raw = await ws.lake.table("orders_raw");
    expect(raw.partitionKeys).toEqual(["month"]);
    expect(raw.layout).toMatch(/^orders_raw__layout_[0-9a-f]{6}$/);
    expect(await rows(ws.lake, "orders_raw")).toEqual(expected("month"));
    expect(await rows(ws.lake, "orders_stage")).toEqual(expected("month"));
    const tables = await ws.cli(["tables", "--json"]);
    expect((JSON.parse(tables.stdout) as { name: string; partitionKeys: string[]; layout?: string }[]).map((t) => [t.name, t.partitionKeys, t.layout])).toEqual([
      ["orders_raw", ["month"], raw.layout],
      ["orders_stage", ["month"], (await ws.lake.table("orders_stage")).layout],
    ]);
    // Plain DuckDB: the catalog file's views are the new layout's, and the new layout's folder reads as a glob.
    const lakeDir = ws.lakeDir!;
    expect(await catalogFileRows(lakeDir, "orders_raw", "month")).toEqual(expected("month"));
    const duck = await DuckDBInstance.create(":memory:");
    const connection = await duck.connect();
    const glob = path.join(lakeDir, raw.layout!, "*", "*.parquet");
    const globbed = await connection.runAndReadAll(`SELECT month, id, CAST(amount AS VARCHAR) FROM read_parquet('${glob}', hive_partitioning = true, hive_types = {'month': VARCHAR})`);
    expect(globbed.getRowsJS().map((row) => row.map(String).join(" ")).sort()).toEqual(expected("month"));
    connection.closeSync();
    duck.closeSync();

    // The same rows again, in another order: nothing to build.
    const again = await ws.sync(ws.deliver(delivery()), { rebuildSchema: true });
    expect(again.schemaChanges).toBeUndefined();
    expect(again.partitions.filter((p) => p.action === "build")).toEqual([]);
    // A changed row rebuilds its month in raw and stage.
    const changed = await ws.sync(ws.deliver(delivery(false, (id) => (id === 41 ? "99.99" : `${id}.50`))));
    expect(changed.partitions.filter((p) => p.action === "build").map((p) => `${p.layer} ${p.partition}`)).toEqual(["raw month=2026-11", "stage month=2026-11"]);
    // History and a partition's rollback work in the new layout: its runs, newest first, the one the change wrote last.
    const [history] = await readHistory(ws.lake, "orders_raw", "month=2026-11");
    expect(history?.runs.map((r) => r.runId)).toEqual(changed.partitions.filter((p) => p.layer === "raw" && p.action === "build").flatMap((p) => [p.run!, p.previousRun!]));
    await rollbackPartition(ws.lake, "orders_raw", "month=2026-11");
    expect(await rows(ws.lake, "orders_raw")).toEqual(expected("month"));
    await rollbackPartition(ws.lake, "orders_raw", "month=2026-11", { toRunId: changed.partitions.find((p) => p.layer === "raw" && p.action === "build")!.run! });
    // Rolled back first (a later sync's runs are current in the new layout), then the change of keys: the old layout, as it was.
    await expect(rollbackSync(ws.lake, report.syncId)).rejects.toThrow(/changed the partition keys of orders_(stage|raw), and runs written since are current.*roll back the syncs after it first/);
    await rollbackSync(ws.lake, changed.syncId);
    const back = await rollbackSync(ws.lake, report.syncId);
    expect(back.schemas?.map((s) => [s.table, s.action])).toEqual([
      ["orders_stage", "restored"],
      ["orders_raw", "restored"],
    ]);
    expect(back.partitions.filter((p) => p.action !== "skipped")).toEqual([]);
    expect((await ws.lake.table("orders_raw")).partitionKeys).toEqual(["day"]);
    expect(await rows(ws.lake, "orders_raw")).toEqual(expected("day"));
    expect(await rows(ws.lake, "orders_stage")).toEqual(expected("day"));
    expect(await catalogFileRows(lakeDir, "orders_stage", "day")).toEqual(expected("day"));

    // The change again makes another layout; drop-table then removes every layout of the table.
    const redo = await ws.sync(ws.deliver(delivery()), { rebuildSchema: true });
    expect(redo.schemaChanges?.map((s) => s.table)).toEqual(["orders_raw", "orders_stage"]);
    const relaid = await ws.lake.table("orders_raw");
    expect(relaid.layout).not.toEqual(raw.layout);
    expect(await rows(ws.lake, "orders_raw")).toEqual(expected("month"));
    const layouts = () => readdirSync(lakeDir).filter((name) => name.startsWith("orders_raw"));
    expect(layouts().sort()).toEqual(["orders_raw", raw.layout!, relaid.layout!].sort());
    await dropTable(ws.lake, "orders_raw");
    expect(layouts()).toEqual([]);
    expect(readdirSync(path.join(lakeDir, "_lakeswap", "manifests")).filter((name) => name.startsWith("orders_raw"))).toEqual([]);
  }, 240_000);

  it.each(selectedBackends())("with the other features: an upserted table keeps merging by key in its new layout, bad rows still go to the dead letters, and a layer keeps its own keys (%s)", async (backendName) => {
    const ws = await workspace(backendName);
    const upsertYaml = (key: "day" | "month") => `datasets:
  orders:
    source: {format: csv, path: deliveries/*.csv}
    write: upsert
    primary_key: [id]
    dead_letter: orders_rejected
    columns: ${COLUMNS}
    partition: {${key}: "strftime(ts, '${key === "day" ? "%Y-%m-%d" : "%Y-%m"}')"}
    layers:
      - name: totals
        sql: sql/totals.sql
        partition_keys: [year]
        inputs: {map: {year: "substr(${key}, 1, 4)"}}
        columns: {orders: BIGINT, amount: 'DECIMAL(18,2)'}
`;
    const sqlDir = path.join(path.dirname(ws.configFile), "sql");
    const totalsSql = (key: string) => `SELECT count(*) AS orders, CAST(sum(amount) AS DECIMAL(18,2)) AS amount FROM orders_raw WHERE substr(${key}, 1, 4) = {{ year }}\n`;
    writeFileSync(ws.configFile, upsertYaml("day"));
    writeFileSync(path.join(sqlDir, "totals.sql"), totalsSql("day"));
    await ws.sync(ws.deliver(delivery()));
    const totals = async () => (await ws.lake.query("SELECT year, orders, amount FROM orders_totals")).rows.map((r) => r.map(String).join(" "));
    expect(await totals()).toEqual([`2026 ${DAYS.length * PER_DAY} ${DAYS.flatMap((_, d) => Array.from({ length: PER_DAY }, (_, i) => (d + 1) * 10 + i + 0.5)).reduce((a, b) => a + b, 0).toFixed(2)}`]);

    // By month now: an upsert that changes one order (id 10: moved to November, another amount), adds one, and has a bad row.
    writeFileSync(ws.configFile, upsertYaml("month"));
    writeFileSync(path.join(sqlDir, "totals.sql"), totalsSql("month"));
    const upsert = ws.deliver("id,amount,ts\n10,1.00,2026-11-05 10:00:00\n99,2.00,2026-10-01 10:00:00\nx,3.00,2026-10-01 10:00:00\n");
    // The plan predicts it (the delivery merged into the new layout, which it reads as empty), without failing or writing.
    const planned = await new Pipeline(ws.lake, loadPipelineConfig(ws.configFile), { inputs: [upsert], rebuildSchema: true }).plan();
    const rawBuilds = (partitions: readonly { layer: string; action: string; partition: string }[]) => partitions.filter((p) => p.layer === "raw" && p.action === "build").map((p) => p.partition).sort();
    expect(rawBuilds(planned)).toEqual(["month=2026-10", "month=2026-11"]);
    expect((await ws.lake.table("orders_raw")).partitionKeys).toEqual(["day"]);
    const report = await ws.sync(upsert, { rebuildSchema: true });
    expect(rawBuilds(report.partitions)).toEqual(rawBuilds(planned));
    // Only the raw table changes its keys; the layer keeps its own (year), and is rebuilt for its SQL changed.
    expect(report.schemaChanges?.map((c) => c.table)).toEqual(["orders_raw"]);
    expect(report.partitions.filter((p) => p.layer === "totals").map((p) => [p.partition, p.action, p.reason])).toEqual([["year=2026", "build", "transform changed"]]);
    expect(report.loads[0]).toMatchObject({ rowsDeadLettered: 1, deadLetterTable: "orders_rejected" });
    const byMonth = expected("month").filter((row) => row.split(" ")[1] !== "10");
    expect(await rows(ws.lake, "orders_raw")).toEqual([...byMonth, "2026-11 10 1.00", "2026-10 99 2.00"].sort());
    expect((await ws.lake.query("SELECT count(*) FROM orders_rejected")).rows[0]?.map(String)).toEqual(["1"]);
    expect((await ws.lake.table("orders_totals")).partitionKeys).toEqual(["year"]);
    const sum = (await ws.lake.query("SELECT CAST(sum(amount) AS VARCHAR), count(*) FROM orders_raw")).rows[0]!.map(String);
    expect(await totals()).toEqual([`2026 ${sum[1]} ${sum[0]}`]);
    // The same upsert again: nothing changes.
    const again = await ws.sync(ws.deliver("id,amount,ts\n10,1.00,2026-11-05 10:00:00\n99,2.00,2026-10-01 10:00:00\n"));
    expect(again.partitions.filter((p) => p.action === "build")).toEqual([]);
  }, 120_000);

  it("the catalog file's past views keep showing the table as each sync left it, under the partition keys it had then", async () => {
    const ws = await workspace();
    // A grace window: past views are kept while it lasts.
    const lake = await ws.backend.open({ graceMs: 3_600_000, leaseWaitMs: 0 });
    cleanups.push(() => lake.close());
    const sync = (file: string, options: PipelineOptions = {}) => new Pipeline(lake, loadPipelineConfig(ws.configFile), { inputs: [file], ...options }).sync();
    ws.configure("day");
    const byDay = await sync(ws.deliver(delivery()));
    ws.configure("month");
    const byMonth = await sync(ws.deliver(delivery()), { rebuildSchema: true });
    const later = await sync(ws.deliver(delivery(false, (id) => (id === 41 ? "99.99" : `${id}.50`))));
    const instance = await DuckDBInstance.create(path.join(ws.lakeDir!, "lake.duckdb"), { access_mode: "READ_ONLY" });
    const connection = await instance.connect();
    const at = async (syncId: string, key: string) =>
      (await connection.runAndReadAll(`SELECT ${key}, id, CAST(amount AS VARCHAR) FROM orders_raw__at_${syncId.replace(/[^A-Za-z0-9]/g, "_")}`)).getRowsJS().map((r) => r.map(String).join(" ")).sort();
    try {
      expect(await at(byDay.syncId, "day")).toEqual(expected("day"));
      expect(await at(byMonth.syncId, "month")).toEqual(expected("month"));
      expect(await at(later.syncId, "month")).toEqual(expected("month").map((row) => (row.endsWith(" 41 41.50") ? "2026-11 41 99.99" : row)).sort());
    } finally {
      connection.closeSync();
      instance.closeSync();
    }
  }, 120_000);

  it("an iceberg: true table gets a new partition spec: its new snapshot reads by month, an earlier one by day (icebird, query --as-of), and GC expires the snapshots of a layout it removes", async () => {
    const ws = await workspace();
    const icebergYaml = (key: "day" | "month") => yaml(key).replace("    layers:\n", "    iceberg: true\n    layers:\n");
    writeFileSync(ws.configFile, icebergYaml("day"));
    writeFileSync(path.join(ws.dir, "sql", "stage.sql"), stageSql("day"));
    const byDay = await ws.sync(ws.deliver(delivery()));
    const metadata = () => {
      const folder = path.join(ws.lakeDir!, "orders_raw", "metadata");
      const version = Number(readFileSync(path.join(folder, "version-hint.text"), "utf8").trim());
      return { version, metadata: JSON.parse(readFileSync(path.join(folder, `v${version}.metadata.json`), "utf8")) as Record<string, any> };
    };
    const before = metadata();
    writeFileSync(ws.configFile, icebergYaml("month"));
    writeFileSync(path.join(ws.dir, "sql", "stage.sql"), stageSql("month"));
    const byMonth = await ws.sync(ws.deliver(delivery()), { rebuildSchema: true });
    const after = metadata();
    // A new spec (id 1, a new partition field id) over a new schema (month a new field, day gone from it).
    expect(after.metadata["default-spec-id"]).toBe(1);
    const spec = (after.metadata["partition-specs"] as any[]).find((s) => s["spec-id"] === 1);
    const schema = (after.metadata.schemas as any[]).find((s) => s["schema-id"] === after.metadata["current-schema-id"]);
    expect(spec.fields).toEqual([{ "source-id": schema.fields.find((f: any) => f.name === "month").id, "field-id": 1001, name: "month", transform: "identity" }]);
    expect(schema.fields.map((f: any) => f.name)).toEqual(["id", "amount", "ts", "month"]);
    // icebird, an independent reader: every row in the new snapshot (manifests of spec 1), and in the version before
    // the change (spec 0). (It reads identity partition values by partition field id, which no Avro reader gives it.)
    const ids = (rows: string[]) => rows.map(Number).sort((x, y) => x - y);
    const allIds = DAYS.flatMap((_, d) => Array.from({ length: PER_DAY }, (_, i) => (d + 1) * 10 + i));
    expect(ids(await icebirdRows(ws.lakeDir!, "orders_raw", ["id"]))).toEqual(allIds);
    expect(ids(await icebirdRows(ws.lakeDir!, "orders_raw", ["id"], before.version))).toEqual(allIds);
    const expectedIds = (key: "day" | "month") => expected(key).map((row) => row.split(" ").slice(0, 2).join(" ")).sort();
    // lakeswap's own reader of an earlier snapshot: under the keys and from the folder it had.
    const asOf = async (key: string, syncId: string) => (await ws.lake.query(`SELECT ${key}, id FROM orders_raw`, { asOf: syncId })).rows.map((r) => r.map(String).join(" ")).sort();
    expect(await asOf("day", byDay.syncId)).toEqual(expectedIds("day"));
    expect(await asOf("month", byMonth.syncId)).toEqual(expectedIds("month"));

    // Back to by day, then GC: the first layout goes (neither current nor the rollback target), and so do the snapshots
    // that read its files; the current one still reads.
    writeFileSync(ws.configFile, icebergYaml("day"));
    writeFileSync(path.join(ws.dir, "sql", "stage.sql"), stageSql("day"));
    await ws.sync(ws.deliver(delivery()), { rebuildSchema: true });
    expect(metadata().metadata["default-spec-id"]).toBe(2);
    await collectGarbage(ws.lake, "orders_raw", { graceMs: 0 });
    expect(ids(await icebirdRows(ws.lakeDir!, "orders_raw", ["id"]))).toEqual(allIds);
    await expect(ws.lake.query("SELECT day, id FROM orders_raw", { asOf: byDay.syncId })).rejects.toThrow(/gc expired it/);
  }, 120_000);

  it.each(selectedBackends())("a table without partition keys gets some, a column is added in place in its new layout, and rollbacks undo each (%s)", async (backendName) => {
    const ws = await workspace(backendName);
    const upsertYaml = (partition: string, columns = COLUMNS) => `datasets:
  orders:
    source: {format: csv, path: deliveries/*.csv}
    write: upsert
    primary_key: [id]
    columns: ${columns}
    partition: {${partition}}
`;
    writeFileSync(ws.configFile, upsertYaml(""));
    await ws.sync(ws.deliver(delivery()));
    const plain = async () => (await ws.lake.query("SELECT id, amount FROM orders_raw")).rows.map((r) => r.map(String).join(" ")).sort();
    const ids = expected("day").map((row) => row.split(" ").slice(1).join(" ")).sort();
    expect(await plain()).toEqual(ids);
    expect((await ws.lake.table("orders_raw")).partitionKeys).toEqual([]);

    writeFileSync(ws.configFile, upsertYaml(`month: "strftime(ts, '%Y-%m')"`));
    const relaid = await ws.sync(ws.deliver(delivery(true)), { rebuildSchema: true });
    expect(relaid.schemaChanges?.map((c) => c.changes[0])).toEqual(["its partition keys change from (none) to (month)"]);
    expect(await rows(ws.lake, "orders_raw")).toEqual(expected("month"));

    // A column added in place: the new layout takes it (on AWS its Glue table and every partition's columns, and the view).
    writeFileSync(ws.configFile, upsertYaml(`month: "strftime(ts, '%Y-%m')"`, `${COLUMNS.slice(0, -1)}, note: VARCHAR}`));
    const added = await ws.sync(ws.deliver(`id,amount,ts,note\n10,10.50,2026-10-29 10:00:00,first\n`));
    expect(added.schemaChanges?.map((c) => c.table)).toEqual(["orders_raw"]);
    const notes = async () => (await ws.lake.query("SELECT month, id, note FROM orders_raw WHERE note IS NOT NULL OR id = 11")).rows.map((r) => r.map(String).join(" ")).sort();
    expect(await notes()).toEqual(["2026-10 10 first", "2026-10 11 null"]);
    expect(await rows(ws.lake, "orders_raw")).toEqual(expected("month"));

    // Each rollback undoes its own sync: the column, then the keys (the table without them again, every row in it).
    await rollbackSync(ws.lake, added.syncId);
    expect((await ws.lake.table("orders_raw")).columns.map((c) => c.name)).toEqual(["id", "amount", "ts"]);
    expect(await rows(ws.lake, "orders_raw")).toEqual(expected("month"));
    await rollbackSync(ws.lake, relaid.syncId);
    expect((await ws.lake.table("orders_raw")).partitionKeys).toEqual([]);
    expect(await plain()).toEqual(ids);
  }, 240_000);

  it.each(selectedBackends())("a new layout that cannot be built whole is not switched to: a failed partition of it fails the sync, and readers stay on the old layout (%s)", async (backendName) => {
    const ws = await workspace(backendName);
    ws.configure("day");
    await ws.sync(ws.deliver(delivery()));
    ws.configure("month");
    // The stage's SQL fails for one month of the new layout.
    writeFileSync(
      path.join(path.dirname(ws.configFile), "sql", "stage.sql"),
      "SELECT id, CAST(CASE WHEN month = '2026-10' THEN 'x' ELSE CAST(amount AS VARCHAR) END AS DECIMAL(10,2)) AS amount FROM orders_raw WHERE month = {{ month }}\n",
    );
    await expect(ws.sync(ws.deliver(delivery()), { rebuildSchema: true })).rejects.toThrow(/new layout of orders_stage is not whole: 1 partition\(s\) failed \(orders_stage\/month=2026-10/);
    for (const table of ["orders_raw", "orders_stage"]) {
      expect((await ws.lake.table(table)).partitionKeys).toEqual(["day"]);
      expect(await rows(ws.lake, table)).toEqual(expected("day"));
    }
    // Fixed, the next sync builds another layout and switches to it.
    ws.configure("month");
    await ws.sync(ws.deliver(delivery()), { rebuildSchema: true });
    expect(await rows(ws.lake, "orders_stage")).toEqual(expected("month"));
  }, 120_000);

  it("is refused where a new layout could not carry the table on, or would not be whole: appended partitions, sinks, a sync of some partitions, pins", async () => {
    const ws = await workspace();
    ws.configure("day", "append");
    await ws.sync(ws.deliver(delivery()));
    ws.configure("month", "append");
    await expect(ws.sync(ws.deliver(delivery()), { rebuildSchema: true })).rejects.toThrow(/'orders_raw' cannot change its partition keys: it is written with write: append/);

    // A layer sent to a sink: its target is partitioned by the old keys. Refused before any sink is opened.
    const sunk = await workspace();
    sunk.configure("day");
    await sunk.sync(sunk.deliver(delivery()));
    sunk.configure("month");
    const withSink = readFileSync(sunk.configFile, "utf8").replace("        columns: {id: BIGINT", '        sinks:\n          postgres: {url: "postgres://nowhere/db", table: lake.orders_stage, mode: partition_replace}\n        columns: {id: BIGINT');
    writeFileSync(sunk.configFile, withSink);
    const openSink = () => {
      throw new Error("no sink is opened");
    };
    await expect(sunk.sync(sunk.deliver(delivery()), { rebuildSchema: true, openSink })).rejects.toThrow(/'orders_stage' cannot change its partition keys: layer stage sends it to sinks, whose targets hold the old layout.s rows/);
    expect((await sunk.lake.table("orders_raw")).partitionKeys).toEqual(["day"]);

    // A sync limited to some partitions would switch to a new layout that lacks the others.
    const limited = await workspace();
    limited.configure("day");
    await limited.sync(limited.deliver(delivery()));
    limited.configure("month");
    await expect(limited.sync(limited.deliver(delivery()), { rebuildSchema: true, partitions: ["month=2026-11"] })).rejects.toThrow(/'orders_raw' changes its partition keys, which builds every partition of it in a new layout: run lakeswap sync --rebuild-schema without --partition/);
    expect((await limited.lake.table("orders_raw")).partitionKeys).toEqual(["day"]);

    const pinned = await workspace();
    pinned.configure("day");
    await pinned.sync(pinned.deliver(delivery()));
    await pinPartition(pinned.lake, "orders_raw", "day=2026-10-30");
    pinned.configure("month");
    await expect(pinned.sync(pinned.deliver(delivery()), { rebuildSchema: true })).rejects.toThrow(/'orders_raw' cannot change its partition keys: some of its partitions are pinned/);
    expect((await pinned.lake.table("orders_raw")).partitionKeys).toEqual(["day"]);
    expect(existsSync(path.join(pinned.lakeDir!, "orders_raw", "day=2026-10-30"))).toBe(true);
  }, 120_000);

  it.each(selectedBackends())("GC keeps the layout a change replaced (its rollback target) and removes older and abandoned ones after the grace window; a rollback to a removed layout is refused (%s)", async (backendName) => {
    const ws = await workspace(backendName);
    const lakeDir = ws.lakeDir;
    const aws = ws.backend as Partial<{ readonly services: AwsEndpoints; readonly target: AwsTarget }>;
    const glue = aws.services ? new GlueClient(aws.services.glue.clientConfig) : undefined;
    cleanups.push(() => glue?.destroy());
    // The layouts of orders_raw that hold runs: its folders, or on S3 its prefixes (where each but the table's own is a Glue table too).
    const folders = async (): Promise<string[]> => {
      if (lakeDir) return readdirSync(lakeDir).filter((name) => name.startsWith("orders_raw")).sort();
      const prefixes = [...new Set((await ws.lake.parts.store.list("orders_raw")).map((o) => o.key.split("/")[0]!))].sort();
      const tables = ((await glue!.send(new GetTablesCommand({ DatabaseName: aws.target!.database }))).TableList ?? []).map((t) => t.Name!).filter((name) => name.startsWith("orders_raw__layout_"));
      expect(tables.sort()).toEqual(prefixes.filter((name) => name !== "orders_raw"));
      return prefixes;
    };
    ws.configure("day");
    await ws.sync(ws.deliver(delivery()));
    ws.configure("month");
    const toMonth = await ws.sync(ws.deliver(delivery()), { rebuildSchema: true });
    const month = (await ws.lake.table("orders_raw")).layout!;
    // The layout by day is what a rollback of the change switches back to: kept.
    let reports = await collectGarbage(ws.lake, undefined, { graceMs: 0 });
    expect(reports.filter((r) => r.partition.startsWith("layout "))).toEqual([]);
    expect(await folders()).toEqual(["orders_raw", month].sort());

    ws.configure("day");
    const toDay = await ws.sync(ws.deliver(delivery()), { rebuildSchema: true });
    const day = (await ws.lake.table("orders_raw")).layout!;
    const stageByDay = (await ws.lake.table("orders_stage")).layout!;
    expect(await folders()).toEqual(["orders_raw", month, day].sort());
    // Now by month is the rollback target, and the first layout (by day) goes, with its runs. A GC that stops once it
    // has marked the layout it removes leaves it marked: a rollback to it is refused from then on.
    process.env.LAKESWAP_FAULT = "layout-gc-marked:fail";
    try {
      await expect(collectGarbage(ws.lake, undefined, { graceMs: 0 })).rejects.toThrow(/fault injected at layout-gc-marked/);
    } finally {
      delete process.env.LAKESWAP_FAULT;
    }
    // Back to by month; then back to the first layout, which GC is removing: refused, and the table stays as it is.
    await rollbackSync(ws.lake, toDay.syncId);
    expect(await rows(ws.lake, "orders_raw")).toEqual(expected("month"));
    await expect(rollbackSync(ws.lake, toMonth.syncId)).rejects.toThrow(/changed the partition keys of orders_(raw|stage), and the layout it switched away from was garbage-collected since/);
    expect(await rows(ws.lake, "orders_raw")).toEqual(expected("month"));
    expect(await rows(ws.lake, "orders_stage")).toEqual(expected("month"));
    // The next GC finishes it, though the table's definition names it as the layout its own replaced (no rollback can
    // switch to it any more); and the layout by day the rollback retired goes too.
    reports = await collectGarbage(ws.lake, undefined, { graceMs: 0 });
    const removed = reports.filter((r) => r.partition.startsWith("layout "));
    expect(removed.map((r) => [r.table, r.partition, r.removed.length]).sort()).toEqual(
      [
        ["orders_raw", "layout orders_raw", DAYS.length],
        ["orders_raw", `layout ${day}`, DAYS.length],
        // The stage's first layout was not marked (the GC stopped before it): its current layout's rollback target, kept.
        ["orders_stage", `layout ${stageByDay}`, DAYS.length],
      ].sort(),
    );
    expect(await folders()).toEqual([month]);
    expect(await rows(ws.lake, "orders_raw")).toEqual(expected("month"));
    if (lakeDir) expect(await catalogFileRows(lakeDir, "orders_raw", "month")).toEqual(expected("month"));

    // A layout a sync left unfinished (it failed before the switch) is removed too; the layout by day (retired by the
    // rollback) is not the current one's rollback target any more either.
    ws.configure("day");
    process.env.LAKESWAP_FAULT = "relayout-before-switch:fail";
    try {
      await expect(ws.sync(ws.deliver(delivery()), { rebuildSchema: true })).rejects.toThrow(/fault injected at relayout-before-switch/);
    } finally {
      delete process.env.LAKESWAP_FAULT;
    }
    expect(await folders()).toHaveLength(2);
    await collectGarbage(ws.lake, "orders_raw", { graceMs: 0 });
    expect(await folders()).toEqual([month]);
    expect(await rows(ws.lake, "orders_raw")).toEqual(expected("month"));
  }, 120_000);
});

describe.runIf(selectedBackends().includes("aws"))("changing a table's partition keys (aws)", () => {
  it("builds the new layout in a Glue table of its own while Athena reads the old one, switches the table to a view over it in one step, rolls back to the table it was, and GC and drop-table remove every layout", async () => {
    const ws = await workspace("aws");
    const { services, target } = ws.backend as TestBackend & { readonly services: AwsEndpoints; readonly target: AwsTarget };
    const glue = new GlueClient(services.glue.clientConfig);
    cleanups.push(() => glue.destroy());
    const glueTable = async (name: string) => (await glue.send(new GetTableCommand({ DatabaseName: target.database, Name: name }))).Table!;
    const glueTables = async () => ((await glue.send(new GetTablesCommand({ DatabaseName: target.database }))).TableList ?? []).map((t) => t.Name!).sort();
    const partitionValues = async (name: string) =>
      ((await glue.send(new GetPartitionsCommand({ DatabaseName: target.database, TableName: name }))).Partitions ?? []).map((p) => p.Values!.join("/")).sort();
    const objects = async (prefix: string) => (await ws.lake.parts.store.list(prefix)).map((o) => o.key);
    ws.configure("day");
    await ws.sync(ws.deliver(delivery()));
    ws.configure("month");
    const file = ws.deliver(delivery(true));
    await expect(ws.sync(file)).rejects.toThrow(/'orders_raw' cannot change in place: its partition keys change from \(day\) to \(month\).*lakeswap sync --rebuild-schema/);

    // A reader reads both tables through Athena all along: every read sees every row exactly once.
    const report = await syncReadAlong(ws, file);
    const reader = await ws.backend.open({ readOnly: true });
    cleanups.push(() => reader.close());

    const raw = await ws.lake.table("orders_raw");
    const stage = await ws.lake.table("orders_stage");
    expect(raw.partitionKeys).toEqual(["month"]);
    expect(await rows(ws.lake, "orders_raw")).toEqual(expected("month"));
    expect(await rows(ws.lake, "orders_stage")).toEqual(expected("month"));
    expect((await ws.lake.listTables()).map((t) => [t.name, t.partitionKeys])).toEqual([["orders_raw", ["month"]], ["orders_stage", ["month"]]]);
    // In Glue: each table a view over its layout's table, which holds the new partitions; the old ones kept for a rollback.
    expect(await glueTables()).toEqual(["orders_raw", raw.layout!, "orders_stage", stage.layout!].sort());
    const view = await glueTable("orders_raw");
    expect([view.TableType, view.PartitionKeys]).toEqual(["VIRTUAL_VIEW", []]);
    expect(view.StorageDescriptor?.Columns?.map((c) => `${c.Name} ${c.Type}`)).toEqual(["id bigint", "amount decimal(10,2)", "ts timestamp", "month string"]);
    expect((await glueTable(raw.layout!)).PartitionKeys?.map((k) => k.Name)).toEqual(["month"]);
    expect(await partitionValues(raw.layout!)).toEqual(["2026-10", "2026-11"]);
    expect(await partitionValues("orders_raw")).toEqual(DAYS);
    // Plain Athena SQL reads the view with pruning on its new key, as any reader of the table does.
    const november = await reader.query("SELECT count(*) FROM orders_raw WHERE month = '2026-11'");
    expect(Number(november.rows[0]![0])).toBe(2 * PER_DAY);

    // The same rows again build nothing; a changed row rebuilds its month in raw and stage.
    const again = await ws.sync(ws.deliver(delivery()), { rebuildSchema: true });
    expect(again.partitions.filter((p) => p.action === "build")).toEqual([]);
    const changed = await ws.sync(ws.deliver(delivery(false, (id) => (id === 41 ? "99.99" : `${id}.50`))));
    expect(changed.partitions.filter((p) => p.action === "build").map((p) => `${p.layer} ${p.partition}`)).toEqual(["raw month=2026-11", "stage month=2026-11"]);
    await rollbackSync(ws.lake, changed.syncId);
    // Back to the old layout: each table the Glue table it was, its day partitions read again.
    const back = await rollbackSync(ws.lake, report.syncId);
    expect(back.schemas?.map((s) => [s.table, s.action])).toEqual([
      ["orders_stage", "restored"],
      ["orders_raw", "restored"],
    ]);
    const table = await glueTable("orders_raw");
    expect([table.TableType, table.PartitionKeys?.map((k) => k.Name), table.ViewOriginalText]).toEqual(["EXTERNAL_TABLE", ["day"], undefined]);
    expect(table.StorageDescriptor?.Columns?.map((c) => c.Name)).toEqual(["id", "amount", "ts"]);
    expect(await rows(ws.lake, "orders_raw")).toEqual(expected("day"));
    expect(await rows(ws.lake, "orders_stage")).toEqual(expected("day"));
    expect(await rows(reader, "orders_raw")).toEqual(expected("day"));

    // Again: another layout. GC removes the one rolled back from (its Glue table and its runs), and keeps the rollback target.
    const redo = await ws.sync(ws.deliver(delivery()), { rebuildSchema: true });
    expect(redo.schemaChanges?.map((s) => s.table)).toEqual(["orders_raw", "orders_stage"]);
    const relaid = await ws.lake.table("orders_raw");
    expect(await rows(ws.lake, "orders_raw")).toEqual(expected("month"));
    expect(await objects(`${raw.layout}/`)).not.toEqual([]);
    await collectGarbage(ws.lake, "orders_raw", { graceMs: 0 });
    expect(await glueTables()).toEqual(["orders_raw", relaid.layout!, "orders_stage", stage.layout!, (await ws.lake.table("orders_stage")).layout!].sort());
    expect(await objects(`${raw.layout}/`)).toEqual([]);
    expect(await rows(ws.lake, "orders_raw")).toEqual(expected("month"));
    expect(await partitionValues("orders_raw")).toEqual(DAYS);
    // drop-table removes every layout: Glue tables, partitions, runs, records.
    await dropTable(ws.lake, "orders_raw");
    expect(await glueTables()).toEqual(["orders_stage", stage.layout!, (await ws.lake.table("orders_stage")).layout!].sort());
    expect((await objects("")).filter((key) => /(^|\/)orders_raw(__layout_[0-9a-f]+)?\//.test(key))).toEqual([]);
  }, 240_000);

  it("is refused before anything is written for an iceberg: true table, whose Glue Iceberg table keeps its partition spec", async () => {
    const ws = await workspace("aws");
    const icebergYaml = (key: "day" | "month") => yaml(key).replace("    layers:\n", "    iceberg: true\n    layers:\n");
    writeFileSync(ws.configFile, icebergYaml("day"));
    writeFileSync(path.join(ws.dir, "sql", "stage.sql"), stageSql("day"));
    await ws.sync(ws.deliver(delivery()));
    writeFileSync(ws.configFile, icebergYaml("month"));
    writeFileSync(path.join(ws.dir, "sql", "stage.sql"), stageSql("month"));
    await expect(ws.sync(ws.deliver(delivery()), { rebuildSchema: true })).rejects.toThrow(
      /'orders_raw' cannot change its partition keys here: .*does not give an iceberg: true table's Glue Iceberg table a new partition spec yet.*Declare it with its partition keys as they are \(day\)/,
    );
    expect((await ws.lake.table("orders_raw")).partitionKeys).toEqual(["day"]);
    expect(await rows(ws.lake, "orders_raw")).toEqual(expected("day"));
  }, 120_000);
});
