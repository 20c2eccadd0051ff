import { mkdirSync, writeFileSync } from "node:fs";
import { DuckDBInstance } from "@duckdb/node-api";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { loadPipelineConfig } from "../../src/config/pipeline-config.js";
import type { Lake } from "../../src/lake/lake.js";
import { Pipeline, type SyncReport } from "../../src/pipeline/pipeline.js";
import { listSyncs } from "../../src/lake/operations/syncs.js";
import { readSchemaHistory } from "../../src/lake/operations/history.js";
import { runMain } from "../support/main-cli.js";
import { rollbackPartition, rollbackSync } from "../../src/lake/operations/rollback.js";
import { discardSync, publishSync } from "../../src/lake/operations/publish.js";
import { BACKEND_FACTORIES, selectedBackends, tempDir } from "../support/lake-fixture.js";
import { defineTable } from "../../src/model/table.js";
import { replacePartition } from "../../src/lake/operations/replace.js";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** Orders by day with a stage layer; `columns` and the stage's columns as given (YAML flow maps). */
function yaml(columns: string, stageColumns: string, write = "partition_replace"): string {
  return `datasets:
  orders:
    source: {format: csv, path: deliveries/*.csv}
    write: ${write}
${write === "upsert" ? "    primary_key: [id]\n" : ""}    columns: ${columns}
    partition: {day: "strftime(ts, '%Y-%m-%d')"}
    layers:
      - name: stage
        sql: sql/stage.sql
        columns: ${stageColumns}
`;
}

/** Events by day, one dataset of the given source format and write mode (default partition_replace). */
function eventsYaml(format: "csv" | "jsonl" | "parquet", columns: string, write?: "append"): string {
  return `datasets:
  events:
    source: {format: ${format}, path: deliveries/*.${format}}
${write ? `    write: ${write}\n` : ""}    columns: ${columns}
    partition: {day: "strftime(ts, '%Y-%m-%d')"}
`;
}

const BEFORE = yaml("{id: {type: BIGINT, nullable: false}, n: INTEGER, amount: 'DECIMAL(10,2)', ts: TIMESTAMP}", "{id: BIGINT, n: INTEGER, amount: 'DECIMAL(10,2)'}");
/** A column added in the middle, an INTEGER widened to BIGINT, a DECIMAL's precision widened: every one applied in place. */
const AFTER = yaml(
  "{id: {type: BIGINT, nullable: false}, coupon: VARCHAR, n: BIGINT, amount: 'DECIMAL(12,2)', ts: TIMESTAMP}",
  "{id: BIGINT, n: BIGINT, amount: 'DECIMAL(12,2)'}",
);

async function workspace(backendName: string, config: string) {
  const backend = await BACKEND_FACTORIES[backendName]!();
  cleanups.push(() => backend.cleanup());
  const lake = await backend.open({ graceMs: 0, leaseWaitMs: 0 });
  cleanups.push(() => lake.close());
  const { dir, cleanup } = tempDir("lakeswap-schema-");
  cleanups.push(cleanup);
  mkdirSync(path.join(dir, "deliveries"));
  mkdirSync(path.join(dir, "sql"));
  const configFile = path.join(dir, "lakeswap.yaml");
  writeFileSync(configFile, config);
  let counter = 0;
  return {
    lake,
    configure(text: string, stageSql: string): void {
      writeFileSync(configFile, text);
      writeFileSync(path.join(dir, "sql", "stage.sql"), stageSql);
    },
    deliver(text: string, extension = "csv"): string {
      const file = this.file(extension);
      writeFileSync(file, text);
      return file;
    },
    /** The path of the next delivery file. */
    file(extension: string): string {
      return path.join(dir, "deliveries", `delivery-${counter++}.${extension}`);
    },
    sync(file: string, on: Lake = lake, options: { hold?: boolean } = {}): Promise<SyncReport> {
      return new Pipeline(on, loadPipelineConfig(configFile), { inputs: [file], ...options }).sync();
    },
    schemaChanges: () => new Pipeline(lake, loadPipelineConfig(configFile)).schemaChanges(),
    /** `lakeswap <args>` on this lake, in this process. */
    cli: (args: readonly string[]) => runMain([...backend.cliArgs, ...args], backend.cliEnv),
    rows: async (sql: string) => (await lake.query(sql)).rows.map((row) => row.map((v) => (v === null ? "null" : String(v))).join(" ")),
  };
}

/** `layer partition action` of a report's builds, sorted. */
function built(report: SyncReport): string[] {
  return report.partitions.filter((p) => p.action === "build").map((p) => `${p.layer} ${p.partition}`).sort();
}

/** 4 days of 5 orders, as a CSV without the coupon column (exported before it was added), rows in the order given. */
function oldDelivery(order: (rows: string[]) => string[] = (rows) => rows): string {
  const rows: string[] = [];
  for (let day = 1; day <= 4; day++) for (let i = 0; i < 5; i++) rows.push(`${day * 10 + i},${day * 100 + i},${day}.${String(i).padStart(2, "0")},2026-11-0${day} 1${i}:00:00`);
  return `id,n,amount,ts\n${order(rows).join("\n")}\n`;
}

/** The stage layer's SQL stays as it is: its columns widen with the raw table's (Athena has no SELECT * EXCLUDE to take added ones too). */
const STAGE = "SELECT id, n, amount FROM orders_raw WHERE day = {{ day }}\n";

for (const backendName of selectedBackends()) {
  describe(`schema changes in place (${backendName})`, () => {
    it("adds and widens columns without rebuilding: an old delivery again builds nothing, one that fills the new column rebuilds exactly its days, and rollback --sync restores the definition", async () => {
      const ws = await workspace(backendName, BEFORE);
      ws.configure(BEFORE, STAGE);
      const first = await ws.sync(ws.deliver(oldDelivery()));
      expect(built(first)).toHaveLength(8);

      // The config gains coupon and widens n and amount; the old delivery again (in another row order) changes no partition.
      ws.configure(AFTER, STAGE);
      // What a plan says first, and what the sync then reports it did.
      const widened = ["column n widened from INTEGER to BIGINT", "column amount widened from DECIMAL(10,2) to DECIMAL(12,2)"];
      const planned = [{ table: "orders_raw", changes: [...widened, "column coupon VARCHAR added"] }, { table: "orders_stage", changes: widened }];
      expect(await ws.schemaChanges()).toEqual(planned);
      const again = await ws.sync(ws.deliver(oldDelivery((rows) => [...rows].reverse())));
      expect(built(again)).toEqual([]);
      expect(again.schemaChanges).toEqual(planned);
      expect(await ws.schemaChanges()).toEqual([]);
      const raw = await ws.lake.table("orders_raw");
      expect(raw.columns.map((c) => `${c.name} ${c.type}${c.added ? " added" : ""}${c.signedAs ? ` signed as ${c.signedAs}` : ""}`)).toEqual([
        "id BIGINT", "coupon VARCHAR added", "n BIGINT signed as INTEGER", "amount DECIMAL(12,2) signed as DECIMAL(10,2)", "ts TIMESTAMP",
      ]);
      expect(raw.schemaVersion).toBe(1);
      // Every reader sees the new schema over the runs written before it: NULL where they lack a column, the wide types.
      expect((await ws.rows("SELECT count(*), count(coupon), typeof(max(n)), typeof(max(amount)) FROM orders_raw")).map((r) => r.toLowerCase())).toEqual(["20 0 bigint decimal(12,2)"]);
      expect(await ws.rows("SELECT count(*), max(n) FROM orders_stage")).toEqual(["20 404"]);
      const changing = (await listSyncs(ws.lake)).find((s) => (s.schemaChanges ?? []).length > 0)!;
      expect(changing.schemaChanges!.map((c) => [c.table, ...c.changes])).toEqual([
        ["orders_raw", "column n widened from INTEGER to BIGINT", "column amount widened from DECIMAL(10,2) to DECIMAL(12,2)", "column coupon VARCHAR added"],
        ["orders_stage", "column n widened from INTEGER to BIGINT", "column amount widened from DECIMAL(10,2) to DECIMAL(12,2)"],
      ]);
      // history --schema: the change, by the sync that made it, current.
      const schema = await readSchemaHistory(ws.lake, "orders_raw");
      expect([schema.version, schema.columns, schema.changes.map((c) => [c.syncId, `${c.fromVersion} -> ${c.toVersion}`, c.current, ...c.changes])]).toEqual([
        1,
        ["id BIGINT", "coupon VARCHAR", "n BIGINT", "amount DECIMAL(12,2)", "ts TIMESTAMP"],
        [[changing.syncId, "0 -> 1", true, "column n widened from INTEGER to BIGINT", "column amount widened from DECIMAL(10,2) to DECIMAL(12,2)", "column coupon VARCHAR added"]],
      ]);

      // A delivery that fills coupon on day 2 and needs the wide types on day 3 rebuilds those days, and only those.
      const filled = oldDelivery()
        .replace("30,300,3.00", "30,3000000000,1234567890.12")
        .replace("id,n,amount,ts", "id,coupon,n,amount,ts")
        .split("\n")
        .map((line, i) => (i === 0 || line === "" ? line : line.replace(/^(\d+),/, (_, id: string) => `${id},${id.startsWith("2") ? `C${id}` : ""},`)))
        .join("\n");
      const third = await ws.sync(ws.deliver(filled));
      expect(built(third)).toEqual(["raw day=2026-11-02", "raw day=2026-11-03", "stage day=2026-11-02", "stage day=2026-11-03"]);
      expect(await ws.rows("SELECT day, count(coupon), max(n), max(amount) FROM orders_raw GROUP BY day ORDER BY day")).toEqual([
        "2026-11-01 0 104 1.04", "2026-11-02 5 204 2.04", "2026-11-03 0 3000000000 1234567890.12", "2026-11-04 0 404 4.04",
      ]);
      expect(await ws.rows("SELECT count(*), max(n), max(amount) FROM orders_stage")).toEqual(["20 3000000000 1234567890.12"]);

      // The same delivery again, in other bytes: nothing to build.
      expect(built(await ws.sync(ws.deliver(filled.split("\n").reverse().filter(Boolean).sort((a, b) => (a.startsWith("id") ? -1 : b.startsWith("id") ? 1 : 0)).join("\n") + "\n")))).toEqual([]);

      // Rolled back, newest first: the fill, then the schema change (no pointer moved; the definitions are restored).
      await rollbackSync(ws.lake, "last");
      const undone = await rollbackSync(ws.lake, changing.syncId);
      expect(undone.schemas?.map((s) => `${s.table} ${s.action}`)).toEqual(["orders_stage restored", "orders_raw restored"]);
      expect((await ws.lake.table("orders_raw")).columns.map((c) => `${c.name} ${c.type}`)).toEqual(["id BIGINT", "n INTEGER", "amount DECIMAL(10,2)", "ts TIMESTAMP"]);
      expect((await ws.rows("SELECT count(*), typeof(max(n)) FROM orders_raw")).map((r) => r.toLowerCase())).toEqual(["20 integer"]);
      // The change is still in the history, no longer current: the table is at version 0 again.
      const restored = await readSchemaHistory(ws.lake, "orders_raw");
      expect([restored.version, restored.changes.map((c) => [c.syncId, c.current])]).toEqual([0, [[changing.syncId, false]]]);
    });

    it("a held sync's schema change goes with it when it is discarded, and stays when it is published", async () => {
      const ws = await workspace(backendName, BEFORE);
      ws.configure(BEFORE, STAGE);
      await ws.sync(ws.deliver(oldDelivery()));
      ws.configure(AFTER, STAGE);
      const columns = async () => (await ws.lake.table("orders_raw")).columns.map((c) => `${c.name} ${c.type}`);
      const before = await columns();
      // A delivery that fills the new column on day 2: the sync stages that day's runs, and holds them.
      const filled = oldDelivery().replace("id,n,amount,ts", "id,coupon,n,amount,ts").split("\n").map((line, i) => (i === 0 || line === "" ? line : line.replace(/^(\d+),/, (_, id: string) => `${id},${id.startsWith("2") ? `C${id}` : ""},`))).join("\n");
      const held = await ws.sync(ws.deliver(filled), ws.lake, { hold: true });
      expect(held.partitions.filter((p) => p.staged).map((p) => `${p.layer} ${p.partition}`)).toEqual(["raw day=2026-11-02", "stage day=2026-11-02"]);
      expect(held.schemaChanges?.map((c) => c.table)).toEqual(["orders_raw", "orders_stage"]);
      const discarded = await discardSync(ws.lake, held.syncId);
      expect(discarded.schemas?.map((s) => `${s.table} ${s.action}`)).toEqual(["orders_stage restored", "orders_raw restored"]);
      expect(await columns()).toEqual(before);
      // Discarding it again (as after a discard stopped before its schemas were restored) changes nothing more.
      const again0 = await ws.cli(["discard", held.syncId]);
      expect([again0.code, again0.stdout]).toEqual([0, expect.stringContaining("orders_raw: schema kept (it is as it was before the sync already)")]);
      await expect(publishSync(ws.lake, held.syncId)).rejects.toThrow(/was discarded/);
      expect((await ws.cli(["syncs"])).stdout).toContain(`sync ${held.syncId} changed schemas in place (discarded: undone by the discard unless changed or written under since; history TABLE --schema shows):`);
      expect((await readSchemaHistory(ws.lake, "orders_raw")).version).toBe(0);
      expect(await ws.rows("SELECT count(*), sum(n) FROM orders_raw")).toEqual(["20 5040"]);

      // Held again, then published: the new schema stays, as the pointers it moved do.
      const again = await ws.sync(ws.deliver(filled), ws.lake, { hold: true });
      // Not rolled back while held: its definition would go back under runs staged with the new one, which publish then moves.
      await expect(rollbackSync(ws.lake, again.syncId)).rejects.toThrow(`sync ${again.syncId} is held: none of its pointers moved. lakeswap discard ${again.syncId} drops it and undoes its schema changes; lakeswap publish ${again.syncId} moves them`);
      expect((await readSchemaHistory(ws.lake, "orders_raw")).version).toBe(1);
      await publishSync(ws.lake, again.syncId);
      expect(await columns()).toEqual(["id BIGINT", "coupon VARCHAR", "n BIGINT", "amount DECIMAL(12,2)", "ts TIMESTAMP"]);
    });

    // Found by the model test: a held sync whose builds all failed was left held with 0 staged runs, asking for a
    // publish or discard that had nothing to move, and a discard then took back the schema change that stood meanwhile.
    it("a held sync that stages nothing (every build fails) is not held: its schema change stands, and nothing waits for publish or discard", async () => {
      const ws = await workspace(backendName, BEFORE);
      ws.configure(BEFORE, STAGE);
      await ws.sync(ws.deliver(oldDelivery()));
      // The raw table gains its columns; the stage's new SQL fails on every row of every day.
      ws.configure(AFTER, "SELECT id, n, amount FROM orders_raw WHERE day = {{ day }} AND CAST('x' || CAST(id AS VARCHAR) AS INTEGER) = 0\n");
      const report = await ws.sync(ws.deliver(oldDelivery((rows) => [...rows].reverse())), ws.lake, { hold: true });
      expect(report.totals).toMatchObject({ built: 0, failed: 4 });
      expect(report.held).toBeUndefined();
      expect(report.schemaChanges?.map((c) => c.table)).toEqual(["orders_raw", "orders_stage"]);
      expect((await listSyncs(ws.lake)).find((s) => s.syncId === report.syncId)?.held).toBeUndefined();
      const publish = await ws.cli(["publish", "last"]);
      expect([publish.code, publish.stderr]).toEqual([3, expect.stringContaining("no sync is held in this lake")]);
      expect((await ws.lake.table("orders_raw")).columns.map((c) => c.name)).toEqual(["id", "coupon", "n", "amount", "ts"]);
    });

    it("refuses a change that cannot apply in place, naming each change, and writes nothing", async () => {
      const ws = await workspace(backendName, BEFORE);
      ws.configure(BEFORE, STAGE);
      await ws.sync(ws.deliver(oldDelivery()));
      ws.configure(yaml("{id: {type: BIGINT, nullable: false}, n: SMALLINT, amount: 'DECIMAL(10,3)', ts: TIMESTAMP}", "{id: BIGINT, n: INTEGER, amount: 'DECIMAL(10,2)'}"), STAGE);
      const error = await ws.sync(ws.deliver(oldDelivery())).then(() => undefined, (e: unknown) => e as Error);
      expect(error?.message).toContain("table 'orders_raw' cannot change in place: column n changes from INTEGER to SMALLINT: it narrows (values may no longer fit); column amount changes from DECIMAL(10,2) to DECIMAL(10,3): its scale changes");
      expect((await ws.lake.table("orders_raw")).columns.map((c) => `${c.name} ${c.type}`)).toEqual(["id BIGINT", "n INTEGER", "amount DECIMAL(10,2)", "ts TIMESTAMP"]);
      expect(await ws.rows("SELECT count(*) FROM orders_raw")).toEqual(["20"]);
    });

    it("records a change made by create-table as a sync of its own, which rollback --sync ID undoes (last stays the last that moved pointers)", async () => {
      const ws = await workspace(backendName, BEFORE);
      ws.configure(BEFORE, STAGE);
      await ws.sync(ws.deliver(oldDelivery()));
      const wanted = defineTable({ name: "orders_raw", columns: [{ name: "id", type: "BIGINT" }, { name: "n", type: "BIGINT" }, { name: "amount", type: "DECIMAL(10,2)" }, { name: "ts", type: "TIMESTAMP" }, { name: "note", type: "VARCHAR" }], partitionKeys: ["day"] });
      const changed = await ws.lake.createTable(wanted);
      expect(changed.columns.map((c) => `${c.name} ${c.type}`)).toEqual(["id BIGINT", "n BIGINT", "amount DECIMAL(10,2)", "ts TIMESTAMP", "note VARCHAR"]);
      const [record] = await listSyncs(ws.lake);
      expect([record?.config, record?.moves.length, record?.schemaChanges?.map((c) => c.changes)]).toEqual([
        "create-table orders_raw", 0, [["column n widened from INTEGER to BIGINT", "column note VARCHAR added"]],
      ]);
      // The same declaration again changes nothing and records nothing.
      await ws.lake.createTable(wanted);
      expect(await listSyncs(ws.lake)).toHaveLength(2);
      // lakeswap history --schema shows it, as text and as JSON; with --partition it says what to leave out.
      const text = await ws.cli(["history", "orders_raw", "--schema"]);
      expect([text.code, text.stdout.split("\n")[0]]).toEqual([0, "table orders_raw: schema version 1 (id BIGINT, n BIGINT, amount DECIMAL(10,2), ts TIMESTAMP, note VARCHAR)"]);
      expect(text.stdout).toMatch(new RegExp(`${record!.syncId} .* create-table orders_raw +0 -> 1 +in place: column n widened from INTEGER to BIGINT; column note VARCHAR added +current`));
      const json = await ws.cli(["history", "orders_raw", "--schema", "--json"]);
      expect((JSON.parse(json.stdout) as { changes: { by: string; toVersion: number }[] }).changes.map((c) => [c.by, c.toVersion])).toEqual([["create-table orders_raw", 1]]);
      const both = await ws.cli(["history", "orders_raw", "--schema", "--partition", "day=2026-11-01"]);
      expect([both.code, both.stderr]).toEqual([2, expect.stringContaining("--schema lists the schema changes of the whole table 'orders_raw': leave out --partition day=2026-11-01")]);
      // A build whose SELECT does not give the added column (a replace, a layer's SQL written before it) holds NULL there.
      await replacePartition(ws.lake, "orders_raw", "day=2026-11-04", { select: "SELECT 99 AS id, 3000000000 AS n, 9.99 AS amount, TIMESTAMP '2026-11-04 09:00:00' AS ts" });
      expect(await ws.rows("SELECT id, n, note FROM orders_raw WHERE day = '2026-11-04'")).toEqual(["99 3000000000 null"]);
      // That run is current and holds a value only BIGINT holds: the definition before the change is not restored under it.
      const kept = await rollbackSync(ws.lake, record!.syncId);
      expect(kept.schemas?.map((s) => `${s.action}: ${s.reason}`)).toEqual(["skipped: runs written since the change are current (day=2026-11-04); roll them back first, then this sync again"]);
      await rollbackPartition(ws.lake, "orders_raw", "day=2026-11-04");
      const undone = await rollbackSync(ws.lake, record!.syncId);
      expect([undone.partitions.length, undone.schemas?.map((s) => s.action)]).toEqual([0, ["restored"]]);
      expect((await ws.lake.table("orders_raw")).columns.map((c) => `${c.name} ${c.type}`)).toEqual(["id BIGINT", "n INTEGER", "amount DECIMAL(10,2)", "ts TIMESTAMP"]);
      expect(await ws.rows("SELECT count(*), sum(n) FROM orders_raw")).toEqual(["20 5040"]);
    });

    it("an append table changes in place: an old delivery appended again is skipped, a new one appends with the new column", async () => {
      const appendYaml = (columns: string) => eventsYaml("csv", columns, "append");
      const before = appendYaml("{id: BIGINT, n: INTEGER, ts: TIMESTAMP}");
      const ws = await workspace(backendName, before);
      ws.configure(before, STAGE);
      const old = "id,n,ts\n1,10,2026-11-01 10:00:00\n2,20,2026-11-02 10:00:00\n";
      expect(built(await ws.sync(ws.deliver(old)))).toEqual(["raw day=2026-11-01", "raw day=2026-11-02"]);
      ws.configure(appendYaml("{id: BIGINT, tag: VARCHAR, n: BIGINT, ts: TIMESTAMP}"), STAGE);
      // The same rows again, in other bytes and without the new column: already appended.
      const again = await ws.sync(ws.deliver("ts,n,id\n2026-11-02 10:00:00,20,2\n2026-11-01 10:00:00,10,1\n"));
      expect(built(again)).toEqual([]);
      expect(again.partitions.map((p) => p.reason).sort()).toEqual(["already appended", "already appended"]);
      const more = await ws.sync(ws.deliver("id,tag,n,ts\n3,x,4000000000,2026-11-02 11:00:00\n"));
      expect(built(more)).toEqual(["raw day=2026-11-02"]);
      expect(await ws.rows("SELECT id, tag, n FROM events_raw ORDER BY id")).toEqual(["1 null 10", "2 null 20", "3 x 4000000000"]);
    });

    it("a JSONL delivery exported before a column was added lands with NULL there (the model test found it refused)", async () => {
      const jsonl = (columns: string) => eventsYaml("jsonl", columns);
      const before = jsonl("{id: BIGINT, ts: TIMESTAMP}");
      const ws = await workspace(backendName, before);
      ws.configure(before, STAGE);
      const old = '{"id": 1, "ts": "2026-11-01 10:00:00"}\n{"id": 2, "ts": "2026-11-02 10:00:00"}\n';
      const jsonlFile = (text: string) => ws.deliver(text, "jsonl");
      expect(built(await ws.sync(jsonlFile(old)))).toEqual(["raw day=2026-11-01", "raw day=2026-11-02"]);
      ws.configure(jsonl("{id: BIGINT, tag: VARCHAR, ts: TIMESTAMP}"), STAGE);
      expect(built(await ws.sync(jsonlFile(old.split("\n").reverse().join("\n"))))).toEqual([]);
      expect(built(await ws.sync(jsonlFile('{"id": 2, "tag": "x", "ts": "2026-11-02 10:00:00"}\n{"id": 1, "ts": "2026-11-01 10:00:00"}\n')))).toEqual(["raw day=2026-11-02"]);
      expect(await ws.rows("SELECT id, tag FROM events_raw ORDER BY id")).toEqual(["1 null", "2 x"]);
    });

    it("a Parquet delivery exported before a column was added lands with NULL there", async () => {
      const parquet = (columns: string) => eventsYaml("parquet", columns);
      const before = parquet("{id: BIGINT, n: INTEGER, ts: TIMESTAMP}");
      const ws = await workspace(backendName, before);
      ws.configure(before, STAGE);
      const instance = await DuckDBInstance.create(":memory:");
      const connection = await instance.connect();
      const parquetFile = async (select: string) => {
        const name = ws.file("parquet");
        await connection.run(`COPY (${select}) TO '${name}' (FORMAT PARQUET)`);
        return name;
      };
      try {
        const old = "SELECT * FROM (VALUES (1, 10::INTEGER, TIMESTAMP '2026-11-01 10:00:00'), (2, 20::INTEGER, TIMESTAMP '2026-11-02 10:00:00')) t(id, n, ts)";
        expect(built(await ws.sync(await parquetFile(old)))).toEqual(["raw day=2026-11-01", "raw day=2026-11-02"]);
        ws.configure(parquet("{id: BIGINT, tag: VARCHAR, n: BIGINT, ts: TIMESTAMP}"), STAGE);
        expect(built(await ws.sync(await parquetFile(`${old} ORDER BY id DESC`)))).toEqual([]);
        const filled = "SELECT * FROM (VALUES (1, NULL, 10::BIGINT, TIMESTAMP '2026-11-01 10:00:00'), (2, 'x', 5000000000::BIGINT, TIMESTAMP '2026-11-02 10:00:00')) t(id, tag, n, ts)";
        expect(built(await ws.sync(await parquetFile(filled)))).toEqual(["raw day=2026-11-02"]);
        expect(await ws.rows("SELECT id, tag, n FROM events_raw ORDER BY id")).toEqual(["1 null 10", "2 x 5000000000"]);
      } finally {
        connection.closeSync();
        instance.closeSync();
      }
    });

    it("upserts into runs written before a column was added: kept rows read NULL there", async () => {
      const before = yaml("{id: {type: BIGINT, nullable: false}, n: INTEGER, ts: TIMESTAMP}", "{id: BIGINT, n: INTEGER}", "upsert");
      const ws = await workspace(backendName, before);
      ws.configure(before, "SELECT id, n FROM orders_raw WHERE day = {{ day }}\n");
      await ws.sync(ws.deliver("id,n,ts\n1,10,2026-11-01 10:00:00\n2,20,2026-11-01 11:00:00\n"));
      ws.configure(yaml("{id: {type: BIGINT, nullable: false}, n: BIGINT, coupon: VARCHAR, ts: TIMESTAMP}", "{id: BIGINT, n: BIGINT}", "upsert"), "SELECT id, n FROM orders_raw WHERE day = {{ day }}\n");
      await ws.sync(ws.deliver("id,n,coupon,ts\n2,5000000000,X,2026-11-01 12:00:00\n"));
      expect(await ws.rows("SELECT id, n, coupon FROM orders_raw ORDER BY id")).toEqual(["1 10 null", "2 5000000000 X"]);
    });
  });
}
