import { open } from "node:fs/promises";
import type { DuckDBConnection } from "@duckdb/node-api";
import { quoteLiteral, relationParts } from "../../model/sql.js";
import type { LandRequest } from "../landing.js";
import { recordProblem } from "./csv-input.js";
import type { CsvRejects } from "./csv-stream.js";
import { sqlList } from "./landing-sql.js";

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

/** A record DuckDB's reader refused (and skipped): its file (from 1), and where the reader says its line starts (`line_byte_position`). */
interface Refused {
  readonly file: number;
  readonly at: number;
}

/**
 * Finds records of a CSV delivery by their place among the rows DuckDB's reader gave (from 1, over the files in their
 * order, the headers and the records it refused not counted), and the records it refused by where they start, and
 * writes each one's file, the line it starts on and its text, as the exact reader (./csv-input.ts) keeps them, into a
 * new table `found` (`__file`, `__ordinal` or, for a refused one, `__at`, `__line`, `__raw`). The files are read
 * once, in chunks, and only those records are kept: a record is whole lines (a byte order mark dropped) while a quote
 * is open, each without the CRs before its line end but where the quote stays open after it (there they are the quoted
 * field's); a blank line between records is none. False where the files
 * do not hold `rows` records besides the refused ones, or a wanted one is not in the file the reader said (the reader
 * split them otherwise): then only the exact reader can tell the lines.
 */
async function locateRecords(
  connection: DuckDBConnection,
  request: LandRequest,
  records: { readonly wanted: readonly Wanted[]; readonly refused: readonly Refused[]; readonly rows: number },
  found: string,
): Promise<boolean> {
  const { wanted, refused, rows } = records;
  await connection.run(`CREATE TABLE ${found} (__file INTEGER, __ordinal BIGINT, __at BIGINT, __line BIGINT, __raw VARCHAR)`);
  const { catalog, name } = relationParts(found);
  const appender = await connection.createAppender(name, null, catalog ?? null);
  let ordinal = 0;
  let next = 0;
  let refusedFound = 0;
  let agrees = true;
  try {
    for (const [index, file] of request.files.entries()) {
      const refusals = refused.filter((r) => r.file === index + 1).map((r) => r.at);
      const scan = { header: request.header, before: ordinal, wanted: wanted[next]?.ordinal ?? Infinity, refused: refusals };
      ordinal = await scanRecords(file, scan, (record) => {
        appender.appendInteger(index + 1);
        if (record.at === undefined) {
          agrees &&= wanted[next]?.file === index + 1;
          appender.appendBigInt(BigInt(record.ordinal));
          appender.appendNull();
          next++;
        } else {
          appender.appendNull();
          appender.appendBigInt(BigInt(record.at));
          refusedFound++;
        }
        appender.appendBigInt(BigInt(record.line));
        appender.appendVarchar(record.raw);
        appender.endRow();
        return wanted[next]?.ordinal ?? Infinity;
      });
    }
    appender.flushSync();
  } finally {
    appender.closeSync();
  }
  return agrees && ordinal === rows && next === wanted.length && refusedFound === refused.length;
}

/** One record found: its number among the reader's rows, or for a refused one where the reader said it starts (`at`), its first line and text. */
interface FoundRecord {
  readonly ordinal: number;
  readonly at?: number;
  readonly line: number;
  readonly raw: string;
}

/**
 * Reads one file's records in order, numbering those the reader did not refuse on from `before`: a record is refused
 * where one of `refused` is at or before its second byte, and after the previous record's. Calls `record` with
 * the wanted one (`wanted`) and each refused one, which gives the number of the next one wanted. Returns the last
 * record's number.
 */
async function scanRecords(
  file: string,
  scan: { readonly header: boolean; readonly before: number; readonly wanted: number; readonly refused: readonly number[] },
  record: (found: FoundRecord) => number,
): Promise<number> {
  const refused = [...scan.refused].sort((a, b) => a - b);
  let refusal = 0;
  let ordinal = scan.before;
  let lineNumber = 0;
  let headerSeen = !scan.header;
  // The record being read: its first line, whether the reader refused it (and where it said it starts), its lines
  // (copied out only for a record that is wanted or refused), and whether a quote is open.
  let start = 0;
  let isRefused = false;
  let refusedAt: number | undefined;
  let parts: Buffer[] = [];
  let quoteOpen = false;
  let next = scan.wanted;
  const text = (): string => parts.map((part) => part.toString("utf8")).join("\n");
  const finish = (): void => {
    if (!headerSeen) {
      headerSeen = true;
    } else if (isRefused) {
      next = record({ ordinal, at: refusedAt, line: start, raw: text() });
    } else if (++ordinal === next) {
      next = record({ ordinal, line: start, raw: text() });
    }
    parts = [];
  };
  await forEachLine(file, (line, startByte, quotes, crs) => {
    lineNumber++;
    if (!quoteOpen && line.length === 0) return;
    if (!quoteOpen) {
      start = lineNumber;
      refusedAt = undefined;
      // DuckDB's reader places a refused record two bytes past the previous record's line end (its first byte):
      // at the record's second byte after an LF, at its first after a CRLF, before it after blank lines.
      for (; refusal < refused.length && refused[refusal]! <= startByte + 1; refusal++) refusedAt = refused[refusal]!;
      isRefused = refusedAt !== undefined && headerSeen;
    }
    if (quotes % 2 === 1) quoteOpen = !quoteOpen;
    if (headerSeen && (isRefused || ordinal + 1 === next)) parts.push(quoteOpen && crs > 0 ? Buffer.concat([line, Buffer.alloc(crs, CARRIAGE_RETURN)]) : Buffer.from(line));
    if (!quoteOpen) finish();
  });
  // Blank lines at the end of a file are none; a quote left open there is the reader's refusal, never met here.
  if (quoteOpen) finish();
  return ordinal;
}

/**
 * Calls `onLine` with each line of a file (a view valid during the call, without its line end and the CRs before it, a
 * byte order mark dropped), where it starts in the file, how many quotes it holds and how many CRs were dropped; read
 * in chunks of whole lines.
 */
async function forEachLine(file: string, onLine: (line: Buffer, startByte: number, quotes: number, crs: number) => void): Promise<void> {
  const handle = await open(file, "r");
  try {
    let buffer = Buffer.alloc(CHUNK_BYTES);
    let held = 0;
    // Where the buffer starts in the file.
    let offset = 0;
    for (;;) {
      if (held === buffer.length) buffer = Buffer.concat([buffer, Buffer.alloc(buffer.length)]);
      const { bytesRead } = await handle.read(buffer, held, buffer.length - held);
      const end = held + bytesRead;
      const read = buffer.subarray(0, end);
      let at = offset === 0 && end >= 3 && buffer[0] === 0xef && buffer[1] === 0xbb && buffer[2] === 0xbf ? 3 : 0;
      // The next quote of the read is found once, so that lines without one (most) are not searched.
      let nextQuote = read.indexOf(QUOTE, at);
      for (;;) {
        let cut = read.indexOf(LINE_FEED, at);
        if (cut < 0) {
          if (bytesRead > 0) break;
          cut = end;
        }
        let stop = cut;
        while (stop > at && buffer[stop - 1] === CARRIAGE_RETURN) stop--;
        const line = buffer.subarray(at, stop);
        if (nextQuote >= 0 && nextQuote < at) nextQuote = read.indexOf(QUOTE, at);
        let quotes = 0;
        if (nextQuote >= 0 && nextQuote < stop) for (let q = nextQuote - at; q >= 0; q = line.indexOf(QUOTE, q + 1)) quotes++;
        // The empty rest after a file's last line end is no line.
        if (cut < end || at < end) onLine(line, offset + at, quotes, cut - stop);
        at = cut + 1;
        if (cut === end) break;
      }
      if (bytesRead === 0) break;
      buffer.copy(buffer, 0, at, end);
      held = end - at;
      offset += at;
    }
  } finally {
    await handle.close();
  }
}

/** The reader's refusals that the exact reader names as well, with the same records: a record with too many or too few fields. */
const NAMED_REFUSALS = ["TOO MANY COLUMNS", "MISSING COLUMNS"];

/**
 * The bad rows of a CSV delivery streamed by DuckDB's reader (./csv-stream.ts) into a new table `rejected` (file,
 * line, reason, raw), each with its file, line and text as the exact reader keeps them: the rows of `badRows`
 * (`__file`, `__line`: the row's place among the reader's rows, `reason`), and the records the reader refused
 * (`rejects`), found in the files, each with the reason the exact reader gives it. False (only `found` made) where
 * only the exact reader can tell: a refusal it would not name so, or records that are not the reader's rows.
 */
export async function rejectLocatedRows(
  connection: DuckDBConnection,
  request: LandRequest,
  relations: { readonly badRows: string; readonly found: string; readonly rejected: string; readonly rejects: CsvRejects },
  shape: { readonly rows: number; readonly width: number },
): Promise<boolean> {
  const { badRows, found, rejected, rejects } = relations;
  const refusals =
    `SELECT DISTINCT list_position(${sqlList(request.files)}, s.file_path) AS __file, e.line_byte_position AS __at, e.error_type AS __error, e.csv_line AS __csv_line ` +
    `FROM temp.${rejects.errors} e JOIN temp.${rejects.scans} s USING (scan_id, file_id)`;
  const refused = (await connection.runAndReadAll(`SELECT __file, __at::DOUBLE, __error IN (${NAMED_REFUSALS.map(quoteLiteral).join(", ")}) FROM (${refusals})`)).getRowsJS();
  if (refused.some(([file, , named]) => !named || !file)) return false;
  const wanted: Wanted[] = [];
  const result = await connection.run(`SELECT __line::DOUBLE, __file FROM ${badRows} ORDER BY __line`);
  for (let chunk = await result.fetchChunk(); chunk !== null && chunk.rowCount > 0; chunk = await result.fetchChunk()) {
    const [ordinals, files] = [chunk.getColumnValues(0), chunk.getColumnValues(1)];
    ordinals.forEach((ordinal, i) => wanted.push({ ordinal: Number(ordinal), file: Number(files[i]) }));
  }
  const at = refused.map(([file, byte]) => ({ file: Number(file), at: Number(byte) }));
  if (!(await locateRecords(connection, request, { wanted, refused: at, rows: shape.rows }, found))) return false;
  // A refused record is the one the reader quoted (past the line ends it quotes before it, and without its own CRs at
  // its end), and one the exact reader refuses too.
  const quoted = `regexp_replace(ltrim(r.__csv_line, chr(10) || chr(13)), '\\r+$', '')`;
  const problem = recordProblem(request, "f.__raw", shape.width);
  const disagree = await connection.runAndReadAll(
    `SELECT count(*) FROM ${found} f JOIN (${refusals}) r ON f.__file = r.__file AND f.__at = r.__at WHERE ${quoted} <> f.__raw OR ${problem} IS NULL`,
  );
  if (Number(disagree.getRowsJS()[0]?.[0]) > 0) return false;
  const files = sqlList(request.files);
  await connection.run(
    `CREATE TABLE ${rejected} AS SELECT ${files}[f.__file] AS file, f.__line AS line, b.reason, f.__raw AS raw FROM ${badRows} b JOIN ${found} f ON f.__ordinal = b.__line ` +
      `UNION ALL SELECT ${files}[f.__file], f.__line, ${problem}, f.__raw FROM ${found} f WHERE f.__at IS NOT NULL`,
  );
  return true;
}
