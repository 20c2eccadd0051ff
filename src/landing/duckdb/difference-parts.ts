import { randomBytes } from "node:crypto";
import type { DuckDBConnection } from "@duckdb/node-api";
import { partitionPath, partitionValue } from "../../model/partition.js";
import { signatureColumnOrder } from "../../model/signature.js";
import { quoteFilePath, quoteIdentifier, quoteLiteral, quoteRelation } from "../../model/sql.js";
import { readFiles } from "../../engine/duckdb-run.js";
import type { DifferencePartsRequest, PartDifference } from "../landing.js";
import { FILE, LINE } from "./landing-pass.js";
import { rowContentKey, signatureColumnNames, signatureOfSums, signatureQuery, sumsOfRow, type RowSums } from "./signature-sql.js";

/** The column DuckDB adds to tell which file a current row came from (a lake column name never starts with '_'). */
const FILE_COLUMN = "__lakeswap_file";

/**
 * Each part of `request.parts` (a partition's rows of one file of a delivery landed with `fileParts`) less what its
 * partition's current run holds, as a multiset difference by row content (./signature-sql.ts `rowContentKey`): of the
 * part's rows with one content, those past the count the run holds, the last by line. Each partition's current rows are
 * read once (`localFiles`: a path DuckDB reads for each store key), in one query over the landed rows; the rows taken
 * are told by line (the last line of a row not taken, and the lines before it of rows taken) and signed.
 */
export async function differenceParts(connection: DuckDBConnection, request: DifferencePartsRequest, localFiles: ReadonlyMap<string, string>): Promise<PartDifference[]> {
  const { delivery, parts, keys } = request;
  if (parts.length === 0) return [];
  const signed = signatureColumnOrder(request.columns.filter((c) => request.signatureColumns.includes(c.name)));
  const contentKey = rowContentKey(signed);
  const suffix = randomBytes(6).toString("hex");
  const [partsTable, filesTable, held, marked, taken] = ["parts", "files", "held", "rows", "taken"].map((name) => `__lakeswap_difference_${name}_${suffix}`) as [string, string, string, string, string];
  // One group per partition: its current rows are counted once, however many of its parts are compared with them.
  const groups = new Map<string, number>();
  for (const p of parts) if (!groups.has(partitionPath(p.partition))) groups.set(partitionPath(p.partition), groups.size);
  const groupOf = parts.map((p) => groups.get(partitionPath(p.partition))!);
  // Parts of one family count what the parts of it before them hold; a part of none is a family of its own.
  const families = new Map<string, number>();
  for (const p of parts) if (p.family !== undefined && !families.has(p.family)) families.set(p.family, families.size);
  const familyOf = parts.map((p, i) => (p.family !== undefined ? families.get(p.family)! : families.size + i));
  const cast = (alias: string) => signed.map((c) => `CAST(${alias}.${quoteIdentifier(c.name)} AS ${c.type}) AS ${quoteIdentifier(c.name)}`).join(", ");
  const matches = [...keys.map((k) => `p.${quoteIdentifier(k)} = l.${quoteIdentifier(k)}`), `p.__file = l.${FILE}`].join(" AND ");
  const landed = quoteRelation(delivery.relation);
  const values = async (sql: string) => (await connection.runAndReadAll(sql)).getRowsJS();
  try {
    await connection.run(`CREATE TEMP TABLE ${partsTable} (__part INTEGER, __group INTEGER, __family INTEGER, ${keys.map((k) => `${quoteIdentifier(k)} VARCHAR, `).join("")}__file INTEGER)`);
    const partRows = parts.map((p, i) => `(${[String(i), String(groupOf[i]), String(familyOf[i]), ...keys.map((k) => quoteLiteral(partitionValue(p.partition, k))), String(delivery.files.indexOf(p.file) + 1)].join(", ")})`);
    await insertRows(connection, partsTable, partRows);
    await connection.run(`CREATE TEMP TABLE ${filesTable} (${FILE_COLUMN} VARCHAR, __group INTEGER)`);
    const fileRows: string[] = [];
    const listed = new Set<number>();
    parts.forEach((p, i) => {
      const group = groupOf[i]!;
      if (!listed.has(group)) fileRows.push(...p.current.map((key) => `(${quoteLiteral(localFiles.get(key) ?? key)}, ${group})`));
      listed.add(group);
    });
    await insertRows(connection, filesTable, fileRows);
    // The current rows' contents, counted per partition.
    await connection.run(`CREATE TEMP TABLE ${held} (__group INTEGER, __h UHUGEINT, __n BIGINT)`);
    if (fileRows.length > 0) {
      const paths = `[${[...new Set(parts.flatMap((p) => p.current.map((key) => localFiles.get(key) ?? key)))].map(quoteFilePath).join(", ")}]`;
      const current = `SELECT f.__group, ${cast("c")} FROM ${readFiles(request.table, paths, `filename = '${FILE_COLUMN}', hive_partitioning = false`)} AS c JOIN ${filesTable} AS f USING (${FILE_COLUMN})`;
      await connection.run(`INSERT INTO ${held} SELECT __group, ${contentKey} AS __h, count(*) FROM (${current}) GROUP BY ALL`);
    }
    // Each row of each part: new where its rank among the part's rows alike (by line) is past the count held, by the run
    // or by a part of its family before it.
    const rows = `SELECT p.__part, p.__group, p.__family, l.${LINE} AS __line, ${cast("l")} FROM ${landed} l JOIN ${partsTable} p ON ${matches}`;
    const hashed = `SELECT __part, __group, __family, __line, ${contentKey} AS __h FROM (${rows})`;
    const ranked = `SELECT *, row_number() OVER (PARTITION BY __part, __h ORDER BY __line) AS __rank FROM (${hashed})`;
    const counted = `SELECT __family, __part, __h, count(*) AS __n FROM (${hashed}) GROUP BY ALL`;
    const before = `SELECT __part, __h, max(__n) OVER (PARTITION BY __family, __h ORDER BY __part ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS __n FROM (${counted})`;
    const kin = familyOf.length === new Set(familyOf).size ? undefined : before;
    await connection.run(
      `CREATE TEMP TABLE ${marked} AS SELECT r.__part, r.__line, r.__rank > ${kin ? "greatest(coalesce(h.__n, 0), coalesce(k.__n, 0))" : "coalesce(h.__n, 0)"} AS __new ` +
        `FROM (${ranked}) r LEFT JOIN ${held} h ON h.__group = r.__group AND h.__h = r.__h${kin ? ` LEFT JOIN (${kin}) k ON k.__part = r.__part AND k.__h = r.__h` : ""}`,
    );
    const bounds = await values(
      `SELECT m.__part, coalesce(a.__after, 0)::DOUBLE, list(m.__line::DOUBLE ORDER BY m.__line) FILTER (WHERE m.__new AND m.__line <= coalesce(a.__after, 0)), count(*) FILTER (WHERE m.__new) ` +
        `FROM ${marked} m LEFT JOIN (SELECT __part, max(__line) AS __after FROM ${marked} WHERE NOT __new GROUP BY __part) a ON a.__part = m.__part GROUP BY m.__part, a.__after`,
    );
    // The rows taken, signed per part.
    await connection.run(
      `CREATE TEMP VIEW ${taken} AS SELECT m.__part, l.* EXCLUDE (${[...keys.map(quoteIdentifier), FILE, LINE].join(", ")}) FROM ${landed} l JOIN ${partsTable} p ON ${matches} ` +
        `JOIN ${marked} m ON m.__part = p.__part AND m.__line = l.${LINE} WHERE m.__new`,
    );
    const none: RowSums = sumsOfRow(signed, signatureColumnNames(signed).map(() => "0"), 0);
    const sums = parts.map(() => none);
    for (const row of await values(`SELECT __part, ${signatureColumnNames(signed).join(", ")} FROM (${signatureQuery(taken, ["__part"], signed, delivery.signing.form)})`)) {
      sums[Number(row[0])] = sumsOfRow(signed, row, 1);
    }
    const byPart = new Map(bounds.map((row) => [Number(row[0]), row]));
    return parts.map((_, i) => {
      const row = byPart.get(i);
      const retaken = Array.isArray(row?.[2]) ? (row[2] as unknown[]).map(Number) : [];
      return { after: Number(row?.[1] ?? 0), retaken, rows: Number(sums[i]!.rows), signature: signatureOfSums(signed, sums[i]!) };
    });
  } finally {
    await connection.run(`DROP VIEW IF EXISTS ${taken}`);
    for (const table of [marked, held, filesTable, partsTable]) await connection.run(`DROP TABLE IF EXISTS ${table}`);
  }
}

/** Inserts rows (SQL tuples) into a table, a thousand at a time. */
async function insertRows(connection: DuckDBConnection, table: string, rows: readonly string[]): Promise<void> {
  for (let start = 0; start < rows.length; start += 1000) await connection.run(`INSERT INTO ${table} VALUES ${rows.slice(start, start + 1000).join(", ")}`);
}
