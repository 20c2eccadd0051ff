import type { DuckDBConnection } from "@duckdb/node-api";
import { AuditError } from "../../model/errors.js";
import { quoteLiteral } from "../../model/sql.js";
import { cleanDuckDbMessage } from "../../duckdb/duckdb-text.js";

/**
 * Rows of each file, in order, from its Parquet footer (`paths`: where DuckDB reads the store files `files`). Fails
 * naming a file whose footer cannot be read: the audit never takes an engine's word for a run.
 */
export async function countFooterRows(connection: DuckDBConnection, files: readonly { readonly key: string }[], paths: readonly string[]): Promise<number[]> {
  const footerRows = async (list: readonly string[]): Promise<Map<string, number>> => {
    const reader = await connection.runAndReadAll(`SELECT file_name, num_rows FROM parquet_file_metadata([${list.map(quoteLiteral).join(", ")}])`);
    return new Map(reader.getRowsJS().map(([name, rows]) => [String(name), Number(rows ?? 0)]));
  };
  let counted: Map<string, number>;
  try {
    counted = await footerRows(paths);
  } catch {
    // Find the file to name: one at a time.
    for (const [index, file] of paths.entries()) {
      try {
        await footerRows([file]);
      } catch (error) {
        throw new AuditError(`the run file ${files[index]?.key} is not readable Parquet (${cleanDuckDbMessage(error)}); the pointer was not moved`);
      }
    }
    throw new AuditError(`the run files ${files.map((f) => f.key).join(", ")} could not be read together; the pointer was not moved`);
  }
  return paths.map((file, index) => {
    const rows = counted.get(file);
    if (rows === undefined) throw new AuditError(`the footer of run file ${files[index]?.key} was not read; the pointer was not moved`);
    return rows;
  });
}

/** The tables a SELECT names, CTE names aside, from DuckDB's parse tree of it (json_serialize_sql); undefined when it is no tree. */
export function tablesOfParseTree(serialized: string): string[] | undefined {
  let tree: unknown;
  try {
    tree = JSON.parse(serialized);
  } catch {
    return undefined;
  }
  if (typeof tree !== "object" || tree === null || (tree as { error?: unknown }).error === true) return undefined;
  const tables = new Set<string>();
  const cteNames = new Set<string>();
  const walk = (node: unknown): void => {
    if (Array.isArray(node)) {
      for (const item of node) walk(item);
      return;
    }
    if (typeof node !== "object" || node === null) return;
    const record = node as Record<string, unknown>;
    if (record.type === "BASE_TABLE" && typeof record.table_name === "string") tables.add(record.table_name);
    const cteMap = record.cte_map as { map?: { key?: unknown }[] } | undefined;
    for (const entry of cteMap?.map ?? []) if (typeof entry.key === "string") cteNames.add(entry.key.toLowerCase());
    for (const value of Object.values(record)) walk(value);
  };
  walk(tree);
  return [...tables].filter((name) => !cteNames.has(name.toLowerCase())).sort();
}
