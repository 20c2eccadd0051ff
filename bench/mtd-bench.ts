import { promises as fs } from "node:fs";
import path from "node:path";
import { loadPipelineConfig, type PipelineConfig } from "../src/config/pipeline-config.js";
import { writeMtdPipeline } from "../src/demo/mtd-demo.js";
import type { Lake } from "../src/lake/lake.js";
import { Pipeline, type SyncReport } from "../src/pipeline/pipeline.js";
import { quoteLiteral } from "../src/model/sql.js";
import { openEmbeddedLake } from "../src/open/open-lake.js";
import { BenchDuck } from "./duck.js";
import { LayerFloors, incrementalAgainstFloor, type SmallBuildFigures } from "./small-builds.js";
import { timeMs } from "./stats.js";

/** Deliveries of the month-to-date replay: delivery k carries days 1..k. */
const MTD_DELIVERIES = 30;

/** Orders per day. */
const MTD_ROWS_PER_DAY = 2_000;

/** The delivery that first carries the late correction of an earlier day, and that day. */
const MTD_CORRECTION = { delivery: 20, day: 3 } as const;

const LAYERS = ["raw", "stage", "analytics"] as const;
type LayerName = (typeof LAYERS)[number];

/** Built and skipped partitions of one layer in one sync. */
interface LayerCount {
  readonly built: number;
  readonly skipped: number;
}

/** One sync of one delivery. */
export interface MtdSync {
  readonly ms: number;
  /** Each layer's share of the sync (its report's seconds), in ms. */
  readonly layerMs: Readonly<Record<LayerName, number>>;
  readonly layers: Readonly<Record<LayerName, LayerCount>>;
  readonly built: number;
  readonly skipped: number;
}

/** One delivery, synced incrementally and with a full refresh. */
interface MtdDelivery {
  readonly delivery: number;
  readonly days: number;
  readonly rows: number;
  readonly note: string;
  readonly incremental: MtdSync;
  readonly full: MtdSync;
  /** Partitions the incremental sync should build: the new day (raw, stage), its month (analytics), plus the corrected day. */
  readonly expectedIncrementalBuilds: number;
}

/** Totals over all deliveries, per mode. */
interface MtdTotals {
  readonly built: number;
  readonly skipped: number;
  readonly ms: number;
  readonly layers: Readonly<Record<LayerName, LayerCount>>;
}

/** What the month-to-date replay measured. */
export interface MtdFigures {
  readonly deliveries: readonly MtdDelivery[];
  readonly rowsPerDay: number;
  readonly rowsDelivered: number;
  readonly concurrency: number;
  readonly correction: { readonly delivery: number; readonly day: number };
  readonly incremental: MtdTotals;
  readonly full: MtdTotals;
  readonly ratios: {
    /** Full-refresh builds / incremental builds. */
    readonly builds: number;
    /** Full-refresh wall time / incremental wall time. */
    readonly time: number;
  };
  /** Issue 27, item 4: single-partition builds against their COPY and fsync, and the last incremental sync against its floor process. */
  readonly smallBuilds?: SmallBuildFigures;
  readonly checks: {
    /** Every delivery's incremental builds matched the expectation. */
    readonly incrementalBuildsAsExpected: boolean;
    /** The analytics table is the same in both lakes, and equal to the month computed straight from the last delivery. */
    readonly analyticsMatch: boolean;
    readonly analyticsRows: number;
  };
}

/** Where and how much of the replay runs. */
export interface MtdOptions {
  /** Deliveries replayed (the first ones of the month); default MTD_DELIVERIES. */
  readonly deliveries?: number;
  /** Opens the lake of each mode ("incremental", "full"); default an embedded lake in the work folder. */
  readonly openLake?: (mode: "incremental" | "full") => Promise<Lake>;
  /** Names the work folder and the progress lines; default "mtd". */
  readonly name?: string;
  /** Measure small builds against their floors (embedded lakes only; the CLI must be built): rounds of the per-sync measure. */
  readonly floorRounds?: number;
}

/** Deliveries before this one are not measured against floors (the first syncs still warm DuckDB and the file cache). */
const FLOOR_FROM_DELIVERY = 5;

/** Partitions of one layer built at once in the replay: lakeswap's default. */
const MTD_CONCURRENCY = 4;

/** The month's orders: MTD_ROWS_PER_DAY a day in November 2026, deterministic. */
const MONTH_SELECT = [
  "SELECT (d * 100000 + i)::BIGINT AS order_id,",
  "  (1 + ((d * 2000 + i) * 7919) % 5000)::BIGINT AS customer_id,",
  "  CAST(5 + (((d * 2000 + i) * 104729) % 20000) / 100 AS DECIMAL(10,2)) AS amount,",
  "  CASE WHEN ((d * 2000 + i) * 31) % 10 = 0 THEN 'cancelled' ELSE 'completed' END AS status,",
  "  TIMESTAMP '2026-11-01' + to_days((d - 1)::INTEGER) + to_seconds(((d * 2000 + i) * 3571) % 86400) AS order_ts",
  `FROM range(1, ${MTD_DELIVERIES + 1}) AS days(d), range(${MTD_ROWS_PER_DAY}) AS orders(i)`,
].join("\n");

/**
 * Replays 30 cumulative deliveries of one month through the 3-layer pipeline,
 * incrementally on one lake and with `fullRefresh` on another, delivery by
 * delivery in turn; times each sync and counts built and skipped partitions.
 */
export async function benchMtd(workDir: string, progress: (message: string) => void, options: MtdOptions = {}): Promise<MtdFigures> {
  const name = options.name ?? "mtd";
  const count = options.deliveries ?? MTD_DELIVERIES;
  const dir = path.join(workDir, name);
  const deliveriesDir = path.join(dir, "deliveries");
  // The same pipeline as `lakeswap demo mtd`.
  const config = loadPipelineConfig(await writeMtdPipeline(dir, { concurrency: MTD_CONCURRENCY }));

  progress(`${name}: writing ${count} cumulative CSV deliveries (${MTD_ROWS_PER_DAY.toLocaleString("en-US")} rows a day)`);
  const files = (await writeDeliveries(deliveriesDir)).slice(0, count);

  const open = options.openLake ?? ((lake: string) => openEmbeddedLake(path.join(dir, `lake-${lake}`)));
  const incrementalLake = await open("incremental");
  const fullLake = await open("full");
  try {
    const deliveries: MtdDelivery[] = [];
    const floors = options.floorRounds !== undefined ? new LayerFloors(dir) : undefined;
    const incrementalDir = path.join(dir, "lake-incremental");
    const lakeBeforeLast = path.join(dir, "lake-before-last");
    for (const [index, file] of files.entries()) {
      const k = index + 1;
      progress(`${name}: delivery ${k}/${count} (days 1-${k}), incremental then full refresh`);
      if (floors && k === files.length) await fs.cp(incrementalDir, lakeBeforeLast, { recursive: true, verbatimSymlinks: true });
      // Interleaved, so drift of the machine weighs on both modes alike.
      const incremental = await syncOnce(incrementalLake, config, file, false);
      const correction = k === MTD_CORRECTION.delivery;
      if (floors && k >= FLOOR_FROM_DELIVERY && !correction) {
        await floors.measure(incrementalDir, `2026-11-${String(k).padStart(2, "0")}`, incremental.layerMs);
      }
      const full = await syncOnce(fullLake, config, file, true);
      deliveries.push({
        delivery: k,
        days: k,
        rows: k * MTD_ROWS_PER_DAY,
        note: correction ? `late correction of day ${MTD_CORRECTION.day}` : "",
        incremental,
        full,
        expectedIncrementalBuilds: correction ? 5 : 3,
      });
    }
    progress(`${name}: comparing the analytics tables of both lakes with the month computed from the last delivery`);
    const checks = await checkAnalytics(incrementalLake, fullLake, files.at(-1) as string, count);
    let smallBuilds: SmallBuildFigures | undefined;
    if (floors) {
      progress(`${name}: the last delivery's incremental sync (lakeswap sync, a process) against its floor (bench/mtd-floor.mjs), ${options.floorRounds} rounds`);
      const incremental = await incrementalAgainstFloor({
        lakeBefore: lakeBeforeLast,
        config: config.file,
        delivery: files.at(-1) as string,
        deliveryNumber: files.length,
        day: `2026-11-${String(files.length).padStart(2, "0")}`,
        scratch: dir,
        rounds: options.floorRounds ?? 3,
      });
      smallBuilds = floors.figures(incremental);
    }
    const incremental = totalsOf(deliveries.map((d) => d.incremental));
    const full = totalsOf(deliveries.map((d) => d.full));
    return {
      deliveries,
      rowsPerDay: MTD_ROWS_PER_DAY,
      rowsDelivered: deliveries.reduce((sum, d) => sum + d.rows, 0),
      concurrency: config.concurrency,
      correction: MTD_CORRECTION,
      incremental,
      full,
      ratios: { builds: full.built / incremental.built, time: full.ms / incremental.ms },
      smallBuilds,
      checks: {
        incrementalBuildsAsExpected: deliveries.every((d) => d.incremental.built === d.expectedIncrementalBuilds),
        ...checks,
      },
    };
  } finally {
    await incrementalLake.close();
    await fullLake.close();
  }
}

/**
 * Writes the cumulative deliveries: delivery k holds days 1..k, rows in an order
 * of their own, updated_at = the delivery's export time (ignored by the signature);
 * from delivery MTD_CORRECTION.delivery on, one amount and one status of an earlier day are corrected.
 */
async function writeDeliveries(dir: string): Promise<string[]> {
  const duck = await BenchDuck.open();
  try {
    await duck.run(`CREATE TABLE month AS ${MONTH_SELECT}`);
    const { day } = MTD_CORRECTION;
    const fixedAmount = day * 100000 + 7;
    const cancelled = day * 100000 + 11;
    const files: string[] = [];
    for (let k = 1; k <= MTD_DELIVERIES; k++) {
      const corrected = k >= MTD_CORRECTION.delivery;
      const amount = corrected ? `CASE WHEN order_id = ${fixedAmount} THEN amount + 100 ELSE amount END` : "amount";
      const status = corrected ? `CASE WHEN order_id = ${cancelled} THEN 'cancelled' ELSE status END` : "status";
      const file = path.join(dir, `orders_2026-11-${String(k).padStart(2, "0")}.csv`);
      await duck.run(
        `COPY (SELECT order_id, customer_id, ${amount} AS amount, ${status} AS status, order_ts, ` +
          `TIMESTAMP '2026-11-01 06:00:00' + to_days(${k}) + to_seconds(order_id % 3600) AS updated_at ` +
          `FROM month WHERE order_ts < TIMESTAMP '2026-11-01' + to_days(${k}) ORDER BY hash(order_id, ${k})) ` +
          `TO ${quoteLiteral(file)} (FORMAT CSV, HEADER true)`,
      );
      files.push(file);
    }
    return files;
  } finally {
    duck.close();
  }
}

async function syncOnce(lake: Lake, config: PipelineConfig, file: string, fullRefresh: boolean): Promise<MtdSync> {
  let report: SyncReport | undefined;
  const ms = await timeMs(async () => {
    report = await new Pipeline(lake, config, { inputs: [file], fullRefresh }).sync();
  });
  const done = report as SyncReport;
  if (done.totals.failed > 0) {
    const failed = done.partitions.find((p) => p.action === "failed");
    throw new Error(`a ${fullRefresh ? "full-refresh" : "incremental"} sync of ${path.basename(file)} failed: ${failed?.table}/${failed?.partition}: ${failed?.error}`);
  }
  const layers = Object.fromEntries(
    LAYERS.map((name) => {
      const layer = done.layers.find((l) => l.layer === name);
      return [name, { built: layer?.built ?? 0, skipped: layer?.skipped ?? 0 }];
    }),
  ) as Record<LayerName, LayerCount>;
  const layerMs = Object.fromEntries(LAYERS.map((name) => [name, (done.layers.find((l) => l.layer === name)?.seconds ?? 0) * 1000])) as Record<LayerName, number>;
  return { ms, layerMs, layers, built: done.totals.built, skipped: done.totals.skipped };
}

function totalsOf(syncs: readonly MtdSync[]): MtdTotals {
  const layers = Object.fromEntries(
    LAYERS.map((name) => [
      name,
      { built: syncs.reduce((sum, s) => sum + s.layers[name].built, 0), skipped: syncs.reduce((sum, s) => sum + s.layers[name].skipped, 0) },
    ]),
  ) as Record<LayerName, LayerCount>;
  return {
    built: syncs.reduce((sum, s) => sum + s.built, 0),
    skipped: syncs.reduce((sum, s) => sum + s.skipped, 0),
    ms: syncs.reduce((sum, s) => sum + s.ms, 0),
    layers,
  };
}

/** The analytics rows of both lakes, and the same month computed directly from the last delivery's CSV. */
async function checkAnalytics(incremental: Lake, full: Lake, lastDelivery: string, days: number): Promise<{ analyticsMatch: boolean; analyticsRows: number }> {
  const sql = "SELECT month, order_day, CAST(orders AS INTEGER) AS orders, CAST(revenue AS VARCHAR) AS revenue FROM orders_monthly ORDER BY ALL";
  const fromLake = async (lake: Lake): Promise<string> => JSON.stringify((await lake.query(sql)).rows);
  const duck = await BenchDuck.open();
  try {
    const direct = JSON.stringify(
      await duck.rows(
        `SELECT strftime(order_ts, '%Y-%m') AS month, strftime(order_ts, '%Y-%m-%d') AS order_day, count(*)::INTEGER AS orders, ` +
          `CAST(CAST(sum(amount) AS DECIMAL(18,2)) AS VARCHAR) AS revenue ` +
          `FROM read_csv(${quoteLiteral(lastDelivery)}, header = true, types = {'amount': 'DECIMAL(10,2)', 'order_ts': 'TIMESTAMP'}) ` +
          `WHERE status = 'completed' GROUP BY ALL ORDER BY ALL`,
      ),
    );
    const a = await fromLake(incremental);
    const b = await fromLake(full);
    const rows = (JSON.parse(a) as unknown[]).length;
    const match = a === b && a === direct && rows === days;
    if (!match) throw new Error("the analytics tables of the incremental and full-refresh lakes differ from each other or from the month computed directly");
    return { analyticsMatch: match, analyticsRows: rows };
  } finally {
    duck.close();
  }
}
