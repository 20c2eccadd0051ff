import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { Lake, LakeSettings } from "../../src/core/lake.js";
import { openEmbeddedLake } from "../../src/open-lake.js";

const here = path.dirname(fileURLToPath(import.meta.url));
export const REPO_ROOT = path.resolve(here, "../..");
const CLI_ENTRY = path.join(here, "run-cli.ts");

/** A fresh temporary folder, removed by `cleanup`. */
export function tempDir(prefix = "lakeswap-test-"): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** A backend the contract suites run against (embedded today; AWS adapters join in later). */
export interface TestBackend {
  readonly name: string;
  /** Opens the lake in-process. */
  open(settings?: LakeSettings): Promise<Lake>;
  /** Arguments and environment that point a child `lakeswap` process at the same lake. */
  readonly cliArgs: readonly string[];
  readonly cliEnv: Readonly<Record<string, string>>;
  cleanup(): Promise<void>;
}

/** A fresh embedded lake in a temporary folder. */
export async function embeddedBackend(): Promise<TestBackend & { readonly lakeDir: string }> {
  const { dir, cleanup } = tempDir();
  const lakeDir = path.join(dir, "lake");
  return {
    name: "local",
    lakeDir,
    open: (settings) => openEmbeddedLake(lakeDir, settings),
    cliArgs: ["--lake", lakeDir],
    cliEnv: {},
    cleanup: async () => cleanup(),
  };
}

/** The backends selected by BACKENDS (comma-separated; default: every backend available here). */
export const BACKEND_FACTORIES: Record<string, () => Promise<TestBackend>> = { local: embeddedBackend };

export function selectedBackends(): string[] {
  const wanted = (process.env.BACKENDS ?? Object.keys(BACKEND_FACTORIES).join(",")).split(",").map((b) => b.trim());
  return wanted.filter((name) => name in BACKEND_FACTORIES);
}

/** Result of one CLI run in a child process. */
export interface CliResult {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs `lakeswap <args>` in a child process (from the TypeScript sources). */
export function runCli(args: readonly string[], env: Record<string, string> = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawnCli(args, env);
    let stdout = "";
    let stderr = "";
    child.stdout?.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    child.on("error", reject);
    child.on("close", (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}

/** Starts `lakeswap <args>` as a child process without waiting for it. */
export function spawnCli(args: readonly string[], env: Record<string, string> = {}): ChildProcess {
  return spawn(process.execPath, ["--import", "tsx", CLI_ENTRY, ...args], {
    cwd: REPO_ROOT,
    env: { ...process.env, NODE_NO_WARNINGS: "1", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
}
