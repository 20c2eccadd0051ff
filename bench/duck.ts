import type { DuckDBConnection, DuckDBInstance } from "@duckdb/node-api";
import { openDuckDb, type SignatureForm } from "../src/duckdb/duckdb-open.js";

/** A DuckDB instance of the benchmark's own (not lakeswap's): to generate inputs and to run the baselines. */
export class BenchDuck {
  private constructor(
    private readonly instance: DuckDBInstance,
    readonly connection: DuckDBConnection,
    /** The signature forms this instance can run: native too where lakeswap's extension is built. */
    readonly signatureForm: SignatureForm,
  ) {}

  /** Opens an in-memory instance as lakeswap's engine does: DuckDB's defaults (one thread per cpu), the signature extension loaded. */
  static async open(): Promise<BenchDuck> {
    const opened = await openDuckDb();
    return new BenchDuck(opened.instance, await opened.instance.connect(), opened.signing.form);
  }

  /** Runs one statement. */
  async run(sql: string): Promise<void> {
    await this.connection.run(sql);
  }

  /** The rows of a query, as plain JS values. */
  async rows(sql: string): Promise<unknown[][]> {
    const reader = await this.connection.runAndReadAll(sql);
    return reader.getRowsJS();
  }

  /** The first value of the first row of a query, as a number. */
  async number(sql: string): Promise<number> {
    return Number((await this.rows(sql))[0]?.[0] ?? Number.NaN);
  }

  close(): void {
    this.connection.closeSync();
    this.instance.closeSync();
  }
}
