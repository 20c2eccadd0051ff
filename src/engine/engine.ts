import type { TableDefinition } from "../model/table.js";
import type { BuildRequest, BuildResult, PartitionSnapshot, TableSnapshot } from "../model/build.js";

export type { BuildRequest, BuildResult, PartitionSnapshot, StagedInput, TableSnapshot } from "../model/build.js";

/** Rows of a query, with JSON-safe values. */
export interface QueryResult {
  readonly columns: readonly string[];
  readonly rows: readonly (readonly unknown[])[];
}

/**
 * The engine port: builds runs from users' SQL and answers queries over the
 * current pointers (DuckDB embedded, Athena on AWS). It never moves a pointer;
 * that is the core's job. Landing a delivery is the Landing port's.
 */
export interface Engine {
  readonly capabilities: EngineCapabilities;
  build(request: BuildRequest): Promise<BuildResult>;
  query(sql: string, sources: readonly TableSnapshot[]): Promise<QueryResult>;
  /** Rows in one run of a partition (Parquet metadata is enough where the engine can read the files). */
  countRows(table: TableDefinition, run: PartitionSnapshot): Promise<number>;
  /**
   * A hint, which never fails: builds whose SQL reads these tables (each list names the tables one build reads and the
   * table it writes; an empty one, expressions over no table) are likely to follow soon. The engine may get ready for
   * them meanwhile (DuckDB opens the instances they run in while the sync writes the layer above).
   */
  prepare?(builds: readonly (readonly string[])[]): void;
  /** A hint, which never fails: these SELECTs are about to be built (the engine may check them while the batch gets ready). */
  prepareSelects?(selects: readonly string[]): void;
  close(): Promise<void>;
}

/** What an engine can do. */
export interface EngineCapabilities {
  /** Reads lake tables from their run files (DuckDB), rather than through the catalog (Athena reads Glue). */
  readonly readsRunFiles: boolean;
}

