import { isUtf8 } from "node:buffer";
import type { IncomingMessage } from "node:http";
import type { Readable } from "node:stream";
import { createGunzip } from "node:zlib";
import { InvalidInputError, errorMessage } from "../model/errors.js";
import { HttpError, formatBytes, quoted } from "./http-errors.js";
import type { WalRecord } from "./wal/framing.js";
import { eventLines } from "./event-dedupe.js";

/** How a request body splits into events: one JSON value per line, or one JSON array. */
export type IngestFormat = "ndjson" | "json";

/** The Retry-After of a request refused because the bodies held are at their limit: they are held until an fsync, milliseconds. */
const BUSY_RETRY_AFTER_SECONDS = 1;

const NDJSON_TYPES = new Set(["application/x-ndjson", "application/jsonl", "application/x-jsonlines", "application/jsonlines", "text/plain"]);
const UTF8_CHARSETS = new Set(["utf-8", "utf8", "us-ascii"]);

/**
 * A write-ahead log record's header line (before the request's events): the namespace, when it was received, how many
 * events; and for a request sent with an Idempotency-Key, the key and the request's digest (./idempotency.ts).
 */
interface RecordHeader {
  readonly v: 1;
  readonly ns: string;
  readonly t: number;
  readonly n: number;
  readonly k?: string;
  readonly h?: string;
  /** Events of the request dropped as duplicates (`dedupe:`), for the answer to a retry. */
  readonly d?: number;
}

/** A request's idempotency key and the digest of the request (pipeline, namespace, body). */
export interface RequestKey {
  readonly key: string;
  readonly hash: string;
}

/** A request's events as a write-ahead log record: its parts (header line, then the events' lines, never joined) and how many events. */
export interface EventRecord {
  readonly parts: readonly Buffer[];
  readonly events: number;
  /** Events dropped because their id was taken before (`dedupe:`). */
  readonly duplicates: number;
}

/** What a record of a request carries besides its events: its idempotency key, and a filter of duplicate events. */
export interface RecordOptions {
  readonly requestKey?: RequestKey;
  /** Given the events, one line each, returns those to store and how many were dropped as duplicates (`dedupe:`). */
  readonly dedupe?: (events: Buffer[]) => { readonly kept: Buffer[]; readonly duplicates: number };
}

/**
 * The record of a request's body (its chunks as they arrived), for `namespace`, received at `receivedAt` (ms);
 * `events: 0` for a body without events (or whose events were all duplicates). Refuses a body that is not UTF-8,
 * or not JSON in `format`.
 */
export function eventRecord(namespace: string, body: Buffer | readonly Buffer[], format: IngestFormat, receivedAt: number, options: RecordOptions = {}): EventRecord {
  const chunks = Buffer.isBuffer(body) ? [body] : body;
  if (!isUtf8Text(chunks)) throw new InvalidInputError("the body is not UTF-8 text; send JSON encoded as UTF-8");
  let { lines, events } = format === "json" ? jsonArrayLines(Buffer.concat(chunks)) : ndjsonLines(chunks);
  let duplicates = 0;
  if (options.dedupe && events > 0) {
    // One line per event (an NDJSON body's chunks are joined and split for it), of which the new ones are kept.
    const each = format === "json" ? lines.filter((line) => line !== NEWLINE) : eventLines(Buffer.concat(chunks));
    const filtered = options.dedupe(each);
    duplicates = filtered.duplicates;
    lines = filtered.kept.flatMap((line) => [line, NEWLINE]);
    events = filtered.kept.length;
  }
  if (events === 0) return { parts: [], events, duplicates };
  const { requestKey } = options;
  const keyed = requestKey === undefined ? {} : { k: requestKey.key, h: requestKey.hash };
  const header = Buffer.from(`${JSON.stringify({ v: 1, ns: namespace, t: receivedAt, n: events, ...keyed, ...(duplicates > 0 ? { d: duplicates } : {}) } satisfies RecordHeader)}\n`);
  return { parts: [header, ...lines], events, duplicates };
}

/** A record read back: its namespace, receive time (ms), events, and the events' lines (a view of the record). */
export interface ReadRecord {
  readonly namespace: string;
  readonly receivedAt: number;
  readonly events: number;
  readonly body: Buffer;
  /** The request's idempotency key and digest, when it was sent with one. */
  readonly requestKey?: RequestKey;
  /** Events of the request dropped as duplicates. */
  readonly duplicates: number;
}

/** Reads a record's header line and events back; throws why when the header is not lakeswap's. */
export function readRecord(record: WalRecord): ReadRecord {
  const end = record.payload.indexOf(10);
  const header = JSON.parse(record.payload.subarray(0, end).toString("utf8")) as RecordHeader;
  if (header.v !== 1 || typeof header.ns !== "string" || typeof header.t !== "number") throw new Error("not a lakeswap record header");
  const requestKey = typeof header.k === "string" && typeof header.h === "string" ? { requestKey: { key: header.k, hash: header.h } } : {};
  return { namespace: header.ns, receivedAt: header.t, events: header.n, body: record.payload.subarray(end + 1), duplicates: header.d ?? 0, ...requestKey };
}

/**
 * Whether chunks are UTF-8 text together. Each chunk that is valid on its own proves its part (valid UTF-8
 * joined to valid UTF-8 is valid); only where a chunk is not (a character cut at a chunk's end, or bad bytes)
 * is the whole joined and checked once more.
 */
function isUtf8Text(chunks: readonly Buffer[]): boolean {
  return chunks.every((chunk) => isUtf8(chunk)) || isUtf8(Buffer.concat(chunks));
}

/** An NDJSON body as it is (its chunks, never joined), ending in a newline, and its events (lines with anything but white space). */
function ndjsonLines(chunks: readonly Buffer[]): { lines: Buffer[]; events: number } {
  let events = 0;
  // Whether the line being read (it may span chunks) has shown anything but white space yet.
  let content = false;
  let last: number | undefined;
  for (const chunk of chunks) {
    let start = 0;
    while (start < chunk.length) {
      let end = chunk.indexOf(10, start);
      const lineEnds = end >= 0;
      if (!lineEnds) end = chunk.length;
      for (let i = start; !content && i < end; i++) {
        const byte = chunk[i];
        if (byte !== 32 && byte !== 9 && byte !== 13) content = true;
      }
      if (lineEnds) {
        if (content) events += 1;
        content = false;
      }
      start = end + 1;
    }
    if (chunk.length > 0) last = chunk[chunk.length - 1];
  }
  if (content) events += 1;
  const lines = [...chunks];
  if (last !== undefined && last !== 10) lines.push(NEWLINE);
  return { lines, events };
}

const NEWLINE = Buffer.from("\n");

/**
 * A JSON array body (or one value) as NDJSON: each element's own text on a line of its own, exactly as it was sent,
 * so that numbers keep every digit and a field given twice reaches the landing's check (JSON.parse would round
 * 9007199254740993 to 9007199254740992, and keep the last of two values of a field). Line ends between an element's
 * tokens become spaces; a valid JSON text has none inside its strings. JSON.parse checks the body first.
 */
export function jsonArrayLines(body: Buffer): { lines: Buffer[]; events: number } {
  let value: unknown;
  try {
    value = JSON.parse(body.toString("utf8"));
  } catch (error) {
    throw new InvalidInputError(`the body is not valid JSON (${errorMessage(error)}); send a JSON array of events, or NDJSON (one event per line, Content-Type: application/x-ndjson)`);
  }
  if (!Array.isArray(value)) return { lines: [oneLine(body, 0, body.length), NEWLINE], events: 1 };
  const lines: Buffer[] = [];
  let depth = 0;
  let inString = false;
  let escaped = false;
  let start = -1;
  // The array's '[' is the first byte that is not white space (JSON.parse accepted the text).
  for (let i = body.indexOf(0x5b) + 1; i < body.length; i++) {
    const byte = body[i]!;
    if (inString) {
      if (escaped) escaped = false;
      else if (byte === 0x5c) escaped = true;
      else if (byte === 0x22) inString = false;
      continue;
    }
    if (depth === 0 && (byte === 0x2c || byte === 0x5d)) {
      // ',' or the closing ']' ends an element (an empty array has none).
      if (start >= 0) lines.push(oneLine(body, start, i), NEWLINE);
      start = -1;
      if (byte === 0x5d) break;
      continue;
    }
    if (start < 0 && byte !== 0x20 && byte !== 0x09 && byte !== 0x0a && byte !== 0x0d) start = i;
    if (byte === 0x22) inString = true;
    else if (byte === 0x7b || byte === 0x5b) depth++;
    else if (byte === 0x7d || byte === 0x5d) depth--;
  }
  if (lines.length !== value.length * 2) throw new Error(`the JSON array's ${value.length} elements were cut into ${lines.length / 2} lines`);
  return { lines, events: value.length };
}

/** Bytes `start` to `end` of a valid JSON text as one line: its line ends (between tokens only) as spaces. */
function oneLine(body: Buffer, start: number, end: number): Buffer {
  const text = body.subarray(start, end);
  if (text.indexOf(0x0a) < 0 && text.indexOf(0x0d) < 0) return text;
  const copy = Buffer.from(text);
  for (let i = 0; i < copy.length; i++) if (copy[i] === 0x0a || copy[i] === 0x0d) copy[i] = 0x20;
  return copy;
}

/** The format a Content-Type announces; undefined when there is none (the body's first byte decides). */
export function formatOf(contentType: string | undefined): IngestFormat | undefined {
  if (contentType === undefined || contentType.trim() === "") return undefined;
  const [type = "", ...parameters] = contentType.split(";").map((part) => part.trim().toLowerCase());
  const charset = parameters.find((parameter) => parameter.startsWith("charset="))?.slice("charset=".length).replace(/"/g, "");
  if (charset !== undefined && !UTF8_CHARSETS.has(charset)) {
    throw new HttpError(415, `charset '${quoted(charset)}' is not supported: send the events as UTF-8`);
  }
  if (type === "application/json") return "json";
  if (NDJSON_TYPES.has(type)) return "ndjson";
  throw new HttpError(
    415,
    `Content-Type '${quoted(type)}' is not supported: send NDJSON (one event per line) with Content-Type application/x-ndjson, ` +
      `or a JSON array with application/json (curl: -H 'Content-Type: application/x-ndjson')`,
  );
}

/** JSON when the body's first byte after whitespace (and a byte order mark) is `[`, NDJSON otherwise. */
export function sniffFormat(chunks: readonly Buffer[]): IngestFormat {
  // The bytes that decide may span chunks (a mark and white space before the first value): read across them.
  const head = Buffer.concat(chunks.slice(0, 3), Math.min(3, chunks.reduce((sum, chunk) => sum + chunk.length, 0)));
  let skip = head[0] === 0xef && head[1] === 0xbb && head[2] === 0xbf ? 3 : 0;
  for (const chunk of chunks) {
    for (let at = Math.min(skip, chunk.length); at < chunk.length; at++) {
      const byte = chunk[at];
      if (byte !== 0x20 && byte !== 0x09 && byte !== 0x0a && byte !== 0x0d) return byte === 0x5b ? "json" : "ndjson";
    }
    skip -= Math.min(skip, chunk.length);
  }
  return "ndjson";
}

/** Whether a Content-Encoding announces gzip; refuses any other encoding than none. */
export function isGzip(contentEncoding: string | undefined): boolean {
  const encoding = (contentEncoding ?? "").trim().toLowerCase();
  if (encoding === "" || encoding === "identity") return false;
  if (encoding === "gzip" || encoding === "x-gzip") return true;
  throw new HttpError(415, `Content-Encoding '${quoted(encoding)}' is not supported: send the body as it is, or gzip-compressed with Content-Encoding: gzip`);
}

/** The 413 of a body over the collector's limit (after gunzip when it came gzip-compressed). */
export function tooLarge(maxBodyBytes: number, gzip: boolean): HttpError {
  return new HttpError(
    413,
    `the request body is larger than the collector's limit of ${formatBytes(maxBodyBytes)}${gzip ? " once gunzipped" : ""}: split the events into smaller requests`,
    // The rest of the body is not read: the connection cannot carry another request.
    { connection: "close" },
  );
}

/** The 503 of a request refused because the bodies held are at the server's limit (`maxBytesInFlight`). */
export function busy(held: number, limit: number): HttpError {
  return new HttpError(
    503,
    `the collector holds ${formatBytes(held)} of request bodies, at its limit of ${formatBytes(limit)} (--max-bytes-in-flight): retry in ${BUSY_RETRY_AFTER_SECONDS} s`,
    // The body is not read: the connection cannot carry another request.
    { "retry-after": String(BUSY_RETRY_AFTER_SECONDS), connection: "close" },
  );
}

/**
 * Reads a body up to `maxBodyBytes` (counted after gunzip), keeping the chunks as they arrived. Gives up with
 * 413 as soon as the limit is passed, without reading the rest; and with what `hold` returns when it refuses to
 * hold the bytes read so far (the server's bytes in flight).
 */
export function readBody(request: IncomingMessage, maxBodyBytes: number, gzip: boolean, hold: (size: number) => true | HttpError): Promise<Buffer[]> {
  return new Promise<Buffer[]>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const gunzip = gzip ? createGunzip() : undefined;
    const source: Readable = gunzip ?? request;
    if (gunzip !== undefined) {
      request.on("error", (error) => gunzip.destroy(error));
      request.pipe(gunzip);
    }
    const stop = (error: Error): void => {
      source.off("data", onData);
      source.off("end", onEnd);
      if (gunzip !== undefined) {
        request.unpipe(gunzip);
        gunzip.destroy();
      }
      // Stop reading what the client still sends; the answer closes the connection.
      request.pause();
      reject(error);
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > maxBodyBytes) return stop(tooLarge(maxBodyBytes, gzip));
      const held = hold(size);
      if (held !== true) return stop(held);
      chunks.push(chunk);
    };
    const onEnd = (): void => {
      request.off("close", onClose);
      resolve(chunks);
    };
    const onClose = (): void => {
      if (!request.complete) stop(new HttpError(400, "the client closed the connection before the whole body arrived; resend the request"));
    };
    source.on("data", onData);
    source.once("end", onEnd);
    source.once("error", (error: NodeJS.ErrnoException) => {
      if (error.code === "ECONNRESET" || !gzip) return stop(new HttpError(400, `the request body could not be read (${error.message}); resend the request`));
      stop(new HttpError(400, `the body is not valid gzip (${error.message}): compress it with gzip, or leave out Content-Encoding: gzip for a plain body`));
    });
    request.once("close", onClose);
  });
}

/** The records that are lakeswap's, read (another record has no key and no id: the lander dead-letters it). */
export function readRecords(records: readonly WalRecord[]): ReadRecord[] {
  const read: ReadRecord[] = [];
  for (const record of records) {
    try {
      read.push(readRecord(record));
    } catch {
      // Not a lakeswap record.
    }
  }
  return read;
}
