import { createHash } from "node:crypto";
import { promises as fs } from "node:fs";
import path from "node:path";
import { now } from "../shared/clock.js";
import { HttpError, quoted } from "./http-errors.js";
import { fsyncPath, isCode } from "./wal/segment-files.js";

/** The longest `Idempotency-Key` a client may send, in bytes (UTF-8). */
const MAX_KEY_BYTES = 128;

/** The file in a pipeline's log folder that keeps the keys of landed segments (their segments are gone). */
const KEYS_FILE = "idempotency-keys.jsonl";

/** What a key stands for: the digest of its request, how many events that request stored, and when (ms). */
export interface KeyEntry {
  readonly hash: string;
  readonly accepted: number;
  /** Events of the request dropped as duplicates (`dedupe:`), for the answer to a retry. */
  readonly deduplicated?: number;
  readonly at: number;
}

/** A key as the log and the key file record it. */
export interface KeptKey extends KeyEntry {
  readonly key: string;
}

/** A request's key, checked: undefined without one; 400 for an empty, too long or unprintable key. */
export function idempotencyKeyOf(header: string | string[] | undefined): string | undefined {
  if (header === undefined) return undefined;
  const key = Array.isArray(header) ? header.join(",") : header;
  if (key.trim() === "") throw new HttpError(400, "the Idempotency-Key header is empty: send a key of 1 to 128 bytes (a UUID), one per request, the same on its retries");
  const bytes = Buffer.byteLength(key);
  if (bytes > MAX_KEY_BYTES) {
    throw new HttpError(400, `Idempotency-Key '${quoted(key)}' is ${bytes} bytes, over the limit of ${MAX_KEY_BYTES}: send a shorter key (a UUID is 36)`);
  }
  if (/\p{Cc}/u.test(key)) throw new HttpError(400, `Idempotency-Key '${quoted(key)}' holds a control character: send printable text (a UUID)`);
  return key;
}

/** The digest that tells a retry from another request under the same key: pipeline, namespace and the decoded body. */
export function requestDigest(pipeline: string, namespace: string, body: Buffer | readonly Buffer[]): string {
  const hash = createHash("sha256").update(pipeline).update("\0").update(namespace).update("\0");
  for (const chunk of Buffer.isBuffer(body) ? [body] : body) hash.update(chunk);
  return hash.digest("base64url");
}

/** 422: a key sent again with another request. */
function keyConflict(key: string, windowMs: number): HttpError {
  return new HttpError(
    422,
    `Idempotency-Key '${quoted(key)}' was already used for another request (another body, pipeline or namespace) within the last ${formatWindow(windowMs)}: ` +
      "a retry must send the same body to the same path; send a new key for new events",
  );
}

/** How long keys are kept, as a response header gives it: whole seconds. */
export function windowSeconds(windowMs: number): number {
  return Math.floor(windowMs / 1000);
}

function formatWindow(ms: number): string {
  return ms % 3_600_000 === 0 ? `${ms / 3_600_000} h` : ms % 60_000 === 0 ? `${ms / 60_000} min` : `${ms / 1000} s`;
}

/**
 * The idempotency keys one collector remembers: those of the requests in its write-ahead log (their records carry
 * key and digest) and those of the landed segments (kept in `idempotency-keys.jsonl` in the log's folder, written
 * before a landed segment is removed). Each is remembered for `windowMs` from its request, and at most `maxKeys`
 * at once: past that the oldest are forgotten first (`evictions`). A request still being written is `running`,
 * so that its retry waits for it instead of storing its events a second time.
 */
export class IdempotencyKeys {
  /** By key, oldest first (a key remembered again moves to the end). */
  private readonly entries = new Map<string, KeyEntry>();
  private readonly inFlight = new Map<string, { readonly hash: string; readonly done: Promise<unknown> }>();
  private linesInFile = 0;
  evictions = 0;
  replays = 0;
  conflicts = 0;

  private constructor(
    private readonly file: string,
    readonly windowMs: number,
    private readonly maxKeys: number,
  ) {}

  /** Reads the keys of landed segments from `dir`'s key file (a torn last line is skipped), keeping those still in the window. */
  static async open(dir: string, windowMs: number, maxKeys: number): Promise<IdempotencyKeys> {
    const keys = new IdempotencyKeys(path.join(dir, KEYS_FILE), windowMs, maxKeys);
    let text = "";
    try {
      text = await fs.readFile(keys.file, "utf8");
    } catch (error) {
      if (!isCode(error, "ENOENT")) throw error;
    }
    const kept: KeptKey[] = [];
    for (const line of text.split("\n")) {
      const entry = parseLine(line);
      if (entry !== undefined) kept.push(entry);
    }
    keys.restore(kept);
    // The file is written anew with what is still remembered, so that it never grows past a few windows' keys.
    if (kept.length > 0) await keys.rewrite();
    return keys;
  }

  get size(): number {
    return this.entries.size;
  }

  /** Remembers keys found in the log or the key file (any order), as of their own time. */
  restore(kept: readonly KeptKey[]): void {
    for (const entry of [...kept].sort((a, b) => a.at - b.at)) this.remember(entry.key, entry);
  }

  /**
   * What `key` stood for, when it is remembered with this digest; undefined when it is not (or no longer) remembered.
   * Throws 422 when it stood for another request.
   */
  seen(key: string, hash: string): KeyEntry | undefined {
    const entry = this.entries.get(key);
    if (entry === undefined) return undefined;
    if (now() - entry.at > this.windowMs) {
      this.entries.delete(key);
      return undefined;
    }
    if (entry.hash !== hash) throw this.conflict(key);
    this.replays += 1;
    return entry;
  }

  /** The 422 of `key` sent with another request than the one it stands for (counted). */
  conflict(key: string): HttpError {
    this.conflicts += 1;
    return keyConflict(key, this.windowMs);
  }

  /** The request under `key` still being written, if any. */
  running(key: string): { readonly hash: string; readonly done: Promise<unknown> } | undefined {
    return this.inFlight.get(key);
  }

  /** Marks `key` as being written until `done` settles; what it stored is remembered by `remember`. */
  start(key: string, hash: string, done: Promise<unknown>): void {
    this.inFlight.set(key, { hash, done });
    void done.then(
      () => this.inFlight.delete(key),
      () => this.inFlight.delete(key),
    );
  }

  /** Remembers that `key` stored `entry.accepted` events; forgets keys past the window, then the oldest past `maxKeys`. */
  remember(key: string, entry: KeyEntry): void {
    this.entries.delete(key);
    this.entries.set(key, { hash: entry.hash, accepted: entry.accepted, deduplicated: entry.deduplicated ?? 0, at: entry.at });
    const oldest = now() - this.windowMs;
    for (const [first, value] of this.entries) {
      if (value.at >= oldest && this.entries.size <= this.maxKeys) break;
      // Past the window it is forgotten as it should be; within it, forgetting is an eviction.
      if (value.at >= oldest) this.evictions += 1;
      this.entries.delete(first);
    }
  }

  /**
   * Writes the keys of a segment about to be removed from the log to the key file, durably, so that its removal does
   * not forget them. Rewrites the file instead when it holds far more lines than keys remembered.
   */
  async persist(kept: readonly KeptKey[]): Promise<void> {
    if (kept.length === 0) return;
    if (this.linesInFile + kept.length > 2 * Math.max(this.entries.size, 1) + 1024) return this.rewrite();
    const handle = await fs.open(this.file, "a");
    try {
      await handle.appendFile(kept.map(formatLine).join(""));
      await handle.datasync();
    } finally {
      await handle.close();
    }
    this.linesInFile += kept.length;
  }

  /** Replaces the key file with the keys remembered now (written aside, fsynced, renamed over it). */
  private async rewrite(): Promise<void> {
    const temporary = `${this.file}.${process.pid}.tmp`;
    const handle = await fs.open(temporary, "w");
    try {
      await handle.writeFile([...this.entries].map(([key, entry]) => formatLine({ key, ...entry })).join(""));
      await handle.datasync();
    } finally {
      await handle.close();
    }
    await fs.rename(temporary, this.file);
    await fsyncPath(path.dirname(this.file));
    this.linesInFile = this.entries.size;
  }
}

function formatLine(entry: KeptKey): string {
  return `${JSON.stringify({ k: entry.key, h: entry.hash, n: entry.accepted, d: entry.deduplicated ?? 0, t: entry.at })}\n`;
}

function parseLine(line: string): KeptKey | undefined {
  if (line === "") return undefined;
  try {
    const { k, h, n, d, t } = JSON.parse(line) as { k?: unknown; h?: unknown; n?: unknown; d?: unknown; t?: unknown };
    if (typeof k !== "string" || typeof h !== "string" || typeof n !== "number" || typeof t !== "number") return undefined;
    return { key: k, hash: h, accepted: n, deduplicated: typeof d === "number" ? d : 0, at: t };
  } catch {
    // A line torn by a crash while it was appended: its segment was not removed, so its keys are still in the log.
    return undefined;
  }
}
