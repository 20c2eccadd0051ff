import path from "node:path";
import { DuckDBInstance } from "@duckdb/node-api";

/** A string literal of DuckDB SQL. */
function literal(text: string): string {
  return `'${text.replaceAll("'", "''")}'`;
}

/**
 * Runs `sql` in a plain DuckDB (no lakeswap code) with the embedded lake's catalog file attached read-only as `lake`,
 * as a reader of `lake.duckdb` would.
 */
export async function readCatalogFile(lakeDir: string, sql: string): Promise<unknown[][]> {
  const instance = await DuckDBInstance.create(":memory:");
  const connection = await instance.connect();
  try {
    await connection.run(`ATTACH ${literal(path.join(lakeDir, "lake.duckdb"))} AS lake (READ_ONLY)`);
    return (await connection.runAndReadAll(sql)).getRowsJS();
  } finally {
    connection.closeSync();
    instance.closeSync();
  }
}

/** Runs `sql` in a plain DuckDB, `{table}` standing for `read_parquet` of the table's documented glob (one `*` per partition key, then the files). */
export async function readGlob(lakeDir: string, table: string, keys: number, sql: string): Promise<unknown[][]> {
  const instance = await DuckDBInstance.create(":memory:");
  const connection = await instance.connect();
  try {
    const glob = path.join(lakeDir, table, ...Array.from({ length: keys }, () => "*"), "*.parquet");
    return (await connection.runAndReadAll(sql.replace("{table}", `read_parquet(${literal(glob)}, hive_partitioning = true, hive_types_autocast = false)`))).getRowsJS();
  } finally {
    connection.closeSync();
    instance.closeSync();
  }
}
