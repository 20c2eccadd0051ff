import { assertNamespaces, type IngestPipelineConfig } from "../config/ingest-config.js";
import { IngestFileConflictError, InvalidInputError, NotFoundError, errorMessage } from "../model/errors.js";
import type { Lake } from "../lake/lake.js";
import type { AdaptiveLimit } from "../shared/adaptive-limit.js";
import { now } from "../shared/clock.js";
import { BackpressureError, UnavailableError } from "./http-errors.js";
import type { IngestAnswer, IngestHandler, IngestRequest } from "./http-server.js";
import type { Metrics } from "./metrics.js";
import { registerCollectorMetrics } from "./collector-metrics.js";
import { landingYields, type LandingYield } from "./landing-yield.js";
import { eventRecord, readRecords, type RequestKey } from "./request-body.js";
import { PipelineDedupe } from "./event-dedupe.js";
import { IdempotencyKeys, keysOf, requestDigest, windowSeconds } from "./idempotency.js";
import { CollectorCompaction } from "./collector-compaction.js";
import type { PartitionCompaction } from "../lake/operations/compact.js";
import { SegmentLander, type SegmentReport } from "./segment-lander.js";
import { WriteAheadLog } from "./wal/write-ahead-log.js";
import type { WalPosition, WalRecord } from "./wal/framing.js";
import type { SyncerKind } from "./wal/wal-sync.js";

/**
 * How long, at most, the catalog file's view of a table lags behind the segments landed into it while a collector lands
 * a backlog (../lake/catalog-file-deferral.ts); a round with no backlog rewrites it once, at its end.
 */
const CATALOG_FILE_LAG_MS = 1000;

/** How long, and how many, idempotency keys a collector remembers when its pipeline does not say (`idempotency_window`, `idempotency_max_keys`). */
const DEFAULT_IDEMPOTENCY = { windowMs: 24 * 3_600_000, maxKeys: 100_000 };

/** The Retry-After of a request refused because the log stopped: until an operator restarts the collector. */
const STOPPED_RETRY_AFTER_SECONDS = 30;

/** How long landing may keep failing before the collector reports itself not ready: 2 minutes (a few retries). */
const UNHEALTHY_AFTER_FAILING_MS = 120_000;

/** The bounds of a backpressure answer's Retry-After, seconds. */
const RETRY_AFTER_BOUNDS = { min: 1, max: 60 };

/** Counts kept by a collector, also rendered as metrics. */
interface IngestCounts {
  accepted: number;
  /** Events dropped at acceptance because their namespace took their id within its `dedupe` window. */
  deduplicated: number;
  written: number;
  deadLettered: number;
  segments: number;
  corruptRecords: number;
  /** Segments moved out of the log because the lake held other rows where their files go. */
  quarantinedSegments: number;
}

/** How to open one pipeline's collector. */
export interface CollectorOptions {
  readonly pipeline: IngestPipelineConfig;
  /** The lake of the pipeline's data sink (its namespaces' tables), whose Landing port lands their events. */
  readonly lake: Lake;
  /** The lake of its dead-letter sink (the table named after the pipeline); may be `lake`. */
  readonly deadLetterLake: Lake;
  readonly metrics: Metrics;
  readonly log?: (line: string) => void;
  /** The auto-tuned limits of its AWS lakes, shown in the metrics and /healthz (none for embedded lakes). */
  readonly limits?: { readonly upload: AdaptiveLimit; readonly glue: AdaptiveLimit };
  /** Where the log runs its fdatasyncs (`WalOptions.syncer`): `thread` in `lakeswap serve`, which lowers its other threads. */
  readonly walSyncer?: SyncerKind;
  /** Whether the timed landing yields to appends (`lakeswap serve`: `LANDING_YIELDS`); by default it never does. */
  readonly yieldToAppends?: LandingYield;
  /** How long landing may keep failing before /healthz answers 503 (not ready); default `UNHEALTHY_AFTER_FAILING_MS`. */
  readonly unhealthyAfterFailingMs?: number;
}

/** A segment quarantined since the collector started (shown by /healthz). */
interface Quarantined {
  readonly segment: string;
  readonly file: string;
  readonly object: string;
  readonly reason: string;
  readonly at: string;
}

/**
 * One pipeline's collector: requests are appended to the pipeline's write-ahead log (and acknowledged once
 * durable); sealed segments are landed (`SegmentLander`), one at a time and oldest first, and only then removed
 * from the log. A segment that fails stays in the log and is retried; nothing acknowledged is ever dropped. Its
 * lifecycle: `open` (recover the log, declare the tables), `start` (seal and land on timers), `flush` (land all,
 * on SIGTERM or at the end of `lakeswap ingest`), `close`.
 */
export class Collector implements IngestHandler {
  readonly counts: IngestCounts = { accepted: 0, deduplicated: 0, written: 0, deadLettered: 0, segments: 0, corruptRecords: 0, quarantinedSegments: 0 };
  private readonly quarantined: Quarantined[] = [];
  private readonly namespaces: Set<string>;
  private lander!: SegmentLander;
  private keys!: IdempotencyKeys;
  /** The ids each namespace with `dedupe:` took within its window. */
  private dedupe!: PipelineDedupe;
  private readonly firstReceived = new Map<string, number>();
  /** When the timed landing first left each sealed segment for later (see `LandingYield`). */
  private readonly yieldingSince = new Map<string, number>();
  private processing: Promise<void> = Promise.resolve();
  private timer: NodeJS.Timeout | undefined;
  /** The timer that seals the active segment when it is due, on its own so that no landing holds it up. */
  private sealTimer: NodeJS.Timeout | undefined;
  /** A timed landing is running (a tick that finds one running leaves it be, rather than queueing another behind it). */
  private landing = false;
  private closed = false;
  private lastError: string | undefined;
  private failures = 0;
  private retryAt = 0;
  /** When landing started failing (the first of the failures in a row), or undefined while it lands. */
  private failingSince: number | undefined;
  /** Bytes of the log landed per second, measured over the recent segments (undefined before the first). */
  private drainBytesPerSecond: number | undefined;
  /** The pipeline's own compaction (`compact:`), run between landings when due. */
  private compaction: CollectorCompaction | undefined;

  private constructor(
    private readonly options: CollectorOptions,
    private readonly wal: WriteAheadLog,
  ) {
    this.namespaces = new Set(options.pipeline.namespaces.map((ns) => ns.name));
    registerCollectorMetrics(options.metrics, options.pipeline.name, {
      walBytes: () => this.wal.bytes,
      sealedSegments: () => this.wal.sealed().length,
      lagSeconds: () => this.lagSeconds(),
      failingSeconds: () => (this.failingSince === undefined ? 0 : (Date.now() - this.failingSince) / 1000),
      counts: () => this.counts,
      idempotency: () => this.keys,
      limits: options.limits,
    });
  }

  /** Opens the pipeline's log (recovering what a crash left) and declares its tables; then `start` runs the uploader. */
  static async open(options: CollectorOptions): Promise<Collector> {
    const { pipeline } = options;
    assertNamespaces(pipeline);
    if (pipeline.namespaces.some((ns) => ns.name === pipeline.name) && options.lake === options.deadLetterLake) {
      throw new InvalidInputError(
        `pipelines.${pipeline.name}: its dead letters go to table '${pipeline.name}', which is also one of its namespaces; rename the namespace or the pipeline`,
      );
    }
    const wal = await WriteAheadLog.open({ ...pipeline.wal, syncer: options.walSyncer });
    const collector = new Collector(options, wal);
    try {
      for (const cut of wal.recovery.truncated) collector.log(`write-ahead log ${pipeline.wal.dir}: a torn record at the end of segment ${cut.segment} (offset ${cut.offset}, ${cut.bytes} bytes) was cut off; it was never acknowledged`);
      for (const bad of wal.recovery.corrupt) collector.log(`write-ahead log ${pipeline.wal.dir}: segment ${bad.segment} has ${bad.bytes} corrupt bytes at offset ${bad.offset} (${bad.reason}); skipped, the rest recovered`);
      collector.counts.corruptRecords += wal.recovery.corrupt.length;
      // The keys of requests landed earlier (the key file), then of those still in the log (their records).
      const { windowMs, maxKeys } = pipeline.idempotency ?? DEFAULT_IDEMPOTENCY;
      collector.keys = await IdempotencyKeys.open(pipeline.wal.dir, windowMs, maxKeys);
      collector.dedupe = await PipelineDedupe.open(pipeline.wal.dir, pipeline.namespaces);
      for (const segment of wal.sealed()) await wal.withSegment(segment, async ({ records }) => collector.remember(records));
      collector.lander = await SegmentLander.open({ pipeline, lake: options.lake, deadLetterLake: options.deadLetterLake, walId: wal.id, log: (line) => collector.log(line) });
      collector.compaction = CollectorCompaction.of(pipeline, options, (line) => collector.log(line));
    } catch (error) {
      await wal.close();
      throw error;
    }
    return collector;
  }

  get walBytes(): number {
    return this.wal.bytes;
  }

  /**
   * Appends a request's events to the log; resolves once they are durable. A request sent with an idempotency key
   * that was already stored (same key, same pipeline, namespace and body, within the window) stores nothing and gets
   * the first answer again (`replayed`); one sent while the first is still being written waits for it. The same key
   * with another request is refused (422).
   */
  async accept(request: IngestRequest): Promise<IngestAnswer> {
    if (request.pipeline !== this.options.pipeline.name) throw new NotFoundError(`pipeline '${request.pipeline}' is not served here; it serves ${this.options.pipeline.name}`);
    if (!this.namespaces.has(request.namespace)) {
      throw new NotFoundError(
        `pipeline '${request.pipeline}' has no namespace '${request.namespace}'; its namespaces: ${[...this.namespaces].join(", ")} (declare it under pipelines.${request.pipeline}.namespaces)`,
      );
    }
    const key = request.idempotencyKey;
    if (key === undefined) return this.store(request, undefined);
    const hash = requestDigest(request.pipeline, request.namespace, request.body);
    const window = { idempotencyWindowSeconds: windowSeconds(this.keys.windowMs) };
    for (;;) {
      const seen = this.keys.seen(key, hash);
      if (seen !== undefined) return { accepted: seen.accepted, ...this.deduplicated(request.namespace, seen.deduplicated ?? 0), replayed: true, ...window };
      const running = this.keys.running(key);
      if (running === undefined) break;
      if (running.hash !== hash) throw this.keys.conflict(key);
      // The first request settled: stored (seen next time round), or failed (this one stores its events itself).
      await running.done.catch(() => undefined);
    }
    // Remembered as part of the write, so that a retry waiting for it finds the key once it settles. Nothing stored (a
    // body without events) is nothing to replay.
    const stored = this.store(request, { key, hash }).then((answer) => {
      if (answer.accepted > 0) this.keys.remember(key, { hash, accepted: answer.accepted, deduplicated: answer.deduplicated ?? 0, at: Date.now() });
      return answer;
    });
    this.keys.start(key, hash, stored);
    return { ...(await stored), ...window };
  }

  /**
   * Appends the request's events as one record (with its key and digest, when it has a key; without the events its
   * namespace took before, when it dedupes); resolves once durable.
   */
  private async store(request: IngestRequest, requestKey: RequestKey | undefined): Promise<IngestAnswer> {
    const receivedAt = Date.now();
    const seen = this.dedupe.of(request.namespace);
    let record: ReturnType<typeof eventRecord>;
    let taken: string[] = [];
    const takenAt = now();
    for (;;) {
      let wait: Promise<unknown> | undefined;
      const dedupe = (lines: Buffer[]) => {
        const filtered = seen!.filter(lines, takenAt);
        ({ taken, wait } = filtered);
        return filtered;
      };
      record = eventRecord(request.namespace, request.body, request.format, receivedAt, { ...(requestKey ? { requestKey } : {}), ...(seen ? { dedupe } : {}) });
      if (wait === undefined) break;
      // An id of this request is being written by another one: its outcome decides whether this one's is a duplicate.
      await wait;
    }
    const deduplicated = this.deduplicated(request.namespace, record.duplicates);
    if (record.events === 0) {
      this.counts.deduplicated += record.duplicates;
      return { accepted: 0, ...deduplicated };
    }
    const append = this.append(record.parts);
    seen?.hold(taken, append);
    const position = await append;
    this.dedupe.appended(position.segment, request.namespace, taken, takenAt);
    if (!this.firstReceived.has(position.segment)) this.firstReceived.set(position.segment, receivedAt);
    this.counts.accepted += record.events;
    this.counts.deduplicated += record.duplicates;
    return { accepted: record.events, ...deduplicated };
  }

  /** Appends a record to the log, unless it stopped or is full; resolves once durable. */
  private async append(parts: readonly Buffer[]): Promise<WalPosition> {
    this.refuseIfStopped();
    if (this.wal.overLimit) {
      throw new BackpressureError(
        `the write-ahead log holds ${this.wal.bytes} bytes, at its limit of ${this.options.pipeline.wal.maxBytes} (wal.max_bytes): the uploader is behind; retry later`,
        this.retryAfterSeconds(),
      );
    }
    try {
      return await this.wal.append(parts);
    } catch (error) {
      // The log stopped on this very append (a disk error): refused like every later one.
      this.refuseIfStopped();
      throw error;
    }
  }

  /** The `deduplicated` of an answer: present for a namespace that dedupes. */
  private deduplicated(namespace: string, count: number): { deduplicated?: number } {
    return this.dedupe.of(namespace) ? { deduplicated: count } : {};
  }

  /** Remembers the idempotency keys and event ids of records in the log (when the collector starts). */
  private remember(records: readonly WalRecord[]): void {
    const read = readRecords(records);
    this.keys.restore(keysOf(read));
    this.dedupe.restore(read);
  }

  health(): { readonly ok: boolean; readonly detail: Record<string, unknown> } {
    const stopped = this.wal.stopped;
    const failing = this.landingFailing();
    return {
      ok: !this.wal.overLimit && !stopped && failing === undefined,
      detail: {
        pipeline: this.options.pipeline.name,
        ...(stopped ? { walStopped: stopped.message } : {}),
        ...(failing ? { landingFailing: failing } : {}),
        walBytes: this.wal.bytes,
        walLimit: this.options.pipeline.wal.maxBytes,
        sealedSegments: this.wal.sealed().length,
        uploadLagSeconds: this.lagSeconds(),
        ...(this.options.limits ? { uploadConcurrency: this.options.limits.upload.current, glueConcurrency: this.options.limits.glue.current } : {}),
        ...(this.lastError ? { lastError: this.lastError } : {}),
        ...(this.quarantined.length > 0 ? { quarantined: this.quarantined } : {}),
        ...this.counts,
      },
    };
  }

  /** Runs the uploader every `intervalMs`: seals the active segment when due, then lands every sealed segment. */
  start(intervalMs = 1000): void {
    if (this.timer) return;
    this.timer = setInterval(() => {
      void this.tick();
    }, intervalMs);
    // Sealing is the log's own work (serialized with its appends), never queued behind a landing, so that a segment is
    // sealed at segment_max_age whatever the landing does; checked every twentieth of that age (10 ms at least).
    const sealEvery = Math.max(10, Math.min(intervalMs, this.options.pipeline.wal.segmentMaxAgeMs / 20));
    this.sealTimer = setInterval(() => {
      void this.sealIfDue();
    }, sealEvery);
  }

  /** Seals the active segment (if it holds anything) and lands every sealed segment; throws the first failure. */
  async flush(): Promise<SegmentReport[]> {
    return this.inTurn(async () => {
      await this.wal.seal();
      return this.drain(true);
    });
  }

  /** Compacts the closed days of the pipeline's tables now, between landings (`compact:`; nothing without it). */
  async compact(): Promise<PartitionCompaction[]> {
    return this.inTurn(async () => (await this.compaction?.run()) ?? []);
  }

  /** Runs `work` after the landing or compaction before it, as the next one's turn. */
  private inTurn<T>(work: () => Promise<T>): Promise<T> {
    const run = this.processing.then(work);
    this.processing = run.then(() => undefined, () => undefined);
    return run;
  }

  /** Stops the uploader and closes the log (pending appends made durable); segments not landed stay for the next start. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    if (this.sealTimer) clearInterval(this.sealTimer);
    this.timer = undefined;
    this.sealTimer = undefined;
    await this.processing;
    await this.wal.close();
  }

  /** Seals the active segment if it is due, and lands it at once (rather than at the next tick) when no landing runs. */
  private async sealIfDue(): Promise<void> {
    if (this.closed) return;
    // A log that stopped refuses: /healthz and every request say so already.
    const sealed = await this.wal.rotateIfDue().catch(() => undefined);
    if (sealed !== undefined) await this.tick();
  }

  /** Lands every sealed segment, unless a landing runs already or a failed one waits for its retry. */
  private async tick(): Promise<void> {
    if (this.closed || this.landing || Date.now() < this.retryAt) return;
    this.landing = true;
    try {
      // A compaction that is due runs right after the landing, in the same turn.
      await this.inTurn(async () => {
        await this.drain(false);
        if (this.compaction?.due()) await this.compaction.run();
      }).catch(() => undefined);
    } finally {
      this.landing = false;
    }
  }

  /** Whether the timed landing leaves `segment`, the oldest sealed one, for later (see `LandingYield`). */
  private yieldsTo(segment: string): boolean {
    const policy = this.options.yieldToAppends;
    if (!policy) return false;
    const now = Date.now();
    const since = this.yieldingSince.get(segment) ?? now;
    const log = { demand: this.wal.demand, sealed: this.wal.sealed().length, waitedMs: now - since, bytes: this.wal.bytes, maxBytes: this.options.pipeline.wal.maxBytes };
    if (!landingYields(policy, log)) return false;
    this.yieldingSince.set(segment, since);
    return true;
  }

  /**
   * Lands the sealed segments oldest first; a failure stops the round (order matters: each collector's segments count in
   * order). The catalog file's views of a round's tables are rewritten at most every CATALOG_FILE_LAG_MS and at its end.
   */
  private drain(throwOnError: boolean): Promise<SegmentReport[]> {
    const { lake, deadLetterLake } = this.options;
    return lake.parts.deferCatalogFile(() => deadLetterLake.parts.deferCatalogFile(() => this.landSealed(throwOnError), CATALOG_FILE_LAG_MS), CATALOG_FILE_LAG_MS);
  }

  private async landSealed(throwOnError: boolean): Promise<SegmentReport[]> {
    const reports: SegmentReport[] = [];
    // The oldest sealed segment each time: segments sealed while this one lands are landed in the same round.
    const attempted = new Set<string>();
    for (let segment = this.wal.sealed()[0]; segment !== undefined && !attempted.has(segment); segment = this.wal.sealed()[0]) {
      attempted.add(segment);
      if (!throwOnError && this.yieldsTo(segment)) break;
      try {
        const bytes = this.wal.sizeOf(segment);
        const started = performance.now();
        reports.push(await this.land(segment));
        this.measureDrain(bytes, performance.now() - started);
        this.failures = 0;
        this.failingSince = undefined;
        this.lastError = undefined;
      } catch (error) {
        if (error instanceof IngestFileConflictError) {
          reports.push(await this.quarantine(segment, error));
          continue;
        }
        this.failed(segment, error);
        if (throwOnError) throw error;
        break;
      }
    }
    return reports;
  }

  /** Notes a segment that failed to land: it and everything after it stay in the log, retried with backoff (1 s doubling to a minute). */
  private failed(segment: string, error: unknown): void {
    this.failures += 1;
    this.failingSince ??= Date.now();
    this.lastError = `segment ${segment}: ${errorMessage(error)}`;
    this.retryAt = Date.now() + Math.min(60_000, 1000 * 2 ** Math.min(this.failures - 1, 6));
    this.log(`could not land ${this.lastError}; it stays in the write-ahead log and is retried`);
  }

  /** Lands one sealed segment (`SegmentLander.land`), then removes it from the log. */
  private land(segment: string): Promise<SegmentReport> {
    return this.wal.withSegment(segment, async (contents) => {
      const report = await this.lander.land(segment, contents);
      // Its keys and event ids go to their files before the segment leaves the log: a retry after that still finds them.
      const read = readRecords(contents.records);
      await this.keys.persist(keysOf(read));
      await this.dedupe.persist(segment, read);
      await this.wal.remove(segment);
      this.firstReceived.delete(segment);
      this.yieldingSince.delete(segment);
      this.counts.written += report.written;
      this.counts.deadLettered += report.deadLettered;
      this.counts.segments += 1;
      this.counts.corruptRecords += contents.corrupt.length;
      return report;
    });
  }

  /**
   * Moves a segment that cannot land (the lake holds other rows where one of its files goes) out of the log, so that the
   * segments after it land, and says so loudly: in the log, /healthz (`quarantined`) and /metrics. Its events stay in
   * the quarantine folder; what it had stored and registered before the conflict stays too.
   */
  private async quarantine(segment: string, error: IngestFileConflictError): Promise<SegmentReport> {
    const file = await this.wal.quarantine(segment);
    this.dedupe.drop(segment);
    this.firstReceived.delete(segment);
    this.yieldingSince.delete(segment);
    this.quarantined.push({ segment, file, object: error.key, reason: error.message, at: new Date().toISOString() });
    this.counts.quarantinedSegments += 1;
    this.log(
      `DEFECT: segment ${segment} cannot land: ${error.message}. It was moved to ${file} (its events are kept there, not landed) and the collector goes on with the next segments; ` +
        `compare ${error.key} with the segment's events before doing anything with either`,
    );
    return { segment, events: 0, written: 0, deadLettered: 0, files: 0, corruptBytes: 0, quarantined: file };
  }

  private lagSeconds(): number {
    const oldest = Math.min(...this.firstReceived.values());
    return Number.isFinite(oldest) ? Math.max(0, (Date.now() - oldest) / 1000) : 0;
  }

  /**
   * A log that stopped after a disk error takes nothing until the collector is restarted: the request is refused with 503
   * (a client or load balancer goes elsewhere, or comes back), not 500, and the message says what the operator must do.
   */
  private refuseIfStopped(): void {
    const stopped = this.wal.stopped;
    if (stopped) throw new UnavailableError(stopped.code, `the collector takes no events: ${stopped.message}`, STOPPED_RETRY_AFTER_SECONDS);
  }

  /**
   * How long a client should wait before posting again to a full log: the time landing takes to bring the log under
   * its limit at the drain rate measured, or, while landing fails, until its next attempt; 1 to 60 s. Before any
   * measurement, the age at which a segment is sealed (the log's own pace).
   */
  private retryAfterSeconds(): number {
    const excess = this.wal.bytes - this.options.pipeline.wal.maxBytes + 1;
    const seconds =
      this.failingSince !== undefined ? (this.retryAt - Date.now()) / 1000
      : this.drainBytesPerSecond !== undefined ? excess / this.drainBytesPerSecond
      : this.options.pipeline.wal.segmentMaxAgeMs / 1000;
    return Math.max(RETRY_AFTER_BOUNDS.min, Math.min(RETRY_AFTER_BOUNDS.max, Math.ceil(seconds)));
  }

  /** Adds one segment's landing to the drain rate (weighted toward the recent ones). */
  private measureDrain(bytes: number | undefined, ms: number): void {
    if (bytes === undefined || bytes === 0 || ms <= 0) return;
    const rate = (bytes * 1000) / ms;
    this.drainBytesPerSecond = this.drainBytesPerSecond === undefined ? rate : (this.drainBytesPerSecond + rate) / 2;
  }

  /** Why the collector is not ready: landing has failed for longer than its bound (undefined: it lands, or not for long). */
  private landingFailing(): { since: string; failures: number; cause: string | undefined } | undefined {
    const bound = this.options.unhealthyAfterFailingMs ?? UNHEALTHY_AFTER_FAILING_MS;
    if (this.failingSince === undefined || Date.now() - this.failingSince < bound) return undefined;
    return { since: new Date(this.failingSince).toISOString(), failures: this.failures, cause: this.lastError };
  }

  private log(line: string): void {
    (this.options.log ?? ((text: string) => process.stderr.write(`lakeswap: ${text}\n`)))(line);
  }
}
