import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { Lake } from "../../src/lake/lake.js";
import { runCli, selectedBackends, tempDir, type CliResult, type TestBackend } from "../support/lake-fixture.js";
import { expectSyncBuildsNothing, syncedOnce } from "../support/main-cli.js";

// Issue 31: a sync that changes a table's schema in place (a column added in the middle, INTEGER widened to BIGINT)
// and rebuilds the days a delivery fills, killed at any point: readers see every day whole, the old delivery's rows
// or the new one's, under the old definition or the new one; the rerun converges, and a resend builds nothing.

const DAYS = 6;
const config = (after: boolean): string => `datasets:
  orders:
    source: {format: csv, path: deliveries/*.csv}
    columns: {id: {type: BIGINT, nullable: false}, ${after ? "coupon: VARCHAR, n: BIGINT" : "n: INTEGER"}, ts: TIMESTAMP}
    partition: {day: "strftime(ts, '%Y-%m-%d')"}
    layers:
      - name: stage
        sql: sql/stage.sql
        columns: {id: BIGINT, n: ${after ? "BIGINT" : "INTEGER"}}
`;

/** Rows `id,n,ts` (A) and, for B, `id,coupon,n,ts` with coupons on even days and an n only BIGINT holds on day 3. */
function rowsOf(after: boolean): string[][] {
  const rows: string[][] = [];
  for (let day = 1; day <= DAYS; day++) {
    for (let i = 0; i < 4; i++) {
      const id = day * 10 + i;
      const n = after && day === 3 && i === 0 ? "5000000000" : String(id * 3);
      rows.push([String(id), after && day % 2 === 0 ? `C${id}` : "", n, `2026-11-0${day} 1${i}:00:00`]);
    }
  }
  return rows;
}
const csv = (after: boolean): string =>
  `${after ? "id,coupon,n,ts" : "id,n,ts"}\n${rowsOf(after).map(([id, coupon, n, ts]) => (after ? [id, coupon, n, ts] : [id, n, ts]).join(",")).join("\n")}\n`;

/** `day -> sorted "id:coupon:n"` as a delivery leaves the raw table. */
function expected(after: boolean): Map<string, string[]> {
  const days = new Map<string, string[]>();
  for (const [id, coupon, n, ts] of rowsOf(after)) {
    const day = ts!.slice(0, 10);
    days.set(day, [...(days.get(day) ?? []), `${id}:${coupon || "null"}:${n}`].sort());
  }
  return days;
}

async function rawByDay(lake: Lake, withCoupon: boolean): Promise<Map<string, string[]>> {
  const result = await lake.query(`SELECT day, id, ${withCoupon ? "coupon" : "NULL"}, n FROM orders_raw`);
  const days = new Map<string, string[]>();
  for (const [day, id, coupon, n] of result.rows) days.set(String(day), [...(days.get(String(day)) ?? []), `${Number(id)}:${coupon === null ? "null" : String(coupon)}:${String(n)}`].sort());
  return days;
}

/** Kill points: recorded but not changed, changed but nothing built, mid-build, mid-batch, after the raw swap. */
const POINTS: Record<string, readonly string[]> = {
  local: ["schema-after-record", "schema-after-change", "schema-after-change@2", "during-build", "during-batch-swap", "after-swap"],
  aws: ["schema-after-record", "schema-after-change", "after-swap"],
};

describe.each(selectedBackends())("a sync changing a schema in place, killed (%s)", (backendName) => {
  const { dir, cleanup } = tempDir("lakeswap-schema-crash-");
  mkdirSync(path.join(dir, "deliveries"));
  mkdirSync(path.join(dir, "sql"));
  writeFileSync(path.join(dir, "sql", "stage.sql"), "SELECT id, n FROM orders_raw WHERE day = {{ day }}\n");
  const [before, after] = [path.join(dir, "before.yaml"), path.join(dir, "after.yaml")];
  writeFileSync(before, config(false));
  writeFileSync(after, config(true));
  const [fileA, fileB] = [path.join(dir, "deliveries", "a.csv"), path.join(dir, "deliveries", "b.csv")];
  writeFileSync(fileA, csv(false));
  writeFileSync(fileB, csv(true));
  const args = (backend: TestBackend, configFile: string, file: string): string[] => [...backend.cliArgs, "sync", "-c", configFile, "--input", file, "--json"];
  const syncedA = syncedOnce(backendName, (backend) => args(backend, before, fileA));
  afterAll(async () => {
    await syncedA.cleanup();
    cleanup();
  });

  it.concurrent.each(POINTS[backendName] ?? [])("at %s: every day whole under either definition; the rerun converges, a resend builds nothing", async (point) => {
    const backend = await syncedA.clone();
    try {
      const [name, nth] = point.split("@");
      const killed: CliResult = await runCli(args(backend, after, fileB), { ...backend.cliEnv, LAKESWAP_FAULT: `${name}:kill${nth ? `@${nth}` : ""}`, LAKESWAP_GRACE: "0" });
      expect(killed.signal, `the sync reached ${point}; stderr: ${killed.stderr}`).toBe("SIGKILL");
      const reader = await backend.open({ readOnly: true });
      try {
        const table = await reader.table("orders_raw");
        const changed = table.columns.some((c) => c.name === "coupon");
        expect(table.columns.map((c) => `${c.name} ${c.type}`)).toEqual(changed ? ["id BIGINT", "coupon VARCHAR", "n BIGINT", "ts TIMESTAMP"] : ["id BIGINT", "n INTEGER", "ts TIMESTAMP"]);
        const seen = await rawByDay(reader, changed);
        const [old, now] = [expected(false), expected(true)];
        expect([...seen.keys()].sort()).toEqual([...old.keys()].sort());
        for (const [day, rows] of seen) expect([old.get(day), now.get(day)], `orders_raw/day=${day} is one delivery's, whole`).toContainEqual(rows);
      } finally {
        await reader.close();
      }

      const rerun = await runCli(args(backend, after, fileB), { ...backend.cliEnv, LAKESWAP_GRACE: "0" });
      expect(rerun.code, rerun.stderr).toBe(0);
      const lake = await backend.open();
      try {
        expect(await rawByDay(lake, true)).toEqual(expected(true));
        const stage = await lake.query("SELECT count(*), max(n) FROM orders_stage");
        expect(stage.rows[0]?.map(String)).toEqual([String(DAYS * 4), "5000000000"]);
        expect((await lake.table("orders_raw")).schemaVersion).toBe(1);
        expect(await lake.pendingChanges()).toEqual([]);
      } finally {
        await lake.close();
      }
      await expectSyncBuildsNothing(args(backend, after, fileB), backend.cliEnv);
    } finally {
      await backend.cleanup();
    }
  }, 300_000);
});
