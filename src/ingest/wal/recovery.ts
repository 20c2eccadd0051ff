import fs from "node:fs";
import type { WalCorruption } from "./framing.js";
import { scanFrames } from "./framing.js";
import { fsyncPath, segmentFile, segmentIdOf, truncateDurably, type SegmentFile } from "./segment-files.js";
import { call } from "./wal-sync.js";

/** What `open` found in segments left unsealed (by a crash, or a close without seal). */
export interface WalRecovery {
  /** Torn records at a segment's tail, cut off (truncated and fsynced) before it was sealed. */
  readonly truncated: readonly { readonly segment: string; readonly offset: number; readonly bytes: number }[];
  /** Corrupt records inside a segment, skipped (each later `read` of the segment skips and reports them again). */
  readonly corrupt: readonly WalCorruption[];
}

/** The segment appends go to: its sequence number, id, open descriptor, bytes, and when its first record was written. */
export interface ActiveSegment {
  readonly seq: number;
  readonly id: string;
  readonly fd: number;
  size: number;
  firstRecordAt: number | undefined;
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
export async function recover(dir: string, id: string, files: readonly SegmentFile[]): Promise<Recovered> {
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
    corrupt.push(...scan.corrupt.map((range) => ({ segment: segmentIdOf(id, file.seq), ...range })));
    if (scan.tail) {
      await truncateDurably(name, scan.tail.offset);
      truncated.push({ segment: segmentIdOf(id, file.seq), offset: scan.tail.offset, bytes: scan.tail.bytes });
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
  return { recovery: { truncated, corrupt }, sealed, active: { seq, id: segmentIdOf(id, seq), fd, size: 0, firstRecordAt: undefined } };
}
