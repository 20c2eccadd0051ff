import { errorMessage } from "../../model/errors.js";
import { printable, quoteFilePath, quoteLiteral } from "../../model/sql.js";
import type { LandRequest } from "../landing.js";

// What the readers of each format (./csv-input.ts, ./jsonl-input.ts, ./parquet-input.ts) and landing
// (./land-delivery.ts) share: the shape of the rows a reader gives, and how values, files and DuckDB's errors are
// shown in messages.

/** A declared column of the delivery. */
export type LandColumn = LandRequest["columns"][number];

/**
 * One format's reading of a delivery: a SELECT of `__file` (the file's place
 * in the delivery's list, from 1), `__line` (the line, or the Parquet row,
 * from 1), `__structural` (why the row cannot be read at all, or NULL) and one
 * source value per declared column (`__s0`, `__s1`, ...), whose types are
 * `types`. `rawTable` holds each row's original text (`__file`, `__line`,
 * `__raw`), for the dead letters. `fingerprinted`: the SELECT also gives
 * `__fingerprint`, a hash of the row's line, which the landed rows keep (a
 * row read without its line number is found again in its file by it).
 */
export interface SourceRows {
  readonly select: string;
  readonly types: readonly string[];
  readonly rawTable?: string;
  readonly fingerprinted?: boolean;
}

/**
 * The reader's buffer (DuckDB's default, 32 MiB, does not fit a small memory limit; each reading thread holds one):
 * twice its longest line (2 MiB by default: a longer line fails the scan, and the delivery, or the file, is read otherwise).
 */
export const READ_BUFFER_BYTES = 4 * 1024 * 1024;

/**
 * Bytes of a delivery file read at a time where lakeswap reads one itself (its digest, the scans before DuckDB reads
 * it). A fresh buffer costs a page fault per 4 KiB the first time it is filled: a 4 MiB one took 21 ms to hash a
 * 4 MiB file, a 256 KiB one reused 5.7 ms; smaller ones gain nothing more.
 */
export const FILE_CHUNK_BYTES = 256 * 1024;

/** DuckDB's error when its memory limit is reached and nothing more can be spilled (or the spill folder is full). */
export function outOfMemory(error: unknown): boolean {
  return /Out of Memory Error/.test(errorMessage(error));
}

/** A value quoted in a reason, cut to 60 characters so that a huge field never makes a huge message. */
export function shown(text: string): string {
  return `'''' || CASE WHEN length(${text}) > 60 THEN left(${text}, 57) || '...' ELSE ${text} END || ''''`;
}

/** Paths as a SQL list of their values (to compare with the path a reader reports, or to name a file in a message). */
export function sqlList(files: readonly string[]): string {
  return `[${files.map(quoteLiteral).join(", ")}]`;
}

/** Files to read, as a SQL list for DuckDB's readers: each path names that one file, whatever characters it holds (`quoteFilePath`). */
export function sqlFileList(files: readonly string[]): string {
  return `[${files.map(quoteFilePath).join(", ")}]`;
}

export function fileList(files: readonly string[]): string {
  return files.length > 3 ? `${files.slice(0, 3).join(", ")} and ${files.length - 3} more` : files.join(", ");
}

/** DuckDB's message on one line, without the SQL it quotes (lakeswap's, not the user's) and cut, so that a huge value never makes a huge message. */
export function duckDbMessage(error: unknown): string {
  const message = errorMessage(error).replace(/\n\s*LINE \d+:[\s\S]*$/, "").replace(/^(Binder|Parser|Conversion|Invalid Input|IO) Error: /, "");
  return printable(message.replace(/\s+/g, " ").trim(), 300);
}
