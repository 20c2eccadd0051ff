import { mkdtemp, open, rm } from "node:fs/promises";
import path from "node:path";
import type { IngestNamespaceConfig, IngestPipelineConfig } from "../config/ingest-config.js";
import { LakeswapError, errorMessage } from "../model/errors.js";
import { faultPoint } from "../shared/faults.js";
import { freshProcessFolder } from "../shared/process-folders.js";
import { registerIngested, type SegmentContribution } from "../lake/operations/register-segment.js";
import type { Lake } from "../lake/lake.js";
import { partitionPath } from "../model/partition.js";
import { defineTable, type TableDefinition } from "../model/table.js";
import type { LandColumn, LandedDelivery } from "../landing/landing.js";
import { readRecord } from "./request-body.js";
import { DeadLetters } from "./dead-letters.js";
import { segmentFileId, segmentSequence, type FilePlace, type NamespaceGroup, type SegmentAt } from "./segment-keys.js";
import type { SegmentContents, WalRecord } from "./wal/framing.js";

/** The prefix of a landing's scratch folder in the machine's temporary folder; the owner's pid follows. */
const WORK_PREFIX = "lakeswap-ingest-";

/** What one segment became: events written to their namespaces' tables, and dead letters. */
export interface SegmentReport {
  readonly segment: string;
  readonly events: number;
  readonly written: number;
  readonly deadLettered: number;
  readonly files: number;
  /** Bytes skipped as corrupt (reported with their offsets when read). */
  readonly corruptBytes: number;
  /** Where the segment was moved when it could not land (see `Collector.quarantine`); its events are not counted above. */
  readonly quarantined?: string;
}

/** What a segment lander needs: the pipeline, its lakes, the id of its log, and where it says what it skipped. */
export interface SegmentLanderOptions {
  readonly pipeline: IngestPipelineConfig;
  readonly lake: Lake;
  readonly deadLetterLake: Lake;
  /** The write-ahead log's id: the collector each partition's tally counts the segments under. */
  readonly walId: string;
  readonly log: (line: string) => void;
}

/**
 * Lands the sealed segments of one pipeline's log: each namespace's events into its ingested table (one Snappy
 * Parquet file per partition, stored once at a key derived from the segment and the partition), the partitions
 * registered with their signatures, the bad events into the pipeline's dead-letter table. Landing a segment again
 * (after a crash or a failure) stores and counts nothing twice.
 */
export class SegmentLander {
  private readonly namespaces: Map<string, IngestNamespaceConfig>;
  private readonly tables = new Map<string, TableDefinition>();
  private readonly deadLetters: DeadLetters;

  private constructor(private readonly options: SegmentLanderOptions) {
    this.namespaces = new Map(options.pipeline.namespaces.map((ns) => [ns.name, ns]));
    this.deadLetters = new DeadLetters({ ...options, store: (...args) => this.store(...args) });
  }

  /** Declares the tables of the pipeline's namespaces and its dead-letter table (idempotent), and returns their lander. */
  static async open(options: SegmentLanderOptions): Promise<SegmentLander> {
    const lander = new SegmentLander(options);
    for (const ns of options.pipeline.namespaces) {
      lander.tables.set(ns.name, await options.lake.createTable(namespaceTable(ns)));
    }
    await lander.deadLetters.declare();
    return lander;
  }

  /** Lands one sealed segment's records: each namespace's events, then its dead letters. The caller removes it from the log. */
  async land(segment: string, { records, corrupt }: SegmentContents): Promise<SegmentReport> {
    const corruptBytes = corrupt.reduce((sum, c) => sum + c.bytes, 0);
    for (const bad of corrupt) this.options.log(`segment ${segment}: ${bad.bytes} corrupt bytes at offset ${bad.offset} (${bad.reason}) skipped`);
    const sequence = segmentSequence(segment);
    // A folder of this process's own (lakeswap-ingest-<pid>-…): the folders that a collector killed while landing left
    // behind (up to a segment's size each) are removed here, by the next landing of any collector on the machine.
    const work = await freshProcessFolder(WORK_PREFIX);
    const totals = { events: 0, written: 0, deadLettered: 0, files: 0 };
    try {
      const byNamespace = groupByNamespace(records, (record, reason) => this.options.log(`segment ${segment}: record at offset ${record.offset} skipped: ${reason}`));
      // The partitions of the dead-letter table that an earlier namespace of this segment wrote to (see `DeadLetters.place`).
      const claimed = new Set<string>();
      for (const [name, group] of byNamespace) {
        totals.events += group.events;
        const landed = await this.landNamespace({ segment, sequence, work, claimed }, name, group);
        totals.written += landed.written;
        totals.deadLettered += landed.deadLettered;
        totals.files += landed.files;
      }
      faultPoint("ingest-after-register");
      return { segment, ...totals, corruptBytes };
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  }

  /** Lands one namespace's events of a segment, and dead-letters the bad ones (all of them, when the namespace is gone). */
  private async landNamespace(at: SegmentAt, name: string, group: NamespaceGroup): Promise<{ written: number; deadLettered: number; files: number }> {
    const ns = this.namespaces.get(name);
    const table = this.tables.get(name);
    if (!ns || !table) {
      // A namespace removed from the config while its events waited in the log: they are dead-lettered, not dropped.
      const reason = `namespace '${name}' is no longer declared in pipelines.${this.options.pipeline.name}.namespaces`;
      return { written: 0, deadLettered: await this.deadLetters.all(at, name, group, reason), files: 0 };
    }
    const { lake } = this.options;
    const file = path.join(at.work, `${name}.jsonl`);
    await writeParts(file, group.bodies);
    const delivery = await lake.landing.land({
      id: `${at.segment}-${name}`,
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
      const files = await this.store(lake, table, at.segment, at.sequence, delivery, at.work, this.namespaceFile(at.segment, table));
      const deadLettered = delivery.rowsRejected > 0 ? await this.deadLetters.rejected(at, name, delivery, group.receivedAt) : 0;
      return { written: delivery.rowsLoaded, deadLettered, files };
    } finally {
      await lake.landing.releaseLanding(delivery);
    }
  }

  /**
   * Writes a landed delivery's partitions as files of the table (each stored once, at the key `place` gives), then
   * registers them, each partition under the collector `place` gives.
   */
  private async store(lake: Lake, table: TableDefinition, segment: string, sequence: number, delivery: LandedDelivery, work: string, place: FilePlace): Promise<number> {
    if (delivery.partitions.length === 0) return 0;
    const dir = await mkdtemp(path.join(work, `${table.name}-`));
    const files = await lake.landing.writeLandedFiles({ table, delivery, dir });
    const fileOf = new Map(files.map((file) => [partitionPath(file.partition), file]));
    const byCollector = new Map<string, SegmentContribution[]>();
    for (const p of delivery.partitions) {
      if (!p.lanes) throw new LakeswapError("STORE_ERROR", `the landing gave no signature lanes for ${table.name}/${partitionPath(p.partition)}`);
      const path = partitionPath(p.partition);
      const { collector, fileId } = place(path);
      const written = fileOf.get(path);
      const file = written && { fileId, path: written.file };
      byCollector.set(collector, [...(byCollector.get(collector) ?? []), { partition: p.partition, rows: p.rows, upper: p.lanes.upper, lower: p.lanes.lower, file }]);
    }
    for (const [collector, contributions] of byCollector) await registerIngested(lake, table.name, { collector, sequence }, contributions);
    return files.length;
  }

  /** Where a segment's events of a namespace's own table go: one file per partition, counted under the log's id. */
  private namespaceFile(segment: string, table: TableDefinition): FilePlace {
    return (partition) => ({ fileId: segmentFileId(segment, table.name, partition), collector: this.options.walId });
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
    ingestRuns: true,
  });
}

function landingColumns(ns: IngestNamespaceConfig): LandColumn[] {
  // The time field names each event's partition: landing reads it in its format and refuses a time outside years 0001-9999.
  const columns: LandColumn[] = ns.columns.map((c) => ({
    name: c.name,
    type: c.type,
    nullable: c.nullable,
    ...(c.field !== undefined ? { field: c.field } : {}),
    ...(c.name === ns.time.field ? { eventTime: ns.time.format ?? "iso8601" } : {}),
  }));
  if (ns.unknownFields === "keep") columns.push({ name: ns.extraColumn, type: "VARCHAR", nullable: true });
  return columns;
}

/** The records of a segment by namespace, each namespace's events as one JSONL text with each request's first line. */
function groupByNamespace(records: readonly WalRecord[], skipped: (record: WalRecord, reason: string) => void): Map<string, NamespaceGroup> {
  const groups = new Map<string, NamespaceGroup>();
  for (const record of records) {
    let read: ReturnType<typeof readRecord>;
    try {
      read = readRecord(record);
    } catch (error) {
      skipped(record, errorMessage(error));
      continue;
    }
    let group = groups.get(read.namespace);
    if (!group) {
      group = { bodies: [], receivedAt: [], events: 0, lines: 0 };
      groups.set(read.namespace, group);
    }
    group.receivedAt.push([group.lines + 1, read.receivedAt]);
    group.bodies.push(read.body);
    group.events += read.events;
    group.lines += countNewlines(read.body);
  }
  return groups;
}

function countNewlines(body: Buffer): number {
  let count = 0;
  for (let at = body.indexOf(10); at >= 0; at = body.indexOf(10, at + 1)) count += 1;
  return count;
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
