import { mkdirSync, readdirSync } from "node:fs";
import path from "node:path";
import type pg from "pg";
import { describe, expect, it } from "vitest";
import { PostgresSink } from "../../src/sinks/postgres/postgres-sink.js";
import type { SinkLayout, SinkMode, SinkPartitionWrite } from "../../src/sinks/sink.js";
import { tempDir } from "../support/lake-fixture.js";
import { postgresAvailable } from "../support/postgres.js";
import { usePostgres } from "../support/shared-services.js";
import { sinkRuns, TEST_SOURCE } from "../support/sink-runs.js";

/*
 * The PostgreSQL sink's own steps, below the pipeline: a partition's CSV is exported while the previous
 * partition's transaction runs (read ahead), and an upsert of a partition the table never held is COPYed
 * straight into the target unless one of its keys is already there. Neither may leave files behind or apply
 * part of a partition, whatever fails.
 */

const postgres = usePostgres("ahead");
const originalTmpdir = process.env.TMPDIR;

interface Row {
  readonly id: number;
  readonly amount: string;
}

function layoutOf(mode: SinkMode): SinkLayout {
  return {
    lakeTable: "orders",
    source: TEST_SOURCE,
    columns: [
      { name: "id", type: "BIGINT", nullable: false },
      { name: "amount", type: "DECIMAL(10,2)", nullable: true },
      { name: "day", type: "VARCHAR", nullable: false },
    ],
    partitionKeys: ["day"],
    mode,
    primaryKey: mode === "upsert" ? ["id"] : [],
  };
}

/** A database of its own, a sink on `public.orders`, Parquet runs written on demand, and TMPDIR pointed at an empty folder. */
async function workspace(mode: SinkMode) {
  const { url, query } = await postgres.database();
  // Cleanups run last added first: TMPDIR comes back after every other cleanup of the test.
  postgres.onCleanup(() => {
    if (originalTmpdir === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = originalTmpdir;
  });
  const { dir, cleanup } = tempDir("lakeswap-ahead-");
  postgres.onCleanup(cleanup);
  const tmp = path.join(dir, "tmp");
  mkdirSync(tmp);
  mkdirSync(path.join(dir, "runs"));
  // The sink's temporary folders go here: the test sees every one it leaves.
  process.env.TMPDIR = tmp;
  const layout = layoutOf(mode);
  const open = () => new PostgresSink({ kind: "postgres", url, maskedUrl: url, schema: "public", table: "orders", mode, primaryKey: layout.primaryKey, hardDelete: false });
  const sink = open();
  postgres.onCleanup(() => sink.close());
  const write = await sinkRuns(path.join(dir, "runs"), (cleanup) => postgres.onCleanup(cleanup));
  const db = <R extends pg.QueryResultRow>(sql: string): Promise<R[]> => query<R>(sql);
  return {
    sink,
    layout,
    db,
    open,
    /** Sink folders left in TMPDIR. */
    leftovers: (): string[] => readdirSync(tmp).filter((entry) => entry.startsWith("lakeswap-sink-")),
    /** One partition's run: a Parquet file of these rows (or a file that does not exist, for `missing`). */
    run(day: string, rows: readonly Row[], options: { missing?: boolean } = {}): Promise<SinkPartitionWrite> {
      const values = rows.map((row) => `(${row.id}, ${row.amount})`).join(", ");
      const select = options.missing ? undefined : `SELECT id::BIGINT AS id, amount::DECIMAL(10,2) AS amount FROM (VALUES ${values}) v(id, amount)`;
      return write({ keys: ["day"], values: [day] }, select, { missingFile: true });
    },
  };
}

function rows(from: number, to: number, amount = "1.00"): Row[] {
  return Array.from({ length: to - from + 1 }, (_, i) => ({ id: from + i, amount }));
}

describe.skipIf(!postgresAvailable())("PostgreSQL sink: read ahead and straight COPY", () => {
  it("exports the next partition during a write; a write the database refuses applies nothing, the next one goes on, and no file stays", async () => {
    const ws = await workspace("partition_replace");
    await ws.sink.prepare(ws.layout);
    await ws.db("ALTER TABLE orders ADD CONSTRAINT small_amounts CHECK (amount < 1000)");
    const day1 = await ws.run("2026-11-01", rows(1, 50));
    const day2 = await ws.run("2026-11-02", [...rows(51, 99), { id: 100, amount: "5000.00" }]);
    const day3 = await ws.run("2026-11-03", rows(101, 150));

    expect(await ws.sink.write(ws.layout, { ...day1, upcoming: [day2] })).toEqual({ rows: 50 });
    // Day 2 was read ahead while day 1 was written: its CSV waits in TMPDIR for its own write.
    expect(ws.leftovers()).toHaveLength(1);
    await expect(ws.sink.write(ws.layout, { ...day2, upcoming: [day3] })).rejects.toThrow(/violates check constraint "small_amounts"/);
    expect(ws.leftovers()).toHaveLength(1);
    expect(await ws.sink.write(ws.layout, day3)).toEqual({ rows: 50 });
    await ws.sink.close();

    expect(ws.leftovers()).toEqual([]);
    const days = await ws.db<{ day: string; n: number }>("SELECT day, count(*)::int AS n FROM orders GROUP BY day ORDER BY day");
    expect(days.map((d) => `${d.day} ${d.n}`)).toEqual(["2026-11-01 50", "2026-11-03 50"]);
    const state = await ws.db<{ partition: string }>("SELECT partition FROM lakeswap_state ORDER BY partition");
    expect(state.map((s) => s.partition)).toEqual(["day=2026-11-01", "day=2026-11-03"]);
  });

  it("a sync that stops while a partition is read ahead: close removes its files and nothing of it is applied", async () => {
    const ws = await workspace("upsert");
    await ws.sink.prepare(ws.layout);
    const day1 = await ws.run("2026-11-01", rows(1, 20));
    const day2 = await ws.run("2026-11-02", rows(21, 40));
    await ws.sink.write(ws.layout, { ...day1, upcoming: [day2] });
    // The sync ends here (its lease lost, an error between partitions): day 2's write never comes.
    await ws.sink.close();

    expect(ws.leftovers()).toEqual([]);
    expect(await ws.db("SELECT id FROM orders WHERE day = '2026-11-02'")).toEqual([]);
    expect((await ws.db<{ partition: string }>("SELECT partition FROM lakeswap_state")).map((s) => s.partition)).toEqual(["day=2026-11-01"]);
  });

  it("a partition read ahead that cannot be read fails its own write only, with the reason, and leaves no file", async () => {
    const ws = await workspace("upsert");
    await ws.sink.prepare(ws.layout);
    const day1 = await ws.run("2026-11-01", rows(1, 20));
    const day2 = await ws.run("2026-11-02", rows(21, 40), { missing: true });
    const day3 = await ws.run("2026-11-03", rows(41, 60));
    await ws.sink.write(ws.layout, { ...day1, upcoming: [day2] });
    await expect(ws.sink.write(ws.layout, { ...day2, upcoming: [day3] })).rejects.toThrow(/run-2\.parquet/);
    expect(await ws.sink.write(ws.layout, day3)).toEqual({ rows: 20 });
    await ws.sink.close();

    expect(ws.leftovers()).toEqual([]);
    const days = await ws.db<{ day: string; n: number }>("SELECT day, count(*)::int AS n FROM orders GROUP BY day ORDER BY day");
    expect(days.map((d) => `${d.day} ${d.n}`)).toEqual(["2026-11-01 20", "2026-11-03 20"]);
  });

  it("upsert of a partition the table never held goes straight in by COPY; one whose keys the table holds already is merged, updating only changed rows", async () => {
    const ws = await workspace("upsert");
    await ws.sink.prepare(ws.layout);
    // Which statement wrote a partition's rows (those the sink wrote, not older ones): the straight COPY runs
    // under a savepoint (a subtransaction of its own), the merge in the transaction that writes the state row.
    const byMerge = async (day: string): Promise<boolean[]> =>
      (
        await ws.db<{ merged: boolean }>(
          "SELECT DISTINCT o.xmin::text = s.xmin::text AS merged FROM orders o JOIN lakeswap_state s ON s.partition = 'day=' || o.day " +
            `WHERE o.day = '${day}' AND o._lakeswap_updated_at > '2021-01-01'`,
        )
      ).map((row) => row.merged);
    expect(await ws.sink.write(ws.layout, await ws.run("2026-11-01", rows(1, 30)))).toEqual({ rows: 30 });
    expect(await byMerge("2026-11-01")).toEqual([false]);

    // Rows of day 2 the table got another way (not from this sink): one the delivery repeats unchanged, one it changes.
    await ws.db("INSERT INTO orders (id, amount, day, _lakeswap_updated_at) VALUES (31, 1.00, '2026-11-02', '2020-01-01'), (32, 5.00, '2026-11-02', '2020-01-01')");
    const day2 = [...rows(33, 60), { id: 31, amount: "1.00" }, { id: 32, amount: "9.99" }, ...rows(61, 70)];
    expect(await ws.sink.write(ws.layout, await ws.run("2026-11-02", day2))).toEqual({ rows: 40 });
    expect(await byMerge("2026-11-02")).toEqual([true]);

    const after = await ws.db<{ id: string; amount: string; day: string; updated_at: Date }>("SELECT id, amount::text, day, _lakeswap_updated_at AS updated_at FROM orders ORDER BY id");
    expect(after).toHaveLength(70);
    const byId = new Map(after.map((row) => [Number(row.id), row]));
    expect(byId.get(31)).toMatchObject({ amount: "1.00", updated_at: new Date("2020-01-01T00:00:00Z") });
    expect(byId.get(32)!.amount).toBe("9.99");
    expect(byId.get(32)!.updated_at.getTime()).toBeGreaterThan(new Date("2020-01-01T00:00:00Z").getTime());
    expect(after.filter((row) => row.day === "2026-11-02")).toHaveLength(40);
  });

  it("upsert of a new partition that repeats a key fails naming the key before anything is sent", async () => {
    const ws = await workspace("upsert");
    await ws.sink.prepare(ws.layout);
    await expect(ws.sink.write(ws.layout, await ws.run("2026-11-01", [...rows(1, 10), { id: 5, amount: "2.00" }]))).rejects.toThrow(
      /holds the key \(id = "?5"?\) 2 times.*nothing of this partition was sent/,
    );
    await ws.sink.close();
    expect(await ws.db("SELECT id FROM orders")).toEqual([]);
    expect(await ws.db("SELECT partition FROM lakeswap_state")).toEqual([]);
    expect(ws.leftovers()).toEqual([]);
  });

  it("upsert into a table with a user trigger merges even a new partition, so its UPDATE statement trigger fires as before", async () => {
    const ws = await workspace("upsert");
    await ws.db(
      "CREATE TABLE orders (id bigint PRIMARY KEY, amount numeric(10,2), day text NOT NULL, updated_at timestamptz NOT NULL DEFAULT now()); " +
        "CREATE TABLE fired (at timestamptz); " +
        "CREATE FUNCTION note_update() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO fired VALUES (now()); RETURN NULL; END $$; " +
        "CREATE TRIGGER noted AFTER UPDATE ON orders FOR EACH STATEMENT EXECUTE FUNCTION note_update()",
    );
    await ws.sink.prepare(ws.layout);
    expect(await ws.sink.write(ws.layout, await ws.run("2026-11-01", rows(1, 10)))).toEqual({ rows: 10 });
    expect(await ws.db("SELECT at FROM fired")).toHaveLength(1);
    expect(await ws.db("SELECT id FROM orders")).toHaveLength(10);
  });
});
