import fs from "node:fs";
import { Worker } from "node:worker_threads";
import { keepForeground } from "../thread-priority.js";

/**
 * How the write-ahead log makes what it wrote durable: `sync` resolves once an fdatasync of the file `fd` that
 * started after the call has ended (so everything written to it before the call is on the disk); a failure rejects
 * with the system error (its `code`, e.g. EIO, kept). One fdatasync runs at a time: the calls made while it runs
 * share the next, which starts as soon as it ends, for the descriptor of the last of them (the log syncs one file
 * at a time). Calls resolve in call order.
 */
export interface Syncer {
  sync(fd: number): Promise<void>;
  close(): Promise<void>;
}

/** Where a log's fdatasyncs run: `pool` (libuv's thread pool, shared with all other file I/O) or `thread` (a thread of its own). */
export type SyncerKind = "pool" | "thread";

export async function startSyncer(kind: SyncerKind): Promise<Syncer> {
  return kind === "thread" ? SyncThread.start() : new PoolSyncer();
}

interface Waiter {
  readonly resolve: () => void;
  readonly reject: (error: Error) => void;
}

/** fdatasyncs through Node's asynchronous file call, on libuv's thread pool. */
class PoolSyncer implements Syncer {
  private running = false;
  /** The calls made while one runs: the next fdatasync's. */
  private next: { fd: number; waiters: Waiter[] } | undefined;

  sync(fd: number): Promise<void> {
    return new Promise((resolve, reject) => {
      if (!this.running) return this.start(fd, [{ resolve, reject }]);
      this.next ??= { fd, waiters: [] };
      this.next.fd = fd;
      this.next.waiters.push({ resolve, reject });
    });
  }

  async close(): Promise<void> {}

  private start(fd: number, waiters: readonly Waiter[]): void {
    this.running = true;
    fs.fdatasync(fd, (error) => {
      for (const waiter of waiters) {
        if (error) waiter.reject(error);
        else waiter.resolve();
      }
      this.running = false;
      const next = this.next;
      this.next = undefined;
      if (next) this.start(next.fd, next.waiters);
    });
  }
}

/**
 * The sync thread: waits for a request (the counter in `state[0]` moving past the last one it served), fdatasyncs
 * the descriptor in `state[1]`, and answers with the counter it read and the error, if any; then at once serves the
 * requests made meanwhile, with one more fdatasync for them all. It never waits for the JavaScript thread between
 * two. Plain CommonJS, evaluated as the thread's script (the compiled CLI is one bundle, with no file of its own).
 */
const SYNC_SCRIPT = `
const { parentPort, workerData } = require("node:worker_threads");
const fs = require("node:fs");
const state = new Int32Array(workerData);
let tid = 0;
try { tid = Number(String(fs.readlinkSync("/proc/thread-self")).split("/").pop()) || 0; } catch {}
parentPort.postMessage({ tid });
let served = 0;
for (;;) {
  Atomics.wait(state, 0, served);
  const request = Atomics.load(state, 0);
  const fd = Atomics.load(state, 1);
  try {
    fs.fdatasyncSync(fd);
    parentPort.postMessage({ request });
  } catch (error) {
    parentPort.postMessage({ request, error: { message: String(error && error.message), code: error && error.code } });
  }
  served = request;
}
`;

/**
 * fdatasyncs on a thread of its own, which `BackgroundThreads` leaves at the normal CPU priority: the collector
 * lowers every other thread but its JavaScript one, libuv's pool included (it runs the landing's DuckDB queries),
 * and a commit waiting there for a lowered thread waits behind the landing. Requests and the descriptor are handed
 * over in shared memory: the calls made while an fdatasync runs are served by the next, which the thread starts as
 * soon as the last ends. Every call made before an fdatasync started resolves when it ends, in call order.
 */
class SyncThread implements Syncer {
  /** [0]: the number of the last request (wraps around at 2^31), [1]: the descriptor to sync. */
  private readonly state: Int32Array;
  private requested = 0;
  private readonly waiting: (Waiter & { readonly request: number })[] = [];
  private failure: Error | undefined;

  private constructor(
    private readonly worker: Worker,
    shared: SharedArrayBuffer,
  ) {
    this.state = new Int32Array(shared);
    worker.on("message", (message: { request: number; error?: { message: string; code?: string } }) => {
      const error = message.error && Object.assign(new Error(message.error.message), { code: message.error.code });
      // Every request up to the one served (counted around the wrap) was made before its fdatasync started.
      while (this.waiting.length > 0 && ((message.request - this.waiting[0]!.request) | 0) >= 0) {
        const call = this.waiting.shift()!;
        if (error) call.reject(error);
        else call.resolve();
      }
      if (this.waiting.length === 0) worker.unref();
    });
    const stopped = (error: Error): void => {
      this.failure ??= error;
      for (const call of this.waiting.splice(0)) call.reject(this.failure);
    };
    worker.on("error", stopped);
    worker.on("exit", (code) => stopped(Object.assign(new Error(`the write-ahead log's sync thread stopped (exit code ${code})`), { code: "EIO" })));
    // It keeps the process alive while a sync is waited for (as a file call on libuv's pool would), and only then.
    worker.unref();
  }

  static start(): Promise<SyncThread> {
    const state = new SharedArrayBuffer(8);
    const worker = new Worker(SYNC_SCRIPT, { eval: true, workerData: state });
    return new Promise((resolve, reject) => {
      worker.once("error", reject);
      worker.once("message", (message: { tid: number }) => {
        worker.off("error", reject);
        // Known before any thread is lowered: the log opens (and starts its syncer) before the collector lowers threads.
        if (message.tid > 0) keepForeground(message.tid);
        resolve(new SyncThread(worker, state));
      });
    });
  }

  sync(fd: number): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    const request = (this.requested = (this.requested + 1) | 0);
    return new Promise((resolve, reject) => {
      this.waiting.push({ request, resolve, reject });
      this.worker.ref();
      // The descriptor first: the thread reads it after the request number.
      Atomics.store(this.state, 1, fd);
      Atomics.store(this.state, 0, request);
      Atomics.notify(this.state, 0);
    });
  }

  async close(): Promise<void> {
    await this.worker.terminate();
  }
}

/** A callback-style fs call as a promise (the callback API: a promise FileHandle costs about twice the CPU per call). */
export function call<T = void>(start: (done: (error: NodeJS.ErrnoException | null, value?: T) => void) => void): Promise<T> {
  return new Promise<T>((resolve, reject) => start((error, value) => (error ? reject(error) : resolve(value as T))));
}

/**
 * Writes `buffers` (`bytes` bytes in all) at `position` of `fd`, going on after a short write, on the calling
 * thread: a write into the page cache, a copy of the bytes, about as long as copying them anywhere else.
 */
export function writeAllSync(fd: number, buffers: readonly Buffer[], position: number, bytes: number): void {
  let written = fs.writevSync(fd, buffers as Buffer[], position);
  while (written < bytes) {
    const more = fs.writevSync(fd, skip(buffers, written), position + written);
    if (more === 0) throw Object.assign(new Error(`short write: ${written} of ${bytes} bytes`), { code: "EIO" });
    written += more;
  }
}

/** `buffers` without their first `count` bytes. */
function skip(buffers: readonly Buffer[], count: number): Buffer[] {
  const rest: Buffer[] = [];
  for (const buffer of buffers) {
    if (count >= buffer.length) count -= buffer.length;
    else {
      rest.push(count > 0 ? buffer.subarray(count) : buffer);
      count = 0;
    }
  }
  return rest;
}
