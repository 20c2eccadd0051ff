import { writeFile } from "node:fs/promises";
import path from "node:path";
import type { IngestPipelineConfig } from "../config/ingest-config.js";
import type { Lake } from "../lake/lake.js";
import type { LandedDelivery } from "../landing/landing.js";
import { LakeswapError } from "../model/errors.js";
import { partitionPath } from "../model/partition.js";
import { defineTable, type TableDefinition } from "../model/table.js";
import { segmentFileId, type FilePlace, type NamespaceGroup, type SegmentAt } from "./segment-keys.js";

/**
 * The columns of a pipeline's event dead-letter table (named after the pipeline): an event that could not land, with
 * its namespace, receive time, reason, text, segment and line. Partitioned by the day the event was received.
 */
export const EVENT_DEAD_LETTER_COLUMNS = [
  { name: "namespace", type: "VARCHAR", nullable: false },
  { name: "received_at", type: "TIMESTAMPTZ", nullable: false },
  { name: "reason", type: "VARCHAR", nullable: false },
  { name: "raw", type: "VARCHAR", nullable: true },
  { name: "segment", type: "VARCHAR", nullable: false },
  { name: "line", type: "BIGINT", nullable: false },
] as const;

const EVENT_DEAD_LETTER_PARTITION = [
  { key: "p_year", expression: "strftime(received_at, '%Y')" },
  { key: "p_month", expression: "strftime(received_at, '%m')" },
  { key: "p_day", expression: "strftime(received_at, '%d')" },
];

/** Stores and registers a landed delivery's partitions in a table of a lake, at the places given; returns the files stored. */
type StoreLanded = (lake: Lake, table: TableDefinition, segment: string, sequence: number, delivery: LandedDelivery, work: string, place: FilePlace) => Promise<number>;

/** What the dead letters of a pipeline need: its name, its lakes, its log's id, and how a landed delivery is stored. */
interface DeadLetterOptions {
  readonly pipeline: IngestPipelineConfig;
  /** The lake of the namespaces' tables, whose landing holds their bad rows. */
  readonly lake: Lake;
  readonly deadLetterLake: Lake;
  readonly walId: string;
  readonly store: StoreLanded;
}

/** A pipeline's event dead-letter table: the bad events of every namespace of a segment land there, each once. */
export class DeadLetters {
  private table: TableDefinition;

  constructor(private readonly options: DeadLetterOptions) {
    this.table = defineTable({
      name: options.pipeline.name,
      columns: [...EVENT_DEAD_LETTER_COLUMNS],
      partitionKeys: EVENT_DEAD_LETTER_PARTITION.map((p) => p.key),
      ingest: true,
      ingestRuns: true,
    });
  }

  /** Declares the dead-letter table (idempotent for the same definition). */
  async declare(): Promise<void> {
    this.table = await this.options.deadLetterLake.createTable(this.table);
  }

  /** The bad events of a namespace's landing, into the pipeline's dead-letter table. */
  async rejected(at: SegmentAt, namespace: string, delivery: LandedDelivery, receivedAt: readonly (readonly [number, number])[]): Promise<number> {
    const file = path.join(at.work, `${namespace}.rejected.jsonl`);
    await this.options.lake.landing.writeRejected({ delivery, file, receivedAt, fields: { namespace, segment: at.segment } });
    return this.land(at, `${namespace}.dead`, file);
  }

  /** Every event of a group, dead-lettered with one reason (its namespace is gone). */
  async all(at: SegmentAt, namespace: string, group: NamespaceGroup, reason: string): Promise<number> {
    const lines: string[] = [];
    let line = 0;
    for (const [index, body] of group.bodies.entries()) {
      const receivedAt = new Date(group.receivedAt[index]![1]).toISOString();
      for (const raw of body.toString("utf8").split("\n")) {
        line += 1;
        if (raw.trim() === "") continue;
        lines.push(JSON.stringify({ namespace, segment: at.segment, line, reason, raw, received_at: receivedAt }));
      }
    }
    const file = path.join(at.work, `${namespace}.orphan.jsonl`);
    await writeFile(file, `${lines.join("\n")}\n`);
    return this.land(at, `${namespace}.orphan`, file);
  }

  private async land(at: SegmentAt, label: string, file: string): Promise<number> {
    const lake = this.options.deadLetterLake;
    const delivery = await lake.landing.land({
      id: `${at.segment}-${label}`,
      files: [file],
      format: "jsonl",
      header: false,
      delimiter: ",",
      columns: [...EVENT_DEAD_LETTER_COLUMNS],
      partition: EVENT_DEAD_LETTER_PARTITION,
      signatureColumns: EVENT_DEAD_LETTER_COLUMNS.map((c) => c.name),
      absentFields: "null",
    });
    try {
      if (delivery.rowsRejected > 0) throw new LakeswapError("STORE_ERROR", `the dead letters of ${label} could not be landed: ${delivery.firstRejects[0]?.reason}`);
      // The dead-letter table counts its segments on its own; the segment's number is the same, so a retry adds nothing twice.
      const place = this.place(at.segment, label, at.claimed, delivery.partitions.map((p) => partitionPath(p.partition)));
      await this.options.store(lake, this.table, at.segment, at.sequence, delivery, path.dirname(file), place);
      return delivery.rowsLoaded;
    } finally {
      await lake.landing.releaseLanding(delivery);
    }
  }

  /**
   * Where one namespace's dead letters of a segment go in the pipeline's dead-letter table, which every namespace of
   * the segment writes to: the first namespace (in the segment's order) to write to a partition takes the key and the
   * tally of the segment and partition, as every namespace did before they were told apart (so that a segment landed
   * in part by an older lakeswap lands the rest, nothing twice); every later one takes a key and a tally of its own.
   */
  private place(segment: string, label: string, claimed: Set<string>, partitions: readonly string[]): FilePlace {
    const first = new Set(partitions.filter((partition) => !claimed.has(partition)));
    for (const partition of partitions) claimed.add(partition);
    const table = this.options.pipeline.name;
    const walId = this.options.walId;
    return (partition) =>
      first.has(partition)
        ? { fileId: segmentFileId(segment, table, partition), collector: walId }
        : { fileId: segmentFileId(segment, `${table}/${label}`, partition), collector: `${walId}/${label}` };
  }
}
