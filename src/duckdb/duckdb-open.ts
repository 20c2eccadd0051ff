import { createHash } from "node:crypto";
import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import { totalmem } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { DuckDBConnection, DuckDBInstance } from "@duckdb/node-api";
import { duckdb } from "./duckdb-module.js";
import { CLOCK_SETTINGS, setClock } from "./session-clock.js";
import { freshProcessFolder } from "../shared/process-folders.js";
import { InvalidInputError, errorMessage } from "../model/errors.js";
import { rowItems, rowLanes, type SignedColumn } from "../model/signature.js";
import { quoteLiteral } from "../model/sql.js";
import type { Signing } from "../model/signature.js";

/** The form of the signature query: with lakeswap's extension (native/lakeswap_signature.c), or plain SQL. */
export type SignatureForm = Signing["form"];

/** A DuckDB instance, and how it computes signatures. */
export interface OpenedDuckDb {
  readonly instance: DuckDBInstance;
  readonly signing: Signing;
  /** The folder of the instance's database file and spill files, when it was opened with one (`spill`); `close()` removes it. */
  readonly spillDirectory?: string;
  /**
   * With `spill`: the in-memory database attached beside the database file (MEMORY_CATALOG), for what lands
   * well within the memory limit; it spills to the same folder past the limit.
   */
  readonly memoryCatalog?: string;
  /** Closes the instance and removes its folder. */
  close(): Promise<void>;
}

/** Where `npm ci` / `npm install` put the extension (scripts/build-native.mjs); the same path from src/ and dist/. */
export const NATIVE_EXTENSION_PATH = fileURLToPath(new URL("../../build/native/lakeswap_signature.duckdb_extension", import.meta.url));

/** lakeswap's own folder (where its package.json is), the same from src/ and dist/. */
const PACKAGE_ROOT = fileURLToPath(new URL("../../", import.meta.url)).replace(/\/$/, "");

/** The environment variable that sets the landing instance's memory limit (a DuckDB size: `2GB`, `512MB`). */
const MEMORY_LIMIT_VARIABLE = "LAKESWAP_MEMORY_LIMIT";

/**
 * The in-memory database of the landing instance (attached as this catalog). A table made there costs no write
 * to the database file and its log, only memory: two to three times less than the same table in the file.
 */
const MEMORY_CATALOG = "lakeswap_memory";

/** The prefix of the landing instance's folders in the machine's temporary folder; the owner's pid follows. */
const SPILL_PREFIX = "lakeswap-landing-";

/**
 * The landing instance's memory limit: `LAKESWAP_MEMORY_LIMIT` when set, else
 * 1 GiB, or a quarter of the machine's memory (or of the container's limit)
 * where that is less. What does not fit stays in the instance's folder on disk.
 */
function landingMemoryLimit(): string {
  const set = process.env[MEMORY_LIMIT_VARIABLE]?.trim();
  if (set) return set;
  const constrained = process.constrainedMemory?.() ?? 0;
  const memory = constrained > 0 && constrained < totalmem() ? constrained : totalmem();
  return `${Math.max(128, Math.min(1024, Math.floor(memory / 4 / 1024 ** 2)))}MiB`;
}

/**
 * `message` with DuckDB's out-of-memory error said in lakeswap's terms, or undefined when it holds none. DuckDB's own
 * advice names settings (`SET memory_limit`, `SET threads`) that a user of lakeswap cannot run; what they can set is
 * LAKESWAP_MEMORY_LIMIT.
 */
export function outOfMemoryMessage(message: string): string | undefined {
  const at = message.indexOf("Out of Memory Error: ");
  if (at < 0) return undefined;
  const what = message.slice(at + "Out of Memory Error: ".length).split("\n", 1)[0]!.trim();
  const set = process.env[MEMORY_LIMIT_VARIABLE]?.trim();
  const limit = set ? `${MEMORY_LIMIT_VARIABLE}=${set}` : `${MEMORY_LIMIT_VARIABLE} unset: ${landingMemoryLimit()}, a quarter of this machine's memory, at most 1 GiB`;
  return `${message.slice(0, at)}DuckDB ran out of memory (${what}); lakeswap's landing works within ${limit}: raise ${MEMORY_LIMIT_VARIABLE} (e.g. ${MEMORY_LIMIT_VARIABLE}=4GB), or run where there is more memory`;
}

/**
 * Opens a DuckDB instance with lakeswap's signature extension loaded,
 * when it is built, not switched off, and computes a set of known rows exactly as
 * the reference implementation does. Otherwise a plain instance: signatures then
 * use the SQL form. DuckDB loads the extension only with unsigned extensions
 * allowed, so only an instance that did load it keeps them allowed.
 *
 * In memory; or with `spill` (the instance that lands deliveries), with its
 * memory limited (`landingMemoryLimit()`) and its tables and spill files in a
 * fresh folder of its own in the machine's temporary folder (`TMPDIR`), so
 * that a delivery larger than memory lands; `close()` removes the folder, and
 * folders left by a killed process are removed here.
 */
export async function openDuckDb(
  options: { readonly native?: boolean; readonly extensionPath?: string; readonly spill?: boolean } = {},
): Promise<OpenedDuckDb> {
  const extension = options.extensionPath ?? NATIVE_EXTENSION_PATH;
  const spillDirectory = options.spill ? await freshProcessFolder(SPILL_PREFIX) : undefined;
  const opened = (instance: DuckDBInstance, signing: Signing): OpenedDuckDb => ({
    instance,
    signing,
    ...(spillDirectory ? { spillDirectory, memoryCatalog: MEMORY_CATALOG } : {}),
    close: async () => {
      instance.closeSync();
      if (spillDirectory) await rm(spillDirectory, { recursive: true, force: true });
    },
  });
  const create = async (config: Record<string, string> = {}): Promise<DuckDBInstance> => {
    const { DuckDBInstance } = await duckdb();
    // With `spill`, a database file rather than memory: DuckDB writes a big table to it compressed as it is made, keeps
    // in memory only the blocks a query reads, and drops them again for free (an in-memory table larger than the limit
    // would be written to the spill files uncompressed, and rewritten after every scan). Operators that outgrow the limit
    // (sorts, joins, aggregates) spill to the folder's `spill/`, which DuckDB makes when it first needs it. What lands well
    // within the limit goes to the in-memory database attached beside it instead (MEMORY_CATALOG).
    const instance = spillDirectory
      ? await DuckDBInstance.create(path.join(spillDirectory, "landing.duckdb"), { ...config, temp_directory: path.join(spillDirectory, "spill") })
      : await DuckDBInstance.create(":memory:", config);
    const connection = await instance.connect();
    try {
      await setClock(connection, "GLOBAL");
      if (spillDirectory) {
        const limit = landingMemoryLimit();
        try {
          await connection.run(`SET memory_limit = ${quoteLiteral(limit)}`);
        } catch (error) {
          throw new InvalidInputError(`${MEMORY_LIMIT_VARIABLE}='${limit}' is not a memory size DuckDB takes (${errorMessage(error)}): write it like 2GB or 512MB, or unset it for the default`);
        }
        await connection.run(`ATTACH ':memory:' AS ${MEMORY_CATALOG}`);
      }
    } catch (error) {
      instance.closeSync();
      if (spillDirectory) await rm(spillDirectory, { recursive: true, force: true });
      throw error;
    } finally {
      connection.closeSync();
    }
    return instance;
  };
  const plain = async (reason: string): Promise<OpenedDuckDb> => opened(await create(), { form: "sql", reason });
  if (options.native === false) return plain("the native form was not asked for");
  const absent = nativeExtensionAbsent(extension);
  if (absent !== undefined) return plain(absent);
  const instance = await create({ allow_unsigned_extensions: "true" });
  let failure: string | undefined;
  const connection = await instance.connect();
  try {
    await connection.run(`LOAD ${quoteLiteral(extension)}`);
    failure = await checkedOnce(extension, () => checkNativeLanes(async (sql) => (await connection.runAndReadAll(sql)).getRowsJS()));
  } catch (error) {
    failure = `the native extension did not load: ${error instanceof Error ? error.message : String(error)}`;
  } finally {
    connection.closeSync();
  }
  if (failure === undefined) return opened(instance, { form: "native" });
  instance.closeSync();
  return plain(failure);
}

/**
 * `check`'s verdict on the extension at `extension`, kept beside it once it passed (`<extension>.checked`, keyed by the
 * extension's digest and DuckDB's version): a build of the extension is checked by the first process that loads it
 * into that DuckDB, not by every process (the check's two queries cost 15-30 ms of each command that lands). Where
 * the folder is read-only, every process checks.
 */
async function checkedOnce(extension: string, check: () => Promise<string | undefined>): Promise<string | undefined> {
  const record = `${extension}.checked`;
  const key = `${createHash("sha256").update(readFileSync(extension)).digest("hex")} duckdb ${(await duckdb()).version()}\n`;
  try {
    if (readFileSync(record, "utf8") === key) return undefined;
  } catch {
    // Not checked yet here.
  }
  const failure = await check();
  if (failure !== undefined) return failure;
  try {
    const temporary = `${record}.${process.pid}`;
    writeFileSync(temporary, key);
    renameSync(temporary, record);
  } catch {
    // A read-only install checks in every process.
  }
  return undefined;
}

/** Why the native extension at `extension` is not to be loaded (LAKESWAP_NATIVE=off, or not built), else undefined. */
function nativeExtensionAbsent(extension: string): string | undefined {
  // The environment switch: LAKESWAP_NATIVE=off keeps every signature in the SQL form, and kernel locks in flock(1).
  if (process.env.LAKESWAP_NATIVE === "off") return "LAKESWAP_NATIVE=off";
  // Install scripts that did not run (npm ci --ignore-scripts, pnpm) leave no extension: say how to build it.
  if (!existsSync(extension)) {
    return `the native extension is not built (no ${extension}): build it with npm run build:native in ${PACKAGE_ROOT}, which needs a C compiler (cc, or CC)`;
  }
  return undefined;
}

/**
 * The process's own small DuckDB: one thread, in memory, no file reachable through SQL and its configuration locked,
 * with lakeswap's extension loaded where it is there. It parses users' SQL (../engine/sql-guard.ts: only parsed,
 * never run) and, through `native`, calls the extension's functions other than signatures (the kernel locks:
 * ../store/kernel-lock.ts), so that a command opens one instance for both rather than two (each costs 15-35 ms).
 */
export interface ProcessDuckDb {
  readonly instance: DuckDBInstance;
  /** A connection with the extension loaded; or why there is none (as `openDuckDb` says). */
  readonly native: DuckDBConnection | { readonly unavailable: string };
}

let processWide: Promise<ProcessDuckDb> | undefined;

/** The process's own DuckDB (see ProcessDuckDb), opened on first use; it stays open for the life of the process. */
export function processDuckDb(): Promise<ProcessDuckDb> {
  processWide ??= openProcessDuckDb();
  return processWide;
}

async function openProcessDuckDb(): Promise<ProcessDuckDb> {
  const { DuckDBInstance } = await duckdb();
  const absent = nativeExtensionAbsent(NATIVE_EXTENSION_PATH);
  let instance = await DuckDBInstance.create(":memory:", { threads: "1", ...(absent === undefined ? { allow_unsigned_extensions: "true" } : {}) });
  let native: ProcessDuckDb["native"] = { unavailable: absent ?? "" };
  if (absent === undefined) {
    const connection = await instance.connect();
    try {
      await connection.run(`LOAD ${quoteLiteral(NATIVE_EXTENSION_PATH)}`);
      native = connection;
    } catch (error) {
      connection.closeSync();
      instance.closeSync();
      instance = await DuckDBInstance.create(":memory:", { threads: "1" });
      native = { unavailable: `the native extension did not load: ${errorMessage(error)}` };
    }
  }
  // The extension opens its lock files itself (open(2)), not through DuckDB: they need no file access from SQL.
  const connection = await instance.connect();
  try {
    for (const setting of ["autoinstall_known_extensions = false", "autoload_known_extensions = false", "enable_external_access = false", "lock_configuration = true"]) {
      await connection.run(`SET ${setting}`);
    }
  } finally {
    connection.closeSync();
  }
  return { instance, native };
}

/** The DuckDB instance that runs users' SQL, and how to close it (and remove its spill folder). */
export interface RestrictedDuckDb {
  readonly instance: DuckDBInstance;
  close(): Promise<void>;
}

/** The prefix of the folders where user-SQL instances spill; the owner's pid follows. */
const USER_SPILL_PREFIX = "lakeswap-usersql-";

/**
 * Opens the in-memory DuckDB instance that runs users' SQL (layer SQL, `--sql`, `lakeswap query`):
 * it reads and writes only under `allowedDirectories` (the folders of the lake tables the SQL may
 * read or write) and its own spill folder, loads no extension, and its configuration is locked, so a
 * SELECT cannot reach another file, the network, or change that (DuckDB's `allowed_directories`,
 * `enable_external_access = false`, `lock_configuration = true`). DuckDB also allows its temporary
 * directory, which defaults to `.tmp` in the working folder: it is set to a fresh folder of the
 * instance's own instead, so nothing of the working folder is readable. With no directory (AWS mode,
 * where Athena runs users' SQL) it reaches no file but its spill folder.
 */
export async function openRestrictedDuckDb(allowedDirectories: readonly string[]): Promise<RestrictedDuckDb> {
  const spill = await freshProcessFolder(USER_SPILL_PREFIX);
  let instance: DuckDBInstance;
  try {
    instance = await (await duckdb()).DuckDBInstance.create(":memory:", { temp_directory: spill });
  } catch (error) {
    await rm(spill, { recursive: true, force: true });
    throw error;
  }
  const close = async () => {
    instance.closeSync();
    await rm(spill, { recursive: true, force: true });
  };
  const connection = await instance.connect();
  try {
    // Directories end in '/', so that '/lake/t' does not also allow '/lake/t2'.
    const list = allowedDirectories.map((dir) => quoteLiteral(dir.endsWith("/") ? dir : `${dir}/`)).join(", ");
    for (const setting of [
      `allowed_directories = [${list}]`,
      // Users' SQL runs in UTC and the Gregorian calendar, as on Athena, whatever the machine's zone and locale.
      ...CLOCK_SETTINGS.map((setting) => `GLOBAL ${setting}`),
      // A run's files are never rewritten (every build writes a fresh run folder): their footers, read when a view is
      // made, when a build's SELECT is bound and when it runs, are read once.
      "parquet_metadata_cache = true",
      "autoinstall_known_extensions = false",
      "autoload_known_extensions = false",
      "enable_external_access = false",
      "lock_configuration = true",
    ]) {
      await connection.run(`SET ${setting}`);
    }
  } catch (error) {
    connection.closeSync();
    await close();
    throw error;
  }
  connection.closeSync();
  return { instance, close };
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
  // DOUBLE and FLOAT: the double's bits (negative, -0 as 0, subnormal, largest, ±infinity), NaN as NULL.
  { type: "DOUBLE", literal: "CAST('-0.1' AS DOUBLE)", canonical: "-0.10000000000000001" },
  { type: "DOUBLE", literal: "CAST('-0.0' AS DOUBLE)", canonical: "0" },
  { type: "DOUBLE", literal: "CAST('5e-324' AS DOUBLE)", canonical: "4.9406564584124654e-324" },
  { type: "DOUBLE", literal: "CAST('2.2250738585072009e-308' AS DOUBLE)", canonical: "2.2250738585072009e-308" },
  { type: "DOUBLE", literal: "CAST('1.7976931348623157e308' AS DOUBLE)", canonical: "1.7976931348623157e+308" },
  { type: "DOUBLE", literal: "CAST('-inf' AS DOUBLE)", canonical: "-inf" },
  { type: "DOUBLE", literal: "CAST('inf' AS DOUBLE)", canonical: "inf" },
  { type: "DOUBLE", literal: "CAST('nan' AS DOUBLE)", canonical: null },
  { type: "DOUBLE", literal: "CAST(NULL AS DOUBLE)", canonical: null },
  { type: "FLOAT", literal: "CAST(256.666656494140625 AS FLOAT)", canonical: "256.66665649414062" },
  { type: "FLOAT", literal: "CAST('-1.4e-45' AS FLOAT)", canonical: "-1.4012984643248171e-45" },
  { type: "FLOAT", literal: "CAST('-0.0' AS FLOAT)", canonical: "0" },
  { type: "FLOAT", literal: "CAST('-inf' AS FLOAT)", canonical: "-inf" },
  { type: "FLOAT", literal: "CAST('nan' AS FLOAT)", canonical: null },
];

/**
 * Runs the extension over the check row (a second time with its fields reversed)
 * and compares the lanes with src/model/signature.ts. Returns what differs, or
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
