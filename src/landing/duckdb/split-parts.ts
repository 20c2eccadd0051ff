import { randomBytes } from "node:crypto";
import type { DuckDBConnection } from "@duckdb/node-api";
import { partitionValue } from "../../model/partition.js";
import { signatureColumnOrder, type Signing } from "../../model/signature.js";
import { quoteIdentifier, quoteLiteral, quoteRelation } from "../../model/sql.js";
import type { SplitPart, SplitPartsRequest } from "../landing.js";
import { FILE, LINE } from "./landing-pass.js";
import { signatureColumnNames, signatureOfSums, signatureQuery, sumsOfRow, type RowSums } from "./signature-sql.js";

/**
 * Each part of `request.splits` (a partition's rows of one file of a delivery landed with `fileParts`) signed in two:
 * its rows at or before the line and those after it (with those at its `skipped` lines), or with `rows` at the line of
 * its rows-th row, in one query over the landed rows. A side without rows signs as none (0 rows).
 */
export async function splitParts(connection: DuckDBConnection, request: SplitPartsRequest, signing: Signing, keys: readonly string[]): Promise<SplitPart[]> {
  const { delivery, splits } = request;
  if (splits.length === 0) return [];
  const signed = signatureColumnOrder(request.columns.filter((c) => request.signatureColumns.includes(c.name)));
  const suffix = randomBytes(6).toString("hex");
  const [table, view] = [`__lakeswap_splits_${suffix}`, `__lakeswap_split_rows_${suffix}`];
  const values = splits.map((s, i) => {
    const position = delivery.files.indexOf(s.file) + 1;
    const skipped = s.rows === undefined ? (s.skipped ?? []) : [];
    const rows = s.rows !== undefined && Number.isSafeInteger(s.rows) ? String(s.rows) : "NULL";
    return `(${[String(i), ...keys.map((key) => quoteLiteral(partitionValue(s.partition, key))), String(position), String(s.through), `[${skipped.filter(Number.isSafeInteger).map(String).join(", ")}]::BIGINT[]`, rows].join(", ")})`;
  });
  const matches = [...keys.map((k) => `s.${quoteIdentifier(k)} = l.${quoteIdentifier(k)}`), `s.__file = l.${FILE}`];
  try {
    await connection.run(`CREATE TEMP TABLE ${table} (__split INTEGER, ${keys.map((k) => `${quoteIdentifier(k)} VARCHAR, `).join("")}__file INTEGER, __through BIGINT, __skipped BIGINT[], __rows BIGINT)`);
    for (let start = 0; start < values.length; start += 1000) await connection.run(`INSERT INTO ${table} VALUES ${values.slice(start, start + 1000).join(", ")}`);
    // A split by `rows` is at the line of the part's rows-th row (in line order); one whose part has fewer rows takes them all.
    const nth =
      `SELECT __split, max(${LINE}) FILTER (WHERE __rank = __rows) AS __at FROM (SELECT s.__split, s.__rows, l.${LINE}, ` +
      `row_number() OVER (PARTITION BY s.__split ORDER BY l.${LINE}) AS __rank FROM ${quoteRelation(delivery.relation)} l JOIN ${table} s ON ${matches.join(" AND ")} ` +
      `WHERE s.__rows IS NOT NULL) GROUP BY __split`;
    const byRows = splits.some((s) => s.rows !== undefined);
    if (byRows) await connection.run(`UPDATE ${table} t SET __through = coalesce(n.__at, 9223372036854775807) FROM (${nth}) n WHERE t.__split = n.__split`);
    await connection.run(
      `CREATE TEMP VIEW ${view} AS SELECT s.__split, (l.${LINE} > s.__through OR list_contains(s.__skipped, l.${LINE})) AS __after, l.* EXCLUDE (${[...keys.map(quoteIdentifier), FILE, LINE].join(", ")}) ` +
        `FROM ${quoteRelation(delivery.relation)} l JOIN ${table} s ON ${matches.join(" AND ")}`,
    );
    const bounds = byRows
      ? new Map((await connection.runAndReadAll(`SELECT __split, __through::DOUBLE FROM ${table}`)).getRowsJS().map(([split, line]) => [Number(split), Number(line)]))
      : new Map<number, number>();
    const reader = await connection.runAndReadAll(
      `SELECT __split, __after, ${signatureColumnNames(signed).join(", ")} FROM (${signatureQuery(view, ["__split", "__after"], signed, signing.form)})`,
    );
    const none: RowSums = sumsOfRow(signed, signatureColumnNames(signed).map(() => "0"), 0);
    const sums = splits.map(() => ({ before: none, after: none }));
    for (const row of reader.getRowsJS()) {
      const side = row[1] === true ? "after" : "before";
      sums[Number(row[0])]![side] = sumsOfRow(signed, row, 2);
    }
    const signedSide = (s: RowSums) => ({ rows: Number(s.rows), signature: signatureOfSums(signed, s) });
    return sums.map((s, i) => ({ through: bounds.get(i) ?? splits[i]!.through, before: signedSide(s.before), after: signedSide(s.after) }));
  } finally {
    await connection.run(`DROP VIEW IF EXISTS ${view}`);
    await connection.run(`DROP TABLE IF EXISTS ${table}`);
  }
}
