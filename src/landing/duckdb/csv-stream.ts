import { isUtf8 } from "node:buffer";
import { closeSync, openSync, readSync } from "node:fs";
import { quoteIdentifier, quoteLiteral } from "../../model/sql.js";
import type { LandRequest } from "../landing.js";
import { csvLayout } from "./csv-input.js";
import { searchLines } from "./text-lines.js";
import { READ_BUFFER_BYTES, sqlFileList, sqlList, type SourceRows } from "./landing-sql.js";

/** The reason of a streamed row that holds a quote: only the exact reader can tell whether it is a bad one. */
export const QUOTE_IN_FIELD = "a field holds a quote";

/** Bytes read from the start of a file to find its first line; a longer one leaves the file to the exact reader. */
const FIRST_LINE_BYTES = 64 * 1024;

/** The bytes of the quote character and of a carriage return. */
const QUOTE = 0x22;
const CR = 0x0d;

/**
 * A CSV delivery as DuckDB's streaming `read_csv` reads it (in parallel, never whole in memory), every field as text,
 * quoted or not (RFC 4180: a quoted field may hold the delimiter, a doubled quote and line ends): its rows have no
 * line numbers and no text, so the bad rows of a delivery that is not clean (a record the reader refuses, in its
 * strict mode, and keeps in `rejects`; a value that does not convert, a bad partition value) are found in its files
 * afterwards (./csv-records.ts); a field holding a quote makes a bad row that only the exact reader (./csv-input.ts)
 * can judge. Undefined where the exact reader must read it at once: the files' first lines differ in layout, or one
 * is blank or longer than FIRST_LINE_BYTES or its quoting is not whole, or a file has what DuckDB's reader reads
 * otherwise (`scanBeforeReading`). A header lacking a declared column is refused as the exact reader refuses it.
 */
export async function streamedCsv(request: LandRequest): Promise<StreamedCsv | undefined> {
  const delimiter = request.delimiter;
  // A space as the delimiter is also what the reader trims around a quoted field.
  if (delimiter === " " || delimiter === '"') return undefined;
  const layouts: ReturnType<typeof csvLayout>[] = [];
  for (const file of request.files) {
    const first = firstLine(file);
    const fields = first === undefined || first.trim() === "" ? undefined : splitLine(first, delimiter);
    if (fields === undefined) return undefined;
    layouts.push(csvLayout(request, file, 1, fields));
  }
  const layout = layouts[0];
  if (layout === undefined || layouts.some((l) => l.width !== layout.width || l.positions.join() !== layout.positions.join())) return undefined;
  const held = { quotes: false, bytes: 0 };
  for (const file of request.files) {
    const scan = await scanBeforeReading(file, delimiter, layout.width);
    if (scan.readOtherwise) return undefined;
    held.quotes ||= scan.quotes;
    held.bytes += scan.bytes;
  }
  const fields = Array.from({ length: layout.width }, (_, i) => `c${i + 1}`);
  // A quote left in a field was either doubled inside a quoted field or stray in an unquoted one (which the exact
  // reader refuses, and DuckDB's reader keeps): the exact reader tells them apart. Files without a quote (most
  // exports) have no field that holds one: the test, a concat of every field of every row, is left out.
  const quoted = held.quotes ? `CASE WHEN contains(concat(${fields.map(quoteIdentifier).join(", ")}), '"') THEN ${quoteLiteral(QUOTE_IN_FIELD)} END` : "NULL::VARCHAR";
  // A CR before a line end inside a quoted field is the field's, as DuckDB's reader and the exact reader keep it.
  const value = (field: string): string => `nullif(${field}, '')`;
  const rows = ({ refused, ordered = false }: StreamedRead): SourceRows => {
    const read =
      `read_csv(${sqlFileList(request.files)}, header = ${request.header}, auto_detect = false, ` +
      `columns = {${fields.map((f) => `${quoteLiteral(f)}: 'VARCHAR'`).join(", ")}}, delim = ${quoteLiteral(delimiter)}, quote = '"', escape = '"', ` +
      `strict_mode = true, buffer_size = ${READ_BUFFER_BYTES}, filename = true, ` +
      (refused === "skipped"
        ? "ignore_errors = true)"
        : `store_rejects = true, rejects_table = ${quoteLiteral(refused.errors)}, rejects_scan = ${quoteLiteral(refused.scans)})`);
    const select =
      `SELECT list_position(${sqlList(request.files)}, filename)::INTEGER AS __file, ${ordered ? "row_number() OVER ()" : "NULL::BIGINT"} AS __line, ` +
      `${quoted} AS __structural, ${request.columns.map((_, i) => `${layout.positions[i] ? value(quoteIdentifier(`c${layout.positions[i]}`)) : "NULL::VARCHAR"} AS __s${i}`).join(", ")} FROM ${read}`;
    return { select, types: request.columns.map(() => "VARCHAR") };
  };
  return { width: layout.width, bytes: held.bytes, rows };
}

/**
 * How a streamed delivery is read: the records the reader refuses kept in `refused` (the connection's temporary
 * tables) or, once they are, skipped; `ordered`: each row's `__line` is its record's place in the delivery instead
 * (from 1, over the files in their order), for ./csv-records.ts to find its line and text.
 */
interface StreamedRead {
  readonly refused: CsvRejects | "skipped";
  readonly ordered?: boolean;
}

/** A CSV delivery that DuckDB's reader reads as the exact reader would: how many fields each record has, and its rows, read one way or another. */
export interface StreamedCsv {
  readonly width: number;
  /** The delivery's bytes, as the scan before reading read them. */
  readonly bytes: number;
  rows(read: StreamedRead): SourceRows;
}

/**
 * The names of the temporary tables (of the connection) where DuckDB's reader keeps the records it refuses (too many or
 * too few fields, a quote left open, ...) and skips: `errors` (file, byte where the record starts, error, text) and `scans`.
 */
export interface CsvRejects {
  readonly errors: string;
  readonly scans: string;
}

/**
 * The fields of one line as the exact reader splits a record (a quoted field unquoted, its doubled quotes single), or
 * undefined where the line is not whole records: a quote left open (the record goes on), a stray quote, or text
 * beside a quoted field.
 */
function splitLine(line: string, delimiter: string): string[] | undefined {
  if (!line.includes('"')) return line.split(delimiter);
  const fields: string[] = [];
  let at = 0;
  for (;;) {
    let field: string;
    if (line.startsWith('"', at)) {
      const close = /^"((?:[^"]|"")*)"/.exec(line.slice(at));
      if (close === null) return undefined;
      field = close[1]!.replaceAll('""', '"');
      at += close[0].length;
    } else {
      const end = line.indexOf(delimiter, at);
      field = line.slice(at, end < 0 ? line.length : end);
      if (field.includes('"')) return undefined;
      at += field.length;
    }
    fields.push(field);
    if (at === line.length) return fields;
    if (!line.startsWith(delimiter, at)) return undefined;
    at += delimiter.length;
  }
}

/** What a file holds that decides how it is read: the scan before reading (`scanBeforeReading`). */
interface FileScan {
  /** DuckDB's reader may read it otherwise than the exact reader: the exact reader must. */
  readonly readOtherwise: boolean;
  /** It holds a quote, so a field may keep one. */
  readonly quotes: boolean;
  /** The bytes scanned: the file's. */
  readonly bytes: number;
}

/**
 * Whether DuckDB's reader may read a file otherwise than the exact reader, so that the exact reader must: it drops
 * the spaces around a quoted field (`a, "b"` is `b`), where the exact reader refuses the record; and it drops an
 * empty last field past the `width` fields (`1,a,x,` and `1,a,x,""` are three fields), where the exact reader counts it. A space
 * beside a quote inside a quoted field (`"a ""b"""`, `" b"`), or a line that ends with the delimiter inside a
 * quoted field, leaves a delivery to the exact reader too, which costs time, never a row; so does text that is not
 * UTF-8, which the exact reader refuses. Also whether it holds a quote at all, so that the reading tests its
 * fields for one only where it may find one (most exports hold none). Read in chunks of whole lines; only a line
 * that ends with the delimiter is split.
 */
async function scanBeforeReading(file: string, delimiter: string, width: number): Promise<FileScan> {
  const found = { quotes: false, bytes: 0 };
  const readOtherwise = await searchLines(file, (whole, atEnd) => {
    found.bytes += whole.length;
    // The last line of a file, without a line end, is searched as if it had one.
    const lines = atEnd ? Buffer.concat([whole, Buffer.from("\n")]) : whole;
    // The quote's own patterns are searched only in lines that hold a quote (one byte, found fastest), and line ends
    // with a CR only in lines that hold one.
    const quoted = lines.includes(QUOTE);
    const crlf = lines.includes(CR);
    found.quotes ||= quoted;
    // Text that is not UTF-8 is refused by the exact reader, naming the file (DuckDB's reader fails only where a
    // query reads the field).
    return !isUtf8(lines) || (quoted && (lines.includes(' "') || lines.includes('" '))) || droppedLastField(lines, delimiter, width, quoted, crlf);
  });
  return { ...found, readOtherwise };
}

/**
 * Whether a line of `lines` (whole lines) ends with an empty field (the delimiter, perhaps then `""` where `quoted`: the
 * lines hold a quote; perhaps a CR before the line end where `crlf`: they hold one) and has `width` + 1 fields, or may
 * have (it holds a quote that does not split it whole).
 */
function droppedLastField(lines: Buffer, delimiter: string, width: number, quoted: boolean, crlf: boolean): boolean {
  const plain = Buffer.from(delimiter);
  const emptyQuoted = Buffer.from(`${delimiter}""`);
  const lastByte = plain[plain.length - 1];
  // Line by line from each line end (memchr), not by searching for the endings: a search for ",\n" stops at every
  // comma of a CSV, and took 0.25 s of 270 MB where this takes 0.05 s. A line's last byte (before a CR where the lines
  // hold one) rules out almost every line: one that ends with a value ends neither with the delimiter nor a quote.
  let start = 0;
  for (let end = lines.indexOf(10); end >= 0; start = end + 1, end = lines.indexOf(10, start)) {
    const at = crlf && lines[end - 1] === 13 ? end - 1 : end;
    const last = lines[at - 1];
    if (last !== lastByte && last !== 0x22) continue;
    if (!endsWith(lines, at, plain) && !(quoted && endsWith(lines, at, emptyQuoted))) continue;
    const fields = splitLine(lines.toString("utf8", start, end).replace(/\r+$/, ""), delimiter);
    if (fields === undefined || fields.length === width + 1) return true;
  }
  return false;
}

/** Whether the bytes of `buffer` before `at` are `suffix`. */
function endsWith(buffer: Buffer, at: number, suffix: Buffer): boolean {
  if (at < suffix.length) return false;
  for (let i = 1; i <= suffix.length; i++) if (buffer[at - i] !== suffix[suffix.length - i]) return false;
  return true;
}

/** Where each file's first line is read (synchronously, one file at a time), left unfilled: only the bytes read are looked at. */
const firstLineBuffer = Buffer.allocUnsafe(FIRST_LINE_BYTES);

/** The first line of a file (a byte order mark and a line end's `\r` dropped), or undefined where it is not within FIRST_LINE_BYTES. */
function firstLine(file: string): string | undefined {
  // Synchronous: one small read, where a round trip to the thread pool per open, read and close costs more.
  const fd = openSync(file, "r");
  try {
    const buffer = firstLineBuffer;
    const bytesRead = readSync(fd, buffer, 0, FIRST_LINE_BYTES, 0);
    const start = bytesRead >= 3 && buffer[0] === 0xef && buffer[1] === 0xbb && buffer[2] === 0xbf ? 3 : 0;
    const end = buffer.subarray(0, bytesRead).indexOf(10);
    if (end < 0 && bytesRead === FIRST_LINE_BYTES) return undefined;
    return buffer.toString("utf8", start, end < 0 ? bytesRead : end).replace(/\r$/, "");
  } finally {
    closeSync(fd);
  }
}
