import type { DuckDBConnection } from "@duckdb/node-api";
import { InvalidInputError } from "../../model/errors.js";
import { printable, quoteFilePath } from "../../model/sql.js";
import type { LandRequest } from "../landing.js";
import { fileList, sqlFileList, sqlList, type SourceRows } from "./landing-sql.js";
import { fieldKey, fieldsHint, namedFields } from "./field-names.js";

/**
 * Parquet: the declared columns by name (or by the name `source.fields` gives; case-insensitively), with their types in
 * the file, and each row's number in its file.
 */
export async function readParquet(connection: DuckDBConnection, request: LandRequest): Promise<SourceRows> {
  // The files to read (each path that one file), and their paths as values, to number the file a row came from.
  const [read, files] = [sqlFileList(request.files), sqlList(request.files)];
  const described = (await connection.runAndReadAll(`DESCRIBE SELECT * FROM read_parquet(${read}, hive_partitioning = false)`)).getRowsJS().map(([name, type]) => [String(name), String(type)] as const);
  // Each column by its name in the files (source.fields), else its own.
  const found = request.columns.map((c) => described.find(([name]) => name.toLowerCase() === fieldKey(c)));
  await refuseCaseTwins(connection, request);
  // A column added to the table in place may be absent from a delivery exported before: NULL there.
  const missing = request.columns.filter((c, i) => found[i] === undefined && !c.added);
  if (missing.length > 0) {
    const has = described.map(([n]) => n);
    const hint = fieldsHint(missing, has);
    throw new InvalidInputError(
      `${fileList(request.files)}: the Parquet source lacks declared column${missing.length > 1 ? "s" : ""} ${namedFields(missing)} (it has ${printable(has.join(", "), 300)})${hint ? `.${hint}` : ""}`,
    );
  }
  const values = found.map((f, i) => `${f ? quoteParquetName(f[0]) : "NULL::VARCHAR"} AS __s${i}`).join(", ");
  const types = found.map((f) => (f === undefined ? "VARCHAR" : f[1] === "TIMESTAMP WITH TIME ZONE" ? "TIMESTAMPTZ" : f[1]));
  // The reader's own file name column is named so that it cannot collide with a source column, and is kept as the file's
  // place in the list (the reader gives it once per chunk of rows, so this costs nothing per row); its row number column
  // cannot be renamed, so a file with a column of that name is numbered by reading it alone, in order.
  if (!described.some(([name]) => name.toLowerCase() === "file_row_number")) {
    return {
      select:
        `SELECT list_position(${files}, __lakeswap_file)::INTEGER AS __file, file_row_number + 1 AS __line, NULL::VARCHAR AS __structural, ${values} ` +
        `FROM read_parquet(${read}, filename = '__lakeswap_file', file_row_number = true, hive_partitioning = false)`,
      types,
    };
  }
  const perFile = request.files.map(
    (file, index) => `SELECT ${index + 1} AS __file, row_number() OVER () AS __line, NULL::VARCHAR AS __structural, ${values} FROM read_parquet(${quoteFilePath(file)}, hive_partitioning = false)`,
  );
  return { select: perFile.join(" UNION ALL "), types };
}

/**
 * Refuses a Parquet file with two top-level columns whose names differ only in case where one is a declared column:
 * both are that column, as a CSV header naming it twice (DuckDB's reader would rename the second, `ID_1`, and read
 * the first alone). The names are the files' own, from their schemas.
 */
async function refuseCaseTwins(connection: DuckDBConnection, request: LandRequest): Promise<void> {
  const schema = (await connection.runAndReadAll(`SELECT file_name, name, num_children FROM parquet_schema(${sqlFileList(request.files)})`)).getRowsJS();
  const declared = new Set(request.columns.map(fieldKey));
  for (const file of request.files) {
    const elements = schema.filter(([name]) => name === file).map(([, name, children]) => ({ name: String(name), children: Number(children ?? 0) }));
    // The schema is a tree in pre-order: the root, then each top-level column followed by its nested fields.
    const topLevel: string[] = [];
    let skip = 0;
    for (const element of elements.slice(1)) {
      if (skip > 0) skip += element.children - 1;
      else {
        topLevel.push(element.name);
        skip = element.children;
      }
    }
    const twins = [...declared]
      .map((column) => topLevel.filter((name) => name.toLowerCase() === column))
      .filter((named) => named.length > 1);
    if (twins.length > 0) {
      throw new InvalidInputError(
        `${file}: the Parquet file has columns ${twins.map((named) => named.join(" and ")).join(", ")}, which name the same column (case does not matter): rename or remove one`,
      );
    }
  }
}

function quoteParquetName(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}
