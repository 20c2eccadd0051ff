import { closeSync, openSync, readSync, statSync, type BigIntStats } from "node:fs";
import { setImmediate as yieldToEvents } from "node:timers/promises";
import path from "node:path";
import { createHash } from "node:crypto";
import { Worker } from "node:worker_threads";
import { InvalidInputError } from "../../model/errors.js";
import { now as clockNow } from "../../shared/clock.js";
import { deliveryFiles } from "../delivery-files.js";
import type { FileState, IdentifiedDelivery, IdentifiedFiles } from "../landing.js";
import { FILE_CHUNK_BYTES } from "./landing-sql.js";

/**
 * How long before it was hashed a file must have last changed for its id to be
 * reused on its states alone: longer than any file system's timestamp
 * granularity (FAT: 2 s), so that a write after the hash moves the change time.
 */
const SETTLED_MS = 3000;

/**
 * The size from which a delivery that is read ahead while it is named (`identify`'s `alongside`) is hashed on a thread
 * of its own: a smaller one is hashed here, in less time than a thread takes to start, and so is one with nothing to
 * read ahead (the thread would only wait).
 */
const HASH_THREAD_MIN_BYTES = 16 * 1024 * 1024;

/**
 * Names deliveries by their bytes (a digest of their files' names and contents, so a rerun of the same delivery gets
 * the same id), and reads each set of files once while they stay as they were: the last ids found are kept with the
 * files' states, so that landing a delivery just identified does not read it twice to name it.
 */
export class DeliveryIds {
  /** `hashThreadMinBytes`: HASH_THREAD_MIN_BYTES, unless a test asks for the thread at another size. */
  constructor(private readonly hashThreadMinBytes = HASH_THREAD_MIN_BYTES) {}

  private readonly identified = new Map<string, { readonly states: readonly string[]; readonly id: string; readonly hashedAt: number }>();

  /**
   * The files a delivery's paths or globs name, and its id; `known` (an earlier identify) is taken where its files are
   * settled and unchanged. Where they are read to be named and are large, they are hashed on a thread of their own
   * while `alongside` (given the files) runs here: what landing them would read first, read at the same time.
   */
  async identify(patterns: readonly string[], known?: IdentifiedFiles, alongside?: (files: readonly string[]) => Promise<void>): Promise<IdentifiedDelivery> {
    // Expanded without DuckDB: a resend of a known delivery may not need the engine at all.
    const files = await deliveryFiles(patterns);
    const states = await fileStates(files);
    if (known && settledAndUnchanged(known, files, states)) {
      this.identified.set(JSON.stringify(files), { states: states.map(stateText), id: known.id, hashedAt: known.hashedAt });
      return { files, id: known.id, identified: known, hashed: false };
    }
    // Hashed anew (not taken from this process's earlier hash): what is kept records when the files were read.
    const aside = alongside && totalBytes(states.map(stateText)) >= this.hashThreadMinBytes ? alongside : undefined;
    const [{ id, hashedAt }] = await Promise.all([this.idOf(files, true, aside !== undefined), aside?.(files)]);
    return { files, id, identified: { files, states, id, hashedAt }, hashed: true };
  }

  /**
   * A delivery's id: a digest of its files' names and bytes, read once while
   * the files stay as they were (same inode, size, modification and change
   * times), however often it is asked for; `fresh` reads them again, and
   * `onThread` on a thread of its own (`hashOnThread`).
   */
  async idOf(files: readonly string[], fresh = false, onThread = false): Promise<{ readonly id: string; readonly hashedAt: number }> {
    const states = await fileStateTexts(files);
    const key = JSON.stringify(files);
    const known = this.identified.get(key);
    if (!fresh && known && sameStates(known.states, states)) return known;
    const hashedAt = clockNow();
    const id = onThread ? await hashOnThread(files) : await deliveryIdOf(files);
    assertUnchanged(files, states, await fileStateTexts(files), "while its id was computed");
    this.identified.set(key, { states, id, hashedAt });
    return { id, hashedAt };
  }
}

/** The files a delivery was read with, and their states then: checked again after every later pass over them. */
export interface ReadFiles {
  readonly files: readonly string[];
  readonly states: readonly string[];
}

/** Refuses a delivery whose files changed since they were read (`when` says when it was noticed). */
export async function assertStillAsRead(read: ReadFiles, when: string): Promise<void> {
  assertUnchanged(read.files, read.states, await fileStateTexts(read.files), when);
}

/** Each file's state as text (`fileStates`), to compare. */
export async function fileStateTexts(files: readonly string[]): Promise<string[]> {
  return (await fileStates(files)).map(stateText);
}

/** Refuses a delivery whose files changed between two reads: what was read may mix two versions of a file. */
function assertUnchanged(files: readonly string[], before: readonly string[], after: readonly string[], when: string): void {
  const changed = files.filter((_, i) => before[i] !== after[i]);
  if (changed.length === 0) return;
  throw new InvalidInputError(
    `the delivery file ${changed.slice(0, 3).join(", ")}${changed.length > 3 ? ` and ${changed.length - 3} more` : ""} changed ${when}; ` +
      "nothing of it was loaded. Deliver files by writing them elsewhere and moving them into place when complete, then rerun",
  );
}

/**
 * The digest of a delivery's files. Read with synchronous calls: a delivery of 10,000 small files took seconds of
 * round trips to the thread pool, one per open, read and close. The events of the process (a collector's requests)
 * get their turn after every chunk of a large file.
 */
async function deliveryIdOf(files: readonly string[]): Promise<string> {
  const hash = createHash("sha256");
  const buffer = Buffer.allocUnsafe(FILE_CHUNK_BYTES);
  for (const file of [...files].sort()) {
    hash.update(`${path.basename(file)}\n`);
    const fd = openSync(file, "r");
    try {
      for (;;) {
        const bytesRead = readSync(fd, buffer, 0, buffer.length, null);
        if (bytesRead === 0) break;
        hash.update(buffer.subarray(0, bytesRead));
        if (bytesRead === buffer.length) await yieldToEvents();
      }
    } finally {
      closeSync(fd);
    }
    hash.update("\n");
  }
  return `d${hash.digest("hex").slice(0, 16)}`;
}

/**
 * The digest of a delivery's files (as `deliveryIdOf` makes it), made on a thread of its own: the JavaScript thread
 * is free meanwhile, and a second core hashes. Plain CommonJS, evaluated as the thread's script (the compiled CLI is
 * one bundle, with no file of its own).
 */
const HASH_SCRIPT = `
const { parentPort, workerData } = require("node:worker_threads");
const fs = require("node:fs");
const path = require("node:path");
const { createHash } = require("node:crypto");
try {
  const hash = createHash("sha256");
  const buffer = Buffer.allocUnsafe(workerData.chunk);
  for (const file of workerData.files) {
    hash.update(path.basename(file) + "\\n");
    const fd = fs.openSync(file, "r");
    try {
      for (;;) {
        const bytesRead = fs.readSync(fd, buffer, 0, buffer.length, null);
        if (bytesRead === 0) break;
        hash.update(buffer.subarray(0, bytesRead));
      }
    } finally {
      fs.closeSync(fd);
    }
    hash.update("\\n");
  }
  parentPort.postMessage({ digest: hash.digest("hex") });
} catch (error) {
  parentPort.postMessage({ error: { message: String(error && error.message), code: error && error.code } });
}
`;

/** Bytes the hashing thread reads at a time (it answers nothing else meanwhile, so more than FILE_CHUNK_BYTES). */
const HASH_THREAD_CHUNK_BYTES = 4 * 1024 * 1024;

async function hashOnThread(files: readonly string[]): Promise<string> {
  const worker = new Worker(HASH_SCRIPT, { eval: true, workerData: { files: [...files].sort(), chunk: HASH_THREAD_CHUNK_BYTES } });
  try {
    const answer = await new Promise<{ digest?: string; error?: { message: string; code?: string } }>((resolve, reject) => {
      worker.once("message", resolve);
      worker.once("error", reject);
      worker.once("exit", (code) => reject(new Error(`the thread hashing the delivery stopped (exit code ${code})`)));
    });
    if (answer.error) throw Object.assign(new Error(answer.error.message), { code: answer.error.code });
    return `d${answer.digest!.slice(0, 16)}`;
  } finally {
    void worker.terminate();
  }
}

/** The bytes of files in all, from their states as text (`stateText`: the size is the third field; a missing file counts none). */
function totalBytes(states: readonly string[]): number {
  return states.reduce((sum, state) => sum + (Number(state.split(":")[2]) || 0), 0);
}

/**
 * What tells a file's contents unchanged without reading them: its device and
 * inode, size, and modification and change times in nanoseconds (a write
 * moves both times; a file replaced by another has another inode).
 */
async function fileStates(files: readonly string[]): Promise<FileState[]> {
  // Synchronous: a stat costs microseconds, its round trip to the thread pool more (10,000 files: 0.9 s, now 0.05 s).
  return files.map((file) => {
    const s = statOrUndefined(file);
    if (!s) return { dev: "", ino: "", size: "missing", mtimeNs: "", ctimeNs: "" };
    return { dev: String(s.dev), ino: String(s.ino), size: String(s.size), mtimeNs: String(s.mtimeNs), ctimeNs: String(s.ctimeNs) };
  });
}

/** The file's stat, or undefined where there is none to take (gone, or not readable: its state then says "missing"). */
function statOrUndefined(file: string): BigIntStats | undefined {
  try {
    return statSync(file, { bigint: true });
  } catch {
    return undefined;
  }
}

function stateText(state: FileState): string {
  return `${state.dev}:${state.ino}:${state.size}:${state.mtimeNs}:${state.ctimeNs}`;
}

/** Whether `known` names these very files, unchanged since they were hashed, and settled when they were. */
function settledAndUnchanged(known: IdentifiedFiles, files: readonly string[], states: readonly FileState[]): boolean {
  if (!Array.isArray(known.files) || !Array.isArray(known.states) || typeof known.id !== "string" || typeof known.hashedAt !== "number") return false;
  if (known.files.length !== files.length || known.files.some((file, i) => file !== files[i])) return false;
  return states.every((state, i) => {
    const before = known.states[i];
    if (!before || stateText(before) !== stateText(state) || state.size === "missing") return false;
    const changedMs = Number(BigInt(state.ctimeNs) / 1_000_000n);
    const modifiedMs = Number(BigInt(state.mtimeNs) / 1_000_000n);
    return Math.max(changedMs, modifiedMs) < known.hashedAt - SETTLED_MS;
  });
}

/** Whether two lists of files' states (`fileStateTexts`) are the same. */
export function sameStates(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((state, i) => state === b[i]);
}
