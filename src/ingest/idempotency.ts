import { createHash } from "node:crypto";
import path from "node:path";
import { HttpError, quoted } from "./http-errors.js";
import { Remembered, RememberedFile } from "./remembered.js";
import type { ReadRecord } from "./request-body.js";

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
  private readonly remembered: Remembered<KeyEntry>;
  private readonly inFlight = new Map<string, { readonly hash: string; readonly done: Promise<unknown> }>();
  replays = 0;
  conflicts = 0;

  private constructor(
    private readonly file: RememberedFile<KeyEntry>,
    readonly windowMs: number,
    maxKeys: number,
  ) {
    this.remembered = new Remembered(windowMs, maxKeys, (entry) => entry.at);
  }

  /** Reads the keys of landed segments from `dir`'s key file, keeping those still in the window (and writes the file anew with them). */
  static async open(dir: string, windowMs: number, maxKeys: number): Promise<IdempotencyKeys> {
    const keys = new IdempotencyKeys(new RememberedFile(path.join(dir, KEYS_FILE), KEY_LINES), windowMs, maxKeys);
    await keys.file.load(keys.remembered);
    return keys;
  }

  get size(): number {
    return this.remembered.size;
  }

  get evictions(): number {
    return this.remembered.evictions;
  }

  /** Remembers keys found in the log (any order), as of their own time. */
  restore(kept: readonly KeptKey[]): void {
    this.remembered.restore(kept.map(({ key, ...entry }) => [key, entry] as const));
  }

  /**
   * What `key` stood for, when it is remembered with this digest; undefined when it is not (or no longer) remembered.
   * Throws 422 when it stood for another request.
   */
  seen(key: string, hash: string): KeyEntry | undefined {
    const entry = this.remembered.get(key);
    if (entry === undefined) return undefined;
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

  /** Remembers that `key` stored `entry.accepted` events. */
  remember(key: string, entry: KeyEntry): void {
    this.remembered.set(key, { hash: entry.hash, accepted: entry.accepted, deduplicated: entry.deduplicated ?? 0, at: entry.at });
  }

  /** Writes the keys of a segment about to be removed from the log to the key file, durably, so that its removal does not forget them. */
  async persist(kept: readonly KeptKey[]): Promise<void> {
    await this.file.append(kept.map(({ key, ...entry }) => [key, entry] as const), this.remembered);
  }
}

/** A key file line: `{"k", "h", "n", "d", "t"}`. */
const KEY_LINES = {
  format: (key: string, entry: KeyEntry) => ({ k: key, h: entry.hash, n: entry.accepted, d: entry.deduplicated ?? 0, t: entry.at }),
  parse: (line: unknown): [string, KeyEntry] | undefined => {
    const { k, h, n, d, t } = (line ?? {}) as { k?: unknown; h?: unknown; n?: unknown; d?: unknown; t?: unknown };
    if (typeof k !== "string" || typeof h !== "string" || typeof n !== "number" || typeof t !== "number") return undefined;
    return [k, { hash: h, accepted: n, deduplicated: typeof d === "number" ? d : 0, at: t }];
  },
};

/** The idempotency keys of a segment's records (records without one, or not lakeswap's, have none). */
export function keysOf(records: readonly ReadRecord[]): KeptKey[] {
  return records.flatMap((read) =>
    read.requestKey ? [{ key: read.requestKey.key, hash: read.requestKey.hash, accepted: read.events, deduplicated: read.duplicates, at: read.receivedAt }] : [],
  );
}
