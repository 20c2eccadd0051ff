import pg from "pg";
import { describe, expect, it } from "vitest";
import { PostgresSink } from "../../src/sinks/postgres/postgres-sink.js";
import type { SinkLayout, SinkPartitionWrite, SinkSpec } from "../../src/sinks/sink.js";
import { tempDir } from "../support/lake-fixture.js";
import { postgresAvailable } from "../support/postgres.js";
import { usePostgres } from "../support/shared-services.js";
import { sinkRuns, TEST_SOURCE } from "../support/sink-runs.js";

/*
 * partition_replace on the partitioned layout (issue 27 item 5): a target the sink creates is partitioned by LIST
 * on its partition columns, and a partition is replaced by swapping its leaf table whole. A target made with the
 * index layout (by `partitioning: index`, or by a lakeswap before this layout) keeps it and keeps working.
 */

const postgres = usePostgres("leaf");

const KEYS_DAY = ["day"] as const;
const KEYS_MONTH = ["year", "month"] as const;

function layoutOf(keys: readonly string[]): SinkLayout {
  return {
    lakeTable: "orders",
    source: TEST_SOURCE,
    columns: [{ name: "id", type: "BIGINT", nullable: false }, { name: "amount", type: "DECIMAL(10,2)", nullable: true }, ...keys.map((key) => ({ name: key, type: "VARCHAR", nullable: false }))],
    partitionKeys: keys,
    mode: "partition_replace",
    primaryKey: [],
  };
}

/** A database of its own, sinks on `public.orders`, and Parquet runs of ids `from..to` written on demand. */
async function workspace(keys: readonly string[] = KEYS_DAY) {
  const { url, query } = await postgres.database();
  const { dir, cleanup } = tempDir("lakeswap-leaf-");
  postgres.onCleanup(cleanup);
  const layout = layoutOf(keys);
  const open = (partitioning?: SinkSpec["partitioning"]): PostgresSink => {
    const sink = new PostgresSink({ kind: "postgres", url, maskedUrl: url, schema: "public", table: "orders", mode: "partition_replace", primaryKey: [], hardDelete: false, ...(partitioning ? { partitioning } : {}) });
    postgres.onCleanup(() => sink.close());
    return sink;
  };
  const write = await sinkRuns(dir, (cleanup) => postgres.onCleanup(cleanup));
  const db = <R extends pg.QueryResultRow>(sql: string): Promise<R[]> => query<R>(sql);
  return {
    url,
    layout,
    db,
    open,
    /** One partition's run of ids from..to (amount = id / 100); no files for an emptied partition (from > to). */
    run(values: readonly string[], from: number, to: number): Promise<SinkPartitionWrite> {
      const select = from <= to ? `SELECT i::BIGINT AS id, (i / 100)::DECIMAL(10,2) AS amount FROM range(${from}, ${to + 1}) t(i)` : undefined;
      return write({ keys: [...keys], values: [...values] }, select);
    },
    /** `<partition values> <count> <min id>-<max id>` per partition, as a reader of the parent sees them. */
    async partitions(): Promise<string[]> {
      const rows = await query<{ line: string }>(`SELECT concat_ws(' ', ${keys.join(", ")}, count(*), min(id) || '-' || max(id)) AS line FROM orders GROUP BY ${keys.join(", ")} ORDER BY 1`);
      return rows.map((row) => row.line);
    },
    /** The plain tables of the schema (leaves included), by name. */
    async tables(): Promise<string[]> {
      return (await query<{ name: string }>("SELECT relname AS name FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'p') AND relname <> 'lakeswap_state' ORDER BY relname")).map((r) => r.name);
    },
  };
}

describe.skipIf(!postgresAvailable())("PostgreSQL sink: partition_replace on the partitioned layout", () => {
  it("creates the target partitioned by its partition column, swaps a partition's leaf whole, and leaves no other table", async () => {
    const ws = await workspace();
    const sink = ws.open();
    expect((await sink.prepare(ws.layout)).recorded).toEqual(new Map());
    expect(await ws.db("SELECT relkind FROM pg_class WHERE oid = 'public.orders'::regclass")).toEqual([{ relkind: "p" }]);
    // No index to maintain: each partition is its own table, found by partition pruning.
    expect(await ws.db("SELECT 1 FROM pg_index WHERE indrelid = 'public.orders'::regclass")).toEqual([]);
    expect(await sink.write(ws.layout, await ws.run(["2026-11-01"], 1, 300))).toEqual({ rows: 300 });
    expect(await sink.write(ws.layout, await ws.run(["2026-11-02"], 301, 400))).toEqual({ rows: 100 });
    const before = await ws.tables();
    expect(before).toEqual([expect.stringMatching(/^orders$/), expect.stringMatching(/^orders_2026_11_01_[0-9a-f]{8}$/), expect.stringMatching(/^orders_2026_11_02_[0-9a-f]{8}$/)]);

    expect(await sink.write(ws.layout, await ws.run(["2026-11-01"], 1001, 1050))).toEqual({ rows: 50 });
    expect(await ws.partitions()).toEqual(["2026-11-01 50 1001-1050", "2026-11-02 100 301-400"]);
    const after = await ws.tables();
    // Day 1's leaf is a new table, its old one dropped; day 2's untouched.
    expect(after).toHaveLength(3);
    expect(after[1]).not.toBe(before[1]);
    expect(after[2]).toBe(before[2]);
    // The swap's CHECK constraint went with the attach: the leaf holds only what the parent declares.
    expect(await ws.db(`SELECT conname FROM pg_constraint WHERE conrelid = 'public.${after[1]}'::regclass AND contype = 'c'`)).toEqual([]);
  });

  it("a partition the lake emptied becomes an empty leaf; a partition the lake no longer has loses its leaf; state follows each leaf", async () => {
    const ws = await workspace();
    const sink = ws.open();
    await sink.prepare(ws.layout);
    await sink.write(ws.layout, await ws.run(["2026-11-01"], 1, 10));
    await sink.write(ws.layout, await ws.run(["2026-11-02"], 11, 20));
    await sink.write(ws.layout, await ws.run(["2026-11-03"], 21, 30));
    expect(await sink.write(ws.layout, await ws.run(["2026-11-02"], 1, 0))).toEqual({ rows: 0 });
    expect(await sink.remove(ws.layout, { keys: ["day"], values: ["2026-11-03"] }, "day=2026-11-03")).toEqual({ rows: 10 });
    expect(await ws.partitions()).toEqual(["2026-11-01 10 1-10"]);
    expect(await ws.tables()).toHaveLength(3);
    // A rerun's prepare finds both recorded partitions (the emptied one too).
    expect([...(await ws.open().prepare(ws.layout)).recorded.keys()].sort()).toEqual(["day=2026-11-01", "day=2026-11-02"]);
    // A state row vouches for its own leaf only: a leaf dropped by hand, or the table truncated, sends those partitions again.
    const [leaf] = await ws.db<{ name: string }>("SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE pg_get_expr(c.relpartbound, c.oid) = 'FOR VALUES IN (''2026-11-02'')'");
    await ws.db(`DROP TABLE public.${leaf!.name}`);
    expect([...(await ws.open().prepare(ws.layout)).recorded.keys()]).toEqual(["day=2026-11-01"]);
    await ws.db("TRUNCATE public.orders");
    expect((await ws.open().prepare(ws.layout)).recorded).toEqual(new Map());
  });

  it("partitions by several columns level by level (year, then month); a replace swaps the month's leaf", async () => {
    const ws = await workspace(KEYS_MONTH);
    const sink = ws.open();
    await sink.prepare(ws.layout);
    await sink.write(ws.layout, await ws.run(["2026", "11"], 1, 10));
    await sink.write(ws.layout, await ws.run(["2026", "12"], 11, 20));
    await sink.write(ws.layout, await ws.run(["2027", "01"], 21, 30));
    await sink.write(ws.layout, await ws.run(["2026", "11"], 101, 105));
    expect(await ws.partitions()).toEqual(["2026 11 5 101-105", "2026 12 10 11-20", "2027 01 10 21-30"]);
    const tree = await ws.db<{ level: number; leaf: boolean }>("SELECT level, isleaf AS leaf FROM pg_partition_tree('public.orders') ORDER BY level, isleaf");
    expect(tree.map((t) => `${t.level} ${t.leaf}`)).toEqual(["0 false", "1 false", "1 false", "2 true", "2 true", "2 true"]);
    expect(await ws.tables()).toHaveLength(6);
    expect(await sink.remove(ws.layout, { keys: ["year", "month"], values: ["2026", "12"] }, "year=2026/month=12")).toEqual({ rows: 10 });
    expect(await ws.partitions()).toEqual(["2026 11 5 101-105", "2027 01 10 21-30"]);
  });

  // Two connections per sink, and another writer of the same target: a transaction locks the parent only at its swap.
  it("partitions sent at once, by one sink's two connections and by a second writer, never deadlock; a new level is made once; each partition whole", async () => {
    const ws = await workspace(KEYS_MONTH);
    const sink = ws.open();
    const other = ws.open();
    await sink.prepare(ws.layout);
    await other.prepare(ws.layout);
    await sink.write(ws.layout, await ws.run(["2026", "11"], 1, 5));
    // Year 2027's level is missing: the four writes below all need it, and it must be made once.
    const runs = await Promise.all([
      ws.run(["2026", "11"], 11, 2000),
      ws.run(["2027", "01"], 2001, 4000),
      ws.run(["2027", "02"], 4001, 6000),
      ws.run(["2027", "03"], 6001, 8000),
      ws.run(["2026", "11"], 8001, 8500),
    ]);
    const written = await Promise.all([
      sink.write(ws.layout, runs[0]!),
      sink.write(ws.layout, runs[1]!),
      other.write(ws.layout, runs[2]!),
      other.write(ws.layout, runs[3]!),
      other.write(ws.layout, runs[4]!),
    ]);
    expect(written.map((w) => w.rows)).toEqual([1990, 2000, 2000, 2000, 500]);
    // November was written by both writers, one after the other: whole, as the one that committed last sent it.
    const partitions = await ws.partitions();
    expect([["2026 11 1990 11-2000"], ["2026 11 500 8001-8500"]]).toContainEqual(partitions.slice(0, 1));
    expect(partitions.slice(1)).toEqual(["2027 01 2000 2001-4000", "2027 02 2000 4001-6000", "2027 03 2000 6001-8000"]);
    const tree = await ws.db<{ level: number; leaf: boolean }>("SELECT level, isleaf AS leaf FROM pg_partition_tree('public.orders') ORDER BY level, isleaf");
    expect(tree.map((t) => `${t.level} ${t.leaf}`)).toEqual(["0 false", "1 false", "1 false", "2 true", "2 true", "2 true", "2 true"]);
    const state = await ws.db<{ p: string }>("SELECT partition AS p FROM lakeswap_state ORDER BY partition");
    expect(state.map((r) => r.p)).toEqual(["year=2026/month=11", "year=2027/month=01", "year=2027/month=02", "year=2027/month=03"]);
  });

  it("a partition's transaction locks the parent only at its swap: made like a template, its leaf is filled while another holds the parent", async () => {
    const ws = await workspace();
    const sink = ws.open();
    await sink.prepare(ws.layout);
    await sink.write(ws.layout, await ws.run(["2026-11-01"], 1, 10));
    const holder = new pg.Client({ connectionString: ws.url });
    await holder.connect();
    try {
      // Another partition's swap, as it holds the parent (its leaves are another matter: each its own partition's).
      await holder.query("BEGIN; LOCK TABLE ONLY public.orders IN ACCESS EXCLUSIVE MODE");
      const writing = sink.write(ws.layout, await ws.run(["2026-11-01"], 101, 200));
      const waiting = "SELECT query FROM pg_stat_activity WHERE application_name = 'lakeswap' AND datname = current_database() AND wait_event = 'relation'";
      let held: { query: string }[] = [];
      // Polled outside the holder's transaction: inside it, PostgreSQL keeps the first read of pg_stat_activity (the
      // query texts) for the whole transaction, while the wait events are read live.
      while (held.length === 0) held = await ws.db<{ query: string }>(waiting);
      // Waiting at the swap's LOCK, its leaf made and its rows COPYed: not at the leaf's CREATE TABLE (... LIKE the parent).
      expect(held.map((row) => row.query)).toEqual([expect.stringMatching(/LOCK TABLE ONLY "public"\."orders" IN ACCESS EXCLUSIVE MODE/)]);
      await holder.query("COMMIT");
      expect(await writing).toEqual({ rows: 100 });
    } finally {
      await holder.end();
    }
    expect(await ws.partitions()).toEqual(["2026-11-01 100 101-200"]);
  });

  it("the index layout: partitions sent at once (DELETE + COPY on two connections) each end whole", async () => {
    const ws = await workspace();
    const sink = ws.open("index");
    await sink.prepare(ws.layout);
    await Promise.all([sink.write(ws.layout, await ws.run(["2026-11-01"], 1, 10)), sink.write(ws.layout, await ws.run(["2026-11-02"], 11, 20))]);
    const runs = await Promise.all([ws.run(["2026-11-01"], 101, 3000), ws.run(["2026-11-02"], 3001, 6000), ws.run(["2026-11-03"], 6001, 6100)]);
    expect(await Promise.all(runs.map((run) => sink.write(ws.layout, run)))).toEqual([{ rows: 2900 }, { rows: 3000 }, { rows: 100 }]);
    expect(await ws.partitions()).toEqual(["2026-11-01 2900 101-3000", "2026-11-02 3000 3001-6000", "2026-11-03 100 6001-6100"]);
  });

  it("a target with the index layout (partitioning: index, or made before this layout) keeps it: a replace deletes and COPYs, nothing lost", async () => {
    const ws = await workspace();
    const first = ws.open("index");
    await first.prepare(ws.layout);
    await first.write(ws.layout, await ws.run(["2026-11-01"], 1, 10));
    await first.write(ws.layout, await ws.run(["2026-11-02"], 11, 20));
    await first.close();
    const sink = ws.open();
    expect([...(await sink.prepare(ws.layout)).recorded.keys()].sort()).toEqual(["day=2026-11-01", "day=2026-11-02"]);
    await sink.write(ws.layout, await ws.run(["2026-11-01"], 51, 55));
    await sink.write(ws.layout, await ws.run(["2026-11-02"], 1, 0));
    expect(await ws.partitions()).toEqual(["2026-11-01 5 51-55"]);
    expect(await ws.db("SELECT relkind FROM pg_class WHERE oid = 'public.orders'::regclass")).toEqual([{ relkind: "r" }]);
    expect(await ws.tables()).toEqual(["orders"]);
    expect(await ws.db<{ name: string }>("SELECT indexrelid::regclass::text AS name FROM pg_index WHERE indrelid = 'public.orders'::regclass")).toEqual([{ name: "orders_lakeswap_partition" }]);
  });

  it("a partitioned target made by hand with a DEFAULT partition keeps DELETE + COPY: its rows stay where PostgreSQL routes them", async () => {
    const ws = await workspace();
    await ws.db("CREATE TABLE public.orders (id bigint NOT NULL, amount numeric(10,2), day text NOT NULL) PARTITION BY LIST (day)");
    await ws.db("CREATE TABLE public.orders_rest PARTITION OF public.orders DEFAULT");
    const sink = ws.open();
    await sink.prepare(ws.layout);
    await sink.write(ws.layout, await ws.run(["2026-11-01"], 1, 10));
    await sink.write(ws.layout, await ws.run(["2026-11-01"], 21, 25));
    expect(await ws.partitions()).toEqual(["2026-11-01 5 21-25"]);
    expect(await ws.tables()).toEqual(["orders", "orders_rest"]);
  });

  it("a reader polling the table during replaces sees every partition whole, never missing, never doubled", async () => {
    const ws = await workspace();
    const sink = ws.open();
    await sink.prepare(ws.layout);
    for (const [day, from] of [["2026-11-01", 1], ["2026-11-02", 20_001], ["2026-11-03", 40_001]] as const) await sink.write(ws.layout, await ws.run([day], from, from + 19_999));
    const reader = new pg.Client({ connectionString: ws.url });
    await reader.connect();
    const seen = new Set<string>();
    let reads = 0;
    let stop = false;
    const polling = (async () => {
      while (!stop) {
        const result = await reader.query<{ line: string }>("SELECT string_agg(day || ' ' || n, ', ' ORDER BY day) AS line FROM (SELECT day, count(*) AS n FROM orders GROUP BY day) d");
        seen.add(result.rows[0]!.line);
        reads += 1;
      }
    })();
    try {
      for (let round = 0; round < 4; round += 1) {
        for (const [day, from] of [["2026-11-01", 1], ["2026-11-02", 20_001], ["2026-11-03", 40_001]] as const) await sink.write(ws.layout, await ws.run([day], from, from + 19_999));
      }
    } finally {
      stop = true;
      await polling;
      await reader.end();
    }
    expect(reads).toBeGreaterThan(10);
    expect([...seen]).toEqual(["2026-11-01 20000, 2026-11-02 20000, 2026-11-03 20000"]);
  });

  it("a transaction reading the table holds the swap until it ends, and keeps seeing the old rows; other readers are not queued behind the waiting swap", async () => {
    const ws = await workspace();
    const sink = ws.open();
    await sink.prepare(ws.layout);
    await sink.write(ws.layout, await ws.run(["2026-11-01"], 1, 10));
    const long = new pg.Client({ connectionString: ws.url });
    const other = new pg.Client({ connectionString: ws.url });
    await Promise.all([long.connect(), other.connect()]);
    try {
      await long.query("BEGIN ISOLATION LEVEL REPEATABLE READ");
      expect((await long.query("SELECT count(*)::int AS n FROM orders")).rows).toEqual([{ n: 10 }]);
      let done = false;
      const write = ws.run(["2026-11-01"], 101, 150).then((run) => sink.write(ws.layout, run)).finally(() => (done = true));
      await new Promise((resolve) => setTimeout(resolve, 1500));
      expect(done).toBe(false);
      // The swap waits in short attempts: a reader arriving meanwhile gets its rows at once, the old ones.
      const started = Date.now();
      expect((await other.query("SELECT count(*)::int AS n FROM orders")).rows).toEqual([{ n: 10 }]);
      expect(Date.now() - started).toBeLessThan(1000);
      expect((await long.query("SELECT count(*)::int AS n FROM orders")).rows).toEqual([{ n: 10 }]);
      await long.query("COMMIT");
      expect(await write).toEqual({ rows: 50 });
      expect((await other.query("SELECT count(*)::int AS n, min(id)::int AS first FROM orders")).rows).toEqual([{ n: 50, first: 101 }]);
    } finally {
      await Promise.all([long.end(), other.end()]);
    }
  });

  it("a snapshot taken before a swap that reads the table only after it sees the new leaf's rows (COPY FREEZE), not an empty partition", async () => {
    const ws = await workspace();
    const sink = ws.open();
    await sink.prepare(ws.layout);
    await sink.write(ws.layout, await ws.run(["2026-11-01"], 1, 10));
    const reader = new pg.Client({ connectionString: ws.url });
    await reader.connect();
    try {
      await reader.query("BEGIN ISOLATION LEVEL REPEATABLE READ");
      // The snapshot is taken by the transaction's first query, on another table: no lock on the target delays the swap.
      await reader.query("SELECT count(*) FROM public.lakeswap_state");
      expect(await sink.write(ws.layout, await ws.run(["2026-11-01"], 101, 150))).toEqual({ rows: 50 });
      expect((await reader.query("SELECT count(*)::int AS n, min(id)::int AS first FROM orders")).rows).toEqual([{ n: 50, first: 101 }]);
      await reader.query("COMMIT");
    } finally {
      await reader.end();
    }
  });
});
