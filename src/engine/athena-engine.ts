import { randomUUID } from "node:crypto";
import {
  GetQueryExecutionCommand, GetQueryResultsCommand, StartQueryExecutionCommand, StopQueryExecutionCommand,
  type AthenaClient,
} from "@aws-sdk/client-athena";
import { trinoColumnType } from "../model/column-types.js";
import { BuildError, InvalidInputError, LakeswapError, errorMessage } from "../model/errors.js";
import { faultPoint } from "../shared/faults.js";
import { partitionPath, partitionValue } from "../model/partition.js";
import { withRetry } from "../shared/retry.js";
import { quoteIdentifier, quoteLiteral } from "../model/sql.js";
import { storageName, type TableDefinition } from "../model/table.js";
import type { ObjectStore } from "../store/object-store.js";
import { checkOutputColumns, outputValue, partitionRowsCheck, selectShape } from "./build-checks.js";
import { assertOneSelect, refuseFileReadsWherePossible } from "./sql-guard.js";
import type {
  BuildRequest, BuildResult, Engine, PartitionSnapshot, QueryResult, TableSnapshot,
} from "./engine.js";

/** Where Athena runs, and how long a query may take. */
export interface AthenaEngineOptions {
  readonly workgroup: string;
  readonly database: string;
  /** The data catalog (default AwsDataCatalog). */
  readonly catalog?: string;
  /** s3:// location for query results; unset means the workgroup's own. */
  readonly outputLocation?: string;
  /** Longest a query may run before lakeswap stops it (default 30 minutes). */
  readonly queryTimeoutMs?: number;
  /** The s3:// URI of a lake store key. */
  readonly uriOf: (key: string) => string;
  /** The lake's store, to list what a build wrote. */
  readonly store: ObjectStore;
  /** First pause between status polls (default 250 ms; it grows to 5 s). */
  readonly pollMs?: number;
}

/**
 * The distributed engine: Athena. Derived runs are built with `UNLOAD (SELECT
 * … FROM (WITH <inputs> SELECT …) q) TO 's3://…/run=<id>/' WITH (format =
 * 'PARQUET')`, the partition columns left out, each column cast to its Trino
 * storage type (../model/column-types.ts); queries read the current Glue pointers. Landing is not
 * Athena's: deliveries are landed locally (the Landing port, DuckDB) and uploaded. Queries are polled with backoff, stopped at the
 * timeout or on close (Ctrl-C), and their errors carry Athena's reason.
 */
export class AthenaEngine implements Engine {
  readonly capabilities = { readsRunFiles: false } as const;
  private readonly running = new Set<string>();
  /** `outputColumns` by table and SELECT shape: a probe asked for or answered, which builds of one shape at once share. */
  private readonly columnsByShape = new Map<string, Promise<string[]>>();

  constructor(
    private readonly client: AthenaClient,
    private readonly options: AthenaEngineOptions,
  ) {}

  async build(request: BuildRequest): Promise<BuildResult> {
    const { table, partition } = request;
    // Exactly one SELECT, by DuckDB's parser (sql-guard): the SQL is spliced into an UNLOAD, whose target it must never reach.
    const inner = (await assertOneSelect(request.select, "the SQL")).trim().replace(/;\s*$/, "");
    const outputColumns = await this.outputColumns(request, inner);
    checkOutputColumns(table, partition, outputColumns, false);
    // Partition columns are not written; if the SELECT returns them, every row must belong here. Trino documents
    // no error function, so a row that does not makes the query fail on a cast that names it.
    const where = partitionRowsCheck(table, partition, outputColumns, (message) => `CAST(${message} AS INTEGER) = 0`);
    const projection = table.columns.map((c) => `CAST(${outputValue(c, outputColumns)} AS ${trinoColumnType(c.type)}) AS ${quoteIdentifier(c.name)}`).join(", ");
    // Athena documents `UNLOAD (SELECT …)` only: the input CTEs go inside the SELECT's FROM, never before it.
    const select = `SELECT ${projection} FROM ${this.restricted(request, inner)} AS q${where}`;
    const location = `${this.options.uriOf(request.runPrefix.replace(/\/$/, ""))}/`;
    const compression = table.compression === "zstd" ? "ZSTD" : "SNAPPY";
    try {
      await this.run(`UNLOAD (${select}) TO ${quoteLiteral(location)} WITH (format = 'PARQUET', compression = '${compression}')`);
    } catch (error) {
      if (isAccessDenied(error)) throw error;
      throw new BuildError(`building ${table.name}/${partitionPath(partition)} on Athena failed: ${errorMessage(error)}`, error);
    }
    faultPoint("during-build");
    // No row count: GetQueryRuntimeStatistics' OutputRows counts rows returned to the client, which an UNLOAD has none of.
    // The lake's audit counts the rows from the files' Parquet footers.
    const files = (await this.options.store.list(request.runPrefix)).filter((f) => !f.key.endsWith("/"));
    return { files };
  }

  async query(sql: string, _sources: readonly TableSnapshot[]): Promise<QueryResult> {
    await refuseFileReadsWherePossible(sql, "the query");
    const queryId = await this.run(sql);
    return this.results(queryId);
  }

  async countRows(table: TableDefinition, run: PartitionSnapshot): Promise<number> {
    const where = table.partitionKeys.map((key) => `${quoteIdentifier(key)} = ${quoteLiteral(partitionValue(run.partition, key))}`).join(" AND ") || "true";
    const result = await this.query(`SELECT count(*) FROM ${this.qualified(storageName(table))} WHERE ${where}`, []);
    return Number(result.rows[0]?.[0] ?? 0);
  }

  /** Stops every query this engine still runs (Ctrl-C). */
  async close(): Promise<void> {
    await this.stopRunning();
  }

  /** Stops running queries with StopQueryExecution. */
  async stopRunning(): Promise<void> {
    const ids = [...this.running];
    this.running.clear();
    await Promise.all(ids.map((id) => this.client.send(new StopQueryExecutionCommand({ QueryExecutionId: id })).catch(() => undefined)));
  }

  /**
   * The column names (lowercase, as Athena reports them) of a build's SELECT,
   * from a `LIMIT 0` query. Remembered per table and SELECT text with the
   * partition's values taken out, so a layer's partitions, which differ only
   * in those values, ask Athena once, also those built at once (they wait for
   * the first one's probe). A probe that failed is forgotten: the next build
   * of that shape asks again.
   */
  private outputColumns(request: BuildRequest, inner: string): Promise<string[]> {
    const key = `${request.table.name}\n${selectShape(inner, request.partition)}`;
    const known = this.columnsByShape.get(key);
    if (known) return known;
    const probe = this.probeColumns(request, inner);
    this.columnsByShape.set(key, probe);
    probe.catch(() => this.columnsByShape.delete(key));
    return probe;
  }

  /** The column names of a build's SELECT from a `LIMIT 0` query (`outputColumns`). */
  private async probeColumns(request: BuildRequest, inner: string): Promise<string[]> {
    let queryId: string;
    try {
      queryId = await this.run(`SELECT * FROM ${this.restricted(request, inner)} AS q LIMIT 0`);
    } catch (error) {
      if (isAccessDenied(error)) throw error;
      throw new BuildError(`the SELECT for ${request.table.name}/${partitionPath(request.partition)} failed on Athena: ${errorMessage(error)}`, error);
    }
    const columns = (await this.results(queryId)).columns.map((name) => name.toLowerCase());
    if (columns.length === 0) {
      // Without column metadata nothing can be said about the SELECT's columns; saying it lacks the declared ones would mislead.
      throw new BuildError(
        `Athena returned no column metadata for the SELECT of ${request.table.name}/${partitionPath(request.partition)} (query ${queryId}, a LIMIT 0 probe); ` +
          "its columns cannot be checked, so the build stops. Rerun; if it persists, check the workgroup and the Athena engine version.",
      );
    }
    return columns;
  }

  /**
   * The build's SELECT as a parenthesized subquery. A derived build reads only
   * its declared inputs: each restricted table is shadowed by a CTE over those
   * partitions, nested inside the subquery (`(WITH … SELECT * FROM (<select>) AS i)`),
   * so the statement around it stays a plain SELECT.
   */
  private restricted(request: BuildRequest, inner: string): string {
    const ctes = this.inputCtes(request);
    return ctes === "" ? `(${inner})` : `(${ctes}SELECT * FROM (${inner}) AS i)`;
  }

  /**
   * `WITH <table> AS (SELECT * FROM db.table WHERE <its input partitions>), … ` or "". A table with staged runs (a held
   * sync: `request.staged`) reads those partitions from its scratch table instead, whether the build declares inputs
   * of it or reads it whole (a lookup).
   */
  private inputCtes(request: BuildRequest): string {
    const limits = request.inputPartitions ?? [];
    const staged = request.staged ?? [];
    // A source in a layout of its own (its partition keys changed: lake/operations/relayout.ts) is read from that layout's
    // table: the table's name still reads the layout it replaces while the sync that changes them builds.
    const relaid = request.sources.filter((s) => storageName(s.table) !== s.table.name).map((s) => s.table.name);
    const tables = [...new Set([...limits.map((l) => l.table), ...staged.map((s) => s.table), ...relaid])];
    if (tables.length === 0) return "";
    const ctes = tables.map((table) => {
      const source = request.sources.find((s) => s.table.name === table)?.table;
      if (!source) throw new InvalidInputError(`the inputs of ${request.table.name} name table '${table}', which does not exist`);
      const limit = limits.find((l) => l.table === table);
      const match = limit ? partitionsMatch(limit.partitions) : "true";
      const scratch = staged.find((s) => s.table === table);
      const body = scratch
        ? `SELECT * FROM ${this.qualified(storageName(source))} WHERE (${match}) AND NOT (${partitionsMatch(scratch.partitions)}) ` +
          `UNION ALL SELECT * FROM ${this.qualified(scratch.scratch)} WHERE (${match}) AND (${partitionsMatch(scratch.partitions)})`
        : `SELECT * FROM ${this.qualified(storageName(source))} WHERE ${match}`;
      return `${quoteIdentifier(table)} AS (${body})`;
    });
    return `WITH ${ctes.join(", ")} `;
  }

  private qualified(table: string): string {
    return `${quoteIdentifier(this.options.database)}.${quoteIdentifier(table)}`;
  }

  /** Starts a query and waits for it: backoff polling, a timeout, Athena's reason on failure. */
  private async run(sql: string): Promise<string> {
    // One token for every attempt: a retried start after a lost response must not run the query twice
    // (a second UNLOAD into the same run prefix would fail, a second query would cost twice).
    const token = randomUUID();
    const started = await withRetry(`athena:StartQueryExecution on workgroup ${this.options.workgroup}`, () =>
      this.client.send(
        new StartQueryExecutionCommand({
          ClientRequestToken: token,
          QueryString: sql,
          WorkGroup: this.options.workgroup,
          QueryExecutionContext: { Database: this.options.database, Catalog: this.options.catalog ?? "AwsDataCatalog" },
          ResultConfiguration: this.options.outputLocation ? { OutputLocation: this.options.outputLocation } : undefined,
        }),
      ),
    );
    const id = started.QueryExecutionId;
    if (!id) throw new LakeswapError("STORE_ERROR", "Athena did not return a query execution id");
    this.running.add(id);
    const deadline = Date.now() + (this.options.queryTimeoutMs ?? 30 * 60_000);
    let pause = this.options.pollMs ?? 250;
    try {
      for (;;) {
        const execution = await withRetry(`athena:GetQueryExecution on query ${id}`, () => this.client.send(new GetQueryExecutionCommand({ QueryExecutionId: id })));
        const status = execution.QueryExecution?.Status;
        switch (status?.State) {
          case "SUCCEEDED":
            return id;
          case "FAILED":
            throw new LakeswapError("BUILD_FAILED", `Athena query ${id} failed: ${status.StateChangeReason ?? status.AthenaError?.ErrorMessage ?? "no reason given"}`);
          case "CANCELLED":
            throw new LakeswapError("BUILD_FAILED", `Athena query ${id} was cancelled${status.StateChangeReason ? `: ${status.StateChangeReason}` : ""}`);
          default:
            break;
        }
        if (Date.now() >= deadline) {
          await this.client.send(new StopQueryExecutionCommand({ QueryExecutionId: id })).catch(() => undefined);
          throw new LakeswapError("BUILD_FAILED", `Athena query ${id} ran longer than the timeout (${Math.round((this.options.queryTimeoutMs ?? 0) / 1000)}s) and was stopped`);
        }
        await new Promise((resolve) => setTimeout(resolve, Math.min(pause, Math.max(0, deadline - Date.now()))));
        pause = Math.min(5000, pause * 1.5);
      }
    } finally {
      this.running.delete(id);
    }
  }

  private async results(queryId: string): Promise<QueryResult> {
    let columns: string[] = [];
    let types: string[] = [];
    const rows: unknown[][] = [];
    let token: string | undefined;
    let first = true;
    do {
      const page = await withRetry(`athena:GetQueryResults on query ${queryId}`, () =>
        this.client.send(new GetQueryResultsCommand({ QueryExecutionId: queryId, NextToken: token })),
      );
      if (first) {
        const info = page.ResultSet?.ResultSetMetadata?.ColumnInfo ?? [];
        columns = info.map((c) => c.Name ?? "");
        types = info.map((c) => (c.Type ?? "varchar").toLowerCase());
      }
      const data = page.ResultSet?.Rows ?? [];
      // The first row of the first page repeats the column names.
      for (const [index, row] of data.entries()) {
        if (first && index === 0) continue;
        rows.push((row.Data ?? []).map((cell, i) => convert(cell.VarCharValue, types[i] ?? "varchar")));
      }
      first = false;
      token = page.NextToken;
    } while (token);
    return { columns, rows };
  }
}

/** A WHERE condition that passes the rows of these partitions (paths such as `day=2026-11-01`; "" is the whole of a table without keys). */
function partitionsMatch(partitions: readonly string[]): string {
  if (partitions.length === 0) return "false";
  return partitions
    .map((p) =>
      p === "" ? "true" : `(${p.split("/").map((pair) => {
        const eq = pair.indexOf("=");
        return `${quoteIdentifier(pair.slice(0, eq))} = ${quoteLiteral(pair.slice(eq + 1))}`;
      }).join(" AND ")})`,
    )
    .join(" OR ");
}

/** Refused credentials are the user's to fix, not a build failure: they keep their own error (exit 11). */
function isAccessDenied(error: unknown): boolean {
  return error instanceof LakeswapError && error.code === "ACCESS_DENIED";
}

/**
 * A result cell as `lakeswap query` prints it, exactly as the DuckDB engine does (./duckdb-values.ts): integers
 * (and a DECIMAL without fraction digits) as numbers while exact, else their digits; a DECIMAL with fraction
 * digits as Athena's text ("999.99", never through a double); a non-finite double as its text ("NaN").
 */
function convert(value: string | undefined, type: string): unknown {
  if (value === undefined) return null;
  if (/^decimal/.test(type) && value.includes(".")) return value;
  if (/^(tinyint|smallint|integer|int|bigint|double|real|float|decimal)/.test(type)) {
    const number = Number(value);
    return Number.isFinite(number) && (Number.isSafeInteger(number) || !/^-?\d+$/.test(value)) ? number : value;
  }
  if (type === "boolean") return value === "true";
  return value;
}
