import { writeFileSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import type { Lake } from "../../src/lake/lake.js";
import { collectGarbage } from "../../src/lake/operations/gc.js";
import { parseAsOf } from "../../src/lake/operations/iceberg-as-of.js";
import { findSync } from "../../src/lake/operations/syncs.js";
import { rollbackSync } from "../../src/lake/operations/rollback.js";
import { openEmbeddedLake } from "../../src/open/open-lake.js";
import { runMain } from "../support/main-cli.js";
import { validateTable } from "../support/iceberg-kit.js";
import { PipelineWorkspace, orders, pipelineYaml } from "../support/pipeline-fixture.js";

// `query --as-of` reads iceberg: true tables as an earlier sync, moment or snapshot left them, from that snapshot's
// files (never from the Hive pointers of now); `history --snapshots` lists what can be read; the sync record names
// the snapshot each sync committed.

const RAW = "orders_raw";
const STAGE = "orders_stage";

let workspace: PipelineWorkspace | undefined;
let lake: Lake | undefined;
afterEach(async () => {
  await lake?.close();
  workspace?.cleanup();
  lake = undefined;
  workspace = undefined;
});



/** Every row of a table as text, sorted, read now or as of `asOf`. */
async function rows(target: Lake, table: string, asOf?: string): Promise<string[]> {
  const result = await target.query(`SELECT * FROM ${table}`, { asOf });
  return result.rows.map((row) => row.map(String).join("|")).sort();
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

describe("query --as-of and history --snapshots", () => {
  it("reads each earlier sync, moment and snapshot as it was, after later syncs and a rollback, until gc expires it", async () => {
    workspace = new PipelineWorkspace();
    writeFileSync(workspace.configFile, pipelineYaml({ iceberg: true }));
    lake = await openEmbeddedLake(workspace.lakeDir, { graceMs: 0, leaseWaitMs: 0 });
    const ws = workspace;
    const first = await ws.pipeline(lake, { inputs: [ws.redeliver(orders(3))] }).sync();
    const raw1 = await rows(lake, RAW);
    const stage1 = await rows(lake, STAGE);
    await sleep(5);
    const between = new Date().toISOString();
    await sleep(5);
    const second = await ws.pipeline(lake, { inputs: [ws.redeliver(orders(4).map((r) => (r.id === 205 ? { ...r, customer: 99 } : r)))] }).sync();
    const raw2 = await rows(lake, RAW);
    expect(raw2).not.toEqual(raw1);

    // The sync record names the snapshot each table got; that is the one --as-of the sync reads.
    const record = await findSync(lake, first.syncId);
    const snapshotOfRaw = record.snapshots?.find((s) => s.table === RAW)?.snapshotId;
    expect(record.snapshots?.map((s) => s.table)).toEqual([RAW, STAGE]);
    const { snapshots } = await validateTable(ws.lakeDir, RAW);
    expect(snapshots[0]?.snapshotId).toBe(snapshotOfRaw);

    expect(await rows(lake, RAW, first.syncId)).toEqual(raw1);
    expect(await rows(lake, STAGE, first.syncId)).toEqual(stage1);
    expect(await rows(lake, RAW, between)).toEqual(raw1);
    expect(await rows(lake, RAW, String(snapshotOfRaw))).toEqual(raw1);
    expect(await rows(lake, RAW, "last")).toEqual(raw2);
    expect(await rows(lake, RAW, second.syncId)).toEqual(raw2);
    // One consistent state across tables: a join as of the first sync sees the first sync's rows on both sides.
    const joined = await lake.query(`SELECT count(*) FROM ${RAW} r JOIN ${STAGE} s USING (order_id)`, { asOf: first.syncId });
    expect(Number(joined.rows[0]?.[0])).toBe(stage1.length);

    // rollback --sync of the second sync is itself a snapshot; the first and second syncs still read as they were.
    await rollbackSync(lake, second.syncId);
    expect(await rows(lake, RAW)).toEqual(raw1);
    expect(await rows(lake, RAW, second.syncId)).toEqual(raw2);

    // A table that is not Iceberg has no earlier state to read: refused, naming it and the fix.
    await expect(lake.query("SELECT count(*) FROM orders_monthly", { asOf: first.syncId })).rejects.toThrow(/table 'orders_monthly' is not published as Iceberg.*declare iceberg: true/);
    await expect(lake.query(`SELECT * FROM ${RAW}`, { asOf: "2020-01-01" })).rejects.toThrow(/table 'orders_raw' has no snapshot at or before 2020-01-01 .*oldest kept is/);
    await expect(lake.query(`SELECT * FROM ${RAW}`, { asOf: "12345" })).rejects.toThrow(/table 'orders_raw' has no snapshot 12345/);

    // The CLI: history --snapshots (text and JSON), query --as-of.
    const listed = await runMain(["history", RAW, "--snapshots", "--lake", ws.lakeDir, "--json"]);
    expect(listed.code, listed.stderr).toBe(0);
    const entries = JSON.parse(listed.stdout) as { snapshotId: number; syncId?: string; current: boolean; command: string; totalRecords: number }[];
    expect(entries.map((e) => e.syncId ?? e.command)).toEqual([`rollback sync ${second.syncId}`, second.syncId, first.syncId]);
    expect(entries[0]?.current).toBe(true);
    expect(entries.map((e) => e.totalRecords)).toEqual([raw1.length, raw2.length, raw1.length]);
    const text = await runMain(["history", RAW, "--snapshots", "--lake", ws.lakeDir]);
    expect(text.stdout).toContain(String(snapshotOfRaw));
    const asOf = await runMain(["query", `SELECT count(*) AS n FROM ${RAW}`, "--as-of", second.syncId, "--lake", ws.lakeDir, "--json"]);
    expect(asOf.code, asOf.stderr).toBe(0);
    expect(JSON.parse(asOf.stdout)).toEqual([{ n: raw2.length }]);
    const bad = await runMain(["query", "SELECT 1", "--as-of", "yesterday", "--lake", ws.lakeDir]);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/--as-of 'yesterday' is neither a sync id .* a timestamp .* nor a snapshot id/);

    // gc deletes the second sync's runs (neither current nor previous) and expires its snapshot: said, not misread.
    await collectGarbage(lake, RAW);
    await expect(lake.query(`SELECT * FROM ${RAW}`, { asOf: second.syncId })).rejects.toThrow(/no snapshot of table 'orders_raw' records sync .*gc expired it/);
    expect(await rows(lake, RAW, first.syncId)).toEqual(raw1);
  }, 120_000);

  it("reads each snapshot under the schema it was committed with: a column added, renamed or rolled back since reads as it was then", async () => {
    workspace = new PipelineWorkspace();
    const ws = workspace;
    lake = await openEmbeddedLake(ws.lakeDir, { graceMs: 3_600_000, leaseWaitMs: 0 });
    const config = (columns: string): string =>
      `datasets:\n  t:\n    source: {format: csv, path: deliveries/*.csv}\n    iceberg: true\n    columns: {id: BIGINT, ${columns}, day: VARCHAR}\n    partition: {p: "day"}\n`;
    const write = (text: string): string => {
      const file = ws.redeliver([]);
      writeFileSync(file, text);
      return file;
    };
    const syncWith = async (columns: string, text: string, rebuildSchema = false): Promise<string> => {
      writeFileSync(ws.configFile, config(columns));
      return (await ws.pipeline(lake!, { inputs: [write(text)], rebuildSchema }).sync()).syncId;
    };
    const csv = (header: string, row: (id: number, day: string) => string): string => {
      const lines = [header];
      for (const day of ["d1", "d2", "d3"]) for (let i = 1; i <= 3; i++) lines.push(row(Number(day.slice(1)) * 10 + i, day));
      return `${lines.join("\n")}\n`;
    };
    const asOf = async (sql: string, at?: string): Promise<string[]> =>
      (await lake!.query(sql, { asOf: at })).rows.map((row) => row.map((v) => (v === null ? "null" : String(v))).join(" "));
    const columnsAsOf = async (at: string): Promise<readonly string[]> => (await lake!.query("SELECT * FROM t_raw LIMIT 1", { asOf: at })).columns;

    const s1 = await syncWith(`amount: "DECIMAL(10,2)"`, csv("id,amount,day", (id, day) => `${id},${id}.50,${day}`));
    const s2 = await syncWith(`amount: "DECIMAL(10,2)", coupon: VARCHAR`, csv("id,amount,coupon,day", (id, day) => `${id},${id}.50,C${id},${day}`));
    await rollbackSync(lake, s2);
    const s3 = await syncWith(`total: {type: "DECIMAL(10,2)", renamed_from: amount}`, csv("id,total,day", (id, day) => `${id},${id}.50,${day}`), true);
    // Under the renamed column, every earlier snapshot reads as it was, the rename's under its own schema.
    expect(await columnsAsOf(s1)).toEqual(["id", "amount", "day", "p"]);
    expect(await columnsAsOf(s2)).toEqual(["id", "amount", "coupon", "day", "p"]);
    expect(await asOf("SELECT count(coupon), min(coupon), sum(amount) FROM t_raw", s2)).toEqual(["9 C11 202.50"]);
    expect(await asOf("SELECT count(total), sum(total) FROM t_raw", s3)).toEqual(["9 202.50"]);
    // Rolled back: the table is as before the rename, and each snapshot still reads under its own schema.
    await rollbackSync(lake, s3);
    expect(await asOf("SELECT count(amount), sum(amount) FROM t_raw")).toEqual(["9 202.50"]);
    expect(await columnsAsOf(s3)).toEqual(["id", "total", "day", "p"]);
    expect(await asOf("SELECT count(*), count(total), sum(total), typeof(max(total)) FROM t_raw", s3)).toEqual(["9 9 202.50 DECIMAL(10,2)"]);
    expect(await asOf("SELECT count(coupon), max(coupon) FROM t_raw", s2)).toEqual(["9 C33"]);
    expect(await asOf("SELECT count(amount), sum(amount) FROM t_raw", s1)).toEqual(["9 202.50"]);
    // A column the snapshot's schema lacks is no column of the table then: refused, never read as NULL.
    await expect(lake.query("SELECT sum(amount) FROM t_raw", { asOf: s3 })).rejects.toThrow(/amount/);
    await expect(lake.query("SELECT count(coupon) FROM t_raw", { asOf: s1 })).rejects.toThrow(/coupon/);
    const cli = await runMain(["query", "SELECT sum(total) AS total FROM t_raw", "--as-of", s3, "--lake", ws.lakeDir, "--json"]);
    expect(cli.code, cli.stderr).toBe(0);
    expect(JSON.parse(cli.stdout)).toEqual([{ total: "202.50" }]);
  }, 120_000);

  it("parses sync ids, snapshot ids and ISO timestamps (no zone: UTC), and refuses the rest naming the value", () => {
    expect(parseAsOf("last")).toEqual({ syncId: "last" });
    expect(parseAsOf("20261102T140501Z-1a2b3c")).toEqual({ syncId: "20261102T140501Z-1a2b3c" });
    expect(parseAsOf("4503599627370495")).toEqual({ snapshotId: 4503599627370495 });
    expect(parseAsOf("2026-11-02")).toEqual({ atMs: Date.UTC(2026, 10, 2), text: "2026-11-02" });
    expect(parseAsOf("2026-11-02T14:05")).toMatchObject({ atMs: Date.UTC(2026, 10, 2, 14, 5) });
    expect(parseAsOf("2026-11-02 14:05:01.250")).toMatchObject({ atMs: Date.UTC(2026, 10, 2, 14, 5, 1, 250) });
    expect(parseAsOf("2026-11-02T14:05:00+01:00")).toMatchObject({ atMs: Date.UTC(2026, 10, 2, 13, 5) });
    expect(parseAsOf("2026-11-02T14:05:00-0130")).toMatchObject({ atMs: Date.UTC(2026, 10, 2, 15, 35) });
    for (const bad of ["2026-02-30", "2026-11-02T25:00", "0", "-1", "99999999999999999", "now", "2026-11-02T14:05:00 UTC"]) {
      expect(() => parseAsOf(bad), bad).toThrow(/--as-of '.*' is neither a sync id/);
    }
  });
});
