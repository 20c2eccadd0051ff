import { isUtf8 } from "node:buffer";
import { closeSync, fstatSync, openSync, readSync } from "node:fs";
import { open } from "node:fs/promises";
import { setImmediate as yieldToEvents } from "node:timers/promises";
import type { DuckDBConnection } from "@duckdb/node-api";
import { InvalidInputError } from "../../model/errors.js";
import type { LandRequest } from "../landing.js";
import { FILE_CHUNK_BYTES, outOfMemory, READ_BUFFER_BYTES, sqlFileList, sqlList } from "./landing-sql.js";
import { insertArrayElements, isJsonArrayDocument } from "./json-array.js";
import { compressedFileError } from "./compressed-files.js";

/**
 * Bytes read from a text file at a time; a longer line is read whole, in as many reads as it takes. Binding a
 * chunk to the insert copies it on the JavaScript thread, which then answers nothing else (a collector's
 * requests wait): 1 MiB keeps that to about a millisecond, and lands as fast as larger chunks.
 */
const TEXT_CHUNK_BYTES = 1024 * 1024;

/** The byte DuckDB's reader splits a line's fields at when it reads lines whole: a control character that no JSON text holds raw. */
const FIELD_SEPARATOR = 0x01;

/**
 * Loads the lines of text files (UTF-8) into a new table `(__file, __line,
 * __raw, ...extra)`, numbered from 1 (a JSONL delivery's JSON array file: its
 * elements, ./json-array.ts), streamed so that no file is ever one
 * string: a UTF-8 byte order mark at the start of a file, the `\r` of a CRLF
 * line end, and the empty lines at the end of a file are dropped. `extra` are
 * more columns computed from `__raw`. A file that is not UTF-8 is refused,
 * naming it. Each file is read by DuckDB's CSV reader, a line a record (in
 * order, numbered as it reads them), where the file holds no byte that the
 * reader treats otherwise (`readsPlainly`); else in chunks of whole lines
 * passed to DuckDB from here. `lineEndCrs`: the table also has `__crs`, how many
 * CRs were dropped before the line's end, for a CSV record whose quoted field
 * spans lines: there they are the field's own bytes, not a line end. `held`: the files whose unterminated last line is
 * held back (./unterminated-lines.ts, which removes it afterwards): that line need not be UTF-8 (a writer may be
 * halfway through a character), and one that is not is loaded as U+FFFD.
 */
export async function loadLines(
  connection: DuckDBConnection,
  request: LandRequest,
  table: string,
  extra: readonly string[] = [],
  lineEndCrs = false,
  held?: ReadonlySet<number>,
): Promise<void> {
  const computed = extra.map((column) => `, ${column}`).join("");
  const crs = lineEndCrs ? ", NULL::INTEGER AS __crs" : "";
  await connection.run(`CREATE TABLE ${table} AS SELECT *${computed} FROM (SELECT NULL::INTEGER AS __file, NULL::BIGINT AS __line, NULL::VARCHAR AS __raw${crs}) WHERE false`);
  for (const [index, file] of request.files.entries()) {
    // A JSON array (./json-array.ts): its elements are its lines.
    if (request.format === "jsonl" && isJsonArrayDocument(file)) {
      await insertArrayElements(connection, table, file, index, computed);
      continue;
    }
    const heldTail = held?.has(index + 1) === true;
    if (!(await readsPlainly(request, file, heldTail))) {
      await loadChunks(connection, request, table, computed, index, lineEndCrs, heldTail);
      continue;
    }
    try {
      // The reader splits lines at line feeds only (the file holds no CR), keeps every line, an empty one as NULL, and
      // drops a byte order mark; its rows keep their order through the numbering.
      const lines = lineEndCrs ? `(SELECT *, 0 AS __crs FROM ${numberedLines(file, index)})` : numberedLines(file, index);
      await connection.run(`INSERT INTO ${table} SELECT *${computed} FROM ${lines}`);
    } catch (error) {
      // A line longer than the reader takes (or what else it refuses): the file is read from here.
      if (outOfMemory(error)) throw error;
      await connection.run(`DELETE FROM ${table} WHERE __file = ${index + 1}`);
      await loadChunks(connection, request, table, computed, index, lineEndCrs, heldTail);
      continue;
    }
    await connection.run(
      `DELETE FROM ${table} WHERE __file = ${index + 1} AND __line > (SELECT coalesce(max(__line), 0) FROM ${table} WHERE __file = ${index + 1} AND __raw <> '')`,
    );
  }
}

/**
 * The lines of the `index`th file of a delivery, `file`, that reads plainly (`readsPlainly`), as DuckDB's reader gives
 * them in order, numbered from 1: a relation of `__file` (index + 1), `__line` and `__raw` (an empty line as ''). Needs
 * the connection's `preserve_insertion_order` (DuckDB's default): the numbers are the order the rows come in.
 */
export function numberedLines(file: string, index: number): string {
  return `(SELECT ${index + 1}::INTEGER AS __file, row_number() OVER () AS __line, coalesce(line, '') AS __raw FROM ${lineReader(file)})`;
}

/** DuckDB's CSV reader of text files, a line a record (an empty one NULL, a byte order mark dropped), with `extra` options. */
function lineReader(files: string | readonly string[], extra = ""): string {
  const list = sqlFileList(typeof files === "string" ? [files] : files);
  return (
    `read_csv(${list}, header = false, auto_detect = false, columns = {'line': 'VARCHAR'}, delim = chr(${FIELD_SEPARATOR}), quote = '', escape = '', ` +
    `strict_mode = true, buffer_size = ${READ_BUFFER_BYTES}${extra})`
  );
}

/**
 * The lines of a delivery's text files as DuckDB's reader streams them (in parallel, never whole in memory): a
 * relation of `__file`, `__line` (NULL: the reader does not number them) and `__raw`, where every file reads plainly
 * (`readsPlainly`); else undefined. A file that is not UTF-8 is refused, naming it.
 */
export async function streamedLines(request: LandRequest): Promise<string | undefined> {
  for (const file of request.files) if ((request.format === "jsonl" && isJsonArrayDocument(file)) || !(await readsPlainly(request, file))) return undefined;
  return `(SELECT list_position(${sqlList(request.files)}, filename)::INTEGER AS __file, NULL::BIGINT AS __line, coalesce(line, '') AS __raw FROM ${lineReader(request.files, ", filename = true")})`;
}

/**
 * Whether DuckDB's reader reads a file's lines as they are: it holds no CR (the reader ends a line at one too), no
 * NUL and no FIELD_SEPARATOR. A file that is not UTF-8 is refused, naming it; but for a `heldTail` (its unterminated
 * last line is held back) that is not: such a file is read in chunks (loadChunks), which stands the line in.
 */
async function readsPlainly(request: LandRequest, file: string, heldTail = false): Promise<boolean> {
  const odd = await searchLines(file, (lines, atEnd) => {
    const body = heldTail && atEnd ? lines.subarray(0, lines.lastIndexOf(10) + 1) : lines;
    if (!isUtf8(body)) throw notUtf8(request, file);
    if (body.length < lines.length && !isUtf8(lines.subarray(body.length))) return true;
    return lines.includes(13) || lines.includes(0) || lines.includes(FIELD_SEPARATOR);
  });
  return !odd;
}

/**
 * Searches a file in chunks of whole lines (a line end is never inside a UTF-8 character, so they are whole characters
 * too), FILE_CHUNK_BYTES read at a time; the last chunk (`atEnd`) holds the rest of the file. True as soon as `found` is.
 * The buffer is no larger than the file (a delivery of many small files would otherwise fill FILE_CHUNK_BYTES of zeros per
 * file: 10,000 files of 10 rows took 2.7 s here), and left unfilled: only the bytes read are ever searched. Read with
 * synchronous calls (a round trip to the thread pool per open, read and close cost a delivery of 10,000 small files
 * seconds); the process's events get their turn after every chunk.
 */
export async function searchLines(file: string, found: (lines: Buffer, atEnd: boolean) => boolean): Promise<boolean> {
  const fd = openSync(file, "r");
  try {
    const { size } = fstatSync(fd);
    let buffer = Buffer.allocUnsafe(Math.min(FILE_CHUNK_BYTES, size + 1));
    let held = 0;
    for (let chunk = 0; ; chunk++) {
      if (chunk > 0) await yieldToEvents();
      if (held === buffer.length) buffer = Buffer.concat([buffer, Buffer.allocUnsafe(buffer.length)]);
      const bytesRead = readSync(fd, buffer, held, buffer.length - held, null);
      const end = held + bytesRead;
      // The rest of the last line waits for the next read (all of it at the end of the file).
      const cut = bytesRead === 0 ? end : buffer.lastIndexOf(10, end - 1) + 1;
      if (found(buffer.subarray(0, cut), bytesRead === 0)) return true;
      if (bytesRead === 0) return false;
      buffer.copy(buffer, 0, cut, end);
      held = end - cut;
    }
  } finally {
    closeSync(fd);
  }
}

function notUtf8(request: LandRequest, file: string): InvalidInputError {
  return compressedFileError(file, request.format) ?? new InvalidInputError(`${file} is not UTF-8 text: lakeswap reads ${request.format} files as UTF-8; convert it (e.g. iconv -f latin1 -t utf-8)`);
}

/**
 * Loads one file's lines (the `index`th of the delivery) in chunks of whole lines passed to DuckDB (`lineEndCrs`,
 * `heldTail`: see loadLines).
 */
async function loadChunks(
  connection: DuckDBConnection,
  request: LandRequest,
  table: string,
  computed: string,
  index: number,
  lineEndCrs: boolean,
  heldTail = false,
): Promise<void> {
  const file = request.files[index]!;
  const crs = lineEndCrs ? `, CASE WHEN ends_with(__raw, chr(13)) THEN length(__raw) - length(rtrim(__raw, chr(13))) ELSE 0 END AS __crs` : "";
  // generate_subscripts next to unnest: DuckDB numbers the list's elements without copying the list per row.
  const insert = await connection.prepare(
    `INSERT INTO ${table} SELECT *${computed} FROM (SELECT $1::INTEGER AS __file, __line, CASE WHEN ends_with(__raw, chr(13)) THEN rtrim(__raw, chr(13)) ELSE __raw END AS __raw${crs} ` +
      `FROM (SELECT $2::BIGINT + generate_subscripts(lines, 1) AS __line, unnest(lines) AS __raw FROM (SELECT string_split(decode($3::BLOB), chr(10)) AS lines)))`,
  );
  try {
    let lineCount = 0;
    // The last line with anything but line ends on it: empty lines after it are not rows.
    let lastLine = 0;
    const flush = async (chunk: Buffer): Promise<void> => {
      if (!isUtf8(chunk)) throw notUtf8(request, file);
      insert.bindInteger(1, index + 1);
      insert.bindBigInt(2, BigInt(lineCount));
      insert.bindBlob(3, chunk);
      const added = (await insert.run()).rowsChanged;
      let end = chunk.length;
      let emptyAtEnd = 0;
      while (end > 0 && (chunk[end - 1] === 10 || chunk[end - 1] === 13)) if (chunk[--end] === 10) emptyAtEnd++;
      if (end > 0) lastLine = lineCount + added - emptyAtEnd;
      lineCount += added;
    };
    const handle = await open(file, "r");
    try {
      let buffer = Buffer.alloc(TEXT_CHUNK_BYTES);
      let held = 0;
      // Where the text starts in the buffer: after a byte order mark at the start of the file.
      let start = -1;
      for (;;) {
        if (held === buffer.length) buffer = Buffer.concat([buffer, Buffer.alloc(buffer.length)]);
        const { bytesRead } = await handle.read(buffer, held, buffer.length - held);
        const end = held + bytesRead;
        if (start < 0) start = end >= 3 && buffer[0] === 0xef && buffer[1] === 0xbb && buffer[2] === 0xbf ? 3 : 0;
        if (bytesRead === 0) {
          // A held last line (removed once the records are known) whose writer is halfway through a character.
          const rest = buffer.subarray(start, end);
          if (end > start) await flush(heldTail && !isUtf8(rest) ? Buffer.from("\uFFFD") : rest);
          break;
        }
        // Whole lines go to DuckDB; the rest of the last one waits for the next read. A line end is never inside a
        // UTF-8 character, so each chunk is whole characters too.
        const cut = buffer.lastIndexOf(10, end - 1);
        if (cut < start) {
          held = end;
          continue;
        }
        await flush(buffer.subarray(start, cut));
        buffer.copy(buffer, 0, cut + 1, end);
        held = end - cut - 1;
        start = 0;
      }
    } finally {
      await handle.close();
    }
    if (lastLine < lineCount) await connection.run(`DELETE FROM ${table} WHERE __file = ${index + 1} AND __line > ${lastLine}`);
  } finally {
    insert.destroySync();
  }
}
