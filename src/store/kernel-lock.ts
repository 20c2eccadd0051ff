import { spawn, type ChildProcess } from "node:child_process";
import { promises as fs } from "node:fs";
import path from "node:path";
import type { ProcessLock } from "./object-store.js";

/** The exit code flock(1) is told to use when the lock is held by another process (EX_TEMPFAIL). */
const BUSY_EXIT = 75;

/** Set once flock(1) was found missing: every later lock answers "unavailable" without spawning. */
let unavailable: string | undefined;

/**
 * Takes the exclusive kernel lock (flock(2)) of `file` without waiting, for the life of this process.
 *
 * Node 20 has no flock API, so util-linux's flock(1) holds it: a child process that locks `file`, says
 * "locked" and then reads its stdin, a pipe from this process, until the end. The pipe closes when this
 * process ends, however it ends (kill -9 too), so the child exits and the kernel drops the lock; a
 * process that is merely stopped or paused keeps its pipe open and so keeps the lock. Answers "busy"
 * when another process holds the lock, "unavailable" (with the reason) when flock(1) cannot be run.
 */
export async function takeKernelLock(file: string): Promise<ProcessLock | "busy" | { readonly unavailable: string }> {
  if (unavailable !== undefined) return { unavailable };
  await fs.mkdir(path.dirname(file), { recursive: true });
  const child = spawn("flock", ["--nonblock", "--exclusive", "--conflict-exit-code", String(BUSY_EXIT), file, "sh", "-c", "echo locked; exec cat >/dev/null"], {
    stdio: ["pipe", "pipe", "ignore"],
  });
  return new Promise((resolve) => {
    let held: HeldLock | undefined;
    child.once("error", (error: NodeJS.ErrnoException) => {
      if (held) return held.markLost(`its lock process failed: ${error.message}`);
      if (error.code === "ENOENT") unavailable = "flock(1) (util-linux) is not installed";
      resolve({ unavailable: unavailable ?? `flock(1) could not be run: ${error.message}` });
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
