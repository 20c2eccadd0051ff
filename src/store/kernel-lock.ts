import { spawn, type ChildProcess } from "node:child_process";
import { promises as fs } from "node:fs";
import path from "node:path";
import type { DuckDBConnection } from "@duckdb/node-api";
import { duckdbLoaded } from "../duckdb/duckdb-module.js";
import { processDuckDb } from "../duckdb/duckdb-open.js";
import { errorMessage } from "../model/errors.js";
import { quoteLiteral } from "../model/sql.js";
import type { ProcessLock } from "./object-store.js";

/** What taking a kernel lock answers: the lock, "busy" (another holds it), or why there is no kernel lock here. */
export type KernelLockAnswer = ProcessLock | "busy" | { readonly unavailable: string };

/**
 * Takes the exclusive kernel lock (flock(2)) of `file` without waiting, for the life of this process: "busy" when
 * another open file description holds it (of another process, or a lock of this process taken before), "unavailable"
 * (with the reason) when no kernel lock can be taken here. The kernel drops it when this process ends, however it
 * ends (kill -9 too); a process that is merely stopped or paused keeps it; no child process inherits it.
 *
 * Node 20 has no flock API: lakeswap's DuckDB extension, where it is built and loads, holds the lock on a descriptor
 * of this process (`lakeswap_flock`, native/lakeswap_lock.c), through the process's own small DuckDB (opened on first use);
 * else a util-linux flock(1) child holds it. Both are flock(2) on the same file, so they exclude each other.
 *
 * `native`: true takes it through the extension (flock(1) where the extension is not there: no C compiler,
 * LAKESWAP_NATIVE=off), false through flock(1) alone. By default, through the extension once this process has loaded
 * DuckDB (spawning a child from a process with DuckDB loaded costs tens of milliseconds of CPU, which the extension
 * saves), and through flock(1) before that (a command that never queries need not load DuckDB for its lock; a child
 * of a process without DuckDB is cheap), or where flock(1) is not installed.
 */
export async function takeKernelLock(file: string, options: { readonly native?: boolean } = {}): Promise<KernelLockAnswer> {
  await fs.mkdir(path.dirname(file), { recursive: true });
  const native = options.native ?? duckdbLoaded();
  if (native) {
    const locks = await nativeLocks();
    if (locks) return locks.take(file);
  }
  const answer = await takeWithFlockCommand(file);
  if (options.native === undefined && !native && flockMissing !== undefined) {
    const locks = await nativeLocks();
    if (locks) return locks.take(file);
  }
  return answer;
}

/** The process's native locks, opened on first use; undefined where the extension is not there (then flock(1)). */
let opened: Promise<NativeLocks | undefined> | undefined;

function nativeLocks(): Promise<NativeLocks | undefined> {
  opened ??= processDuckDb().then(({ native }) => ("unavailable" in native ? undefined : new NativeLocks(native)));
  return opened;
}

/** Kernel locks held by lakeswap's extension (lakeswap_flock / lakeswap_funlock) on descriptors of this process. */
class NativeLocks {
  /** Calls one at a time: one connection runs one query at a time. */
  private calls: Promise<unknown> = Promise.resolve();

  constructor(private readonly connection: DuckDBConnection) {}

  async take(file: string): Promise<KernelLockAnswer> {
    let descriptor: bigint;
    try {
      descriptor = BigInt(String(await this.call(`SELECT lakeswap_flock(${quoteLiteral(file)})`)));
    } catch (error) {
      // As flock(1) that cannot open the file: no kernel lock here (the message names the file and why).
      return { unavailable: errorMessage(error).replace(/^[\w ]*Error: /, "") };
    }
    return descriptor < 0n ? "busy" : new NativeLock(this, descriptor);
  }

  /** Closes a descriptor `take` answered: its lock is free once this resolves. */
  async close(descriptor: bigint): Promise<void> {
    await this.call(`SELECT lakeswap_funlock(${descriptor})`);
  }

  /** The one value `sql` answers. */
  private call(sql: string): Promise<unknown> {
    const result = this.calls.then(async () => (await this.connection.runAndReadAll(sql)).getRows()[0]?.[0]);
    this.calls = result.catch(() => undefined);
    return result;
  }
}

/** A kernel lock on a descriptor of this process: it is never lost, only released (or gone with the process). */
class NativeLock implements ProcessLock {
  readonly lost = undefined;
  private released: Promise<void> | undefined;

  constructor(private readonly locks: NativeLocks, private readonly descriptor: bigint) {}

  release(): Promise<void> {
    // Closed once: a descriptor number closed twice could be another file of this process by then.
    this.released ??= this.locks.close(this.descriptor);
    return this.released;
  }
}

/** The exit code flock(1) is told to use when the lock is held by another process (EX_TEMPFAIL). */
const BUSY_EXIT = 75;

/** Set once flock(1) was found missing: every later lock answers "unavailable" without spawning. */
let flockMissing: string | undefined;

/**
 * The lock held by a util-linux flock(1) child: it locks `file`, says "locked" and then reads its stdin, a pipe from
 * this process, until the end. The pipe closes when this process ends, however it ends, so the child exits and the
 * kernel drops the lock; a process that is merely stopped or paused keeps its pipe open and so keeps the lock.
 */
async function takeWithFlockCommand(file: string): Promise<KernelLockAnswer> {
  if (flockMissing !== undefined) return { unavailable: flockMissing };
  const child = spawn("flock", ["--nonblock", "--exclusive", "--conflict-exit-code", String(BUSY_EXIT), file, "sh", "-c", "echo locked; exec cat >/dev/null"], {
    stdio: ["pipe", "pipe", "ignore"],
  });
  return new Promise((resolve) => {
    let held: HeldLock | undefined;
    child.once("error", (error: NodeJS.ErrnoException) => {
      if (held) return held.markLost(`its lock process failed: ${error.message}`);
      if (error.code === "ENOENT") flockMissing = "flock(1) (util-linux) is not installed";
      resolve({ unavailable: flockMissing ?? `flock(1) could not be run: ${error.message}` });
    });
    child.once("exit", (code, signal) => {
      if (held) return held.markLost(`its lock process (flock, pid ${child.pid}) ended (${signal ?? `exit ${code}`})`);
      resolve(code === BUSY_EXIT ? "busy" : { unavailable: `flock(1) ended with ${signal ?? `exit ${code}`} before taking ${file}` });
    });
    child.stdout?.once("data", () => {
      held = new HeldLock(child);
      resolve(held);
    });
  });
}

/** A kernel lock held by a flock(1) child of this process. */
class HeldLock implements ProcessLock {
  lost: string | undefined;
  private released = false;
  private readonly exited: Promise<void>;

  constructor(private readonly child: ChildProcess) {
    this.exited = new Promise((resolve) => child.once("exit", () => resolve()));
    // The child must never keep this process alive: when it ends, the pipe closes and the lock goes with it.
    child.unref();
    (child.stdin as unknown as { unref?: () => void } | null)?.unref?.();
    (child.stdout as unknown as { unref?: () => void } | null)?.unref?.();
    child.stdout?.resume();
  }

  markLost(reason: string): void {
    if (!this.released) this.lost = reason;
  }

  async release(): Promise<void> {
    if (this.released) return;
    this.released = true;
    // Referenced again: this process waits for the child's exit (else it could end first, with a wait unsettled).
    this.child.ref();
    this.child.stdin?.end();
    // Released once the child is gone: a writer of this process that takes the lock next must find it free.
    await this.exited;
  }
}
