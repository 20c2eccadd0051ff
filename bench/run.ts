import { spawnSync } from "node:child_process";
import { promises as fs, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { openAwsLake } from "../src/open/open-lake.js";
import { BenchAws } from "./aws-lake.js";
import { benchDelivery, benchDeliveryAws, prepareFlights, type FlightsWorkspace } from "./delivery-bench.js";
import { DirectCopy } from "./direct-copy.js";
import { benchFloors } from "./floor-bench.js";
import { benchIceberg } from "./iceberg-bench.js";
import { benchIngest } from "./ingest-bench.js";
import { benchLakeUpsert } from "./lake-upsert-bench.js";
import { BENCHMARKS_PAGE, writeBenchmarksPage } from "./docs-page.js";
import { buildDist } from "./lakeswap-cli.js";
import { benchMetrics } from "./metrics-bench.js";
import { benchMtd } from "./mtd-bench.js";
import { benchPgUpsert } from "./pg-upsert-bench.js";
import { benchReplace } from "./replace-bench.js";
import { buildReport, renderJson, renderText, type AwsFigures, type BenchSections, type Machine } from "./report.js";
import { benchScale, benchScaleAws } from "./scale-bench.js";
import { benchSignature } from "./signature-bench.js";
import { benchSwap } from "./swap-bench.js";
import { LARGE_ROWS, SMALL_ROWS } from "./workload.js";

/** Timed first moves onto just-written runs, per partition size (each copies a run first, so kept small). */
const FRESH_MOVES = 10;

/** The sections of one run, in the order they run. */
const SECTIONS = ["replace", "signature", "mtd", "delivery", "floor", "scale", "iceberg", "aws", "sink", "upsert", "ingest", "metrics"] as const;
type Section = (typeof SECTIONS)[number];

/** Sections that run the compiled CLI, so need `npm run build` first. */
const CLI_SECTIONS: readonly Section[] = ["mtd", "delivery", "floor", "scale", "iceberg", "aws", "upsert", "ingest"];

const USAGE =
  "usage: npm run bench -- [--json] [--only SECTION,...] [--repeat N] [--moves N] [--rounds N] " +
  "[--node-baseline] [--scale-budget SECONDS] [--aws-budget SECONDS] [--aws-mtd-deliveries N] [--sink-budget SECONDS] [--ingest-batches N] " +
  "[--docs FILE | --no-docs]\n" +
  `sections: ${SECTIONS.join(", ")} (replace = replace and swap; floor = Parquet and CSV deliveries against plain DuckDB's floor; sink = PostgreSQL sink: upsert vs psycopg2 executemany, partition replace vs plain COPY; ` +
  "upsert = lake upsert of 100k changed keys into 3M rows vs rewriting the table; " +
  "ingest = durable events/s through lakeswap serve vs one fdatasync per batch, latency to queryable; " +
  "metrics = the collector's POST path with its prom-client metrics vs a no-op registry)\n" +
  "the figures of each section that ran are also written into docs/benchmarks.md (--docs FILE: another copy of that page; --no-docs: not written)";

/** A command line the benchmark cannot run with. */
class UsageError extends Error {}

interface BenchOptions {
  /** Timed rounds of the replace benchmark. */
  readonly repeat: number;
  /** Timed pointer moves per partition size. */
  readonly moves: number;
  /** Rounds of the flights first load (interleaved with the raw COPY). */
  readonly rounds: number;
  /** Longest a 10,000-partition sync may run, in ms. */
  readonly scaleBudgetMs: number;
  /** Longest one sync on the AWS emulators may run, in ms. */
  readonly awsBudgetMs: number;
  /** Time the straightforward signature in Node over every row too (the slower variant; a minute or more here). */
  readonly nodeBaseline: boolean;
  /** Deliveries of the month-to-date replay on AWS (0: skip it). */
  readonly awsMtdDeliveries: number;
  /** Longest the per-row executemany of the sink section is timed, in ms; past it the rest is extrapolated (and said so). */
  readonly sinkBudgetMs: number;
  /**
   * Batches of 1,000 events each client run of the ingest section posts: 2,000 by default, a run of two to four
   * seconds here. A run of 500 lasts about half a second, and the first requests after the collector sat idle (as it
   * does between runs, while the last one lands) cost it up to twice the CPU of later ones, so shorter runs measure
   * that start more than the collector's pace.
   */
  readonly ingestBatches: number;
  readonly only: readonly Section[];
  readonly json: boolean;
  /** The page the figures are written into (docs/benchmarks.md unless --docs), or undefined with --no-docs. */
  readonly docs: string | undefined;
}

/** Reads the options from the command line. */
function parseOptions(args: readonly string[]): BenchOptions {
  const flags = readFlags(args);
  const only = flags.only === undefined ? [...SECTIONS] : flags.only.split(",").map((name) => name.trim());
  const unknown = only.filter((name) => !(SECTIONS as readonly string[]).includes(name));
  if (unknown.length > 0) throw new UsageError(`--only: unknown section(s) ${unknown.map((n) => `'${n}'`).join(", ")}`);
  return {
    repeat: positiveInteger("--repeat", flags.repeat),
    moves: positiveInteger("--moves", flags.moves),
    rounds: positiveInteger("--rounds", flags.rounds),
    scaleBudgetMs: positiveInteger("--scale-budget", flags["scale-budget"]) * 1000,
    awsBudgetMs: positiveInteger("--aws-budget", flags["aws-budget"]) * 1000,
    awsMtdDeliveries: nonNegativeInteger("--aws-mtd-deliveries", flags["aws-mtd-deliveries"]),
    sinkBudgetMs: positiveInteger("--sink-budget", flags["sink-budget"]) * 1000,
    ingestBatches: positiveInteger("--ingest-batches", flags["ingest-batches"]),
    nodeBaseline: flags["node-baseline"],
    only: only as Section[],
    json: flags.json,
    docs: flags["no-docs"] ? undefined : flags.docs === undefined ? BENCHMARKS_PAGE : path.resolve(flags.docs),
  };
}

function readFlags(args: readonly string[]) {
  try {
    return parseArgs({
      args: [...args],
      options: {
        repeat: { type: "string", default: "3" },
        moves: { type: "string", default: "50" },
        rounds: { type: "string", default: "2" },
        "scale-budget": { type: "string", default: "180" },
        "aws-budget": { type: "string", default: "180" },
        "aws-mtd-deliveries": { type: "string", default: "5" },
        "sink-budget": { type: "string", default: "600" },
        "ingest-batches": { type: "string", default: "2000" },
        only: { type: "string" },
        "node-baseline": { type: "boolean", default: false },
        json: { type: "boolean", default: false },
        docs: { type: "string" },
        "no-docs": { type: "boolean", default: false },
      },
    }).values;
  } catch (error) {
    throw new UsageError(error instanceof Error ? error.message : String(error));
  }
}

function positiveInteger(flag: string, text: string): number {
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1) throw new UsageError(`${flag} must be a positive integer, got '${text}'`);
  return value;
}

function nonNegativeInteger(flag: string, text: string): number {
  const value = Number(text);
  if (!Number.isInteger(value) || value < 0) throw new UsageError(`${flag} must be a whole number, got '${text}'`);
  return value;
}

const started = performance.now();

/** Reports one phase on stderr, with the time since the start. */
function progress(message: string): void {
  process.stderr.write(`[bench +${((performance.now() - started) / 1000).toFixed(1)}s] ${message}\n`);
}

/** The cpus, memory, platform, Node and DuckDB versions the figures came from (load average and totals filled in at the end). */
async function describeMachine(): Promise<Omit<Machine, "loadAverage" | "totalMs" | "buildMs">> {
  const duckdb = await DirectCopy.open();
  try {
    return {
      cpus: os.cpus().length,
      cpuModel: os.cpus()[0]?.model.trim() ?? "unknown",
      memoryGb: Math.round(os.totalmem() / 2 ** 30),
      platform: `${os.platform()} ${os.arch()}`,
      node: process.version,
      duckdb: await duckdb.version(),
      tmpdir: os.tmpdir(),
      startedAt: new Date().toISOString().replace(/\.\d+Z$/, "Z"),
      nodeStart: nodeStart(),
    };
  } finally {
    duckdb.close();
  }
}

/** Rounds of `node -e 0` timed for the machine's Node start-up. */
const NODE_START_ROUNDS = 9;

/**
 * What starting Node costs here before any script runs (median wall time of `node -e 0`), which every process figure
 * includes; and, where the environment sets NODE_EXTRA_CA_CERTS (Node then parses that whole file as it starts), the
 * same without it.
 */
function nodeStart(): Machine["nodeStart"] {
  const median = (env: NodeJS.ProcessEnv): number => {
    const times = Array.from({ length: NODE_START_ROUNDS }, () => {
      const begin = performance.now();
      spawnSync(process.execPath, ["-e", "0"], { env, stdio: "ignore" });
      return performance.now() - begin;
    }).sort((a, b) => a - b);
    return times[Math.floor(times.length / 2)] ?? 0;
  };
  const asIs = median(process.env);
  if (process.env.NODE_EXTRA_CA_CERTS === undefined) return { ms: asIs };
  const { NODE_EXTRA_CA_CERTS: _ignored, ...without } = process.env;
  return { ms: asIs, withoutExtraCaCertsMs: median(without) };
}

/** Runs the selected benchmarks in a temporary folder and prints one report. */
async function main(): Promise<void> {
  const options = parseOptions(process.argv.slice(2));
  const selected = (section: Section): boolean => options.only.includes(section);
  const workDir = await fs.mkdtemp(path.join(os.tmpdir(), "lakeswap-bench-"));
  const removeWorkDir = (): void => rmSync(workDir, { recursive: true, force: true });
  process.once("SIGINT", () => {
    removeWorkDir();
    process.exit(130);
  });
  let aws: BenchAws | undefined;
  try {
    progress(`working in ${workDir}`);
    const loadAtStart = os.loadavg()[0] ?? 0;
    const machine = await describeMachine();
    let buildMs: number | undefined;
    if (CLI_SECTIONS.some(selected)) {
      progress("npm run build: compiling src/ to dist/ once, so the CLI runs as `npx lakeswap` runs it (not timed)");
      buildMs = await buildDist();
    }
    const sections: { -readonly [K in keyof BenchSections]: BenchSections[K] } = {};
    const failed: { section: string; error: string }[] = [];
    // A section that fails is reported as failed; the others still run and print.
    const attempt = async <T>(section: string, work: () => Promise<T>): Promise<T | undefined> => {
      try {
        return await work();
      } catch (error) {
        const message = error instanceof Error ? error.message : String(error);
        progress(`${section} FAILED: ${message}`);
        failed.push({ section, error: message });
        return undefined;
      }
    };
    if (selected("replace")) {
      sections.replace = await attempt("replace", () => benchReplace(workDir, LARGE_ROWS, options.repeat, progress));
      sections.swap = await attempt("swap", () =>
        benchSwap(workDir, { smallRows: SMALL_ROWS, largeRows: LARGE_ROWS }, { moves: options.moves, freshMoves: FRESH_MOVES }, progress),
      );
    }
    if (selected("signature")) sections.signature = await attempt("signature", () => benchSignature(workDir, progress));
    if (selected("mtd")) sections.mtd = await attempt("mtd", () => benchMtd(workDir, progress, { floorRounds: options.rounds }));
    let flights: FlightsWorkspace | undefined;
    if (selected("delivery") || selected("aws")) flights = await attempt("delivery", () => prepareFlights(workDir, progress));
    if (selected("delivery") && flights) {
      const prepared = flights;
      sections.delivery = await attempt("delivery", () => benchDelivery(prepared, { rounds: options.rounds, nodeBaseline: options.nodeBaseline }, progress));
    }
    if (selected("floor")) sections.floors = await attempt("floor", () => benchFloors(workDir, options.rounds, progress));
    if (selected("scale")) sections.scale = await attempt("scale", () => benchScale(workDir, options.scaleBudgetMs, progress));
    if (selected("iceberg")) sections.iceberg = await attempt("iceberg", () => benchIceberg(workDir, progress));
    if (selected("aws")) {
      progress("aws: starting the S3, Glue and Athena emulators");
      const emulators = await attempt("aws", () => BenchAws.start());
      aws = emulators;
      if (emulators) {
        const figures: { -readonly [K in keyof AwsFigures]: AwsFigures[K] } = {};
        if (flights) {
          const prepared = flights;
          figures.delivery = await attempt("aws delivery", () => benchDeliveryAws(prepared, emulators, options.awsBudgetMs, progress));
        }
        figures.scale = await attempt("aws scale", () => benchScaleAws(workDir, emulators, options.awsBudgetMs, progress));
        figures.mtd = await attempt("aws month-to-date", () => awsMtd(workDir, emulators, options.awsMtdDeliveries));
        sections.aws = figures;
      }
    }
    if (selected("sink")) sections.sink = await attempt("sink", () => benchPgUpsert(workDir, { budgetMs: options.sinkBudgetMs }, progress));
    if (selected("upsert")) sections.upsert = await attempt("upsert", () => benchLakeUpsert(workDir, progress));
    if (selected("ingest")) {
      sections.ingest = await attempt("ingest", () => benchIngest(workDir, { batchesPerRun: options.ingestBatches }, progress));
      // Lost or duplicated events, or a server that did not stop cleanly: the figures are printed, and the run fails.
      const problems = sections.ingest?.checks.problems ?? [];
      if (problems.length > 0) {
        progress(`ingest CHECKS FAILED: ${problems.join("; ")}`);
        failed.push({ section: "ingest checks", error: problems.join("; ") });
      }
    }
    if (selected("metrics")) sections.metrics = await attempt("metrics", () => benchMetrics(workDir, progress));
    const report = buildReport(
      { ...machine, loadAverage: { start: loadAtStart, end: os.loadavg()[0] ?? 0 }, totalMs: performance.now() - started, buildMs },
      sections,
      failed,
    );
    process.stdout.write(options.json ? renderJson(report) : renderText(report));
    if (options.docs !== undefined) await writePage(options.docs, report.machine, sections, failed);
    if (failed.length > 0) process.exitCode = 1;
    progress(failed.length > 0 ? `done, ${failed.length} section(s) failed` : "done");
  } finally {
    await aws?.close();
    removeWorkDir();
  }
}

/** Writes the figures of the sections that ran into the benchmarks page; a page that cannot be written fails the run. */
async function writePage(page: string, machine: Machine, sections: BenchSections, failed: { section: string; error: string }[]): Promise<void> {
  const args = process.argv.slice(2).filter((arg) => arg !== "--json");
  const command = `npm run bench${args.length > 0 ? ` -- ${args.join(" ")}` : ""}`;
  try {
    const update = await writeBenchmarksPage({ machine, sections, failed, command }, page);
    const kept = update.keptAfterFailure.length > 0 ? `; kept the earlier figures of ${update.keptAfterFailure.join(", ")} (failed in this run)` : "";
    progress(`${path.relative(process.cwd(), page) || page}: wrote the figures of ${update.written.join(", ") || "no section"}${kept}`);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    progress(`could not write the figures into ${page}: ${message}`);
    failed.push({ section: "docs", error: message });
    process.exitCode = 1;
  }
}

/**
 * The month-to-date replay on AWS, shortened: derived layers run as UNLOADs on
 * the Athena emulator, which downloads each input partition, so the full
 * 30-delivery replay (about 1,000 builds in its full-refresh half) would take
 * far longer than the whole benchmark may. The first `deliveries` are replayed,
 * in-process (Pipeline.sync over an AWS lake), as context.
 */
async function awsMtd(workDir: string, aws: BenchAws, deliveries: number): Promise<AwsFigures["mtd"]> {
  if (deliveries === 0) return { note: "not run (--aws-mtd-deliveries 0)" };
  const figures = await benchMtd(workDir, progress, {
    name: "aws-mtd",
    deliveries,
    openLake: (mode) => openAwsLake(aws.lake(`mtd_${mode}`).target),
  });
  return {
    figures,
    note:
      `shortened to the first ${deliveries} of 30 deliveries (--aws-mtd-deliveries): on the emulators every derived build is an Athena UNLOAD that ` +
      `downloads its inputs, and the full replay would not fit the benchmark's time; in-process Pipeline.sync over an AWS lake, wall time per sync`,
  };
}

main().catch((error: unknown) => {
  const usage = error instanceof UsageError ? `\n${USAGE}` : "";
  process.stderr.write(`bench failed: ${error instanceof Error ? error.message : String(error)}${usage}\n`);
  process.exitCode = 1;
});
