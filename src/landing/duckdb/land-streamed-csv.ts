import { quoteLiteral, relationParts } from "../../model/sql.js";
import { rejectLocatedRows } from "./csv-records.js";
import { QUOTE_IN_FIELD, streamedCsv, type CsvRejects, type StreamedCsv } from "./csv-stream.js";
import { outOfMemory } from "./landing-sql.js";
import { dropIfExists, dropLanding } from "./landing-relations.js";
import type { Stage } from "./stage.js";
import { writeFirst } from "./write-first.js";
import {
  GOOD,
  checkAndSign,
  convertRows,
  createNoRejects,
  findBadKeys,
  keepGoodRows,
  readingFailure,
  type LandedInPass,
  type LandingOptions,
  type LandingPass,
  type PassSignature,
  type RowChecks,
} from "./landing-pass.js";

/**
 * A CSV delivery landed from DuckDB's streaming reader (./csv-stream.ts) as a delivery read in place: the rows are a
 * view over the files (checked unchanged by the caller), checked and signed in one pass, and the bad rows of one that
 * has any found in the files with their lines and text; undefined (and nothing left) where only the exact reader can
 * judge it (./csv-input.ts).
 */
export async function landStreamedCsv(pass: LandingPass, checks: RowChecks, sign: PassSignature, options: LandingOptions): Promise<LandedInPass | undefined> {
  const { connection, request, tables, names } = pass;
  const rejects = csvRejects(names.typed);
  const streamed = await readingFailure(() => options.scanned ?? streamedCsv(request));
  if (streamed === undefined) return undefined;
  // An append's rows keep their lines, which the streamed reader does not number: the exact reader, which does, reads
  // it whatever its size. A file that grew at its end is then split at the line appended through (a row without a
  // line would take the file whole again: its rows appended twice); memory grows with the delivery.
  if (request.fileParts) return undefined;
  const inPlace: LandingPass = { ...pass, inPlace: true, all: names.typed };
  if (options.writeFirst) {
    const written = await landWrittenFirst(inPlace, checks, sign, streamed, options.writeFirst);
    if (written) return written;
  }
  // A small delivery is parsed once into a table that every later pass reads; a larger one stays a view over its
  // files (memory then stays that of a plain COPY), read again by the passes after this one.
  const materialized = streamed.bytes <= (options.materializeMaxBytes ?? MATERIALIZE_MAX_BYTES);
  let clean = false;
  try {
    await convertRows({ ...inPlace, inPlace: !materialized }, streamed.rows({ refused: rejects }));
    const groups = await checkAndSign(inPlace, checks, sign);
    await findBadKeys(inPlace, groups);
    const bad = await connection.runAndReadAll(
      `SELECT (SELECT count(*) FROM ${names.badKeys}) + (SELECT count(*) FROM ${groups} WHERE NOT ${GOOD}) + (SELECT count(*) FROM temp.${rejects.errors})`,
    );
    if (Number(bad.getRowsJS()[0]?.[0]) > 0) {
      if (!(await locateBadRows(inPlace, checks, groups, streamed))) return undefined;
    } else await createNoRejects(connection, tables.rejected);
    if (!materialized) {
      // Later reads of the landed rows (on other connections too) skip the refused records, already bad rows, and keep
      // nothing in temporary tables (the files are checked unchanged, so they are the same records).
      await connection.run(`DROP VIEW ${names.typed}`);
      await convertRows(inPlace, streamed.rows({ refused: "skipped" }));
    }
    await keepGoodRows(inPlace, checks);
    clean = true;
    return { signatures: groups };
  } catch (error) {
    // A record DuckDB's reader cannot read (a line over its size limit, text that is not UTF-8) may fail the scan: the
    // exact reader judges the delivery.
    if (outOfMemory(error)) throw error;
    return undefined;
  } finally {
    await dropIfExists(connection, [
      ["VIEW", names.checked],
      ["VIEW", names.ordered],
      ...[names.badRows, names.lines, `temp.${rejects.errors}`, `temp.${rejects.scans}`].map((table) => ["TABLE", table] as const),
    ]);
    if (!clean) await dropLanding(connection, tables);
  }
}

/**
 * A streamed CSV delivery whose every partition is built (a first load) parsed once: its runs written as it is read,
 * each partition signed from the files written (./write-first.ts). Undefined, and nothing left, where that write was
 * given up: the delivery is then landed the usual way.
 */
async function landWrittenFirst(
  pass: LandingPass,
  checks: RowChecks,
  sign: PassSignature,
  streamed: StreamedCsv,
  write: (relation: string) => Promise<Stage>,
): Promise<LandedInPass | undefined> {
  const { connection, tables, names } = pass;
  const rejects = csvRejects(names.typed);
  let stage: Stage | undefined;
  let landed = false;
  try {
    await convertRows(pass, streamed.rows({ refused: rejects }));
    const refused = async (): Promise<number> => Number((await connection.runAndReadAll(`SELECT count(*) FROM temp.${rejects.errors}`)).getRowsJS()[0]?.[0]);
    stage = await writeFirst(pass, checks, sign, write, refused);
    if (!stage) return undefined;
    // Later reads of the landed rows skip nothing that is not already known good (none were refused).
    await connection.run(`DROP VIEW ${names.typed}`);
    await convertRows(pass, streamed.rows({ refused: "skipped" }));
    await keepGoodRows(pass, checks);
    landed = true;
    return { signatures: names.groups, stage };
  } catch {
    return undefined;
  } finally {
    await dropIfExists(connection, [`temp.${rejects.errors}`, `temp.${rejects.scans}`].map((table) => ["TABLE", table] as const));
    if (!landed) {
      // Given up: nothing of this delivery is left for the usual way to trip on.
      await stage?.remove();
      await dropLanding(connection, tables);
    }
  }
}

/**
 * The largest CSV delivery (its files' bytes) whose rows are kept in a table as they are first read: the later passes
 * (the runs written, a merge) then read memory instead of parsing the files again. About 2-4x that in memory.
 */
const MATERIALIZE_MAX_BYTES = 16 * 1024 * 1024;

/** The connection's temporary tables where DuckDB's reader keeps the records it refused while reading a streamed delivery. */
function csvRejects(typed: string): CsvRejects {
  const name = relationParts(typed).name;
  return { errors: `${name}_reject_errors`, scans: `${name}_reject_scans` };
}

/**
 * The bad rows of a streamed CSV delivery into the rejected table, each with its file, line and text as the exact
 * reader keeps them: the delivery is read once more in order, so that each bad row has its record's place, and the
 * records at those places, and those the reader refused, are found in the files (./csv-records.ts); the partitions of
 * bad values leave the signatures of the pass (`groups`). False (nothing kept) where only the exact reader can tell:
 * a field holds a quote, or the files' records are not the reader's rows.
 */
async function locateBadRows(pass: LandingPass, { keysMatch, reason }: RowChecks, groups: string, streamed: StreamedCsv): Promise<boolean> {
  const { connection, request, tables, names } = pass;
  const rejects = csvRejects(names.typed);
  await convertRows({ ...pass, all: names.ordered }, streamed.rows({ refused: rejects, ordered: true }));
  await connection.run(
    `CREATE TABLE ${names.badRows} AS SELECT r.__file, r.__line, ${reason} AS reason ` +
      `FROM ${names.ordered} r LEFT JOIN ${names.badKeys} b ON ${keysMatch} WHERE ${reason} IS NOT NULL`,
  );
  const quoted = await connection.runAndReadAll(`SELECT count(*) FROM ${names.badRows} WHERE reason = ${quoteLiteral(QUOTE_IN_FIELD)}`);
  if (Number(quoted.getRowsJS()[0]?.[0]) > 0) return false;
  const rows = Number((await connection.runAndReadAll(`SELECT sum(n) FROM ${groups}`)).getRowsJS()[0]?.[0] ?? 0);
  const relations = { badRows: names.badRows, found: names.lines, rejected: tables.rejected, rejects };
  if (!(await rejectLocatedRows(connection, request, relations, { rows, width: streamed.width }))) return false;
  await connection.run(`DELETE FROM ${groups} r USING ${names.badKeys} b WHERE ${keysMatch}`);
  return true;
}

