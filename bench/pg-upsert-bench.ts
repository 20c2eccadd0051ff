import { execFile } from "node:child_process";
import { createReadStream, readFileSync, readdirSync, promises as fs } from "node:fs";
import path from "node:path";
import { pipeline } from "node:stream/promises";
import { promisify } from "node:util";
import { performance } from "node:perf_hooks";
import pg from "pg";
import { from as copyFrom } from "pg-copy-streams";
import { loadPipelineConfig, type PipelineConfig } from "../src/config/pipeline-config.js";
import type { Lake } from "../src/lake/lake.js";
import { Pipeline, type SyncReport } from "../src/pipeline/pipeline.js";
import { quoteLiteral } from "../src/model/sql.js";
import { openEmbeddedLake } from "../src/open/open-lake.js";
import { openSink } from "../src/sinks/open-sink.js";
import type { SinkOpener } from "../src/sinks/sink.js";
import { POSTGRES_BIN, postgresAvailable, startPostgres, type PostgresServer } from "../test/support/postgres.js";
import { BenchDuck } from "./duck.js";
import { REPO_ROOT } from "./lakeswap-cli.js";

/*
 * Issues 11 (item 4) and 27 (item 5): lakeswap's PostgreSQL sink against the
 * textbook method and against the server's own floor, on one throwaway cluster.
 *
 * Upsert: 1,000,000 orders, 10% of them updates of keys the table already
 * holds, 90% new keys, two ways:
 *
 * - lakeswap: a Pipeline.sync of the delivery (a Parquet file) whose raw layer
 *   declares `sinks: {postgres: {mode: upsert, primary_key: [order_id]}}`.
 *   Timed: the sink phase (from opening the sink to closing it); the rest of
 *   the same sync (landing, signing, writing and swapping the raw partitions)
 *   is reported beside it.
 * - executemany, the seed's method (shared/seeds/003, "Upsert into Postgres
 *   with ON CONFLICT"): `cur.executemany(sql, rows)` of the chapter's
 *   INSERT ... ON CONFLICT DO UPDATE, rows a list of dicts in memory, one
 *   transaction, run by psycopg2 (bench/psycopg2-executemany.py, under
 *   /usr/bin/python3; the report names the client library's version).
 *
 * The target is seeded once by a lakeswap sync of an earlier delivery (the
 * 100,000 orders the updates hit, in an older state, plus 900,000 October
 * orders nobody touches), then copied (CREATE DATABASE ... TEMPLATE), so both
 * methods start from the same table; both must end with the same rows.
 *
 * Partition replace: the same 1,000,000 rows sent by a sink with
 * `mode: partition_replace` to a target that holds an older version of every
 * one of the 30 partitions, against the floor: on the partitioned layout the
 * sink creates (each partition's rows COPYed into a new leaf table that
 * replaces the old one, one transaction each); as context, on the index
 * layout of targets made before it (each partition's rows deleted and the
 * new ones COPYed in), in a database of its own. The floor: one plain
 * `COPY ... FROM STDIN` of the same rows into an empty table of the same
 * columns without index, in CSV and in COPY's text format (the one the sink
 * sends, which the server parses faster), twice each, the fastest counting
 * (rows prepared before the clock).
 */

/** Rows of the timed delivery. */
const PG_UPSERT_ROWS = 1_000_000;
/** Of them, updates of keys the seeded table holds (every 10th order id). */
const PG_UPSERT_UPDATES = 100_000;
/** Issue 27's target: executemany time / lakeswap sink time, at least. */
export const PG_UPSERT_TARGET = 20;
/** The target's measure, as the verdict prints it. */
export const PG_UPSERT_MEASURE = "PG upsert 1M rows · psycopg2 executemany / lakeswap sink";
/** Issue 27's target: lakeswap's partition replace of 1M rows / a plain COPY of them into an empty table, at most. */
export const PG_REPLACE_TARGET = 2;
/** The replace target's measure, as the verdict prints it. */
export const PG_REPLACE_MEASURE = "PG partition replace 1M rows · lakeswap sink / plain COPY into an empty table";
/** The Python that has psycopg2 (not the one a pyenv may put first on PATH). */
const PYTHON = process.env.LAKESWAP_BENCH_PYTHON ?? "/usr/bin/python3";

/** October orders in the seed that the delivery does not touch (a realistic table, not only the rows hit). */
const UNTOUCHED_ROWS = 900_000;
/** The delivery's first order id: October's are 1..UNTOUCHED_ROWS. */
const FIRST_NEW_ID = UNTOUCHED_ROWS + 1;

const TABLE = "bench.orders";
const COLUMNS = ["order_id", "customer_id", "amount", "status", "order_ts", "day"] as const;

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
  /** CPU of the bench's process (lakeswap, DuckDB and pg) during the sink phase, user + system, in ms. */
  readonly sinkCpuMs: number;
  /** CPU of the PostgreSQL server (every process of the cluster) during the sink phase, in ms; undefined where /proc cannot tell. */
  readonly serverCpuMs: number | undefined;
}

/** The partition replace and its floor. */
interface ReplaceFigures {
  /** The sink phase of the sync that replaced every partition (older rows there), on the partitioned layout (the default). */
  readonly lakeswap: LakeswapUpsert;
  /** The sink phase of the sync that sent the older rows to the empty target first (context). */
  readonly firstSend: LakeswapUpsert;
  /** The same two syncs into a target of the index layout (`partitioning: index`, or made before the partitioned one): context. */
  readonly indexLayout: { readonly lakeswap: LakeswapUpsert; readonly firstSend: LakeswapUpsert; readonly identical: boolean };
  /** A plain COPY of the same rows into an empty table without index: the fastest of four (CSV and text, twice each), in ms. */
  readonly copyMs: number;
  /** The server's CPU during that COPY, in ms. */
  readonly copyServerCpuMs: number | undefined;
  /** The format of the fastest plain COPY. */
  readonly copyFormat: "csv" | "text";
  /** The faster plain COPY of each format (context: what the format alone costs the server), in ms. */
  readonly copyByFormat: Readonly<Record<"csv" | "text", { readonly ms: number; readonly serverMs: number | undefined }>>;
  /** The same COPY into an empty table with the target's partition index (context: what the index costs), in ms. */
  readonly indexedCopyMs: number;
  readonly indexedCopyServerCpuMs: number | undefined;
  /** lakeswap.sinkMs / copyMs: the target's measure. */
  readonly ratio: number;
  /** The replaced table holds exactly the delivery's rows (same count and hash as the COPYed table). */
  readonly identical: boolean;
}

/** The per-row method: measured on all rows, or on those that fit the budget and extrapolated. */
interface ExecutemanyUpsert {
  /** The client library and its version, e.g. "psycopg2 2.9.5, libpq 150018, Python 3.11.2". */
  readonly client: string;
  readonly measuredRows: number;
  /** The per-row loop over measuredRows, in ms. */
  readonly measuredMs: number;
  /** CPU of the Python process over the measured loop, in ms. */
  readonly measuredCpuMs: number;
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
      readonly replace: ReplaceFigures;
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
  const files = await writeInputs(dir, progress);
  const urlOf = (database: string): string => server.url.replace(/\/postgres$/, `/${database}`);
  const serverCpu = await serverCpuClock(server);
  const upsert = await measureUpsert(server, dir, files, { urlOf, serverCpu }, budgetMs, progress);
  await server.query("CHECKPOINT");
  const replace = await measureReplace(server, dir, files, { urlOf, serverCpu }, progress);
  const version = (await server.query<{ v: string }>("SELECT current_setting('server_version') AS v"))[0]?.v ?? "unknown";
  return { ...upsert, postgres: version, replace };
}

/** The inputs every step reads, written before anything is timed. */
interface BenchInputs {
  /** The upsert's seed: 900,000 October orders and the 100,000 November orders the updates hit, older. */
  readonly seedFile: string;
  /** The delivery: 1,000,000 November orders (Parquet). */
  readonly deliveryFile: string;
  /** The same November orders in an older state, every one (the partition replace's first send). */
  readonly olderFile: string;
  /** The delivery's rows as CSV without header, in order_id order: psycopg2's rows, and the plain COPY's input. */
  readonly rowsCsv: string;
  /** The same rows in COPY's text format: the plain COPY's other input. */
  readonly rowsText: string;
  readonly expected: { readonly rows: number; readonly amountSum: string };
}

async function writeInputs(dir: string, progress: (message: string) => void): Promise<BenchInputs> {
  await fs.mkdir(path.join(dir, "deliveries"), { recursive: true });
  await fs.mkdir(path.join(dir, "replace-deliveries"), { recursive: true });
  const inputs = {
    seedFile: path.join(dir, "deliveries", "seed.parquet"),
    deliveryFile: path.join(dir, "deliveries", "orders.parquet"),
    olderFile: path.join(dir, "replace-deliveries", "older.parquet"),
    rowsCsv: path.join(dir, "rows.csv"),
    rowsText: path.join(dir, "rows.txt"),
  };
  const duck = await BenchDuck.open();
  try {
    progress(`sink: writing the seed (${count(UNTOUCHED_ROWS + PG_UPSERT_UPDATES)} rows) and the delivery (${count(PG_UPSERT_ROWS)} rows) as Parquet`);
    await writeOrders(duck, inputs);
    await duck.run(
      "COPY (SELECT order_id, customer_id, amount::VARCHAR, status, strftime(order_ts, '%Y-%m-%d %H:%M:%S'), strftime(order_ts, '%Y-%m-%d') " +
        `FROM read_parquet(${quoteLiteral(inputs.deliveryFile)}) ORDER BY order_id) TO ${quoteLiteral(inputs.rowsCsv)} (FORMAT csv, HEADER false)`,
    );
    // No value here holds a tab, a backslash or a line end, and none is NULL: the CSV's lines, tab-separated, are COPY's text format.
    await duck.run(
      `COPY (SELECT * FROM read_csv(${quoteLiteral(inputs.rowsCsv)}, header = false, all_varchar = true)) TO ${quoteLiteral(inputs.rowsText)} ` +
        "(FORMAT csv, HEADER false, DELIMITER E'\\t', QUOTE '', ESCAPE '')",
    );
    const [total, sum] = (
      await duck.rows(
        `SELECT count(*), sum(amount)::VARCHAR FROM (SELECT order_id, amount FROM read_parquet(${quoteLiteral(inputs.deliveryFile)}) UNION ALL ` +
          `SELECT s.order_id, s.amount FROM read_parquet(${quoteLiteral(inputs.seedFile)}) s ANTI JOIN read_parquet(${quoteLiteral(inputs.deliveryFile)}) d USING (order_id))`,
      )
    )[0] as [bigint, string];
    return { ...inputs, expected: { rows: Number(total), amountSum: sum } };
  } finally {
    duck.close();
  }
}

async function measureUpsert(
  server: PostgresServer,
  dir: string,
  inputs: BenchInputs,
  { urlOf, serverCpu }: ServerProbes,
  budgetMs: number,
  progress: (message: string) => void,
): Promise<Omit<Extract<PgUpsertFigures, { measured: true }>, "postgres" | "replace">> {
  const lakeswapDb = "upsert_lakeswap";
  const executemanyDb = "upsert_executemany";
  await server.query(`CREATE DATABASE ${lakeswapDb}`);
  const configFile = path.join(dir, "lakeswap.yaml");
  await fs.writeFile(configFile, pipelineYaml(urlOf(lakeswapDb), "upsert"));
  const config = loadPipelineConfig(configFile);
  const lake = await openEmbeddedLake(path.join(dir, "lake"));
  try {
    progress("sink: seeding bench.orders with a lakeswap sync of the seed (untimed)");
    const seeded = await new Pipeline(lake, config, { inputs: [inputs.seedFile], openSink }).sync();
    expectSinkWrites(seeded, UNTOUCHED_ROWS + PG_UPSERT_UPDATES);
    // The same seeded table for the per-row method: a copy of the whole database, taken before anything is timed.
    await server.query(`CREATE DATABASE ${executemanyDb} TEMPLATE ${lakeswapDb}`);
    for (const database of [lakeswapDb, executemanyDb]) await withClient(urlOf(database), (client) => client.query(`VACUUM ANALYZE ${TABLE}`));
    await server.query("CHECKPOINT");

    progress(`sink: timed · lakeswap sync of the ${count(PG_UPSERT_ROWS)}-row delivery, upsert sink`);
    const lakeswapStart = await serverClock(urlOf(lakeswapDb));
    const lakeswap = await timeLakeswap(lake, config, inputs.deliveryFile, PG_UPSERT_ROWS, serverCpu);
    await server.query("CHECKPOINT");

    progress(`sink: timed · psycopg2 executemany of ${count(PG_UPSERT_ROWS)} rows, one INSERT ... ON CONFLICT per row (budget ${(budgetMs / 1000).toFixed(0)} s)`);
    const executemanyStart = await serverClock(urlOf(executemanyDb));
    const executemany = await timeExecutemany(urlOf(executemanyDb), inputs.rowsCsv, budgetMs);

    progress("sink: comparing both tables");
    const lakeswapCheck = await checkTable(urlOf(lakeswapDb), lakeswapStart);
    const executemanyCheck = await checkTable(urlOf(executemanyDb), executemanyStart);
    const wanted = { ...inputs.expected, touched: PG_UPSERT_ROWS };
    const matches = (check: TableCheck): boolean =>
      check.rows === wanted.rows && check.amountSum === wanted.amountSum && check.touched === wanted.touched && check.pending === 0;
    const identical = matches(lakeswapCheck) && matches(executemanyCheck) && lakeswapCheck.hash === executemanyCheck.hash;
    return {
      measured: true,
      rows: PG_UPSERT_ROWS,
      updates: PG_UPSERT_UPDATES,
      inserts: PG_UPSERT_ROWS - PG_UPSERT_UPDATES,
      partitions: lakeswap.partitionsSent,
      seededRows: UNTOUCHED_ROWS + PG_UPSERT_UPDATES,
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
 * The partition replace: a lake of its own sends the older November orders to an empty target (context), then the
 * delivery replaces every partition (timed); the floor is a plain COPY of the delivery's rows into an empty table.
 */
async function measureReplace(
  server: PostgresServer,
  dir: string,
  inputs: BenchInputs,
  { urlOf, serverCpu }: ServerProbes,
  progress: (message: string) => void,
): Promise<ReplaceFigures> {
  const indexed = await replaceSyncs(server, dir, inputs, { urlOf, serverCpu }, progress, "index");
  const database = "replace_lakeswap";
  const { firstSend, lakeswap } = await replaceSyncs(server, dir, inputs, { urlOf, serverCpu }, progress, "native");
  progress(`sink: timed · the floor: plain COPY of ${count(PG_UPSERT_ROWS)} rows into an empty table (CSV and text, twice each, the fastest counts), and into one with the partition index`);
  const attempts = [
    { format: "csv", indexed: false },
    { format: "text", indexed: false },
    { format: "csv", indexed: false },
    { format: "text", indexed: false },
    { format: "csv", indexed: true },
  ] as const;
  const copies = await withClient(urlOf(database), async (client) => {
    const timed: { ms: number; serverMs: number | undefined; format: "csv" | "text"; indexed: boolean }[] = [];
    for (const [index, { format, indexed }] of attempts.entries()) {
      const table = `bench.orders_copy_${index + 1}`;
      await client.query(`CREATE TABLE ${table} (LIKE ${TABLE})`);
      if (indexed) await client.query(`CREATE INDEX ON ${table} (day)`);
      await server.query("CHECKPOINT");
      const serverAtStart = serverCpu();
      const started = performance.now();
      const stream = client.query(copyFrom(`COPY ${table} (${COLUMNS.join(", ")}) FROM STDIN (FORMAT ${format})`));
      await pipeline(createReadStream(format === "csv" ? inputs.rowsCsv : inputs.rowsText), stream);
      const serverAtEnd = serverCpu();
      const serverMs = serverAtStart !== undefined && serverAtEnd !== undefined ? serverAtEnd - serverAtStart : undefined;
      timed.push({ ms: performance.now() - started, serverMs, format, indexed });
    }
    return timed;
  });
  const fastest = (format?: "csv" | "text"): (typeof copies)[number] =>
    copies.filter((copy) => !copy.indexed && (format === undefined || copy.format === format)).reduce((best, copy) => (copy.ms < best.ms ? copy : best));
  const floor = fastest();
  const indexedCopy = copies.find((copy) => copy.indexed)!;
  const hashes = await withClient(urlOf(database), async (client) => {
    const hash = async (table: string): Promise<string> =>
      (await client.query<{ h: string }>(`SELECT count(*) || ':' || md5(string_agg(md5(concat_ws('|', ${COLUMNS.join(", ")})), '' ORDER BY order_id)) AS h FROM ${table}`)).rows[0]!.h;
    return [await hash(TABLE), await hash("bench.orders_copy_1"), await withClient(urlOf("replace_index"), async (other) => (await other.query<{ h: string }>(
      `SELECT count(*) || ':' || md5(string_agg(md5(concat_ws('|', ${COLUMNS.join(", ")})), '' ORDER BY order_id)) AS h FROM ${TABLE}`)).rows[0]!.h)];
  });
  return {
    lakeswap,
    firstSend,
    indexLayout: { ...indexed, identical: hashes[2] === hashes[1] },
    copyMs: floor.ms,
    copyServerCpuMs: floor.serverMs,
    copyFormat: floor.format,
    copyByFormat: { csv: fastest("csv"), text: fastest("text") },
    indexedCopyMs: indexedCopy.ms,
    indexedCopyServerCpuMs: indexedCopy.serverMs,
    ratio: lakeswap.sinkMs / floor.ms,
    identical: hashes[0] === hashes[1],
  };
}

/**
 * The two syncs of the partition replace into a database of their own (`replace_<partitioning>`): the older rows into
 * the empty target (context), then the delivery replacing every partition (the measure).
 */
async function replaceSyncs(
  server: PostgresServer,
  dir: string,
  inputs: BenchInputs,
  { urlOf, serverCpu }: ServerProbes,
  progress: (message: string) => void,
  partitioning: "native" | "index",
): Promise<{ readonly firstSend: LakeswapUpsert; readonly lakeswap: LakeswapUpsert }> {
  const database = partitioning === "native" ? "replace_lakeswap" : "replace_index";
  await server.query(`CREATE DATABASE ${database}`);
  const configFile = path.join(dir, `lakeswap-replace-${partitioning}.yaml`);
  await fs.writeFile(configFile, pipelineYaml(urlOf(database), "partition_replace", partitioning));
  const config = loadPipelineConfig(configFile);
  const lake = await openEmbeddedLake(path.join(dir, `lake-replace-${partitioning}`));
  try {
    progress(`sink: timed · partition_replace (partitioning: ${partitioning}): first send of ${count(PG_UPSERT_ROWS)} older rows into an empty target (context)`);
    const firstSend = await timeLakeswap(lake, config, inputs.olderFile, PG_UPSERT_ROWS, serverCpu);
    await withClient(urlOf(database), (client) => client.query(`VACUUM ANALYZE ${TABLE}`));
    await server.query("CHECKPOINT");
    progress(`sink: timed · partition_replace (partitioning: ${partitioning}) of every partition by the ${count(PG_UPSERT_ROWS)}-row delivery`);
    const lakeswap = await timeLakeswap(lake, config, inputs.deliveryFile, PG_UPSERT_ROWS, serverCpu);
    await server.query("CHECKPOINT");
    return { firstSend, lakeswap };
  } finally {
    await lake.close();
  }
}

/**
 * The seed: October orders 1..900,000, settled (never touched again), and every 10th November order in an older
 * state (`pending`, 0.50 more); the delivery: November orders 900,001..1,900,000 settled, by day of order_ts.
 */
async function writeOrders(duck: BenchDuck, files: { readonly seedFile: string; readonly deliveryFile: string; readonly olderFile: string }): Promise<void> {
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
      `TO ${quoteLiteral(files.seedFile)} (FORMAT parquet)`,
  );
  await duck.run(`COPY (SELECT ${order("11", 30, "new")} FROM range(${FIRST_NEW_ID}, ${last + 1}) r(id) ORDER BY order_id) TO ${quoteLiteral(files.deliveryFile)} (FORMAT parquet)`);
  await duck.run(`COPY (SELECT ${order("11", 30, "old")} FROM range(${FIRST_NEW_ID}, ${last + 1}) r(id) ORDER BY order_id) TO ${quoteLiteral(files.olderFile)} (FORMAT parquet)`);
}

/** Orders by day, the raw layer sent to PostgreSQL: with upsert on order_id, or partition_replace. */
function pipelineYaml(url: string, mode: "upsert" | "partition_replace", partitioning: "native" | "index" = "native"): string {
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
      postgres: {url: "${url}", table: ${TABLE}, ${mode === "upsert" ? "mode: upsert, primary_key: [order_id]" : `mode: partition_replace, partitioning: ${partitioning}`}}
`;
}

/** One sync of the delivery; the sink phase is timed by wrapping the sink opener (opened, then closed, once per sync). */
async function timeLakeswap(lake: Lake, config: PipelineConfig, file: string, rows: number, serverCpu: () => number | undefined): Promise<LakeswapUpsert> {
  let opened: number | undefined;
  let closed: number | undefined;
  let cpuAtOpen: NodeJS.CpuUsage | undefined;
  let cpu: NodeJS.CpuUsage | undefined;
  let serverAtOpen: number | undefined;
  let serverAtClose: number | undefined;
  const timedOpenSink: SinkOpener = async (spec) => {
    opened = performance.now();
    cpuAtOpen = process.cpuUsage();
    serverAtOpen = serverCpu();
    const sink = await openSink(spec);
    return {
      description: sink.description,
      concurrentWrites: sink.concurrentWrites,
      prepare: (layout) => sink.prepare(layout),
      write: (layout, part) => sink.write(layout, part),
      remove: (layout, partition, statePath) => sink.remove(layout, partition, statePath),
      close: async () => {
        // Before the sink's connections end: an ended backend's CPU is lost until the postmaster reaps it.
        serverAtClose = serverCpu();
        await sink.close();
        closed = performance.now();
        cpu = process.cpuUsage(cpuAtOpen);
      },
    };
  };
  const started = performance.now();
  const report = await new Pipeline(lake, config, { inputs: [file], openSink: timedOpenSink }).sync();
  const syncMs = performance.now() - started;
  expectSinkWrites(report, rows);
  if (opened === undefined || closed === undefined || cpu === undefined) throw new Error("the sync never opened and closed its sink");
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
    rowsPerSecond: rows / (sinkMs / 1000),
    sinkCpuMs: (cpu.user + cpu.system) / 1000,
    serverCpuMs: serverAtOpen !== undefined && serverAtClose !== undefined ? serverAtClose - serverAtOpen : undefined,
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
 * The seed's executemany, by psycopg2 (bench/psycopg2-executemany.py): rows read into memory before the clock starts,
 * one transaction. Past the budget (checked every 10,000 rows) the script stops, applies the rest untimed and
 * set-based (so the tables compare), and the loop's time is extrapolated linearly.
 */
async function timeExecutemany(url: string, rowsCsv: string, budgetMs: number): Promise<ExecutemanyUpsert> {
  const script = path.join(REPO_ROOT, "bench", "psycopg2-executemany.py");
  let stdout: string;
  try {
    ({ stdout } = await promisify(execFile)(PYTHON, [script, url, rowsCsv, String(budgetMs)], { encoding: "utf8", maxBuffer: 1 << 20 }));
  } catch (error) {
    const failed = error as { stderr?: string; message?: string };
    throw new Error(`${PYTHON} ${script} failed (psycopg2 must be installed for it; LAKESWAP_BENCH_PYTHON names another Python): ${failed.stderr ?? failed.message ?? ""}`);
  }
  const result = JSON.parse(stdout.trim().split("\n").at(-1) ?? "{}") as {
    client: string;
    measuredRows: number;
    measuredMs: number;
    measuredCpuMs: number;
    commitMs: number;
    restRows: number;
  };
  const ms = (result.measuredMs / result.measuredRows) * PG_UPSERT_ROWS + result.commitMs;
  return { ...result, ms, extrapolated: result.restRows > 0, rowsPerSecond: PG_UPSERT_ROWS / (ms / 1000), budgetMs };
}

/** The database URLs of the cluster, and its CPU clock. */
interface ServerProbes {
  readonly urlOf: (database: string) => string;
  readonly serverCpu: () => number | undefined;
}

/**
 * The CPU the cluster has used so far, in ms: the postmaster's own and its reaped children's (backends that ended),
 * plus every live child's (backends, autovacuum, WAL writer). Read from /proc; undefined where it cannot be read.
 */
async function serverCpuClock(server: PostgresServer): Promise<() => number | undefined> {
  const stat = (pid: number): string[] => readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  let postmaster: number;
  try {
    // Read while the connection is open: its backend's parent is the postmaster.
    postmaster = await withClient(server.url, async (client) => Number(stat((await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]!.pid)[1]));
  } catch {
    return () => undefined;
  }
  const ticks = 1000 / 100;
  return () => {
    try {
      const own = stat(postmaster);
      let total = Number(own[11]) + Number(own[12]) + Number(own[13]) + Number(own[14]);
      for (const entry of readdirSync("/proc")) {
        if (!/^\d+$/.test(entry)) continue;
        try {
          const child = stat(Number(entry));
          if (Number(child[1]) === postmaster) total += Number(child[11]) + Number(child[12]);
        } catch {
          // A process that ended while the folder was read.
        }
      }
      return total * ticks;
    } catch {
      return undefined;
    }
  };
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
