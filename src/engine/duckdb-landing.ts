import type { DuckDBConnection } from "@duckdb/node-api";
import { InvalidInputError, errorMessage } from "../core/errors.js";
import { MAX_PARTITION_VALUE_LENGTH } from "../core/partition.js";
import { FLAG_BITS, INFINITY_WORDS, flagWordCount, type KeyPair, laneKeys, wordKind } from "../core/signature.js";
import { quoteIdentifier, quoteLiteral } from "../core/sql.js";
import type { SignatureForm } from "./duckdb-open.js";
import type { LandRequest } from "./engine.js";

/** The names of the engine tables that hold one landed delivery. */
export interface LandingTables {
  /** Good rows: the declared columns plus the partition keys. */
  readonly landed: string;
  /** Bad rows: file, line, reason, raw text. */
  readonly rejected: string;
}

const SAFE_PARTITION_VALUE = "^[A-Za-z0-9_][A-Za-z0-9_.-]*$";

/**
 * Lands source files into engine tables: reads them with the declared types,
 * normalizes null spellings, evaluates the partition expressions, and splits
 * the rows into good ones and bad ones (with a reason and the raw text).
 *
 * Each format's reader gives typed rows with a `__problem` (a value that does
 * not convert) or none; one pass over them normalizes, adds the partition
 * keys and is kept (`<landed>_read`); the partition values are checked once
 * per distinct value, not per row; then good rows are copied to the landed
 * table and bad ones to the rejected table.
 */
export async function landDelivery(connection: DuckDBConnection, request: LandRequest, tables: LandingTables): Promise<void> {
  const read = `${tables.landed}_read`;
  const readErrors = `${tables.landed}_read_errors`;
  const readScans = `${tables.landed}_read_scans`;
  const badKeys = `${tables.landed}_bad_keys`;
  const files = `[${request.files.map(quoteLiteral).join(", ")}]`;
  const columns = request.columns;
  const names = columns.map((c) => quoteIdentifier(c.name));
  const rawText = (alias: string) =>
    `concat_ws(',', ${columns.map((c) => `coalesce(CAST(${alias}.${quoteIdentifier(c.name)} AS VARCHAR), '')`).join(", ")})`;

  // 1. Typed rows, each with the reason it could not be read (or NULL). CSV lines that do not parse go to
  //    `rejectedRead` (DuckDB's rejects tables) with file, line, reason and raw text.
  let typed: string;
  let rejectedRead = `SELECT NULL::VARCHAR AS file, NULL::BIGINT AS line, NULL::VARCHAR AS reason, NULL::VARCHAR AS raw WHERE false`;
  try {
    if (request.format === "csv") {
      const types = `{${columns.map((c) => `${quoteLiteral(c.name)}: ${quoteLiteral(c.type)}`).join(", ")}}`;
      typed =
        `SELECT ${names.join(", ")}, filename AS __file, NULL::BIGINT AS __line, NULL::VARCHAR AS __raw, NULL::VARCHAR AS __problem ` +
        `FROM read_csv(${files}, header = ${request.header}, delim = ${quoteLiteral(request.delimiter)}, quote = '"', escape = '"', ` +
        `types = ${types}, store_rejects = true, rejects_table = ${quoteLiteral(readErrors)}, rejects_scan = ${quoteLiteral(readScans)}, filename = true)`;
      // One entry per bad line, even when several of its fields are bad.
      rejectedRead =
        `SELECT s.file_path AS file, e.line::BIGINT AS line, string_agg(e.error_message, '; ' ORDER BY e.column_idx) AS reason, any_value(e.csv_line) AS raw ` +
        `FROM ${readErrors} e JOIN ${readScans} s USING (scan_id, file_id) GROUP BY ALL`;
    } else if (request.format === "jsonl") {
      // Line by line, so a bad line is reported with its number and text and the rest still loads.
      await connection.run(
        `CREATE TABLE ${read}_text AS SELECT filename AS __file, generate_subscripts(lines, 1)::BIGINT AS __line, unnest(lines) AS __raw ` +
          `FROM (SELECT filename, string_split(content, chr(10)) AS lines FROM read_text(${files}))`,
      );
      // Materialize which lines are JSON objects first: extraction must never see a malformed line.
      await connection.run(
        `CREATE TABLE ${read}_lines AS SELECT __file, __line, __raw, ` +
          `CASE WHEN NOT json_valid(__raw) THEN 'not valid JSON' WHEN json_type(__raw::JSON) <> 'OBJECT' THEN 'not a JSON object' END AS __invalid ` +
          `FROM ${read}_text WHERE trim(__raw) <> ''`,
      );
      await connection.run(`ALTER TABLE ${read}_lines ADD COLUMN __json JSON`);
      await connection.run(`UPDATE ${read}_lines SET __json = __raw::JSON WHERE __invalid IS NULL`);
      const fields = columns.map((c) => `json_extract_string(__json, ${quoteLiteral(`$."${c.name}"`)})`);
      const casts = columns.map((c, i) => `TRY_CAST(${fields[i]} AS ${c.type}) AS ${quoteIdentifier(c.name)}`);
      const problems = columns.map(
        (c, i) =>
          `CASE WHEN ${fields[i]} IS NOT NULL AND TRY_CAST(${fields[i]} AS ${c.type}) IS NULL ` +
          `THEN ${quoteLiteral(`column ${c.name}: cannot convert `)} || ${quoteLiteral("'")} || ${fields[i]} || ${quoteLiteral(`' to ${c.type}`)} END`,
      );
      typed = `SELECT ${casts.join(", ")}, __file, __line, __raw, coalesce(__invalid, ${problems.join(", ")}) AS __problem FROM ${read}_lines`;
    } else {
      const present = await parquetColumns(connection, files);
      const missing = columns.map((c) => c.name).filter((n) => !present.includes(n));
      if (missing.length > 0) {
        throw new InvalidInputError(`the Parquet source lacks declared column${missing.length > 1 ? "s" : ""} ${missing.join(", ")} (it has ${present.join(", ")})`);
      }
      const casts = columns.map((c) => `TRY_CAST(${quoteIdentifier(c.name)} AS ${c.type}) AS ${quoteIdentifier(c.name)}`);
      const bad = columns.map(
        (c) =>
          `CASE WHEN ${quoteIdentifier(c.name)} IS NOT NULL AND TRY_CAST(${quoteIdentifier(c.name)} AS ${c.type}) IS NULL ` +
          `THEN ${quoteLiteral(`column ${c.name}: cannot convert to ${c.type}`)} END`,
      );
      typed =
        `SELECT ${casts.join(", ")}, filename AS __file, file_row_number + 1 AS __line, NULL::VARCHAR AS __raw, coalesce(${bad.join(", ")}) AS __problem ` +
        `FROM read_parquet(${files}, filename = true, file_row_number = true)`;
    }
  } catch (error) {
    if (error instanceof InvalidInputError) throw error;
    throw new InvalidInputError(`reading ${request.files.join(", ")} as ${request.format} failed: ${errorMessage(error).replace(/\s+/g, " ")}`);
  }

  // 2. Normalize null spellings (an empty string in a nullable text column and NaN in a float are NULL), and add the partition keys.
  const normalized = columns.map((c) => {
    const name = quoteIdentifier(c.name);
    if (c.nullable && c.type === "VARCHAR") return `NULLIF(r.${name}, '') AS ${name}`;
    if (c.type === "DOUBLE" || c.type === "FLOAT") return `CASE WHEN isnan(r.${name}) THEN NULL ELSE r.${name} END AS ${name}`;
    return `r.${name}`;
  });
  const keys = request.partition.map((p) => p.key);
  const withKeys = (source: string): string =>
    `SELECT *, ${request.partition.map((p) => `CAST((${p.expression}) AS VARCHAR) AS ${quoteIdentifier(p.key)}`).join(", ")} ` +
    `FROM (SELECT ${normalized.join(", ")}, r.__file, r.__line, r.__raw, r.__problem FROM (${source}) r)`;
  // The partition expressions are checked against the declared columns first, before anything is read.
  const shape =
    `SELECT ${columns.map((c) => `NULL::${c.type} AS ${quoteIdentifier(c.name)}`).join(", ")}, ` +
    `NULL::VARCHAR AS __file, NULL::BIGINT AS __line, NULL::VARCHAR AS __raw, NULL::VARCHAR AS __problem`;
  try {
    await connection.run(`SELECT * FROM (${withKeys(shape)}) LIMIT 0`);
  } catch (error) {
    throw new InvalidInputError(`a partition expression does not work on the source columns: ${errorMessage(error).replace(/\s+/g, " ")}`);
  }
  try {
    await connection.run(`CREATE TABLE ${read} AS ${withKeys(typed)}`);
  } catch (error) {
    throw new InvalidInputError(`reading ${request.files.join(", ")} as ${request.format} failed: ${errorMessage(error).replace(/\s+/g, " ")}`);
  }

  // 3. Partition values are checked once per distinct value: NULL, or unsafe in a path or a query.
  const keyChecks = request.partition.map(
    ({ key, expression }) =>
      `CASE WHEN ${quoteIdentifier(key)} IS NULL THEN ${quoteLiteral(`partition key ${key} is NULL (${expression})`)} ` +
      `WHEN NOT regexp_full_match(${quoteIdentifier(key)}, ${quoteLiteral(SAFE_PARTITION_VALUE)}) OR contains(${quoteIdentifier(key)}, '..') OR strlen(${quoteIdentifier(key)}) > ${MAX_PARTITION_VALUE_LENGTH} ` +
      `THEN ${quoteLiteral(`partition key ${key} has the unsafe value '`)} || ${quoteIdentifier(key)} || ${quoteLiteral("'")} END`,
  );
  const keyList = keys.map(quoteIdentifier).join(", ");
  await connection.run(
    `CREATE TABLE ${badKeys} AS SELECT * FROM (SELECT ${keyList}, coalesce(${keyChecks.join(", ")}) AS __key_problem ` +
      `FROM (SELECT DISTINCT ${keyList} FROM ${read})) WHERE __key_problem IS NOT NULL`,
  );

  // 4. Split: a row is bad for a value that did not convert, a NULL in a non-nullable column, or a bad partition value.
  const notNull = columns
    .filter((c) => !c.nullable)
    .map((c) => `CASE WHEN r.${quoteIdentifier(c.name)} IS NULL THEN ${quoteLiteral(`column ${c.name} is NULL but is declared not nullable`)} END`);
  const keysMatch = keys.map((key) => `r.${quoteIdentifier(key)} IS NOT DISTINCT FROM b.${quoteIdentifier(key)}`).join(" AND ");
  const problem = `coalesce(r.__problem, ${[...notNull, "b.__key_problem"].join(", ")})`;
  const checked = `FROM ${read} r LEFT JOIN ${badKeys} b ON ${keysMatch}`;
  await connection.run(
    `CREATE TABLE ${tables.landed} AS SELECT ${[...columns.map((c) => `r.${quoteIdentifier(c.name)}`), ...keys.map((k) => `r.${quoteIdentifier(k)}`)].join(", ")} ` +
      `${checked} WHERE ${problem} IS NULL`,
  );
  // A row that could not be read keeps its raw text (JSONL) or none (Parquet: no text); a later problem shows the typed values.
  await connection.run(
    `CREATE TABLE ${tables.rejected} AS ${rejectedRead} UNION ALL ` +
      `SELECT r.__file AS file, r.__line AS line, ${problem} AS reason, CASE WHEN r.__problem IS NOT NULL THEN r.__raw ELSE coalesce(r.__raw, ${rawText("r")}) END AS raw ` +
      `${checked} WHERE ${problem} IS NOT NULL`,
  );
  for (const scratch of [read, badKeys, `${read}_text`, `${read}_lines`, readErrors, readScans]) {
    await connection.run(`DROP TABLE IF EXISTS ${scratch}`);
  }
}

async function parquetColumns(connection: DuckDBConnection, files: string): Promise<string[]> {
  const reader = await connection.runAndReadAll(`SELECT * FROM read_parquet(${files}) LIMIT 0`);
  return reader.columnNames();
}

/**
 * The SQL of one signed column's canonical text (docs/signatures.md), or NULL.
 * The expression depends only on specified functions (strftime, printf %.17g, CAST of integers and decimals).
 */
export function canonicalExpression(name: string, type: string): string {
  const c = quoteIdentifier(name);
  if (/^(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|UTINYINT|USMALLINT|UINTEGER|UBIGINT|UHUGEINT)$/.test(type) || type.startsWith("DECIMAL(")) {
    return `CAST(${c} AS VARCHAR)`;
  }
  if (type === "DOUBLE" || type === "FLOAT") {
    const d = `CAST(${c} AS DOUBLE)`;
    return `CASE WHEN isnan(${d}) THEN NULL WHEN ${d} = 0 THEN '0' WHEN isinf(${d}) THEN CASE WHEN ${d} > 0 THEN 'inf' ELSE '-inf' END ELSE printf('%.17g', ${d}) END`;
  }
  if (type === "BOOLEAN") return `CASE WHEN ${c} THEN 'true' WHEN NOT ${c} THEN 'false' END`;
  if (type === "DATE") return `strftime(${c}, '%Y-%m-%d')`;
  if (type === "TIMESTAMP") return `strftime(${c}, '%Y-%m-%dT%H:%M:%S.%f')`;
  if (type === "TIMESTAMPTZ") return `strftime(timezone('UTC', ${c}), '%Y-%m-%dT%H:%M:%S.%f') || 'Z'`;
  if (type === "TIME") return `strftime(TIMESTAMP '1970-01-01' + ${c}, '%H:%M:%S.%f')`;
  if (type === "UUID") return `lower(CAST(${c} AS VARCHAR))`;
  if (type === "BLOB") return `lower(hex(${c}))`;
  return `CAST(${c} AS VARCHAR)`;
}

/** The SQL of a column's word (docs/signatures.md, step 3) for word kind `integer`: a BIGINT expression. */
function integerWordExpression(name: string, type: string): string {
  const c = quoteIdentifier(name);
  const decimal = /^DECIMAL\((\d+),(\d+)\)$/.exec(type);
  if (decimal) {
    const [width, scale] = [Number(decimal[1]), Number(decimal[2])];
    if (scale === 0) return `CAST(${c} AS BIGINT)`;
    // The exact unscaled value (below 10^18): DuckDB multiplies decimals in 64 bits while the result's
    // width stays within 18 digits, so a wider product is widened to DECIMAL(38,s) first.
    const value = width + scale + 1 <= 18 ? c : `CAST(${c} AS DECIMAL(38,${scale}))`;
    return `CAST(${value} * CAST(1${"0".repeat(scale)} AS DECIMAL(${scale + 1},0)) AS BIGINT)`;
  }
  // DuckDB stores DATE ±infinity as ±(2^31 - 1) days, which this difference returns as is.
  if (type === "DATE") return `(${c} - DATE '1970-01-01')`;
  if (type === "TIME") return `epoch_us(${c})`;
  // epoch_us() is NULL for ±infinity: their words are the stored ±(2^63 - 1), as the native form reads them.
  if (type === "TIMESTAMP" || type === "TIMESTAMPTZ") {
    const infinity = INFINITY_WORDS[type];
    return `CASE WHEN isinf(${c}) THEN CASE WHEN ${c} > CAST('epoch' AS ${type}) THEN ${infinity} ELSE -${infinity} END ELSE epoch_us(${c}) END`;
  }
  return `CAST(${c} AS BIGINT)`;
}

/** A signed column as the signature query needs it: a column declared not nullable is never NULL once landed. */
export interface SignatureColumn {
  readonly name: string;
  readonly type: string;
  readonly nullable?: boolean;
}

const LANE_MODULUS = "18446744073709551616::HUGEINT";

/** The widest row the extension's aggregate takes as separate arguments (MAX_DIRECT_FIELDS in native/lakeswap_signature.c). */
const NATIVE_DIRECT_FIELDS = 32;

/**
 * The per-partition signature query over a relation: for each partition, the
 * row count and the two lane sums of docs/signatures.md (v2), as text (exact
 * integers). `signed` must be in signature column order. Both forms give the
 * same numbers; `native` needs lakeswap's extension loaded (./duckdb-open.ts),
 * whose aggregate computes the lanes and their sums per partition.
 */
export function signatureQuery(relation: string, keys: readonly string[], signed: readonly SignatureColumn[], form: SignatureForm): string {
  const keyList = keys.map(quoteIdentifier).join(", ");
  const rel = quoteIdentifier(relation);
  if (form === "native") {
    // The extension's aggregate: integer kinds as their declared type (it reads the stored integer), text kinds as canonical text.
    const fields = signed.map((column) =>
      wordKind(column.type) === "integer" ? `CAST(${quoteIdentifier(column.name)} AS ${column.type})` : canonicalExpression(column.name, column.type),
    );
    // Up to 32 fields are arguments of their own (native/lakeswap_signature.c); a wider row goes as one struct.
    const args = fields.length <= NATIVE_DIRECT_FIELDS ? fields.join(", ") : `row(${fields.join(", ")})`;
    const digests = `SELECT ${keyList}, lakeswap_signature(${args}) AS __s FROM ${rel} GROUP BY ALL`;
    return `SELECT ${keyList}, __s.n AS n, CAST(__s.upper AS VARCHAR) AS upper, CAST(__s.lower AS VARCHAR) AS lower FROM (${digests}) ORDER BY ALL`;
  }
  // Lanes are signed here; the sums are taken modulo 2^64 as unsigned numbers (the mathematical modulus, never negative).
  const laneSum = (lane: string): string => `CAST(((sum(${lane}) % ${LANE_MODULUS}) + ${LANE_MODULUS}) % ${LANE_MODULUS} AS VARCHAR)`;
  return `SELECT ${keyList}, count(*) AS n, ${laneSum("__a")} AS upper, ${laneSum("__b")} AS lower FROM (${sqlLanes(rel, keyList, signed)}) GROUP BY ALL ORDER BY ALL`;
}

/**
 * The lanes of each row in plain SQL. A stack of projections: fields to words
 * (one MD5 per text field) and the null flag word, MD5 digests to two words,
 * words to their two factors, factors to the two lanes, the finalizer round.
 * Everything is BIGINT: each product is of a number below 2^32 and a signed
 * 32-bit one, so it is exact, and no per-row casts or 128-bit arithmetic are
 * needed (in DuckDB those cost more than the products).
 */
function sqlLanes(relation: string, keyList: string, signed: readonly SignatureColumn[]): string {
  const fields: string[] = [];
  const digests: string[] = [];
  const words: string[] = [];
  signed.forEach((column, j) => {
    const nullable = column.nullable ?? true;
    if (wordKind(column.type) === "integer") {
      const word = integerWordExpression(column.name, column.type);
      fields.push(`${nullable ? `coalesce(${word}, 0)` : word} AS __w${j}`);
      digests.push(`__w${j}`);
      words.push(`__w${j}`);
    } else {
      const digest = `md5_number(${canonicalExpression(column.name, column.type)})`;
      fields.push(`${nullable ? `coalesce(${digest}, 0::UHUGEINT)` : digest} AS __m${j}`);
      // md5_number is the digest read as a little-endian 128-bit integer: its bits 0-62 and 65-127.
      digests.push(`CAST(__m${j} & 9223372036854775807::UHUGEINT AS BIGINT) AS __w${j}_0`, `CAST(__m${j} >> 65 AS BIGINT) AS __w${j}_1`);
      words.push(`__w${j}_0`, `__w${j}_1`);
    }
  });
  // The null flags: flag j is set when column j is NULL (never, where it is declared not nullable).
  for (let q = 0; q < flagWordCount(signed.length); q++) {
    const bits = signed
      .map((column, j) => ({ column, j }))
      .filter(({ column, j }) => (column.nullable ?? true) && Math.floor(j / FLAG_BITS) === q)
      .map(({ column, j }) => `CASE WHEN ${quoteIdentifier(column.name)} IS NULL THEN ${1n << BigInt(j % FLAG_BITS)} ELSE 0 END`);
    fields.push(`CAST(${bits.length === 0 ? "0" : bits.join(" | ")} AS BIGINT) AS __n${q}`);
    digests.push(`__n${q}`);
    words.push(`__n${q}`);
  }
  const factors = words.flatMap((word, i) => [`${word} & 4294967295 AS __x${i}`, `${word} >> 32 AS __y${i}`]);
  const lane = (index: 0 | 1): string =>
    laneKeys(index, words.length)
      .items.map(([k0, k1], i) => `(xor(__x${i}, ${k0}) * xor(__y${i}, ${k1}))`)
      .reduce((acc, product) => `xor(${acc}, ${product})`);
  const finalize = (s: string, [k0, k1]: KeyPair): string => `xor(${s}, xor(${s} & 4294967295, ${k0}) * xor(${s} >> 32, ${k1}))`;
  const fieldsToWords = `SELECT ${keyList}, ${fields.join(", ")} FROM ${relation}`;
  const digestsToWords = `SELECT ${keyList}, ${digests.join(", ")} FROM (${fieldsToWords})`;
  const wordsToFactors = `SELECT ${keyList}, ${factors.join(", ")} FROM (${digestsToWords})`;
  const factorsToLanes = `SELECT ${keyList}, ${lane(0)} AS __a, ${lane(1)} AS __b FROM (${wordsToFactors})`;
  return `SELECT ${keyList}, ${finalize("__a", laneKeys(0, 0).finalizer)} AS __a, ${finalize("__b", laneKeys(1, 0).finalizer)} AS __b FROM (${factorsToLanes})`;
}
