import { FLAG_BITS, INFINITY_WORDS, finishRawSignature, flagWordCount, type KeyPair, laneKeys, signatureParts, wordKind } from "../../model/signature.js";
import { quoteIdentifier, quoteRelation } from "../../model/sql.js";
import type { SignatureForm } from "../../duckdb/duckdb-open.js";

/**
 * The SQL of one signed column's canonical text (docs/signatures.md), or NULL.
 * The expression depends only on specified functions (strftime, printf %.17g, CAST of integers and decimals).
 * Only text kinds are signed by it; for integer kinds (DOUBLE and FLOAT among them since v3) it is informational.
 */
function canonicalExpression(name: string, type: string): string {
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

/**
 * A row's content as one 128-bit number (an MD5 of its signed columns' canonical texts, each written with its length, a
 * NULL apart): rows equal in what the signature covers have the same one, whatever file or run they were read from.
 * `signed`: the signed columns, each of the relation's rows holding them as their declared type.
 */
export function rowContentKey(signed: readonly SignatureColumn[]): string {
  const fields = signed.map((column) => {
    // What the signature reads of the field: an integer kind's exact word, a text kind's canonical text.
    const text = wordKind(column.type) === "integer" ? `CAST(${integerWordExpression(column.name, column.type)} AS VARCHAR)` : canonicalExpression(column.name, column.type);
    const isNull = nullCondition(column);
    const value = `coalesce('v' || length(${text}) || ':' || ${text}, 'n')`;
    return isNull === undefined ? value : `CASE WHEN ${isNull} THEN 'n' ELSE ${value} END`;
  });
  return `md5_number(concat(${fields.length === 0 ? "''" : fields.join(", ")}))`;
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
  // DOUBLE, and FLOAT widened exactly: the IEEE-754 bits of the double, -0 as 0, NaN as 0 (NULL: nullCondition flags it).
  // DuckDB casts a number to BIT as its bit pattern, most significant bit first, and 64 bits to BIGINT as two's
  // complement: an exact reinterpretation (the tests hold it to the reference on edge values and random bit patterns).
  if (type === "DOUBLE" || type === "FLOAT") {
    const d = `CAST(${c} AS DOUBLE)`;
    return `CASE WHEN isnan(${d}) OR ${d} = 0 THEN 0 ELSE CAST(CAST(${d} AS BIT) AS BIGINT) END`;
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

/**
 * When a field is NULL for the signature (its flag is set), or undefined where it never is: NULL, and for
 * DOUBLE/FLOAT also NaN (landing makes NaN NULL; one that reaches the signature anyway signs as NULL, as in
 * the native form, whatever the column's declared nullability).
 */
function nullCondition(column: SignatureColumn): string | undefined {
  const c = quoteIdentifier(column.name);
  const nullable = column.nullable ?? true;
  if (column.type === "DOUBLE" || column.type === "FLOAT") return `${nullable ? `${c} IS NULL OR ` : ""}isnan(CAST(${c} AS DOUBLE))`;
  return nullable ? `${c} IS NULL` : undefined;
}

/** A signed column as the signature query needs it: a column declared not nullable is never NULL once landed. */
export interface SignatureColumn {
  readonly name: string;
  readonly type: string;
  readonly nullable?: boolean;
  readonly signedAs?: string;
  readonly added?: true;
}

const LANE_MODULUS = "18446744073709551616::HUGEINT";

/** The widest row the extension's aggregate takes as separate arguments (MAX_DIRECT_FIELDS in native/lakeswap_signature.c). */
const NATIVE_DIRECT_FIELDS = 32;

/**
 * The per-partition signature query over a relation: for each partition, the
 * row count and the two lane sums of docs/signatures.md (v3), as text (exact
 * integers). `signed` must be in signature column order. Both forms give the
 * same numbers; `native` needs lakeswap's extension loaded (../../duckdb/duckdb-open.ts),
 * whose aggregate computes the lanes and their sums per partition.
 */
export function signatureQuery(relation: string, keys: readonly string[], signed: readonly SignatureColumn[], form: SignatureForm): string {
  // Each list of keys ends in ", " where there are keys: a table without partition keys is one group, the whole relation.
  const keyList = keys.map((key) => `${quoteIdentifier(key)}, `).join("");
  const rel = quoteRelation(relation);
  const { base, added } = signatureParts(signed);
  // An added column is signed apart (docs/signatures.md, "Schema changes"): over the rows where it holds a value, its word after the base columns'.
  const holds = (column: SignatureColumn): string => {
    const isNull = nullCondition(column);
    return isNull === undefined ? "true" : `NOT (${isNull})`;
  };
  const extra = (i: number): string => `, coalesce(__n${i}, 0) AS n_${i}, coalesce(__u${i}, '0') AS upper_${i}, coalesce(__l${i}, '0') AS lower_${i}`;
  if (form === "native") {
    // The extension's aggregate: integer kinds as their declared type (it reads the stored integer, or the double's bits), text kinds as canonical text.
    const field = (column: SignatureColumn): string =>
      wordKind(column.type) === "integer" ? `CAST(${quoteIdentifier(column.name)} AS ${column.type})` : canonicalExpression(column.name, column.type);
    // Up to 32 fields are arguments of their own (native/lakeswap_signature.c); a wider row goes as one struct.
    const args = (columns: readonly SignatureColumn[]): string => {
      const fields = columns.map(field);
      return fields.length <= NATIVE_DIRECT_FIELDS ? fields.join(", ") : `row(${fields.join(", ")})`;
    };
    const apart = added.map((column, i) => `, lakeswap_signature(${args([...base, column])}) FILTER (WHERE ${holds(column)}) AS __s${i}`).join("");
    const digests = `SELECT ${keyList}lakeswap_signature(${args(base)}) AS __s${apart} FROM ${rel} GROUP BY ALL`;
    const sums = added.map((_, i) => `, __s${i}.n AS __n${i}, CAST(__s${i}.upper AS VARCHAR) AS __u${i}, CAST(__s${i}.lower AS VARCHAR) AS __l${i}`).join("");
    const columns = `${keyList}__s.n AS n, CAST(__s.upper AS VARCHAR) AS upper, CAST(__s.lower AS VARCHAR) AS lower`;
    if (added.length === 0) return `SELECT ${columns} FROM (${digests}) ORDER BY ALL`;
    return `SELECT ${keyList}n, upper, lower${added.map((_, i) => extra(i)).join("")} FROM (SELECT ${columns}${sums} FROM (${digests})) ORDER BY ALL`;
  }
  // Lanes are signed here; the sums are taken modulo 2^64 as unsigned numbers (the mathematical modulus, never negative).
  const laneSum = (lane: string): string => `CAST(((sum(${lane}) % ${LANE_MODULUS}) + ${LANE_MODULUS}) % ${LANE_MODULUS} AS VARCHAR)`;
  const main = `SELECT ${keyList}count(*) AS n, ${laneSum("__a")} AS upper, ${laneSum("__b")} AS lower FROM (${sqlLanes(rel, keyList, base)}) GROUP BY ALL`;
  if (added.length === 0) return `${main} ORDER BY ALL`;
  // Each added column's sums in a query of their own over its rows, joined to the partition's by its keys.
  const joins = added.map((column, i) => {
    const rows = `(SELECT * FROM ${rel} WHERE ${holds(column)})`;
    const sums = `SELECT ${keyList}count(*) AS __n${i}, ${laneSum("__a")} AS __u${i}, ${laneSum("__b")} AS __l${i} FROM (${sqlLanes(rows, keyList, [...base, column])}) GROUP BY ALL`;
    const on = keys.length === 0 ? "true" : keys.map((key) => `m.${quoteIdentifier(key)} IS NOT DISTINCT FROM a${i}.${quoteIdentifier(key)}`).join(" AND ");
    return ` LEFT JOIN (${sums}) AS a${i} ON ${on}`;
  });
  const keyColumns = keys.map((key) => `m.${quoteIdentifier(key)}, `).join("");
  return `SELECT ${keyColumns}m.n, m.upper, m.lower${added.map((_, i) => extra(i)).join("")} FROM (${main}) AS m${joins.join("")} ORDER BY ALL`;
}

/** The names of the signature query's columns after the partition keys: the row count, the two lane sums, then each added column's three. */
export function signatureColumnNames(signed: readonly SignatureColumn[]): string[] {
  return ["n", "upper", "lower", ...signatureParts(signed).added.flatMap((_, i) => [`n_${i}`, `upper_${i}`, `lower_${i}`])];
}

/** A partition's signature from a row of the signature query, its values from `offset` (after the keys) on. */
export function signatureOfRow(signed: readonly SignatureColumn[], row: readonly unknown[], offset: number): { readonly rows: number; readonly signature: string } {
  const sums = sumsOfRow(signed, row, offset);
  return { rows: Number(sums.rows), signature: signatureOfSums(signed, sums) };
}

/** The row count and lane sums of a row of the signature query (values from `offset` on), each added column's after. */
export interface RowSums {
  readonly rows: bigint;
  readonly upper: bigint;
  readonly lower: bigint;
  readonly added: readonly { readonly rows: bigint; readonly upper: bigint; readonly lower: bigint }[];
}

export function sumsOfRow(signed: readonly SignatureColumn[], row: readonly unknown[], offset: number): RowSums {
  const at = (i: number): bigint => BigInt(String(row[offset + i]));
  return {
    rows: at(0),
    upper: at(1),
    lower: at(2),
    added: signatureParts(signed).added.map((_, i) => ({ rows: at(3 + 3 * i), upper: at(4 + 3 * i), lower: at(5 + 3 * i) })),
  };
}

/** The sums of two groups of rows together (the signature is their sum: order-insensitive, so groups add up). */
export function addSums(a: RowSums, b: RowSums): RowSums {
  const add = <T extends { rows: bigint; upper: bigint; lower: bigint }>(x: T, y: T) => ({ rows: x.rows + y.rows, upper: x.upper + y.upper, lower: x.lower + y.lower });
  return { ...add(a, b), added: a.added.map((x, i) => add(x, b.added[i]!)) };
}

/** The raw signature of rows whose sums these are. */
export function signatureOfSums(signed: readonly SignatureColumn[], sums: RowSums): string {
  return finishRawSignature(signed, sums.rows, sums.upper, sums.lower, sums.added);
}

/**
 * The lanes of each row in plain SQL. A stack of projections: fields to words
 * (one MD5 per text field, a cast through BIT per DOUBLE/FLOAT) and the null
 * flag word, MD5 digests to two words, words to their two factors, factors to
 * the two lanes, the finalizer round. Everything after the words is BIGINT:
 * each product is of a number below 2^32 and a signed 32-bit one, so it is
 * exact, and no per-row casts or 128-bit arithmetic are needed (in DuckDB those
 * cost more than the products).
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
  // The null flags: flag j is set when column j is NULL or NaN (never, where it is declared not nullable and is no float).
  for (let q = 0; q < flagWordCount(signed.length); q++) {
    const bits = signed
      .map((column, j) => ({ condition: nullCondition(column), j }))
      .filter(({ condition, j }) => condition !== undefined && Math.floor(j / FLAG_BITS) === q)
      .map(({ condition, j }) => `CASE WHEN ${condition} THEN ${1n << BigInt(j % FLAG_BITS)} ELSE 0 END`);
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
  const fieldsToWords = `SELECT ${keyList}${fields.join(", ")} FROM ${relation}`;
  const digestsToWords = `SELECT ${keyList}${digests.join(", ")} FROM (${fieldsToWords})`;
  const wordsToFactors = `SELECT ${keyList}${factors.join(", ")} FROM (${digestsToWords})`;
  const factorsToLanes = `SELECT ${keyList}${lane(0)} AS __a, ${lane(1)} AS __b FROM (${wordsToFactors})`;
  return `SELECT ${keyList}${finalize("__a", laneKeys(0, 0).finalizer)} AS __a, ${finalize("__b", laneKeys(1, 0).finalizer)} AS __b FROM (${factorsToLanes})`;
}
