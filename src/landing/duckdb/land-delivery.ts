import type { DuckDBConnection } from "@duckdb/node-api";
import { InvalidInputError, LakeswapError } from "../../model/errors.js";
import { MAX_PARTITION_VALUE_LENGTH, PARTITION_VALUE_RULE } from "../../model/partition.js";
import { printable, quoteIdentifier, quoteLiteral, relationParts } from "../../model/sql.js";
import type { LandRequest } from "../landing.js";
import { readCsv } from "./csv-input.js";
import { rejectLocatedRows } from "./csv-records.js";
import { QUOTE_IN_FIELD, streamedCsv, type CsvRejects, type StreamedCsv } from "./csv-stream.js";
import { jsonlRows, locateBadLines, readJsonl, refuseAbsentFields } from "./jsonl-input.js";
import { streamedLines } from "./text-lines.js";
import { readParquet } from "./parquet-input.js";
import { duckDbMessage, fileList, outOfMemory, shown, sqlList, type SourceRows } from "./landing-sql.js";
import { conversion } from "./value-conversion.js";
import { dropIfExists, dropLanding, landingScratch, type LandingTables } from "./landing-relations.js";

export { outOfMemory } from "./landing-sql.js";


const SAFE_PARTITION_VALUE = "^[A-Za-z0-9_][A-Za-z0-9_.-]*$";

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
  const pass: LandingPass = { connection, request, tables, names, inPlace, all: inPlace ? names.typed : names.rows };
  await connection.run(`SET TimeZone = 'UTC'`);
  try {
    // 1. The partition expressions are checked against the declared columns first, before anything is read.
    await checkPartitionExpressions(connection, request);
    // A CSV delivery is streamed by DuckDB's reader first; only one that the exact reader must judge is read again, line by line.
    if (request.format === "csv" && signInPass) {
      const streamed = await landStreamedCsv(pass, rowChecks(request), signInPass, options.materializeMaxBytes ?? MATERIALIZE_MAX_BYTES);
      if (streamed) {
        // Read in place: its bad keys stay while the landed view filters on them, as a Parquet delivery's do.
        scratch.splice(scratch.indexOf(names.badKeys), 1);
        return streamed;
      }
    }
    // A JSONL delivery is streamed by DuckDB's line reader first; only one with a bad row is read again, into a table of its lines.
    if (request.format === "jsonl" && (await landStreamedJsonl(pass, rowChecks(request)))) return undefined;
    // 2. The source rows, by format.
    const source = await readSource(pass);
    // 3. Every row typed, with its problems, and its partition keys.
    await convertRows(pass, source);
    if (request.format === "jsonl" && request.absentFields !== "null") await refuseAbsentFields(connection, request, pass.all, names.lines);
    const checks = rowChecks(request);
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

/** How a delivery is landed, where the default is not wanted (tests of both ways). */
export interface LandingOptions {
  /** The largest streamed CSV delivery (bytes) parsed once into a table rather than read in place by every pass. */
  readonly materializeMaxBytes?: number;
}

/** One delivery being landed: where, what, and the relation of every row typed (`all`: the table text is parsed into, or a view of a delivery read in place). */
interface LandingPass {
  readonly connection: DuckDBConnection;
  readonly request: LandRequest;
  readonly tables: LandingTables;
  readonly names: ReturnType<typeof landingScratch>;
  readonly inPlace: boolean;
  readonly all: string;
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
async function readSource({ connection, request, names }: LandingPass): Promise<SourceRows> {
  try {
    if (request.format === "csv") return await readCsv(connection, request, names.lines, names.records);
    if (request.format === "jsonl") return await readJsonl(connection, request, names.lines);
    return await readParquet(connection, request);
  } catch (error) {
    if (error instanceof InvalidInputError || outOfMemory(error)) throw error;
    throw new InvalidInputError(`reading ${fileList(request.files)} as ${request.format} failed: ${duckDbMessage(error)}`);
  }
}

/**
 * Exact conversion to the declared types (./value-conversion.ts); null spellings normalized (an empty string in a
 * nullable text column is NULL; NaN is a bad row, never NULL), and the partition keys added. Every row, good or bad,
 * is converted once, into the table the landed view reads: the bad ones are moved out of it later, so the delivery is never
 * held twice.
 */
async function convertRows({ connection, request, inPlace, all }: LandingPass, source: SourceRows): Promise<void> {
  const columns = request.columns;
  const converted = columns.map((column, i) => conversion(column, i, source.types[i] ?? "VARCHAR"));
  // Casts and zone checks are computed once, a level below the values and reasons that use them several times.
  const computed = converted.flatMap((c) => c.computed);
  const carried = source.fingerprinted ? "__file, __line, __fingerprint" : "__file, __line";
  const typed =
    `SELECT ${converted.map((c, i) => `${c.value} AS ${quoteIdentifier(columns[i]!.name)}`).join(", ")}, ${carried}, ` +
    `coalesce(__structural, ${converted.map((c) => c.problem).join(", ")}) AS __problem ` +
    `FROM (SELECT *${computed.map((c) => `, ${c}`).join("")} FROM (${source.select}))`;
  const normalized = columns.map((c) => {
    const name = quoteIdentifier(c.name);
    if (c.nullable && c.type === "VARCHAR") return `NULLIF(r.${name}, '') AS ${name}`;
    return `r.${name}`;
  });
  const landedSelect =
    `SELECT *${request.partition.map((p) => `, CAST((${p.expression}) AS VARCHAR) AS ${quoteIdentifier(p.key)}`).join("")} ` +
    `FROM (SELECT ${normalized.join(", ")}, ${carried.replaceAll("__", "r.__")}, r.__problem FROM (${typed}) r)`;
  try {
    await connection.run(`CREATE ${inPlace ? "VIEW" : "TABLE"} ${all} AS ${landedSelect}`);
    // A view is only bound here: a file that cannot be read fails below, on the first pass over it.
  } catch (error) {
    if (outOfMemory(error)) throw error;
    throw new InvalidInputError(`reading ${fileList(request.files)} as ${request.format} failed: ${duckDbMessage(error)}`);
  }
}

/** The SQL of the per-partition signature query over a relation, grouped by `keys` (./signature-sql.ts). */
export type PassSignature = (relation: string, keys: readonly string[]) => string;

/** A delivery checked and signed in the pass that read it: the table of its partitions' signatures (keys, n, upper, lower), every row good. */
export interface LandedInPass {
  readonly signatures: string;
}

/** The column that tells a good row from a bad one in the signatures of one pass; grouped by like a partition key. */
const GOOD = "__good";

/**
 * One pass over a delivery read in place: each partition's good rows signed, and its bad rows counted (a value that
 * did not convert, a NULL in a non-nullable column), grouped by partition and good, into a table; its partition
 * values are then checked from that table, never from the delivery.
 */
async function checkAndSign({ connection, request, names, all }: LandingPass, checks: RowChecks, sign: PassSignature): Promise<string> {
  const keys = request.partition.map((p) => p.key);
  await connection.run(`CREATE VIEW ${names.checked} AS SELECT r.*, ${checks.rowProblem} IS NULL AS ${GOOD} FROM ${all} r`);
  await readingPass(request, () => connection.run(`CREATE TABLE ${names.groups} AS ${sign(names.checked, [...keys, GOOD])}`));
  return names.groups;
}

/**
 * A CSV delivery landed from DuckDB's streaming reader (./csv-stream.ts) as a delivery read in place: the rows are a
 * view over the files (checked unchanged by the caller), checked and signed in one pass, and the bad rows of one that
 * has any found in the files with their lines and text; undefined (and nothing left) where only the exact reader can
 * judge it (./csv-input.ts).
 */
async function landStreamedCsv(pass: LandingPass, checks: RowChecks, sign: PassSignature, materializeMaxBytes: number): Promise<LandedInPass | undefined> {
  const { connection, request, tables, names } = pass;
  const rejects = csvRejects(names.typed);
  const streamed = await readingFailure(() => streamedCsv(request));
  if (streamed === undefined) return undefined;
  // A small delivery is parsed once into a table that every later pass reads; a larger one stays a view over its
  // files (memory then stays that of a plain COPY), read again by the passes after this one.
  const materialized = streamed.bytes <= materializeMaxBytes;
  const inPlace: LandingPass = { ...pass, inPlace: true, all: names.typed };
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
 * The largest CSV delivery (its files' bytes) whose rows are kept in a table as they are first read: the later passes
 * (the runs written, a merge) then read memory instead of parsing the files again. About 2-4x that in memory.
 */
const MATERIALIZE_MAX_BYTES = 16 * 1024 * 1024;

/** The rejected table of a delivery without a bad row. */
async function createNoRejects(connection: DuckDBConnection, rejected: string): Promise<void> {
  await connection.run(`CREATE TABLE ${rejected} AS SELECT NULL::VARCHAR AS file, NULL::BIGINT AS line, NULL::VARCHAR AS reason, NULL::VARCHAR AS raw WHERE false`);
}

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

/** `read`, with an error that is no lakeswap error (a file whose first line cannot be read) left to the exact reader: undefined. */
async function readingFailure<T>(read: () => Promise<T>): Promise<T | undefined> {
  try {
    return await read();
  } catch (error) {
    if (error instanceof LakeswapError) throw error;
    return undefined;
  }
}

/**
 * The partition values that are NULL, or unsafe in a path or a query, each with why: checked once per distinct value
 * (of the signatures of one pass, `groups`, when there are: the delivery is not read again).
 */
async function findBadKeys({ connection, request, names, all }: LandingPass, groups?: string): Promise<void> {
  const keys = request.partition.map((p) => p.key);
  const keyChecks = request.partition.map(
    ({ key, expression }) =>
      `CASE WHEN ${quoteIdentifier(key)} IS NULL THEN ${quoteLiteral(`partition key ${key} is NULL: its expression ${printable(expression)} gives NULL for this row`)} ` +
      `WHEN NOT regexp_full_match(${quoteIdentifier(key)}, ${quoteLiteral(SAFE_PARTITION_VALUE)}) OR contains(${quoteIdentifier(key)}, '..') OR strlen(${quoteIdentifier(key)}) > ${MAX_PARTITION_VALUE_LENGTH} ` +
      `THEN ${quoteLiteral(`partition key ${key} has the unsafe value `)} || ${shown(quoteIdentifier(key))} || ` +
      `${quoteLiteral(` (a partition value names a folder: ${PARTITION_VALUE_RULE}; make the partition expression give such values, or leave the row out)`)} END`,
  );
  const keyList = keys.map(quoteIdentifier).join(", ");
  await readingPass(request, () =>
    connection.run(
      keys.length === 0
        ? // A table without partition keys has no partition value to check.
          `CREATE TABLE ${names.badKeys} AS SELECT CAST(NULL AS VARCHAR) AS __key_problem WHERE false`
        : `CREATE TABLE ${names.badKeys} AS SELECT * FROM (SELECT ${keyList}, coalesce(${keyChecks.join(", ")}) AS __key_problem ` +
            `FROM (SELECT DISTINCT ${keyList} FROM ${groups ?? all})) WHERE __key_problem IS NOT NULL`,
    ),
  );
}

/** The SQL that tells a bad row (`r`, joined to the bad keys `b`) and why, and shows a Parquet row's values. */
interface RowChecks {
  /** A row of `r` has the partition values of the bad key `b`. */
  readonly keysMatch: string;
  /** Why the row itself is bad (a value that did not convert, a NULL in a non-nullable column), or NULL. */
  readonly rowProblem: string;
  /** Why the row is bad, its partition value included, or NULL. */
  readonly reason: string;
  /** The row's values as read, where they converted: the text of a bad row read without one (Parquet). */
  readonly values: string;
}

function rowChecks(request: LandRequest): RowChecks {
  const columns = request.columns;
  const keys = request.partition.map((p) => p.key);
  const notNull = columns
    .filter((c) => !c.nullable)
    .map((c) => `CASE WHEN r.${quoteIdentifier(c.name)} IS NULL THEN ${quoteLiteral(`column ${c.name} is NULL but is declared not nullable (an empty field is NULL)`)} END`);
  return {
    keysMatch: keys.map((key) => `r.${quoteIdentifier(key)} IS NOT DISTINCT FROM b.${quoteIdentifier(key)}`).join(" AND ") || "true",
    rowProblem: `coalesce(${["r.__problem", ...notNull].join(", ")})`,
    reason: `coalesce(${["r.__problem", ...notNull, "b.__key_problem"].join(", ")})`,
    values: `CASE WHEN r.__problem IS NULL THEN concat_ws(',', ${columns.map((c) => `coalesce(CAST(r.${quoteIdentifier(c.name)} AS VARCHAR), '')`).join(", ")}) END`,
  };
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

/** The bad rows leave the landed relation, and so do the columns that only served to find them. */
async function keepGoodRows({ connection, request, tables, names, inPlace, all }: LandingPass, { keysMatch, rowProblem }: RowChecks): Promise<void> {
  const [rejected, unsafeKeys] = (
    await connection.runAndReadAll(`SELECT (SELECT count(*) FROM ${tables.rejected}), (SELECT count(*) FROM ${names.badKeys})`)
  ).getRowsJS()[0]!.map(Number) as [number, number];
  const output = [...request.columns.map((c) => c.name), ...request.partition.map((p) => p.key)].map((name) => `r.${quoteIdentifier(name)}`).join(", ");
  if (inPlace) {
    // A clean delivery (the probe found no bad row, and its files are checked unchanged before anything is kept)
    // needs no filter: its later passes (signature, runs) then skip computing every row's problems again.
    const good = [...(rejected > 0 ? [`${rowProblem} IS NULL`] : []), ...(unsafeKeys > 0 ? [`NOT EXISTS (SELECT 1 FROM ${names.badKeys} b WHERE ${keysMatch})`] : [])];
    await connection.run(`CREATE VIEW ${tables.landed} AS SELECT ${output} FROM ${all} r${good.length > 0 ? ` WHERE ${good.join(" AND ")}` : ""}`);
    return;
  }
  if (rejected > 0) await connection.run(`DELETE FROM ${all} r WHERE ${rowProblem} IS NOT NULL`);
  if (unsafeKeys > 0) await connection.run(`DELETE FROM ${all} r USING ${names.badKeys} b WHERE ${keysMatch}`);
  // A view of the kept columns, not ALTER TABLE ... DROP COLUMN: each of those rewrote the table's catalog entry, and
  // the old versions were cleaned up at the next statement (10-15 ms a small delivery).
  await connection.run(`CREATE VIEW ${tables.landed} AS SELECT ${output} FROM ${all} r`);
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

/** A pass over a delivery read in place (Parquet): a file that cannot be read as the format is bad input naming it, as when it is copied in. */
async function readingPass<T>(request: LandRequest, pass: () => Promise<T>): Promise<T> {
  try {
    return await pass();
  } catch (error) {
    if (request.format !== "parquet" || outOfMemory(error) || error instanceof LakeswapError) throw error;
    throw new InvalidInputError(`reading ${fileList(request.files)} as ${request.format} failed: ${duckDbMessage(error)}`);
  }
}
