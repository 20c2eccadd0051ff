import { promises as fs } from "node:fs";
import path from "node:path";
import { performance } from "node:perf_hooks";
import pg from "pg";
import { loadPipelineConfig, type PipelineConfig } from "../src/config/pipeline-config.js";
import type { Lake } from "../src/lake/lake.js";
import { Pipeline, type SyncReport } from "../src/pipeline/pipeline.js";
import { quoteLiteral } from "../src/model/sql.js";
import { openEmbeddedLake } from "../src/open/open-lake.js";
import { openSink } from "../src/sinks/open-sink.js";
import type { SinkOpener } from "../src/sinks/sink.js";
import { POSTGRES_BIN, postgresAvailable, startPostgres, type PostgresServer } from "../test/support/postgres.js";
import { BenchDuck } from "./duck.js";

/*
 * Issue 11, item 4 (first half): an upsert of 1,000,000 orders into
 * PostgreSQL, 10% of them updates of keys the table already holds, 90% new
 * keys, two ways on the same throwaway cluster:
 *
 * - lakeswap: a Pipeline.sync of the delivery (a Parquet file) whose raw layer
 *   declares `sinks: {postgres: {mode: upsert, primary_key: [order_id]}}`; per
 *   day partition the sink exports the run's Parquet files as CSV, COPYs them
 *   into a temporary table and runs one INSERT ... SELECT ... ON CONFLICT, in
 *   one transaction. Timed: the sink phase (from opening the sink to closing
 *   it); the rest of the same sync (landing, signing, writing and swapping the
 *   raw partitions) is reported beside it.
 * - executemany, the seed's method (shared/seeds/003, "Upsert into Postgres
 *   with ON CONFLICT"): one parameterized INSERT ... ON CONFLICT DO UPDATE per
 *   row, in one transaction, from rows held in memory, with `pg` (a named,
 *   prepared statement, as psycopg prepares a repeated one). `pg` waits for
 *   each statement's reply; psycopg >= 3.1's executemany pipelines them
 *   (libpq >= 14), which this loop does not reproduce: the ratio is against
 *   the loop, and the report says so.
 *
 * The target is seeded once by a lakeswap sync of an earlier delivery (the
 * 100,000 orders the updates hit, in an older state, plus 900,000 October
 * orders nobody touches), then copied (CREATE DATABASE ... TEMPLATE), so both
 * methods start from the same table; both must end with the same rows.
 */

/** Rows of the timed delivery. */
const PG_UPSERT_ROWS = 1_000_000;
/** Of them, updates of keys the seeded table holds (every 10th order id). */
const PG_UPSERT_UPDATES = 100_000;
/** Issue 11's target: executemany time / lakeswap sink time, at least. */
export const PG_UPSERT_TARGET = 20;
/** The target's measure, as the verdict prints it. */
export const PG_UPSERT_MEASURE = "PG upsert 1M rows · lakeswap sink vs executemany";

/** October orders in the seed that the delivery does not touch (a realistic table, not only the rows hit). */
const UNTOUCHED_ROWS = 900_000;
/** The delivery's first order id: October's are 1..UNTOUCHED_ROWS. */
const FIRST_NEW_ID = UNTOUCHED_ROWS + 1;
/** Rows of one untimed set-based statement, when executemany stops at its budget and the rest must still be applied. */
const REST_CHUNK = 100_000;

const TABLE = "bench.orders";
const COLUMNS = ["order_id", "customer_id", "amount", "status", "order_ts", "day"] as const;

/** The seed's statement, with this table's columns: every value replaced, updated_at stamped, for every row. */
const EXECUTEMANY_SQL =
  `INSERT INTO ${TABLE} (${COLUMNS.join(", ")}, _lakeswap_updated_at) VALUES ($1, $2, $3, $4, $5, $6, now()) ` +
  "ON CONFLICT (order_id) DO UPDATE SET customer_id = EXCLUDED.customer_id, amount = EXCLUDED.amount, " +
  "status = EXCLUDED.status, order_ts = EXCLUDED.order_ts, day = EXCLUDED.day, _lakeswap_updated_at = now()";

/** One table's contents, reduced to what two tables are compared by (updated_at left out: it records when each method wrote). */
interface TableCheck {
  readonly rows: number;
  readonly amountSum: string;
  /** Rows still in the seed's `pending` state: 0 once every update is applied. */
  readonly pending: number;
  /** Rows whose updated_at is from the timed step: the updates plus the inserts. */
  readonly touched: number;
  /** md5 over the md5 of every row's values, in order_id order. */
  readonly hash: string;
}

/** What the lakeswap sync did and how long each part took. */
interface LakeswapUpsert {
  /** The sink phase: from opening the sink to closing it (connect, checks, every partition's CSV export, COPY, upsert, commit). */
  readonly sinkMs: number;
  /** The whole Pipeline.sync. */
  readonly syncMs: number;
  /** syncMs − sinkMs: landing, signing, writing and swapping the raw partitions. */
  readonly lakeMs: number;
  readonly partitionsSent: number;
  readonly partitionsSkipped: number;
  readonly rowsSent: number;
  /** Sum of the sink's per-partition seconds in the sync report (sink phase without connect and checks). */
  readonly partitionSecondsSum: number;
  readonly rowsPerSecond: number;
}

/** The per-row method: measured on all rows, or on those that fit the budget and extrapolated. */
interface ExecutemanyUpsert {
  readonly measuredRows: number;
  /** The per-row loop over measuredRows, in ms. */
  readonly measuredMs: number;
  readonly commitMs: number;
  /** For all PG_UPSERT_ROWS: measured, or the loop extrapolated linearly plus the commit. */
  readonly ms: number;
  readonly extrapolated: boolean;
  readonly rowsPerSecond: number;
  /** Rows applied untimed by set-based statements after the budget ran out (so the tables can be compared). */
  readonly restRows: number;
  readonly budgetMs: number;
}

/** The benchmark's figures, or why PostgreSQL could not be measured. */
export type PgUpsertFigures =
  | { readonly measured: false; readonly reason: string }
  | {
      readonly measured: true;
      readonly rows: number;
      readonly updates: number;
      readonly inserts: number;
      readonly partitions: number;
      readonly seededRows: number;
      readonly postgres: string;
      readonly lakeswap: LakeswapUpsert;
      readonly executemany: ExecutemanyUpsert;
      /** executemany ms / lakeswap sink ms: the target's measure. */
      readonly ratio: number;
      readonly checks: {
        readonly expected: { readonly rows: number; readonly amountSum: string; readonly touched: number };
        readonly lakeswap: TableCheck;
        readonly executemany: TableCheck;
        /** Both tables hold the same rows, and the rows expected from the seed and the delivery. */
        readonly identical: boolean;
      };
    };

/** Runs the benchmark on a throwaway PostgreSQL cluster; "not measured" when the server binaries are missing or it does not start. */
export async function benchPgUpsert(workDir: string, options: { readonly budgetMs: number }, progress: (message: string) => void): Promise<PgUpsertFigures> {
  if (!postgresAvailable()) {
    const reason = `PostgreSQL 15 server binaries not found (${path.join(POSTGRES_BIN, "initdb")}): install them with \`apt-get install postgresql\`, or set LAKESWAP_POSTGRES_BIN`;
    progress(`sink: not measured: ${reason}`);
    return { measured: false, reason };
  }
  progress("sink: starting a throwaway PostgreSQL cluster (test/support/postgres.ts)");
  let server: PostgresServer;
  try {
    server = await startPostgres();
  } catch (error) {
    const reason = `PostgreSQL did not start: ${error instanceof Error ? error.message : String(error)}`;
    progress(`sink: not measured: ${reason}`);
    return { measured: false, reason };
  }
  // Ctrl-C ends the benchmark with process.exit: the cluster (a daemon of its own) must not outlive it.
  const stopOnExit = (): void => void server.stop().catch(() => undefined);
  process.once("exit", stopOnExit);
  try {
    return await measure(server, path.join(workDir, "sink"), options.budgetMs, progress);
  } finally {
    process.removeListener("exit", stopOnExit);
    await server.stop();
  }
}

async function measure(server: PostgresServer, dir: string, budgetMs: number, progress: (message: string) => void): Promise<PgUpsertFigures> {
  await fs.mkdir(path.join(dir, "deliveries"), { recursive: true });
  const seedFile = path.join(dir, "deliveries", "seed.parquet");
  const deliveryFile = path.join(dir, "deliveries", "orders.parquet");
  const duck = await BenchDuck.open();
  let rows: string[][];
  let expected: { rows: number; amountSum: string };
  try {
    progress(`sink: writing the seed (${count(UNTOUCHED_ROWS + PG_UPSERT_UPDATES)} rows) and the delivery (${count(PG_UPSERT_ROWS)} rows) as Parquet`);
    await writeOrders(duck, seedFile, deliveryFile);
    rows = await readRows(duck, deliveryFile);
    const [total, sum] = (
      await duck.rows(
        `SELECT count(*), sum(amount)::VARCHAR FROM (SELECT order_id, amount FROM read_parquet(${quoteLiteral(deliveryFile)}) UNION ALL ` +
          `SELECT s.order_id, s.amount FROM read_parquet(${quoteLiteral(seedFile)}) s ANTI JOIN read_parquet(${quoteLiteral(deliveryFile)}) d USING (order_id))`,
      )
    )[0] as [bigint, string];
    expected = { rows: Number(total), amountSum: sum };
  } finally {
    duck.close();
  }

  const lakeswapDb = "upsert_lakeswap";
  const executemanyDb = "upsert_executemany";
  await server.query(`CREATE DATABASE ${lakeswapDb}`);
  const urlOf = (database: string): string => server.url.replace(/\/postgres$/, `/${database}`);
  const configFile = path.join(dir, "lakeswap.yaml");
  await fs.writeFile(configFile, pipelineYaml(urlOf(lakeswapDb)));
  const config = loadPipelineConfig(configFile);
  const lake = await openEmbeddedLake(path.join(dir, "lake"));
  try {
    progress("sink: seeding bench.orders with a lakeswap sync of the seed (untimed)");
    const seeded = await new Pipeline(lake, config, { inputs: [seedFile], openSink }).sync();
    expectSinkWrites(seeded, UNTOUCHED_ROWS + PG_UPSERT_UPDATES);
    // The same seeded table for the per-row method: a copy of the whole database, taken before anything is timed.
    await server.query(`CREATE DATABASE ${executemanyDb} TEMPLATE ${lakeswapDb}`);
    for (const database of [lakeswapDb, executemanyDb]) await withClient(urlOf(database), (client) => client.query(`VACUUM ANALYZE ${TABLE}`));
    await server.query("CHECKPOINT");

    progress(`sink: timed · lakeswap sync of the ${count(PG_UPSERT_ROWS)}-row delivery, upsert sink`);
    const lakeswapStart = await serverClock(urlOf(lakeswapDb));
    const lakeswap = await timeLakeswap(lake, config, deliveryFile);
    await server.query("CHECKPOINT");

    progress(`sink: timed · executemany of ${count(rows.length)} rows, one INSERT ... ON CONFLICT per row (budget ${(budgetMs / 1000).toFixed(0)} s)`);
    const executemanyStart = await serverClock(urlOf(executemanyDb));
    const executemany = await withClient(urlOf(executemanyDb), (client) => timeExecutemany(client, rows, budgetMs, progress));

    progress("sink: comparing both tables");
    const lakeswapCheck = await checkTable(urlOf(lakeswapDb), lakeswapStart);
    const executemanyCheck = await checkTable(urlOf(executemanyDb), executemanyStart);
    const wanted = { ...expected, touched: PG_UPSERT_ROWS };
    const matches = (check: TableCheck): boolean =>
      check.rows === wanted.rows && check.amountSum === wanted.amountSum && check.touched === wanted.touched && check.pending === 0;
    const identical = matches(lakeswapCheck) && matches(executemanyCheck) && lakeswapCheck.hash === executemanyCheck.hash;
    const version = (await server.query<{ v: string }>("SELECT current_setting('server_version') AS v"))[0]?.v ?? "unknown";
    return {
      measured: true,
      rows: PG_UPSERT_ROWS,
      updates: PG_UPSERT_UPDATES,
      inserts: PG_UPSERT_ROWS - PG_UPSERT_UPDATES,
      partitions: lakeswap.partitionsSent,
      seededRows: UNTOUCHED_ROWS + PG_UPSERT_UPDATES,
      postgres: version,
      lakeswap,
      executemany,
      ratio: executemany.ms / lakeswap.sinkMs,
      checks: { expected: wanted, lakeswap: lakeswapCheck, executemany: executemanyCheck, identical },
    };
  } finally {
    await lake.close();
  }
}

/**
 * The seed: October orders 1..900,000, settled (never touched again), and every 10th November order in an older
 * state (`pending`, 0.50 more); the delivery: November orders 900,001..1,900,000 settled, by day of order_ts.
 */
async function writeOrders(duck: BenchDuck, seedFile: string, deliveryFile: string): Promise<void> {
  const order = (month: "10" | "11", days: number, state: "old" | "new"): string =>
    [
      "id::BIGINT AS order_id,",
      "(1 + (id * 7919) % 50000)::BIGINT AS customer_id,",
      `CAST(5 + ((id * 104729) % 20000) / 100 ${state === "old" ? "+ 0.5" : ""} AS DECIMAL(10,2)) AS amount,`,
      state === "old" ? "'pending' AS status," : "CASE WHEN (id * 31) % 10 = 0 THEN 'cancelled' ELSE 'completed' END AS status,",
      `TIMESTAMP '2026-${month}-01' + to_days((id % ${days})::INTEGER) + to_seconds((id * 3571) % 86400) AS order_ts`,
    ].join(" ");
  const last = FIRST_NEW_ID + PG_UPSERT_ROWS - 1;
  await duck.run(
    `COPY (SELECT ${order("10", 31, "new")} FROM range(1, ${FIRST_NEW_ID}) r(id) UNION ALL ` +
      `SELECT ${order("11", 30, "old")} FROM range(${FIRST_NEW_ID}, ${last + 1}) r(id) WHERE id % 10 = 0 ORDER BY order_id) ` +
      `TO ${quoteLiteral(seedFile)} (FORMAT parquet)`,
  );
  await duck.run(`COPY (SELECT ${order("11", 30, "new")} FROM range(${FIRST_NEW_ID}, ${last + 1}) r(id) ORDER BY order_id) TO ${quoteLiteral(deliveryFile)} (FORMAT parquet)`);
}

/** The delivery's rows as the per-row method is handed them (the seed's `rows: list[dict]`): in memory, as text, in order_id order. */
async function readRows(duck: BenchDuck, file: string): Promise<string[][]> {
  const rows = await duck.rows(
    "SELECT order_id::VARCHAR, customer_id::VARCHAR, amount::VARCHAR, status, strftime(order_ts, '%Y-%m-%d %H:%M:%S'), strftime(order_ts, '%Y-%m-%d') " +
      `FROM read_parquet(${quoteLiteral(file)}) ORDER BY order_id`,
  );
  return rows.map((row) => row.map(String));
}

/** Orders by day, the raw layer sent to PostgreSQL with upsert on order_id. */
function pipelineYaml(url: string): string {
  return `datasets:
  orders:
    source: {format: parquet, path: deliveries/*.parquet}
    columns:
      order_id: {type: BIGINT, nullable: false}
      customer_id: BIGINT
      amount: DECIMAL(10,2)
      status: VARCHAR
      order_ts: TIMESTAMP
    partition:
      day: strftime(order_ts, '%Y-%m-%d')
    sinks:
      postgres: {url: "${url}", table: ${TABLE}, mode: upsert, primary_key: [order_id]}
`;
}

/** One sync of the delivery; the sink phase is timed by wrapping the sink opener (opened, then closed, once per sync). */
async function timeLakeswap(lake: Lake, config: PipelineConfig, file: string): Promise<LakeswapUpsert> {
  let opened: number | undefined;
  let closed: number | undefined;
  const timedOpenSink: SinkOpener = async (spec) => {
    opened = performance.now();
    const sink = await openSink(spec);
    return {
      description: sink.description,
      prepare: (layout) => sink.prepare(layout),
      write: (layout, part) => sink.write(layout, part),
      remove: (layout, partition, statePath) => sink.remove(layout, partition, statePath),
      close: async () => {
        await sink.close();
        closed = performance.now();
      },
    };
  };
  const started = performance.now();
  const report = await new Pipeline(lake, config, { inputs: [file], openSink: timedOpenSink }).sync();
  const syncMs = performance.now() - started;
  expectSinkWrites(report, PG_UPSERT_ROWS);
  if (opened === undefined || closed === undefined) throw new Error("the sync never opened and closed its sink");
  const sent = report.sinks.filter((s) => s.action === "sent");
  const sinkMs = closed - opened;
  return {
    sinkMs,
    syncMs,
    lakeMs: syncMs - sinkMs,
    partitionsSent: sent.length,
    partitionsSkipped: report.sinks.filter((s) => s.action === "skipped").length,
    rowsSent: sent.reduce((sum, s) => sum + (s.rows ?? 0), 0),
    partitionSecondsSum: sent.reduce((sum, s) => sum + s.seconds, 0),
    rowsPerSecond: PG_UPSERT_ROWS / (sinkMs / 1000),
  };
}

/** A sync whose sink failed a partition, or sent another number of rows, measured nothing. */
function expectSinkWrites(report: SyncReport, rows: number): void {
  const failed = report.sinks.filter((s) => s.action === "failed");
  if (failed.length > 0) throw new Error(`the sink failed ${failed.length} partition(s): ${failed[0]?.partition}: ${failed[0]?.error}`);
  const sent = report.sinks.filter((s) => s.action === "sent").reduce((sum, s) => sum + (s.rows ?? 0), 0);
  if (sent !== rows) throw new Error(`the sink sent ${sent} rows, not ${rows}`);
}

/**
 * The seed's executemany: one prepared INSERT ... ON CONFLICT per row, one transaction. Once the budget is spent
 * (checked every 1,000 rows) the loop stops, its time is extrapolated linearly, and the remaining rows are applied
 * untimed by set-based statements in the same transaction, so the final table can still be compared.
 */
async function timeExecutemany(
  client: pg.Client,
  rows: readonly string[][],
  budgetMs: number,
  progress: (message: string) => void,
): Promise<ExecutemanyUpsert> {
  await client.query("BEGIN");
  const started = performance.now();
  let done = 0;
  for (; done < rows.length; done += 1) {
    if (done % 1000 === 0 && performance.now() - started > budgetMs) break;
    await client.query({ name: "upsert_order", text: EXECUTEMANY_SQL, values: rows[done] });
    if ((done + 1) % 100_000 === 0) {
      const elapsed = performance.now() - started;
      const eta = (elapsed / (done + 1)) * (rows.length - done - 1);
      progress(`sink: executemany ${count(done + 1)} rows in ${(elapsed / 1000).toFixed(1)} s (${count(Math.round(((done + 1) / elapsed) * 1000))} rows/s, ~${(eta / 1000).toFixed(0)} s to go)`);
    }
  }
  const measuredMs = performance.now() - started;
  const rest = rows.slice(done);
  if (rest.length > 0) {
    progress(`sink: executemany stopped at its budget after ${count(done)} rows; applying the other ${count(rest.length)} untimed (set-based) to compare the tables`);
    for (let at = 0; at < rest.length; at += REST_CHUNK) await applySetBased(client, rest.slice(at, at + REST_CHUNK));
  }
  const commitStarted = performance.now();
  await client.query("COMMIT");
  const commitMs = performance.now() - commitStarted;
  const ms = (measuredMs / done) * rows.length + commitMs;
  return {
    measuredRows: done,
    measuredMs,
    commitMs,
    ms,
    extrapolated: rest.length > 0,
    rowsPerSecond: rows.length / (ms / 1000),
    restRows: rest.length,
    budgetMs,
  };
}

/** The same upsert as executemany's, for many rows in one statement (untimed: only to finish the table). */
async function applySetBased(client: pg.Client, rows: readonly string[][]): Promise<void> {
  const column = (index: number): string[] => rows.map((row) => row[index] as string);
  await client.query(
    `INSERT INTO ${TABLE} (${COLUMNS.join(", ")}, _lakeswap_updated_at) SELECT *, now() FROM unnest($1::bigint[], $2::bigint[], $3::numeric[], $4::text[], $5::timestamp[], $6::text[]) ` +
      EXECUTEMANY_SQL.slice(EXECUTEMANY_SQL.indexOf("ON CONFLICT")),
    COLUMNS.map((_, index) => column(index)),
  );
}

/** The server's clock now: rows stamped after it were written by the step that follows. */
async function serverClock(url: string): Promise<Date> {
  return withClient(url, async (client) => (await client.query<{ now: Date }>("SELECT clock_timestamp() AS now")).rows[0]!.now);
}

async function checkTable(url: string, since: Date): Promise<TableCheck> {
  const row = await withClient(url, async (client) => {
    const result = await client.query<{ rows: string; amount: string; pending: string; touched: string; hash: string }>(
      "SELECT count(*) AS rows, sum(amount)::text AS amount, count(*) FILTER (WHERE status = 'pending') AS pending, " +
        "count(*) FILTER (WHERE _lakeswap_updated_at >= $1) AS touched, " +
        `md5(string_agg(md5(concat_ws('|', ${COLUMNS.join(", ")})), '' ORDER BY order_id)) AS hash FROM ${TABLE}`,
      [since],
    );
    return result.rows[0]!;
  });
  return { rows: Number(row.rows), amountSum: row.amount, pending: Number(row.pending), touched: Number(row.touched), hash: row.hash };
}

async function withClient<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

function count(value: number): string {
  return value.toLocaleString("en-US");
}
