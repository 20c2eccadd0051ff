import { closeSync, fstatSync, openSync, readSync, statSync } from "node:fs";
import type { DuckDBConnection } from "@duckdb/node-api";
import type { LandRequest } from "../landing.js";
import { isJsonArrayDocument } from "./json-array.js";

/** Bytes read from the end of a file to find where its last line starts; a longer last line is held whole. */
const TAIL_BYTES = 64 * 1024;

const LINE_FEED = 0x0a;
const CARRIAGE_RETURN = 0x0d;

/** An append's files that a writer may be halfway through, by position in the request (from 1): what is held back of them. */
export interface HeldLines {
  /** Modified at or after `LandRequest.holdUnterminatedSince`: a CSV one whose last record leaves a quote open is held too. */
  readonly recent: ReadonlySet<number>;
  /** Of `recent`, those whose last line has no line end (found before they are read: that line need not be UTF-8). */
  readonly tails: ReadonlySet<number>;
  /** Those whose last record is held back: `tails`, and the CSV ones the reader finds ending inside a quoted field. */
  readonly held: Set<number>;
}

/**
 * The files of an append that may be halfway through their last record (`LandRequest.holdUnterminatedSince`), or
 * undefined where none may be. `decompressed` are copies of compressed files (written whole, never held from).
 */
export function heldLines(request: LandRequest, decompressed: ReadonlySet<string> = new Set()): HeldLines | undefined {
  const since = request.holdUnterminatedSince;
  if (since === undefined || request.format === "parquet") return undefined;
  const recent = new Set<number>();
  const tails = new Set<number>();
  for (const [index, file] of request.files.entries()) {
    // A stat first, synchronous (a round trip to the thread pool per file costs a glob of 10,000 files a second): only a
    // file changed lately is read.
    if (decompressed.has(file) || statSync(file).mtimeMs < since) continue;
    if (request.format === "jsonl" && isJsonArrayDocument(file)) continue;
    const tail = lastLine(file, since);
    if (tail === undefined) continue;
    recent.add(index + 1);
    if (tail) tails.add(index + 1);
  }
  return recent.size === 0 ? undefined : { recent, tails, held: new Set(tails) };
}

/**
 * For `file` modified at or after `since`, whether its last line has something on it and no line end (a lone CR is the
 * start of a line end); undefined for a file modified before, or empty.
 */
function lastLine(file: string, since: number): boolean | undefined {
  const fd = openSync(file, "r");
  try {
    const { size, mtimeMs } = fstatSync(fd);
    if (size === 0 || mtimeMs < since) return undefined;
    const length = Math.min(TAIL_BYTES, size);
    const tail = Buffer.alloc(length);
    readSync(fd, tail, 0, length, size - length);
    return tail.subarray(tail.lastIndexOf(LINE_FEED) + 1).some((byte) => byte !== CARRIAGE_RETURN);
  } finally {
    closeSync(fd);
  }
}

/**
 * The recent CSV files of `held` whose records, in `lines` (`__file`, `__quotes`: each line's count of quotes), leave a
 * quote open at their end: their last record is a quoted field still being written. Added to `held.held`.
 */
export async function holdOpenQuotes(connection: DuckDBConnection, lines: string, held: HeldLines | undefined): Promise<void> {
  if (!held) return;
  const open = [...held.recent].filter((file) => !held.held.has(file));
  if (open.length === 0) return;
  const reader = await connection.runAndReadAll(`SELECT __file FROM ${lines} WHERE __file IN (${open.join(", ")}) GROUP BY __file HAVING sum(__quotes) % 2 = 1`);
  for (const [file] of reader.getRowsJS()) held.held.add(Number(file));
}

/**
 * Removes from `table` (`__file`, `__line`, `__raw`: a delivery's lines, or its CSV records, each numbered by its first
 * line) the last non-empty one of each held file: the record its writer is halfway through (a header too: a file whose
 * header is not written whole yet has nothing to read).
 */
export async function dropUnterminated(connection: DuckDBConnection, table: string, held: HeldLines | undefined): Promise<void> {
  if (!held || held.held.size === 0) return;
  const records = `SELECT __file, max(__line) AS __last FROM ${table} WHERE __raw <> '' AND __file IN (${[...held.held].join(", ")}) GROUP BY __file`;
  await connection.run(`DELETE FROM ${table} t USING (${records}) h WHERE t.__file = h.__file AND t.__line = h.__last`);
}
