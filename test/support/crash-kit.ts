// Shared kit of the crash, lease and concurrent-reader suites: child processes that speak JSON lines,
// polling with a deadline, and inspection of an embedded lake's folder as a user (or plain DuckDB) sees it.
import { spawn, type ChildProcess } from "node:child_process";
import { promises as fs } from "node:fs";
import net from "node:net";
import path from "node:path";
import { DuckDBInstance } from "@duckdb/node-api";
import { leaseKey, type LeaseRecord } from "../../src/lake/lease.js";
import { manifestKey, type RunManifest } from "../../src/lake/manifest.js";
import { parsePartition } from "../../src/model/partition.js";
import type { Lake } from "../../src/lake/lake.js";
import { bundleOf } from "./bundles.js";
import { childEnvironment } from "./process-env.js";
import { REPO_ROOT, type TestBackend } from "./lake-fixture.js";

/** The lake folder of a backend that keeps its lake in a local folder, or undefined (S3 and the like). */
export function lakeDirOf(backend: TestBackend): string | undefined {
  const dir = (backend as { lakeDir?: unknown }).lakeDir;
  return typeof dir === "string" ? dir : undefined;
}

/** How a child process ended. */
export interface Exit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

/** A child process whose stdout is collected as lines, and whose end can be awaited from the start. */
export class Child {
  readonly process: ChildProcess;
  readonly lines: string[] = [];
  stderr = "";
  readonly exited: Promise<Exit>;
  private partial = "";
  private closed = false;
  private readonly listeners = new Set<() => void>();

  constructor(child: ChildProcess) {
    this.process = child;
    child.stdout?.on("data", (chunk: Buffer) => {
      const parts = (this.partial + chunk.toString()).split("\n");
      this.partial = parts.pop() ?? "";
      this.lines.push(...parts.filter((line) => line.length > 0));
      this.notify();
    });
    child.stderr?.on("data", (chunk: Buffer) => {
      this.stderr += chunk.toString();
      this.notify();
    });
    this.exited = new Promise((resolve, reject) => {
      child.on("error", reject);
      child.on("close", (code, signal) => {
        if (this.partial.length > 0) this.lines.push(this.partial);
        this.partial = "";
        this.closed = true;
        resolve({ code, signal });
        this.notify();
      });
    });
    void this.exited.then(() => undefined, () => undefined);
  }

  get pid(): number {
    const pid = this.process.pid;
    if (pid === undefined) throw new Error("the child process did not start");
    return pid;
  }

  /** Stdout lines parsed as JSON. */
  json<T>(): T[] {
    return this.lines.map((line) => JSON.parse(line) as T);
  }

  /** Sends one JSON line to the child's stdin. */
  send(value: unknown): void {
    this.process.stdin?.write(`${JSON.stringify(value)}\n`);
  }

  /** Waits until `condition` holds on what the child printed so far; fails if the child ends first or time runs out. */
  async until(what: string, condition: () => boolean, timeoutMs = 30_000): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      const check = () => {
        if (condition()) return finish(resolve);
        if (this.closed) return finish(() => reject(new Error(`child ${this.process.pid} ended before ${what}; stderr: ${this.stderr}`)));
      };
      const timer = setTimeout(() => finish(() => reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}; stderr: ${this.stderr}`))), timeoutMs);
      const finish = (settle: () => void) => {
        clearTimeout(timer);
        this.listeners.delete(check);
        settle();
      };
      this.listeners.add(check);
      check();
    });
  }

  /**
   * Waits until the child stopped itself at fault point `point` (LAKESWAP_FAULT=<point>:stop): its word on stderr, then
   * its kernel state. The word comes just before its SIGSTOP takes effect, so a SIGCONT sent on the word alone could
   * arrive first and be lost, leaving the child stopped for good; `orEnd` also settles when the child ends instead.
   */
  async untilStopped(point: string, timeoutMs = 60_000, orEnd = false): Promise<void> {
    const word = `fault point ${point} reached: stopping (pid ${this.process.pid})`;
    await this.until(`the child to stop at ${point}`, () => this.stderr.includes(word) || (orEnd && this.process.exitCode !== null), timeoutMs);
    if (this.stderr.includes(word)) await processStopped(this.pid, timeoutMs);
  }

  /** Waits for the next stdout line (after `seen` lines) and parses it as JSON. */
  async nextJson<T>(seen: number, timeoutMs = 60_000): Promise<T> {
    await this.until(`line ${seen + 1} on stdout`, () => this.lines.length > seen, timeoutMs);
    return JSON.parse(this.lines[seen] as string) as T;
  }

  kill(signal: NodeJS.Signals): void {
    if (this.process.exitCode === null && this.process.signalCode === null) this.process.kill(signal);
  }

  private notify(): void {
    for (const listener of [...this.listeners]) listener();
  }
}

/** Starts one of the helper scripts of test/support (`run-cli.ts` for the CLI) in a child node process, from this run's bundle of it. */
export function spawnScript(script: string, args: readonly string[], env: Readonly<Record<string, string>> = {}): Child {
  return new Child(
    spawn(process.execPath, [bundleOf(script), ...args], {
      cwd: REPO_ROOT,
      env: childEnvironment({ NODE_NO_WARNINGS: "1", ...env }),
      stdio: ["pipe", "pipe", "pipe"],
    }),
  );
}

/** Waits until process `pid` is stopped (state T in /proc), or gone. */
export async function processStopped(pid: number, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const stat = await fs.readFile(`/proc/${pid}/stat`, "utf8").catch(() => undefined);
    // The state follows the command name, which is in parentheses and may itself hold spaces or parentheses.
    const state = stat?.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
    if (state === undefined || state === "T" || state === "Z") return;
    if (Date.now() > deadline) throw new Error(`process ${pid} did not stop within ${timeoutMs} ms (state ${state})`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** A TCP port free on 127.0.0.1 right now (for a server a test starts). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** Polls `probe` every `intervalMs` until it returns something other than undefined/false, or fails after `timeoutMs`. */
export async function until<T>(
  what: string,
  probe: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 30_000,
  intervalMs = 10,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/** The writer lease of a table as stored in the lake, or undefined when nobody holds it. */
export async function leaseHolder(lakeDir: string, table: string): Promise<LeaseRecord | undefined> {
  try {
    return JSON.parse(await fs.readFile(path.join(lakeDir, ...leaseKey(table).split("/")), "utf8")) as LeaseRecord;
  } catch (error) {
    if ((error as { code?: string }).code === "ENOENT") return undefined;
    throw error;
  }
}

/** Names in a folder of the lake (sorted), or [] when it does not exist. */
export async function entries(lakeDir: string, ...folder: string[]): Promise<string[]> {
  try {
    return (await fs.readdir(path.join(lakeDir, ...folder))).sort();
  } catch (error) {
    if ((error as { code?: string }).code === "ENOENT") return [];
    throw error;
  }
}

/** The run ids that have a folder in the partition's runs folder of the embedded lake (empty folders included). */
export async function runFolders(lakeDir: string, table: string, partition: string): Promise<string[]> {
  return (await entries(lakeDir, table, "_runs", ...partition.split("/"))).map((name) => name.replace(/^run=/, ""));
}

/** The files of one run folder. */
export async function runFiles(lakeDir: string, table: string, partition: string, runId: string): Promise<string[]> {
  return entries(lakeDir, table, "_runs", ...partition.split("/"), `run=${runId}`);
}

/** The run ids that have a manifest. */
export async function manifestRuns(lakeDir: string, table: string, partition: string): Promise<string[]> {
  return (await entries(lakeDir, "_lakeswap", "manifests", table, ...partition.split("/")))
    .filter((name) => name.endsWith(".json"))
    .map((name) => name.slice(0, -".json".length));
}

/** The run a partition pointer (symlink) leads to, or undefined. */
export async function pointerTarget(lakeDir: string, table: string, partition: string): Promise<string | undefined> {
  try {
    return path.basename(await fs.readlink(path.join(lakeDir, table, ...partition.split("/")))).replace(/^run=/, "");
  } catch (error) {
    if ((error as { code?: string }).code === "ENOENT") return undefined;
    throw error;
  }
}

/** What a query of one partition saw: rows, distinct tags, smallest tag. */
export interface PartitionView {
  readonly rows: number;
  readonly tags: number;
  readonly tag: string | null;
}

/** Reads one partition with plain DuckDB over the lake folder (a fresh instance, no lakeswap code), as any user could. */
export async function plainDuckDbRead(lakeDir: string, table: string, column: string, value: string): Promise<PartitionView> {
  const instance = await DuckDBInstance.create(":memory:");
  try {
    const connection = await instance.connect();
    try {
      const glob = path.join(lakeDir, table, "*", "*.parquet").replace(/'/g, "''");
      const reader = await connection.runAndReadAll(
        `SELECT count(*) AS n, count(DISTINCT tag) AS tags, min(tag) AS tag FROM read_parquet('${glob}', hive_partitioning = true) ` +
          `WHERE ${column} = '${value.replace(/'/g, "''")}'`,
      );
      const [n, tags, tag] = reader.getRowsJS()[0] ?? [];
      return { rows: Number(n), tags: Number(tags), tag: (tag as string | null) ?? null };
    } finally {
      connection.closeSync();
    }
  } finally {
    instance.closeSync();
  }
}

/** A run's manifest as stored in the embedded lake, or undefined. */
export async function readManifest(lakeDir: string, table: string, partition: string, runId: string): Promise<RunManifest | undefined> {
  try {
    const file = path.join(lakeDir, ...manifestKey(table, parsePartition(partition.split("/").join(",")), runId).split("/"));
    return JSON.parse(await fs.readFile(file, "utf8")) as RunManifest;
  } catch (error) {
    if ((error as { code?: string }).code === "ENOENT") return undefined;
    throw error;
  }
}

/**
 * Reads a lake over and over, `read(lake, n)` for read n (1, 2, ...), pausing `pauseMs` between reads, until
 * stopped; `stop` resolves with the number of reads, or rejects with the first failed read's error.
 */
export function readerLoop(backend: TestBackend, read: (lake: Lake, n: number) => Promise<void>, pauseMs: number): { stop: () => Promise<number> } {
  let wake: () => void = () => undefined;
  let stopping = false;
  const done = (async () => {
    const reader = await backend.open({ readOnly: true });
    let reads = 0;
    try {
      while (!stopping) {
        await read(reader, reads + 1);
        reads += 1;
        await new Promise<void>((resolve) => {
          wake = resolve;
          setTimeout(resolve, pauseMs);
        });
      }
    } finally {
      await reader.close();
    }
    return reads;
  })();
  return {
    stop: async () => {
      stopping = true;
      wake();
      return done;
    },
  };
}
