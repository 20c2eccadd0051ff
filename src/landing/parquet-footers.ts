import { parquetMetadata, type FileMetaData, type ParquetParsers } from "hyparquet";
import { AuditError, errorMessage } from "../model/errors.js";
import { mapLimited } from "../shared/map-limited.js";
import type { ObjectStore } from "../store/object-store.js";

/** A Parquet file ends in its footer's length (4 bytes, little-endian) and the magic `PAR1`. */
const TRAILER_BYTES = 8;
/** Read with the trailer, so that a footer of this size or less costs one read (two otherwise). */
const FIRST_READ_BYTES = 64 * 1024;
/** Footers read at once. */
const FOOTER_CONCURRENCY = 16;

/**
 * Statistics values as the file stores them, not as dates: a date's days (number), a timestamp's microseconds (bigint;
 * undefined for nanoseconds, which would need rounding), so that a bound copied from a footer is exact.
 */
const RAW_PARSERS: Partial<ParquetParsers> = {
  dateFromDays: (days: number) => days,
  timestampFromMilliseconds: (millis: bigint) => millis * 1000n,
  timestampFromMicroseconds: (micros: bigint) => micros,
  timestampFromNanoseconds: () => undefined,
};

/** Rows of each file, in order, from its Parquet footer (./parquet-footers.ts `readFooters`). */
export async function countFooterRows(store: ObjectStore, files: readonly { readonly key: string; readonly size: number }[]): Promise<number[]> {
  return (await readFooters(store, files)).map((metadata) => Number(metadata.num_rows));
}

/**
 * The footer of each file, in order, as the store holds it (a local file's last bytes, or a ranged GET on S3),
 * decoded by hyparquet: no engine and no query, so that auditing a small run costs a fraction of a millisecond.
 * Statistics keep their stored values (RAW_PARSERS). Fails naming a file whose footer cannot be read: the audit
 * never takes an engine's word for a run.
 */
export async function readFooters(store: ObjectStore, files: readonly { readonly key: string; readonly size: number }[]): Promise<FileMetaData[]> {
  return mapLimited(files, FOOTER_CONCURRENCY, async (file) => {
    const unreadable = (why: string): AuditError => new AuditError(`the run file ${file.key} is not readable Parquet (${why}); the pointer was not moved`);
    if (file.size < TRAILER_BYTES + 4) throw unreadable(`${file.size} bytes, too short for a Parquet file`);
    const firstRead = Math.min(file.size, FIRST_READ_BYTES);
    let tail = await store.getRange(file.key, file.size - firstRead, firstRead);
    if (tail.length !== firstRead) throw unreadable(`read ${tail.length} of its last ${firstRead} bytes: the file changed or is being written`);
    const view = new DataView(tail.buffer, tail.byteOffset, tail.byteLength);
    const magic = String.fromCharCode(...tail.subarray(tail.length - 4));
    if (magic !== "PAR1") throw unreadable(`it does not end in the Parquet magic bytes`);
    const footerBytes = view.getUint32(tail.length - TRAILER_BYTES, true);
    if (footerBytes + TRAILER_BYTES + 4 > file.size) throw unreadable(`its footer claims ${footerBytes} bytes, more than the file holds`);
    if (footerBytes + TRAILER_BYTES > tail.length) tail = await store.getRange(file.key, file.size - footerBytes - TRAILER_BYTES, footerBytes + TRAILER_BYTES);
    const footer = tail.subarray(tail.length - footerBytes - TRAILER_BYTES);
    try {
      return parquetMetadata(footer.buffer.slice(footer.byteOffset, footer.byteOffset + footer.byteLength) as ArrayBuffer, { parsers: RAW_PARSERS });
    } catch (error) {
      throw unreadable(`its footer does not decode: ${errorMessage(error)}`);
    }
  });
}
