import { promises as fs } from "node:fs";
import path from "node:path";
import { quoteLiteral } from "../src/model/sql.js";
import { BenchDuck } from "./duck.js";
import { REPO_ROOT, lakeswapSync, succeeded } from "./lakeswap-cli.js";
import { runMeasured } from "./measured-process.js";
import { median, settleDisk, summarize, timeMs, type Timing } from "./stats.js";

/*
 * Issue 27, item 4: small builds without fixed costs, two ways.
 *
 * - Per build (in-process): in each incremental sync of the month-to-date replay the stage layer builds one day and
 *   the analytics layer one month. A layer's time (its share of Pipeline.sync: plan, build, audit, pointer move,
 *   records) is set against the floor of that build: the same SELECT over the same input files, COPYed by plain
 *   DuckDB to one Parquet file that is then fsynced with its folder, timed right after the sync on the same machine.
 *   Target: a layer's time at most 10 ms above its floor (the median of the per-sync differences).
 * - Per sync (processes): the last cumulative delivery (one new day) synced by `lakeswap sync` on a copy of the lake
 *   as it was before it, against bench/mtd-floor.mjs, one plain-DuckDB process that reads the delivery once and
 *   writes only the changed partitions (the day's raw and stage, the month's analytics), durably. Target ≤ 1.5x.
 */

/** Most a small build may cost above its own COPY and fsync, in ms. */
export const SMALL_BUILD_OVERHEAD_TARGET_MS = 10;
/** Most an incremental month-to-date sync may take, as a multiple of its floor's time. */
export const MTD_FLOOR_TARGET = 1.5;

/** One derived layer's single-partition builds against their floors. */
interface LayerOverhead {
  readonly layer: "stage" | "analytics";
  /** The layer's time in each measured sync (ms). */
  readonly time: Timing;
  readonly floor: Timing;
  /** Median of (layer − floor) over the measured syncs, in ms. */
  readonly overheadMs: number;
}

/** What the small-build measure found. */
export interface SmallBuildFigures {
  readonly syncs: number;
  readonly layers: readonly LayerOverhead[];
  readonly incremental?: {
    readonly delivery: number;
    readonly rows: number;
    readonly lakeswap: Timing;
    readonly floor: Timing;
    readonly ratio: number;
  };
}

/** Layer times and their floors, gathered sync by sync. */
export class LayerFloors {
  private readonly samples = { stage: [] as { layerMs: number; floorMs: number }[], analytics: [] as { layerMs: number; floorMs: number }[] };

  constructor(private readonly scratch: string) {}

  /**
   * Times the floors of the day's stage build and the month's analytics build over the lake's current files (read
   * through the embedded lake's pointer folders), and keeps them with the layers' times from the sync's report.
   */
  async measure(lakeDir: string, day: string, layerMs: { stage: number; analytics: number }): Promise<void> {
    const duck = await BenchDuck.open();
    try {
      const raw = quoteLiteral(path.join(lakeDir, "orders_raw", `day=${day}`, "*.parquet"));
      const stage = quoteLiteral(path.join(lakeDir, "orders_stage", "*", "*.parquet"));
      const stageMs = await this.copyAndSync(duck, `SELECT order_id, customer_id, amount, order_ts FROM read_parquet(${raw}) WHERE status = 'completed'`);
      const monthly =
        `SELECT day AS order_day, count(*) AS orders, CAST(sum(amount) AS DECIMAL(18,2)) AS revenue ` +
        `FROM read_parquet(${stage}, hive_partitioning = true, hive_types_autocast = false) WHERE substr(day, 1, 7) = ${quoteLiteral(day.slice(0, 7))} GROUP BY day`;
      const analyticsMs = await this.copyAndSync(duck, monthly);
      this.samples.stage.push({ layerMs: layerMs.stage, floorMs: stageMs });
      this.samples.analytics.push({ layerMs: layerMs.analytics, floorMs: analyticsMs });
    } finally {
      duck.close();
    }
  }

  figures(incremental?: SmallBuildFigures["incremental"]): SmallBuildFigures {
    const layers = (["stage", "analytics"] as const).map((layer): LayerOverhead => {
      const samples = this.samples[layer];
      return {
        layer,
        time: summarize(samples.map((s) => s.layerMs)),
        floor: summarize(samples.map((s) => s.floorMs)),
        overheadMs: median(samples.map((s) => s.layerMs - s.floorMs)),
      };
    });
    return { syncs: this.samples.stage.length, layers, incremental };
  }

  /** The COPY of `query` into a fresh Parquet file, then the fsync of the file and its folder, timed together. */
  private async copyAndSync(duck: BenchDuck, query: string): Promise<number> {
    const folder = await fs.mkdtemp(path.join(this.scratch, "floor-"));
    const file = path.join(folder, "part-0.parquet");
    try {
      return await timeMs(async () => {
        await duck.run(`COPY (${query}) TO ${quoteLiteral(file)} (FORMAT parquet)`);
        for (const target of [file, folder]) {
          const handle = await fs.open(target, "r");
          await handle.sync();
          await handle.close();
        }
      });
    } finally {
      await fs.rm(folder, { recursive: true, force: true });
    }
  }
}

/**
 * The last delivery's incremental sync as a user runs it (`node bin/lakeswap.js sync`, on a fresh copy of the lake
 * as it was before that delivery) against its floor process, rounds interleaved, disk settled before each run.
 */
export async function incrementalAgainstFloor(options: {
  readonly lakeBefore: string;
  readonly config: string;
  readonly delivery: string;
  readonly deliveryNumber: number;
  readonly day: string;
  readonly scratch: string;
  readonly rounds: number;
}): Promise<SmallBuildFigures["incremental"]> {
  const lakeswapMs: number[] = [];
  const floorMs: number[] = [];
  let rows = 0;
  for (let round = 0; round < options.rounds; round++) {
    const lakeDir = path.join(options.scratch, `lake-round-${round}`);
    await fs.cp(options.lakeBefore, lakeDir, { recursive: true, verbatimSymlinks: true });
    settleDisk();
    const run = await lakeswapSync({ config: options.config, input: options.delivery, lakeDir });
    const report = succeeded(run);
    if (report.totals.built !== 3) throw new Error(`the incremental sync of delivery ${options.deliveryNumber} built ${report.totals.built} partitions, not 3 (the new day's raw and stage, the month)`);
    lakeswapMs.push(run.process.wallMs);
    await fs.rm(lakeDir, { recursive: true, force: true });

    const out = path.join(options.scratch, `floor-round-${round}`);
    settleDisk();
    const floor = await runMeasured(process.execPath, [path.join(REPO_ROOT, "bench", "mtd-floor.mjs"), options.delivery, out, options.day], { cwd: REPO_ROOT });
    if (floor.code !== 0) throw new Error(`bench/mtd-floor.mjs failed (exit ${floor.code}): ${floor.stderr.trim()}`);
    rows = (JSON.parse(floor.stdout) as { rows: number }).rows;
    floorMs.push(floor.wallMs);
    await fs.rm(out, { recursive: true, force: true });
  }
  const lakeswap = summarize(lakeswapMs);
  const floor = summarize(floorMs);
  return { delivery: options.deliveryNumber, rows, lakeswap, floor, ratio: lakeswap.medianMs / floor.medianMs };
}
