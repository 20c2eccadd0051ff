import path from "node:path";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { PostgresSink } from "../../src/sinks/postgres/postgres-sink.js";
import type { SinkLayout, SinkPartitionWrite } from "../../src/sinks/sink.js";
import { tempDir } from "../support/lake-fixture.js";
import { postgresAvailable } from "../support/postgres.js";
import { usePostgres } from "../support/shared-services.js";
import { sinkRuns, TEST_SOURCE } from "../support/sink-runs.js";

/*
 * Upsert with partitions in their transactions at once (two connections per sink): keys that move between two
 * partitions sent together may make the two transactions deadlock; PostgreSQL aborts one, which runs again.
 */

const postgres = usePostgres("concurrent");

function layoutOf(hardDelete: boolean): SinkLayout {
  return {
    lakeTable: "orders",
    source: TEST_SOURCE,
    columns: [
      { name: "id", type: "BIGINT", nullable: false },
      { name: "amount", type: "DECIMAL(10,2)", nullable: true },
      { name: "day", type: "VARCHAR", nullable: false },
    ],
    partitionKeys: ["day"],
    mode: "upsert",
    primaryKey: ["id"],
    hardDelete,
  };
}

/** A database of its own, an upsert sink on `public.orders`, and Parquet runs of id ranges written on demand. */
async function workspace(hardDelete = false) {
  const { url, query } = await postgres.database();
  const { dir, cleanup } = tempDir("lakeswap-concurrent-");
  postgres.onCleanup(cleanup);
  const layout = layoutOf(hardDelete);
  const sink = new PostgresSink({ kind: "postgres", url, maskedUrl: url, schema: "public", table: "orders", mode: "upsert", primaryKey: ["id"], hardDelete });
  postgres.onCleanup(() => sink.close());
  const write = await sinkRuns(path.join(dir), (cleanup) => postgres.onCleanup(cleanup));
  return {
    url,
    sink,
    layout,
    db: <R extends pg.QueryResultRow>(sql: string): Promise<R[]> => query<R>(sql),
    /** One day's run: the ids of `ranges` (inclusive), amount `amount`. */
    run(day: string, ranges: readonly (readonly [number, number])[], amount: string): Promise<SinkPartitionWrite> {
      const select = ranges.map(([from, to]) => `SELECT i::BIGINT AS id, ${amount}::DECIMAL(10,2) AS amount FROM range(${from}, ${to + 1}) t(i)`).join(" UNION ALL ");
      return write({ keys: ["day"], values: [day] }, select);
    },
    /** `<day> <live rows> <marked rows> <distinct amounts>` per day. */
    async days(): Promise<string[]> {
      const rows = await query<{ line: string }>(
        "SELECT concat_ws(' ', day, count(*) FILTER (WHERE _lakeswap_deleted_at IS NULL), count(*) FILTER (WHERE _lakeswap_deleted_at IS NOT NULL), " +
          "string_agg(DISTINCT amount::text, '/')) AS line FROM orders GROUP BY day ORDER BY day",
      );
      return rows.map((row) => row.line);
    },
  };
}

describe.skipIf(!postgresAvailable())("PostgreSQL sink: upsert partitions at once", () => {
  it.each([
    ["soft delete", false],
    ["hard_delete", true],
  ])("keys moving both ways between two partitions sent at once (%s): both land whole, every key in its new partition", async (_mode, hardDelete) => {
    const ws = await workspace(hardDelete);
    await ws.sink.prepare(ws.layout);
    await ws.sink.write(ws.layout, await ws.run("2026-11-01", [[1, 2000]], "1"));
    await ws.sink.write(ws.layout, await ws.run("2026-11-02", [[2001, 4000]], "1"));
    // Half of each day's keys move to the other day; a few keys of each leave the lake.
    const day1 = await ws.run("2026-11-01", [[1, 990], [3001, 4000]], "2");
    const day2 = await ws.run("2026-11-02", [[2001, 2990], [1001, 2000]], "2");
    expect(await Promise.all([ws.sink.write(ws.layout, day1), ws.sink.write(ws.layout, day2)])).toEqual([{ rows: 1990 }, { rows: 1990 }]);
    const gone = hardDelete ? [] : ["2026-11-01 10 1.00", "2026-11-02 10 1.00"];
    expect(await ws.db("SELECT count(*)::int AS n FROM orders WHERE (day = '2026-11-01') <> (id <= 1000 OR id > 3000)")).toEqual([{ n: 0 }]);
    const live = await ws.db<{ day: string; n: number }>("SELECT day, count(*)::int AS n FROM orders WHERE _lakeswap_deleted_at IS NULL AND amount = 2 GROUP BY day ORDER BY day");
    expect(live.map((d) => `${d.day} ${d.n}`)).toEqual(["2026-11-01 1990", "2026-11-02 1990"]);
    const marked = await ws.db<{ day: string; n: number }>("SELECT day, count(*)::int AS n FROM orders WHERE _lakeswap_deleted_at IS NOT NULL GROUP BY day ORDER BY day");
    expect(marked.map((d) => `${d.day} ${d.n} 1.00`)).toEqual(gone);
    expect(await ws.db("SELECT count(*)::int AS n FROM orders")).toEqual([{ n: hardDelete ? 3980 : 4000 }]);
  });

  it.each([
    ["soft delete", false],
    ["hard_delete", true],
  ])("keys moving back and forth between two partitions, sync after sync (%s): every sync lands whole, after at most one deadlock", async (_mode, hardDelete) => {
    const ws = await workspace(hardDelete);
    const own = { "2026-11-01": [1, 2000], "2026-11-02": [2001, 4000] } as const;
    const other = { "2026-11-01": own["2026-11-02"], "2026-11-02": own["2026-11-01"] } as const;
    const deadlocks = async (): Promise<number> => (await ws.db<{ n: number }>("SELECT deadlocks::int AS n FROM pg_stat_database WHERE datname = current_database()"))[0]!.n;
    const syncs = 4;
    for (let sync = 1; sync <= syncs; sync += 1) {
      // The first sync sends each day its own keys; then 1,000 keys of each day move to the other (10 leave the lake), and back.
      const ranges = (day: keyof typeof own): [number, number][] =>
        sync % 2 === 1 ? [[own[day][0], own[day][1]]] : [[own[day][0], own[day][0] + 989], [other[day][0] + 1000, other[day][1]]];
      // A sink as a sync makes it: prepared, both days written at once, closed.
      const sink = new PostgresSink({ kind: "postgres", url: ws.url, maskedUrl: ws.url, schema: "public", table: "orders", mode: "upsert", primaryKey: ["id"], hardDelete });
      const days = (["2026-11-01", "2026-11-02"] as const).map((day) => ({ day, ranges: ranges(day) }));
      const rows = days.map(({ ranges }) => ranges.reduce((sum, [from, to]) => sum + to - from + 1, 0));
      try {
        await sink.prepare(ws.layout);
        const runs = await Promise.all(days.map(({ day, ranges }) => ws.run(day, ranges, String(sync))));
        expect(await Promise.all(runs.map((run) => sink.write(ws.layout, run)))).toEqual(rows.map((n) => ({ rows: n })));
      } finally {
        await sink.close();
      }
      const live = await ws.db<{ line: string }>(
        "SELECT concat_ws(' ', day, count(*), min(amount)::int, max(amount)::int) AS line FROM orders WHERE _lakeswap_deleted_at IS NULL GROUP BY day ORDER BY day",
      );
      expect(live.map((r) => r.line), `sync ${sync}`).toEqual(days.map(({ day }, i) => `${day} ${rows[i]} ${sync} ${sync}`));
      const misplaced = `(day = '2026-11-01') <> (${days[0]!.ranges.map(([from, to]) => `id BETWEEN ${from} AND ${to}`).join(" OR ")})`;
      expect(await ws.db(`SELECT count(*)::int AS n FROM orders WHERE _lakeswap_deleted_at IS NULL AND ${misplaced}`), `sync ${sync}`).toEqual([{ n: 0 }]);
    }
    // A transaction aborted as a deadlock runs again alone: one deadlock at most in each sync that moves keys. Run
    // again beside the other one, it met it in its merge and deadlocked anew: 4-6 deadlocks over these syncs, up to
    // three in one (a fourth failed the sync). The counter is the server's, flushed by each closed sink's sessions as they end.
    const sessions = "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'lakeswap'";
    await expect.poll(async () => (await ws.db<{ n: number }>(sessions))[0]!.n).toBe(0);
    expect(await deadlocks()).toBeLessThanOrEqual(syncs - 1);
  });

  it("a partition's transaction that PostgreSQL aborts as a deadlock runs again, and lands whole", async () => {
    const ws = await workspace();
    const name = (await ws.db<{ name: string }>("SELECT current_database() AS name"))[0]!.name;
    // The sink's sessions check for a deadlock soon, the test's own late: the sink's transaction is the one aborted.
    await ws.db(`ALTER DATABASE "${name}" SET deadlock_timeout = '50ms'`);
    await ws.sink.prepare(ws.layout);
    await ws.sink.write(ws.layout, await ws.run("2026-11-01", [[1, 10]], "1"));
    await ws.sink.write(ws.layout, await ws.run("2026-11-02", [[11, 20]], "1"));
    const other = new pg.Client({ connectionString: ws.url });
    await other.connect();
    try {
      await other.query("SET deadlock_timeout = '10s'; BEGIN; SELECT id FROM orders WHERE id = 15 FOR UPDATE");
      // Day 1 loses key 10 (marked: its row locked) and takes key 15 from day 2, whose row the other transaction holds.
      const writing = ws.sink.write(ws.layout, await ws.run("2026-11-01", [[1, 9], [15, 15]], "2"));
      const waiting = "SELECT 1 FROM pg_stat_activity WHERE application_name = 'lakeswap' AND datname = current_database() AND wait_event IN ('transactionid', 'tuple')";
      while ((await other.query(waiting)).rows.length === 0);
      // The other transaction now wants key 10: a cycle. PostgreSQL aborts the sink's transaction, which frees key 10.
      expect((await other.query("UPDATE orders SET amount = 7 WHERE id = 10")).rowCount).toBe(1);
      await other.query("COMMIT");
      expect(await writing).toEqual({ rows: 10 });
    } finally {
      await other.end();
    }
    const rows = await ws.db<{ id: string; day: string; amount: string; marked: boolean }>(
      "SELECT id::text, day, amount::text, _lakeswap_deleted_at IS NOT NULL AS marked FROM orders WHERE id IN (9, 10, 15) ORDER BY orders.id",
    );
    expect(rows.map((r) => `${r.id} ${r.day} ${r.amount} ${r.marked}`)).toEqual(["9 2026-11-01 2.00 false", "10 2026-11-01 7.00 true", "15 2026-11-01 2.00 false"]);
    expect(await ws.db("SELECT partition, run_id FROM lakeswap_state ORDER BY partition")).toEqual([
      { partition: "day=2026-11-01", run_id: "run-3" },
      { partition: "day=2026-11-02", run_id: "run-2" },
    ]);
  });
});
