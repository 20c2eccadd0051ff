import { isUtf8 } from "node:buffer";
import { closeSync, fstatSync, openSync, readSync } from "node:fs";
import type { DuckDBConnection } from "@duckdb/node-api";
import { InvalidInputError } from "../../model/errors.js";
import { quoteFilePath } from "../../model/sql.js";
import { duckDbMessage, outOfMemory } from "./landing-sql.js";
import { compressedFileError } from "./compressed-files.js";

/** Bytes read from the start of a file to tell a JSON array from JSON Lines. */
const HEAD_BYTES = 64 * 1024;

/** Bytes checked at a time for UTF-8. */
const CHUNK_BYTES = 1024 * 1024;

/**
 * Whether a `jsonl` delivery file is one JSON array of objects (`[{...}, {...}]`, as most JSON exports and API dumps
 * write it) rather than JSON Lines: its text starts with `[`, and its first line is not a whole JSON value (a
 * pretty-printed array, or one whose elements each take a line), or is the file's only line and an array of objects
 * (`[{...},{...}]`, or `[]`). JSON Lines whose first line happens to be an array (a bad row: not an object) stay JSON
 * Lines: a whole first line with more lines after it, or a lone line such as `[1, 2]`.
 */
export function isJsonArrayDocument(file: string): boolean {
  const head = readHead(file);
  const start = skipBlank(head, head.length >= 3 && head[0] === 0xef && head[1] === 0xbb && head[2] === 0xbf ? 3 : 0);
  if (head[start] !== 0x5b) return false;
  // What the array holds first: an object, or nothing.
  const first = head[skipBlank(head, start + 1)];
  const ofObjects = first === 0x7b || first === 0x5d;
  const end = head.indexOf(0x0a, start);
  // The whole head is one line: the file is one line, or its first line is longer than the head (a minified array).
  if (end < 0) return ofObjects;
  const firstLine = head.subarray(start, end).toString("utf8");
  try {
    JSON.parse(firstLine);
  } catch {
    return true;
  }
  return ofObjects && head.length < HEAD_BYTES && head.subarray(end).toString("utf8").trim() === "";
}

/** The first position from `at` that is not JSON white space. */
function skipBlank(bytes: Buffer, at: number): number {
  let i = at;
  while (i < bytes.length && (bytes[i] === 0x20 || bytes[i] === 0x09 || bytes[i] === 0x0a || bytes[i] === 0x0d)) i++;
  return i;
}

function readHead(file: string): Buffer {
  const fd = openSync(file, "r");
  try {
    // No larger than the file: a delivery of many small files reads each one's few bytes.
    const size = Math.min(HEAD_BYTES, fstatSync(fd).size);
    const buffer = Buffer.allocUnsafe(size);
    let length = 0;
    while (length < size) {
      const read = readSync(fd, buffer, length, size - length, null);
      if (read === 0) break;
      length += read;
    }
    return buffer.subarray(0, length);
  } finally {
    closeSync(fd);
  }
}

/**
 * Inserts the elements of a JSON array file (the `index`th of the delivery) into `table` as its lines are inserted
 * (`__file`, `__line`, `__raw`): each element's own text, numbered from 1 in the array's order (`__line` is the
 * element's number, as a Parquet row's is its row number), with the `computed` columns of loadLines. An array that
 * does not parse is refused, naming the file.
 */
export async function insertArrayElements(connection: DuckDBConnection, table: string, file: string, index: number, computed = ""): Promise<void> {
  if (!fileIsUtf8(file)) throw compressedFileError(file, "jsonl") ?? new InvalidInputError(`${file} is not UTF-8 text: lakeswap reads jsonl files as UTF-8; convert it (e.g. iconv -f latin1 -t utf-8)`);
  try {
    await connection.run(
      `INSERT INTO ${table} SELECT *${computed} FROM (SELECT ${index + 1}::INTEGER AS __file, row_number() OVER () AS __line, json::VARCHAR AS __raw ` +
        `FROM read_json_objects(${quoteFilePath(file)}, format = 'array'))`,
    );
  } catch (error) {
    if (outOfMemory(error)) throw error;
    throw new InvalidInputError(
      `${file} starts as a JSON array ('['), but is not one JSON array of values: ${duckDbMessage(error)}. ` +
        "Send one array of objects ([{...}, {...}]), or JSON Lines: one object per line",
    );
  }
}

function fileIsUtf8(file: string): boolean {
  const fd = openSync(file, "r");
  try {
    const buffer = Buffer.allocUnsafe(Math.min(CHUNK_BYTES, fstatSync(fd).size + 1));
    let carried = 0;
    for (;;) {
      const read = readSync(fd, buffer, carried, buffer.length - carried, null);
      const end = carried + read;
      if (read === 0) return isUtf8(buffer.subarray(0, end));
      // Checked up to the start of the last character, which may be cut by the read; it goes with the next read.
      let cut = end - 1;
      while (cut > 0 && end - cut < 4 && ((buffer[cut] as number) & 0xc0) === 0x80) cut--;
      if (!isUtf8(buffer.subarray(0, cut))) return false;
      buffer.copy(buffer, 0, cut, end);
      carried = end - cut;
    }
  } finally {
    closeSync(fd);
  }
}
