import { createHash } from "node:crypto";
import { isUtf8 } from "node:buffer";
import { mkdtemp, open, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { assertNamespaces, type IngestNamespaceConfig, type IngestPipelineConfig } from "../config/ingest-config.js";
import { IngestFileConflictError, InvalidInputError, LakeswapError, NotFoundError, errorMessage } from "../model/errors.js";
import { faultPoint } from "../shared/faults.js";
import type { SegmentContribution } from "../lake/operations/register-segment.js";
import type { Lake } from "../lake/lake.js";
import { partitionPath } from "../model/partition.js";
import { defineTable, type TableDefinition } from "../model/table.js";
import type { LandColumn, LandedDelivery } from "../landing/landing.js";
import { BackpressureError, UnavailableError, type IngestHandler, type IngestRequest } from "./http-server.js";
import type { AdaptiveLimit } from "../shared/adaptive-limit.js";
import type { Metrics } from "./metrics.js";
import { WriteAheadLog, type SegmentContents, type WalPosition, type WalRecord } from "./wal.js";
import type { SyncerKind } from "./wal-sync.js";
import { freshProcessFolder } from "../shared/process-folders.js";
import { registerIngested, storeIngestedFiles } from "../lake/operations/register-segment.js";

/** The prefix of a landing's scratch folder in the machine's temporary folder; the owner's pid follows. */
const WORK_PREFIX = "lakeswap-ingest-";
/** The Retry-After of a request refused because the log stopped: until an operator restarts the collector. */
const STOPPED_RETRY_AFTER_SECONDS = 30;

/** The columns of a pipeline's dead-letter table (named after the pipeline), partitioned by the day the event was received. */
export const DEAD_LETTER_COLUMNS = [
  { name: "namespace", type: "VARCHAR", nullable: false },
  { name: "received_at", type: "TIMESTAMPTZ", nullable: false },
  { name: "reason", type: "VARCHAR", nullable: false },
  { name: "raw", type: "VARCHAR", nullable: true },
  { name: "segment", type: "VARCHAR", nullable: false },
  { name: "line", type: "BIGINT", nullable: false },
] as const;

const DEAD_LETTER_PARTITION = [
  { key: "p_year", expression: "strftime(received_at, '%Y')" },
  { key: "p_month", expression: "strftime(received_at, '%m')" },
  { key: "p_day", expression: "strftime(received_at, '%d')" },
];

/** A WAL record's header line (before the request's events): the namespace, when it was received, how many events. */
interface RecordHeader {
  readonly v: 1;
  readonly ns: string;
  readonly t: number;
  readonly n: number;
}

/** What one segment became: events written to their namespaces' tables, and dead letters. */
export interface SegmentReport {
  readonly segment: string;
  readonly events: number;
  readonly written: number;
  readonly deadLettered: number;
  readonly files: number;
  /** Bytes skipped as corrupt (reported with their offsets when read). */
  readonly corruptBytes: number;
  /** Where the segment was moved when it could not land (see `IngestService.quarantine`); its events are not counted above. */
  readonly quarantined?: string;
}

/** Counts kept by a collector, also rendered as metrics. */
export interface IngestCounts {
  accepted: number;
  written: number;
  deadLettered: number;
  segments: number;
  corruptRecords: number;
  /** Segments moved out of the log because the lake held other rows where their files go. */
  quarantinedSegments: number;
}

export interface IngestServiceOptions {
  readonly pipeline: IngestPipelineConfig;
  /** The lake of the pipeline's data sink (its namespaces' tables). */
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

/** How long landing may keep failing before the collector reports itself not ready: 2 minutes (a few retries). */
const UNHEALTHY_AFTER_FAILING_MS = 120_000;

/** The bounds of a backpressure answer's Retry-After, seconds. */
const RETRY_AFTER_BOUNDS = { min: 1, max: 60 };

/**
 * When the timed landing leaves sealed segments for later: while appends were waiting for the log at least `demand`
 * of the recent past (`WriteAheadLog.demand`: a burst of requests, each waiting for a group commit), as long as no
 * more than `maxSegments` segments are sealed, the oldest has waited less than `maxMs`, and the log holds less than
 * half its size limit (`wal.max_bytes`, where backpressure starts). Landing a segment takes the CPU and the disk
 * that the answers to requests wait for; a burst is answered first, and landed right after it (or once the log
 * holds more, or after `maxMs`). A flush (SIGTERM, `lakeswap ingest`) lands all.
 */
export interface LandingYield {
  readonly demand: number;
  readonly maxSegments: number;
  readonly maxMs: number;
}

/** The state of a log that `LandingYield` decides on: its demand, sealed segments, how long the oldest has waited, its bytes and limit. */
export interface LogState {
  readonly demand: number;
  readonly sealed: number;
  readonly waitedMs: number;
  readonly bytes: number;
  readonly maxBytes: number;
}

/** Whether the timed landing leaves the oldest sealed segment for later (see `LandingYield`). */
export function landingYields(policy: LandingYield, log: LogState): boolean {
  return log.demand >= policy.demand && log.sealed <= policy.maxSegments && log.waitedMs < policy.maxMs && log.bytes * 2 < log.maxBytes;
}

/**
 * `lakeswap serve`'s: appends waiting half the time or more (a client that posts again as soon as it is answered
 * keeps one waiting about that much; a steady 20,000 events/s in requests of 1,000, a few hundredths); at most 3
 * sealed segments (192 MiB by default) or 10 seconds.
 */
export const LANDING_YIELDS: LandingYield = { demand: 0.5, maxSegments: 3, maxMs: 10_000 };

/**
 * One pipeline's collector: requests are appended to the pipeline's write-ahead log (and acknowledged once
 * durable); sealed segments are landed, one at a time and oldest first, into each namespace's ingested table
 * (one Snappy Parquet file per partition, stored once at a key derived from the segment and the partition),
 * their partitions registered with their signatures, their bad events dead-lettered, and only then removed
 * from the log. A segment that fails stays in the log and is retried; nothing acknowledged is ever dropped.
 */
export class IngestService implements IngestHandler {
  readonly counts: IngestCounts = { accepted: 0, written: 0, deadLettered: 0, segments: 0, corruptRecords: 0, quarantinedSegments: 0 };
  /** The segments quarantined since the collector started (shown by /healthz). */
  private readonly quarantined: { segment: string; file: string; object: string; reason: string; at: string }[] = [];
  private readonly namespaces: Map<string, IngestNamespaceConfig>;
  private readonly tables = new Map<string, TableDefinition>();
  private deadLetterTable!: TableDefinition;
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

  private constructor(
    private readonly options: IngestServiceOptions,
    private readonly wal: WriteAheadLog,
  ) {
    this.namespaces = new Map(options.pipeline.namespaces.map((ns) => [ns.name, ns]));
    this.registerMetrics();
  }

  /** Opens the pipeline's log (recovering what a crash left) and declares its tables; then `start` runs the uploader. */
  static async open(options: IngestServiceOptions): Promise<IngestService> {
    const { pipeline } = options;
    assertNamespaces(pipeline);
    if (pipeline.namespaces.some((ns) => ns.name === pipeline.name) && options.lake === options.deadLetterLake) {
      throw new InvalidInputError(
        `pipelines.${pipeline.name}: its dead letters go to table '${pipeline.name}', which is also one of its namespaces; rename the namespace or the pipeline`,
      );
    }
    const wal = await WriteAheadLog.open({ ...pipeline.wal, syncer: options.walSyncer });
    const service = new IngestService(options, wal);
    try {
      for (const cut of wal.recovery.truncated) service.log(`write-ahead log ${pipeline.wal.dir}: a torn record at the end of segment ${cut.segment} (offset ${cut.offset}, ${cut.bytes} bytes) was cut off; it was never acknowledged`);
      for (const bad of wal.recovery.corrupt) service.log(`write-ahead log ${pipeline.wal.dir}: segment ${bad.segment} has ${bad.bytes} corrupt bytes at offset ${bad.offset} (${bad.reason}); skipped, the rest recovered`);
      service.counts.corruptRecords += wal.recovery.corrupt.length;
      for (const ns of pipeline.namespaces) {
        const table = namespaceTable(ns);
        await options.lake.createTable(table);
        service.tables.set(ns.name, table);
      }
      service.deadLetterTable = defineTable({ name: pipeline.name, columns: [...DEAD_LETTER_COLUMNS], partitionKeys: DEAD_LETTER_PARTITION.map((p) => p.key), ingest: true });
      await options.deadLetterLake.createTable(service.deadLetterTable);
    } catch (error) {
      await wal.close();
      throw error;
    }
    return service;
  }

  get walBytes(): number {
    return this.wal.bytes;
  }

  async accept(request: IngestRequest): Promise<{ readonly accepted: number }> {
    if (request.pipeline !== this.options.pipeline.name) throw new NotFoundError(`pipeline '${request.pipeline}' is not served here; it serves ${this.options.pipeline.name}`);
    if (!this.namespaces.has(request.namespace)) {
      throw new NotFoundError(
        `pipeline '${request.pipeline}' has no namespace '${request.namespace}'; its namespaces: ${[...this.namespaces.keys()].join(", ")} (declare it under pipelines.${request.pipeline}.namespaces)`,
      );
    }
    const chunks = Buffer.isBuffer(request.body) ? [request.body] : request.body;
    if (!isUtf8Text(chunks)) throw new InvalidInputError("the body is not UTF-8 text; send JSON encoded as UTF-8");
    const { lines, events } = request.format === "json" ? jsonArrayLines(Buffer.concat(chunks)) : ndjsonLines(chunks);
    if (events === 0) return { accepted: 0 };
    this.refuseIfStopped();
    if (this.wal.overLimit) {
      throw new BackpressureError(
        `the write-ahead log holds ${this.wal.bytes} bytes, at its limit of ${this.options.pipeline.wal.maxBytes} (wal.max_bytes): the uploader is behind; retry later`,
        this.retryAfterSeconds(),
      );
    }
    const receivedAt = Date.now();
    const header = Buffer.from(`${JSON.stringify({ v: 1, ns: request.namespace, t: receivedAt, n: events } satisfies RecordHeader)}\n`);
    let position: WalPosition;
    try {
      position = await this.wal.append([header, ...lines]);
    } catch (error) {
      // The log stopped on this very append (a disk error): refused like every later one.
      this.refuseIfStopped();
      throw error;
    }
    if (!this.firstReceived.has(position.segment)) this.firstReceived.set(position.segment, receivedAt);
    this.counts.accepted += events;
    return { accepted: events };
  }

  health(): { readonly ok: boolean; readonly detail: Record<string, unknown> } {
    const lagSeconds = this.lagSeconds();
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
        uploadLagSeconds: lagSeconds,
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
    const run = this.processing.then(async () => {
      await this.wal.seal();
      return this.drain(true);
    });
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
    const run = this.processing.then(() => this.drain(false));
    this.processing = run.then(() => undefined, () => undefined);
    try {
      await this.processing;
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

  /** Lands the sealed segments oldest first; a failure stops the round (order matters: each collector's segments count in order). */
  private async drain(throwOnError: boolean): Promise<SegmentReport[]> {
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
        this.failures += 1;
        this.failingSince ??= Date.now();
        this.lastError = `segment ${segment}: ${errorMessage(error)}`;
        // Retried with backoff (1 s doubling to a minute); the segment and everything after it stay in the log.
        this.retryAt = Date.now() + Math.min(60_000, 1000 * 2 ** Math.min(this.failures - 1, 6));
        this.log(`could not land ${this.lastError}; it stays in the write-ahead log and is retried`);
        if (throwOnError) throw error;
        break;
      }
    }
    return reports;
  }

  /**
   * Moves a segment that cannot land (the lake holds other rows where one of its files goes) out of the log, so that the
   * segments after it land, and says so loudly: in the log, /healthz (`quarantined`) and /metrics. Its events stay in
   * the quarantine folder; what it had stored and registered before the conflict stays too.
   */
  private async quarantine(segment: string, error: IngestFileConflictError): Promise<SegmentReport> {
    const file = await this.wal.quarantine(segment);
    this.firstReceived.delete(segment);
    this.yieldingSince.delete(segment);
    const found = { segment, file, object: error.key, reason: error.message, at: new Date().toISOString() };
    this.quarantined.push(found);
    this.counts.quarantinedSegments += 1;
    this.log(
      `DEFECT: segment ${segment} cannot land: ${error.message}. It was moved to ${file} (its events are kept there, not landed) and the collector goes on with the next segments; ` +
        `compare ${error.key} with the segment's events before doing anything with either`,
    );
    return { segment, events: 0, written: 0, deadLettered: 0, files: 0, corruptBytes: 0, quarantined: file };
  }

  /** Lands one sealed segment: each namespace's events, then its dead letters; then removes it from the log. */
  private land(segment: string): Promise<SegmentReport> {
    return this.wal.withSegment(segment, (contents) => this.landContents(segment, contents));
  }

  private async landContents(segment: string, { records, corrupt }: SegmentContents): Promise<SegmentReport> {
    const corruptBytes = corrupt.reduce((sum, c) => sum + c.bytes, 0);
    for (const bad of corrupt) this.log(`segment ${segment}: ${bad.bytes} corrupt bytes at offset ${bad.offset} (${bad.reason}) skipped`);
    const sequence = segmentSequence(segment);
    // A folder of this process's own (lakeswap-ingest-<pid>-…): the folders that a collector killed while landing left
    // behind (up to a segment's size each) are removed here, by the next landing of any collector on the machine.
    const work = await freshProcessFolder(WORK_PREFIX);
    let events = 0;
    let written = 0;
    let deadLettered = 0;
    let files = 0;
    try {
      const byNamespace = groupByNamespace(records, (record, reason) => this.log(`segment ${segment}: record at offset ${record.offset} skipped: ${reason}`));
      // The partitions of the dead-letter table that an earlier namespace of this segment wrote to (see `deadLetterFile`).
      const deadLetterPartitions = new Set<string>();
      for (const [name, group] of byNamespace) {
        const ns = this.namespaces.get(name);
        const table = this.tables.get(name);
        events += group.events;
        if (!ns || !table) {
          // A namespace removed from the config while its events waited in the log: they are dead-lettered, not dropped.
          const reason = `namespace '${name}' is no longer declared in pipelines.${this.options.pipeline.name}.namespaces`;
          deadLettered += await this.deadLetterAll(segment, sequence, name, group, work, reason, deadLetterPartitions);
          continue;
        }
        const file = path.join(work, `${name}.jsonl`);
        await writeParts(file, group.bodies);
        const delivery = await this.options.lake.landing.land({
          id: `${segment}-${name}`,
          files: [file],
          format: "jsonl",
          header: false,
          delimiter: ",",
          columns: landingColumns(ns),
          partition: ns.time.partition,
          signatureColumns: table.columns.map((c) => c.name),
          unknownFields: { mode: ns.unknownFields, column: ns.unknownFields === "keep" ? ns.extraColumn : undefined },
          // Each event stands alone: a field no event of this segment sends is NULL, not a reason to stop.
          absentFields: "null",
        });
        try {
          files += await this.store(this.options.lake, table, segment, sequence, delivery, work);
          written += delivery.rowsLoaded;
          if (delivery.rowsRejected > 0) {
            deadLettered += await this.deadLetter(segment, sequence, name, delivery, group.receivedAt, work, deadLetterPartitions);
          }
        } finally {
          await this.options.lake.landing.releaseLanding(delivery);
        }
      }
      faultPoint("ingest-after-register");
      await this.wal.remove(segment);
      this.firstReceived.delete(segment);
      this.yieldingSince.delete(segment);
      this.counts.written += written;
      this.counts.deadLettered += deadLettered;
      this.counts.segments += 1;
      this.counts.corruptRecords += corrupt.length;
      return { segment, events, written, deadLettered, files, corruptBytes };
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  }

  /**
   * Writes a landed delivery's partitions as files of the table (each stored once, at the key `place` gives), then
   * registers them, each partition under the collector `place` gives (by default: the file's key from the segment, the
   * table and the partition; the log's id).
   */
  private async store(lake: Lake, table: TableDefinition, segment: string, sequence: number, delivery: LandedDelivery, work: string, place: FilePlace = this.namespaceFile(segment, table)): Promise<number> {
    if (delivery.partitions.length === 0) return 0;
    const dir = await mkdtemp(path.join(work, `${table.name}-`));
    const files = await lake.landing.writeLandedFiles({ table, delivery, dir });
    await storeIngestedFiles(lake, 
      table.name,
      files.map((file) => ({ partition: file.partition, fileId: place(partitionPath(file.partition)).fileId, file: file.file, rows: file.rows })),
    );
    const byCollector = new Map<string, SegmentContribution[]>();
    for (const p of delivery.partitions) {
      if (!p.lanes) throw new LakeswapError("STORE_ERROR", `the landing gave no signature lanes for ${table.name}/${partitionPath(p.partition)}`);
      const { collector } = place(partitionPath(p.partition));
      byCollector.set(collector, [...(byCollector.get(collector) ?? []), { partition: p.partition, rows: p.rows, upper: p.lanes.upper, lower: p.lanes.lower }]);
    }
    faultPoint("ingest-after-upload");
    for (const [collector, contributions] of byCollector) await registerIngested(lake, table.name, { collector, sequence }, contributions);
    return files.length;
  }

  /** Where a segment's events of a namespace's own table go: one file per partition, counted under the log's id. */
  private namespaceFile(segment: string, table: TableDefinition): FilePlace {
    return (partition) => ({ fileId: segmentFileId(segment, table.name, partition), collector: this.wal.id });
  }

  /**
   * Where one namespace's dead letters of a segment go in the pipeline's dead-letter table, which every namespace of
   * the segment writes to: the first namespace (in the segment's order) to write to a partition takes the key and the
   * tally of the segment and partition, as every namespace did before they were told apart (so that a segment landed
   * in part by an older lakeswap lands the rest, nothing twice); every later one takes a key and a tally of its own.
   */
  private deadLetterFile(segment: string, label: string, claimed: Set<string>, partitions: readonly string[]): FilePlace {
    const first = new Set(partitions.filter((partition) => !claimed.has(partition)));
    for (const partition of partitions) claimed.add(partition);
    const table = this.options.pipeline.name;
    return (partition) =>
      first.has(partition)
        ? { fileId: segmentFileId(segment, table, partition), collector: this.wal.id }
        : { fileId: segmentFileId(segment, `${table}/${label}`, partition), collector: `${this.wal.id}/${label}` };
  }

  /** The bad events of a namespace's landing, into the pipeline's dead-letter table. */
  private async deadLetter(segment: string, sequence: number, namespace: string, delivery: LandedDelivery, receivedAt: readonly (readonly [number, number])[], work: string, claimed: Set<string>): Promise<number> {
    const file = path.join(work, `${namespace}.rejected.jsonl`);
    await this.options.lake.landing.writeRejected({ delivery, file, receivedAt, fields: { namespace, segment } });
    return this.landDeadLetters(segment, sequence, `${namespace}.dead`, file, claimed);
  }

  /** Every event of a group, dead-lettered with one reason (its namespace is gone). */
  private async deadLetterAll(segment: string, sequence: number, namespace: string, group: NamespaceGroup, work: string, reason: string, claimed: Set<string>): Promise<number> {
    const lines: string[] = [];
    let line = 0;
    for (const [index, body] of group.bodies.entries()) {
      const receivedAt = new Date(group.receivedAt[index]![1]).toISOString();
      for (const raw of body.toString("utf8").split("\n")) {
        line += 1;
        if (raw.trim() === "") continue;
        lines.push(JSON.stringify({ namespace, segment, line, reason, raw, received_at: receivedAt }));
      }
    }
    const file = path.join(work, `${namespace}.orphan.jsonl`);
    await writeFile(file, `${lines.join("\n")}\n`);
    return this.landDeadLetters(segment, sequence, `${namespace}.orphan`, file, claimed);
  }

  private async landDeadLetters(segment: string, sequence: number, label: string, file: string, claimed: Set<string>): Promise<number> {
    const lake = this.options.deadLetterLake;
    const delivery = await lake.landing.land({
      id: `${segment}-${label}`,
      files: [file],
      format: "jsonl",
      header: false,
      delimiter: ",",
      columns: [...DEAD_LETTER_COLUMNS],
      partition: DEAD_LETTER_PARTITION,
      signatureColumns: DEAD_LETTER_COLUMNS.map((c) => c.name),
      absentFields: "null",
    });
    try {
      if (delivery.rowsRejected > 0) throw new LakeswapError("STORE_ERROR", `the dead letters of ${label} could not be landed: ${delivery.firstRejects[0]?.reason}`);
      // The dead-letter table counts its segments on its own; the segment's number is the same, so a retry adds nothing twice.
      const place = this.deadLetterFile(segment, label, claimed, delivery.partitions.map((p) => partitionPath(p.partition)));
      await this.store(lake, this.deadLetterTable, segment, sequence, delivery, path.dirname(file), place);
      return delivery.rowsLoaded;
    } finally {
      await lake.landing.releaseLanding(delivery);
    }
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

  private registerMetrics(): void {
    const { metrics } = this.options;
    const labels = { pipeline: this.options.pipeline.name };
    // Counts are counters (they only grow), brought up to date when the metrics are rendered; what the log holds and how far
    // behind the uploader is are gauges.
    const gauge = (name: string, help: string, value: () => number): void => {
      const g = metrics.gauge(name, help, ["pipeline"], () => g.set(labels, value()));
    };
    const counter = (name: string, help: string, value: () => number): void => {
      let shown = 0;
      const c = metrics.counter(name, help, ["pipeline"], () => {
        const now = value();
        if (now > shown) c.inc(labels, now - shown);
        shown = now;
      });
    };
    gauge("lakeswap_ingest_wal_bytes", "Bytes in the write-ahead log (all segments).", () => this.wal.bytes);
    gauge("lakeswap_ingest_wal_sealed_segments", "Sealed segments waiting to be landed.", () => this.wal.sealed().length);
    gauge("lakeswap_ingest_upload_lag_seconds", "Age of the oldest event not yet landed and registered.", () => this.lagSeconds());
    gauge("lakeswap_ingest_landing_failing_seconds", "How long landing has kept failing (0 while it lands); past 120 s /healthz answers 503.", () =>
      this.failingSince === undefined ? 0 : (Date.now() - this.failingSince) / 1000,
    );
    const limits = this.options.limits;
    if (limits) {
      gauge("lakeswap_ingest_upload_concurrency", "The auto-tuned limit of S3 upload requests in flight (UPLOAD_CONCURRENCY).", () => limits.upload.current);
      gauge("lakeswap_ingest_glue_concurrency", "The auto-tuned limit of Glue calls in flight (ATHENA_GLUE_CONTROL_PLANE_CONCURRENCY).", () => limits.glue.current);
    }
    counter("lakeswap_ingest_events_accepted_total", "Events acknowledged (durable in the write-ahead log).", () => this.counts.accepted);
    counter("lakeswap_ingest_events_written_total", "Events written to their namespaces' tables.", () => this.counts.written);
    counter("lakeswap_ingest_events_dead_lettered_total", "Events written to the dead-letter table instead.", () => this.counts.deadLettered);
    counter("lakeswap_ingest_corrupt_records_total", "Corrupt write-ahead log records skipped.", () => this.counts.corruptRecords);
    counter(
      "lakeswap_ingest_segments_quarantined_total",
      "Segments moved out of the write-ahead log (to its quarantine folder) because the lake held other rows where their files go: a defect to look into.",
      () => this.counts.quarantinedSegments,
    );
  }

  private log(line: string): void {
    (this.options.log ?? ((text: string) => process.stderr.write(`lakeswap: ${text}\n`)))(line);
  }
}

/** A namespace's ingested table: its columns (and the extra column that keeps unknown fields), partitioned by its time bucketing. */
export function namespaceTable(ns: IngestNamespaceConfig): TableDefinition {
  return defineTable({
    name: ns.name,
    columns: landingColumns(ns).map(({ name, type }) => ({ name, type })),
    partitionKeys: ns.time.partition.map((p) => p.key),
    compression: "snappy",
    ingest: true,
  });
}

function landingColumns(ns: IngestNamespaceConfig): LandColumn[] {
  // The time field names each event's partition: landing reads it in its format and refuses a time outside years 0001-9999.
  const columns: LandColumn[] = ns.columns.map((c) => ({ name: c.name, type: c.type, nullable: c.nullable, ...(c.name === ns.time.field ? { eventTime: ns.time.format ?? "iso8601" } : {}) }));
  if (ns.unknownFields === "keep") columns.push({ name: ns.extraColumn, type: "VARCHAR", nullable: true });
  return columns;
}

/** A partition's file id in a table, and the collector id its tally counts the segment under. */
type FilePlace = (partition: string) => { readonly fileId: string; readonly collector: string };

interface NamespaceGroup {
  readonly bodies: Buffer[];
  /** (first line of the record's events in the namespace's file, receive time in ms). */
  readonly receivedAt: [number, number][];
  events: number;
  lines: number;
}

/** The records of a segment by namespace, each namespace's events as one JSONL text with each request's first line. */
function groupByNamespace(records: readonly WalRecord[], skipped: (record: WalRecord, reason: string) => void): Map<string, NamespaceGroup> {
  const groups = new Map<string, NamespaceGroup>();
  for (const record of records) {
    const end = record.payload.indexOf(10);
    let header: RecordHeader;
    try {
      header = JSON.parse(record.payload.subarray(0, end).toString("utf8")) as RecordHeader;
      if (header.v !== 1 || typeof header.ns !== "string" || typeof header.t !== "number") throw new Error("not a lakeswap record header");
    } catch (error) {
      skipped(record, errorMessage(error));
      continue;
    }
    const body = record.payload.subarray(end + 1);
    let group = groups.get(header.ns);
    if (!group) {
      group = { bodies: [], receivedAt: [], events: 0, lines: 0 };
      groups.set(header.ns, group);
    }
    group.receivedAt.push([group.lines + 1, header.t]);
    group.bodies.push(body);
    group.events += header.n;
    group.lines += countNewlines(body);
  }
  return groups;
}

function countNewlines(body: Buffer): number {
  let count = 0;
  for (let at = body.indexOf(10); at >= 0; at = body.indexOf(10, at + 1)) count += 1;
  return count;
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

/** Writes the parts one after the other into a new file (one writev, no copy of them joined). */
async function writeParts(file: string, parts: readonly Buffer[]): Promise<void> {
  const handle = await open(file, "wx");
  try {
    let index = 0;
    while (index < parts.length) {
      const batch = parts.slice(index, index + 512);
      const bytes = batch.reduce((sum, part) => sum + part.length, 0);
      const { bytesWritten } = await handle.writev(batch);
      if (bytesWritten !== bytes) await handle.write(Buffer.concat(batch).subarray(bytesWritten));
      index += batch.length;
    }
  } finally {
    await handle.close();
  }
}

/** The sequence number of a segment id (`<log id>-<number>`). */
function segmentSequence(segment: string): number {
  const sequence = Number(segment.slice(segment.lastIndexOf("-") + 1));
  if (!Number.isSafeInteger(sequence)) throw new LakeswapError("STORE_ERROR", `'${segment}' is not a write-ahead log segment id`);
  return sequence;
}

/** The file id of one segment's events in one partition: the segment, and a short digest of the table and partition. */
export function segmentFileId(segment: string, table: string, partition: string): string {
  return `${segment}-${createHash("sha256").update(`${table}/${partition}`).digest("hex").slice(0, 8)}`;
}
