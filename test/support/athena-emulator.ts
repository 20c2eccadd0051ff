/**
 * An Athena emulator for tests: an HTTP server speaking AWS JSON 1.1
 * (`X-Amz-Target: AmazonAthena.<Operation>`) that the real
 * `@aws-sdk/client-athena` talks to. Queries run asynchronously in DuckDB,
 * the way Athena runs them against the lake:
 *
 * - every table a query names (`db.table`, `awsdatacatalog.db.table`, or
 *   unqualified in the context database) is read from the Glue emulator
 *   through the real Glue SDK client (GetTable + GetPartitions), and each
 *   partition's objects under its `Location` are downloaded through the real
 *   S3 SDK client; the table becomes a DuckDB view whose partition columns
 *   come from the Glue partition values, not from the files (as Hive does);
 *   Parquet columns are matched by name, case-insensitively, missing ones read
 *   as NULL, objects named `_…` or `.…` and empty objects are ignored;
 * - a partition's own columns (its StorageDescriptor's) are checked against the
 *   table's by name, as Athena checks Parquet tables when a query starts: a
 *   column whose partition type is neither the table's nor one Athena reads as
 *   it (its documented compatible types: string or a narrower integer as a
 *   wider integer, float as double) FAILS the query with
 *   HIVE_PARTITION_SCHEMA_MISMATCH (only partitions the query reads: pruned
 *   ones are not checked); a compatible one is read from the files as the
 *   partition's type, then cast to the table's; a column the partition does
 *   not declare is read from the files by name as the table's type (NULL where
 *   a file lacks it);
 * - SELECT / WITH / VALUES: the result is written as CSV to
 *   `<OutputLocation>/<id>.csv` and served by GetQueryResults (header row
 *   first, NextToken paging, unnamed expressions called `_col0`, `_col1`, …);
 * - `UNLOAD (SELECT …) TO 's3://…/' WITH (format = 'PARQUET', compression = …
 *   [, partitioned_by = ARRAY[…]])`: Parquet files with unique names uploaded
 *   under the prefix, a manifest at `<OutputLocation>/<id>-manifest.csv`; it
 *   FAILS with HIVE_PATH_ALREADY_EXISTS if the prefix already holds objects
 *   (unless partitioned_by is given, as in Athena);
 * - GetQueryRuntimeStatistics gives Rows.OutputRows (rows returned or
 *   unloaded) once a query has SUCCEEDED, unless `runtimeStatisticsRows: false`;
 * - a query reports RUNNING at least once before its final state, so pollers
 *   are exercised; `delayNext` makes queries take a given time (for timeouts
 *   and StopQueryExecution), `failNext` makes them fail,
 *   `withholdColumnMetadataNext` answers their results without ColumnInfo;
 * - the access key ids `denied` and `unknown` are refused
 *   (AccessDeniedException, UnrecognizedClientException: ./aws-json.ts).
 *
 * Every query is first checked as Athena checks it, with a Trino grammar
 * (dt-sql-parser's): a syntax error, more than one statement, or an UNLOAD
 * whose query is not a SELECT (Athena documents `UNLOAD (SELECT …)` only) is
 * refused by StartQueryExecution with InvalidRequestException
 * (`line L:C: mismatched input …`); a CAST to a type Trino lacks (UBIGINT,
 * HUGEINT, …) FAILS with TYPE_NOT_FOUND; a table column whose Parquet type
 * Trino cannot read as the Glue type FAILS with HIVE_BAD_DATA. What passes is
 * then run by DuckDB, with `/` on integers made integer division (as Trino)
 * and `approx_distinct` / `regexp_like` defined; nothing else is translated,
 * so tests write their Athena SQL in the subset both accept.
 * Test code only.
 */
import type { ColumnInfo, QueryExecution, QueryExecutionState, Row } from "@aws-sdk/client-athena";
import { GetPartitionsCommand, GetTableCommand, GlueClient, type Column, type Partition, type Table } from "@aws-sdk/client-glue";
import { GetObjectCommand, ListObjectsV2Command, PutObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { DuckDBInstance, type DuckDBConnection } from "@duckdb/node-api";
import { TrinoSQL, TrinoSqlListener } from "./trino-grammar.js";
import { randomBytes, randomUUID } from "node:crypto";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import http, { type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { CREDENTIALS, HOST, credentialRefusal, isObject, readText, sendJson, type EmulatorClientConfig, type JsonObject } from "./aws-json.js";
import { tmpdir } from "node:os";
import path from "node:path";

type AthenaOperation =
  | "StartQueryExecution" | "GetQueryExecution" | "GetQueryResults" | "GetQueryRuntimeStatistics" | "StopQueryExecution" | "BatchGetQueryExecution";
type AthenaQueryState = QueryExecutionState;

export interface AthenaEmulatorOptions {
  readonly s3Endpoint: string;
  readonly glueEndpoint: string;
  readonly region?: string;
  /** The work group's result location, used when a query gives no OutputLocation (without it such queries are refused, as Athena does). */
  readonly workGroupOutputLocation?: string;
  /**
   * false: GetQueryRuntimeStatistics answers without `Rows` (Athena documents
   * that row statistics may arrive late or not at all), so callers' fallbacks
   * are exercised. Default true.
   */
  readonly runtimeStatisticsRows?: boolean;
}

/** One query as the emulator ran it (a snapshot). */
interface AthenaExecution {
  readonly id: string;
  readonly query: string;
  readonly kind: "SELECT" | "UNLOAD" | "UNSUPPORTED";
  readonly database: string;
  readonly catalog: string;
  readonly workGroup: string;
  /** The state inside the emulator (pollers may briefly still see RUNNING). */
  readonly state: AthenaQueryState;
  readonly stateChangeReason?: string;
  readonly submittedAt: Date;
  readonly completedAt?: Date;
  /** Tables read, as `db.table`. */
  readonly tablesRead: readonly string[];
  /** SELECT: rows in the result (header not counted). UNLOAD: rows written. */
  readonly rowCount?: number;
  /** UNLOAD: the `s3://` URIs of the files written. */
  readonly writtenObjects: readonly string[];
  readonly dataScannedInBytes: number;
}

interface QueryMatcher {
  /** Only queries whose text matches (a substring or a pattern); default every query. */
  readonly match?: string | RegExp;
  /** How many queries are affected (default 1). */
  readonly times?: number;
}

export interface AthenaEmulator {
  readonly endpoint: string;
  readonly region: string;
  /** A ready configuration for `new AthenaClient(...)`. */
  readonly clientConfig: EmulatorClientConfig;
  /** Every query started, oldest first. */
  readonly executions: readonly AthenaExecution[];
  /** The next matching queries stay RUNNING for `ms` before they execute (StopQueryExecution ends the wait). */
  delayNext(ms: number, matcher?: QueryMatcher): void;
  /**
   * Queries waiting out a `delayNext` go on at once, as if their time had passed, and no query started later waits
   * (a test's handshake instead of a long sleep).
   */
  endDelays(): void;
  /** The next matching queries fail with this StateChangeReason (after any delay). */
  failNext(reason: string, matcher?: QueryMatcher): void;
  /** The next matching queries succeed, but GetQueryResults answers them without column metadata (ColumnInfo empty). */
  withholdColumnMetadataNext(matcher?: QueryMatcher): void;
  /** The next matching UNLOADs report success but write no object (a faulty engine the lake's audit must catch). */
  loseUnloadOutputNext(matcher?: QueryMatcher): void;
  /** The next API call(s) of an operation answer with an error, e.g. TooManyRequestsException. */
  failNextCall(operation: AthenaOperation, failure: { readonly error: string; readonly message?: string; readonly times?: number }): void;
  /** Resolves when no query is queued or running. */
  idle(): Promise<void>;
  close(): Promise<void>;
}

const CATALOG = "awsdatacatalog";
const MAX_RESULTS = 1000;

class ApiError extends Error {
  constructor(readonly code: string, message: string, readonly status = 400) {
    super(message);
  }
}

/** A failure of the query itself (ends as FAILED with this reason). */
class QueryFailure extends Error {}

interface ResultTable {
  columns: { name: string; type: string }[];
  rows: (string | null)[][];
}

interface Execution {
  id: string;
  query: string;
  kind: AthenaExecution["kind"];
  database: string;
  catalog: string;
  workGroup: string;
  outputBase: string;
  clientRequestToken?: string;
  state: AthenaQueryState;
  reason?: string;
  runningReported: boolean;
  submittedAt: Date;
  startedAt?: Date;
  completedAt?: Date;
  tablesRead: string[];
  rowCount?: number;
  writtenObjects: string[];
  dataScanned: number;
  outputBytes: number;
  manifestLocation?: string;
  result?: ResultTable;
  delayMs: number;
  injectedFailure?: string;
  withholdColumnMetadata: boolean;
  loseOutput: boolean;
  abort: AbortController;
  /** Aborted by endDelays: the delay is over. */
  delayOver: AbortController;
  connection?: DuckDBConnection;
  done?: Promise<void>;
}

interface PendingQueryEffect {
  match?: string | RegExp;
  remaining: number;
  delayMs?: number;
  failure?: string;
  withholdColumnMetadata?: boolean;
  loseOutput?: boolean;
}

export async function startAthenaEmulator(options: AthenaEmulatorOptions): Promise<AthenaEmulator> {
  const region = options.region ?? "us-east-1";
  const glue = new GlueClient({ endpoint: options.glueEndpoint, region, credentials: CREDENTIALS });
  const s3 = new S3Client({ endpoint: options.s3Endpoint, region, credentials: CREDENTIALS, forcePathStyle: true });
  const executions = new Map<string, Execution>();
  const byToken = new Map<string, string>();
  const effects: PendingQueryEffect[] = [];
  const callFailures = new Map<string, { error: string; message?: string; remaining: number }[]>();

  const takeEffects = (query: string): { delayMs: number; failure?: string; withholdColumnMetadata: boolean; loseOutput: boolean } => {
    let delayMs = 0;
    let failure: string | undefined;
    let withholdColumnMetadata = false;
    let loseOutput = false;
    for (const effect of [...effects]) {
      const matches = effect.match === undefined || (typeof effect.match === "string" ? query.includes(effect.match) : effect.match.test(query));
      if (!matches) continue;
      if (effect.delayMs !== undefined && delayMs === 0) delayMs = effect.delayMs;
      else if (effect.failure !== undefined && failure === undefined) failure = effect.failure;
      else if (effect.withholdColumnMetadata && !withholdColumnMetadata) withholdColumnMetadata = true;
      else if (effect.loseOutput && !loseOutput) loseOutput = true;
      else continue;
      effect.remaining -= 1;
      if (effect.remaining <= 0) effects.splice(effects.indexOf(effect), 1);
    }
    return { delayMs, failure, withholdColumnMetadata, loseOutput };
  };

  const find = (id: unknown): Execution => {
    const execution = typeof id === "string" ? executions.get(id) : undefined;
    if (!execution) throw new ApiError("InvalidRequestException", `QueryExecution ${String(id)} was not found`);
    return execution;
  };

  /** The state a client sees: a finished query shows RUNNING once before its final state. */
  const visibleState = (execution: Execution, poll: boolean): AthenaQueryState => {
    const { state } = execution;
    if (state === "QUEUED" || state === "CANCELLED") return state;
    if (state === "RUNNING" || !execution.runningReported) {
      if (poll) execution.runningReported = true;
      return "RUNNING";
    }
    return state;
  };

  const describe = (execution: Execution, poll: boolean): QueryExecution => {
    const state = visibleState(execution, poll);
    const finished = state === "SUCCEEDED" || state === "FAILED" || state === "CANCELLED";
    const end = finished ? (execution.completedAt ?? new Date()) : new Date();
    const started = execution.startedAt ?? end;
    const outputLocation =
      execution.kind === "SELECT" ? `${execution.outputBase}${execution.id}.csv` : `${execution.outputBase}${execution.id}`;
    return {
      QueryExecutionId: execution.id,
      Query: execution.query,
      StatementType: execution.kind === "UNSUPPORTED" ? "DDL" : "DML",
      SubstatementType: execution.kind === "UNSUPPORTED" ? undefined : execution.kind,
      ResultConfiguration: { OutputLocation: outputLocation },
      QueryExecutionContext: { Database: execution.database, Catalog: execution.catalog },
      Status: {
        State: state,
        StateChangeReason: finished ? execution.reason : undefined,
        SubmissionDateTime: execution.submittedAt,
        CompletionDateTime: finished ? execution.completedAt : undefined,
        AthenaError:
          state === "FAILED" ? { ErrorCategory: 2, Retryable: false, ErrorMessage: execution.reason } : undefined,
      },
      Statistics: {
        EngineExecutionTimeInMillis: end.getTime() - started.getTime(),
        DataScannedInBytes: execution.dataScanned,
        TotalExecutionTimeInMillis: end.getTime() - execution.submittedAt.getTime(),
        QueryQueueTimeInMillis: started.getTime() - execution.submittedAt.getTime(),
        ServicePreProcessingTimeInMillis: 0,
        QueryPlanningTimeInMillis: 0,
        ServiceProcessingTimeInMillis: 0,
        DataManifestLocation: finished ? execution.manifestLocation : undefined,
        ResultReuseInformation: { ReusedPreviousResult: false },
      },
      WorkGroup: execution.workGroup,
      EngineVersion: { SelectedEngineVersion: "AUTO", EffectiveEngineVersion: "Athena engine version 3" },
    };
  };

  // --- running a query ------------------------------------------------------

  const run = async (execution: Execution): Promise<void> => {
    await new Promise((resolve) => setImmediate(resolve));
    if (execution.state !== "QUEUED") return;
    execution.state = "RUNNING";
    execution.startedAt = new Date();
    running += 1;
    if (running === 1 && downloadedBytes > 256 * 1024 * 1024) await forgetDownloads();
    let instance: DuckDBInstance | undefined;
    try {
      if (execution.delayMs > 0) await sleep(execution.delayMs, AbortSignal.any([execution.abort.signal, execution.delayOver.signal]));
      checkCancelled(execution);
      if (execution.injectedFailure !== undefined) throw new QueryFailure(execution.injectedFailure);
      const statement = parseStatement(execution.query);
      if (statement.kind === "UNSUPPORTED") {
        throw new QueryFailure(`NOT_SUPPORTED: the Athena emulator runs SELECT, WITH, VALUES and UNLOAD statements only: ${firstWords(execution.query)}`);
      }
      instance = idleInstances.pop() ?? (await DuckDBInstance.create(":memory:", { threads: "1" }));
      const connection = await instance.connect();
      execution.connection = connection;
      await prepareSession(connection, execution.database);
      const parsed = await parseSelect(connection, statement.select);
      for (const ref of parsed.tables) {
        checkCancelled(execution);
        // Every place the query reads the table from (under any spelling of its name) decides which partitions it needs.
        const filters = parsed.tables.filter((other) => sameTable(other, ref, execution.database)).flatMap((other) => other.filters);
        await registerTable(connection, execution, ref, filters);
      }
      checkCancelled(execution);
      const names = parsed.outputNames ?? (await describeQuery(connection, statement.select)).map((c) => c.name.toLowerCase());
      const renamed = `SELECT * FROM (${statement.select}\n) AS __athena_q(${uniqueNames(names).map(quoteIdentifier).join(", ")})`;

      if (statement.kind === "SELECT") {
        const result = await selectResult(connection, renamed, names);
        checkCancelled(execution);
        const { bucket, key } = parseS3Uri(`${execution.outputBase}${execution.id}.csv`);
        const csv = toCsv(result);
        await s3.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: Buffer.from(csv), ContentType: "text/csv" }));
        execution.outputBytes = Buffer.byteLength(csv);
        execution.result = result;
        execution.rowCount = result.rows.length;
      } else {
        await unload(connection, execution, renamed, names, statement);
      }
      checkCancelled(execution);
      finish(execution, "SUCCEEDED");
    } catch (error) {
      if (isCancelled(execution)) return;
      finish(execution, "FAILED", error instanceof QueryFailure ? error.message : athenaReason(error));
    } finally {
      execution.connection?.closeSync();
      execution.connection = undefined;
      if (instance) await release(instance);
      running -= 1;
    }
  };

  /**
   * DuckDB instances between queries (opening and closing one per query cost
   * more than many a query): a query's tables, temporary tables and macros
   * live in its own connection and its own `awsdatacatalog`, detached when it
   * ends, so the next query finds the instance as new.
   */
  const idleInstances: DuckDBInstance[] = [];
  const release = async (instance: DuckDBInstance): Promise<void> => {
    try {
      const connection = await instance.connect();
      try {
        await connection.run(`DETACH DATABASE IF EXISTS ${CATALOG}`);
      } finally {
        connection.closeSync();
      }
    } catch {
      instance.closeSync();
      return;
    }
    if (closed || idleInstances.length >= 4) instance.closeSync();
    else idleInstances.push(instance);
  };
  let closed = false;

  const finish = (execution: Execution, state: AthenaQueryState, reason?: string): void => {
    if (execution.state === "CANCELLED") return;
    execution.state = state;
    execution.reason = reason;
    execution.completedAt = new Date();
  };

  /** Resolves a table through Glue, downloads its current partitions' files and defines it as a view. */
  const registerTable = async (connection: DuckDBConnection, execution: Execution, ref: TableRef, filters: readonly PartitionFilter[], depth = 0): Promise<void> => {
    const database = (ref.schema || execution.database).toLowerCase();
    const name = ref.table.toLowerCase();
    if (ref.catalog && ref.catalog.toLowerCase() !== CATALOG) {
      throw new QueryFailure(`CATALOG_NOT_FOUND: Catalog '${ref.catalog.toLowerCase()}' does not exist`);
    }
    let table: Table | undefined;
    try {
      table = (await glue.send(new GetTableCommand({ DatabaseName: database, Name: name }))).Table;
    } catch (error) {
      if (errorName(error) !== "EntityNotFoundException") throw error;
      const what = errorMessage(error).startsWith("Database")
        ? `SCHEMA_NOT_FOUND: Schema '${database}' does not exist`
        : `TABLE_NOT_FOUND: Table '${CATALOG}.${database}.${name}' does not exist`;
      throw new QueryFailure(what);
    }
    if (!table) throw new QueryFailure(`TABLE_NOT_FOUND: Table '${CATALOG}.${database}.${name}' does not exist`);
    if (table.TableType === "VIRTUAL_VIEW") return registerView(connection, execution, database, name, table, depth);
    const format = `${table.StorageDescriptor?.InputFormat ?? ""} ${table.StorageDescriptor?.SerdeInfo?.SerializationLibrary ?? ""}`;
    if (!/parquet/i.test(format)) {
      throw new QueryFailure(`NOT_SUPPORTED: the Athena emulator reads Parquet tables only; ${database}.${name} has '${format.trim()}'`);
    }
    const columns = table.StorageDescriptor?.Columns ?? [];
    const keys = table.PartitionKeys ?? [];
    const sources: { files: string[]; values: string[]; columns?: readonly Column[] }[] = [];
    if (keys.length === 0) {
      const location = table.StorageDescriptor?.Location;
      if (location) sources.push({ files: await download(location, execution), values: [] });
    } else {
      let token: string | undefined;
      do {
        const page = await glue.send(new GetPartitionsCommand({ DatabaseName: database, TableName: name, NextToken: token }));
        for (const partition of page.Partitions ?? []) {
          // Athena prunes: a partition the query's filters on partition keys exclude is not read (still listed above).
          if (!filters.some((filter) => mayMatch(filter, keys, partition.Values ?? []))) continue;
          const partitionColumns = partition.StorageDescriptor?.Columns;
          const mismatch = partitionSchemaMismatch(`${database}.${name}`, keys, partition.Values ?? [], columns, partitionColumns ?? []);
          if (mismatch) throw new QueryFailure(mismatch);
          const files = await downloadPartition(partition, execution);
          sources.push({ files, values: partition.Values ?? [], columns: partitionColumns });
        }
        token = page.NextToken;
      } while (token);
    }
    const selects: string[] = [];
    for (const source of sources) {
      if (source.files.length === 0) continue;
      const fileColumns = await parquetColumns(connection, source.files);
      const projection = [
        ...columns.map((c) => {
          const actual = fileColumns.get((c.Name ?? "").toLowerCase());
          // The partition's own type of the column where it declares one (checked compatible above): files are read as it, then coerced.
          const declared = source.columns?.find((p) => (p.Name ?? "").toLowerCase() === (c.Name ?? "").toLowerCase())?.Type;
          const readAs = declared ?? c.Type ?? "string";
          if (actual !== undefined && !parquetReadsAs(actual.type, readAs)) {
            throw new QueryFailure(
              `HIVE_BAD_DATA: Field ${actual.name}'s type ${actual.type} in parquet file of ${database}.${name} is incompatible with type ${readAs} defined in table schema`,
            );
          }
          const expression = actual === undefined ? "NULL" : quoteIdentifier(actual.name);
          if (declared !== undefined && hiveTypeName(declared) !== hiveTypeName(c.Type)) {
            return `TRY_CAST(CAST(${expression} AS ${duckType(declared)}) AS ${duckType(c.Type)}) AS ${quoteIdentifier(c.Name ?? "")}`;
          }
          return `CAST(${expression} AS ${duckType(c.Type)}) AS ${quoteIdentifier(c.Name ?? "")}`;
        }),
        ...keys.map((k, i) => `${partitionLiteral(source.values[i], k)} AS ${quoteIdentifier(k.Name ?? "")}`),
      ];
      selects.push(`SELECT ${projection.join(", ")} FROM read_parquet([${source.files.map(quoteLiteral).join(", ")}], union_by_name = true, hive_partitioning = false)`);
    }
    if (selects.length === 0) {
      const empty = [...columns, ...keys].map((c) => `CAST(NULL AS ${duckType(c.Type)}) AS ${quoteIdentifier(c.Name ?? "")}`);
      selects.push(`SELECT ${empty.join(", ")} WHERE false`);
    }
    await connection.run(`CREATE SCHEMA IF NOT EXISTS ${CATALOG}.${quoteIdentifier(database)}`);
    await connection.run(`CREATE OR REPLACE VIEW ${CATALOG}.${quoteIdentifier(database)}.${quoteIdentifier(name)} AS ${selects.join("\nUNION ALL BY NAME\n")}`);
    execution.tablesRead.push(`${database}.${name}`);
  };

  /**
   * An Athena view, as Athena keeps it in Glue: a VIRTUAL_VIEW whose ViewOriginalText is `/* Presto View: <base64 of
   * {originalSql, catalog, schema, columns}> *\/`. The tables its SQL reads are registered (each read whole), then the
   * view is defined over them with its declared columns and types, as Athena reads it.
   */
  const registerView = async (connection: DuckDBConnection, execution: Execution, database: string, name: string, table: Table, depth: number): Promise<void> => {
    if (depth > 8) throw new QueryFailure(`VIEW_IS_RECURSIVE: View '${CATALOG}.${database}.${name}' is recursive`);
    const encoded = /^\/\* Presto View: ([A-Za-z0-9+/=]+) \*\/$/.exec(table.ViewOriginalText ?? "")?.[1];
    if (encoded === undefined) throw new QueryFailure(`INVALID_VIEW: Invalid view '${CATALOG}.${database}.${name}': its ViewOriginalText is not a Presto view`);
    const view = JSON.parse(Buffer.from(encoded, "base64").toString("utf8")) as { originalSql: string; schema?: string; columns: { name: string; type: string }[] };
    const inner = await parseSelect(connection, view.originalSql);
    for (const ref of inner.tables) await registerTable(connection, execution, { ...ref, schema: ref.schema || view.schema || database }, ["all"], depth + 1);
    const columns = view.columns.map((c) => `CAST(${quoteIdentifier(c.name)} AS ${duckType(c.type)}) AS ${quoteIdentifier(c.name)}`);
    await connection.run(`CREATE SCHEMA IF NOT EXISTS ${CATALOG}.${quoteIdentifier(database)}`);
    await connection.run(`CREATE OR REPLACE VIEW ${CATALOG}.${quoteIdentifier(database)}.${quoteIdentifier(name)} AS SELECT ${columns.join(", ")} FROM (${view.originalSql}\n) AS __athena_view`);
    execution.tablesRead.push(`${database}.${name}`);
  };

  const downloadPartition = async (partition: Partition, execution: Execution): Promise<string[]> => {
    const location = partition.StorageDescriptor?.Location;
    return location ? download(location, execution) : [];
  };

  /**
   * The objects queries downloaded, by `bucket/key`, with the version (ETag,
   * size, time) listed then, in a folder of the emulator's; a query reads them
   * there. Emptied when it holds more than 256 MB and no query runs.
   */
  const downloaded = new Map<string, { readonly version: string; readonly file: string; readonly size: number }>();
  let downloadFolder: Promise<string> | undefined;
  let downloadCount = 0;
  let downloadedBytes = 0;
  let running = 0;
  const downloads = (): Promise<string> => (downloadFolder ??= mkdtemp(path.join(tmpdir(), "lakeswap-athena-objects-")));
  const forgetDownloads = async (): Promise<void> => {
    const folder = downloadFolder;
    downloaded.clear();
    downloadFolder = undefined;
    downloadedBytes = 0;
    if (folder) await rm(await folder, { recursive: true, force: true });
  };

  /** Lists the data objects under a location (as Hive reads a directory) and returns their local copies. */
  const download = async (location: string, execution: Execution): Promise<string[]> => {
    const { bucket, key } = parseS3Uri(location);
    const prefix = key === "" || key.endsWith("/") ? key : `${key}/`;
    const files: string[] = [];
    let token: string | undefined;
    do {
      const page = await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token }));
      for (const object of page.Contents ?? []) {
        const objectKey = object.Key ?? "";
        const base = objectKey.slice(objectKey.lastIndexOf("/") + 1);
        if (base === "" || base.startsWith("_") || base.startsWith(".") || objectKey.endsWith("$folder$") || (object.Size ?? 0) === 0) continue;
        // The object as listed now: a copy downloaded earlier serves only while the listing shows the same object.
        const version = `${object.ETag ?? ""} ${object.Size ?? ""} ${object.LastModified?.getTime() ?? ""}`;
        const cached = downloaded.get(`${bucket}/${objectKey}`);
        if (cached?.version === version) {
          execution.dataScanned += cached.size;
          files.push(cached.file);
          continue;
        }
        const body = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: objectKey }));
        const bytes = await body.Body?.transformToByteArray();
        if (!bytes) continue;
        const file = path.join(await downloads(), `${downloadCount++}.parquet`);
        await writeFile(file, bytes);
        downloaded.set(`${bucket}/${objectKey}`, { version, file, size: bytes.length });
        downloadedBytes += bytes.length;
        execution.dataScanned += bytes.length;
        files.push(file);
      }
      token = page.NextContinuationToken;
    } while (token);
    return files;
  };

  const unload = async (
    connection: DuckDBConnection,
    execution: Execution,
    select: string,
    names: string[],
    statement: UnloadStatement,
  ): Promise<void> => {
    const { properties } = statement;
    const format = (properties.get("format") ?? "").toUpperCase();
    if (format === "") throw new QueryFailure("INVALID_TABLE_PROPERTY: UNLOAD needs format = '...' in its WITH clause");
    if (format !== "PARQUET") throw new QueryFailure(`NOT_SUPPORTED: the Athena emulator UNLOADs format 'PARQUET' only, not '${format}'`);
    const compression = parquetCompression(properties.get("compression"));
    const partitionedBy = (properties.get("partitioned_by") ?? "").split(",").map((s) => s.trim()).filter(Boolean);
    for (const column of partitionedBy) {
      if (!names.includes(column.toLowerCase())) throw new QueryFailure(`COLUMN_NOT_FOUND: Partition column '${column}' is not in the UNLOAD query`);
    }
    const target = statement.target.endsWith("/") ? statement.target : `${statement.target}/`;
    const { bucket, key: prefix } = parseS3Uri(target);
    if (partitionedBy.length === 0) {
      const existing = await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, MaxKeys: 1 }));
      if ((existing.KeyCount ?? existing.Contents?.length ?? 0) > 0) {
        throw new QueryFailure(
          `HIVE_PATH_ALREADY_EXISTS: Target directory for UNLOAD already exists and is not empty: ${target}. ` +
            "UNLOAD does not overwrite existing data; delete it or choose another location.",
        );
      }
    }
    await connection.run(`CREATE TEMP TABLE __athena_unload AS ${select}`);
    const count = await connection.runAndReadAll("SELECT count(*) FROM temp.main.__athena_unload");
    const rows = Number(count.getRowsJS()[0]?.[0] ?? 0);
    const out = await mkdtemp(path.join(tmpdir(), "lakeswap-athena-unload-"));
    try {
      if (rows > 0) {
        const options = [`FORMAT PARQUET`, `COMPRESSION ${compression}`];
        if (partitionedBy.length > 0) options.push(`PARTITION_BY (${partitionedBy.map((c) => quoteIdentifier(c.toLowerCase())).join(", ")})`);
        const destination = partitionedBy.length > 0 ? out : path.join(out, "data.parquet");
        await connection.run(`COPY temp.main.__athena_unload TO ${quoteLiteral(destination)} (${options.join(", ")})`);
      }
      checkCancelled(execution);
      const trinoId = trinoQueryId(execution.submittedAt);
      for (const file of execution.loseOutput ? [] : await listFiles(out)) {
        const relative = path.relative(out, file).split(path.sep);
        relative[relative.length - 1] = `${trinoId}_${randomUUID()}`;
        const key = `${prefix}${relative.join("/")}`;
        const bytes = await readFile(file);
        await s3.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: bytes }));
        execution.outputBytes += bytes.length;
        execution.writtenObjects.push(`s3://${bucket}/${key}`);
      }
    } finally {
      await rm(out, { recursive: true, force: true });
    }
    const manifest = `${execution.outputBase}${execution.id}-manifest.csv`;
    const manifestUri = parseS3Uri(manifest);
    await s3.send(
      new PutObjectCommand({ Bucket: manifestUri.bucket, Key: manifestUri.key, Body: Buffer.from(execution.writtenObjects.map((o) => `${o}\n`).join("")) }),
    );
    execution.manifestLocation = manifest;
    execution.rowCount = rows;
  };

  // --- API ---------------------------------------------------------------------

  const operations: Record<AthenaOperation, (input: JsonObject) => unknown> = {
    StartQueryExecution(input) {
      const query = input.QueryString;
      if (typeof query !== "string" || query.length < 1 || query.length > 262144) {
        throw new ApiError("InvalidRequestException", "1 validation error detected: Value at 'queryString' failed to satisfy constraint: Member must have length between 1 and 262144");
      }
      const token = typeof input.ClientRequestToken === "string" ? input.ClientRequestToken : undefined;
      if (token !== undefined) {
        const previous = byToken.get(token);
        const earlier = previous === undefined ? undefined : executions.get(previous);
        if (earlier) {
          if (earlier.query !== query) throw new ApiError("InvalidRequestException", "Idempotent parameters do not match");
          return { QueryExecutionId: earlier.id };
        }
      }
      const context = isObject(input.QueryExecutionContext) ? input.QueryExecutionContext : {};
      const resultConfiguration = isObject(input.ResultConfiguration) ? input.ResultConfiguration : {};
      const output = typeof resultConfiguration.OutputLocation === "string" ? resultConfiguration.OutputLocation : options.workGroupOutputLocation;
      if (output === undefined || output === "") {
        throw new ApiError(
          "InvalidRequestException",
          "No output location provided. An output location is required either through the Workgroup result configuration setting or as an API input.",
        );
      }
      if (!/^s3:\/\/[^/]+/.test(output)) throw new ApiError("InvalidRequestException", `Invalid output location: ${output}`);
      const trinoFailure = checkTrinoOnce(query);
      const { delayMs, failure, withholdColumnMetadata, loseOutput } = takeEffects(query);
      const id = randomUUID();
      const execution: Execution = {
        id,
        query,
        kind: parseStatement(query).kind,
        database: typeof context.Database === "string" ? context.Database.toLowerCase() : "default",
        catalog: typeof context.Catalog === "string" ? context.Catalog : "AwsDataCatalog",
        workGroup: typeof input.WorkGroup === "string" ? input.WorkGroup : "primary",
        outputBase: output.endsWith("/") ? output : `${output}/`,
        clientRequestToken: token,
        state: "QUEUED",
        runningReported: false,
        submittedAt: new Date(),
        tablesRead: [],
        writtenObjects: [],
        dataScanned: 0,
        outputBytes: 0,
        delayMs,
        injectedFailure: failure ?? trinoFailure,
        withholdColumnMetadata,
        loseOutput,
        abort: new AbortController(),
        delayOver: new AbortController(),
      };
      executions.set(id, execution);
      if (token !== undefined) byToken.set(token, id);
      execution.done = run(execution).catch((error: unknown) => finish(execution, "FAILED", athenaReason(error)));
      return { QueryExecutionId: id };
    },
    GetQueryExecution(input) {
      return { QueryExecution: describe(find(input.QueryExecutionId), true) };
    },
    BatchGetQueryExecution(input) {
      const ids = Array.isArray(input.QueryExecutionIds) ? input.QueryExecutionIds : [];
      const found: QueryExecution[] = [];
      const unprocessed: { QueryExecutionId: string; ErrorCode: string; ErrorMessage: string }[] = [];
      for (const id of ids) {
        const execution = typeof id === "string" ? executions.get(id) : undefined;
        if (execution) found.push(describe(execution, true));
        else unprocessed.push({ QueryExecutionId: String(id), ErrorCode: "INVALID_INPUT", ErrorMessage: `QueryExecution ${String(id)} was not found` });
      }
      return { QueryExecutions: found, UnprocessedQueryExecutionIds: unprocessed };
    },
    GetQueryResults(input) {
      const execution = find(input.QueryExecutionId);
      const state = visibleState(execution, false);
      if (state === "QUEUED" || state === "RUNNING") {
        throw new ApiError("InvalidRequestException", `Query has not yet finished. Current state: ${state}`);
      }
      if (state !== "SUCCEEDED") {
        throw new ApiError("InvalidRequestException", `Query did not finish successfully. Final query state: ${state}\n${execution.reason ?? ""}`);
      }
      const max = input.MaxResults === undefined ? MAX_RESULTS : input.MaxResults;
      if (typeof max !== "number" || !Number.isInteger(max) || max < 1 || max > MAX_RESULTS) {
        throw new ApiError("InvalidRequestException", `1 validation error detected: Value '${String(max)}' at 'maxResults' failed to satisfy constraint: Member must have value less than or equal to ${MAX_RESULTS}`);
      }
      const result = execution.result;
      if (!result || execution.withholdColumnMetadata) return { ResultSet: { Rows: [], ResultSetMetadata: { ColumnInfo: [] } } };
      const allRows: Row[] = [
        { Data: result.columns.map((c) => ({ VarCharValue: c.name })) },
        ...result.rows.map((row) => ({ Data: row.map((value) => (value === null ? {} : { VarCharValue: value })) })),
      ];
      let offset = 0;
      if (typeof input.NextToken === "string") {
        const match = /^athena-page:([^:]+):(\d+)$/.exec(Buffer.from(input.NextToken, "base64").toString("utf8"));
        if (!match || match[1] !== execution.id) throw new ApiError("InvalidRequestException", "Invalid NextToken");
        offset = Number(match[2]);
      }
      const next = offset + max;
      return {
        ResultSet: { Rows: allRows.slice(offset, next), ResultSetMetadata: { ColumnInfo: result.columns.map((c) => columnInfo(c.name, c.type)) } },
        NextToken: next < allRows.length ? Buffer.from(`athena-page:${execution.id}:${next}`, "utf8").toString("base64") : undefined,
      };
    },
    GetQueryRuntimeStatistics(input) {
      const execution = find(input.QueryExecutionId);
      const state = visibleState(execution, false);
      const { Statistics: statistics } = describe(execution, false);
      return {
        QueryRuntimeStatistics: {
          Timeline: {
            QueryQueueTimeInMillis: statistics?.QueryQueueTimeInMillis,
            ServicePreProcessingTimeInMillis: 0,
            QueryPlanningTimeInMillis: 0,
            EngineExecutionTimeInMillis: statistics?.EngineExecutionTimeInMillis,
            ServiceProcessingTimeInMillis: 0,
            TotalExecutionTimeInMillis: statistics?.TotalExecutionTimeInMillis,
          },
          Rows:
            state === "SUCCEEDED" && options.runtimeStatisticsRows !== false
              ? { InputBytes: execution.dataScanned, OutputBytes: execution.outputBytes, OutputRows: execution.rowCount ?? 0 }
              : undefined,
        },
      };
    },
    StopQueryExecution(input) {
      const execution = find(input.QueryExecutionId);
      if (execution.state === "QUEUED" || execution.state === "RUNNING") {
        execution.state = "CANCELLED";
        execution.reason = "Query was cancelled by the user";
        execution.completedAt = new Date();
        execution.abort.abort();
        execution.connection?.interrupt();
      }
      return {};
    },
  };

  const server = http.createServer((req, res) => {
    void handle(req, res);
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const target = String(req.headers["x-amz-target"] ?? "");
    const operation = target.startsWith("AmazonAthena.") ? target.slice("AmazonAthena.".length) : "";
    try {
      const text = await readText(req);
      const input: unknown = text === "" ? {} : JSON.parse(text);
      if (!isAthenaOperation(operation)) throw new ApiError("UnknownOperationException", `Operation ${target} is not supported by the Athena emulator`);
      if (!isObject(input)) throw new ApiError("InvalidRequestException", "The request body must be a JSON object");
      const workGroup = typeof input.WorkGroup === "string" ? input.WorkGroup : "primary";
      const refusal = credentialRefusal(req.headers, `athena:${operation}`, `arn:aws:athena:${region}:123456789012:workgroup/${workGroup}`);
      if (refusal) throw new ApiError(refusal.code, refusal.message);
      const queue = callFailures.get(operation);
      const failure = queue?.[0];
      if (queue && failure) {
        failure.remaining -= 1;
        if (failure.remaining <= 0) queue.shift();
        throw new ApiError(failure.error, failure.message ?? `${failure.error} (injected by the Athena emulator)`, failure.error === "InternalServerException" ? 500 : 400);
      }
      sendJson(res, 200, operations[operation](input));
    } catch (error) {
      const apiError = error instanceof ApiError ? error : error instanceof SyntaxError ? new ApiError("SerializationException", "Could not parse the request body as JSON") : new ApiError("InternalServerException", String(error), 500);
      const body: Record<string, unknown> = { __type: apiError.code, Message: apiError.message };
      if (apiError.code === "InvalidRequestException") body.AthenaErrorCode = "INVALID_INPUT";
      sendJson(res, apiError.status, body, { "x-amzn-errortype": `${apiError.code}:http://internal.amazon.com/coral/com.amazonaws.athena/` });
    }
  }

  await new Promise<void>((resolve) => server.listen(0, HOST, resolve));
  const endpoint = `http://${HOST}:${(server.address() as AddressInfo).port}`;

  const idle = async (): Promise<void> => {
    await Promise.all([...executions.values()].map((e) => e.done));
  };

  return {
    endpoint,
    region,
    clientConfig: { endpoint, region, credentials: CREDENTIALS },
    get executions(): AthenaExecution[] {
      return [...executions.values()].map((e) => ({
        id: e.id,
        query: e.query,
        kind: e.kind,
        database: e.database,
        catalog: e.catalog,
        workGroup: e.workGroup,
        state: e.state,
        stateChangeReason: e.reason,
        submittedAt: e.submittedAt,
        completedAt: e.completedAt,
        tablesRead: [...e.tablesRead],
        rowCount: e.rowCount,
        writtenObjects: [...e.writtenObjects],
        dataScannedInBytes: e.dataScanned,
      }));
    },
    delayNext(ms, matcher = {}) {
      effects.push({ match: matcher.match, remaining: matcher.times ?? 1, delayMs: ms });
    },
    endDelays() {
      for (const execution of executions.values()) execution.delayOver.abort();
      for (const effect of [...effects]) if (effect.delayMs !== undefined) effects.splice(effects.indexOf(effect), 1);
    },
    failNext(reason, matcher = {}) {
      effects.push({ match: matcher.match, remaining: matcher.times ?? 1, failure: reason });
    },
    withholdColumnMetadataNext(matcher = {}) {
      effects.push({ match: matcher.match, remaining: matcher.times ?? 1, withholdColumnMetadata: true });
    },
    loseUnloadOutputNext(matcher = {}) {
      effects.push({ match: matcher.match, remaining: matcher.times ?? 1, loseOutput: true });
    },
    failNextCall(operation, failure) {
      const queue = callFailures.get(operation) ?? [];
      queue.push({ error: failure.error, message: failure.message, remaining: failure.times ?? 1 });
      callFailures.set(operation, queue);
    },
    idle,
    async close() {
      for (const execution of executions.values()) {
        if (execution.state === "QUEUED" || execution.state === "RUNNING") operations.StopQueryExecution({ QueryExecutionId: execution.id });
      }
      await idle();
      await forgetDownloads();
      closed = true;
      for (const instance of idleInstances.splice(0)) instance.closeSync();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      glue.destroy();
      s3.destroy();
    },
  };
}

// ---------------------------------------------------------------------------
// Statements

interface SelectStatement {
  kind: "SELECT";
  select: string;
}
interface UnloadStatement {
  kind: "UNLOAD";
  select: string;
  target: string;
  properties: Map<string, string>;
}
type Statement = SelectStatement | UnloadStatement | { kind: "UNSUPPORTED" };

function parseStatement(query: string): Statement {
  const sql = stripComments(query).trim().replace(/;\s*$/, "").trim();
  const unload = /^UNLOAD\s*\(([\s\S]*)\)\s*TO\s*'((?:[^']|'')*)'\s*(?:WITH\s*\(([\s\S]*)\))?$/i.exec(sql);
  if (unload) {
    const properties = new Map<string, string>();
    for (const m of (unload[3] ?? "").matchAll(/(\w+)\s*=\s*(?:'((?:[^']|'')*)'|ARRAY\s*\[([^\]]*)\])/gi)) {
      const name = (m[1] ?? "").toLowerCase();
      const value = m[2] !== undefined ? m[2].replace(/''/g, "'") : (m[3] ?? "").split(",").map((s) => s.trim().replace(/^'|'$/g, "")).join(",");
      properties.set(name, value);
    }
    return { kind: "UNLOAD", select: (unload[1] ?? "").trim(), target: (unload[2] ?? "").replace(/''/g, "'"), properties };
  }
  if (/^(CREATE|ALTER|DROP|MSCK|SHOW|DESCRIBE|DESC|INSERT|DELETE|UPDATE|MERGE|EXPLAIN|USE|PREPARE|EXECUTE|DEALLOCATE|OPTIMIZE|VACUUM|UNLOAD)\b/i.test(sql)) {
    return { kind: "UNSUPPORTED" };
  }
  // SELECT, WITH, VALUES, or something DuckDB will reject with a syntax error.
  return { kind: "SELECT", select: sql };
}

const trino = new TrinoSQL();

/** Trino's type names (docs: Trino "Data types"); a CAST to any other name fails with TYPE_NOT_FOUND. */
const TRINO_TYPES = new Set([
  "boolean", "tinyint", "smallint", "integer", "int", "bigint", "real", "double", "decimal", "varchar", "char", "varbinary", "json",
  "date", "time", "timestamp", "interval", "array", "map", "row", "ipaddress", "uuid", "hyperloglog", "p4hyperloglog", "setdigest",
  "qdigest", "tdigest", "geometry", "sphericalgeography", "color",
]);

/**
 * Checks a query as Athena does before running it: the Trino grammar (with
 * Athena's UNLOAD around a SELECT), one statement. A refusal throws
 * InvalidRequestException, as StartQueryExecution answers; a CAST to a type
 * Trino lacks gives the reason the query will FAIL with.
 */
function checkTrino(query: string): { unknownType?: string; quotedType: boolean } {
  // UNLOAD is Athena's, not Trino's: check the query inside it, blanked so positions stay those of the original text.
  const unload = /^(\s*UNLOAD\s*\()([\s\S]*)(\)\s*TO\s*'(?:[^']|'')*'\s*(?:WITH\s*\([\s\S]*\))?\s*;?\s*)$/i.exec(query);
  const blank = (text: string): string => text.replace(/[^\n]/g, " ");
  const text = unload ? `${blank(unload[1] ?? "")}${unload[2] ?? ""}${blank(unload[3] ?? "")}` : query;
  if (unload) {
    const first = /^\s*(\S+)/.exec(unload[2] ?? "")?.[1] ?? "";
    if (!/^SELECT$/i.test(first)) {
      const at = position(text, (unload[1] ?? "").length + (unload[2] ?? "").indexOf(first));
      throw new ApiError("InvalidRequestException", `line ${at}: mismatched input '${first}'. Expecting: 'SELECT' (Athena's UNLOAD takes a SELECT statement)`);
    }
  }
  // One parse (dt-sql-parser's parse() and splitSQLByStatement() would each parse again): syntax, then statements.
  let syntaxError: string | undefined;
  const parser = trino.createParser(text, (_error, original) => {
    syntaxError ??= `line ${original.line}:${original.charPositionInLine + 1}: ${original.msg}`;
  });
  const tree = parser.program();
  if (syntaxError !== undefined) throw new ApiError("InvalidRequestException", syntaxError);
  if (tree.statements().length > 1) throw new ApiError("InvalidRequestException", `Only one sql statement is allowed. Got: ${query}`);
  let unknownType: string | undefined;
  let quotedType = false;
  const listener = new TrinoSqlListener();
  listener.enterGenericType = (context) => {
    const text = context.identifier().getText();
    quotedType ||= /^["`]/.test(text);
    const name = text.replace(/^"|"$/g, "");
    if (!TRINO_TYPES.has(name.toLowerCase())) {
      unknownType ??= `TYPE_NOT_FOUND: line ${context.start?.line ?? 1}:${(context.start?.column ?? 0) + 1}: Unknown type: ${name.toLowerCase()}`;
    }
  };
  trino.listen(listener, tree);
  return { unknownType, quotedType };
}

/** checkTrino's verdicts by query text (the Trino parse is the costliest step on the emulator's event loop). */
const trinoVerdicts = new Map<string, { readonly reason?: string; readonly refusal?: string }>();

/**
 * The shapes (trinoShape) of queries Trino's grammar accepted with no type it
 * lacks, and no type named by a quoted identifier: any query of such a shape
 * is accepted too (a sync sends the same statements for each partition, with
 * other literals, and each test lake has a database name of its own).
 */
const acceptedShapes = new Set<string>();

/** checkTrino, once per query text or accepted shape: tests send the same reads again and again (a reader's loop, a check after each step). */
function checkTrinoOnce(query: string): string | undefined {
  const shape = trinoShape(query);
  if (acceptedShapes.has(shape)) return undefined;
  let verdict = trinoVerdicts.get(query);
  if (verdict === undefined) {
    try {
      const checked = checkTrino(query);
      verdict = { reason: checked.unknownType };
      if (checked.unknownType === undefined && !checked.quotedType) {
        if (acceptedShapes.size >= 2000) acceptedShapes.clear();
        acceptedShapes.add(shape);
      }
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      verdict = { refusal: error.message };
    }
    // Bounded: most queries (each build's UNLOAD names its own run) are sent once.
    if (trinoVerdicts.size >= 2000) trinoVerdicts.clear();
    trinoVerdicts.set(query, verdict);
  }
  if (verdict.refusal !== undefined) throw new ApiError("InvalidRequestException", verdict.refusal);
  return verdict.reason;
}

/**
 * A query with the same tokens for Trino's lexer, of the same lengths: the
 * characters inside string literals and quoted identifiers become `x`, the
 * digits of numbers `0`; keywords, unquoted identifiers (type names among
 * them), operators, comments and line breaks stay. Two queries of one shape
 * parse alike, so Trino's grammar accepts both or neither; only the names of
 * types written as quoted identifiers could differ (checkTrino reports them).
 */
function trinoShape(query: string): string {
  let shape = "";
  let index = 0;
  while (index < query.length) {
    const char = query[index] ?? "";
    const next = query[index + 1] ?? "";
    let end: number;
    if (char === "-" && next === "-") {
      end = query.indexOf("\n", index);
      end = end < 0 ? query.length : end;
      shape += query.slice(index, end);
    } else if (char === "/" && next === "*") {
      end = query.indexOf("*/", index + 2);
      end = end < 0 ? query.length : end + 2;
      shape += query.slice(index, end);
    } else if (char === "'" || char === '"' || char === "`") {
      // To the closing quote (a doubled quote inside is two quoted runs back to back, which keeps the same shape).
      end = query.indexOf(char, index + 1);
      end = end < 0 ? query.length : end + 1;
      shape += char + query.slice(index + 1, end).replace(/[^\n'"`]/g, "x");
    } else if (/[A-Za-z_]/.test(char)) {
      end = index + (/^[A-Za-z_0-9@:$]+/.exec(query.slice(index))?.[0].length ?? 1);
      shape += query.slice(index, end);
    } else if (/[0-9]/.test(char)) {
      end = index + (/^[0-9A-Za-z_.]+/.exec(query.slice(index))?.[0].length ?? 1);
      shape += query.slice(index, end).replace(/[0-9]/g, "0");
    } else {
      end = index + 1;
      shape += char;
    }
    index = end;
  }
  return shape;
}

/** `line:column` (both from 1) of an offset in a text. */
function position(text: string, offset: number): string {
  const before = text.slice(0, offset).split("\n");
  return `${before.length}:${(before[before.length - 1] ?? "").length + 1}`;
}

function stripComments(sql: string): string {
  return sql.replace(/^(\s*(--[^\n]*(\n|$)|\/\*[\s\S]*?\*\/))*/, "");
}

function firstWords(query: string): string {
  return stripComments(query).trim().split(/\s+/).slice(0, 3).join(" ");
}

interface TableRef {
  catalog: string;
  schema: string;
  table: string;
  /** One per place the query reads the table from: the rows it can use there (a partition that fails every one is not read). */
  filters: PartitionFilter[];
}

/**
 * The WHERE clause (DuckDB's parse tree) of a SELECT that reads a table alone,
 * and the names its columns go by there; `all` where the query may read any row.
 */
type PartitionFilter = "all" | { readonly where: unknown; readonly qualifiers: readonly string[] };

function sameTable(a: TableRef, b: TableRef, database: string): boolean {
  const resolved = (ref: TableRef): string => `${(ref.schema || database).toLowerCase()}.${ref.table.toLowerCase()}`;
  return resolved(a) === resolved(b) && (a.catalog || CATALOG).toLowerCase() === (b.catalog || CATALOG).toLowerCase();
}

/**
 * Whether rows of a partition may pass a filter: false only where the filter
 * compares a string partition key with a string literal (`=`, `IN`) and the
 * partition's value differs, through AND and OR; anything else may pass.
 */
function mayMatch(filter: PartitionFilter, keys: readonly Column[], values: readonly string[]): boolean {
  if (filter === "all") return true;
  const keyValue = (node: unknown): string | undefined => {
    if (!isObject(node) || node.class !== "COLUMN_REF" || !Array.isArray(node.column_names)) return undefined;
    const names = node.column_names.map((n) => String(n).toLowerCase());
    if (names.length > 2 || (names.length === 2 && !filter.qualifiers.includes(names[0] ?? ""))) return undefined;
    const index = keys.findIndex((k) => (k.Name ?? "").toLowerCase() === names[names.length - 1]);
    const type = (keys[index]?.Type ?? "").trim().toLowerCase();
    return index >= 0 && /^(string|varchar(\(\s*\d+\s*\))?)$/.test(type) ? values[index] : undefined;
  };
  const literal = (node: unknown): string | undefined => {
    if (!isObject(node) || node.class !== "CONSTANT" || !isObject(node.value)) return undefined;
    const { value } = node;
    return isObject(value.type) && value.type.id === "VARCHAR" && value.is_null === false && typeof value.value === "string" ? value.value : undefined;
  };
  const may = (node: unknown): boolean => {
    if (!isObject(node)) return true;
    const children = Array.isArray(node.children) ? node.children : [];
    if (node.type === "CONJUNCTION_AND") return children.every(may);
    if (node.type === "CONJUNCTION_OR") return children.some(may);
    if (node.type === "COMPARE_EQUAL") {
      const [value, constant] = keyValue(node.left) !== undefined ? [keyValue(node.left), literal(node.right)] : [keyValue(node.right), literal(node.left)];
      return value === undefined || constant === undefined || value === constant;
    }
    if (node.type === "COMPARE_IN") {
      const value = keyValue(children[0]);
      const constants = children.slice(1).map(literal);
      return value === undefined || constants.includes(undefined) || constants.includes(value);
    }
    return true;
  };
  return may(filter.where);
}

/** The tables a SELECT reads (CTE names excluded) and Athena's names for its output columns, from DuckDB's parse tree. */
async function parseSelect(connection: DuckDBConnection, select: string): Promise<{ tables: TableRef[]; outputNames?: string[] }> {
  const reader = await connection.runAndReadAll(`SELECT json_serialize_sql(${quoteLiteral(select)})`);
  const tree: unknown = JSON.parse(String(reader.getRowsJS()[0]?.[0] ?? "{}"));
  if (!isObject(tree)) return { tables: [] };
  if (tree.error === true) {
    if (tree.error_type === "parser") throw new QueryFailure(`SYNTAX_ERROR: Parser Error: ${String(tree.error_message)}`);
    return { tables: [] }; // not a plain SELECT tree: DuckDB reports any problem when the query runs
  }
  const ctes = new Set<string>();
  const tables = new Map<string, TableRef>();
  // A table a SELECT reads alone: its rows there are those its WHERE clause passes.
  const filtered = new Map<unknown, PartitionFilter>();
  const visit = (node: unknown): void => {
    if (Array.isArray(node)) {
      node.forEach(visit);
      return;
    }
    if (!isObject(node)) return;
    if (isObject(node.cte_map) && Array.isArray(node.cte_map.map)) {
      for (const entry of node.cte_map.map) if (isObject(entry) && typeof entry.key === "string") ctes.add(entry.key.toLowerCase());
    }
    const from = node.from_table;
    if (node.type === "SELECT_NODE" && isObject(from) && from.type === "BASE_TABLE" && isObject(node.where_clause)) {
      const alias = typeof from.alias === "string" && from.alias !== "" ? from.alias : String(from.table_name);
      filtered.set(from, { where: node.where_clause, qualifiers: [alias.toLowerCase()] });
    }
    if (node.type === "BASE_TABLE" && typeof node.table_name === "string") {
      const ref = { catalog: String(node.catalog_name ?? ""), schema: String(node.schema_name ?? ""), table: node.table_name, filters: [] };
      const known = tables.get(`${ref.catalog}.${ref.schema}.${ref.table}`.toLowerCase()) ?? ref;
      known.filters.push(filtered.get(node) ?? "all");
      tables.set(`${ref.catalog}.${ref.schema}.${ref.table}`.toLowerCase(), known);
    }
    Object.values(node).forEach(visit);
  };
  visit(tree);
  const statements = Array.isArray(tree.statements) ? tree.statements : [];
  if (statements.length !== 1) throw new QueryFailure("SYNTAX_ERROR: exactly one statement is expected");
  return {
    tables: [...tables.values()].filter((t) => t.schema !== "" || !ctes.has(t.table.toLowerCase())),
    outputNames: outputNames(isObject(statements[0]) ? statements[0].node : undefined),
  };
}

/** Trino's output column names: the alias, else the column's name, else `_col<i>`; lowercased. Undefined when a `*` makes them unknowable here. */
function outputNames(node: unknown): string[] | undefined {
  if (!isObject(node)) return undefined;
  if (node.type === "SET_OPERATION_NODE") return outputNames(node.left);
  if (node.type !== "SELECT_NODE" || !Array.isArray(node.select_list)) return undefined;
  const names: string[] = [];
  for (const [index, item] of node.select_list.entries()) {
    if (!isObject(item) || item.class === "STAR") return undefined;
    if (typeof item.alias === "string" && item.alias !== "") names.push(item.alias.toLowerCase());
    else if (item.class === "COLUMN_REF" && Array.isArray(item.column_names)) names.push(String(item.column_names[item.column_names.length - 1]).toLowerCase());
    else names.push(`_col${index}`);
  }
  return names;
}

async function describeQuery(connection: DuckDBConnection, select: string): Promise<{ name: string; type: string }[]> {
  const reader = await connection.runAndReadAll(`DESCRIBE ${select}`);
  return reader.getRowsJS().map((row) => ({ name: String(row[0]), type: String(row[1]) }));
}

/** Runs the SELECT and reads every value as Athena prints it. */
async function selectResult(connection: DuckDBConnection, select: string, names: string[]): Promise<ResultTable> {
  await connection.run(`CREATE TEMP TABLE __athena_result AS ${select}`);
  const described = await describeQuery(connection, "SELECT * FROM temp.main.__athena_result");
  const projections = described.map((c) =>
    /^TIMESTAMP($|\()/.test(c.type) ? `strftime(${quoteIdentifier(c.name)}, '%Y-%m-%d %H:%M:%S.%g')` : `CAST(${quoteIdentifier(c.name)} AS VARCHAR)`,
  );
  const reader = await connection.runAndReadAll(`SELECT ${projections.join(", ") || "1"} FROM temp.main.__athena_result`);
  return {
    columns: described.map((c, i) => ({ name: names[i] ?? c.name, type: c.type })),
    rows: described.length === 0 ? [] : reader.getRowsJS().map((row) => row.map((v) => (v === null ? null : String(v)))),
  };
}

async function prepareSession(connection: DuckDBConnection, database: string): Promise<void> {
  await connection.run("SET integer_division = true");
  // Athena's sessions are in UTC and the Gregorian calendar, whatever the zone and locale of the emulator's machine.
  await connection.run("SET TimeZone = 'UTC'");
  await connection.run("SET Calendar = 'gregorian'");
  await connection.run(`ATTACH ':memory:' AS ${CATALOG}`);
  await connection.run(`CREATE SCHEMA IF NOT EXISTS ${CATALOG}.${quoteIdentifier(database)}`);
  await connection.run(`USE ${CATALOG}.${quoteIdentifier(database)}`);
  for (const macro of ["approx_distinct(x) AS approx_count_distinct(x)", "regexp_like(s, p) AS regexp_matches(s, p)"]) {
    await connection.run(`CREATE OR REPLACE TEMP MACRO ${macro}`).catch(() => undefined);
  }
}

async function parquetColumns(connection: DuckDBConnection, files: string[]): Promise<Map<string, { name: string; type: string }>> {
  const reader = await connection.runAndReadAll(`DESCRIBE SELECT * FROM read_parquet([${files.map(quoteLiteral).join(", ")}], union_by_name = true, hive_partitioning = false)`);
  const columns = new Map<string, { name: string; type: string }>();
  for (const row of reader.getRowsJS()) columns.set(String(row[0]).toLowerCase(), { name: String(row[0]), type: String(row[1]) });
  return columns;
}

/**
 * Whether Trino's Parquet reader reads a file column (its DuckDB type) as the
 * table's Hive type. Trino is strict where DuckDB would cast: an unsigned or
 * HUGEINT column, a TIME or a UUID (16 raw bytes) under `string`, a DOUBLE under
 * a decimal are refused (HIVE_BAD_DATA), not converted.
 */
function parquetReadsAs(fileType: string, hiveType: string): boolean {
  const file = fileType.toUpperCase();
  const hive = hiveType.trim().toLowerCase();
  const widths: Record<string, number> = { TINYINT: 1, SMALLINT: 2, INTEGER: 4, BIGINT: 8 };
  const hiveWidths: Record<string, number> = { tinyint: 1, smallint: 2, int: 4, integer: 4, bigint: 8 };
  if (hive in hiveWidths) return file in widths && (widths[file] ?? 9) <= (hiveWidths[hive] ?? 0);
  const decimal = /^decimal\s*\(\s*(\d+)\s*,\s*(\d+)\s*\)$/.exec(hive);
  if (decimal) {
    const fileDecimal = /^DECIMAL\((\d+),(\d+)\)$/.exec(file);
    return fileDecimal !== null && fileDecimal[2] === decimal[2] && Number(fileDecimal[1]) <= Number(decimal[1]);
  }
  const same: Record<string, string[]> = {
    string: ["VARCHAR"], boolean: ["BOOLEAN"], float: ["FLOAT"], double: ["DOUBLE", "FLOAT"], date: ["DATE"], binary: ["BLOB"],
    timestamp: ["TIMESTAMP", "TIMESTAMP WITH TIME ZONE", "TIMESTAMP_MS", "TIMESTAMP_NS", "TIMESTAMP_S"],
  };
  return same[hive]?.includes(file) ?? true;
}

/**
 * The partition column types Athena reads as another table column type: its documented compatible data types
 * (Athena user guide, "Change a column data type"; BYTE is tinyint). Any other difference between a partition's column
 * and its table's is HIVE_PARTITION_SCHEMA_MISMATCH ("Update tables with partitions").
 */
const PARTITION_COERCIONS: Readonly<Record<string, readonly string[]>> = {
  string: ["tinyint", "smallint", "int", "bigint"],
  tinyint: ["smallint", "int", "bigint"],
  smallint: ["int", "bigint"],
  int: ["bigint"],
  float: ["double"],
};

/** A Hive type as Athena compares them: lowercase, without spaces, `integer` as `int`. */
function hiveTypeName(type: string | undefined): string {
  const name = (type ?? "string").trim().toLowerCase().replace(/\s+/g, "");
  return name === "integer" ? "int" : name;
}

/**
 * Athena's check of one partition's columns against its table's, by name (Parquet is read by name): the first table
 * column the partition declares with a type Athena cannot coerce to the table's, as the query's StateChangeReason.
 */
function partitionSchemaMismatch(table: string, keys: readonly Column[], values: readonly string[], tableColumns: readonly Column[], partitionColumns: readonly Column[]): string | undefined {
  for (const column of tableColumns) {
    const declared = partitionColumns.find((p) => (p.Name ?? "").toLowerCase() === (column.Name ?? "").toLowerCase());
    if (!declared) continue;
    const [from, to] = [hiveTypeName(declared.Type), hiveTypeName(column.Type)];
    if (from === to || PARTITION_COERCIONS[from]?.includes(to)) continue;
    const partition = keys.map((key, i) => `${key.Name ?? ""}=${values[i] ?? ""}`).join("/");
    return (
      "HIVE_PARTITION_SCHEMA_MISMATCH: There is a mismatch between the table and partition schemas. The types are incompatible and cannot be coerced. " +
      `The column '${column.Name ?? ""}' in table '${table}' is declared as type '${column.Type ?? ""}', but partition '${partition}' declared column '${declared.Name ?? ""}' as type '${declared.Type ?? ""}'.`
    );
  }
  return undefined;
}

// ---------------------------------------------------------------------------
// Types, values and names

/** A Hive (Glue) column type as a DuckDB type. */
function duckType(hiveType: string | undefined): string {
  const type = (hiveType ?? "string").trim();
  const lower = type.toLowerCase();
  const simple: Record<string, string> = {
    string: "VARCHAR", boolean: "BOOLEAN", tinyint: "TINYINT", smallint: "SMALLINT", int: "INTEGER", integer: "INTEGER",
    bigint: "BIGINT", float: "FLOAT", double: "DOUBLE", date: "DATE", timestamp: "TIMESTAMP", binary: "BLOB",
  };
  if (simple[lower]) return simple[lower];
  if (/^(varchar|char)\s*(\(\s*\d+\s*\))?$/.test(lower)) return "VARCHAR";
  const decimal = /^decimal\s*(?:\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\))?$/.exec(lower);
  if (decimal) return `DECIMAL(${decimal[1] ?? "10"},${decimal[2] ?? "0"})`;
  const complex = /^(array|map|struct)\s*<([\s\S]*)>$/i.exec(type);
  if (complex) {
    const parts = splitTopLevel(complex[2] ?? "");
    const kind = (complex[1] ?? "").toLowerCase();
    if (kind === "array") return `${duckType(parts[0])}[]`;
    if (kind === "map") return `MAP(${duckType(parts[0])}, ${duckType(parts[1])})`;
    return `STRUCT(${parts
      .map((field) => {
        const colon = field.indexOf(":");
        return `${quoteIdentifier(field.slice(0, colon).trim())} ${duckType(field.slice(colon + 1))}`;
      })
      .join(", ")})`;
  }
  throw new QueryFailure(`NOT_SUPPORTED: the Athena emulator does not know the Hive type '${type}'`);
}

function splitTopLevel(text: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let current = "";
  for (const char of text) {
    if (char === "<" || char === "(") depth += 1;
    if (char === ">" || char === ")") depth -= 1;
    if (char === "," && depth === 0) {
      parts.push(current);
      current = "";
    } else current += char;
  }
  if (current.trim() !== "") parts.push(current);
  return parts;
}

function partitionLiteral(value: string | undefined, key: Column): string {
  if (value === undefined || value === "__HIVE_DEFAULT_PARTITION__") return `CAST(NULL AS ${duckType(key.Type)})`;
  return `CAST(${quoteLiteral(value)} AS ${duckType(key.Type)})`;
}

/** The ColumnInfo Athena gives for a result column of this DuckDB type. */
function columnInfo(name: string, duck: string): ColumnInfo {
  const upper = duck.toUpperCase();
  const decimal = /^DECIMAL\((\d+),(\d+)\)$/.exec(upper);
  const [type, precision] = ((): [string, number] => {
    if (decimal) return ["decimal", Number(decimal[1])];
    if (upper.endsWith("[]")) return ["array", 0];
    if (upper.startsWith("MAP(")) return ["map", 0];
    if (upper.startsWith("STRUCT(")) return ["row", 0];
    const known: Record<string, [string, number]> = {
      VARCHAR: ["varchar", 2147483647], BIGINT: ["bigint", 19], HUGEINT: ["bigint", 19], UBIGINT: ["bigint", 19],
      INTEGER: ["integer", 10], UINTEGER: ["bigint", 19], SMALLINT: ["smallint", 5], USMALLINT: ["integer", 10],
      TINYINT: ["tinyint", 3], UTINYINT: ["smallint", 5], DOUBLE: ["double", 17], FLOAT: ["real", 24],
      BOOLEAN: ["boolean", 0], DATE: ["date", 0], TIMESTAMP: ["timestamp", 3], "TIMESTAMP WITH TIME ZONE": ["timestamp with time zone", 3],
      TIME: ["time", 3], BLOB: ["varbinary", 1073741824], UUID: ["uuid", 0], INTERVAL: ["interval day to second", 0], '"NULL"': ["unknown", 0],
    };
    return known[upper] ?? ["varchar", 2147483647];
  })();
  return {
    CatalogName: "hive",
    SchemaName: "",
    TableName: "",
    Name: name,
    Label: name,
    Type: type,
    Precision: precision,
    Scale: decimal ? Number(decimal[2]) : 0,
    Nullable: "UNKNOWN",
    CaseSensitive: type === "varchar",
  };
}

function parquetCompression(value: string | undefined): string {
  const compression = (value ?? "GZIP").toUpperCase();
  const known: Record<string, string> = { SNAPPY: "snappy", GZIP: "gzip", ZSTD: "zstd", LZ4: "lz4_raw", NONE: "uncompressed", UNCOMPRESSED: "uncompressed" };
  const mapped = known[compression];
  if (!mapped) throw new QueryFailure(`INVALID_TABLE_PROPERTY: Unsupported compression '${compression}' for format PARQUET`);
  return mapped;
}

/** Athena's CSV: every value in double quotes, NULL as an empty unquoted field, header first. */
function toCsv(result: ResultTable): string {
  const quote = (value: string): string => `"${value.replace(/"/g, '""')}"`;
  const lines = [result.columns.map((c) => quote(c.name)).join(",")];
  for (const row of result.rows) lines.push(row.map((v) => (v === null ? "" : quote(v))).join(","));
  return `${lines.join("\n")}\n`;
}

/** Athena's failure reason for a DuckDB (or other) error: an Athena-style code, then the message. */
function athenaReason(error: unknown): string {
  const message = errorMessage(error);
  const rules: [RegExp, string][] = [
    [/^Parser Error/, "SYNTAX_ERROR"],
    [/^Catalog Error: Table with name/, "TABLE_NOT_FOUND"],
    [/^Catalog Error: (Scalar|Aggregate|Table) Function/, "FUNCTION_NOT_FOUND"],
    [/^Binder Error: Referenced column/, "COLUMN_NOT_FOUND"],
    [/^Binder Error/, "SYNTAX_ERROR"],
    [/^Conversion Error/, "INVALID_CAST_ARGUMENT"],
    [/^Out of Range Error/, "NUMERIC_VALUE_OUT_OF_RANGE"],
    [/^(Invalid Input Error|Constraint Error)/, "INVALID_FUNCTION_ARGUMENT"],
  ];
  const code = rules.find(([pattern]) => pattern.test(message))?.[1] ?? "GENERIC_INTERNAL_ERROR";
  return `${code}: ${message}`;
}

function quoteIdentifier(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

function quoteLiteral(value: string): string {
  return `'${value.replace(/'/g, "''")}'`;
}

function uniqueNames(names: string[]): string[] {
  const seen = new Map<string, number>();
  return names.map((name) => {
    const count = seen.get(name) ?? 0;
    seen.set(name, count + 1);
    return count === 0 ? name : `${name}__${count}`;
  });
}

function parseS3Uri(uri: string): { bucket: string; key: string } {
  const match = /^s3:\/\/([^/]+)\/?(.*)$/.exec(uri);
  if (!match) throw new QueryFailure(`INVALID_INPUT: '${uri}' is not an s3:// location`);
  return { bucket: match[1] ?? "", key: match[2] ?? "" };
}

/** A Trino-style query id, the prefix of the files Athena writes: `YYYYMMDD_HHMMSS_NNNNN_xxxxx`. */
function trinoQueryId(at: Date): string {
  const stamp = at.toISOString().replace(/[-:]/g, "").replace("T", "_").slice(0, 15);
  const counter = String(Math.floor(Math.random() * 100000)).padStart(5, "0");
  const suffix = Array.from(randomBytes(5), (b) => "abcdefghijklmnopqrstuvwxyz234567"[b % 32]).join("");
  return `${stamp}_${counter}_${suffix}`;
}

async function listFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true });
  return entries.filter((e) => e.isFile()).map((e) => path.join(e.parentPath, e.name)).sort();
}

function isCancelled(execution: Execution): boolean {
  return execution.state === "CANCELLED";
}

function checkCancelled(execution: Execution): void {
  if (isCancelled(execution)) throw new QueryFailure("cancelled");
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) {
      resolve();
      return;
    }
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve();
    }, { once: true });
  });
}

function isAthenaOperation(name: string): name is AthenaOperation {
  return ["StartQueryExecution", "GetQueryExecution", "GetQueryResults", "GetQueryRuntimeStatistics", "StopQueryExecution", "BatchGetQueryExecution"].includes(name);
}

function errorName(error: unknown): string {
  return error instanceof Error ? error.name : "";
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

