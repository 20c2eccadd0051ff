import type { DuckDBConnection } from "@duckdb/node-api";
import { quoteIdentifier, quoteLiteral } from "../model/sql.js";
import type { CatalogFileTable } from "./catalog-file.js";

/** The schema of the file's own record of its views (which table, how many partitions and files, when). */
export const RECORD_SCHEMA = "lakeswap";

/**
 * The file's records (`lakeswap.tables`, `lakeswap.history`), copied into temporary tables of this connection that the
 * update changes; the file then gets them back as views over their rows (`recordViews`). Views, not tables: a commit
 * that changes a table's rows makes DuckDB's checkpoint rewrite its data (35-50 ms for a row of a three-row table, on a
 * file of 90 views), where a view is rewritten with the rest of the catalog (a few ms). A file written by an earlier
 * lakeswap keeps them as tables (`form`): given the columns they lack, copied, and dropped for the views.
 */
export async function copyRecords(connection: DuckDBConnection, alias: string): Promise<RecordCopies> {
  // Made, or given their newer columns, only where the file lacks some: the probe costs about a millisecond.
  if (!(await recordsComplete(connection, alias))) await connection.run(recordTablesDdl(alias));
  // A table has a rowid; a view over its rows has none.
  const form = await connection.run(`SELECT rowid FROM ${alias}.${RECORD_SCHEMA}.tables LIMIT 0`).then(
    () => "tables" as const,
    () => "views" as const,
  );
  const suffix = alias.replace(/^catalog_file_/, "");
  const copies = { tables: `temp.records_tables_${suffix}`, history: `temp.records_history_${suffix}`, form };
  await connection.run(
    Object.entries(RECORD_COLUMNS)
      .map(([name, columns]) => `CREATE OR REPLACE TEMP TABLE ${copies[name as RecordName].slice("temp.".length)} AS SELECT ${columns.map(([column]) => quoteIdentifier(column)).join(", ")} FROM ${alias}.${RECORD_SCHEMA}.${name};`)
      .join("\n"),
  );
  return copies;
}

/** The temporary copies of a file's records, and whether the file keeps them as tables (an earlier lakeswap's) or as views. */
export interface RecordCopies {
  readonly tables: string;
  readonly history: string;
  readonly form: "tables" | "views";
}

type RecordName = keyof typeof RECORD_COLUMNS;

/**
 * The statements that give the file its records back from their copies, each as a view over its rows (the file's
 * tables of an earlier lakeswap dropped first). Every value is written as text and cast to its column's type, which
 * gives back the same value (a timestamp's text keeps its microseconds).
 */
export async function recordViews(connection: DuckDBConnection, alias: string, copies: RecordCopies): Promise<string[]> {
  const statements = copies.form === "tables" ? Object.keys(RECORD_COLUMNS).map((name) => `DROP TABLE ${alias}.${RECORD_SCHEMA}.${name};`) : [];
  for (const [name, columns] of Object.entries(RECORD_COLUMNS)) {
    const rows = (await connection.runAndReadAll(`SELECT ${columns.map(([column]) => `CAST(${quoteIdentifier(column)} AS VARCHAR)`).join(", ")} FROM ${copies[name as RecordName]} ORDER BY ALL`)).getRowsJS();
    const cast = (value: string, i: number) => `CAST(${value} AS ${columns[i]![1]}) AS ${quoteIdentifier(columns[i]![0])}`;
    const literal = (value: unknown) => (value === null || value === undefined ? "NULL" : quoteLiteral(String(value)));
    const select =
      rows.length === 0
        ? `SELECT ${columns.map((_, i) => cast("NULL", i)).join(", ")} WHERE false`
        : `SELECT ${columns.map((_, i) => cast(`v${i}`, i)).join(", ")} FROM (VALUES ${rows.map((row) => `(${row.map(literal).join(", ")})`).join(", ")}) AS r(${columns.map((_, i) => `v${i}`).join(", ")})`;
    statements.push(`CREATE OR REPLACE VIEW ${alias}.${RECORD_SCHEMA}.${name} AS ${select};`);
  }
  return statements;
}

/** The past views that go: those of dropped tables, and (with `staleBefore`) those superseded before the grace window. */
export async function staleRecords(connection: DuckDBConnection, past: string, tables: readonly CatalogFileTable[], staleBefore: string | undefined): Promise<string[]> {
  const dropped = tables.filter((t) => !t.snapshot).map((t) => t.name);
  const stale = [...(dropped.length > 0 ? [`table_name IN (${dropped.map(quoteLiteral).join(", ")})`] : []), ...(staleBefore ? [`superseded_at < ${staleBefore}`] : [])];
  if (stale.length === 0) return [];
  return (await connection.runAndReadAll(`SELECT view_name FROM ${past} WHERE ${stale.join(" OR ")}`)).getRows().map((row) => String(row[0]));
}

/** The file's records, their columns in order with their types: those after the first were added as lakeswap grew. */
const RECORD_COLUMNS: Readonly<Record<"tables" | "history", readonly (readonly [string, string])[]>> = {
  tables: [["table_name", "VARCHAR"], ["partitions", "BIGINT"], ["files", "BIGINT"], ["updated_at", "TIMESTAMP"], ["pointers", "VARCHAR"], ["state", "VARCHAR"]],
  history: [
    ["table_name", "VARCHAR"], ["sync_id", "VARCHAR"], ["view_name", "VARCHAR"], ["created_at", "TIMESTAMP"], ["superseded_at", "TIMESTAMP"],
    ["definition", "VARCHAR"], ["overrides", "VARCHAR"], ["next_view", "VARCHAR"],
  ],
};

/** Makes the record tables of the file attached as `alias`, or gives a file from an earlier lakeswap the columns it lacks. */
function recordTablesDdl(alias: string): string {
  const statements = [`CREATE SCHEMA IF NOT EXISTS ${alias}.${RECORD_SCHEMA};`];
  for (const [table, columns] of Object.entries(RECORD_COLUMNS)) {
    const [[first, firstType], ...rest] = columns as [readonly [string, string], ...(readonly [string, string])[]];
    statements.push(`CREATE TABLE IF NOT EXISTS ${alias}.${RECORD_SCHEMA}.${table} (${quoteIdentifier(first)} ${firstType});`);
    for (const [name, type] of rest) statements.push(`ALTER TABLE ${alias}.${RECORD_SCHEMA}.${table} ADD COLUMN IF NOT EXISTS ${quoteIdentifier(name)} ${type};`);
  }
  return statements.join("\n");
}

/**
 * Whether the file attached as `alias` has both records (tables or views) with every column of RECORD_COLUMNS: a query
 * that names them, LIMIT 0, reads no row (DuckDB's duckdb_columns() would bind every view of the file to list its columns too).
 */
async function recordsComplete(connection: DuckDBConnection, alias: string): Promise<boolean> {
  const probe = Object.entries(RECORD_COLUMNS)
    .map(([table, columns]) => `SELECT ${columns.map(([name]) => quoteIdentifier(name)).join(", ")} FROM ${alias}.${RECORD_SCHEMA}.${table} LIMIT 0;`)
    .join("\n");
  try {
    await connection.run(probe);
    return true;
  } catch {
    return false;
  }
}
