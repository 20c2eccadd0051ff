import { open } from "node:fs/promises";
import type { DuckDBConnection } from "@duckdb/node-api";
import { relationParts } from "../../model/sql.js";
import type { LandRequest } from "../landing.js";

/** Bytes of a file read at a time; a longer line is read whole, in as many reads as it takes. */
const CHUNK_BYTES = 4 * 1024 * 1024;

const LINE_FEED = 10;
const CARRIAGE_RETURN = 13;
const QUOTE = 34;

/** A record wanted by its place in the delivery: the file DuckDB's reader read it from (from 1). */
interface Wanted {
  readonly ordinal: number;
  readonly file: number;
}

/**
 * Finds records of a CSV delivery by their place among its records (from 1, over the files in their order, the
 * headers not counted: the order in which DuckDB's reader gives its rows), and writes each one's file, the line it
 * starts on and its text, as the exact reader (./csv-input.ts) keeps them, into a new table `found` (`__file`,
 * `__ordinal`, `__line`, `__raw`). The files are read once, in chunks, and only the wanted records are kept: a record
 * is whole lines (each without the CRs before its line end, a byte order mark dropped) while a quote is open; a blank
 * line between records is none. False where the files do not hold `rows` records, or a wanted one is not in the file
 * the reader said (the reader split them otherwise): then only the exact reader can tell the lines.
 */
export async function locateRecords(
  connection: DuckDBConnection,
  request: LandRequest,
  wanted: readonly Wanted[],
  rows: number,
  found: string,
): Promise<boolean> {
  await connection.run(`CREATE TABLE ${found} (__file INTEGER, __ordinal BIGINT, __line BIGINT, __raw VARCHAR)`);
  const { catalog, name } = relationParts(found);
  const appender = await connection.createAppender(name, null, catalog ?? null);
  let ordinal = 0;
  let next = 0;
  let agrees = true;
  try {
    for (const [index, file] of request.files.entries()) {
      ordinal = await scanRecords(file, request.header, ordinal, wanted[next]?.ordinal ?? Infinity, (at, line, raw) => {
        agrees &&= wanted[next]?.file === index + 1;
        appender.appendInteger(index + 1);
        appender.appendBigInt(BigInt(at));
        appender.appendBigInt(BigInt(line));
        appender.appendVarchar(raw);
        appender.endRow();
        next++;
        return wanted[next]?.ordinal ?? Infinity;
      });
    }
    appender.flushSync();
  } finally {
    appender.closeSync();
  }
  return agrees && ordinal === rows && next === wanted.length;
}

/**
 * Reads one file's records in order, numbering them on from `before`; calls `record` with the wanted one's number
 * (`wanted`), first line and text, which gives the number of the next one wanted. Returns the last record's number.
 */
async function scanRecords(
  file: string,
  header: boolean,
  before: number,
  wanted: number,
  record: (ordinal: number, line: number, raw: string) => number,
): Promise<number> {
  const handle = await open(file, "r");
  let ordinal = before;
  let lineNumber = 0;
  let headerSeen = !header;
  // The record being read: its first line, its lines (as byte ranges copied out when it spans reads), and whether a quote is open.
  let start = 0;
  let parts: Buffer[] = [];
  let quoteOpen = false;
  let next = wanted;
  const finish = (): void => {
    if (!headerSeen) {
      headerSeen = true;
    } else if (++ordinal === next) {
      next = record(ordinal, start, parts.map((part) => part.toString("utf8")).join("\n"));
    }
    parts = [];
  };
  try {
    let buffer = Buffer.alloc(CHUNK_BYTES);
    let held = 0;
    let first = true;
    for (;;) {
      if (held === buffer.length) buffer = Buffer.concat([buffer, Buffer.alloc(buffer.length)]);
      const { bytesRead } = await handle.read(buffer, held, buffer.length - held);
      const end = held + bytesRead;
      let at = first && end >= 3 && buffer[0] === 0xef && buffer[1] === 0xbb && buffer[2] === 0xbf ? 3 : 0;
      first = false;
      for (;;) {
        let cut = buffer.indexOf(LINE_FEED, at);
        if (cut < 0 || cut >= end) {
          if (bytesRead > 0) break;
          cut = end;
        }
        lineNumber++;
        let stop = cut;
        while (stop > at && buffer[stop - 1] === CARRIAGE_RETURN) stop--;
        let quotes = 0;
        for (let q = buffer.indexOf(QUOTE, at); q >= 0 && q < stop; q = buffer.indexOf(QUOTE, q + 1)) quotes++;
        if (quoteOpen || stop > at) {
          if (!quoteOpen) start = lineNumber;
          // Only a wanted record's lines are copied out.
          if (headerSeen && ordinal + 1 === next) parts.push(Buffer.from(buffer.subarray(at, stop)));
          if (quotes % 2 === 1) quoteOpen = !quoteOpen;
          if (!quoteOpen) finish();
        }
        at = cut + 1;
        if (cut === end) break;
      }
      if (bytesRead === 0) break;
      buffer.copy(buffer, 0, at, end);
      held = end - at;
    }
    // Blank lines at the end of a file are none; a quote left open there is the reader's refusal, never met here.
    if (quoteOpen) finish();
    return ordinal;
  } finally {
    await handle.close();
  }
}
