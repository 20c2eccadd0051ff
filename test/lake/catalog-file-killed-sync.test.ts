import { afterEach, describe, expect, it } from "vitest";
import { runCli, spawnCli } from "../support/lake-fixture.js";
import { Child } from "../support/crash-kit.js";
import { PipelineWorkspace, orders, type OrderRow } from "../support/pipeline-fixture.js";
import { readCatalogFile } from "../support/plain-reader.js";

// QA: a sync killed between its layers' swaps (raw and stage moved, analytics not) left the catalog file showing the
// dataset's tables at different deliveries: the next command's replay of the killed sync's outbox rewrote the views of
// the tables it finished alone (stage at B over raw at A, for the whole rerun), and `gc` then rewrote raw's stale view
// (raw and stage at B over monthly at A, until the dataset's next sync). lake.md: "all tables of one dataset change
// together", "a reader never sees part of a sync's moves". A plain DuckDB reading lake.duckdb must see the dataset as
// the last finished sync left it (A) until a sync of it finishes, then all of it at B.

const DAYS = 6;
const A = orders(DAYS, 4);
// Delivery B changes every day: other amounts and one more (cancelled) order a day.
const B = orders(DAYS, 5).map((r) => ({ ...r, amount: `${r.id}.50` }));

/** Each day's `orders:cents` of a delivery as each table holds it (stage and monthly: its completed orders). */
function expected(rows: readonly OrderRow[]): Record<"raw" | "stage" | "monthly", string[]> {
  const days = (only: (r: OrderRow) => boolean): string[] => {
    const byDay = new Map<string, { orders: number; cents: number }>();
    for (const r of rows.filter(only)) {
      const day = byDay.get(r.ts.slice(0, 10)) ?? { orders: 0, cents: 0 };
      byDay.set(r.ts.slice(0, 10), { orders: day.orders + 1, cents: day.cents + Math.round(Number(r.amount) * 100) });
    }
    return [...byDay].sort().map(([day, t]) => `${day}:${t.orders}:${t.cents}`);
  };
  const completed = days((r) => r.status === "completed");
  return { raw: days(() => true), stage: completed, monthly: completed };
}

/** Which delivery each table's view in lake.duckdb shows, read with a plain DuckDB: `A`, `B`, or its days as they are. */
async function shown(lakeDir: string): Promise<Record<"raw" | "stage" | "monthly", string>> {
  const sql = {
    raw: "SELECT day, count(*), sum(CAST(amount * 100 AS BIGINT)) FROM lake.orders_raw GROUP BY ALL ORDER BY 1",
    stage: "SELECT day, count(*), sum(CAST(amount * 100 AS BIGINT)) FROM lake.orders_stage GROUP BY ALL ORDER BY 1",
    monthly: "SELECT order_day, sum(orders), sum(CAST(revenue * 100 AS BIGINT)) FROM lake.orders_monthly GROUP BY ALL ORDER BY 1",
  };
  const [a, b] = [expected(A), expected(B)];
  const label = async (table: keyof typeof sql): Promise<string> => {
    const days = (await readCatalogFile(lakeDir, sql[table])).map(([day, count, cents]) => `${String(day)}:${Number(count)}:${Number(cents)}`);
    return JSON.stringify(days) === JSON.stringify(a[table]) ? "A" : JSON.stringify(days) === JSON.stringify(b[table]) ? "B" : days.join(" ");
  };
  return { raw: await label("raw"), stage: await label("stage"), monthly: await label("monthly") };
}

const all = (delivery: string) => ({ raw: delivery, stage: delivery, monthly: delivery });

/**
 * Kill points of a sync of three layers between (and within) its tables' swaps: after raw's swap (its outbox entry
 * pending), within stage's batch (some of stage's partitions moved), after stage's swap (raw's moves acknowledged,
 * stage's pending), after stage's manifests (analytics not built yet).
 */
const POINTS = ["after-swap", "during-batch-swap@10", "after-swap@2", "after-manifest@2"];

describe("the catalog file after a sync killed between its tables' swaps", () => {
  const children: Child[] = [];
  const workspaces: PipelineWorkspace[] = [];
  afterEach(() => {
    for (const child of children.splice(0)) child.kill("SIGKILL");
    for (const ws of workspaces.splice(0)) ws.cleanup();
  });

  /** A workspace whose lake synced delivery A, then was killed at `point` syncing B; returns it and B's file. */
  async function killedSync(point: string): Promise<{ ws: PipelineWorkspace; fileB: string; sync: (file: string) => string[] }> {
    const ws = new PipelineWorkspace({ concurrency: 2 });
    workspaces.push(ws);
    const sync = (file: string): string[] => ["--lake", ws.lakeDir, "sync", "-c", ws.configFile, "--input", file];
    const first = await runCli(sync(ws.delivery(A)));
    expect(first.code, first.stderr).toBe(0);
    expect(await shown(ws.lakeDir)).toEqual(all("A"));
    const [name, nth] = point.split("@");
    const fileB = ws.delivery(B);
    const killed = await runCli(sync(fileB), { LAKESWAP_FAULT: `${name}:kill${nth ? `@${nth}` : ""}` });
    expect(killed.signal, `the sync reached ${point}; stderr: ${killed.stderr}`).toBe("SIGKILL");
    // The killed sync rewrote nothing: its dataset's views are as the sync of A left them.
    expect(await shown(ws.lakeDir)).toEqual(all("A"));
    return { ws, fileB, sync };
  }

  it.each(POINTS)("killed at %s: gc (which replays its outbox and holds each table's lease) and a query leave the views at A; the rerun moves them all to B", async (point) => {
    const { ws, fileB, sync } = await killedSync(point);
    const gc = await runCli(["--lake", ws.lakeDir, "gc"]);
    expect(gc.code, gc.stderr).toBe(0);
    expect(await shown(ws.lakeDir)).toEqual(all("A"));
    const query = await runCli(["--lake", ws.lakeDir, "query", "SELECT count(*) FROM orders_stage"]);
    expect(query.code, query.stderr).toBe(0);
    expect(await shown(ws.lakeDir)).toEqual(all("A"));
    const rerun = await runCli(sync(fileB));
    expect(rerun.code, rerun.stderr).toBe(0);
    expect(await shown(ws.lakeDir)).toEqual(all("B"));
  });

  it("killed at after-swap@2: a replace and a partition rollback of a table it moved leave the views at A (with a warning); the rerun moves them all to B", async () => {
    const { ws, fileB, sync } = await killedSync("after-swap@2");
    const sql = "SELECT order_id, customer_id, amount, status, order_ts, updated_at FROM orders_raw WHERE day = '2026-11-02'";
    // Node's warnings shown (the tests' children run without them).
    const replaced = await runCli(["--lake", ws.lakeDir, "replace", "orders_raw", "--partition", "day=2026-11-01", "--sql", sql], { NODE_NO_WARNINGS: "0" });
    expect(replaced.code, replaced.stderr).toBe(0);
    expect(replaced.stderr).toMatch(/lake\.duckdb still shows orders_raw as the last finished sync left it: it holds runs of a sync that never finished/);
    expect(await shown(ws.lakeDir)).toEqual(all("A"));
    const rolledBack = await runCli(["--lake", ws.lakeDir, "rollback", "orders_stage", "--partition", "day=2026-11-03"]);
    expect(rolledBack.code, rolledBack.stderr).toBe(0);
    expect(await shown(ws.lakeDir)).toEqual(all("A"));
    const rerun = await runCli(sync(fileB));
    expect(rerun.code, rerun.stderr).toBe(0);
    expect(await shown(ws.lakeDir)).toEqual(all("B"));
  });

  it("killed, rerun, then rollback --sync last: the lake shows the killed sync's partial moves again, which the rollback names, with the command that undoes them", async () => {
    const { ws, fileB, sync } = await killedSync("after-swap@2");
    const records = JSON.parse((await runCli(["--lake", ws.lakeDir, "syncs", "--json"])).stdout) as { syncId: string; finishedAt?: string }[];
    const killed = records.find((r) => r.finishedAt === undefined)!.syncId;
    expect((await runCli(sync(fileB))).code).toBe(0);
    expect(await shown(ws.lakeDir)).toEqual(all("B"));
    const rollback = await runCli(["--lake", ws.lakeDir, "rollback", "--sync", "last", "--json"]);
    expect(rollback.code, rollback.stderr).toBe(0);
    const result = JSON.parse(rollback.stdout) as { unfinished?: { syncId: string; partitions: string[] }[] };
    // The killed sync had moved raw and stage (analytics not): every one of their days holds its runs again.
    expect(result.unfinished).toEqual([{ syncId: killed, partitions: [...Array(DAYS).keys()].flatMap((d) => [`orders_raw/day=2026-11-0${d + 1}`]).concat([...Array(DAYS).keys()].map((d) => `orders_stage/day=2026-11-0${d + 1}`)) }]);
    const text = await runCli(["--lake", ws.lakeDir, "rollback", "--sync", killed]);
    expect(text.code, text.stderr).toBe(0);
    expect(await shown(ws.lakeDir)).toEqual(all("A"));
  });

  it.each(POINTS)("killed at %s: while the rerun (which replays the killed sync's outbox as it opens the lake) works, the views stay at A; then all move to B", async (point) => {
    const { ws, fileB, sync } = await killedSync(point);
    // Stopped at its first batch of swaps, with the lake opened and its leases taken.
    const rerun = new Child(spawnCli(sync(fileB), { LAKESWAP_FAULT: "lease-acquired:stop@1" }));
    children.push(rerun);
    await rerun.untilStopped("lease-acquired");
    expect(await shown(ws.lakeDir)).toEqual(all("A"));
    rerun.kill("SIGCONT");
    expect(await rerun.exited, rerun.stderr).toEqual({ code: 0, signal: null });
    expect(await shown(ws.lakeDir)).toEqual(all("B"));
  });
});
