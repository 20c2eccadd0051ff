import { randomUUID } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { CreateTableCommand, GlueClient, type TableInput } from "@aws-sdk/client-glue";
import { afterEach, describe, expect, it } from "vitest";
import { commitIceberg } from "../../src/lake/commit/iceberg-commit.js";
import type { Lake } from "../../src/lake/lake.js";
import { LakeswapError } from "../../src/model/errors.js";
import { dropTable } from "../../src/lake/operations/drop-table.js";
import { snapshotHistory } from "../../src/lake/operations/iceberg-as-of.js";
import { collectGarbage } from "../../src/lake/operations/gc.js";
import { replacePartition } from "../../src/lake/operations/replace.js";
import { rollbackPartition, rollbackSync } from "../../src/lake/operations/rollback.js";
import { emptyMetadata } from "../../src/catalog/iceberg/table-metadata.js";
import { icebergGlueColumnType } from "../../src/model/column-types.js";
import { defineTable } from "../../src/model/table.js";
import { AwsLakeReader, agreeOnAws } from "../support/iceberg-aws-kit.js";
import { ownAwsBackend, type AwsServices } from "../support/lake-fixture.js";
import { PipelineWorkspace, orders, pipelineYaml } from "../support/pipeline-fixture.js";

// Issue 28 on AWS: an `iceberg: true` table is also a Glue table `<table>_iceberg` of type ICEBERG whose
// metadata_location moves once per command that moves the Hive pointers (CreateTable, then UpdateTable on the
// VersionId read), over exactly the current runs' files in S3. Read back by icebird (over HTTP from the S3 emulator)
// with the rows plain DuckDB reads over the Hive view; a commit that races another writer's UpdateTable is derived
// again and never writes over it.

const RAW = "orders_raw";
const STAGE = "orders_stage";
const RAW_COLUMNS = ["order_id", "customer_id", "status"];
const STAGE_COLUMNS = ["order_id", "customer_id"];

let cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  cleanups = [];
});

/** A fresh AWS lake on emulators of its own, the fixture's pipeline with `iceberg: true` on the raw table and the stage layer, and a reader. */
async function start(): Promise<{ ws: PipelineWorkspace; lake: Lake; reader: AwsLakeReader; services: AwsServices; database: string }> {
  const backend = await ownAwsBackend();
  const lake = await backend.open({ graceMs: 0, leaseWaitMs: 0 });
  const ws = new PipelineWorkspace();
  writeFileSync(ws.configFile, pipelineYaml({ iceberg: true }));
  const reader = new AwsLakeReader(backend.services, backend.target);
  cleanups.push(() => backend.cleanup(), () => ws.cleanup(), () => lake.close(), () => reader.close());
  return { ws, lake, reader, services: backend.services, database: backend.target.database };
}


/** The UpdateTable calls Glue received for a table, with the error each answered (`ok` when none). */
function updates(services: AwsServices, glueTable: string): string[] {
  return services.glue.calls
    .filter((c) => c.operation === "UpdateTable" && (c.input as { TableInput?: TableInput }).TableInput?.Name === glueTable)
    .map((c) => ((c.input as { racing?: boolean }).racing ? "racing" : (c.error ?? "ok")));
}

describe("iceberg: true on AWS publishes a Glue ICEBERG table per table, one metadata_location per command", () => {
  it("a sync, a changing sync, a replace, a rollback, rollback --sync, gc and drop-table: both views equal after each, the previous metadata reads the previous rows", async () => {
    const { ws, lake, reader, services } = await start();
    const first = await ws.pipeline(lake, { inputs: [ws.redeliver(orders(3))] }).sync();
    const raw1 = await agreeOnAws(reader, RAW, RAW_COLUMNS);
    const stage1 = await agreeOnAws(reader, STAGE, STAGE_COLUMNS);
    expect(raw1.previous).toBeUndefined();
    expect(raw1.log).toEqual([]);
    expect(raw1.summary["lakeswap.sync-id"]).toBe(first.syncId);
    expect(raw1.summary["total-records"]).toBe("30");
    expect(raw1.rows).toHaveLength(30);
    // Glue's columns: the Iceberg schema's fields with Athena's Iceberg types and field ids; partition keys are plain columns.
    const columns = (await reader.icebergTable(RAW)).table.StorageDescriptor?.Columns ?? [];
    expect(columns.map((c) => `${c.Name} ${c.Type} ${c.Parameters?.["iceberg.field.id"]}`)).toEqual([
      "order_id bigint 1", "customer_id bigint 2", "amount decimal(10,2) 3", "status string 4", "order_ts timestamp 5", "updated_at timestamp 6", "day string 7",
    ]);
    // Not declared: no Iceberg table; and the Iceberg tables are not lakeswap tables.
    expect(await reader.glueTable("orders_monthly_iceberg")).toBeUndefined();
    expect((await lake.listTables()).map((t) => t.name)).toEqual(["orders_monthly", RAW, STAGE]);
    expect(services.glue.calls.filter((c) => c.operation === "CreateTable" && (c.input as { TableInput: TableInput }).TableInput.Name === `${RAW}_iceberg`)).toHaveLength(1);

    // Day 2 changes, day 4 is new: one UpdateTable on the VersionId read, previous_metadata_location = the old one.
    const changed = orders(4).map((row) => (row.id === 205 ? { ...row, customer: 99 } : row));
    const second = await ws.pipeline(lake, { inputs: [ws.redeliver(changed)] }).sync();
    const raw2 = await agreeOnAws(reader, RAW, RAW_COLUMNS);
    expect(raw2.metadataLocation).not.toBe(raw1.metadataLocation);
    expect(raw2.previous).toBe(raw1.metadataLocation);
    expect(raw2.log).toEqual([raw1.metadataLocation]);
    expect(raw2.summary["lakeswap.sync-id"]).toBe(second.syncId);
    expect(raw2.summary["deleted-data-files"]).toBe("1");
    expect(updates(services, `${RAW}_iceberg`)).toEqual(["ok"]);
    // The sync's report names each commit, with its one Glue call; history lists the snapshots Glue's metadata retains.
    const reported = second.snapshots?.find((c) => c.table === RAW);
    expect(reported).toMatchObject({ catalogCalls: 1, addedFiles: 2, deletedFiles: 1, totalFiles: 4, filesWritten: 3 });
    const history = await snapshotHistory(lake, RAW);
    expect(history.map((h) => [h.syncId, h.current, h.totalRecords])).toEqual([[second.syncId, true, 40], [first.syncId, false, 30]]);
    expect(history[0]?.snapshotId).toBe(reported?.snapshotId);
    // Athena reads tables through Glue, not files: --as-of is refused with the way to time-travel in Athena.
    await expect(lake.query("SELECT count(*) FROM orders_raw", { asOf: first.syncId })).rejects.toThrow(/query --as-of reads snapshot files with the embedded engine; .*FOR VERSION AS OF/);
    // The previous metadata still reads the first sync's rows.
    expect(await reader.icebirdRows(RAW, RAW_COLUMNS, raw1.metadataLocation)).toEqual(raw1.rows);
    expect(await reader.icebirdRows(STAGE, STAGE_COLUMNS, stage1.metadataLocation)).toEqual(stage1.rows);
    expect((await agreeOnAws(reader, STAGE, STAGE_COLUMNS)).previous).toBe(stage1.metadataLocation);

    // Nothing to do: nothing committed.
    await ws.pipeline(lake, { inputs: [ws.redeliver(changed)] }).sync();
    expect((await reader.icebergTable(RAW)).metadataLocation).toBe(raw2.metadataLocation);

    await replacePartition(lake, RAW, "day=2026-11-01", {
      select: "SELECT order_id, customer_id, amount, 'replaced' AS status, order_ts, updated_at FROM orders_raw WHERE day = '2026-11-01' AND order_id < 105",
    });
    const raw3 = await agreeOnAws(reader, RAW, RAW_COLUMNS);
    expect(raw3.previous).toBe(raw2.metadataLocation);
    expect(raw3.rows.filter((r) => r.endsWith("|replaced"))).toHaveLength(5);
    await rollbackPartition(lake, RAW, "day=2026-11-01");
    const raw4 = await agreeOnAws(reader, RAW, RAW_COLUMNS);
    expect(raw4.previous).toBe(raw3.metadataLocation);
    expect(raw4.rows).toEqual(raw2.rows);
    await rollbackSync(lake, second.syncId);
    const raw5 = await agreeOnAws(reader, RAW, RAW_COLUMNS);
    expect(raw5.rows).toEqual(raw1.rows);
    expect(raw5.log).toEqual([raw1.metadataLocation, raw2.metadataLocation, raw3.metadataLocation, raw4.metadataLocation]);
    expect(updates(services, `${RAW}_iceberg`)).toEqual(["ok", "ok", "ok", "ok"]);

    // gc (grace 0): the snapshots naming deleted runs expire in one more commit, their manifest lists with them.
    const before = await reader.validate(RAW);
    expect((await collectGarbage(lake, RAW)).some((r) => r.removed.length > 0)).toBe(true);
    const after = await agreeOnAws(reader, RAW, RAW_COLUMNS);
    expect(after.previous).toBe(raw5.metadataLocation);
    expect(after.snapshots.length).toBeLessThan(before.snapshots.length);
    const present = new Set(await reader.list(`${RAW}/`));
    for (const snapshot of before.snapshots) {
      const kept = after.snapshots.some((s) => s.snapshotId === snapshot.snapshotId);
      expect(kept, `snapshot ${snapshot.snapshotId} kept`).toBe(snapshot.files.every((f) => present.has(f.key)));
    }
    expect([...present].filter((key) => path.basename(key).startsWith("snap-"))).toHaveLength(after.snapshots.length);

    // drop-table: the Glue Iceberg table and every file under the table go too.
    await dropTable(lake, RAW);
    expect(await reader.glueTable(`${RAW}_iceberg`)).toBeUndefined();
    expect(await reader.list(`${RAW}/`)).toEqual([]);
  }, 240_000);

  it("a commit that races another writer's UpdateTable is derived again from a fresh read: both effects serial, nothing overwritten", async () => {
    const { ws, lake, reader, services, database } = await start();
    await ws.pipeline(lake, { inputs: [ws.redeliver(orders(2))] }).sync();
    const raw1 = await agreeOnAws(reader, RAW, RAW_COLUMNS);

    // Another writer (a maintenance job) commits metadata of its own right before lakeswap's next UpdateTable.
    const others: string[] = [];
    const otherWriter = async (from: string, n: number): Promise<string> => {
      const base = await reader.metadataAt(from);
      const key = `${RAW}/metadata/${String(n).padStart(5, "0")}-${randomUUID()}.metadata.json`;
      const next = { ...base, "last-updated-ms": Date.now(), properties: { ...base.properties, "other.writer": `bot-${n}` }, "metadata-log": [...base["metadata-log"], { "metadata-file": from, "timestamp-ms": base["last-updated-ms"] }] };
      await reader.put(key, JSON.stringify(next));
      return reader.uri(key);
    };
    const race = (location: string): void =>
      services.glue.raceNextUpdate(database, `${RAW}_iceberg`, (t) => ({
        Name: t.Name,
        TableType: t.TableType,
        StorageDescriptor: t.StorageDescriptor,
        Parameters: { ...t.Parameters, metadata_location: location, previous_metadata_location: t.Parameters?.metadata_location ?? "" },
      }));
    others.push(await otherWriter(raw1.metadataLocation, 2));
    race(others[0]!);
    await ws.pipeline(lake, { inputs: [ws.redeliver(orders(3))] }).sync();
    // The first UpdateTable lost (ConcurrentModificationException); the commit was derived again on the other writer's metadata.
    expect(updates(services, `${RAW}_iceberg`)).toEqual(["racing", "ConcurrentModificationException", "ok"]);
    const raw2 = await agreeOnAws(reader, RAW, RAW_COLUMNS);
    expect(raw2.previous).toBe(others[0]);
    expect(raw2.log).toEqual([raw1.metadataLocation, others[0]]);
    expect((await reader.metadataAt(raw2.metadataLocation)).properties["other.writer"]).toBe("bot-2");
    // No snapshot lost: the first sync's and this one's, in order.
    expect(raw2.snapshots.map((s) => s.summary["total-records"])).toEqual(["20", "30"]);
    expect(await reader.icebirdRows(RAW, RAW_COLUMNS, raw1.metadataLocation)).toEqual(raw1.rows);

    // A writer that keeps winning: after 5 attempts the command fails with the fix, and Glue keeps the other's metadata.
    let from = raw2.metadataLocation;
    for (let n = 3; n <= 7; n += 1) {
      from = await otherWriter(from, n);
      others.push(from);
      race(from);
    }
    await expect(ws.pipeline(lake, { inputs: [ws.redeliver(orders(4))] }).sync()).rejects.toThrow(
      /the Iceberg table of 'orders_raw' was committed by another writer 5 times while lakeswap committed it; its Hive view is current: rerun the command/,
    );
    expect((await reader.icebergTable(RAW)).metadataLocation).toBe(others.at(-1));
    // The rerun builds nothing and commits the current runs on top of the other writer's last metadata.
    const rerun = await ws.pipeline(lake, { inputs: [ws.redeliver(orders(4))] }).sync();
    expect(rerun.totals.built).toBe(0);
    const raw3 = await agreeOnAws(reader, RAW, RAW_COLUMNS);
    expect(raw3.log).toEqual([raw1.metadataLocation, others[0], raw2.metadataLocation, ...others.slice(1)]);
    expect(raw3.snapshots.map((s) => s.summary["total-records"])).toEqual(["20", "30", "40"]);
  }, 240_000);

  it("a first commit that races another writer's CreateTable (AlreadyExistsException) is derived again on that writer's metadata", async () => {
    const { ws, lake, reader, services, database } = await start();
    // The other writer creates the Iceberg table first, with metadata of its own (the same schema, no snapshot yet).
    const definition = defineTable({
      name: RAW,
      columns: [
        { name: "order_id", type: "BIGINT" }, { name: "customer_id", type: "BIGINT" }, { name: "amount", type: "DECIMAL(10,2)" },
        { name: "status", type: "VARCHAR" }, { name: "order_ts", type: "TIMESTAMP" }, { name: "updated_at", type: "TIMESTAMP" },
      ],
      partitionKeys: ["day"],
      iceberg: true,
    });
    const theirs = emptyMetadata(definition, randomUUID(), reader.uri(RAW), Date.now());
    const key = `${RAW}/metadata/00001-${randomUUID()}.metadata.json`;
    await reader.put(key, JSON.stringify({ ...theirs, properties: { ...theirs.properties, "other.writer": "created-first" } }));
    services.glue.raceNextCreate(database, {
      Name: `${RAW}_iceberg`,
      TableType: "EXTERNAL_TABLE",
      StorageDescriptor: { Location: reader.uri(RAW) },
      Parameters: { table_type: "ICEBERG", metadata_location: reader.uri(key), "lakeswap.table": RAW },
    });
    await ws.pipeline(lake, { inputs: [ws.redeliver(orders(2))] }).sync();
    const creates = services.glue.calls.filter((c) => c.operation === "CreateTable" && (c.input as { TableInput: TableInput }).TableInput.Name === `${RAW}_iceberg`);
    expect(creates.map((c) => ((c.input as { racing?: boolean }).racing ? "racing" : (c.error ?? "ok")))).toEqual(["racing", "AlreadyExistsException"]);
    expect(updates(services, `${RAW}_iceberg`)).toEqual(["ok"]);
    const raw = await agreeOnAws(reader, RAW, RAW_COLUMNS);
    expect(raw.previous).toBe(reader.uri(key));
    expect(raw.log).toEqual([reader.uri(key)]);
    expect((await reader.metadataAt(raw.metadataLocation)).properties["other.writer"]).toBe("created-first");
    expect(raw.snapshots.map((s) => s.summary["total-records"])).toEqual(["20"]);
  }, 120_000);

  it("iceberg_table names the Glue Iceberg table: commits go to it, drop-table removes it", async () => {
    const { lake, reader, database } = await start();
    await lake.createTable(defineTable({ name: "events", columns: [{ name: "id", type: "BIGINT" }], partitionKeys: ["day"], iceberg: true, icebergTable: "events_twin" }));
    await replacePartition(lake, "events", "day=2026-11-01", { select: "SELECT id FROM (VALUES (1), (2), (3), (4)) AS t(id)" });
    await replacePartition(lake, "events", "day=2026-11-02", { select: "SELECT id FROM (VALUES (5), (6), (7)) AS t(id)" });
    const twin = await reader.icebergTable("events", "events_twin");
    expect(await reader.glueTable("events_iceberg")).toBeUndefined();
    expect((await reader.metadataAt(twin.metadataLocation)).snapshots).toHaveLength(2);
    expect((await reader.icebirdRows("events", ["id"], twin.metadataLocation)).length).toBe(7);
    expect(lake.parts.catalog.iceberg?.nameOf(await lake.table("events"))).toBe(`${database}.events_twin`);
    // What a commit killed before its Glue call (or one that lost a race) leaves in S3, and another tool's file: gc
    // deletes lakeswap's unreferenced files and keeps the rest.
    const store = lake.parts.store;
    const strays = [`events/metadata/00009-${randomUUID()}.metadata.json`, `events/metadata/${randomUUID()}-m0.avro`];
    for (const key of [...strays, "events/metadata/notes.txt"]) await store.put(key, "x");
    const before = (await store.list("events/metadata/")).map((o) => o.key);
    await collectGarbage(lake, "events");
    expect((await store.list("events/metadata/")).map((o) => o.key)).toEqual(before.filter((key) => !strays.includes(key)));
    expect((await reader.icebirdRows("events", ["id"], (await reader.icebergTable("events", "events_twin")).metadataLocation)).length).toBe(7);
    await dropTable(lake, "events");
    expect(await reader.glueTable("events_twin")).toBeUndefined();
  }, 120_000);

  it("a commit whose writer lost the table's lease after writing its metadata file makes no Glue call", async () => {
    const { ws, lake, reader, services } = await start();
    await ws.pipeline(lake, { inputs: [ws.redeliver(orders(2))] }).sync();
    const before = (await reader.icebergTable(RAW)).metadataLocation;
    // The pointers move, the commit fails at its first step (an injected error): the Iceberg view is one command behind.
    process.env.LAKESWAP_FAULT = "before-iceberg-commit:error";
    try {
      await expect(replacePartition(lake, RAW, "day=2026-11-01", { select: "SELECT order_id, customer_id, amount, 'x' AS status, order_ts, updated_at FROM orders_raw WHERE day = '2026-11-01'" })).rejects.toThrow(/fault injected at before-iceberg-commit/);
    } finally {
      delete process.env.LAKESWAP_FAULT;
    }
    // A writer whose lease is lost between its metadata file and the catalog call: the fence stops it before Glue.
    let checks = 0;
    const fenced = { ...lake.parts, leaseCheck: async () => {
      checks += 1;
      if (checks > 1) throw new LakeswapError("LEASE_LOST", "the lease of orders_raw was taken over");
    } };
    const calls = services.glue.calls.length;
    await expect(commitIceberg(fenced, await lake.table(RAW))).rejects.toThrow(/the lease of orders_raw was taken over/);
    expect(checks).toBe(2);
    expect(services.glue.calls.slice(calls).filter((c) => c.operation === "UpdateTable" || c.operation === "CreateTable")).toEqual([]);
    expect((await reader.icebergTable(RAW)).metadataLocation).toBe(before);
    // The next command takes the lease, first commits the replace it finds uncommitted, then its own rebuild of day 1.
    await ws.pipeline(lake, { inputs: [ws.redeliver(orders(2))] }).sync();
    const raw = await agreeOnAws(reader, RAW, RAW_COLUMNS);
    // The sync's gc (grace 0) deleted the first sync's day-1 run: its snapshot expired, and the metadata file that made
    // it current left the log. The log starts at the recovering commit.
    expect(raw.log).not.toContain(before);
    const recovered = await reader.metadataAt(raw.log[0]!);
    expect(recovered.snapshots.find((s: { "snapshot-id": number }) => s["snapshot-id"] === recovered["current-snapshot-id"]).summary["lakeswap.command"]).toBe("recover");
    expect((await reader.icebirdRows(RAW, RAW_COLUMNS, raw.log[0]!)).filter((r) => r.endsWith("|x"))).toHaveLength(10);
    expect(raw.rows.filter((r) => r.endsWith("|x"))).toHaveLength(0);
  }, 120_000);

  it("iceberg: true added to a table loaded on AWS publishes its current runs at the next sync; taking it away is refused", async () => {
    const { ws, lake, reader } = await start();
    const icebergYaml = readFileSync(ws.configFile, "utf8");
    writeFileSync(ws.configFile, pipelineYaml());
    await ws.pipeline(lake, { inputs: [ws.redeliver(orders(3))] }).sync();
    expect(await reader.glueTable(`${RAW}_iceberg`)).toBeUndefined();
    writeFileSync(ws.configFile, icebergYaml);
    const again = await ws.pipeline(lake, { inputs: [ws.redeliver(orders(3))] }).sync();
    expect(again.totals.built).toBe(0);
    const raw = await agreeOnAws(reader, RAW, RAW_COLUMNS);
    expect(raw.summary["total-records"]).toBe("30");
    expect(raw.previous).toBeUndefined();
    writeFileSync(ws.configFile, pipelineYaml());
    await expect(ws.pipeline(lake, { inputs: [ws.redeliver(orders(3))] }).sync()).rejects.toThrow(/table 'orders_raw' is published as Iceberg \(iceberg: true\), and the declaration no longer says so/);
  }, 120_000);

  it("maps every declared column type to the Glue type Athena reads an Iceberg column as; a Glue table of the Iceberg table's name that is not lakeswap's is refused", async () => {
    const { lake, reader, services, database } = await start();
    const glue = new GlueClient(services.glue.clientConfig);
    await glue.send(new CreateTableCommand({ DatabaseName: database, TableInput: { Name: "clash_iceberg", TableType: "EXTERNAL_TABLE", Parameters: { table_type: "ICEBERG", metadata_location: "s3://elsewhere/m.json" } } }));
    glue.destroy();
    await expect(lake.createTable(defineTable({ name: "clash", columns: [{ name: "id", type: "BIGINT" }], partitionKeys: ["day"], iceberg: true }))).rejects.toThrow(
      `Glue table ${database}.clash_iceberg exists, and is not the Iceberg table lakeswap publishes table 'clash' as: lakeswap will not write over it; drop or rename that Glue table`,
    );
    expect(await lake.listTables()).toEqual([]);
    const types = { ti: "TINYINT", si: "SMALLINT", ub: "UBIGINT", hi: "HUGEINT", fl: "FLOAT", bl: "BLOB", tz: "TIMESTAMPTZ", tm: "TIME", uu: "UUID", de: "DECIMAL(12,3)" };
    await lake.createTable(defineTable({ name: "typed", columns: Object.entries(types).map(([name, type]) => ({ name, type })), partitionKeys: ["day"], iceberg: true }));
    await replacePartition(lake, "typed", "day=2026-11-01", {
      select:
        "SELECT CAST(1 AS TINYINT) AS ti, CAST(2 AS SMALLINT) AS si, CAST(3 AS DECIMAL(20,0)) AS ub, CAST(4 AS DECIMAL(38,0)) AS hi, CAST(NULL AS REAL) AS fl, " +
        "CAST(NULL AS VARBINARY) AS bl, CAST(NULL AS TIMESTAMP) AS tz, '12:00:00' AS tm, 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11' AS uu, CAST(1.25 AS DECIMAL(12,3)) AS de",
    });
    const columns = (await reader.icebergTable("typed")).table.StorageDescriptor?.Columns ?? [];
    expect(Object.fromEntries(columns.map((c) => [c.Name, c.Type]))).toEqual({
      ti: "int", si: "int", ub: "decimal(20,0)", hi: "decimal(38,0)", fl: "float", bl: "binary", tz: "timestamp", tm: "string", uu: "string", de: "decimal(12,3)", day: "string",
    });
    expect(() => icebergGlueColumnType("c", "VARCHAR")).not.toThrow();
  }, 120_000);
});
