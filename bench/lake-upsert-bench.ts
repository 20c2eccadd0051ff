import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { quoteLiteral } from "../src/model/sql.js";
import { openEmbeddedLake } from "../src/open/open-lake.js";
import type { ProcessFigures } from "./delivery-bench.js";
import { BenchDuck } from "./duck.js";
import { LAKESWAP_BIN, REPO_ROOT, tail, type SyncReportJson } from "./lakeswap-cli.js";
import { runMeasured, type RssMethod } from "./measured-process.js";
import { summarize, timeMs, type Timing } from "./stats.js";
import { rollbackSync } from "../src/lake/operations/rollback.js";

/*
 * Issue 11, item 4 (second half): a lake upsert of 100,000 changed keys into
 * a 3,000,000-row orders table of 180 day partitions, against rewriting the
 * whole table.
 *
 * The table is loaded once, untimed, by a first `lakeswap sync` of a Parquet
 * delivery into a dataset that declares `write: upsert`, primary_key
 * [order_id], order_by [updated_at], delete_flag deleted. Then a delivery of
 * 100,000 changed keys (status and amount changes, keys whose order day is
 * corrected so they move partition, deletes, and some keys delivered twice
 * where updated_at picks the winner), plus rows re-delivered unchanged (the
 * extract's overlap with the previous one), is synced, timed, by the compiled
 * CLI as a user runs it (a process of its own: wall time and peak RSS from GNU
 * time). Between rounds the sync is rolled back (lakeswap's rollbackSync,
 * untimed), so every round merges into the same table.
 *
 * The whole-table rewrites it is compared with, each a process of its own:
 * - `lakeswap sync --full-refresh` of the merged 3,000,000-row table (a
 *   Parquet file: the merge is made beforehand by DuckDB, untimed, and its
 *   time printed as context) into a `write: partition_replace` dataset that
 *   holds the table: every partition rebuilt and swapped;
 * - DuckDB on its own: one `COPY (merge of the Hive table's files and the
 *   delivery) TO dir (PARTITION_BY (day))`, the merge included, into a new
 *   folder (no swap, no signatures: about the least a rewrite costs).
 * The ratio's baseline is the faster of the two (by median).
 *
 * Two deliveries: "recent" (the realistic one, judged: changed keys of the
 * last 14 days, the overlap from the 7 days before) and "uniform" (context:
 * changed keys spread over every day, so every partition is rebuilt). After
 * every timed run the table must equal the merge computed independently with
 * DuckDB (row count and an order-insensitive hash over every row and its
 * partition): the upsert lake, the full refresh's lake and DuckDB's folder.
 */

/** Rows of the table. */
const LAKE_UPSERT_ROWS = 3_000_000;
/** Day partitions of the table, from FIRST_DAY. */
const LAKE_UPSERT_DAYS = 180;
/** Keys one delivery changes. */
const LAKE_UPSERT_KEYS = 100_000;
/** The realistic delivery's changed keys are orders of the last this many days. */
const RECENT_DAYS = 14;
/** Timed rounds of each measure, per delivery (order rotated each round). */
const LAKE_UPSERT_ROUNDS = 3;
/** The verdict's limit: the upsert's wall time over the rewrite's, below it (no numeric target in the issue: faster than a rewrite). */
export const LAKE_UPSERT_LIMIT = 1;
/** The verdict's measure, as the targets table prints it. */
export const LAKE_UPSERT_MEASURE = `lake upsert · ${LAKE_UPSERT_KEYS / 1000}k changed keys (last ${RECENT_DAYS} days) into ${LAKE_UPSERT_ROWS / 1_000_000}M rows · lakeswap sync / whole-table rewrite`;

const FIRST_DAY = "2026-05-01";
/** Of the changed keys (in the delivery's pick order): the first DELETES are deleted, the next MOVES move to the day before (or after, on the first day). */
const DELETES = 2_000;
const MOVES = 8_000;
/** Of the updated keys, this many are delivered twice: an older version and the newer one, which order_by [updated_at] must pick. */
const REPEATED = 5_000;
/** Rows re-delivered exactly as the table holds them, from the OVERLAP_DAYS days before the recent window: their partitions are touched, not changed. */
const UNCHANGED = 10_000;
const OVERLAP_DAYS = 7;
/** When the delivery's changes were made: every changed row's updated_at is after the table's. */
const CHANGED_AT = "2026-10-28 06:00:00";

const TABLE = "orders_raw";
/** The partition value: the day, YYYY-MM-DD (fixed in bd03834: DuckDB no longer guesses it as a DATE from the run folders' names). */
const DAY = "strftime(order_ts, '%Y-%m-%d')";
const COLUMNS = ["order_id", "customer_id", "amount", "status", "order_ts", "updated_at", "deleted"] as const;

/** The two deliveries. */
type UpsertVariant = "recent" | "uniform";

/** The three timed measures of a round. */
type Measure = "upsert" | "fullRefresh" | "duckdbCopy";
const MEASURES: readonly Measure[] = ["upsert", "fullRefresh", "duckdbCopy"];

/** One table's contents reduced to what two tables are compared by. */
interface TableCheck {
  readonly rows: number;
  /** Sum over every row of DuckDB's hash() of its values and its partition, as text: the same whatever the row order. */
  readonly hash: string;
}

/** One measure over the rounds: wall times, and the highest peak RSS. */
interface TimedProcess {
  readonly timing: Timing;
  readonly peakRssBytes: number;
}

/** The timed `lakeswap sync` of a delivery into the upsert dataset (partition counts of every round, which must agree). */
interface UpsertSyncFigures extends TimedProcess {
  /** Partitions rebuilt (new runs swapped in). */
  readonly built: number;
  /** Partitions the merge touched whose merged signature did not change. */
  readonly skipped: number;
  /** Partitions the sync did not touch at all (they hold none of the delivery's keys, before or after). */
  readonly untouched: number;
  /** Rows of the rebuilt partitions, as the report counts them. */
  readonly rowsWritten: number;
  /** The raw layer's seconds in the sync's own report (merge, signatures, writes, swaps; no process start-up), in ms. */
  readonly reportedRawMs: Timing;
}

/** One whole-table rewrite. */
interface RewriteFigures extends TimedProcess {
  readonly rows: number;
  readonly partitions: number;
}

/** One delivery: what it holds, and how the upsert and both rewrites did with it. */
export interface VariantFigures {
  readonly variant: UpsertVariant;
  readonly description: string;
  readonly delivery: {
    readonly rows: number;
    /** Keys whose row changes. */
    readonly keys: number;
    readonly updates: number;
    readonly moves: number;
    readonly deletes: number;
    readonly repeatedKeys: number;
    /** Rows re-delivered as the table holds them. */
    readonly unchanged: number;
    readonly fileBytes: number;
  };
  readonly rounds: number;
  /** 1-minute load average before the first and after the last timed round. */
  readonly loadAverage: { readonly before: number; readonly after: number };
  readonly upsert: UpsertSyncFigures;
  readonly fullRefresh: RewriteFigures;
  readonly duckdbCopy: RewriteFigures;
  /** The merge to a Parquet file, which the full refresh is handed (in-process DuckDB; not in any figure). */
  readonly mergeToFileMs: number;
  /** The faster rewrite by median, the ratio's denominator. */
  readonly baseline: "fullRefresh" | "duckdbCopy";
  readonly ratios: {
    /** Upsert median wall time / the faster rewrite's: the verdict's measure (on the recent delivery). */
    readonly toBaseline: number;
    readonly toFullRefresh: number;
    readonly toDuckdbCopy: number;
    /** Upsert peak RSS / the full refresh's. */
    readonly rssToFullRefresh: number;
  };
  readonly checks: {
    readonly expected: TableCheck;
    /** What each side held after its last round (every round is compared; see `identical`). */
    readonly upsert: TableCheck;
    readonly fullRefresh: TableCheck;
    readonly duckdbCopy: TableCheck;
    /** Partitions holding one of the delivery's keys before or after, and of them those whose rows change (computed by DuckDB). */
    readonly expectedTouched: number;
    readonly expectedChanged: number;
    /** In every round the upsert built exactly the changed partitions and skipped the other touched ones. */
    readonly partitionsAsExpected: boolean;
    /** After every round, the upsert lake, both rewrites and the expected merge held the same rows. */
    readonly identical: boolean;
    /** Every rollback between rounds moved back every partition the upsert had built. */
    readonly rollbacksComplete: boolean;
  };
}

/** What the lake upsert section measured. */
export interface LakeUpsertFigures {
  readonly rows: number;
  readonly partitions: number;
  readonly tableFileBytes: number;
  readonly rssMethod: RssMethod;
  /** The first sync that loaded the table into the upsert lake (untimed context). */
  readonly initialLoad: ProcessFigures;
  /** The realistic delivery: the verdict's. */
  readonly recent: VariantFigures;
  /** Changed keys spread over every partition: context. */
  readonly uniform: VariantFigures;
}

/** Files and folders of one run of the section. */
interface Workspace {
  readonly dir: string;
  readonly table: string;
  readonly hiveTable: string;
  readonly upsertConfig: string;
  readonly replaceConfig: string;
  readonly upsertLake: string;
  readonly replaceLake: string;
}

/** What was written for one delivery before anything is timed. */
interface PreparedVariant {
  readonly variant: UpsertVariant;
  readonly delivery: string;
  readonly merged: string;
  readonly fileBytes: number;
  readonly rows: number;
  readonly mergeToFileMs: number;
  readonly expected: TableCheck;
  readonly expectedTouched: number;
  readonly expectedChanged: number;
}

/** Generates the table and both deliveries, loads both lakes (untimed), then times the upsert and both rewrites per delivery. */
export async function benchLakeUpsert(workDir: string, progress: (message: string) => void): Promise<LakeUpsertFigures> {
  const dir = path.join(workDir, "lake-upsert");
  await fs.mkdir(path.join(dir, "deliveries"), { recursive: true });
  const ws: Workspace = {
    dir,
    table: path.join(dir, "deliveries", "orders.parquet"),
    hiveTable: path.join(dir, "hive-orders"),
    upsertConfig: path.join(dir, "lakeswap-upsert.yaml"),
    replaceConfig: path.join(dir, "lakeswap-replace.yaml"),
    upsertLake: path.join(dir, "lake-upsert"),
    replaceLake: path.join(dir, "lake-replace"),
  };
  await fs.writeFile(ws.upsertConfig, pipelineYaml("upsert"));
  await fs.writeFile(ws.replaceConfig, pipelineYaml("partition_replace"));

  const prepared: PreparedVariant[] = [];
  const duck = await BenchDuck.open();
  try {
    progress(`upsert: generating ${count(LAKE_UPSERT_ROWS)} orders over ${LAKE_UPSERT_DAYS} days as one Parquet file, and its Hive copy for DuckDB's rewrite`);
    await writeTable(duck, ws);
    for (const variant of ["recent", "uniform"] as const) {
      progress(`upsert: ${variant} delivery of ${count(LAKE_UPSERT_KEYS)} changed keys, and the expected merge (DuckDB, independently of lakeswap)`);
      prepared.push(await prepareVariant(duck, ws, variant));
    }
  } finally {
    duck.close();
  }
  const tableFileBytes = (await fs.stat(ws.table)).size;

  progress("upsert: first sync of the table into the partition_replace lake the full refreshes rewrite (untimed)");
  const replaceLoad = await lakeswapSync(ws.replaceConfig, ws.table, ws.replaceLake);
  expectBuilt(replaceLoad.report, LAKE_UPSERT_DAYS, LAKE_UPSERT_ROWS, "the partition_replace lake's first load");
  progress("upsert: first sync of the table into the write: upsert lake (untimed)");
  const initial = await lakeswapSync(ws.upsertConfig, ws.table, ws.upsertLake);
  expectBuilt(initial.report, LAKE_UPSERT_DAYS, LAKE_UPSERT_ROWS, "the upsert lake's first load");

  const variants: VariantFigures[] = [];
  for (const p of prepared) variants.push(await measureVariant(ws, p, progress));
  const [recent, uniform] = variants as [VariantFigures, VariantFigures];
  return {
    rows: LAKE_UPSERT_ROWS,
    partitions: LAKE_UPSERT_DAYS,
    tableFileBytes,
    rssMethod: initial.process.rssMethod,
    initialLoad: { wallMs: initial.process.wallMs, peakRssBytes: initial.process.peakRssBytes },
    recent,
    uniform,
  };
}

/** The dataset: orders by day; the upsert one merges by order_id, the other replaces partitions. */
function pipelineYaml(write: "upsert" | "partition_replace"): string {
  const upsert = write === "upsert" ? "    primary_key: [order_id]\n    order_by: [updated_at]\n    delete_flag: deleted\n" : "";
  return `datasets:
  orders:
    source: {format: parquet, path: deliveries/*.parquet}
    write: ${write}
${upsert}    columns:
      order_id: {type: BIGINT, nullable: false}
      customer_id: BIGINT
      amount: DECIMAL(10,2)
      status: VARCHAR
      order_ts: TIMESTAMP
      updated_at: TIMESTAMP
      deleted: BOOLEAN
    partition:
      day: ${DAY}
`;
}

/**
 * The table: order i on day (i × 7919) mod 180 (7919 is prime to 180, so
 * every day holds 16,666 or 16,667 orders, interleaved in the file); orders
 * of the last week still open, older ones delivered or cancelled. Also
 * written as a Hive-partitioned folder by DuckDB, the table DuckDB's own
 * rewrite starts from.
 */
async function writeTable(duck: BenchDuck, ws: Workspace): Promise<void> {
  await duck.run(
    "COPY (SELECT order_id, (1 + (order_id * 7919) % 200000)::BIGINT AS customer_id, " +
      "CAST(5 + ((order_id * 104729) % 50000) / 100 AS DECIMAL(10,2)) AS amount, " +
      `CASE WHEN d >= ${LAKE_UPSERT_DAYS - 7} THEN (['placed', 'paid', 'shipped'])[1 + order_id % 3] ` +
      "WHEN (order_id * 31) % 20 = 0 THEN 'cancelled' ELSE 'delivered' END AS status, " +
      `TIMESTAMP '${FIRST_DAY}' + to_days(d) + to_seconds((order_id * 3571) % 86400) AS order_ts, ` +
      `TIMESTAMP '${FIRST_DAY}' + to_days(d) + to_seconds((order_id * 3571) % 86400 + 60 * (1 + (order_id * 13) % 600)) AS updated_at, ` +
      "false AS deleted " +
      `FROM (SELECT range::BIGINT AS order_id, ((range * 7919) % ${LAKE_UPSERT_DAYS})::INTEGER AS d FROM range(1, ${LAKE_UPSERT_ROWS + 1}))) ` +
      `TO ${quoteLiteral(ws.table)} (FORMAT parquet)`,
  );
  await duck.run(
    `COPY (SELECT *, ${DAY} AS day FROM read_parquet(${quoteLiteral(ws.table)})) ` +
      `TO ${quoteLiteral(ws.hiveTable)} (FORMAT parquet, PARTITION_BY (day), COMPRESSION snappy)`,
  );
}

/**
 * One delivery of LAKE_UPSERT_KEYS changed keys, picked in a fixed
 * pseudo-random order (order_id × 48271 mod 2^31−1, a bijection) from the
 * last RECENT_DAYS days or from every day: DELETES deleted, MOVES moved a day
 * (the day corrected), the rest with a new status and (every 4th) a 10%
 * lower amount; REPEATED of those delivered twice. Plus UNCHANGED rows of
 * other keys from the OVERLAP_DAYS days before the recent window, as the
 * table holds them. Then the merge it must give, computed here from the table
 * and the delivery, written as the file the full refresh rewrites the table from.
 */
async function prepareVariant(duck: BenchDuck, ws: Workspace, variant: UpsertVariant): Promise<PreparedVariant> {
  const delivery = path.join(ws.dir, "deliveries", `changes-${variant}.parquet`);
  const merged = path.join(ws.dir, "deliveries", `merged-${variant}.parquet`);
  const table = `read_parquet(${quoteLiteral(ws.table)})`;
  const recentFrom = `TIMESTAMP '${FIRST_DAY}' + to_days(${LAKE_UPSERT_DAYS - RECENT_DAYS})`;
  await duck.run(
    `CREATE OR REPLACE TEMP TABLE picked AS SELECT * FROM (SELECT *, row_number() OVER (ORDER BY (order_id * 48271) % 2147483647) AS k FROM ${table} ` +
      `${variant === "recent" ? `WHERE order_ts >= ${recentFrom}` : ""}) WHERE k <= ${LAKE_UPSERT_KEYS}`,
  );
  const nextStatus =
    "CASE status WHEN 'placed' THEN 'paid' WHEN 'paid' THEN 'shipped' WHEN 'shipped' THEN 'delivered' WHEN 'delivered' THEN 'returned' ELSE 'refunded' END";
  const moved = `order_ts + to_days(CASE WHEN order_ts < TIMESTAMP '${FIRST_DAY}' + to_days(1) THEN 1 ELSE -1 END)`;
  const final =
    "SELECT order_id, customer_id, " +
    `CASE WHEN k > ${DELETES + MOVES} AND k % 4 = 0 THEN CAST(amount * 0.9 AS DECIMAL(10,2)) ELSE amount END AS amount, ` +
    `CASE WHEN k > ${DELETES + MOVES} THEN ${nextStatus} ELSE status END AS status, ` +
    `CASE WHEN k > ${DELETES} AND k <= ${DELETES + MOVES} THEN ${moved} ELSE order_ts END AS order_ts, ` +
    `TIMESTAMP '${CHANGED_AT}' + to_seconds(k) AS updated_at, k <= ${DELETES} AS deleted FROM picked`;
  // The older version of a repeated key: an intermediate status, five hours before its final version.
  const older =
    "SELECT order_id, customer_id, amount, 'on hold' AS status, order_ts, " +
    `TIMESTAMP '${CHANGED_AT}' - to_hours(5) + to_seconds(k) AS updated_at, false AS deleted FROM picked ` +
    `WHERE k > ${DELETES + MOVES} AND k <= ${DELETES + MOVES + REPEATED}`;
  const overlap = (day: number) => `TIMESTAMP '${FIRST_DAY}' + to_days(${day})`;
  const unchanged =
    `SELECT ${COLUMNS.join(", ")} FROM (SELECT *, row_number() OVER (ORDER BY (order_id * 69621) % 2147483647) AS u FROM ${table} ` +
    `WHERE order_ts >= ${overlap(LAKE_UPSERT_DAYS - RECENT_DAYS - OVERLAP_DAYS)} AND order_ts < ${overlap(LAKE_UPSERT_DAYS - RECENT_DAYS)} ` +
    `AND order_id NOT IN (SELECT order_id FROM picked)) WHERE u <= ${UNCHANGED}`;
  await duck.run(
    `COPY (SELECT * FROM (${final} UNION ALL ${older} UNION ALL ${unchanged}) ORDER BY updated_at, order_id) TO ${quoteLiteral(delivery)} (FORMAT parquet)`,
  );

  // The expected merge, by its definition: each key's latest delivered row replaces the key's row; a deleted one removes it.
  const mergeToFileMs = await timeMs(async () => {
    await duck.run(
      "CREATE OR REPLACE TEMP TABLE winners AS SELECT * FROM read_parquet(" + quoteLiteral(delivery) + ") " +
        "QUALIFY row_number() OVER (PARTITION BY order_id ORDER BY updated_at DESC) = 1",
    );
    await duck.run(
      `CREATE OR REPLACE TEMP TABLE expected AS SELECT * FROM ${table} t WHERE NOT EXISTS (SELECT 1 FROM winners w WHERE w.order_id = t.order_id) ` +
        "UNION ALL SELECT * FROM winners WHERE NOT deleted",
    );
    await duck.run(`COPY expected TO ${quoteLiteral(merged)} (FORMAT parquet)`);
  });
  const expected = await tableCheck((sql) => duck.rows(sql), "expected", DAY);
  const touched = await duck.number(
    `SELECT count(DISTINCT day) FROM (SELECT ${DAY} AS day FROM winners UNION ALL SELECT ${DAY} FROM ${table} t WHERE order_id IN (SELECT order_id FROM winners))`,
  );
  // A partition changes when its rows do: compared per day by count and row hash, before and after.
  const perDay = (relation: string) => `SELECT ${DAY} AS day, count(*) AS n, sum(${rowHash(DAY)}) AS h FROM ${relation} GROUP BY ALL`;
  const changed = await duck.number(
    `SELECT count(*) FROM (${perDay(table)}) a FULL JOIN (${perDay("expected")}) b USING (day) WHERE a.n IS DISTINCT FROM b.n OR a.h IS DISTINCT FROM b.h`,
  );
  const rows = await duck.number(`SELECT count(*) FROM read_parquet(${quoteLiteral(delivery)})`);
  await duck.run("DROP TABLE expected");
  return {
    variant,
    delivery,
    merged,
    fileBytes: (await fs.stat(delivery)).size,
    rows,
    mergeToFileMs,
    expected,
    expectedTouched: touched,
    expectedChanged: changed,
  };
}

/** DuckDB's hash of a row's values and its partition (as text, so both engines hash the same bytes). */
function rowHash(day: string): string {
  return `hash(concat_ws('|', ${COLUMNS.map((c) => `CAST(${c} AS VARCHAR)`).join(", ")}, ${day}))`;
}

/** Row count and order-insensitive hash of a relation, through whichever engine answers `query`. */
async function tableCheck(query: (sql: string) => Promise<readonly (readonly unknown[])[]>, relation: string, day: string): Promise<TableCheck> {
  const row = (await query(`SELECT count(*), CAST(sum(${rowHash(day)}) AS VARCHAR) FROM ${relation}`))[0];
  return { rows: Number(row?.[0]), hash: String(row?.[1]) };
}

/** The upsert lake's or the full refresh's table, read through lakeswap as a reader sees it. */
async function lakeCheck(lakeDir: string): Promise<TableCheck> {
  const lake = await openEmbeddedLake(lakeDir);
  try {
    return await tableCheck(async (sql) => (await lake.query(sql)).rows, TABLE, "day");
  } finally {
    await lake.close();
  }
}

/** One timed run of one measure, and the table it left. */
interface TimedRun {
  readonly wallMs: number;
  readonly peakRssBytes: number;
  readonly check: TableCheck;
  /** The upsert's report (partition counts, raw layer seconds). */
  readonly report?: UpsertReportJson;
  /** The rewrite's rows and partitions written. */
  readonly written?: { readonly rows: number; readonly partitions: number };
}

/**
 * Times the upsert, the full refresh and DuckDB's rewrite of one delivery,
 * LAKE_UPSERT_ROUNDS rounds, the order rotated each round; checks the table
 * each left; rolls the upsert back after each round, so the next round (and
 * the next delivery) merges into the table as first loaded.
 */
async function measureVariant(ws: Workspace, p: PreparedVariant, progress: (message: string) => void): Promise<VariantFigures> {
  const runs: Record<Measure, TimedRun[]> = { upsert: [], fullRefresh: [], duckdbCopy: [] };
  let rollbacksComplete = true;
  const loadBefore = os.loadavg()[0] ?? 0;
  for (let round = 0; round < LAKE_UPSERT_ROUNDS; round++) {
    const order = [...MEASURES.slice(round % MEASURES.length), ...MEASURES.slice(0, round % MEASURES.length)];
    for (const measure of order) {
      const load = (os.loadavg()[0] ?? 0).toFixed(2);
      progress(`upsert: ${p.variant}, round ${round + 1}/${LAKE_UPSERT_ROUNDS}: timed · ${MEASURE_NAMES[measure]} · load average ${load}`);
      if (measure === "upsert") {
        const run = await lakeswapSync(ws.upsertConfig, p.delivery, ws.upsertLake);
        runs.upsert.push({ ...run.process, report: run.report, check: await lakeCheck(ws.upsertLake) });
        const built = run.report.partitions.filter((x) => x.action === "build").length;
        rollbacksComplete = (await rollBack(ws.upsertLake, run.report.syncId)) === built && rollbacksComplete;
      } else if (measure === "fullRefresh") {
        const run = await lakeswapSync(ws.replaceConfig, p.merged, ws.replaceLake, ["--full-refresh"]);
        const written = { rows: run.report.totals.rows, partitions: run.report.totals.built };
        runs.fullRefresh.push({ ...run.process, written, check: await lakeCheck(ws.replaceLake) });
      } else {
        runs.duckdbCopy.push(await duckdbRewrite(ws, p.delivery, path.join(ws.dir, `copy-${p.variant}`)));
      }
    }
  }
  const loadAfter = os.loadavg()[0] ?? 0;

  const timed = (list: readonly TimedRun[]): TimedProcess => ({
    timing: summarize(list.map((r) => r.wallMs)),
    peakRssBytes: Math.max(...list.map((r) => r.peakRssBytes)),
  });
  const last = (list: readonly TimedRun[]): TimedRun => list.at(-1) as TimedRun;
  const reports = runs.upsert.map((r) => r.report as UpsertReportJson);
  const first = reports[0] as UpsertReportJson;
  const upsert: UpsertSyncFigures = {
    ...timed(runs.upsert),
    built: first.totals.built,
    skipped: first.totals.skipped,
    untouched: LAKE_UPSERT_DAYS - first.totals.built - first.totals.skipped,
    rowsWritten: first.totals.rows,
    reportedRawMs: summarize(reports.map((r) => 1000 * (r.layers.find((l) => l.layer === "raw")?.seconds ?? Number.NaN))),
  };
  const rewrite = (list: readonly TimedRun[]): RewriteFigures => ({ ...timed(list), ...(last(list).written as NonNullable<TimedRun["written"]>) });
  const fullRefresh = rewrite(runs.fullRefresh);
  const duckdbCopy = rewrite(runs.duckdbCopy);

  const same = (c: TableCheck): boolean => c.rows === p.expected.rows && c.hash === p.expected.hash;
  const identical = MEASURES.every((m) => runs[m].every((r) => same(r.check)));
  const partitionsAsExpected = reports.every((r) => r.totals.built === p.expectedChanged && r.totals.built + r.totals.skipped === p.expectedTouched);
  const median = (f: TimedProcess): number => f.timing.medianMs;
  const baseline = median(fullRefresh) <= median(duckdbCopy) ? "fullRefresh" : "duckdbCopy";
  return {
    variant: p.variant,
    description:
      p.variant === "recent"
        ? `changed keys of the last ${RECENT_DAYS} days (late updates of recent orders), unchanged rows of the ${OVERLAP_DAYS} days before`
        : `changed keys spread uniformly over all days (every partition rebuilt), unchanged rows of the same ${OVERLAP_DAYS} days`,
    delivery: {
      rows: p.rows,
      keys: LAKE_UPSERT_KEYS,
      updates: LAKE_UPSERT_KEYS - DELETES - MOVES,
      moves: MOVES,
      deletes: DELETES,
      repeatedKeys: REPEATED,
      unchanged: UNCHANGED,
      fileBytes: p.fileBytes,
    },
    rounds: LAKE_UPSERT_ROUNDS,
    loadAverage: { before: loadBefore, after: loadAfter },
    upsert,
    fullRefresh,
    duckdbCopy,
    mergeToFileMs: p.mergeToFileMs,
    baseline,
    ratios: {
      toBaseline: median(upsert) / Math.min(median(fullRefresh), median(duckdbCopy)),
      toFullRefresh: median(upsert) / median(fullRefresh),
      toDuckdbCopy: median(upsert) / median(duckdbCopy),
      rssToFullRefresh: upsert.peakRssBytes / fullRefresh.peakRssBytes,
    },
    checks: {
      expected: p.expected,
      upsert: last(runs.upsert).check,
      fullRefresh: last(runs.fullRefresh).check,
      duckdbCopy: last(runs.duckdbCopy).check,
      expectedTouched: p.expectedTouched,
      expectedChanged: p.expectedChanged,
      partitionsAsExpected,
      identical,
      rollbacksComplete,
    },
  };
}

/** How the progress lines name each measure. */
const MEASURE_NAMES: Readonly<Record<Measure, string>> = {
  upsert: "lakeswap sync of the delivery (write: upsert)",
  fullRefresh: "lakeswap sync --full-refresh of the merged table (write: partition_replace)",
  duckdbCopy: "DuckDB COPY (merge of the Hive table and the delivery) TO … PARTITION_BY (day)",
};

/** Undoes an upsert sync (untimed), so the next round merges into the same table; returns the partitions moved back. */
async function rollBack(lakeDir: string, syncId: string): Promise<number> {
  const lake = await openEmbeddedLake(lakeDir);
  try {
    return (await rollbackSync(lake, syncId)).partitions.filter((entry) => entry.action === "rolled back").length;
  } finally {
    await lake.close();
  }
}

/**
 * DuckDB's own whole-table rewrite: the merge and the partitioned COPY in one
 * statement, in a process of its own (bench/raw-copy.mjs), into a new folder;
 * then the folder's rows are checked and the folder removed.
 */
async function duckdbRewrite(ws: Workspace, delivery: string, dir: string): Promise<TimedRun> {
  await fs.rm(dir, { recursive: true, force: true });
  const statement =
    `COPY (WITH winners AS (SELECT * FROM read_parquet(${quoteLiteral(delivery)}) QUALIFY row_number() OVER (PARTITION BY order_id ORDER BY updated_at DESC) = 1), ` +
    `current AS (SELECT * EXCLUDE (day) FROM read_parquet(${quoteLiteral(path.join(ws.hiveTable, "**", "*.parquet"))}, hive_partitioning = true)) ` +
    `SELECT *, ${DAY} AS day FROM (SELECT * FROM current c WHERE NOT EXISTS (SELECT 1 FROM winners w WHERE w.order_id = c.order_id) ` +
    "UNION ALL SELECT * FROM winners WHERE NOT deleted)) " +
    `TO ${quoteLiteral(dir)} (FORMAT parquet, PARTITION_BY (day), COMPRESSION snappy)`;
  const run = await runMeasured(process.execPath, [path.join(REPO_ROOT, "bench", "raw-copy.mjs"), statement], { cwd: REPO_ROOT });
  if (run.code !== 0) throw new Error(`DuckDB's rewrite failed (exit ${run.code ?? run.signal}):\n${tail(run.stderr, 20)}`);
  const result = JSON.parse(run.stdout) as { rows: number };
  const partitions = (await fs.readdir(dir)).filter((name) => name.startsWith("day=")).length;
  const duck = await BenchDuck.open();
  try {
    const files = `read_parquet(${quoteLiteral(path.join(dir, "**", "*.parquet"))}, hive_partitioning = true, hive_types = {'day': VARCHAR})`;
    const check = await tableCheck((sql) => duck.rows(sql), files, "day");
    return { wallMs: run.wallMs, peakRssBytes: run.peakRssBytes, check, written: { rows: result.rows, partitions } };
  } finally {
    duck.close();
    await fs.rm(dir, { recursive: true, force: true });
  }
}

/** The part of the sync report this section reads. */
type UpsertReportJson = SyncReportJson & {
  readonly partitions: readonly { readonly partition: string; readonly action: string; readonly reason: string; readonly error?: string }[];
};

/**
 * `node bin/lakeswap.js --lake DIR sync -c CONFIG --input FILE [extra] --json`,
 * measured from outside (wall time, peak RSS); throws unless it exits 0 with
 * no failed partition.
 */
async function lakeswapSync(
  config: string,
  input: string,
  lakeDir: string,
  extra: readonly string[] = [],
): Promise<{ process: Awaited<ReturnType<typeof runMeasured>>; report: UpsertReportJson }> {
  const args = [LAKESWAP_BIN, "--lake", lakeDir, "sync", "-c", config, "--input", input, ...extra, "--json"];
  const run = await runMeasured(process.execPath, args, { cwd: path.dirname(config) });
  let report: UpsertReportJson | undefined;
  try {
    report = JSON.parse(run.stdout) as UpsertReportJson;
  } catch {
    report = undefined;
  }
  const failed = report?.partitions?.find((p) => p.action === "failed");
  if (run.code !== 0 || report?.totals === undefined || failed) {
    const why = failed?.error ?? `exit ${run.code ?? run.signal}: ${tail(run.stderr, 5) || tail(run.stdout, 5)}`;
    throw new Error(`lakeswap sync ${[...extra, path.basename(input)].join(" ")} failed: ${why}`);
  }
  return { process: run, report };
}

/** A first load that built another number of partitions or rows measured nothing. */
function expectBuilt(report: SyncReportJson, partitions: number, rows: number, what: string): void {
  if (report.totals.built !== partitions || report.totals.rows !== rows) {
    throw new Error(`${what} built ${report.totals.built} partitions of ${report.totals.rows} rows, expected ${partitions} of ${rows}`);
  }
}

function count(value: number): string {
  return value.toLocaleString("en-US");
}
