import type { DuckDBConnection } from "@duckdb/node-api";
import { setClock } from "../../duckdb/session-clock.js";
import { InvalidInputError, LakeswapError } from "../../model/errors.js";
import { printable, quoteIdentifier } from "../../model/sql.js";
import type { LandRequest } from "../landing.js";
import { readCsv } from "./csv-input.js";
import { jsonlRows, locateBadLines, readJsonl, refuseAbsentFields } from "./jsonl-input.js";
import { streamedLines } from "./text-lines.js";
import { compressedFileError } from "./compressed-files.js";
import { readParquet } from "./parquet-input.js";
import { duckDbMessage, fileList, outOfMemory, sqlList, type SourceRows } from "./landing-sql.js";
import { dropIfExists, dropLanding, landingScratch, type LandingTables } from "./landing-relations.js";
import { landStreamedCsv } from "./land-streamed-csv.js";
import { writeFirst } from "./write-first.js";
import {
  GOOD,
  checkAndSign,
  convertRows,
  createNoRejects,
  findBadKeys,
  keepGoodRows,
  readingFailure,
  readingPass,
  rowChecks,
  type LandedInPass,
  type LandingOptions,
  type LandingPass,
  type PassSignature,
  type RowChecks,
} from "./landing-pass.js";

export { outOfMemory } from "./landing-sql.js";
export type { LandedInPass, LandingOptions, PassSignature } from "./landing-pass.js";


/**
 * Lands source files into engine tables: reads them, converts each value to
 * its declared type exactly (a value that would be rounded, cut or moved to
 * another zone is a bad row, never landed altered), normalizes null
 * spellings, evaluates the partition expressions, and splits the rows into
 * good ones and bad ones (file, line, reason and the original text).
 *
 * CSV and JSONL are read as text, so that every row keeps its line number
 * and its text (CSV records may span lines inside quotes): CSV by DuckDB's
 * streaming reader, its bad rows then found in the files (./csv-records.ts),
 * or where only the exact reader can judge it, line by line; JSONL by DuckDB's
 * line reader, streamed, or where it has a bad row, line by line; the
 * declared types are applied here, not by a reader's sniffer. Parquet is read
 * with its own types and row numbers. The session's time zone is UTC, so that
 * nothing depends on the machine's zone. The partition values are checked
 * once per distinct value, not per row.
 *
 * The delivery is never held whole outside DuckDB's tables, which DuckDB may
 * spill past its memory limit (../../duckdb/duckdb-open.ts): text files are streamed by
 * DuckDB's readers or in chunks of lines, and the rows are converted once, into the
 * landed table itself (or a view over the files), from which the bad rows are then moved out.
 */
export async function landDelivery(
  connection: DuckDBConnection,
  request: LandRequest,
  tables: LandingTables,
  signInPass?: PassSignature,
  options: LandingOptions = {},
): Promise<LandedInPass | undefined> {
  const names = landingScratch(tables.landed);
  // Parquet is typed and read in place: the landed rows are a view over the files (checked unchanged by the caller), so
  // a delivery is never copied; text formats are parsed once into a table (`rows`) that the landed view reads.
  const inPlace = request.format === "parquet";
  // Bad keys stay while a view of the landed rows filters on them.
  const scratch = [names.lines, names.records, names.badRows, ...(inPlace ? [] : [names.badKeys])];
  const pass: LandingPass = { connection, request, tables, names, inPlace, all: inPlace ? names.typed : names.rows, hold: options.hold };
  await setClock(connection, "SESSION");
  try {
    // 1. The partition expressions are checked against the declared columns first, before anything is read.
    await checkPartitionExpressions(connection, request);
    // A CSV delivery is streamed by DuckDB's reader first; only one that the exact reader must judge is read again, line by line.
    // (A delivery with a line held back is read line by line: the streamed readers would land that line.)
    const holding = options.hold !== undefined;
    if (request.format === "csv" && signInPass && !holding) {
      const streamed = await landStreamedCsv(pass, rowChecks(request), signInPass, options);
      if (streamed) {
        // Read in place: its bad keys stay while the landed view filters on them, as a Parquet delivery's do.
        scratch.splice(scratch.indexOf(names.badKeys), 1);
        return streamed;
      }
    }
    // A JSONL delivery is streamed by DuckDB's line reader first; only one with a bad row is read again, into a table of its lines.
    // (An append's rows keep their lines, which the streamed reader does not number: its files are read line by line.)
    if (request.format === "jsonl" && !request.fileParts && !holding && (await landStreamedJsonl(pass, rowChecks(request)))) return undefined;
    // 2. The source rows, by format.
    const source = await readSource(pass);
    // 3. Every row typed, with its problems, and its partition keys.
    await convertRows(pass, source);
    if (request.format === "jsonl" && request.absentFields !== "null") await refuseAbsentFields(connection, request, pass.all, names.lines);
    const checks = rowChecks(request);
    // A first load read in place (Parquet) is read once: its runs written as it is read, its partitions signed from them.
    if (inPlace && signInPass && options.writeFirst) {
      const stage = await writeFirst(pass, checks, signInPass, options.writeFirst);
      if (stage) {
        try {
          await keepGoodRows(pass, checks);
        } catch (error) {
          await stage.remove();
          throw error;
        }
        return { signatures: names.groups, stage };
      }
    }
    // 4. A delivery read in place is read once: every row's checks, partition keys and signature in one pass (the
    // bad rows of a delivery that has any are then collected, and it is signed again without them).
    const groups = inPlace && signInPass ? await checkAndSign(pass, checks, signInPass) : undefined;
    // 5. Partition values are checked once per distinct value.
    await findBadKeys(pass, groups);
    // 6. The bad rows, apart.
    const clean = await collectBadRows(pass, source, checks, groups);
    // 7. The good rows alone in the landed relation.
    await keepGoodRows(pass, checks);
    return clean && groups ? { signatures: groups } : undefined;
  } catch (error) {
    if (!outOfMemory(error)) throw error;
    throw await noRoom(connection, request, error);
  } finally {
    await dropIfExists(connection, [["VIEW", names.checked], ...scratch.map((table) => ["TABLE", table] as const)]);
  }
}

/** The partition expressions (as probes over the declared columns) that worked: DuckDB's answer for one never changes. */
const workingExpressions = new Set<string>();

/** Refuses a partition expression that does not work on the declared columns, before anything is read. */
async function checkPartitionExpressions(connection: DuckDBConnection, request: LandRequest): Promise<void> {
  const columns = request.columns;
  const shape =
    `SELECT ${columns.map((c) => `NULL::${c.type} AS ${quoteIdentifier(c.name)}`).join(", ")}, ` +
    `NULL::INTEGER AS __file, NULL::BIGINT AS __line, NULL::VARCHAR AS __problem`;
  for (const { key, expression } of request.partition) {
    const probe = `SELECT CAST((${expression}) AS VARCHAR) FROM (${shape}) LIMIT 0`;
    // Once a process for each expression and set of columns (a collector lands every segment with the same ones).
    if (workingExpressions.has(probe)) continue;
    try {
      await connection.run(probe);
      workingExpressions.add(probe);
    } catch (error) {
      throw new InvalidInputError(
        `the partition expression of key ${key}, ${printable(expression)}, does not work on the declared columns (${columns.map((c) => c.name).join(", ")}): ` +
          `${duckDbMessage(error)}. Fix it under partition: in the dataset's config`,
      );
    }
  }
}

/** The source rows, read by the delivery's format (./csv-input.ts, ./jsonl-input.ts, ./parquet-input.ts). */
async function readSource({ connection, request, names, hold }: LandingPass): Promise<SourceRows> {
  try {
    if (request.format === "csv") return await readCsv(connection, request, names.lines, names.records, hold);
    if (request.format === "jsonl") return await readJsonl(connection, request, names.lines, hold);
    return await readParquet(connection, request);
  } catch (error) {
    if (error instanceof InvalidInputError || outOfMemory(error)) throw error;
    for (const file of request.files) {
      const compressed = compressedFileError(file, request.format);
      if (compressed) throw compressed;
    }
    throw new InvalidInputError(`reading ${fileList(request.files)} as ${request.format} failed: ${duckDbMessage(error)}`);
  }
}

/**
 * A JSONL delivery landed from DuckDB's line reader (./text-lines.ts), streamed: its rows converted once, into the
 * landed table, as the lines of a table would be, but without the lines kept, so a row has no line number; each keeps
 * a hash of its line instead, by which a bad row's line and text are then found in its file (./jsonl-input.ts,
 * `locateBadLines`). False (nothing left) where they cannot be found that way (the exact path then reads the files
 * into a table of their lines), or the files do not read plainly, or the reader refuses a line (longer than it takes).
 */
async function landStreamedJsonl(pass: LandingPass, checks: RowChecks): Promise<boolean> {
  const { connection, request, tables, names, all } = pass;
  const lines = await readingFailure(() => streamedLines(request));
  if (lines === undefined) return false;
  let landed = false;
  // The rows carry no line number, so their order is nobody's: kept, it made DuckDB buffer the scan's batches of every
  // file (a delivery of 5,000 files of 10 lines ran out of 1 GiB). This connection's setting only, back before the
  // exact path, which numbers lines in the order read, may run on it.
  await connection.run("SET SESSION preserve_insertion_order = false");
  try {
    try {
      await convertRows(pass, jsonlRows(request, lines, { fingerprinted: true }));
    } catch (error) {
      // A line DuckDB's reader cannot read fails the scan; so does any other failure to read: the exact path reads the
      // files, and names what fails there.
      if (outOfMemory(error)) throw error;
      return false;
    }
    if (request.absentFields !== "null") await refuseAbsentFields(connection, request, all, lines);
    await findBadKeys(pass);
    const bad = await connection.runAndReadAll(
      `SELECT count(*) FROM (SELECT 1 FROM ${all} r LEFT JOIN ${names.badKeys} b ON ${checks.keysMatch} WHERE ${checks.reason} IS NOT NULL LIMIT 1)`,
    );
    if (Number(bad.getRowsJS()[0]?.[0]) > 0) {
      const relations = { landed: all, badKeys: names.badKeys, badRows: names.badRows, found: names.lines, rejected: tables.rejected };
      if (!(await locateBadLines(connection, request, relations, checks))) return false;
    } else await createNoRejects(connection, tables.rejected);
    await keepGoodRows(pass, checks);
    landed = true;
    return true;
  } finally {
    await connection.run("RESET SESSION preserve_insertion_order");
    await dropIfExists(connection, [["TABLE", names.badRows], ["TABLE", names.lines]]);
    if (!landed) await dropLanding(connection, tables);
  }
}

/**
 * The bad rows into the rejected table: a value that did not convert, a NULL in a non-nullable column, or a bad
 * partition value. A bad row keeps its original text (CSV, JSONL); a Parquet row has none: its values as read, where
 * they converted.
 */
async function collectBadRows(
  { connection, request, tables, names, inPlace, all }: LandingPass,
  source: SourceRows,
  checks: RowChecks,
  groups?: string,
): Promise<boolean> {
  const { keysMatch, rowProblem, reason, values } = checks;
  // A delivery read in place is first probed for a bad row (from the signatures of its one pass, or a pass that stops
  // at the first one), so that a clean one (the usual case) is not read once more to collect none.
  const probe = async (): Promise<boolean> => {
    const unsafe = (await connection.runAndReadAll(`SELECT count(*) FROM ${names.badKeys}`)).getRowsJS()[0]?.[0];
    if (Number(unsafe) > 0) return true;
    const found = await connection.runAndReadAll(
      groups ? `SELECT count(*) FROM ${groups} WHERE NOT ${GOOD}` : `SELECT count(*) FROM (SELECT 1 FROM ${all} r WHERE ${rowProblem} IS NOT NULL LIMIT 1)`,
    );
    return Number(found.getRowsJS()[0]?.[0]) > 0;
  };
  const anyBad = !inPlace || (await readingPass(request, probe));
  await readingPass(request, () =>
    connection.run(
      `CREATE TABLE ${names.badRows} AS SELECT r.__file, r.__line, ${reason} AS reason${source.rawTable ? "" : `, ${values} AS raw`} ` +
        `FROM ${all} r LEFT JOIN ${names.badKeys} b ON ${keysMatch} WHERE ${anyBad ? `${reason} IS NOT NULL` : "false"}`,
    ),
  );
  // The raw text is joined to the bad rows alone (a table whose size DuckDB knows), never the other way round.
  const raw = source.rawTable ? { join: `LEFT JOIN ${source.rawTable} t ON t.__file = r.__file AND t.__line = r.__line`, text: "t.__raw" } : { join: "", text: "r.raw" };
  await connection.run(
    `CREATE TABLE ${tables.rejected} AS SELECT ${sqlList(request.files)}[r.__file] AS file, r.__line AS line, r.reason, ${raw.text} AS raw ` +
      `FROM ${names.badRows} r ${raw.join}`,
  );
  await dropIfExists(connection, [names.lines, names.records, names.badRows].map((table) => ["TABLE", table] as const));
  return !anyBad;
}

/** The error of a landing that ran out of memory and of spill space: what DuckDB may use, where it spills, and the fix. */
async function noRoom(connection: DuckDBConnection, request: LandRequest, error: unknown): Promise<LakeswapError> {
  const [limit, folder] = (await connection.runAndReadAll(`SELECT current_setting('memory_limit'), current_setting('temp_directory')`)).getRowsJS()[0]!.map(String);
  return new LakeswapError(
    "NO_SPACE",
    `landing ${fileList(request.files)} ran out of room: DuckDB may use ${limit} of memory (LAKESWAP_MEMORY_LIMIT) and spills the rest to ${folder || "nowhere"} ` +
      `(in TMPDIR), and neither was enough (${duckDbMessage(error)}). Free space in TMPDIR or point it elsewhere, or raise LAKESWAP_MEMORY_LIMIT`,
    { cause: error },
  );
}

