import fs from "node:fs";
import { Worker } from "node:worker_threads";
import { keepForeground } from "./thread-priority.js";

/**
 * How a group commit of the write-ahead log reaches the disk: `write` puts `bytes` bytes (the `buffers`, in order)
 * at `position` of the file `fd` and fdatasyncs it, resolving only once both are done; a failure rejects with the
 * system error (its `code`, e.g. ENOSPC, kept). The log calls it for one group at a time.
 */
export interface GroupWriter {
  write(fd: number, buffers: readonly Buffer[], position: number, bytes: number): Promise<void>;
  close(): Promise<void>;
}

/** Which writer a log uses: `pool` (libuv's thread pool, shared with all other file I/O) or `thread` (a thread of its own). */
export type GroupWriterKind = "pool" | "thread";

export async function startGroupWriter(kind: GroupWriterKind): Promise<GroupWriter> {
  return kind === "thread" ? ThreadWriter.start() : new PoolWriter();
}

/** Writes and fdatasyncs through Node's asynchronous file calls, on libuv's thread pool. */
class PoolWriter implements GroupWriter {
  async write(fd: number, buffers: readonly Buffer[], position: number, bytes: number): Promise<void> {
    let written = await call<number>((done) => fs.writev(fd, buffers as Buffer[], position, done));
    while (written < bytes) {
      const more = await call<number>((done) => fs.writev(fd, skip(buffers, written), position + written, done));
      if (more === 0) throw Object.assign(new Error(`short write: ${written} of ${bytes} bytes`), { code: "EIO" });
      written += more;
    }
    await call((done) => fs.fdatasync(fd, done));
  }

  async close(): Promise<void> {}
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

/** Bytes the thread writer copies over at a time: a group larger than this is written in pieces, then synced once. */
const SLAB_BYTES = 8 * 1024 * 1024;

/**
 * The writer thread: takes a piece of a group from the shared slab, writes it at its position (going on after a
 * short write) and, when asked, fdatasyncs; answers each message with its id and the error, if any. Plain
 * CommonJS, evaluated as the thread's script (the compiled CLI is one bundle, with no file of its own for it).
 */
const WRITER_SCRIPT = `
const { parentPort } = require("node:worker_threads");
const fs = require("node:fs");
let tid = 0;
try { tid = Number(String(fs.readlinkSync("/proc/thread-self")).split("/").pop()) || 0; } catch {}
parentPort.postMessage({ tid });
parentPort.on("message", ({ id, fd, slab, length, position, sync }) => {
  try {
    const bytes = new Uint8Array(slab, 0, length);
    let written = 0;
    while (written < length) {
      const n = fs.writeSync(fd, bytes, written, length - written, position + written);
      if (n === 0) throw Object.assign(new Error("short write: " + written + " of " + length + " bytes"), { code: "EIO" });
      written += n;
    }
    if (sync) fs.fdatasyncSync(fd);
    parentPort.postMessage({ id });
  } catch (error) {
    parentPort.postMessage({ id, error: { message: String(error && error.message), code: error && error.code } });
  }
});
`;

/**
 * Writes and fdatasyncs on a thread of its own, which `BackgroundThreads` leaves at the normal CPU priority: the
 * collector lowers every other thread but its JavaScript one, libuv's pool included (it runs the landing's DuckDB
 * queries), and a group commit waiting there for a lowered thread waits behind the landing. A group is copied
 * into a shared slab of SLAB_BYTES (a copy on the JavaScript thread: about 0.1 ms for a group of 1 MB), the
 * thread writes it with the synchronous calls and answers.
 */
class ThreadWriter implements GroupWriter {
  private readonly slab = new SharedArrayBuffer(SLAB_BYTES);
  private nextId = 0;
  private readonly pending = new Map<number, { resolve: () => void; reject: (error: Error) => void }>();
  private failure: Error | undefined;

  private constructor(private readonly worker: Worker) {
    worker.on("message", (message: { id: number; error?: { message: string; code?: string } }) => {
      const waiting = this.pending.get(message.id);
      if (!waiting) return;
      this.pending.delete(message.id);
      if (this.pending.size === 0) worker.unref();
      if (message.error) waiting.reject(Object.assign(new Error(message.error.message), { code: message.error.code }));
      else waiting.resolve();
    });
    const stopped = (error: Error): void => {
      this.failure ??= error;
      for (const waiting of this.pending.values()) waiting.reject(this.failure);
      this.pending.clear();
    };
    worker.on("error", stopped);
    worker.on("exit", (code) => stopped(Object.assign(new Error(`the write-ahead log's writer thread stopped (exit code ${code})`), { code: "EIO" })));
    // It keeps the process alive while a group is in flight (as a file call on libuv's pool would), and only then.
    worker.unref();
  }

  static start(): Promise<ThreadWriter> {
    const worker = new Worker(WRITER_SCRIPT, { eval: true });
    return new Promise((resolve, reject) => {
      worker.once("error", reject);
      worker.once("message", (message: { tid: number }) => {
        worker.off("error", reject);
        // Known before any thread is lowered: the log opens (and starts its writer) before the collector lowers threads.
        if (message.tid > 0) keepForeground(message.tid);
        resolve(new ThreadWriter(worker));
      });
    });
  }

  async write(fd: number, buffers: readonly Buffer[], position: number, bytes: number): Promise<void> {
    const slab = new Uint8Array(this.slab);
    let sent = 0;
    let index = 0;
    let offset = 0;
    // Pieces of at most SLAB_BYTES, each copied over once the thread is done with the previous one.
    do {
      let length = 0;
      while (index < buffers.length && length < SLAB_BYTES) {
        const buffer = buffers[index] as Buffer;
        const take = Math.min(buffer.length - offset, SLAB_BYTES - length);
        slab.set(buffer.subarray(offset, offset + take), length);
        length += take;
        offset += take;
        if (offset === buffer.length) [index, offset] = [index + 1, 0];
      }
      await this.send({ fd, slab: this.slab, length, position: position + sent, sync: sent + length >= bytes });
      sent += length;
    } while (sent < bytes);
  }

  async close(): Promise<void> {
    await this.worker.terminate();
  }

  private send(message: { fd: number; slab: SharedArrayBuffer; length: number; position: number; sync: boolean }): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.worker.ref();
      this.worker.postMessage({ id, ...message });
    });
  }
}

/** A callback-style fs call as a promise (the callback API: a promise FileHandle costs about twice the CPU per call). */
export function call<T = void>(start: (done: (error: NodeJS.ErrnoException | null, value?: T) => void) => void): Promise<T> {
  return new Promise<T>((resolve, reject) => start((error, value) => (error ? reject(error) : resolve(value as T))));
}
