import { randomUUID } from "node:crypto";
import { existsSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { Lake } from "../../src/lake/lake.js";
import { collectGarbage } from "../../src/lake/operations/gc.js";
import { replacePartition } from "../../src/lake/operations/replace.js";
import { rollbackPartition, rollbackSync } from "../../src/lake/operations/rollback.js";
import { openEmbeddedLake } from "../../src/open/open-lake.js";
import { dropTable } from "../../src/lake/operations/drop-table.js";
import { defineTable } from "../../src/model/table.js";
import { hiveFiles, hiveRows, icebirdRows, validateTable } from "../support/iceberg-kit.js";
import { PipelineWorkspace, orders, pipelineYaml } from "../support/pipeline-fixture.js";

// An `iceberg: true` table is one truth with two views (DESIGN.md invariant 10): after every command that moves its
// pointers, one new Iceberg snapshot whose files are exactly the current runs' files, read back by icebird (over
// HTTP) with the rows plain DuckDB reads over the Hive view; the snapshot before holds the previous command's rows.

const RAW = "orders_raw";
const STAGE = "orders_stage";
const RAW_COLUMNS = ["order_id", "customer_id", "status"];
const STAGE_COLUMNS = ["order_id", "customer_id"];

let workspace: PipelineWorkspace | undefined;
let lake: Lake | undefined;
afterEach(async () => {
  await lake?.close();
  workspace?.cleanup();
  lake = undefined;
  workspace = undefined;
});


async function start(): Promise<{ ws: PipelineWorkspace; lake: Lake }> {
  workspace = new PipelineWorkspace();
  writeFileSync(workspace.configFile, pipelineYaml({ iceberg: true }));
  lake = await openEmbeddedLake(workspace.lakeDir, { graceMs: 0, leaseWaitMs: 0 });
  return { ws: workspace, lake };
}


/**
 * Checks one table: the hint's metadata is valid, the current snapshot's files are exactly the Hive view's current
 * run files with its per-partition record counts, and icebird reads the rows DuckDB reads. Returns the view.
 */
async function agree(lakeDir: string, table: string, columns: readonly string[]): Promise<{ version: number; rows: string[]; snapshots: number; summary: Record<string, string> }> {
  const { version, metadata, snapshots } = await validateTable(lakeDir, table);
  const current = snapshots.find((s) => s.snapshotId === metadata["current-snapshot-id"]);
  expect(current).toBeDefined();
  expect(current?.files.map((f) => f.key)).toEqual(await hiveFiles(lakeDir, table));
  const hive = await hiveRows(lakeDir, table, columns, "day");
  const perPartition: Record<string, number> = {};
  for (const file of current?.files ?? []) perPartition[String(file.partition.day)] = (perPartition[String(file.partition.day)] ?? 0) + file.records;
  expect(perPartition).toEqual(hive.perPartition);
  expect(await icebirdRows(lakeDir, table, columns)).toEqual(hive.rows);
  return { version, rows: hive.rows, snapshots: snapshots.length, summary: current?.summary ?? {} };
}

describe("iceberg: true publishes one snapshot per command over the current runs", () => {
  it("a table made with create-table --iceberg: a replace commits a snapshot, drop-table removes its Iceberg folder too", async () => {
    workspace = new PipelineWorkspace();
    lake = await openEmbeddedLake(workspace.lakeDir, { graceMs: 0, leaseWaitMs: 0 });
    await lake.createTable(defineTable({ name: "events", columns: [{ name: "id", type: "BIGINT" }, { name: "v", type: "DECIMAL(10,2)" }], partitionKeys: ["day"], iceberg: true }));
    // Nothing is published before the first pointer moves.
    expect(existsSync(path.join(workspace.lakeDir, "events", "metadata"))).toBe(false);
    await replacePartition(lake, "events", "day=2026-11-01", { select: "SELECT range AS id, CAST(range AS DECIMAL(10,2)) / 4 AS v FROM range(7)" });
    await replacePartition(lake, "events", "day=2026-11-02", { select: "SELECT range AS id, 1.5 AS v FROM range(3)" });
    const view = await agree(workspace.lakeDir, "events", ["id", "v"]);
    expect(view.version).toBe(2);
    expect(view.summary["total-records"]).toBe("10");
    expect(view.summary["lakeswap.command"]).toBe("replace events/day=2026-11-02");
    await dropTable(lake, "events");
    expect(existsSync(path.join(workspace.lakeDir, "events"))).toBe(false);
  }, 60_000);

  it("iceberg: true added to a loaded table publishes its current runs at the next sync; taking it away is refused", async () => {
    workspace = new PipelineWorkspace();
    lake = await openEmbeddedLake(workspace.lakeDir, { graceMs: 0, leaseWaitMs: 0 });
    const ws = workspace;
    await ws.pipeline(lake, { inputs: [ws.redeliver(orders(3))] }).sync();
    expect(existsSync(path.join(ws.lakeDir, RAW, "metadata"))).toBe(false);
    writeFileSync(ws.configFile, pipelineYaml({ iceberg: true }));
    const again = await ws.pipeline(lake, { inputs: [ws.redeliver(orders(3))] }).sync();
    expect(again.totals.built).toBe(0);
    const raw = await agree(ws.lakeDir, RAW, RAW_COLUMNS);
    expect(raw.version).toBe(1);
    expect(raw.summary["total-records"]).toBe("30");
    writeFileSync(ws.configFile, pipelineYaml());
    await expect(ws.pipeline(lake, { inputs: [ws.redeliver(orders(3))] }).sync()).rejects.toThrow(/table 'orders_raw' is published as Iceberg \(iceberg: true\), and the declaration no longer says so; keep iceberg: true/);
  }, 60_000);

  it("gc expires the snapshots naming the runs it deletes, and deletes the metadata files written before the oldest kept one", async () => {
    workspace = new PipelineWorkspace();
    // A grace of an hour: the gc after each replace deletes nothing; the one called below is given grace 0.
    lake = await openEmbeddedLake(workspace.lakeDir, { graceMs: 3_600_000, leaseWaitMs: 0 });
    await lake.createTable(defineTable({ name: "events", columns: [{ name: "id", type: "BIGINT" }], partitionKeys: ["day"], iceberg: true }));
    const folder = path.join(workspace.lakeDir, "events", "metadata");
    for (const n of [3, 4, 5]) await replacePartition(lake, "events", "day=2026-11-01", { select: `SELECT range AS id FROM range(${n})` });
    // Versions 1-3: one snapshot each. The first run is neither current nor previous: gc deletes it.
    const before = await validateTable(workspace.lakeDir, "events");
    expect(before.version).toBe(3);
    await collectGarbage(lake, "events", { graceMs: 0 });
    const after = await validateTable(workspace.lakeDir, "events");
    expect(after.version).toBe(4);
    expect(after.snapshots.map((s) => s.snapshotId)).toEqual(before.snapshots.slice(1).map((s) => s.snapshotId));
    // v1 made the expired snapshot current: gone, and out of the log; v2 (the oldest kept snapshot's) and v3 stay.
    expect(readdirSync(folder).filter((name) => name.endsWith(".metadata.json")).sort()).toEqual(["v2.metadata.json", "v3.metadata.json", "v4.metadata.json"]);
    expect((after.metadata["metadata-log"] as { "metadata-file": string }[]).map((e) => path.basename(e["metadata-file"]))).toEqual(["v2.metadata.json", "v3.metadata.json"]);
    expect(await icebirdRows(workspace.lakeDir, "events", ["id"], 2)).toHaveLength(4);
  }, 60_000);

  it("gc deletes lakeswap's Iceberg files that nothing references (a killed commit's), and leaves every referenced and foreign file", async () => {
    workspace = new PipelineWorkspace();
    lake = await openEmbeddedLake(workspace.lakeDir, { graceMs: 3_600_000, leaseWaitMs: 0 });
    await lake.createTable(defineTable({ name: "events", columns: [{ name: "id", type: "BIGINT" }], partitionKeys: ["day"], iceberg: true }));
    await replacePartition(lake, "events", "day=2026-11-01", { select: "SELECT range AS id FROM range(3)" });
    await replacePartition(lake, "events", "day=2026-11-02", { select: "SELECT range AS id FROM range(2)" });
    const folder = path.join(workspace.lakeDir, "events", "metadata");
    const kept = readdirSync(folder).sort();
    // What a commit killed between its manifests and its metadata file leaves; and a file lakeswap did not write.
    const strays = [`snap-123456789-1-${randomUUID()}.avro`, `${randomUUID()}-m0.avro`];
    for (const name of [...strays, "notes.txt"]) writeFileSync(path.join(folder, name), "x");
    await collectGarbage(lake, "events");
    expect(readdirSync(folder).sort()).toEqual([...kept, "notes.txt"].sort());
    const view = await validateTable(workspace.lakeDir, "events");
    expect(await icebirdRows(workspace.lakeDir, "events", ["id"], view.version)).toHaveLength(5);
  }, 60_000);

  it("a sync that only adds partitions lists the previous manifest as it is and writes one new manifest", async () => {
    const { ws, lake } = await start();
    await ws.pipeline(lake, { inputs: [ws.redeliver(orders(3))] }).sync();
    await ws.pipeline(lake, { inputs: [ws.redeliver(orders(5))] }).sync();
    const raw = await agree(ws.lakeDir, RAW, RAW_COLUMNS);
    expect(raw.summary["added-data-files"]).toBe("2");
    expect(raw.summary["total-data-files"]).toBe("5");
    const { snapshots } = await validateTable(ws.lakeDir, RAW);
    const [first, second] = snapshots;
    expect(second?.manifests).toHaveLength(2);
    expect(second?.manifests[1]).toBe(first?.manifests[0]);
    expect(second?.summary["lakeswap.manifests-reused"]).toBe("1");
    // The manifest list bounds each manifest's days, so an engine skips a manifest a filter on day excludes.
    expect(second?.bounds).toEqual(["2026-11-04..2026-11-05", "2026-11-01..2026-11-03"]);
    // A sync that changes a day of the reused manifest rewrites it: its other files are carried as existing.
    await ws.pipeline(lake, { inputs: [ws.redeliver(orders(5).map((r) => (r.id === 105 ? { ...r, customer: 77 } : r)))] }).sync();
    await agree(ws.lakeDir, RAW, RAW_COLUMNS);
    const third = (await validateTable(ws.lakeDir, RAW)).snapshots[2];
    expect(third?.manifests).toHaveLength(2);
    expect(third?.manifests).not.toContain(first?.manifests[0]);
    expect(third?.summary["total-data-files"]).toBe("5");
    expect(third?.summary["deleted-data-files"]).toBe("1");
  }, 120_000);

  it("a sync, a sync that rebuilds some partitions, a replace, a rollback, rollback --sync and gc each leave both views equal, the previous snapshot readable", async () => {
    const { ws, lake } = await start();
    const first = await ws.pipeline(lake, { inputs: [ws.redeliver(orders(3))] }).sync();
    const raw1 = await agree(ws.lakeDir, RAW, RAW_COLUMNS);
    const stage1 = await agree(ws.lakeDir, STAGE, STAGE_COLUMNS);
    expect(raw1.version).toBe(1);
    expect(raw1.summary["lakeswap.sync-id"]).toBe(first.syncId);
    // The sync's report names the snapshot it committed in each Iceberg table, with what it wrote.
    expect(first.snapshots?.map((s) => [s.table, s.addedFiles, s.filesWritten, s.catalogCalls])).toEqual([[RAW, 3, 3, 1], [STAGE, 3, 3, 1]]);
    expect(first.snapshots?.[0]?.bytesWritten).toBeGreaterThan(1000);
    expect(raw1.summary.operation).toBe("append");
    expect(raw1.summary["added-data-files"]).toBe("3");
    expect(raw1.summary["total-records"]).toBe("30");
    expect(stage1.version).toBe(1);
    // Not declared: no Iceberg metadata at all.
    expect(readdirSync(path.join(ws.lakeDir, "orders_monthly"))).not.toContain("metadata");

    // Day 2 changes, day 4 is new, days 1 and 3 are skipped: one snapshot, of every current file.
    const changed = orders(4).map((row) => (row.id === 205 ? { ...row, customer: 99 } : row));
    const second = await ws.pipeline(lake, { inputs: [ws.redeliver(changed)] }).sync();
    const raw2 = await agree(ws.lakeDir, RAW, RAW_COLUMNS);
    expect(raw2.version).toBe(2);
    expect(raw2.summary["lakeswap.sync-id"]).toBe(second.syncId);
    expect(raw2.summary.operation).toBe("overwrite");
    expect(raw2.summary["added-data-files"]).toBe("2");
    expect(raw2.summary["deleted-data-files"]).toBe("1");
    expect(raw2.summary["total-records"]).toBe("40");
    // The previous snapshot still reads the first sync's rows.
    expect(await icebirdRows(ws.lakeDir, RAW, RAW_COLUMNS, 1)).toEqual(raw1.rows);
    expect(await icebirdRows(ws.lakeDir, STAGE, STAGE_COLUMNS, 1)).toEqual(stage1.rows);

    // A sync with nothing to do moves no pointer and commits nothing.
    await ws.pipeline(lake, { inputs: [ws.redeliver(changed)] }).sync();
    expect((await validateTable(ws.lakeDir, RAW)).version).toBe(2);

    // A replace of one partition: one snapshot.
    await replacePartition(lake, RAW, "day=2026-11-01", {
      select: "SELECT order_id, customer_id, amount, 'replaced' AS status, order_ts, updated_at FROM orders_raw WHERE day = '2026-11-01' AND order_id < 105",
    });
    const raw3 = await agree(ws.lakeDir, RAW, RAW_COLUMNS);
    expect(raw3.version).toBe(3);
    expect(raw3.rows.filter((r) => r.endsWith("|replaced"))).toHaveLength(5);
    expect(raw3.summary["total-records"]).toBe("35");

    // A rollback of that partition, then of the whole second sync.
    await rollbackPartition(lake, RAW, "day=2026-11-01");
    const raw4 = await agree(ws.lakeDir, RAW, RAW_COLUMNS);
    expect(raw4.version).toBe(4);
    expect(raw4.rows).toEqual(raw2.rows);
    await rollbackSync(lake, second.syncId);
    const raw5 = await agree(ws.lakeDir, RAW, RAW_COLUMNS);
    expect(raw5.version).toBe(5);
    expect(raw5.rows).toEqual(raw1.rows);
    expect(raw5.summary["lakeswap.command"]).toBe(`rollback sync ${second.syncId}`);
    expect((await agree(ws.lakeDir, STAGE, STAGE_COLUMNS)).rows).toEqual(stage1.rows);

    // gc (grace 0): deletes runs that are neither current nor previous; every snapshot it keeps still reads.
    const before = await validateTable(ws.lakeDir, RAW);
    const reports = await collectGarbage(lake, RAW);
    expect(reports.some((r) => r.removed.length > 0)).toBe(true);
    const after = await validateTable(ws.lakeDir, RAW);
    expect(after.snapshots.length).toBeLessThan(before.snapshots.length);
    expect(after.metadata["current-snapshot-id"]).toBe(before.metadata["current-snapshot-id"]);
    // The rule: a snapshot is kept exactly when all its files are still there.
    const exists = (key: string): boolean => existsSync(path.join(ws.lakeDir, key));
    for (const snapshot of before.snapshots) {
      const kept = after.snapshots.some((s) => s.snapshotId === snapshot.snapshotId);
      expect(kept, `snapshot ${snapshot.snapshotId} kept`).toBe(snapshot.files.every((f) => exists(f.key)));
    }
    // Every kept snapshot reads with icebird, through the metadata version that made it current (validateTable checked
    // that the versions before the metadata log's first are gone).
    for (let version = 1; version <= after.version; version += 1) {
      const file = path.join(ws.lakeDir, RAW, "metadata", `v${version}.metadata.json`);
      if (!existsSync(file)) continue;
      const metadata = JSON.parse(readFileSync(file, "utf8")) as { "current-snapshot-id": number };
      const snapshot = after.snapshots.find((s) => s.snapshotId === metadata["current-snapshot-id"]);
      if (!snapshot) continue;
      expect((await icebirdRows(ws.lakeDir, RAW, RAW_COLUMNS, version)).length).toBe(Number(snapshot.summary["total-records"]));
    }
    // The expired snapshots' manifest lists are gone.
    const lists = readdirSync(path.join(ws.lakeDir, RAW, "metadata")).filter((name) => name.startsWith("snap-"));
    expect(lists).toHaveLength(after.snapshots.length);
    await agree(ws.lakeDir, RAW, RAW_COLUMNS);
  }, 120_000);
});
