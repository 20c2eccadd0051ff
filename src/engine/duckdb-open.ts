import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { DuckDBInstance } from "@duckdb/node-api";
import { rowItems, rowLanes, type SignedColumn } from "../core/signature.js";
import { quoteLiteral } from "../core/sql.js";
import type { Signing } from "./engine.js";

/** The form of the signature query: with lakeswap's extension (native/lakeswap_signature.c), or plain SQL. */
export type SignatureForm = Signing["form"];

/** A DuckDB instance, and how it computes signatures. */
export interface OpenedDuckDb {
  readonly instance: DuckDBInstance;
  readonly signing: Signing;
}

/** Where `npm ci` / `npm install` put the extension (scripts/build-native.mjs); the same path from src/ and dist/. */
export const NATIVE_EXTENSION_PATH = fileURLToPath(new URL("../../build/native/lakeswap_signature.duckdb_extension", import.meta.url));

/**
 * Opens an in-memory DuckDB instance with lakeswap's signature extension loaded,
 * when it is built, not switched off, and computes a set of known rows exactly as
 * the reference implementation does. Otherwise a plain instance: signatures then
 * use the SQL form. DuckDB loads the extension only with unsigned extensions
 * allowed, so only an instance that did load it keeps them allowed.
 */
export async function openDuckDb(options: { readonly native?: boolean; readonly extensionPath?: string } = {}): Promise<OpenedDuckDb> {
  const extension = options.extensionPath ?? NATIVE_EXTENSION_PATH;
  const plain = async (reason: string): Promise<OpenedDuckDb> => ({ instance: await DuckDBInstance.create(":memory:"), signing: { form: "sql", reason } });
  if (options.native === false) return plain("the native form was not asked for");
  // The environment switch: LAKESWAP_NATIVE=off keeps every signature in the SQL form.
  if (process.env.LAKESWAP_NATIVE === "off") return plain("LAKESWAP_NATIVE=off");
  if (!existsSync(extension)) return plain(`the native extension is not built (${extension}; npm run build:native)`);
  const instance = await DuckDBInstance.create(":memory:", { allow_unsigned_extensions: "true" });
  let failure: string | undefined;
  const connection = await instance.connect();
  try {
    await connection.run(`LOAD ${quoteLiteral(extension)}`);
    failure = await checkNativeLanes(async (sql) => (await connection.runAndReadAll(sql)).getRowsJS());
  } catch (error) {
    failure = `the native extension did not load: ${error instanceof Error ? error.message : String(error)}`;
  } finally {
    connection.closeSync();
  }
  if (failure === undefined) return { instance, signing: { form: "native" } };
  instance.closeSync();
  return plain(failure);
}

/**
 * Opens the in-memory DuckDB instance that runs users' SQL (layer SQL, `--sql`, `lakeswap query`):
 * it reads and writes only under `allowedDirectories` (the lake folder), loads no extension, and its
 * configuration is locked, so a SELECT cannot reach another file, the network, or change that
 * (DuckDB's `allowed_directories`, `enable_external_access = false`, `lock_configuration = true`).
 * With no directory (AWS mode, where Athena runs users' SQL) it reaches no file at all.
 */
export async function openRestrictedDuckDb(allowedDirectories: readonly string[]): Promise<DuckDBInstance> {
  const instance = await DuckDBInstance.create(":memory:");
  const connection = await instance.connect();
  try {
    // Directories end in '/', so that '/lake' does not also allow '/lake-other'.
    const list = allowedDirectories.map((dir) => quoteLiteral(dir.endsWith("/") ? dir : `${dir}/`)).join(", ");
    for (const setting of [
      `allowed_directories = [${list}]`,
      "autoinstall_known_extensions = false",
      "autoload_known_extensions = false",
      "enable_external_access = false",
      "lock_configuration = true",
    ]) {
      await connection.run(`SET ${setting}`);
    }
  } catch (error) {
    connection.closeSync();
    instance.closeSync();
    throw error;
  }
  connection.closeSync();
  return instance;
}

/** One field of the check row: its declared type, a SQL literal of it, and its canonical text. */
interface CheckField {
  readonly type: string;
  readonly literal: string;
  readonly canonical: string | null;
}

/** A row with every physical type the extension reads, NULLs, short and long texts, extremes and negatives. */
const CHECK_FIELDS: readonly CheckField[] = [
  { type: "TINYINT", literal: "CAST(-128 AS TINYINT)", canonical: "-128" },
  { type: "SMALLINT", literal: "CAST(-32768 AS SMALLINT)", canonical: "-32768" },
  { type: "INTEGER", literal: "CAST(-2147483648 AS INTEGER)", canonical: "-2147483648" },
  { type: "BIGINT", literal: "CAST(-9223372036854775808 AS BIGINT)", canonical: "-9223372036854775808" },
  { type: "BIGINT", literal: "CAST(9007199254740993 AS BIGINT)", canonical: "9007199254740993" },
  { type: "UTINYINT", literal: "CAST(255 AS UTINYINT)", canonical: "255" },
  { type: "USMALLINT", literal: "CAST(65535 AS USMALLINT)", canonical: "65535" },
  { type: "UINTEGER", literal: "CAST(4294967295 AS UINTEGER)", canonical: "4294967295" },
  { type: "BOOLEAN", literal: "true", canonical: "true" },
  { type: "DATE", literal: "DATE '1969-12-31'", canonical: "1969-12-31" },
  { type: "TIME", literal: "TIME '23:59:59.999999'", canonical: "23:59:59.999999" },
  { type: "TIMESTAMP", literal: "TIMESTAMP '1900-03-01 00:00:00.000001'", canonical: "1900-03-01T00:00:00.000001" },
  { type: "TIMESTAMPTZ", literal: "TIMESTAMPTZ '2026-11-30 01:02:03.456789+00'", canonical: "2026-11-30T01:02:03.456789Z" },
  { type: "DECIMAL(4,2)", literal: "CAST(-12.34 AS DECIMAL(4,2))", canonical: "-12.34" },
  { type: "DECIMAL(9,3)", literal: "CAST(123456.789 AS DECIMAL(9,3))", canonical: "123456.789" },
  { type: "DECIMAL(18,6)", literal: "CAST(-123456789012.345678 AS DECIMAL(18,6))", canonical: "-123456789012.345678" },
  { type: "VARCHAR", literal: "'completed'", canonical: "completed" },
  { type: "VARCHAR", literal: "'completed'", canonical: "completed" },
  { type: "VARCHAR", literal: "'a text longer than twelve bytes, with ü'", canonical: "a text longer than twelve bytes, with ü" },
  { type: "VARCHAR", literal: "''", canonical: "" },
  { type: "VARCHAR", literal: "CAST(NULL AS VARCHAR)", canonical: null },
  { type: "BIGINT", literal: "CAST(NULL AS BIGINT)", canonical: null },
];

/**
 * Runs the extension over the check row (a second time with its fields reversed)
 * and compares the lanes with src/core/signature.ts. Returns what differs, or
 * undefined when they agree.
 */
export async function checkNativeLanes(query: (sql: string) => Promise<unknown[][]>): Promise<string | undefined> {
  for (const row of [CHECK_FIELDS, [...CHECK_FIELDS].reverse()]) {
    const columns: SignedColumn[] = row.map((field, i) => ({ name: `f${i}`, type: field.type }));
    const expected = rowLanes(rowItems(columns, row.map((field) => field.canonical)));
    const rows = await query(`SELECT s.upper, s.lower FROM (SELECT lakeswap_signature(row(${row.map((field) => field.literal).join(", ")})) AS s)`);
    const got = (rows[0] ?? []).map((value) => BigInt.asUintN(64, BigInt(String(value))));
    if (got[0] !== expected[0] || got[1] !== expected[1]) {
      return `the native extension's lanes (${got.join(", ")}) differ from the reference (${expected.join(", ")})`;
    }
  }
  return undefined;
}
