import { open } from "node:fs/promises";
import type { DuckDBConnection } from "@duckdb/node-api";
import type { LandRequest } from "../landing.js";
import { isJsonArrayDocument } from "./json-array.js";

/** Bytes read from the end of a file to find where its last line starts; a longer last line is held if any of it is text. */
const TAIL_BYTES = 64 * 1024;

const LINE_FEED = 0x0a;

/**
 * The files of an append (by position in `request.files`, from 1) whose last line is held back
 * (`LandRequest.holdUnterminatedSince`): modified at or after that time, their last line has something on it but no line
 * end. `decompressed` are copies of compressed files (written whole, never held from).
 */
export async function unterminatedFiles(request: LandRequest, decompressed: ReadonlySet<string> = new Set()): Promise<Set<number>> {
  const held = new Set<number>();
  const since = request.holdUnterminatedSince;
  if (since === undefined || request.format === "parquet") return held;
  for (const [index, file] of request.files.entries()) {
    if (decompressed.has(file) || (request.format === "jsonl" && isJsonArrayDocument(file))) continue;
    if (await endsUnterminated(file, since)) held.add(index + 1);
  }
  return held;
}

/** Whether `file`, modified at or after `since`, ends in a line that has more than blanks on it and no line end. */
async function endsUnterminated(file: string, since: number): Promise<boolean> {
  const handle = await open(file, "r");
  try {
    const { size, mtimeMs } = await handle.stat();
    if (size === 0 || mtimeMs < since) return false;
    const length = Math.min(TAIL_BYTES, size);
    const tail = Buffer.alloc(length);
    await handle.read(tail, 0, length, size - length);
    const last = tail.subarray(tail.lastIndexOf(LINE_FEED) + 1);
    // A file that ends in its line end (or in blanks after it, which are no row) has nothing held.
    return last.some((byte) => byte !== 0x20 && byte !== 0x09 && byte !== 0x0d);
  } finally {
    await handle.close();
  }
}

/**
 * Removes from `table` (`__file`, `__line`, `__raw`: a delivery's lines, or its CSV records, each numbered by its first
 * line) the last non-blank one of each held file: the record the file's unterminated last line ends. `header`: a file's
 * first record is its header, which is never held (a file of a header alone has no row to hold).
 */
export async function dropUnterminated(connection: DuckDBConnection, table: string, held: ReadonlySet<number> | undefined, header: boolean): Promise<void> {
  if (!held || held.size === 0) return;
  const files = [...held].join(", ");
  const records = `SELECT __file, max(__line) AS __last, min(__line) AS __first FROM ${table} WHERE __raw <> '' AND __file IN (${files}) GROUP BY __file`;
  await connection.run(
    `DELETE FROM ${table} t USING (${records}) h WHERE t.__file = h.__file AND t.__line = h.__last${header ? " AND h.__last > h.__first" : ""}`,
  );
}
