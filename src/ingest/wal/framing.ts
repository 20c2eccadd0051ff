import { crc32c } from "./crc32c.js";

/** The largest payload one record may hold (64 MiB); a larger append is refused. */
export const WAL_MAX_PAYLOAD_BYTES = 64 * 1024 * 1024;

/** Frame header: u32 LE payload length, u32 LE CRC-32C of those 4 length bytes followed by the payload. */
export const HEADER_BYTES = 8;

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

/** A sealed segment's records and the corrupt ranges skipped on the way. */
export interface SegmentContents {
  readonly records: WalRecord[];
  readonly corrupt: WalCorruption[];
}

/** The header of a frame holding `parts` (`length` bytes together): their length and the CRC-32C of length and payload. */
export function frameHeader(parts: readonly Buffer[], length: number): Buffer {
  const header = Buffer.allocUnsafe(HEADER_BYTES);
  header.writeUInt32LE(length, 0);
  let crc = crc32c(header, 0, 0, 4);
  for (const part of parts) crc = crc32c(part, crc);
  header.writeUInt32LE(crc, 4);
  return header;
}

/** The records (views of `data`) and corrupt ranges of a segment's bytes. */
export async function parseSegment(segment: string, data: Buffer): Promise<SegmentContents> {
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
export async function scanFrames(data: Buffer): Promise<FrameScan> {
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
