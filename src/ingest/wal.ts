import { randomBytes } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { InvalidInputError, LakeswapError, LeaseHeldError, NotFoundError, errorMessage } from "../model/errors.js";
import { crc32c } from "./crc32c.js";
import { call, startSyncer, writeAllSync, type Syncer, type SyncerKind } from "./wal-sync.js";
import { processAlive } from "../shared/process-folders.js";

/** The largest payload one record may hold (64 MiB); a larger append is refused. */
export const WAL_MAX_PAYLOAD_BYTES = 64 * 1024 * 1024;

/** Frame header: u32 LE payload length, u32 LE CRC-32C of those 4 length bytes followed by the payload. */
const HEADER_BYTES = 8;
/** Digits of a segment's sequence number: ids sort by age as text, for a segment a second for 3,000 years. */
const SEQ_DIGITS = 12;
const SEGMENT_FILE = /^(\d{12})\.(open|sealed)$/;
const LOG_ID = /^[0-9a-z]{8,64}$/;
/** The folder of the log's quarantined segments (`quarantine`). */
const QUARANTINE_FOLDER = "quarantine";

/** Where and how the write-ahead log keeps its segments. */
export interface WalOptions {
  /** The log's folder, made if missing; one process owns it at a time (the `lock` file in it). */
  readonly dir: string;
  /** The active segment is sealed once it holds this many bytes (it may pass it by the last appends written). */
  readonly segmentMaxBytes: number;
  /** ...or once its first record is this old, checked by `rotateIfDue`. */
  readonly segmentMaxAgeMs: number;
  /** Backpressure: `overLimit` is true while all segments together hold at least this many bytes. */
  readonly maxBytes: number;
  /**
   * Where the fdatasyncs run: on libuv's thread pool (`pool`, the default), or on a thread of the log's own
   * (`thread`), which stays at the normal CPU priority when a collector lowers its other threads.
   */
  readonly syncer?: SyncerKind;
}

/** Where a record starts: its segment's id and the byte offset of its frame in that segment. */
export interface WalPosition {
  readonly segment: string;
  readonly offset: number;
}

/** A record read back from a sealed segment. */
export interface WalRecord extends WalPosition {
  readonly payload: Buffer;
}

/** Bytes of a segment that hold no valid record, skipped by a read: from `offset`, `bytes` long. */
export interface WalCorruption {
  readonly segment: string;
  readonly offset: number;
  readonly reason: string;
  readonly bytes: number;
}

/** What `open` found in segments left unsealed (by a crash, or a close without seal). */
export interface WalRecovery {
  /** Torn records at a segment's tail, cut off (truncated and fsynced) before it was sealed. */
  readonly truncated: readonly { readonly segment: string; readonly offset: number; readonly bytes: number }[];
  /** Corrupt records inside a segment, skipped (each later `read` of the segment skips and reports them again). */
  readonly corrupt: readonly WalCorruption[];
}

interface Pending {
  readonly header: Buffer;
  /** The payload, in the parts it was given in (written as they are, never copied together). */
  readonly parts: readonly Buffer[];
  readonly length: number;
  readonly resolve: (position: WalPosition) => void;
  readonly reject: (error: unknown) => void;
}

interface ActiveSegment {
  readonly seq: number;
  readonly id: string;
  readonly fd: number;
  size: number;
  firstRecordAt: number | undefined;
}

/** The time constant of `WriteAheadLog.demand`. */
const DEMAND_TIME_CONSTANT_MS = 100;

/**
 * The share of time something was busy, weighted to the recent past: the busy signal (1 while busy, 0 while not)
 * averaged with weights that fall by e every `timeConstantMs` into the past.
 */
export class BusyShare {
  private share = 0;
  private busy = false;

  constructor(
    private readonly timeConstantMs: number,
    private since = performance.now(),
  ) {}

  /** Marks a change from busy to idle or back, at `now`. */
  set(busy: boolean, now = performance.now()): void {
    this.share = this.at(now);
    this.since = now;
    this.busy = busy;
  }

  /** The share at `now` (0 to 1). */
  at(now = performance.now()): number {
    const kept = Math.exp(-Math.max(0, now - this.since) / this.timeConstantMs);
    return this.busy ? 1 - (1 - this.share) * kept : this.share * kept;
  }
}

/**
 * The collector's write-ahead log: records framed with a length and a CRC-32C, appended to the active segment
 * with group commit (appends are written as they come, on the calling thread, while one fdatasync at a time runs
 * on another; the appends written while one runs share the next, which starts as soon as it ends), and
 * segments sealed by size or age (`<seq>.open` renamed to `<seq>.sealed`, folder fsynced) for the uploader to
 * read and remove. Any failed write or fsync makes the log refuse everything after it (fail closed); `open`
 * recovers what a crash left behind.
 *
 * The folder holds `id` (the log's random id, so segment ids `<id>-<seq>` differ between collectors), `lock`
 * (the owner's pid), the sealed segments and one open segment, whose sequence number is the highest used.
 */
export class WriteAheadLog {
  private readonly segments = new Map<string, { readonly seq: number; readonly bytes: number }>();
  private queue: Pending[] = [];
  private roundScheduled = false;
  /** Settles once the last round written is synced or refused (it never rejects); rounds settle in order. */
  private lastRound: Promise<void> = Promise.resolve();
  /** An fdatasync failed: no later one proves anything (the kernel may have dropped the pages it could not write). */
  private syncFailed = false;
  private tail: Promise<unknown> = Promise.resolve();
  private totalBytes = 0;
  private failure: LakeswapError | undefined;
  private closing: Promise<void> | undefined;
  /** The buffer `withSegment` reads into, kept for the next call; and whether a call holds it now. */
  private readBuffer: Buffer | undefined;
  private readBufferLent = false;
  /** Appends made and not yet answered, and how much of the recent past there were any. */
  private inFlight = 0;
  private readonly demanded = new BusyShare(DEMAND_TIME_CONSTANT_MS);

  private constructor(
    private readonly options: WalOptions,
    private readonly dir: string,
    readonly id: string,
    readonly recovery: WalRecovery,
    private active: ActiveSegment,
    sealed: readonly { readonly seq: number; readonly bytes: number }[],
    private readonly syncer: Syncer,
  ) {
    for (const segment of sealed) this.segments.set(this.segmentId(segment.seq), segment);
    this.totalBytes = sealed.reduce((sum, segment) => sum + segment.bytes, active.size);
  }

  /** Opens (or starts) the log in `options.dir`: takes its lock, then recovers and seals unsealed segments. */
  static async open(options: WalOptions): Promise<WriteAheadLog> {
    checkOptions(options);
    const dir = path.resolve(options.dir);
    await makeFolder(dir);
    await takeLock(dir);
    let syncer: Syncer | undefined;
    try {
      // The syncer first: recovery opens the active segment, whose descriptor a syncer that failed to start would leave open.
      syncer = await startSyncer(options.syncer ?? "pool");
      await removeLeftoverLockFiles(dir);
      const files = await listSegments(dir);
      const id = await logId(dir, files.length > 0);
      const found = await recover(dir, id, files);
      return new WriteAheadLog(options, dir, id, found.recovery, found.active, found.sealed, syncer);
    } catch (error) {
      await syncer?.close().catch(() => undefined);
      await releaseLock(dir);
      throw error;
    }
  }

  /** Bytes of all segments, active and sealed. */
  get bytes(): number {
    return this.totalBytes;
  }

  /** The error the log stopped after (a failed write or fdatasync): it accepts nothing more until it is opened again. */
  get stopped(): LakeswapError | undefined {
    return this.failure;
  }

  /** True while the segments hold `maxBytes` or more: the collector should refuse new events until uploads catch up. */
  get overLimit(): boolean {
    return this.totalBytes >= this.options.maxBytes;
  }

  /**
   * Appends one record; resolves with its position once it is on disk (written and fdatasynced). Appends resolve
   * in call order. `payload` must not change until then (its checksum is taken now, its bytes written later).
   */
  append(payload: Buffer | readonly Buffer[]): Promise<WalPosition> {
    const refusal = this.refusal();
    if (refusal) return Promise.reject(refusal);
    // A payload in parts (a record's header and a request's body) is one record, written without joining the parts.
    const parts = Buffer.isBuffer(payload) ? [payload] : payload;
    const length = parts.reduce((sum, part) => sum + part.length, 0);
    if (length > WAL_MAX_PAYLOAD_BYTES) {
      return Promise.reject(
        new InvalidInputError(
          `a write-ahead log record holds at most ${WAL_MAX_PAYLOAD_BYTES} bytes (64 MiB), this one has ${length}: send the events in smaller requests`,
        ),
      );
    }
    const header = Buffer.allocUnsafe(HEADER_BYTES);
    header.writeUInt32LE(length, 0);
    let crc = crc32c(header, 0, 0, 4);
    for (const part of parts) crc = crc32c(part, crc);
    header.writeUInt32LE(crc, 4);
    // From the first append waiting to the last one answered, the log is in demand (see `demand`).
    if (this.inFlight++ === 0) this.demanded.set(true);
    const settled = (): void => {
      if (--this.inFlight === 0) this.demanded.set(false);
    };
    return new Promise<WalPosition>((resolve, reject) => {
      this.queue.push({
        header,
        parts,
        length,
        resolve: (position) => {
          settled();
          resolve(position);
        },
        reject: (error) => {
          settled();
          reject(error);
        },
      });
      if (!this.roundScheduled) {
        this.roundScheduled = true;
        void this.serially(() => this.writeRound());
      }
    });
  }

  /**
   * Seals the active segment if it holds records and is due (`segmentMaxBytes` reached, or its first record
   * `segmentMaxAgeMs` old at `now`); returns the sealed segment's id. The caller calls it on a timer: the log
   * keeps no timer of its own, so it never keeps the process alive.
   */
  rotateIfDue(now = Date.now()): Promise<string | undefined> {
    const refusal = this.refusal();
    if (refusal) return Promise.reject(refusal);
    return this.serially(async () => {
      if (this.failure) throw this.failure;
      const { size, firstRecordAt } = this.active;
      const due = size >= this.options.segmentMaxBytes || (firstRecordAt !== undefined && now - firstRecordAt >= this.options.segmentMaxAgeMs);
      return due ? this.sealActive() : undefined;
    });
  }

  /** Seals the active segment if it holds any record (every append made before this call is in it or earlier); returns its id. */
  seal(): Promise<string | undefined> {
    const refusal = this.refusal();
    if (refusal) return Promise.reject(refusal);
    return this.serially(async () => {
      if (this.failure) throw this.failure;
      return this.sealActive();
    });
  }

  /**
   * The share of the recent past (a time constant of a tenth of a second) in which an append was waiting for the
   * disk, 0 to 1: near 1 while appends come as fast as the log takes them (a burst of requests, each waiting for a
   * group commit), a few hundredths at a steady rate that the log takes with time to spare.
   */
  get demand(): number {
    return this.demanded.at();
  }

  /** The bytes of a sealed segment, or undefined when it is not one. */
  sizeOf(segment: string): number | undefined {
    return this.segments.get(segment)?.bytes;
  }

  /** Ids of the sealed segments, oldest first. */
  sealed(): readonly string[] {
    return [...this.segments.keys()];
  }

  /** The records of a sealed segment, in order, and the corrupt byte ranges skipped on the way (read into memory of their own). */
  async read(segment: string): Promise<SegmentContents> {
    this.refuseIfClosed();
    const file = this.sealedFile(segment);
    return parseSegment(segment, await readSegmentFile(file, segment, this.dir, (size) => Buffer.allocUnsafeSlow(size)));
  }

  /**
   * Reads a sealed segment like `read`, into a buffer the log keeps from one call to the next, and runs `use` on its
   * records: they are views of that buffer, valid only until `use` settles. Memory the process touches for the first
   * time costs several times more than memory it reuses (the kernel's page faults on the read, then the checksums'
   * cache misses: about 300 ms against 20 ms for a segment of 64 MiB here), and a collector reads a segment of that
   * size for every one it lands. Calls that overlap get a buffer of their own.
   */
  async withSegment<T>(segment: string, use: (contents: SegmentContents) => Promise<T>): Promise<T> {
    this.refuseIfClosed();
    const file = this.sealedFile(segment);
    const lend = !this.readBufferLent;
    if (lend) this.readBufferLent = true;
    try {
      const data = await readSegmentFile(file, segment, this.dir, (size) => {
        if (!lend) return Buffer.allocUnsafeSlow(size);
        // Grown to the largest segment read so far, at least doubling up to segmentMaxBytes (segments sealed by age vary in size).
        const held = this.readBuffer?.length ?? 0;
        if (this.readBuffer === undefined || held < size) this.readBuffer = Buffer.allocUnsafeSlow(Math.max(size, Math.min(2 * held, this.options.segmentMaxBytes)));
        return this.readBuffer;
      });
      return await use(await parseSegment(segment, data));
    } finally {
      if (lend) this.readBufferLent = false;
    }
  }

  /** Deletes a sealed segment (once its records are safely elsewhere) and makes the deletion durable. */
  async remove(segment: string): Promise<void> {
    this.refuseIfClosed();
    const file = this.sealedFile(segment);
    const entry = this.segments.get(segment);
    if (entry === undefined) return;
    this.segments.delete(segment);
    try {
      await call((done) => fs.unlink(file, done));
    } catch (error) {
      if (!isCode(error, "ENOENT")) {
        this.segments.set(segment, entry);
        const ordered = [...this.segments].sort(([, a], [, b]) => a.seq - b.seq);
        this.segments.clear();
        for (const [id, value] of ordered) this.segments.set(id, value);
        throw error;
      }
    }
    this.totalBytes -= entry.bytes;
    await fsyncPath(this.dir);
  }

  /**
   * Moves a sealed segment out of the log, into its `quarantine/` folder, and returns the file's new path: the segment
   * is no longer landed (the ones after it are), and its records stay on disk for an operator. For a segment that
   * cannot land because the lake holds something else where its files go (a defect to look into, never to overwrite).
   */
  async quarantine(segment: string): Promise<string> {
    this.refuseIfClosed();
    const file = this.sealedFile(segment);
    const entry = this.segments.get(segment)!;
    const folder = path.join(this.dir, QUARANTINE_FOLDER);
    await makeFolder(folder);
    const target = path.join(folder, `${segment}.sealed`);
    await call((done) => fs.rename(file, target, done));
    await fsyncPath(folder);
    await fsyncPath(this.dir);
    this.segments.delete(segment);
    this.totalBytes -= entry.bytes;
    return target;
  }

  /** Waits until every append made before it is durable (or refused), then closes the active segment and releases the lock; does not seal. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      await this.serially(() => this.lastRound);
      await this.syncer.close().catch(() => undefined);
      await call((done) => fs.close(this.active.fd, done)).catch(() => undefined);
      this.readBuffer = undefined;
      await releaseLock(this.dir);
    })();
    return this.closing;
  }

  private segmentId(seq: number): string {
    return `${this.id}-${String(seq).padStart(SEQ_DIGITS, "0")}`;
  }

  /** The file of a sealed segment of this log, or a NotFoundError that says what `segment` is instead. */
  private sealedFile(segment: string): string {
    const entry = this.segments.get(segment);
    if (entry !== undefined) return segmentFile(this.dir, entry.seq, "sealed");
    const what = segment === this.active.id ? "is the active segment: seal() it first" : `is not a sealed segment of it (sealed: ${this.sealed().join(", ") || "none"})`;
    throw new NotFoundError(`segment '${segment}' of the write-ahead log in '${this.dir}' ${what}`);
  }

  /** Runs `task` after every task queued before it: writes and seals of the active segment never overlap. */
  private serially<T>(task: () => Promise<T>): Promise<T> {
    const run = this.tail.then(task);
    this.tail = run.catch(() => undefined);
    return run;
  }

  /**
   * Writes every queued append at the active segment's end (one writev, on this thread) and has it synced: each
   * resolves, in order, once an fdatasync that started after its write has ended.
   */
  private async writeRound(): Promise<void> {
    this.roundScheduled = false;
    const round = this.queue;
    this.queue = [];
    if (this.failure) return rejectAll(round, this.failure);
    const active = this.active;
    const buffers: Buffer[] = [];
    let bytes = 0;
    for (const pending of round) {
      buffers.push(pending.header, ...pending.parts);
      bytes += HEADER_BYTES + pending.length;
    }
    try {
      writeAllSync(active.fd, buffers, active.size, bytes);
    } catch (error) {
      return rejectAll(round, this.fail(error, `writing ${bytes} bytes to segment '${active.id}' at offset ${active.size}`));
    }
    const positions: WalPosition[] = [];
    let offset = active.size;
    for (const pending of round) {
      positions.push({ segment: active.id, offset });
      offset += HEADER_BYTES + pending.length;
    }
    active.size += bytes;
    active.firstRecordAt ??= Date.now();
    this.totalBytes += bytes;
    this.lastRound = this.syncer.sync(active.fd).then(
      () => {
        if (this.syncFailed) return rejectAll(round, this.failure!);
        round.forEach((pending, i) => pending.resolve(positions[i]!));
      },
      (error: unknown) => {
        this.syncFailed = true;
        rejectAll(round, this.fail(error, `syncing segment '${active.id}' (fdatasync)`));
      },
    );
    if (active.size >= this.options.segmentMaxBytes) await this.sealActive().catch(() => undefined);
  }

  /**
   * Seals the active segment if it holds records: the next segment's file is made first (so the highest
   * sequence number ever used always has a file, and a removed segment's id is never used again), then the
   * sealed one is renamed, and one folder fsync makes both durable.
   */
  private async sealActive(): Promise<string | undefined> {
    const sealing = this.active;
    if (sealing.size === 0) return undefined;
    // Its descriptor is closed below: the appends written to it are synced first.
    await this.lastRound;
    if (this.failure) throw this.failure;
    let next: number | undefined;
    try {
      next = await call<number>((done) => fs.open(segmentFile(this.dir, sealing.seq + 1, "open"), "wx", done));
      await call((done) => fs.rename(segmentFile(this.dir, sealing.seq, "open"), segmentFile(this.dir, sealing.seq, "sealed"), done));
      await fsyncPath(this.dir);
    } catch (error) {
      if (next !== undefined) fs.close(next, () => undefined);
      throw this.fail(error, `sealing segment '${sealing.id}'`);
    }
    fs.close(sealing.fd, () => undefined);
    this.segments.set(sealing.id, { seq: sealing.seq, bytes: sealing.size });
    this.active = { seq: sealing.seq + 1, id: this.segmentId(sealing.seq + 1), fd: next, size: 0, firstRecordAt: undefined };
    return sealing.id;
  }

  /** Stops the log for good after an I/O error: nothing after the last acknowledged record may be claimed durable. */
  private fail(error: unknown, doing: string): LakeswapError {
    if (this.failure) return this.failure;
    const noSpace = isCode(error, "ENOSPC") || isCode(error, "EDQUOT");
    this.failure = new LakeswapError(
      noSpace ? "NO_SPACE" : "STORE_ERROR",
      `the write-ahead log in '${this.dir}' stopped after an error ${doing}: ${errorMessage(error)}. ` +
        `Records acknowledged before it are safe; it accepts nothing more: ${noSpace ? "free space in that folder, then " : ""}restart the collector (opening the log recovers it)`,
      { cause: error },
    );
    rejectAll(this.queue, this.failure);
    this.queue = [];
    return this.failure;
  }

  private refusal(): LakeswapError | undefined {
    if (this.closing) return closedError(this.dir);
    return this.failure;
  }

  private refuseIfClosed(): void {
    if (this.closing) throw closedError(this.dir);
  }
}

/** A sealed segment's records and the corrupt ranges skipped on the way. */
export interface SegmentContents {
  readonly records: WalRecord[];
  readonly corrupt: WalCorruption[];
}

/** The whole of a segment's file, read into `allocate(size)` (which may be larger: the view returned is `size` long). */
async function readSegmentFile(file: string, segment: string, dir: string, allocate: (size: number) => Buffer): Promise<Buffer> {
  let fd: number;
  try {
    fd = await call<number>((done) => fs.open(file, "r", done));
  } catch (error) {
    if (isCode(error, "ENOENT")) throw new NotFoundError(`segment '${segment}' of the write-ahead log in '${dir}' was removed`);
    throw error;
  }
  try {
    const size = (await call<fs.Stats>((done) => fs.fstat(fd, done))).size;
    const buffer = allocate(size);
    let read = 0;
    while (read < size) {
      const bytes = await call<number>((done) => fs.read(fd, buffer, read, size - read, read, done));
      if (bytes === 0) throw new LakeswapError("STORE_ERROR", `segment '${segment}' of the write-ahead log in '${dir}' ended at ${read} of its ${size} bytes while it was read`);
      read += bytes;
    }
    return buffer.subarray(0, size);
  } finally {
    await call((done) => fs.close(fd, done)).catch(() => undefined);
  }
}

/** The records (views of `data`) and corrupt ranges of a segment's bytes. */
async function parseSegment(segment: string, data: Buffer): Promise<SegmentContents> {
  const scan = await scanFrames(data);
  const records = scan.records.map((offset): WalRecord => ({
    segment,
    offset,
    payload: data.subarray(offset + HEADER_BYTES, offset + HEADER_BYTES + data.readUInt32LE(offset)),
  }));
  const corrupt = scan.corrupt.map((range) => ({ segment, ...range }));
  if (scan.tail) corrupt.push({ segment, ...scan.tail });
  return { records, corrupt };
}

/** A frame scan of a segment: offsets of the valid records, corrupt ranges skipped, and bytes at the end that hold no complete valid record. */
interface FrameScan {
  readonly records: number[];
  readonly corrupt: { offset: number; bytes: number; reason: string }[];
  readonly tail: { offset: number; bytes: number; reason: string } | undefined;
}

/** Bytes checked between two turns of the event loop while a segment is scanned (a collector keeps answering meanwhile). */
const SCAN_SLICE_BYTES = 2 * 1024 * 1024;

/**
 * Reads the frames of a segment. A frame that does not check (a length past the maximum or the end, a CRC
 * mismatch; the CRC covers the length too) is skipped up to the next offset where a complete frame with a
 * matching CRC starts, reported as one corrupt range; with no valid frame after it, it is the torn tail. The
 * scan yields to the event loop every SCAN_SLICE_BYTES checked, so that checking a segment of 64 MiB does
 * not hold up the requests in flight for the tens of milliseconds it takes.
 */
async function scanFrames(data: Buffer): Promise<FrameScan> {
  const records: number[] = [];
  const corrupt: { offset: number; bytes: number; reason: string }[] = [];
  let offset = 0;
  let checked = 0;
  while (offset < data.length) {
    const frame = frameLength(data, offset);
    if (frame > 0) {
      records.push(offset);
      offset += frame;
      checked += frame;
      if (checked >= SCAN_SLICE_BYTES) checked = await nextTurn();
      continue;
    }
    let next = offset + 1;
    for (; next < data.length; next += 1) {
      const at = frameLength(data, next);
      if (at >= 0) break;
      // A resynchronization may check a frame's worth of bytes at every offset it tries.
      checked += at === CHECKSUM_MISMATCH ? HEADER_BYTES + data.readUInt32LE(next) : HEADER_BYTES;
      if (checked >= SCAN_SLICE_BYTES) checked = await nextTurn();
    }
    const range = { offset, bytes: next - offset, reason: invalidFrameReason(data, offset, frame) };
    if (next >= data.length) return { records, corrupt, tail: range };
    corrupt.push(range);
    offset = next;
  }
  return { records, corrupt, tail: undefined };
}

/** Resolves (with 0, the bytes checked since) on the event loop's next turn, after the I/O that waits. */
function nextTurn(): Promise<number> {
  return new Promise((resolve) => setImmediate(() => resolve(0)));
}

const INCOMPLETE_HEADER = -1;
const LENGTH_OVER_MAXIMUM = -2;
const PAST_THE_END = -3;
const CHECKSUM_MISMATCH = -4;

/** The length of the valid frame at `offset`, or (negative) why there is none: a number, as resynchronizing tries every offset. */
function frameLength(data: Buffer, offset: number): number {
  const available = data.length - offset;
  if (available < HEADER_BYTES) return INCOMPLETE_HEADER;
  const length = data.readUInt32LE(offset);
  if (length > WAL_MAX_PAYLOAD_BYTES) return LENGTH_OVER_MAXIMUM;
  if (length > available - HEADER_BYTES) return PAST_THE_END;
  const end = offset + HEADER_BYTES + length;
  if (crc32c(data, crc32c(data, 0, offset, offset + 4), offset + HEADER_BYTES, end) !== data.readUInt32LE(offset + 4)) return CHECKSUM_MISMATCH;
  return HEADER_BYTES + length;
}

function invalidFrameReason(data: Buffer, offset: number, code: number): string {
  const available = data.length - offset;
  if (code === INCOMPLETE_HEADER) return `incomplete record header (${available} of ${HEADER_BYTES} bytes)`;
  const length = data.readUInt32LE(offset);
  if (code === LENGTH_OVER_MAXIMUM) return `length field ${length} is over the ${WAL_MAX_PAYLOAD_BYTES}-byte maximum`;
  if (code === PAST_THE_END) return `record of ${length} bytes runs past the end (${available - HEADER_BYTES} bytes left)`;
  return `checksum mismatch (a record of ${length} bytes, or a damaged length field)`;
}

interface SegmentFile {
  readonly seq: number;
  readonly state: "open" | "sealed";
}

/** The segments found on open, and the segment appends go to. */
interface Recovered {
  readonly recovery: WalRecovery;
  readonly sealed: { readonly seq: number; readonly bytes: number }[];
  readonly active: ActiveSegment;
}

/**
 * Cuts the torn tail off each unsealed segment and seals it, or deletes it when nothing valid is left in it
 * (the newest such one is kept as the active segment instead, so its sequence number is not used twice).
 */
async function recover(dir: string, id: string, files: readonly SegmentFile[]): Promise<Recovered> {
  const segmentId = (seq: number) => `${id}-${String(seq).padStart(SEQ_DIGITS, "0")}`;
  const truncated: { segment: string; offset: number; bytes: number }[] = [];
  const corrupt: WalCorruption[] = [];
  const sealed: { seq: number; bytes: number }[] = [];
  const lastSeq = files.reduce((max, file) => Math.max(max, file.seq), 0);
  let reuse: number | undefined;
  let changed = false;
  for (const file of files) {
    const name = segmentFile(dir, file.seq, file.state);
    if (file.state === "sealed") {
      sealed.push({ seq: file.seq, bytes: (await call<fs.Stats>((done) => fs.stat(name, done))).size });
      continue;
    }
    const data = await call<Buffer>((done) => fs.readFile(name, done));
    const scan = await scanFrames(data);
    corrupt.push(...scan.corrupt.map((range) => ({ segment: segmentId(file.seq), ...range })));
    if (scan.tail) {
      await truncateDurably(name, scan.tail.offset);
      truncated.push({ segment: segmentId(file.seq), offset: scan.tail.offset, bytes: scan.tail.bytes });
    }
    const size = scan.tail ? scan.tail.offset : data.length;
    if (size > 0) {
      await call((done) => fs.rename(name, segmentFile(dir, file.seq, "sealed"), done));
      sealed.push({ seq: file.seq, bytes: size });
      changed = true;
    } else if (file.seq === lastSeq) {
      reuse = file.seq;
    } else {
      await call((done) => fs.unlink(name, done));
      changed = true;
    }
  }
  const seq = reuse ?? lastSeq + 1;
  const fd = await call<number>((done) => fs.open(segmentFile(dir, seq, "open"), reuse === undefined ? "wx" : "r+", done));
  if (changed || reuse === undefined) await fsyncPath(dir);
  return { recovery: { truncated, corrupt }, sealed, active: { seq, id: segmentId(seq), fd, size: 0, firstRecordAt: undefined } };
}

async function listSegments(dir: string): Promise<SegmentFile[]> {
  const files: SegmentFile[] = [];
  for (const name of await call<string[]>((done) => fs.readdir(dir, done))) {
    const match = SEGMENT_FILE.exec(name);
    if (match) files.push({ seq: Number(match[1]), state: match[2] as "open" | "sealed" });
  }
  files.sort((a, b) => a.seq - b.seq);
  for (let i = 1; i < files.length; i += 1) {
    const [before, file] = [files[i - 1] as SegmentFile, files[i] as SegmentFile];
    if (before.seq === file.seq) {
      throw new LakeswapError("STORE_ERROR", `the write-ahead log in '${dir}' has segment ${file.seq} both open and sealed: it was changed by hand; keep the sealed file`);
    }
  }
  return files;
}

/** The log's id, made and stored (temp file, fsync, rename, folder fsync) the first time the folder is used. */
async function logId(dir: string, hasSegments: boolean): Promise<string> {
  const file = path.join(dir, "id");
  const stored = await readOptional(file);
  if (stored !== undefined) {
    const id = stored.trim();
    if (LOG_ID.test(id)) return id;
    throw new LakeswapError("STORE_ERROR", `'${file}' holds '${id.slice(0, 80)}', not a write-ahead log id (8 to 64 lowercase letters and digits): restore it from a backup`);
  }
  if (hasSegments) {
    throw new LakeswapError(
      "STORE_ERROR",
      `the write-ahead log in '${dir}' has segments but no 'id' file: restore it (a new id would rename segments that may already be uploaded)`,
    );
  }
  const id = randomBytes(12).toString("hex");
  const temp = `${file}.tmp`;
  await call((done) => fs.writeFile(temp, `${id}\n`, done));
  await fsyncPath(temp);
  await call((done) => fs.rename(temp, file, done));
  await fsyncPath(dir);
  return id;
}

/**
 * Takes the folder's `lock` file, holding this process's id. The file appears whole (hard link of a written
 * temp file, which fails if it exists). A lock whose process is gone is moved aside by rename, so of two
 * processes taking it over only one wins; a lock moved aside that turns out to be a live one is put back.
 */
async function takeLock(dir: string): Promise<void> {
  const lock = path.join(dir, "lock");
  const temp = path.join(dir, `lock.${process.pid}-${randomBytes(4).toString("hex")}.tmp`);
  await call((done) => fs.writeFile(temp, `${process.pid}\n`, { flag: "wx" }, done));
  try {
    for (let attempt = 0; attempt < 20; attempt += 1) {
      try {
        await call((done) => fs.link(temp, lock, done));
        return;
      } catch (error) {
        if (!isCode(error, "EEXIST")) throw error;
      }
      const held = await readOptional(lock);
      if (held === undefined) continue;
      const pid = /^\d+\n?$/.test(held) ? Number(held) : undefined;
      if (pid === undefined) {
        throw new LakeswapError("STORE_ERROR", `the lock file '${lock}' holds '${held.slice(0, 80)}', not a process id: if no collector uses '${dir}', delete it`);
      }
      if (processAlive(pid)) {
        throw new LeaseHeldError(
          `the write-ahead log in '${dir}' is in use by process ${pid}${pid === process.pid ? " (this process)" : ""}: stop it, or give this collector its own WAL folder`,
        );
      }
      const aside = path.join(dir, `lock.${process.pid}-${randomBytes(4).toString("hex")}.stale`);
      try {
        await call((done) => fs.rename(lock, aside, done));
      } catch (error) {
        if (isCode(error, "ENOENT")) continue;
        throw error;
      }
      if ((await readOptional(aside)) !== held) await call((done) => fs.link(aside, lock, done)).catch(() => undefined);
      await call((done) => fs.unlink(aside, done));
    }
    throw new LakeswapError("CONFLICT", `could not take the lock of the write-ahead log in '${dir}': other processes keep taking it over`, { retryable: true });
  } finally {
    await call((done) => fs.unlink(temp, done)).catch(() => undefined);
  }
}

/** Deletes the temporary files of lock attempts by processes that are gone (killed between two steps of `takeLock`). */
async function removeLeftoverLockFiles(dir: string): Promise<void> {
  for (const name of await call<string[]>((done) => fs.readdir(dir, done))) {
    const match = /^lock\.(\d+)-[0-9a-f]+\.(tmp|stale)$/.exec(name);
    if (match && Number(match[1]) !== process.pid && !processAlive(Number(match[1]))) {
      await call((done) => fs.unlink(path.join(dir, name), done)).catch(() => undefined);
    }
  }
}

async function releaseLock(dir: string): Promise<void> {
  const lock = path.join(dir, "lock");
  if ((await readOptional(lock)) === `${process.pid}\n`) await call((done) => fs.unlink(lock, done)).catch(() => undefined);
}


async function truncateDurably(file: string, size: number): Promise<void> {
  const fd = await call<number>((done) => fs.open(file, "r+", done));
  try {
    await call((done) => fs.ftruncate(fd, size, done));
    await call((done) => fs.fsync(fd, done));
  } finally {
    await call((done) => fs.close(fd, done));
  }
}

/** Makes `dir` and fsyncs the parent of each folder made, so the folder itself survives a power loss. */
async function makeFolder(dir: string): Promise<void> {
  const first = await fs.promises.mkdir(dir, { recursive: true });
  if (first === undefined) return;
  for (let folder = dir; ; folder = path.dirname(folder)) {
    await fsyncPath(path.dirname(folder));
    if (folder === first || folder === path.dirname(folder)) break;
  }
}

function segmentFile(dir: string, seq: number, state: "open" | "sealed"): string {
  return path.join(dir, `${String(seq).padStart(SEQ_DIGITS, "0")}.${state}`);
}

async function readOptional(file: string): Promise<string | undefined> {
  try {
    return await call<string>((done) => fs.readFile(file, "utf8", done));
  } catch (error) {
    if (isCode(error, "ENOENT")) return undefined;
    throw error;
  }
}

function rejectAll(pending: readonly Pending[], error: unknown): void {
  for (const append of pending) append.reject(error);
}

function closedError(dir: string): LakeswapError {
  return new LakeswapError("INTERRUPTED", `the write-ahead log in '${dir}' is closed (the collector is shutting down): retry against the restarted collector`, {
    retryable: true,
  });
}

function checkOptions(options: WalOptions): void {
  if (typeof options.dir !== "string" || options.dir.length === 0) throw new InvalidInputError("WalOptions.dir must name a folder");
  for (const key of ["segmentMaxBytes", "segmentMaxAgeMs", "maxBytes"] as const) {
    const value = options[key];
    if (typeof value !== "number" || !(value > 0)) throw new InvalidInputError(`WalOptions.${key} must be a positive number, got ${String(value)}`);
  }
}

/** fsyncs a file or a folder (a folder: so the entries made, renamed or deleted in it survive a power loss). */
async function fsyncPath(target: string): Promise<void> {
  const fd = await call<number>((done) => fs.open(target, "r", done));
  try {
    await call((done) => fs.fsync(fd, done));
  } finally {
    await call((done) => fs.close(fd, done));
  }
}

function isCode(error: unknown, code: string): boolean {
  return typeof error === "object" && error !== null && (error as { code?: unknown }).code === code;
}

