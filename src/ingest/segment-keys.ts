import { createHash } from "node:crypto";
import { LakeswapError } from "../model/errors.js";

/** A partition's file id in a table, and the collector id its tally counts the segment under. */
export type FilePlace = (partition: string) => { readonly fileId: string; readonly collector: string };

/** The segment being landed: its id, its sequence number, the scratch folder, and the dead-letter partitions claimed so far. */
export interface SegmentAt {
  readonly segment: string;
  readonly sequence: number;
  readonly work: string;
  readonly claimed: Set<string>;
}

/** One namespace's records of a segment. */
export interface NamespaceGroup {
  readonly bodies: Buffer[];
  /** (first line of the record's events in the namespace's file, receive time in ms). */
  readonly receivedAt: [number, number][];
  events: number;
  lines: number;
}

/** The sequence number of a segment id (`<log id>-<number>`). */
export function segmentSequence(segment: string): number {
  const sequence = Number(segment.slice(segment.lastIndexOf("-") + 1));
  if (!Number.isSafeInteger(sequence)) throw new LakeswapError("STORE_ERROR", `'${segment}' is not a write-ahead log segment id`);
  return sequence;
}

/** The file id of one segment's events in one partition: the segment, and a short digest of the table and partition. */
export function segmentFileId(segment: string, table: string, partition: string): string {
  return `${segment}-${createHash("sha256").update(`${table}/${partition}`).digest("hex").slice(0, 8)}`;
}
