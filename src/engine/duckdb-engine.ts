import { InvalidInputError } from "../model/errors.js";
import { quoteFilePath } from "../model/sql.js";
import { storageName, type TableDefinition } from "../model/table.js";
import type { ObjectStore } from "../store/object-store.js";
import { duckdb } from "../duckdb/duckdb-module.js";
import { exactValueConverter } from "../duckdb/duckdb-values.js";
import { cleanDuckDbMessage } from "../duckdb/duckdb-text.js";
import { SharedDuckDb } from "../duckdb/shared-duckdb.js";
import { fileAccessFor, type FileAccess } from "./duckdb-file-access.js";
import { buildRun, registerViews } from "./duckdb-run.js";
import { assertOneSelect, checkAhead } from "./sql-guard.js";
import type { BuildRequest, BuildResult, Engine, PartitionSnapshot, QueryResult, TableSnapshot } from "./engine.js";

/**
 * The embedded engine: DuckDB in process. A run is one `COPY (SELECT …) TO …
 * (FORMAT PARQUET)`; lake tables are views over the files of their current runs,
 * with partition columns taken from the pointer, as Hive does. Users' SQL runs
 * in an instance that reaches only the folders of the tables it names.
 */
export class DuckDbEngine implements Engine {
  readonly capabilities = { readsRunFiles: true } as const;
  private readonly duckdb: SharedDuckDb;
  private readonly files: FileAccess;

  /**
   * `options.duckdb`: the DuckDB shared with the lake's landing (../landing/duckdb/duckdb-landing.ts); by default one
   * of its own. With a store without local paths, a run is written to a temporary folder and uploaded, and the lake's
   * tables are not readable here (Athena's to read).
   */
  constructor(store: ObjectStore, options: { readonly duckdb?: SharedDuckDb } = {}) {
    this.duckdb = options.duckdb ?? new SharedDuckDb();
    this.files = fileAccessFor(store);
  }

  /** Builds from users' SQL, in the instance that reaches only the build's input tables and its own table. */
  async build(request: BuildRequest): Promise<BuildResult> {
    // Their folders: a table whose partition keys changed keeps its files under its layout's name.
    const tables = [...request.sources.map((s) => storageName(s.table)), storageName(request.table)];
    return this.duckdb.withConnection((connection) => buildRun(connection, request, this.files), { folders: this.files.tableFolders(tables) });
  }

  /**
   * Opens, in the background, the instance that builds over these tables will run in (see Engine.prepare): one for all
   * of them, reaching the folders of every table they read or write, rather than one per build (each costs 20-40 ms of
   * CPU to start). Each build's SQL still reads only its declared inputs (../pipeline/layers.ts checks that before
   * anything is built) and names no file (./sql-guard.ts); the folders fence off the rest of the machine.
   */
  prepare(builds: readonly (readonly string[])[]): void {
    if (builds.length > 0) this.duckdb.prepare({ folders: this.files.tableFolders(builds.flat()) });
  }

  /** Starts the parser's checks of these SELECTs (sql-guard's checkAhead), so a build finds its verdict ready. */
  prepareSelects(selects: readonly string[]): void {
    for (const select of selects) checkAhead(select);
  }

  /** Answers a SELECT over the given tables' current runs, values JSON-safe. */
  async query(sql: string, sources: readonly TableSnapshot[]): Promise<QueryResult> {
    const select = await assertOneSelect(sql, "the query");
    return this.duckdb.withConnection(async (connection) => {
      await registerViews(connection, sources, this.files);
      try {
        const reader = await connection.runAndReadAll(select);
        return { columns: reader.columnNames(), rows: reader.convertRows(exactValueConverter(await duckdb())) };
      } catch (error) {
        throw new InvalidInputError(`query failed: ${queryFailure(cleanDuckDbMessage(error))}`);
      }
    }, { folders: this.files.tableFolders(sources.map((s) => storageName(s.table))) });
  }

  /** Rows in one run, read by DuckDB from its files (a local lake's only). */
  async countRows(_table: TableDefinition, run: PartitionSnapshot): Promise<number> {
    if (run.files.length === 0) return 0;
    const pathOf = this.files.pathInPlace;
    if (!pathOf) throw new InvalidInputError("the DuckDB engine counts rows of a local lake only; in AWS mode Athena counts them");
    const list = run.files.map((key) => quoteFilePath(pathOf(key))).join(", ");
    return this.duckdb.withConnection(async (connection) => {
      const reader = await connection.runAndReadAll(`SELECT count(*) FROM read_parquet([${list}], hive_partitioning = false)`);
      return Number(reader.getRows()[0]?.[0] ?? 0);
    });
  }

  /** Stops queries in flight and closes the DuckDB (shared with the landing: closing it twice is harmless). */
  async close(): Promise<void> {
    await this.duckdb.close();
  }
}

/**
 * What a failed query's message says: DuckDB's own, except for a table it does not know, where it suggests one of its
 * system tables (`Did you mean "pg_prepared_statements"?`) for a name that is simply not one of the lake's tables.
 */
function queryFailure(message: string): string {
  const missing = /^Catalog Error: Table with name (\S+) does not exist!/.exec(message);
  if (!missing) return message;
  return `table '${missing[1]}' is not in this lake (lakeswap tables lists its tables; a pipeline's raw table is named <dataset>_raw unless its table: says otherwise)`;
}
