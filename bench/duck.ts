import { DuckDBInstance, type DuckDBConnection } from "@duckdb/node-api";

/** A DuckDB instance of the benchmark's own (not lakeswap's): to generate inputs and to run the baselines. */
export class BenchDuck {
  private constructor(
    private readonly instance: DuckDBInstance,
    readonly connection: DuckDBConnection,
  ) {}

  /** Opens an in-memory instance with DuckDB's defaults (one thread per cpu, as lakeswap's engine). */
  static async open(): Promise<BenchDuck> {
    const instance = await DuckDBInstance.create(":memory:");
    return new BenchDuck(instance, await instance.connect());
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
