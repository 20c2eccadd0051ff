import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { runMeasured, type MeasuredRun } from "./measured-process.js";
import { timeMs } from "./stats.js";

/** The repository the benchmark runs in. */
export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/** The published entry point, as `npx lakeswap` runs it: the compiled, bundled CLI in dist/bundle/. */
export const LAKESWAP_BIN = path.join(REPO_ROOT, "bin", "lakeswap.js");

/**
 * Compiles src/ to dist/ with `npm run build`, so the CLI benchmarks run the
 * code as it is now, compiled once, with no TypeScript loader in the timed
 * processes. Returns the build's wall time; throws with tsc's output if it fails.
 */
export async function buildDist(): Promise<number> {
  let output = "";
  let code: number | null = null;
  const ms = await timeMs(
    () =>
      new Promise<void>((resolve, reject) => {
        const child = spawn("npm", ["run", "build", "--silent"], { cwd: REPO_ROOT, stdio: ["ignore", "pipe", "pipe"] });
        child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
        child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
        child.on("error", reject);
        child.on("close", (exitCode) => {
          code = exitCode;
          resolve();
        });
      }),
  );
  if (code !== 0) throw new Error(`npm run build failed (exit ${code}), so the CLI benchmarks cannot run the current code:\n${tail(output, 40)}`);
  if (!existsSync(path.join(REPO_ROOT, "dist", "bundle", "cli.cjs"))) throw new Error("npm run build left no dist/bundle/cli.cjs");
  return ms;
}

/** The part of `lakeswap sync --json`'s report the benchmarks read. */
export interface SyncReportJson {
  readonly syncId: string;
  readonly totals: { readonly built: number; readonly skipped: number; readonly failed: number; readonly rows: number };
  readonly layers: readonly { readonly layer: string; readonly table: string; readonly built: number; readonly skipped: number; readonly seconds: number }[];
  readonly loads: readonly { readonly rowsRead: number; readonly rowsLoaded: number; readonly signing?: { readonly form?: string; readonly reason?: string } }[];
  /** The Iceberg commits of the sync. */
  readonly snapshots?: readonly IcebergCommitJson[];
}

/** One Iceberg commit in the report (src/lake/commit/iceberg-commit.ts `IcebergCommit`), the fields the benchmarks read. */
export interface IcebergCommitJson {
  readonly table: string;
  readonly ms: number;
  readonly filesWritten: number;
  readonly bytesWritten: number;
  readonly catalogCalls: number;
  readonly manifestsReused: number;
  readonly addedFiles: number;
  readonly deletedFiles: number;
}

/** One `lakeswap sync` process: how it ran, its report (none if it was stopped at its time limit), and why it failed, if it did. */
export interface SyncRun {
  readonly process: MeasuredRun;
  readonly report?: SyncReportJson;
  /** The error of a sync that exited non-zero or reported failed partitions (the first failed partition's, or the command's). */
  readonly failure?: string;
}

/** A `lakeswap sync` as a user runs it. */
export interface SyncCommand {
  /** The pipeline config. */
  readonly config: string;
  /** The delivery file (`--input`). */
  readonly input: string;
  /** The embedded lake folder (`--lake`); leave out on AWS (the environment names the target). */
  readonly lakeDir?: string;
  /** Environment of the process (AWS endpoints and target). */
  readonly env?: Readonly<Record<string, string>>;
  /** Stop the sync after this long; the run then has no report and `process.timedOut` is set. */
  readonly timeoutMs?: number;
}

/**
 * Runs `node bin/lakeswap.js [--lake DIR] sync -c CONFIG --input FILE --json`
 * and measures the process (wall time, peak RSS). A sync stopped at its time
 * limit has no report; one that failed (non-zero exit, or failed partitions in
 * its report) says why in `failure`: the caller decides whether that stops it.
 */
export async function lakeswapSync(command: SyncCommand): Promise<SyncRun> {
  const lake = command.lakeDir === undefined ? [] : ["--lake", command.lakeDir];
  const args = [LAKESWAP_BIN, ...lake, "sync", "-c", command.config, "--input", command.input, "--json"];
  const run = await runMeasured(process.execPath, args, { cwd: path.dirname(command.config), env: command.env, timeoutMs: command.timeoutMs });
  if (run.timedOut) return { process: run };
  let parsed: unknown;
  try {
    parsed = JSON.parse(run.stdout);
  } catch {
    parsed = undefined;
  }
  const report = isSyncReport(parsed) ? parsed : undefined;
  if (run.code === 0 && report !== undefined && report.totals.failed === 0) return { process: run, report };
  const failedPartition = (parsed as { partitions?: { action?: string; error?: string }[] } | undefined)?.partitions?.find((p) => p.action === "failed");
  const commandError = (parsed as { error?: { message?: string } } | undefined)?.error?.message;
  const failure =
    failedPartition?.error ??
    commandError ??
    (run.code === 0 ? "the sync printed no JSON report" : `exit ${run.code ?? run.signal}: ${tail(run.stderr, 5) || tail(run.stdout, 5)}`);
  return { process: run, report, failure: `${path.basename(command.input)}: ${failure}` };
}

function isSyncReport(value: unknown): value is SyncReportJson {
  return typeof value === "object" && value !== null && "totals" in value && "layers" in value;
}

/** The run's report, or an error saying why the sync failed or was stopped. */
export function succeeded(run: SyncRun): SyncReportJson {
  if (run.failure !== undefined) throw new Error(`lakeswap sync failed: ${run.failure}`);
  if (run.report === undefined) throw new Error(`lakeswap sync was stopped after ${(run.process.wallMs / 1000).toFixed(0)} s`);
  return run.report;
}

/** The last `lines` lines of a text. */
export function tail(text: string, lines: number): string {
  return text.trimEnd().split("\n").slice(-lines).join("\n");
}
