import fs from "node:fs";
import path from "node:path";
import { InvalidInputError, LakeswapError, NotFoundError, errorMessage } from "../../model/errors.js";
import { BusyShare } from "./busy-share.js";
import { HEADER_BYTES, WAL_MAX_PAYLOAD_BYTES, frameHeader, parseSegment, type SegmentContents, type WalPosition } from "./framing.js";
import { logId, releaseLock, removeLeftoverLockFiles, takeLock } from "./log-folder.js";
import { recover, type ActiveSegment, type WalRecovery } from "./recovery.js";
import { fsyncPath, isCode, listSegments, makeFolder, readSegmentFile, segmentFile, segmentIdOf } from "./segment-files.js";
import { call, startSyncer, writeAllSync, type Syncer, type SyncerKind } from "./wal-sync.js";

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

interface Pending {
  readonly header: Buffer;
  /** The payload, in the parts it was given in (written as they are, never copied together). */
  readonly parts: readonly Buffer[];
  readonly length: number;
  readonly resolve: (position: WalPosition) => void;
  readonly reject: (error: unknown) => void;
}

/** The time constant of `WriteAheadLog.demand`. */
const DEMAND_TIME_CONSTANT_MS = 100;

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
    const header = frameHeader(parts, length);
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
    return segmentIdOf(this.id, seq);
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
