import { promises as fs, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { DirectCopy } from "./direct-copy.js";
import { benchReplace } from "./replace-bench.js";
import { buildReport, renderJson, renderText, type Machine } from "./report.js";
import { benchSwap } from "./swap-bench.js";
import { LARGE_ROWS, SMALL_ROWS } from "./workload.js";

const USAGE = "usage: npm run bench -- [--repeat N] [--moves N] [--json]";

interface BenchOptions {
  /** Timed rounds of the replace benchmark (and first moves onto just-written runs). */
  readonly repeat: number;
  /** Timed pointer moves per partition size. */
  readonly moves: number;
  readonly json: boolean;
}

/** Reads --repeat, --moves and --json from the command line. */
function parseOptions(args: readonly string[]): BenchOptions {
  const { values } = parseArgs({
    args: [...args],
    options: {
      repeat: { type: "string", default: "3" },
      moves: { type: "string", default: "50" },
      json: { type: "boolean", default: false },
    },
  });
  return { repeat: positiveInteger("--repeat", values.repeat), moves: positiveInteger("--moves", values.moves), json: values.json };
}

function positiveInteger(flag: string, text: string): number {
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1) throw new Error(`${flag} must be a positive integer, got '${text}'`);
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

/** Runs both benchmarks in a temporary folder and prints the report. */
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
      { moves: options.moves, freshMoves: options.repeat },
      progress,
    );
    const report = buildReport(machine, replace, swap);
    process.stdout.write(options.json ? renderJson(report) : renderText(report));
    progress("done");
  } finally {
    removeWorkDir();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`bench failed: ${error instanceof Error ? error.message : String(error)}\n${USAGE}\n`);
  process.exitCode = 1;
});
