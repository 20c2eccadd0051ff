import { mkdirSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { loadPipelineConfig } from "../../src/config/pipeline-config.js";
import type { Lake } from "../../src/lake/lake.js";
import { Pipeline, type SyncReport } from "../../src/pipeline/pipeline.js";
import { openEmbeddedLake } from "../../src/open/open-lake.js";
import { openSink } from "../../src/sinks/open-sink.js";
import type { SinkOpener } from "../../src/sinks/sink.js";
import { BACKEND_FACTORIES, tempDir } from "../support/lake-fixture.js";
import { orders, toCsv, type OrderRow } from "../support/pipeline-fixture.js";
import { postgresAvailable } from "../support/postgres.js";
import { usePostgres } from "../support/shared-services.js";
import { partitionStates } from "../../src/lake/operations/partition-states.js";
import { rollbackSync } from "../../src/lake/operations/rollback.js";
import { listSyncs } from "../../src/lake/operations/syncs.js";

const STAGE_SQL = "SELECT order_id, customer_id, amount, order_ts FROM orders_raw WHERE day = {{ day }} AND status = 'completed'\n";
const MONTHLY_SQL = "SELECT day AS order_day, count(*) AS orders, sum(amount) AS revenue FROM orders_stage GROUP BY day\n";

/** Raw orders by day; stage by day sent with partition_replace; monthly analytics sent with upsert by order_day. */
function yaml(url = "${DATABASE_URL}"): string {
  return `datasets:
  orders:
    source: {format: csv, path: deliveries/*.csv}
    columns:
      order_id: {type: BIGINT, nullable: false}
      customer_id: BIGINT
      amount: DECIMAL(10,2)
      status: VARCHAR
      order_ts: TIMESTAMP
      updated_at: TIMESTAMP
    partition:
      day: strftime(order_ts, '%Y-%m-%d')
    layers:
      - name: stage
        sql: sql/stage.sql
        columns: {order_id: BIGINT, customer_id: BIGINT, amount: "DECIMAL(10,2)", order_ts: TIMESTAMP}
        sinks:
          postgres: {url: "${url}", table: lake.orders_by_day, mode: partition_replace}
      - name: analytics
        table: orders_monthly
        sql: sql/monthly.sql
        columns: {order_day: VARCHAR, orders: BIGINT, revenue: "DECIMAL(18,2)"}
        inputs:
          map: {month: "substr(day, 1, 7)"}
        sinks:
          postgres: {url: "${url}", table: analytics.orders_monthly, mode: upsert, primary_key: [order_day]}
`;
}

const postgres = usePostgres("sink");

/** A workspace with its own database, lake and config. */
async function workspace(options: { url?: (databaseUrl: string) => string } = {}) {
  const { name: databaseName, url: databaseUrl, query } = await postgres.database();
  process.env.DATABASE_URL = databaseUrl;
  const { dir, cleanup } = tempDir("lakeswap-sink-");
  postgres.onCleanup(cleanup);
  mkdirSync(path.join(dir, "sql"));
  mkdirSync(path.join(dir, "deliveries"));
  writeFileSync(path.join(dir, "sql", "stage.sql"), STAGE_SQL);
  writeFileSync(path.join(dir, "sql", "monthly.sql"), MONTHLY_SQL);
  const configFile = path.join(dir, "lakeswap.yaml");
  writeFileSync(configFile, yaml(options.url ? options.url(databaseUrl) : undefined));
  const lake = await openEmbeddedLake(path.join(dir, "lake"), { graceMs: 0, leaseWaitMs: 0 });
  postgres.onCleanup(() => lake.close());
  let counter = 0;
  const db = <Row extends Record<string, unknown>>(sql: string, values?: unknown[]): Promise<Row[]> => query<Row>(sql, values);
  return {
    lake,
    db,
    dir,
    databaseName,
    databaseUrl,
    deliver(rows: readonly OrderRow[]): string {
      const file = path.join(dir, "deliveries", `delivery-${counter++}.csv`);
      writeFileSync(file, toCsv(rows));
      return file;
    },
    sync(file: string, lakeToUse: Lake = lake, opener: SinkOpener = openSink): Promise<SyncReport> {
      return new Pipeline(lakeToUse, loadPipelineConfig(configFile), { inputs: [file], openSink: opener }).sync();
    },
  };
}

/** `table partition action reason` of a sync's sink writes, sorted. */
function sinkLines(report: SyncReport, actions: readonly string[] = ["sent", "failed"]): string[] {
  return report.sinks
    .filter((s) => actions.includes(s.action))
    .map((s) => `${s.table} ${s.partition} ${s.action} ${s.reason}`)
    .sort();
}

/** Orders of days 1..3, with day 2's amounts changed by `bump` cents. */
function changedDay2(bump: number): OrderRow[] {
  return orders(3).map((row) => (row.ts.startsWith("2026-11-02") ? { ...row, amount: (Number(row.amount) + bump / 100).toFixed(2) } : row));
}

describe.skipIf(!postgresAvailable())("PostgreSQL sink", () => {
  it("sends every partition once, in both modes; a rerun sends nothing", async () => {
    const ws = await workspace();
    const first = await ws.sync(ws.deliver(orders(3)));
    expect(sinkLines(first)).toEqual([
      "analytics.orders_monthly month=2026-11 sent new",
      "lake.orders_by_day day=2026-11-01 sent new",
      "lake.orders_by_day day=2026-11-02 sent new",
      "lake.orders_by_day day=2026-11-03 sent new",
    ]);
    // Rows in PostgreSQL are the lake's rows, partition key included.
    const lakeRows = (await ws.lake.query("SELECT day, count(*) AS n, sum(amount)::VARCHAR AS total FROM orders_stage GROUP BY day ORDER BY day")).rows;
    const pgRows = await ws.db("SELECT day, count(*)::int AS n, sum(amount)::text AS total FROM lake.orders_by_day GROUP BY day ORDER BY day");
    expect(pgRows.map((r) => [r.day, r.n, r.total])).toEqual(lakeRows.map((r) => [r[0], Number(r[1]), r[2]]));
    expect(pgRows.map((r) => r.n)).toEqual([8, 8, 8]);
    const monthly = await ws.db<{ order_day: string; orders: string; month: string }>("SELECT order_day, orders::text, month FROM analytics.orders_monthly ORDER BY order_day");
    expect(monthly.map((r) => `${r.order_day} ${r.orders} ${r.month}`)).toEqual(["2026-11-01 8 2026-11", "2026-11-02 8 2026-11", "2026-11-03 8 2026-11"]);
    // The created tables: types mapped from the layer's columns, the upsert key declared, updated_at added.
    const columns = await ws.db<{ name: string; type: string }>(
      "SELECT attname AS name, format_type(atttypid, atttypmod) AS type FROM pg_attribute WHERE attrelid = 'analytics.orders_monthly'::regclass AND attnum > 0 ORDER BY attnum",
    );
    expect(columns.map((c) => `${c.name} ${c.type}`)).toEqual(["order_day text", "orders bigint", "revenue numeric(18,2)", "month text", "_lakeswap_updated_at timestamp with time zone", "_lakeswap_deleted_at timestamp with time zone"]);
    const key = await ws.db("SELECT 1 FROM pg_constraint WHERE conrelid = 'analytics.orders_monthly'::regclass AND contype = 'p'");
    expect(key).toHaveLength(1);
    // The state rows: one per partition, with the lake's signature and run.
    const state = await ws.db<{ partition: string; run_id: string; signature: string }>("SELECT partition, run_id, signature FROM lake.lakeswap_state ORDER BY partition");
    const stages = await partitionStates(ws.lake, "orders_stage");
    expect(state.map((s) => [s.partition, s.run_id, s.signature])).toEqual([...stages.values()].map((s) => [s.partition, s.runId, s.signature]).sort());

    const again = await ws.sync(ws.deliver(orders(3)));
    expect(sinkLines(again)).toEqual([]);
    expect(again.sinks.filter((s) => s.action === "skipped")).toHaveLength(4);
    expect(again.sinks.every((s) => s.action !== "skipped" || s.reason === "unchanged")).toBe(true);
  });

  it("sends an S3 lake's runs too (the AWS backend: s3rver, the Glue and Athena emulators)", async () => {
    const ws = await workspace();
    const backend = await BACKEND_FACTORIES.aws!();
    const lake = await backend.open();
    postgres.onCleanup(() => backend.cleanup());
    postgres.onCleanup(() => lake.close());
    const first = await ws.sync(ws.deliver(orders(3)), lake);
    expect(sinkLines(first)).toEqual([
      "analytics.orders_monthly month=2026-11 sent new",
      "lake.orders_by_day day=2026-11-01 sent new",
      "lake.orders_by_day day=2026-11-02 sent new",
      "lake.orders_by_day day=2026-11-03 sent new",
    ]);
    const pgRows = await ws.db<{ day: string; n: number }>("SELECT day, count(*)::int AS n FROM lake.orders_by_day GROUP BY day ORDER BY day");
    expect(pgRows.map((r) => [r.day, r.n])).toEqual([["2026-11-01", 8], ["2026-11-02", 8], ["2026-11-03", 8]]);
    const again = await ws.sync(ws.deliver(changedDay2(7)), lake);
    expect(sinkLines(again)).toEqual(["analytics.orders_monthly month=2026-11 sent changed", "lake.orders_by_day day=2026-11-02 sent changed"]);
  }, 120_000);

  it("sends a changed partition alone; upsert updates the changed rows and stamps _lakeswap_updated_at", async () => {
    const ws = await workspace();
    await ws.sync(ws.deliver(orders(3)));
    const before = await ws.db<{ order_day: string; updated_at: Date; revenue: string }>("SELECT order_day, _lakeswap_updated_at AS updated_at, revenue::text FROM analytics.orders_monthly ORDER BY order_day");
    await new Promise((resolve) => setTimeout(resolve, 20));
    const report = await ws.sync(ws.deliver(changedDay2(1)));
    expect(sinkLines(report)).toEqual(["analytics.orders_monthly month=2026-11 sent changed", "lake.orders_by_day day=2026-11-02 sent changed"]);
    const after = await ws.db<{ order_day: string; updated_at: Date; revenue: string }>("SELECT order_day, _lakeswap_updated_at AS updated_at, revenue::text FROM analytics.orders_monthly ORDER BY order_day");
    // Only the row whose values changed gets a new updated_at.
    expect(after[0]!.updated_at.getTime()).toBe(before[0]!.updated_at.getTime());
    expect(after[1]!.updated_at.getTime()).toBeGreaterThan(before[1]!.updated_at.getTime());
    expect(Number(after[1]!.revenue) - Number(before[1]!.revenue)).toBeCloseTo(0.08, 5);
    const day2 = await ws.db<{ total: string; n: number }>("SELECT sum(amount)::text AS total, count(*)::int AS n FROM lake.orders_by_day WHERE day = '2026-11-02'");
    expect(day2[0]!.n).toBe(8);
    const lakeTotal = (await ws.lake.query("SELECT sum(amount)::VARCHAR FROM orders_stage WHERE day = '2026-11-02'")).rows[0]![0];
    expect(day2[0]!.total).toBe(lakeTotal);
  });

  it("sends a table without partition keys (write: replace) whole with partition_replace; a new delivery replaces all its rows", async () => {
    const ws = await workspace();
    writeFileSync(
      path.join(ws.dir, "lakeswap.yaml"),
      `datasets:
  countries:
    source: {format: csv, path: deliveries/*.csv}
    write: replace
    columns: {code: VARCHAR, population: BIGINT}
    sinks:
      postgres: {url: "\${DATABASE_URL}", table: ref.countries, mode: partition_replace}
`,
    );
    const deliver = (rows: string[], n: number) => {
      const file = path.join(ws.dir, "deliveries", `countries-${n}.csv`);
      writeFileSync(file, `code,population\n${rows.join("\n")}\n`);
      return file;
    };
    expect(sinkLines(await ws.sync(deliver(["fr,68", "de,84"], 1)))).toEqual(["ref.countries  sent new"]);
    expect(sinkLines(await ws.sync(deliver(["fr,69", "it,59"], 2)))).toEqual(["ref.countries  sent changed"]);
    const rows = await ws.db<{ code: string; population: string }>("SELECT code, population::text FROM ref.countries ORDER BY code");
    expect(rows.map((r) => `${r.code} ${r.population}`)).toEqual(["fr 69", "it 59"]);
  });

  it("sends a partition the lake rolled back again on the next sync", async () => {
    const ws = await workspace();
    const original = ws.deliver(orders(3));
    await ws.sync(original);
    const originalTotal = (await ws.db<{ t: string }>("SELECT sum(amount)::text AS t FROM lake.orders_by_day WHERE day = '2026-11-02'"))[0]!.t;
    await ws.sync(ws.deliver(changedDay2(5)));
    expect((await ws.db<{ t: string }>("SELECT sum(amount)::text AS t FROM lake.orders_by_day WHERE day = '2026-11-02'"))[0]!.t).not.toBe(originalTotal);
    await rollbackSync(ws.lake, (await listSyncs(ws.lake))[0]!.syncId);
    // The lake holds the original rows again; the sink still holds the changed ones until the next sync sends them.
    const report = await ws.sync(original);
    expect(sinkLines(report)).toEqual(["analytics.orders_monthly month=2026-11 sent changed", "lake.orders_by_day day=2026-11-02 sent changed"]);
    expect((await ws.db<{ t: string }>("SELECT sum(amount)::text AS t FROM lake.orders_by_day WHERE day = '2026-11-02'"))[0]!.t).toBe(originalTotal);
  });

  it("partition_replace removes a partition the lake no longer has (a rolled-back creation); upsert marks the keys it lost", async () => {
    const ws = await workspace();
    await ws.sync(ws.deliver(orders(2)));
    const added = await ws.sync(ws.deliver(orders(3)));
    expect(sinkLines(added)).toContain("lake.orders_by_day day=2026-11-03 sent new");
    await rollbackSync(ws.lake, added.syncId);
    const report = await ws.sync(ws.deliver(orders(2)));
    expect(sinkLines(report, ["sent", "failed", "removed"])).toEqual([
      "analytics.orders_monthly month=2026-11 sent changed",
      "lake.orders_by_day day=2026-11-03 removed gone from the lake",
    ]);
    expect(report.sinks.find((s) => s.action === "removed")!.rows).toBe(8);
    expect((await ws.db<{ day: string }>("SELECT DISTINCT day FROM lake.orders_by_day ORDER BY day")).map((r) => r.day)).toEqual(["2026-11-01", "2026-11-02"]);
    expect((await ws.db<{ partition: string }>("SELECT partition FROM lake.lakeswap_state WHERE table_name = 'orders_by_day' ORDER BY partition")).map((r) => r.partition)).toEqual([
      "day=2026-11-01",
      "day=2026-11-02",
    ]);
    // Upsert (soft delete, the default): the day the lake no longer has keeps its row, marked deleted.
    const monthly = await ws.db<{ order_day: string; deleted: boolean }>("SELECT order_day, _lakeswap_deleted_at IS NOT NULL AS deleted FROM analytics.orders_monthly ORDER BY order_day");
    expect(monthly.map((r) => `${r.order_day} ${r.deleted}`)).toEqual(["2026-11-01 false", "2026-11-02 false", "2026-11-03 true"]);
    // And a rerun does nothing more.
    expect(sinkLines(await ws.sync(ws.deliver(orders(2))), ["sent", "failed", "removed"])).toEqual([]);
  });

  it("refuses an existing table whose column types differ, naming the column and both types; the lake's swaps stand; a missing column is added", async () => {
    const ws = await workspace();
    await ws.db("CREATE SCHEMA lake");
    await ws.db("CREATE TABLE lake.orders_by_day (order_id bigint, customer_id bigint, amount text, order_ts timestamp, day text)");
    const report = await ws.sync(ws.deliver(orders(2)));
    const failed = report.sinks.filter((s) => s.table === "lake.orders_by_day");
    expect(failed.map((s) => `${s.partition} ${s.action}`)).toEqual(["* failed"]);
    expect(failed[0]!.error).toMatch(/column 'amount' is text in the existing table, but lake table orders_stage sends numeric\(10,2\)/);
    expect(report.partitions.filter((p) => p.layer === "stage").every((p) => p.action === "build")).toBe(true);
    // The other sink went on.
    expect(sinkLines(report).filter((l) => l.startsWith("analytics"))).toEqual(["analytics.orders_monthly month=2026-11 sent new"]);

    // A column the table lacks (and that nothing was sent with) is added, as after a schema change in place (docs/postgres-sink.md).
    await ws.db("ALTER TABLE lake.orders_by_day DROP COLUMN amount");
    const missing = await ws.sync(ws.deliver(orders(2)));
    expect(missing.sinks.find((s) => s.table === "lake.orders_by_day")!.error).toBeUndefined();
    const columns = await ws.db<{ data_type: string; precision: number; scale: number }>(
      "SELECT data_type, numeric_precision AS precision, numeric_scale AS scale FROM information_schema.columns WHERE table_schema = 'lake' AND table_name = 'orders_by_day' AND column_name = 'amount'",
    );
    expect(columns.map((c) => `${c.data_type}(${c.precision},${c.scale})`)).toEqual(["numeric(10,2)"]);
  });

  it("refuses to upsert into an existing table keyed on other columns, with a fix that works as given", async () => {
    const ws = await workspace();
    await ws.db("CREATE SCHEMA analytics");
    // Keyed on another column: a second primary key cannot be added, so "ADD PRIMARY KEY" is no fix.
    await ws.db("CREATE TABLE analytics.orders_monthly (id bigserial PRIMARY KEY, order_day text, orders bigint, revenue numeric(18,2), month text, _lakeswap_updated_at timestamptz NOT NULL DEFAULT now())");
    const report = await ws.sync(ws.deliver(orders(2)));
    const failed = report.sinks.find((s) => s.table === "analytics.orders_monthly")!;
    expect(failed.action).toBe("failed");
    const fix = /add one: (CREATE UNIQUE INDEX ON [^(]+\([^)]*\))/.exec(failed.error ?? "")?.[1];
    expect(fix, failed.error).toBe('CREATE UNIQUE INDEX ON analytics.orders_monthly (order_day)');
    await ws.db(fix!);
    const again = await ws.sync(ws.deliver(orders(2)));
    expect(sinkLines(again).filter((l) => l.startsWith("analytics")), JSON.stringify(again.sinks)).toEqual(["analytics.orders_monthly month=2026-11 sent new"]);
    expect(await ws.db("SELECT count(*)::int AS n FROM analytics.orders_monthly")).toEqual([{ n: 2 }]);
  });

  it("fails a partition the database refuses with its message, leaves its previous rows intact, and sends it on the next sync", async () => {
    const ws = await workspace();
    await ws.sync(ws.deliver(orders(3)));
    const before = await ws.db("SELECT * FROM lake.orders_by_day WHERE day = '2026-11-02' ORDER BY order_id");
    const stateBefore = await ws.db("SELECT * FROM lake.lakeswap_state WHERE partition = 'day=2026-11-02'");
    await ws.db("ALTER TABLE lake.orders_by_day ADD CONSTRAINT small_amounts CHECK (amount < 1000)");
    const report = await ws.sync(ws.deliver(changedDay2(100_000)));
    const failed = report.sinks.find((s) => s.table === "lake.orders_by_day" && s.partition === "day=2026-11-02")!;
    expect(failed.action).toBe("failed");
    expect(failed.error).toMatch(/violates check constraint "small_amounts"/);
    // The line PostgreSQL refused; the COPY went into the partition's new leaf table (orders_by_day_2026_11_02_<random>).
    expect(failed.error).toMatch(/COPY orders_by_day_2026_11_02_[0-9a-f]{8}, line 1: /);
    // Nothing of the failed write is visible: the new leaf rolled back with the COPY, the old one stays, and the state row too.
    expect(await ws.db("SELECT * FROM lake.orders_by_day WHERE day = '2026-11-02' ORDER BY order_id")).toEqual(before);
    expect(await ws.db("SELECT * FROM lake.lakeswap_state WHERE partition = 'day=2026-11-02'")).toEqual(stateBefore);

    await ws.db("ALTER TABLE lake.orders_by_day DROP CONSTRAINT small_amounts");
    const retry = await ws.sync(ws.deliver(changedDay2(100_000)));
    expect(sinkLines(retry)).toEqual(["lake.orders_by_day day=2026-11-02 sent changed"]);
  });

  it("names the next partition to each write so the sink reads it ahead; a refused partition leaves no file in TMPDIR and nothing applied", async () => {
    const ws = await workspace();
    await ws.db("CREATE SCHEMA lake");
    await ws.db("CREATE TABLE lake.orders_by_day (order_id bigint, customer_id bigint, amount numeric(10,2), order_ts timestamp, day text CHECK (day <> '2026-11-02'))");
    const tmp = path.join(ws.dir, "tmp");
    mkdirSync(tmp);
    const previousTmpdir = process.env.TMPDIR;
    process.env.TMPDIR = tmp;
    const upcoming: string[] = [];
    const recording: SinkOpener = async (spec) => {
      const sink = await openSink(spec);
      return {
        description: sink.description,
        prepare: (layout) => sink.prepare(layout),
        write: (layout, part) => {
          upcoming.push(`${spec.table} ${part.path} -> ${(part.upcoming ?? []).map((next) => next.path).join(",")}`);
          return sink.write(layout, part);
        },
        remove: (layout, partition, statePath) => sink.remove(layout, partition, statePath),
        close: () => sink.close(),
      };
    };
    let report: SyncReport;
    try {
      report = await ws.sync(ws.deliver(orders(3)), ws.lake, recording);
    } finally {
      if (previousTmpdir === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = previousTmpdir;
    }
    expect(upcoming.filter((line) => line.startsWith("orders_by_day"))).toEqual([
      "orders_by_day day=2026-11-01 -> day=2026-11-02",
      "orders_by_day day=2026-11-02 -> day=2026-11-03",
      "orders_by_day day=2026-11-03 -> ",
    ]);
    expect(sinkLines(report)).toContain("lake.orders_by_day day=2026-11-02 failed new");
    expect(report.sinks.find((s) => s.partition === "day=2026-11-02")!.error).toMatch(/violates check constraint/);
    expect(readdirSync(tmp).filter((entry) => entry.startsWith("lakeswap-sink-"))).toEqual([]);
    expect((await ws.db<{ day: string }>("SELECT DISTINCT day FROM lake.orders_by_day ORDER BY day")).map((r) => r.day)).toEqual(["2026-11-01", "2026-11-03"]);
    expect((await ws.db<{ partition: string }>("SELECT partition FROM lake.lakeswap_state WHERE table_name = 'orders_by_day' ORDER BY partition")).map((r) => r.partition)).toEqual([
      "day=2026-11-01",
      "day=2026-11-03",
    ]);
  });

  // Both row orders: when the first row of the key equals what PostgreSQL holds, ON CONFLICT alone lets the second win silently.
  it.each(["ASC", "DESC"])("upsert fails a partition that holds one key twice (rows in %s order), naming the key, and applies nothing of it", async (order) => {
    const ws = await workspace();
    await ws.sync(ws.deliver(orders(2)));
    const before = await ws.db("SELECT order_day, orders, revenue, _lakeswap_updated_at FROM analytics.orders_monthly ORDER BY order_day");
    // A transform that gives every row of the month the same order_day: the key repeats within the partition.
    writeFileSync(path.join(ws.dir, "sql", "monthly.sql"), `SELECT '2026-11-01' AS order_day, count(*) AS orders, sum(amount) AS revenue FROM orders_stage GROUP BY day ORDER BY day ${order}\n`);
    const report = await ws.sync(ws.deliver(orders(2)));
    const failed = report.sinks.find((s) => s.table === "analytics.orders_monthly")!;
    expect(failed.action).toBe("failed");
    expect(failed.error).toMatch(/holds the key \(order_day = "2026-11-01"\) 2 times.*one row per key/);
    expect(await ws.db("SELECT order_day, orders, revenue, _lakeswap_updated_at FROM analytics.orders_monthly ORDER BY order_day")).toEqual(before);
  });

  it("fails every partition when the database cannot be reached, naming the target without its password", async () => {
    const ws = await workspace({ url: () => "postgres://app:s3cret-pw@127.0.0.1:1/nowhere" });
    const report = await ws.sync(ws.deliver(orders(2)));
    // One failure per target, said once (issue 25 item 16: a connection error was repeated once per partition).
    expect(sinkLines(report)).toEqual(["analytics.orders_monthly * failed target failed", "lake.orders_by_day * failed target failed"]);
    for (const s of report.sinks) {
      expect(s.error).toMatch(/cannot connect: .*ECONNREFUSED/);
      expect(s.error).toContain("postgres://app:***@127.0.0.1:1/nowhere");
      expect(JSON.stringify(s)).not.toContain("s3cret-pw");
    }
    expect(report.sinks.find((s) => s.table === "lake.orders_by_day")!.error).toMatch(/\(none of the table's 2 partition\(s\) was checked or sent\)$/);
    expect(report.partitions.every((p) => p.action === "build")).toBe(true);
  });

  // Issue 25 item 16: a connection error must not be repeated once per partition.
  it("a connection lost during a sync fails the partition being written and the rest once, not one by one", async () => {
    const ws = await workspace();
    let writes = 0;
    const dropping: SinkOpener = async (spec) => {
      const sink = await openSink(spec);
      return {
        description: sink.description,
        prepare: (layout) => sink.prepare(layout),
        write: async (layout, part) => {
          writes += 1;
          if (spec.table === "orders_by_day" && writes === 2) {
            // The server ends the sink's session (as a restart or a network cut would), and the sink hears of it.
            // (Its session is the only one named lakeswap in the test's database: sinks are opened one at a time.
            // The cluster is the run's, shared with other tests and the other worker, whose sessions stay.)
            const sessions = "FROM pg_stat_activity WHERE application_name = 'lakeswap' AND datname = $1";
            await postgres.admin(`SELECT pg_terminate_backend(pid) ${sessions}`, [ws.databaseName]);
            while ((await postgres.admin(`SELECT 1 ${sessions}`, [ws.databaseName])).length > 0);
          }
          return sink.write(layout, part);
        },
        remove: (layout, partition, statePath) => sink.remove(layout, partition, statePath),
        close: () => sink.close(),
      };
    };
    const report = await ws.sync(ws.deliver(orders(4)), ws.lake, dropping);
    const stage = report.sinks.filter((s) => s.table === "lake.orders_by_day");
    expect(stage.map((s) => `${s.partition} ${s.action} ${s.reason}`)).toEqual([
      "day=2026-11-01 sent new",
      "day=2026-11-02 failed new",
      "* failed target failed",
    ]);
    expect(stage[1]!.error).toMatch(/connection lost: /);
    expect(stage[2]!.error).toMatch(/connection lost: .*\(the table's 2 other partition\(s\) to send were not sent\)$/);
    // The next sync sends what was not sent.
    const rerun = await ws.sync(ws.deliver(orders(4)));
    expect(sinkLines(rerun)).toEqual(["lake.orders_by_day day=2026-11-02 sent new", "lake.orders_by_day day=2026-11-03 sent new", "lake.orders_by_day day=2026-11-04 sent new"]);
  });

  // Two partitions in their transactions at once: connections lost under both stop the sends cleanly.
  it("connections lost while two partitions are in their transactions fail those two and the rest once; no session is left open", async () => {
    const ws = await workspace();
    const pg = await import("pg");
    const holder = new pg.default.Client({ connectionString: ws.databaseUrl });
    await holder.connect();
    const sessions = "FROM pg_stat_activity WHERE application_name = 'lakeswap' AND datname = $1";
    let report: SyncReport;
    try {
      // Days 1 and 2 of lake.orders_by_day held: both their transactions begin, and wait for their partition's turn.
      const turn = (day: string): string => `pg_advisory_lock(hashtext('lakeswap:lake.orders_by_day'), hashtext('day=${day}'))`;
      await holder.query(`SELECT ${turn("2026-11-01")}, ${turn("2026-11-02")}`);
      const syncing = ws.sync(ws.deliver(orders(5)));
      while ((await postgres.admin(`SELECT 1 ${sessions} AND wait_event = 'advisory'`, [ws.databaseName])).length < 2);
      // The server ends the sink's sessions (as a restart or a network cut would) under both transactions.
      await postgres.admin(`SELECT pg_terminate_backend(pid) ${sessions}`, [ws.databaseName]);
      await holder.query("SELECT pg_advisory_unlock_all()");
      report = await syncing;
    } finally {
      await holder.end();
    }
    const stage = report.sinks.filter((s) => s.table === "lake.orders_by_day");
    expect(stage.slice(0, 2).map((s) => `${s.partition} ${s.action}`)).toEqual(["day=2026-11-01 failed", "day=2026-11-02 failed"]);
    expect(stage.at(-1)).toMatchObject({ partition: "*", action: "failed", reason: "target failed" });
    // No write started after the lost connection was known; the partitions left are said once.
    const tried = stage.slice(0, -1);
    expect(tried.every((s) => s.action === "failed")).toBe(true);
    expect(stage.at(-1)!.error).toMatch(new RegExp(`connection lost: .*\\(the table's ${5 - tried.length} other partition\\(s\\) to send were not sent\\)$`));
    expect(await postgres.admin(`SELECT 1 ${sessions}`, [ws.databaseName])).toEqual([]);
    // The next sync sends every partition, whole.
    const rerun = await ws.sync(ws.deliver(orders(5)));
    expect(sinkLines(rerun).filter((line) => line.startsWith("lake.orders_by_day"))).toEqual(
      ["01", "02", "03", "04", "05"].map((day) => `lake.orders_by_day day=2026-11-${day} sent new`),
    );
  });

  it("a reader polling during partition_replace never sees the partition empty", async () => {
    const ws = await workspace();
    await ws.sync(ws.deliver(orders(3, 400)));
    const pg = await import("pg");
    const reader = new pg.default.Client({ connectionString: ws.databaseUrl });
    await reader.connect();
    const counts: number[] = [];
    let stop = false;
    const polling = (async () => {
      while (!stop) {
        const result = await reader.query<{ n: number }>("SELECT count(*)::int AS n FROM lake.orders_by_day WHERE day = '2026-11-02'");
        counts.push(result.rows[0]!.n);
      }
    })();
    try {
      for (let bump = 1; bump <= 4; bump += 1) {
        const report = await ws.sync(ws.deliver(orders(3, 400).map((row) => (row.ts.startsWith("2026-11-02") ? { ...row, amount: (Number(row.amount) + bump).toFixed(2) } : row))));
        expect(sinkLines(report)).toContain("lake.orders_by_day day=2026-11-02 sent changed");
      }
    } finally {
      stop = true;
      await polling;
      await reader.end();
    }
    expect(counts.length).toBeGreaterThan(10);
    expect(new Set(counts)).toEqual(new Set([320]));
  });
  it("follows a schema changed in place (#31): the widened column is altered in PostgreSQL, only the partitions rebuilt are sent again", async () => {
    const ws = await workspace();
    await ws.sync(ws.deliver(orders(3)));
    const configFile = path.join(ws.dir, "lakeswap.yaml");
    writeFileSync(configFile, readFileSync(configFile, "utf8").replace("amount: DECIMAL(10,2)", "amount: DECIMAL(12,2)").replace('amount: "DECIMAL(10,2)"', 'amount: "DECIMAL(12,2)"'));
    // Day 2's first order now needs the wider type; days 1 and 3 are as before.
    const rows = orders(3).map((row, i) => (row.ts.startsWith("2026-11-02") && i % 10 === 0 ? { ...row, amount: "1234567890.12" } : row));
    const report = await ws.sync(ws.deliver(rows));
    expect(report.schemaChanges?.map((c) => `${c.table}: ${c.changes.join("; ")}`)).toEqual([
      "orders_raw: column amount widened from DECIMAL(10,2) to DECIMAL(12,2)",
      "orders_stage: column amount widened from DECIMAL(10,2) to DECIMAL(12,2)",
    ]);
    expect(sinkLines(report).filter((l) => l.startsWith("lake."))).toEqual(["lake.orders_by_day day=2026-11-02 sent changed"]);
    const types = await ws.db<{ t: string }>("SELECT format_type(atttypid, atttypmod) AS t FROM pg_attribute WHERE attrelid = 'lake.orders_by_day'::regclass AND attname = 'amount'");
    expect(types.map((r) => r.t)).toEqual(["numeric(12,2)"]);
    const inLake = await ws.lake.query("SELECT CAST(sum(amount) AS VARCHAR), count(*) FROM orders_stage");
    const inPostgres = await ws.db<{ total: string; n: string }>("SELECT sum(amount)::text AS total, count(*)::text AS n FROM lake.orders_by_day");
    expect([inPostgres[0]?.total, inPostgres[0]?.n]).toEqual(inLake.rows[0]?.map(String));
    expect((await ws.db<{ m: string }>("SELECT max(amount)::text AS m FROM lake.orders_by_day"))[0]?.m).toBe("1234567890.12");

    // rollback --sync of the widening sync x the sink: the lake's column is narrow again, the target's stays wide, and
    // the next sync sends into it (it failed the target every time before: "the sink widens a column, never narrows one").
    const undone = await rollbackSync(ws.lake, report.syncId);
    expect(undone.schemas?.map((s) => `${s.table} ${s.action}`)).toEqual(["orders_stage restored", "orders_raw restored"]);
    writeFileSync(configFile, readFileSync(configFile, "utf8").replace("amount: DECIMAL(12,2)", "amount: DECIMAL(10,2)").replace('amount: "DECIMAL(12,2)"', 'amount: "DECIMAL(10,2)"'));
    const next = await ws.sync(ws.deliver(orders(3).map((row) => (row.ts.startsWith("2026-11-03") ? { ...row, amount: "7.77" } : row))));
    expect(sinkLines(next).filter((l) => l.startsWith("lake."))).toEqual(["lake.orders_by_day day=2026-11-02 sent changed", "lake.orders_by_day day=2026-11-03 sent changed"]);
    expect((await ws.db<{ t: string }>("SELECT format_type(atttypid, atttypmod) AS t FROM pg_attribute WHERE attrelid = 'lake.orders_by_day'::regclass AND attname = 'amount'")).map((r) => r.t)).toEqual(["numeric(12,2)"]);
    const lakeNow = await ws.lake.query("SELECT CAST(sum(amount) AS VARCHAR), count(*) FROM orders_stage");
    const postgresNow = await ws.db<{ total: string; n: string }>("SELECT sum(amount)::text AS total, count(*)::text AS n FROM lake.orders_by_day");
    expect([postgresNow[0]?.total, postgresNow[0]?.n]).toEqual(lakeNow.rows[0]?.map(String));
  });
});

describe.skipIf(!postgresAvailable())("PostgreSQL sink × a schema rebuilt by swap", () => {
  it("a layer rebuilt with a column dropped and one renamed (--rebuild-schema): every partition is sent again under the new columns, PostgreSQL equals the lake", async () => {
    const ws = await workspace();
    await ws.sync(ws.deliver(orders(3)));
    const configFile = path.join(ws.dir, "lakeswap.yaml");
    // The stage drops customer_id and calls amount total; the monthly layer reads it under its new name.
    writeFileSync(
      configFile,
      readFileSync(configFile, "utf8").replace(
        'columns: {order_id: BIGINT, customer_id: BIGINT, amount: "DECIMAL(10,2)", order_ts: TIMESTAMP}',
        'columns: {order_id: BIGINT, total: {type: "DECIMAL(10,2)", renamed_from: amount}, order_ts: TIMESTAMP}',
      ),
    );
    writeFileSync(path.join(ws.dir, "sql", "stage.sql"), "SELECT order_id, amount AS total, order_ts FROM orders_raw WHERE day = {{ day }} AND status = 'completed'\n");
    writeFileSync(path.join(ws.dir, "sql", "monthly.sql"), "SELECT day AS order_day, count(*) AS orders, sum(total) AS revenue FROM orders_stage GROUP BY day\n");
    await expect(ws.sync(ws.deliver(orders(3)))).rejects.toThrow(/orders_stage' cannot change in place: column customer_id \(BIGINT\) is no longer declared.*; column amount renamed to total/);
    const report = await new Pipeline(ws.lake, loadPipelineConfig(configFile), { inputs: [ws.deliver(orders(3))], openSink, rebuildSchema: true }).sync();
    expect(report.schemaChanges?.map((c) => [c.table, c.rebuilt])).toEqual([["orders_stage", 3]]);
    expect(sinkLines(report).filter((l) => l.startsWith("lake."))).toEqual(["01", "02", "03"].map((day) => `lake.orders_by_day day=2026-11-${day} sent changed`));
    const inLake = await ws.lake.query("SELECT day, count(*), CAST(sum(total) AS VARCHAR) FROM orders_stage GROUP BY day ORDER BY day");
    const inPostgres = await ws.db<{ day: string; n: string; total: string }>("SELECT day, count(*)::text AS n, sum(total)::text AS total FROM lake.orders_by_day GROUP BY day ORDER BY day");
    expect(inPostgres.map((r) => [r.day, r.n, r.total])).toEqual(inLake.rows.map((row) => row.map(String)));
    // The target's columns the layer no longer has are kept, as a user's table's are: NULL in the rows sent since.
    expect((await ws.db<{ n: string }>("SELECT count(*)::text AS n FROM lake.orders_by_day WHERE amount IS NOT NULL OR customer_id IS NOT NULL"))[0]?.n).toBe("0");
    // The monthly layer's revenue, sent by upsert, is the same as before the rename.
    const monthly = await ws.db<{ revenue: string }>("SELECT sum(revenue)::text AS revenue FROM analytics.orders_monthly");
    expect(monthly[0]?.revenue).toBe(String(inLake.rows.reduce((sum, row) => sum + Number(row[2]), 0).toFixed(2)));
  });
});
