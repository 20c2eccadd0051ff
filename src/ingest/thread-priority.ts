import { readdirSync } from "node:fs";
import os from "node:os";

/** Threads that keep the normal priority when the others are lowered (the write-ahead logs' sync threads). */
const FOREGROUND = new Set<number>();

/** Keeps thread `tid` (a Linux thread id) at its priority: `BackgroundThreads` never lowers it. */
export function keepForeground(tid: number): void {
  FOREGROUND.add(tid);
}

/** The nice value `lakeswap serve` gives its background threads by default (0 is the normal priority, 19 the lowest). */
export const DEFAULT_BACKGROUND_NICE = 10;

/**
 * Keeps every thread of this process but the JavaScript one at a lower CPU priority (a higher nice value):
 * DuckDB's workers and libuv's pool, which run the landing's queries and the file I/O, and V8's helpers.
 * A collector acknowledges events on its JavaScript thread and lands them in the background; when both want
 * the CPU, the acknowledgements should win, and the write-ahead log holds what the landing has not reached
 * yet (as long as it is under its limit; past it, clients get 503). With the CPU to spare, the nice value
 * changes nothing.
 *
 * Linux only: there a thread's nice value is its own (setpriority with a thread id, see setpriority(2));
 * elsewhere, or without /proc, this does nothing. Threads are made on demand (libuv's pool on the first file
 * operation, DuckDB's workers with its instance), so `lower()` is called again from time to time and lowers
 * the new ones. A thread already at `nice` or lower in priority is left as it is; nothing is ever raised.
 */
export class BackgroundThreads {
  private readonly lowered = new Set<number>();

  /** `nice`: a whole number from 0 to 19, checked by the caller (serve's --background-nice). */
  constructor(readonly nice: number = DEFAULT_BACKGROUND_NICE) {}

  /** Lowers the threads not lowered yet; returns how many it lowered this time. */
  lower(): number {
    if (this.nice === 0 || process.platform !== "linux") return 0;
    let tasks: string[];
    try {
      tasks = readdirSync("/proc/self/task");
    } catch {
      return 0;
    }
    let count = 0;
    for (const task of tasks) {
      const tid = Number(task);
      // The main thread's id is the process id: it answers the requests and stays where it is, as do the logs' sync threads.
      if (!Number.isSafeInteger(tid) || tid === process.pid || FOREGROUND.has(tid) || this.lowered.has(tid)) continue;
      try {
        if (os.getPriority(tid) < this.nice) {
          os.setPriority(tid, this.nice);
          count += 1;
        }
        this.lowered.add(tid);
      } catch {
        // The thread ended between the listing and the call.
      }
    }
    return count;
  }
}
