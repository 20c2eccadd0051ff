import { DuckDBInstance, type DuckDBConnection } from "@duckdb/node-api";
import { quoteLiteral } from "../src/model/sql.js";

/** DuckDB on its own, writing Parquet with the same COPY lakeswap runs, as the baseline. */
export class DirectCopy {
  private constructor(
    private readonly instance: DuckDBInstance,
    private readonly connection: DuckDBConnection,
  ) {}

  /** Opens an in-memory DuckDB instance of its own. */
  static async open(): Promise<DirectCopy> {
    const instance = await DuckDBInstance.create(":memory:");
    return new DirectCopy(instance, await instance.connect());
  }

  /** Runs `COPY (select) TO file (FORMAT PARQUET, COMPRESSION snappy)` and returns the rows written. */
  async copy(select: string, file: string): Promise<number> {
    const reader = await this.connection.runAndReadAll(
      `COPY (${select}) TO ${quoteLiteral(file)} (FORMAT PARQUET, COMPRESSION snappy)`,
    );
    return Number(reader.getRows()[0]?.[0] ?? 0);
  }

  /** The DuckDB library version, e.g. `v1.5.0`. */
  async version(): Promise<string> {
    const reader = await this.connection.runAndReadAll("SELECT version()");
    return String(reader.getRows()[0]?.[0] ?? "unknown");
  }

  /** Closes the connection and the instance. */
  close(): void {
    this.connection.closeSync();
    this.instance.closeSync();
  }
}
