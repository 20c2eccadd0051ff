import { promises as fs } from "node:fs";
import path from "node:path";
import { quoteLiteral } from "../src/model/sql.js";
import { GLUE_LISTINGS, GLUE_PARTITION_WRITES, sumOf, type ApiCalls, type BenchAws } from "./aws-lake.js";
import { BenchDuck } from "./duck.js";
import { lakeswapSync, type SyncRun } from "./lakeswap-cli.js";
import { settleDisk } from "./stats.js";

/*
 * Issue 10, item 8: many tiny partitions. A delivery of N day partitions of
 * TINY_ROWS rows each (one Parquet file; day keys from 1990-01-01 on, so
 * 10,000 of them span 27 years), synced by the CLI into a fresh lake, then
 * sent again (nothing to build):
 *
 * - embedded, N = 1,000 and 10,000: time per partition, and the 10,000-run
 *   over the 1,000-run (target: at most 12×);
 * - AWS (emulated), N = 100 and 1,000: the API calls by operation. Targets:
 *   a first sync of N new partitions makes at most ceil(N/100) + C Glue
 *   partition writes and at most C Glue listings; a resend makes at most C
 *   calls in all (S3 + Glue + Athena; the delivery is a local file, so none
 *   of them reads it). C = O1_CALLS, the same at every N: that is how
 *   "O(1)" is judged here, and both N are printed to show growth.
 *
 * A sync that would take longer than its budget is stopped (SIGINT); when it
 * was stopped only after exceeding 12× the 1,000-run, the ratio target is
 * judged NOT MET from that lower bound, otherwise it is undecided.
 */

/** Rows per tiny partition. */
const TINY_ROWS = 10;

/** Partition counts of the embedded runs. */
const EMBEDDED_SIZES = [1_000, 10_000] as const;

/** Partition counts of the AWS runs. */
const AWS_SIZES = [100, 1_000] as const;

/** Target: the 10,000-partition run at most this many times the 1,000-partition run. */
export const SCALE_RATIO_TARGET = 12;

/** "O(1)" calls: at most this many, at every N measured. */
export const O1_CALLS = 20;

/** Glue partition writes per new partition allowed by the target (a batch of 100). */
export const GLUE_BATCH = 100;

/** One sync of the tiny delivery: wall time, or how long it ran before it was stopped or failed. */
export interface TinySync {
  readonly ms: number;
  readonly stopped: boolean;
  /** Why the sync failed (it exited non-zero or reported failed partitions). */
  readonly failed?: string;
  readonly msPerPartition: number;
  readonly built?: number;
  readonly skipped?: number;
  readonly calls?: ApiCalls;
}

/** First sync and resend of N tiny partitions. */
export interface TinyRun {
  readonly partitions: number;
  readonly first: TinySync;
  readonly resend?: TinySync;
}

/** The embedded runs and their ratios. */
export interface ScaleFigures {
  readonly rowsPerPartition: number;
  readonly runs: readonly TinyRun[];
  /** 10,000-run / 1,000-run; `lowerBound` when the larger run was stopped (the true ratio is higher). */
  readonly firstRatio?: { readonly value: number; readonly lowerBound: boolean };
  readonly resendRatio?: { readonly value: number; readonly lowerBound: boolean };
  readonly budgetMs: number;
}

/** The AWS runs, with calls by operation. */
export interface AwsScaleFigures {
  readonly rowsPerPartition: number;
  readonly runs: readonly TinyRun[];
  readonly budgetMs: number;
}

/** The partitioned-events pipeline: one dataset, raw layer by day (also the Iceberg bench's, with iceberg: true). */
export const TINY_YAML = [
  "datasets:",
  "  events:",
  "    source:",
  "      format: parquet",
  "      path: deliveries/*.parquet",
  "    columns:",
  "      event_id: {type: BIGINT, nullable: false}",
  "      event_day: {type: DATE, nullable: false}",
  "      kind: VARCHAR",
  "      value: DOUBLE",
  "    partition:",
  "      day: \"strftime(event_day, '%Y-%m-%d')\"",
  "",
].join("\n");

/** Writes the config and one delivery per size; returns the config and each delivery file. */
async function prepareTiny(dir: string, sizes: readonly number[]): Promise<{ config: string; files: Map<number, string> }> {
  await fs.mkdir(path.join(dir, "deliveries"), { recursive: true });
  const config = path.join(dir, "lakeswap.yaml");
  await fs.writeFile(config, TINY_YAML);
  const files = new Map<number, string>();
  const duck = await BenchDuck.open();
  try {
    for (const partitions of sizes) {
      const file = path.join(dir, "deliveries", `events-${partitions}.parquet`);
      await duck.run(
        `COPY (SELECT range::BIGINT AS event_id, DATE '1990-01-01' + (range // ${TINY_ROWS})::INTEGER AS event_day, ` +
          `'kind-' || (range % 7)::VARCHAR AS kind, (range % 1000)::DOUBLE / 10 AS value ` +
          `FROM range(${partitions * TINY_ROWS}) ORDER BY hash(range)) TO ${quoteLiteral(file)} (FORMAT PARQUET)`,
      );
      files.set(partitions, file);
    }
  } finally {
    duck.close();
  }
  return { config, files };
}

/** A measured sync reduced to the report's figures; checks that it built (or skipped) every partition. */
function tinySync(run: SyncRun, partitions: number, expect: "built" | "skipped", calls?: ApiCalls): TinySync {
  const ms = run.process.wallMs;
  if (run.failure !== undefined) return { ms, stopped: false, failed: run.failure, msPerPartition: ms / partitions, calls };
  if (run.report === undefined) return { ms, stopped: true, msPerPartition: ms / partitions, calls };
  const { built, skipped } = run.report.totals;
  if ((expect === "built" ? built : skipped) !== partitions) {
    throw new Error(`a sync of ${partitions} tiny partitions ${expect === "built" ? "built" : "skipped"} ${expect === "built" ? built : skipped}, expected all ${partitions}`);
  }
  return { ms, stopped: false, msPerPartition: ms / partitions, built, skipped, calls };
}

/**
 * Embedded: first sync and resend of 1,000 then 10,000 tiny partitions. The
 * 10,000 syncs stop at the smaller of `budgetMs` and just over 12× the
 * matching 1,000-run (past which the target is known to be missed).
 */
export async function benchScale(workDir: string, budgetMs: number, progress: (message: string) => void): Promise<ScaleFigures> {
  const dir = path.join(workDir, "scale");
  progress(`scale: writing deliveries of ${EMBEDDED_SIZES.join(" and ")} partitions × ${TINY_ROWS} rows`);
  const { config, files } = await prepareTiny(dir, EMBEDDED_SIZES);
  const runs: TinyRun[] = [];
  for (const partitions of EMBEDDED_SIZES) {
    const input = files.get(partitions) as string;
    const lakeDir = path.join(dir, `lake-${partitions}`);
    const smaller = runs[0];
    const limit = (base: TinySync | undefined): number | undefined =>
      base === undefined || base.stopped ? budgetMs : Math.min(budgetMs, base.ms * SCALE_RATIO_TARGET * 1.02 + 500);
    progress(`scale: first sync of ${partitions.toLocaleString("en-US")} tiny partitions (embedded)`);
    settleDisk();
    const first = tinySync(await lakeswapSync({ config, input, lakeDir, timeoutMs: limit(smaller?.first) }), partitions, "built");
    let resend: TinySync | undefined;
    if (!first.stopped && first.failed === undefined) {
      progress(`scale: resend of ${partitions.toLocaleString("en-US")} tiny partitions (embedded)`);
      settleDisk();
      resend = tinySync(await lakeswapSync({ config, input, lakeDir, timeoutMs: limit(smaller?.resend) }), partitions, "skipped");
    }
    runs.push({ partitions, first, resend });
    await fs.rm(lakeDir, { recursive: true, force: true });
  }
  const ratio = (pick: (run: TinyRun) => TinySync | undefined): ScaleFigures["firstRatio"] => {
    const small = pick(runs[0] as TinyRun);
    const large = pick(runs[1] as TinyRun);
    if (small === undefined || large === undefined || small.stopped || small.failed !== undefined || large.failed !== undefined) return undefined;
    return { value: large.ms / small.ms, lowerBound: large.stopped };
  };
  return { rowsPerPartition: TINY_ROWS, runs, firstRatio: ratio((r) => r.first), resendRatio: ratio((r) => r.resend), budgetMs };
}

/** AWS (emulated): first sync and resend of 100 then 1,000 tiny partitions, counting API calls; each sync stops after `budgetMs`. */
export async function benchScaleAws(workDir: string, aws: BenchAws, budgetMs: number, progress: (message: string) => void): Promise<AwsScaleFigures> {
  const dir = path.join(workDir, "scale-aws");
  const { config, files } = await prepareTiny(dir, AWS_SIZES);
  const runs: TinyRun[] = [];
  for (const partitions of AWS_SIZES) {
    const input = files.get(partitions) as string;
    const { env } = aws.lake(`tiny${partitions}`);
    progress(`aws: first sync of ${partitions.toLocaleString("en-US")} tiny partitions`);
    const first = await aws.counting(() => lakeswapSync({ config, input, env, timeoutMs: budgetMs }));
    const firstSync = tinySync(first.result, partitions, "built", first.calls);
    let resend: TinySync | undefined;
    if (!firstSync.stopped && firstSync.failed === undefined) {
      progress(`aws: resend of ${partitions.toLocaleString("en-US")} tiny partitions`);
      const again = await aws.counting(() => lakeswapSync({ config, input, env, timeoutMs: budgetMs }));
      resend = tinySync(again.result, partitions, "skipped", again.calls);
    }
    runs.push({ partitions, first: firstSync, resend });
  }
  return { rowsPerPartition: TINY_ROWS, runs, budgetMs };
}

/** Glue partition writes of a sync (the target's "write calls"). */
export function glueWrites(calls: ApiCalls | undefined): number | undefined {
  return calls === undefined ? undefined : sumOf(calls.glue, GLUE_PARTITION_WRITES);
}

/** Glue listings of a sync (GetPartitions pages, GetTables). */
export function glueListings(calls: ApiCalls | undefined): number | undefined {
  return calls === undefined ? undefined : sumOf(calls.glue, GLUE_LISTINGS);
}
