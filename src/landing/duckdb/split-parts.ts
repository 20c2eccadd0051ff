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
 * its rows at or before the line and those after it (with those at its `skipped` lines), in one query over the landed
 * rows. A side without rows signs as none (0 rows).
 */
export async function splitParts(connection: DuckDBConnection, request: SplitPartsRequest, signing: Signing, keys: readonly string[]): Promise<SplitPart[]> {
  const { delivery, splits } = request;
  if (splits.length === 0) return [];
  const signed = signatureColumnOrder(request.columns.filter((c) => request.signatureColumns.includes(c.name)));
  const suffix = randomBytes(6).toString("hex");
  const [table, view] = [`__lakeswap_splits_${suffix}`, `__lakeswap_split_rows_${suffix}`];
  const values = splits.map((s, i) => {
    const position = delivery.files.indexOf(s.file) + 1;
    return `(${[String(i), ...keys.map((key) => quoteLiteral(partitionValue(s.partition, key))), String(position), String(s.through), `[${(s.skipped ?? []).filter(Number.isSafeInteger).map(String).join(", ")}]::BIGINT[]`].join(", ")})`;
  });
  const matches = [...keys.map((k) => `s.${quoteIdentifier(k)} = l.${quoteIdentifier(k)}`), `s.__file = l.${FILE}`];
  try {
    await connection.run(`CREATE TEMP TABLE ${table} (__split INTEGER, ${keys.map((k) => `${quoteIdentifier(k)} VARCHAR, `).join("")}__file INTEGER, __through BIGINT, __skipped BIGINT[])`);
    for (let start = 0; start < values.length; start += 1000) await connection.run(`INSERT INTO ${table} VALUES ${values.slice(start, start + 1000).join(", ")}`);
    await connection.run(
      `CREATE TEMP VIEW ${view} AS SELECT s.__split, (l.${LINE} > s.__through OR list_contains(s.__skipped, l.${LINE})) AS __after, l.* EXCLUDE (${[...keys.map(quoteIdentifier), FILE, LINE].join(", ")}) ` +
        `FROM ${quoteRelation(delivery.relation)} l JOIN ${table} s ON ${matches.join(" AND ")}`,
    );
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
    return sums.map((s) => ({ before: signedSide(s.before), after: signedSide(s.after) }));
  } finally {
    await connection.run(`DROP VIEW IF EXISTS ${view}`);
    await connection.run(`DROP TABLE IF EXISTS ${table}`);
  }
}
