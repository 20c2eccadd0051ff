import type { DuckDBConnection } from "@duckdb/node-api";
import { InvalidInputError, LakeswapError } from "../../model/errors.js";
import { MAX_PARTITION_VALUE_LENGTH, NULL_PARTITION_SPELLINGS, NULL_SPELLING_REASON, PARTITION_VALUE_RULE } from "../../model/partition.js";
import { printable, quoteIdentifier, quoteLiteral } from "../../model/sql.js";
import type { LandRequest } from "../landing.js";
import { duckDbMessage, fileList, outOfMemory, shown, type SourceRows } from "./landing-sql.js";
import { conversion } from "./value-conversion.js";
import type { landingScratch, LandingTables } from "./landing-relations.js";
import type { Stage } from "./stage.js";
import type { StreamedCsv } from "./csv-stream.js";
import type { HeldLines } from "./unterminated-lines.js";

/*
 * The steps of landing one delivery that every way of reading it shares (./land-delivery.ts, ./land-streamed-csv.ts):
 * its rows converted to the declared types, checked, signed per partition, and the good ones kept.
 */

const SAFE_PARTITION_VALUE = "^[A-Za-z0-9_][A-Za-z0-9_.-]*$";

/** How a delivery is landed, where the default is not wanted (tests of both ways), and where its runs may be written as it is read. */
export interface LandingOptions {
  /** The largest streamed CSV delivery (bytes) parsed once into a table rather than read in place by every pass. */
  readonly materializeMaxBytes?: number;
  /**
   * Writes every partition of a relation (its good rows) into a stage, on the landing's connection: given where each
   * partition of the delivery is built whatever its signature says (a first load), so that a clean delivery read in
   * place (Parquet, streamed CSV) is read once, its runs written as it is read (./write-first.ts).
   */
  readonly writeFirst?: (relation: string) => Promise<Stage>;
  /** The CSV scan (./csv-stream.ts) made while the delivery was identified, of its files as they are read now. */
  readonly scanned?: Promise<StreamedCsv | undefined>;
  /** An append's files a writer may be halfway through, and what is held back of them (./unterminated-lines.ts). */
  readonly hold?: HeldLines;
}

/** One delivery being landed: where, what, and the relation of every row typed (`all`: the table text is parsed into, or a view of a delivery read in place). */
export interface LandingPass {
  readonly connection: DuckDBConnection;
  readonly request: LandRequest;
  readonly tables: LandingTables;
  readonly names: ReturnType<typeof landingScratch>;
  readonly inPlace: boolean;
  readonly all: string;
  /** As `LandingOptions.hold`. */
  readonly hold?: HeldLines;
}

/**
 * Exact conversion to the declared types (./value-conversion.ts); null spellings normalized (an empty string in a
 * nullable text column is NULL; NaN is a bad row, never NULL), and the partition keys added. Every row, good or bad,
 * is converted once, into the table the landed view reads: the bad ones are moved out of it later, so the delivery is never
 * held twice.
 */
export async function convertRows({ connection, request, inPlace, all }: LandingPass, source: SourceRows): Promise<void> {
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

/**
 * A delivery checked and signed in the pass that read it: the table of its partitions' signatures (keys, n, upper,
 * lower), every row good; and its runs, where they were written in that pass (`LandingOptions.writeFirst`).
 */
export interface LandedInPass {
  readonly signatures: string;
  readonly stage?: Stage;
}

/** The column that tells a good row from a bad one in the signatures of one pass; grouped by like a partition key. */
export const GOOD = "__good";

/** The column of a row's file (its position in the delivery's files, from 1); kept in the landed rows with `fileParts`. */
export const FILE = "__file";

/** The column of a row's line in its file (a Parquet row's number; NULL where unknown); kept in the landed rows with `fileParts`. */
export const LINE = "__line";

/**
 * One pass over a delivery read in place: each partition's good rows signed, and its bad rows counted (a value that
 * did not convert, a NULL in a non-nullable column), grouped by partition and good, into a table; its partition
 * values are then checked from that table, never from the delivery.
 */
export async function checkAndSign({ connection, request, names, all }: LandingPass, checks: RowChecks, sign: PassSignature): Promise<string> {
  const keys = request.partition.map((p) => p.key);
  await connection.run(`CREATE VIEW ${names.checked} AS SELECT r.*, ${checks.rowProblem} IS NULL AS ${GOOD} FROM ${all} r`);
  const grouped = [...keys, GOOD, ...(request.fileParts ? [FILE] : [])];
  await readingPass(request, () => connection.run(`CREATE TABLE ${names.groups} AS ${sign(names.checked, grouped)}`));
  return names.groups;
}

/** The rejected table of a delivery without a bad row. */
export async function createNoRejects(connection: DuckDBConnection, rejected: string): Promise<void> {
  await connection.run(`CREATE TABLE ${rejected} AS SELECT NULL::VARCHAR AS file, NULL::BIGINT AS line, NULL::VARCHAR AS reason, NULL::VARCHAR AS raw WHERE false`);
}

/** `read`, with an error that is no lakeswap error (a file whose first line cannot be read) left to the exact reader: undefined. */
export async function readingFailure<T>(read: () => Promise<T>): Promise<T | undefined> {
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
export async function findBadKeys({ connection, request, names, all }: LandingPass, groups?: string): Promise<void> {
  const keys = request.partition.map((p) => p.key);
  const keyChecks = request.partition.map(
    ({ key, expression }) =>
      `CASE WHEN ${quoteIdentifier(key)} IS NULL THEN ${quoteLiteral(`partition key ${key} is NULL: its expression ${printable(expression)} gives NULL for this row`)} ` +
      `WHEN ${nullSpelling(quoteIdentifier(key))} THEN ${quoteLiteral(`partition key ${key} has the value `)} || ${shown(quoteIdentifier(key))} || ` +
      `${quoteLiteral(`, ${NULL_SPELLING_REASON}: make the partition expression give another value for it (a CASE), or leave the row out`)} ` +
      `WHEN ${unsafeKey(quoteIdentifier(key))} ` +
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

/** Whether a partition value (SQL, not NULL) is unsafe in a path or a query, or one that readers read as NULL. */
export function unsafeKey(value: string): string {
  return `(NOT regexp_full_match(${value}, ${quoteLiteral(SAFE_PARTITION_VALUE)}) OR contains(${value}, '..') OR strlen(${value}) > ${MAX_PARTITION_VALUE_LENGTH} OR ${nullSpelling(value)})`;
}

/** Whether a partition value (SQL) is one that readers read as NULL (../../model/partition.ts). */
function nullSpelling(value: string): string {
  return `lower(${value}) IN (${NULL_PARTITION_SPELLINGS.map(quoteLiteral).join(", ")})`;
}

/** The SQL that tells a bad row (`r`, joined to the bad keys `b`) and why, and shows a Parquet row's values. */
export interface RowChecks {
  /** A row of `r` has the partition values of the bad key `b`. */
  readonly keysMatch: string;
  /** Why the row itself is bad (a value that did not convert, a NULL in a non-nullable column), or NULL. */
  readonly rowProblem: string;
  /** Why the row is bad, its partition value included, or NULL. */
  readonly reason: string;
  /** The row's values as read, where they converted: the text of a bad row read without one (Parquet). */
  readonly values: string;
}

export function rowChecks(request: LandRequest): RowChecks {
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

/** The bad rows leave the landed relation, and so do the columns that only served to find them. */
export async function keepGoodRows({ connection, request, tables, names, inPlace, all }: LandingPass, { keysMatch, rowProblem }: RowChecks): Promise<void> {
  const [rejected, unsafeKeys] = (
    await connection.runAndReadAll(`SELECT (SELECT count(*) FROM ${tables.rejected}), (SELECT count(*) FROM ${names.badKeys})`)
  ).getRowsJS()[0]!.map(Number) as [number, number];
  const kept = [...request.columns.map((c) => c.name), ...request.partition.map((p) => p.key), ...(request.fileParts ? [FILE, LINE] : [])];
  const output = kept.map((name) => `r.${quoteIdentifier(name)}`).join(", ");
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

/** A pass over a delivery read in place (Parquet): a file that cannot be read as the format is bad input naming it, as when it is copied in. */
export async function readingPass<T>(request: LandRequest, pass: () => Promise<T>): Promise<T> {
  try {
    return await pass();
  } catch (error) {
    if (request.format !== "parquet" || outOfMemory(error) || error instanceof LakeswapError) throw error;
    throw new InvalidInputError(`reading ${fileList(request.files)} as ${request.format} failed: ${duckDbMessage(error)}`);
  }
}

