import { promises as fs } from "node:fs";
import path from "node:path";
import { quoteLiteral } from "../src/model/sql.js";
import type { BenchAws, ApiCalls } from "./aws-lake.js";
import { BenchDuck } from "./duck.js";
import { FLIGHTS_DAY_EXPRESSION, FLIGHTS_DAYS, FLIGHTS_ROWS, FLIGHTS_TABLE, flightsPipelineYaml, writeFlights } from "./flights.js";
import { lakeswapSync, REPO_ROOT, succeeded, tail, type SyncRun } from "./lakeswap-cli.js";
import { runMeasured, type MeasuredRun, type RssMethod } from "./measured-process.js";
import { settleDisk, summarize, timeMs, type Timing } from "./stats.js";
import {
  loadFlightsTable,
  readFlightsIntoMemory,
  sameHashes,
  straightforwardInNode,
  straightforwardWithDuckDbCopy,
  type PartitionHashes,
} from "./straightforward.js";

/*
 * Issue 10, item 6: one delivery of 3,000,000 flights over 182 days in one
 * Parquet file, as a user meets it.
 *
 * - First load (raw layer only): `lakeswap sync` (the compiled CLI, a process
 *   of its own, on a fresh embedded lake) against a raw DuckDB
 *   `COPY (SELECT *, day …) TO dir (FORMAT parquet, PARTITION_BY (day))` of the
 *   same file, run as a process of its own too (bench/raw-copy.mjs), rounds
 *   interleaved. Both are timed as a user waits for them (process wall time,
 *   start-up included); the COPY statement's own time is shown as well.
 *   Peak RSS of both processes (issue 10, item 7).
 * - Resend (the same file again, nothing to build): `lakeswap sync` against
 *   the straightforward signature (per day: sort by all columns, CSV, sha256),
 *   timed over rows already read (bench/straightforward.ts), in its faster variant.
 */

/** Issue 10's targets for this delivery. */
export const DELIVERY_TARGETS = {
  /** lakeswap sync / raw partitioned COPY, first load. */
  firstLoadRatio: 1.5,
  /** straightforward signature / lakeswap resend. */
  resendSpeedup: 25,
  /** Peak RSS of lakeswap's first-load sync / the raw COPY's. */
  peakRssRatio: 2,
} as const;

/** The delivery, its config and where everything is written. */
export interface FlightsWorkspace {
  readonly dir: string;
  readonly config: string;
  readonly file: string;
  readonly fileBytes: number;
}

/** One measured process, reduced to what the report prints. */
export interface ProcessFigures {
  readonly wallMs: number;
  readonly peakRssBytes: number;
}

/** The first load: lakeswap sync against the raw partitioned COPY. */
interface FirstLoadFigures {
  readonly rounds: number;
  readonly lakeswap: Timing;
  /** The raw-layer seconds of lakeswap's own report (its view of the build, without process start-up and planning). */
  readonly lakeswapReportedRawMs: Timing;
  readonly copy: Timing;
  /** The COPY statement alone, inside its process (no Node start-up, no DuckDB open). */
  readonly copyStatement: Timing;
  /** lakeswap median / COPY process median: the target's measure. */
  readonly ratio: number;
  /** lakeswap median / COPY statement median: stricter context. */
  readonly ratioToStatement: number;
  readonly lakeswapFiles: { readonly files: number; readonly bytes: number };
  readonly copyFiles: { readonly files: number; readonly bytes: number };
  readonly partitionsBuilt: number;
  readonly rowsLanded: number;
}

/** Peak memory of the first load (issue 10, item 7). */
interface MemoryFigures {
  readonly method: RssMethod;
  /** The highest peak RSS over the rounds, of each side. */
  readonly lakeswapPeakRssBytes: number;
  readonly copyPeakRssBytes: number;
  readonly ratio: number;
}

/** The resend: lakeswap against the straightforward signature. */
interface ResendFigures {
  readonly rounds: number;
  readonly lakeswap: Timing;
  readonly lakeswapPeakRssBytes: number;
  /** The in-Node variant over all rows (only with --node-baseline: it is the slower one and takes a minute or more here). */
  readonly straightforwardNode?: number;
  readonly straightforwardCopy: number;
  /** Untimed preparation of each variant: reading the rows into Node, loading them into a DuckDB table. */
  readonly readIntoNodeMs?: number;
  readonly loadIntoDuckDbMs: number;
  readonly baseline: "node" | "copy";
  /** The faster straightforward variant's time / lakeswap's median: the target's measure. */
  readonly speedup: number;
  readonly signatureForm: string;
}

/** What the embedded delivery benchmark measured. */
export interface DeliveryFigures {
  readonly rows: number;
  readonly partitions: number;
  readonly fileBytes: number;
  readonly firstLoad: FirstLoadFigures;
  readonly memory: MemoryFigures;
  readonly resend: ResendFigures;
  readonly checks: {
    /** Every lakeswap resend built nothing and skipped every partition. */
    readonly resendBuiltNothing: boolean;
    /** Both straightforward variants gave the same signature for every day they were compared on (all days, or a sample of days). */
    readonly straightforwardVariantsAgree: boolean;
    readonly straightforwardDaysCompared: number;
  };
}

/** Writes the delivery and the pipeline config (one dataset, raw layer by day) into `workDir/delivery`. */
export async function prepareFlights(workDir: string, progress: (message: string) => void): Promise<FlightsWorkspace> {
  const dir = path.join(workDir, "delivery");
  const file = path.join(dir, "deliveries", "flights.parquet");
  progress(`delivery: generating ${FLIGHTS_ROWS.toLocaleString("en-US")} flights over ${FLIGHTS_DAYS} days into one Parquet file`);
  const duck = await BenchDuck.open();
  let fileBytes: number;
  try {
    fileBytes = await writeFlights(duck, file);
  } finally {
    duck.close();
  }
  const config = path.join(dir, "lakeswap.yaml");
  await fs.writeFile(config, flightsPipelineYaml());
  return { dir, config, file, fileBytes };
}

/** Times the first load and the resend on embedded lakes, and the straightforward signature, in one run. */
export async function benchDelivery(
  flights: FlightsWorkspace,
  options: { readonly rounds: number; readonly nodeBaseline: boolean },
  progress: (message: string) => void,
): Promise<DeliveryFigures> {
  const { rounds } = options;
  const lakeswapRuns: SyncRun[] = [];
  const copyRuns: { process: MeasuredRun; statementMs: number }[] = [];
  for (let round = 1; round <= rounds; round++) {
    const lakeDir = path.join(flights.dir, `lake-${round}`);
    const copyDir = path.join(flights.dir, `copy-${round}`);
    // Alternating which goes first, so a warm page cache or a drifting machine favours neither.
    const lakeswapFirst = round % 2 === 1;
    for (const side of lakeswapFirst ? ["lakeswap", "copy"] : ["copy", "lakeswap"]) {
      progress(`delivery: first load, round ${round}/${rounds}: ${side === "lakeswap" ? "lakeswap sync" : "raw DuckDB partitioned COPY"}`);
      settleDisk();
      if (side === "lakeswap") lakeswapRuns.push(await firstLoad(flights, lakeDir));
      else copyRuns.push(await rawCopy(flights.file, copyDir));
    }
    // Keep the first lake for the resends; the others only take disk space.
    if (round > 1) await fs.rm(lakeDir, { recursive: true, force: true });
  }
  const lakeswapFiles = await parquetFiles(path.join(flights.dir, "lake-1", FLIGHTS_TABLE));
  const copyFiles = await parquetFiles(path.join(flights.dir, "copy-1"));
  for (let round = 2; round <= rounds; round++) await fs.rm(path.join(flights.dir, `copy-${round}`), { recursive: true, force: true });

  const firstReport = lakeswapRuns[0]?.report;
  const partitionsBuilt = firstReport?.totals.built ?? 0;
  const rowsLanded = firstReport?.totals.rows ?? 0;
  if (partitionsBuilt !== FLIGHTS_DAYS || rowsLanded !== FLIGHTS_ROWS) {
    throw new Error(`the first load built ${partitionsBuilt} partitions of ${rowsLanded} rows, expected ${FLIGHTS_DAYS} of ${FLIGHTS_ROWS}`);
  }
  const lakeswap = summarize(lakeswapRuns.map((r) => r.process.wallMs));
  const copy = summarize(copyRuns.map((r) => r.process.wallMs));
  const copyStatement = summarize(copyRuns.map((r) => r.statementMs));
  const firstLoadFigures: FirstLoadFigures = {
    rounds,
    lakeswap,
    lakeswapReportedRawMs: summarize(lakeswapRuns.map((r) => 1000 * (r.report?.layers.find((l) => l.layer === "raw")?.seconds ?? Number.NaN))),
    copy,
    copyStatement,
    ratio: lakeswap.medianMs / copy.medianMs,
    ratioToStatement: lakeswap.medianMs / copyStatement.medianMs,
    lakeswapFiles,
    copyFiles,
    partitionsBuilt,
    rowsLanded,
  };
  const lakeswapPeak = Math.max(...lakeswapRuns.map((r) => r.process.peakRssBytes));
  const copyPeak = Math.max(...copyRuns.map((r) => r.process.peakRssBytes));
  const memory: MemoryFigures = {
    method: lakeswapRuns[0]?.process.rssMethod ?? "proc-polling",
    lakeswapPeakRssBytes: lakeswapPeak,
    copyPeakRssBytes: copyPeak,
    ratio: lakeswapPeak / copyPeak,
  };

  const resendRuns: SyncRun[] = [];
  for (let round = 1; round <= Math.max(rounds, 3); round++) {
    progress(`delivery: resend of the same file, round ${round}/${Math.max(rounds, 3)}`);
    settleDisk();
    const resend = await lakeswapSync({ config: flights.config, input: flights.file, lakeDir: path.join(flights.dir, "lake-1") });
    succeeded(resend);
    resendRuns.push(resend);
  }
  const resendBuiltNothing = resendRuns.every((r) => r.report?.totals.built === 0 && r.report.totals.skipped === FLIGHTS_DAYS);
  if (!resendBuiltNothing) throw new Error(`a resend of the same delivery built something: ${resendRuns.map((r) => `${r.report?.totals.built} built`).join(", ")}`);
  await fs.rm(path.join(flights.dir, "lake-1"), { recursive: true, force: true });

  settleDisk();
  const straight = await timeStraightforward(flights, options.nodeBaseline, progress);
  const resendTiming = summarize(resendRuns.map((r) => r.process.wallMs));
  const baseline = straight.nodeMs !== undefined && straight.nodeMs <= straight.copyMs ? "node" : "copy";
  const resend: ResendFigures = {
    rounds: resendRuns.length,
    lakeswap: resendTiming,
    lakeswapPeakRssBytes: Math.max(...resendRuns.map((r) => r.process.peakRssBytes)),
    straightforwardNode: straight.nodeMs,
    straightforwardCopy: straight.copyMs,
    readIntoNodeMs: straight.readMs,
    loadIntoDuckDbMs: straight.loadMs,
    baseline,
    speedup: Math.min(straight.nodeMs ?? Number.POSITIVE_INFINITY, straight.copyMs) / resendTiming.medianMs,
    signatureForm: resendRuns[0]?.report?.loads[0]?.signing?.form ?? "unknown",
  };
  return {
    rows: FLIGHTS_ROWS,
    partitions: FLIGHTS_DAYS,
    fileBytes: flights.fileBytes,
    firstLoad: firstLoadFigures,
    memory,
    resend,
    checks: { resendBuiltNothing, straightforwardVariantsAgree: straight.agree, straightforwardDaysCompared: straight.daysCompared },
  };
}

async function firstLoad(flights: FlightsWorkspace, lakeDir: string): Promise<SyncRun> {
  await fs.rm(lakeDir, { recursive: true, force: true });
  const run = await lakeswapSync({ config: flights.config, input: flights.file, lakeDir });
  succeeded(run);
  return run;
}

/** The raw baseline: one partitioned COPY of the same rows, with the same partition expression and compression, then fsync of what it wrote (durable, as lakeswap's runs are), in a process of its own. */
async function rawCopy(file: string, dir: string): Promise<{ process: MeasuredRun; statementMs: number }> {
  await fs.rm(dir, { recursive: true, force: true });
  const statement =
    `COPY (SELECT *, ${FLIGHTS_DAY_EXPRESSION} AS day FROM read_parquet(${quoteLiteral(file)})) ` +
    `TO ${quoteLiteral(dir)} (FORMAT parquet, PARTITION_BY (day), COMPRESSION snappy)`;
  const run = await runMeasured(process.execPath, [path.join(REPO_ROOT, "bench", "raw-copy.mjs"), statement, dir], { cwd: REPO_ROOT });
  if (run.code !== 0) throw new Error(`the raw COPY failed (exit ${run.code ?? run.signal}):\n${tail(run.stderr, 20)}`);
  const result = JSON.parse(run.stdout) as { rows: number; copyMs: number };
  if (result.rows !== FLIGHTS_ROWS) throw new Error(`the raw COPY wrote ${result.rows} rows, expected ${FLIGHTS_ROWS}`);
  return { process: run, statementMs: result.copyMs };
}

/** Days whose rows check that both straightforward variants hash the same CSV text, when the in-Node variant is not timed on every day. */
const SAMPLE_DAYS = 3;

/**
 * The straightforward signature over rows read beforehand: the DuckDB variant
 * always, the in-Node variant over every row only with `nodeBaseline` (else
 * on SAMPLE_DAYS days, untimed, to check both hash the same CSV text). Each is
 * timed once: it takes many seconds, so one sample is steady enough.
 */
async function timeStraightforward(
  flights: FlightsWorkspace,
  nodeBaseline: boolean,
  progress: (message: string) => void,
): Promise<{ nodeMs?: number; copyMs: number; readMs?: number; loadMs: number; agree: boolean; daysCompared: number }> {
  const duck = await BenchDuck.open();
  try {
    let nodeMs: number | undefined;
    let readMs: number | undefined;
    let node: PartitionHashes = new Map();
    if (nodeBaseline) {
      progress("delivery: straightforward signature in Node: reading the rows into memory (untimed)");
      let data: Awaited<ReturnType<typeof readFlightsIntoMemory>> | undefined;
      readMs = await timeMs(async () => (data = await readFlightsIntoMemory(duck, flights.file)));
      progress("delivery: straightforward signature in Node: per day sort by all columns, CSV, sha256 (timed)");
      nodeMs = await timeMs(async () => (node = straightforwardInNode(data as NonNullable<typeof data>)));
      data = undefined;
    }
    progress("delivery: straightforward signature with DuckDB: loading the rows into a table (untimed)");
    const loadMs = await timeMs(() => loadFlightsTable(duck, flights.file, "flights"));
    progress("delivery: straightforward signature with DuckDB: per day COPY sorted to CSV, sha256 (timed)");
    let copy: PartitionHashes = new Map();
    const copyMs = await timeMs(async () => (copy = await straightforwardWithDuckDbCopy(duck, "flights", path.join(flights.dir, "csv"))));
    if (copy.size !== FLIGHTS_DAYS) throw new Error(`the straightforward signature found ${copy.size} days, expected ${FLIGHTS_DAYS}`);
    if (!nodeBaseline) {
      progress(`delivery: checking both straightforward variants hash the same CSV text, on ${SAMPLE_DAYS} days`);
      const sample = path.join(flights.dir, "sample.parquet");
      const days = [...copy.keys()].slice(0, SAMPLE_DAYS);
      await duck.run(
        `COPY (SELECT * FROM read_parquet(${quoteLiteral(flights.file)}) WHERE ${FLIGHTS_DAY_EXPRESSION} IN (${days.map(quoteLiteral).join(", ")})) ` +
          `TO ${quoteLiteral(sample)} (FORMAT PARQUET)`,
      );
      node = straightforwardInNode(await readFlightsIntoMemory(duck, sample));
      copy = new Map(days.map((day) => [day, copy.get(day) as string]));
    }
    const agree = sameHashes(node, copy);
    if (!agree) throw new Error("the two straightforward variants give different signatures: they do not hash the same CSV text");
    return { nodeMs, copyMs, readMs, loadMs, agree, daysCompared: copy.size };
  } finally {
    duck.close();
  }
}

/** The Parquet files under a folder (recursively) and their bytes. */
async function parquetFiles(dir: string): Promise<{ files: number; bytes: number }> {
  let files = 0;
  let bytes = 0;
  const entries = await fs.readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
  for (const entry of entries) {
    if (!entry.isFile() || !entry.name.endsWith(".parquet")) continue;
    files += 1;
    bytes += (await fs.stat(path.join(entry.parentPath, entry.name))).size;
  }
  return { files, bytes };
}

/** The same delivery on AWS (emulated): first load and resends, with the API calls each made. Context, no target. */
export interface AwsDeliveryFigures {
  readonly firstLoad?: ProcessFigures & { readonly calls: ApiCalls; readonly built: number };
  readonly resend?: { readonly timing: Timing; readonly calls: ApiCalls; readonly skipped: number };
  /** Why a part was not measured (stopped at its time limit). */
  readonly note?: string;
}

/** Syncs the delivery into a fresh AWS lake on the emulators, then resends it twice; each sync stops after `timeoutMs`. */
export async function benchDeliveryAws(
  flights: FlightsWorkspace,
  aws: BenchAws,
  timeoutMs: number,
  progress: (message: string) => void,
): Promise<AwsDeliveryFigures> {
  const { env } = aws.lake("flights");
  const sync = (): Promise<SyncRun> => lakeswapSync({ config: flights.config, input: flights.file, env, timeoutMs });
  progress("aws: first load of the flights delivery");
  const first = await aws.counting(sync);
  if (first.result.failure !== undefined) return { note: `the first load on AWS failed: ${first.result.failure}` };
  if (first.result.report === undefined) {
    return { note: `the first load on AWS was stopped after ${(timeoutMs / 1000).toFixed(0)} s (--aws-budget); no resend measured` };
  }
  const firstLoad = {
    wallMs: first.result.process.wallMs,
    peakRssBytes: first.result.process.peakRssBytes,
    calls: first.calls,
    built: first.result.report.totals.built,
  };
  const resends: { ms: number; calls: ApiCalls; skipped: number }[] = [];
  for (let round = 1; round <= 2; round++) {
    progress(`aws: resend of the flights delivery, round ${round}/2`);
    const again = await aws.counting(sync);
    if (again.result.failure !== undefined) return { firstLoad, note: `a resend on AWS failed: ${again.result.failure}` };
    if (again.result.report === undefined) return { firstLoad, note: `a resend on AWS was stopped after ${(timeoutMs / 1000).toFixed(0)} s` };
    resends.push({ ms: again.result.process.wallMs, calls: again.calls, skipped: again.result.report.totals.skipped });
  }
  const last = resends.at(-1) as (typeof resends)[number];
  return { firstLoad, resend: { timing: summarize(resends.map((r) => r.ms)), calls: last.calls, skipped: last.skipped } };
}
