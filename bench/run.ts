import { promises as fs, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { DirectCopy } from "./direct-copy.js";
import { benchMtd } from "./mtd-bench.js";
import { benchReplace } from "./replace-bench.js";
import { buildReport, renderJson, renderText, type Machine } from "./report.js";
import { benchSignature } from "./signature-bench.js";
import { benchSwap } from "./swap-bench.js";
import { LARGE_ROWS, SMALL_ROWS } from "./workload.js";

/** Timed first moves onto just-written runs, per partition size (each copies a run first, so kept small). */
const FRESH_MOVES = 10;

const USAGE = "usage: npm run bench -- [--repeat N] [--moves N] [--json]";

/** A command line the benchmark cannot run with. */
class UsageError extends Error {}

interface BenchOptions {
  /** Timed rounds of the replace benchmark. */
  readonly repeat: number;
  /** Timed pointer moves per partition size. */
  readonly moves: number;
  readonly json: boolean;
}

/** Reads --repeat, --moves and --json from the command line. */
function parseOptions(args: readonly string[]): BenchOptions {
  const flags = readFlags(args);
  return { repeat: positiveInteger("--repeat", flags.repeat), moves: positiveInteger("--moves", flags.moves), json: flags.json };
}

function readFlags(args: readonly string[]): { repeat: string; moves: string; json: boolean } {
  try {
    return parseArgs({
      args: [...args],
      options: {
        repeat: { type: "string", default: "3" },
        moves: { type: "string", default: "50" },
        json: { type: "boolean", default: false },
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

const started = performance.now();

/** Reports one phase on stderr, with the time since the start. */
function progress(message: string): void {
  process.stderr.write(`[bench +${((performance.now() - started) / 1000).toFixed(1)}s] ${message}\n`);
}

/** The cpus, platform, Node and DuckDB versions the figures came from. */
async function describeMachine(): Promise<Machine> {
  const duckdb = await DirectCopy.open();
  try {
    return {
      cpus: os.cpus().length,
      cpuModel: os.cpus()[0]?.model.trim() ?? "unknown",
      platform: `${os.platform()} ${os.arch()}`,
      node: process.version,
      duckdb: await duckdb.version(),
      tmpdir: os.tmpdir(),
    };
  } finally {
    duckdb.close();
  }
}

/** Runs the benchmarks (replace, swap, content signature, month-to-date replay) in a temporary folder and prints one report. */
async function main(): Promise<void> {
  const options = parseOptions(process.argv.slice(2));
  const workDir = await fs.mkdtemp(path.join(os.tmpdir(), "lakeswap-bench-"));
  const removeWorkDir = (): void => rmSync(workDir, { recursive: true, force: true });
  process.once("SIGINT", () => {
    removeWorkDir();
    process.exit(130);
  });
  try {
    progress(`working in ${workDir}`);
    const machine = await describeMachine();
    const replace = await benchReplace(workDir, LARGE_ROWS, options.repeat, progress);
    const swap = await benchSwap(
      workDir,
      { smallRows: SMALL_ROWS, largeRows: LARGE_ROWS },
      { moves: options.moves, freshMoves: FRESH_MOVES },
      progress,
    );
    const signature = await benchSignature(workDir, progress);
    const mtd = await benchMtd(workDir, progress);
    const report = buildReport(machine, replace, swap, signature, mtd);
    process.stdout.write(options.json ? renderJson(report) : renderText(report));
    progress("done");
  } finally {
    removeWorkDir();
  }
}

main().catch((error: unknown) => {
  const usage = error instanceof UsageError ? `\n${USAGE}` : "";
  process.stderr.write(`bench failed: ${error instanceof Error ? error.message : String(error)}${usage}\n`);
  process.exitCode = 1;
});
