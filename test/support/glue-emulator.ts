/**
 * A Glue Data Catalog emulator for tests: an HTTP server speaking the AWS JSON
 * 1.1 protocol (`X-Amz-Target: AWSGlue.<Operation>`) that the real
 * `@aws-sdk/client-glue` talks to, with in-memory databases, tables and
 * partitions. It keeps the real API's shapes, limits and error names
 * (EntityNotFoundException, AlreadyExistsException, InvalidInputException,
 * ConcurrentModificationException, per-entry errors of the batch calls), and
 * lets a test inject failures with `failNext`. Test code only.
 */
import type {
  Column,
  Database,
  DatabaseInput,
  ErrorDetail,
  Partition,
  PartitionInput,
  Table,
  TableInput,
} from "@aws-sdk/client-glue";
import http, { type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { CREDENTIALS, HOST, isObject, readText, sendJson, type EmulatorClientConfig, type JsonObject } from "./aws-json.js";

type GlueOperation =
  | "CreateDatabase" | "GetDatabase" | "GetDatabases" | "DeleteDatabase"
  | "CreateTable" | "GetTable" | "GetTables" | "UpdateTable" | "DeleteTable"
  | "CreatePartition" | "GetPartition" | "GetPartitions" | "BatchGetPartition" | "UpdatePartition" | "DeletePartition"
  | "BatchCreatePartition" | "BatchUpdatePartition" | "BatchDeletePartition";

interface GlueFailure {
  /**
   * Batch calls only: the indexes (in the request's list) of the entries that
   * fail, each with `error` (default InternalServiceException) as its
   * ErrorCode; the other entries are applied. BatchGetPartition returns them
   * in UnprocessedKeys instead.
   */
  readonly entries?: readonly number[];
  /** The error name, e.g. ThrottlingException. Without `entries` the whole call fails with it. */
  readonly error?: string;
  readonly message?: string;
  /** How many calls of the operation fail this way (default 1). */
  readonly times?: number;
}

interface GlueCall {
  readonly operation: string;
  readonly input: unknown;
  /** The error the call answered with, if any. */
  readonly error?: string;
}

/** A read-only view of the catalog, in the SDK's own types (copies: changing them changes nothing). */
export interface GlueState {
  databases(): Database[];
  database(name: string): Database | undefined;
  tables(database: string): Table[];
  table(database: string, name: string): Table | undefined;
  partitions(database: string, table: string): Partition[];
  partition(database: string, table: string, values: readonly string[]): Partition | undefined;
}

export interface GlueEmulatorOptions {
  /** Page size of GetPartitions/GetTables/GetDatabases when the request has no MaxResults (default 100). */
  readonly defaultPageSize?: number;
  readonly catalogId?: string;
}

export interface GlueEmulator {
  readonly endpoint: string;
  readonly region: string;
  /** A ready configuration for `new GlueClient(...)`. */
  readonly clientConfig: EmulatorClientConfig;
  readonly state: GlueState;
  /** Every call received, oldest first (including the Athena emulator's own reads). */
  readonly calls: readonly GlueCall[];
  /** How many calls of an operation were received. */
  callCount(operation: GlueOperation): number;
  /** Makes the next call(s) of an operation fail, or some entries of a batch call. */
  failNext(operation: GlueOperation, failure: GlueFailure): void;
  /**
   * Another writer's UpdateTable of `database.table`, applied right before the next UpdateTable of that table is
   * handled, as if it had reached Glue first: `change` gets the table as it is then and returns that writer's
   * TableInput. The table's VersionId moves on, so the next UpdateTable, made with the VersionId read before, fails
   * with ConcurrentModificationException, as on Glue. Logged in `calls` with `racing: true` in its input.
   */
  raceNextUpdate(database: string, table: string, change: (table: Table) => TableInput): void;
  /**
   * Another writer's CreateTable of `database.<input.Name>`, applied right before the next CreateTable of that name is
   * handled (if the table does not exist then), as if it had reached Glue first: that CreateTable then fails with
   * AlreadyExistsException, as on Glue. Logged in `calls` with `racing: true` in its input.
   */
  raceNextCreate(database: string, input: TableInput): void;
  close(): Promise<void>;
}

const REGION = "us-east-1";
const SERVER_ERRORS = new Set(["InternalServiceException", "InternalServerException", "ServiceUnavailableException"]);

class GlueError extends Error {
  constructor(readonly code: string, message: string) {
    super(message);
  }
}

interface TableRecord {
  table: Table;
  partitions: Map<string, Partition>;
}

interface DatabaseRecord {
  database: Database;
  tables: Map<string, TableRecord>;
}

interface PendingFailure {
  entries?: readonly number[];
  error: string;
  message?: string;
  remaining: number;
}

export async function startGlueEmulator(options: GlueEmulatorOptions = {}): Promise<GlueEmulator> {
  const pageSize = options.defaultPageSize ?? 100;
  const catalogId = options.catalogId ?? "123456789012";
  const databases = new Map<string, DatabaseRecord>();
  const calls: GlueCall[] = [];
  const failures = new Map<string, PendingFailure[]>();

  // --- lookups -------------------------------------------------------------

  const getDatabase = (name: unknown): DatabaseRecord => {
    const key = requireString(name, "name").toLowerCase();
    const record = databases.get(key);
    if (!record) throw new GlueError("EntityNotFoundException", `Database ${key} not found.`);
    return record;
  };
  const getTable = (databaseName: unknown, tableName: unknown): TableRecord => {
    const database = getDatabase(databaseName);
    const key = requireString(tableName, "tableName").toLowerCase();
    const record = database.tables.get(key);
    if (!record) throw new GlueError("EntityNotFoundException", `Table ${key} not found.`);
    return record;
  };

  /** The failure injected for this call, if any (consumed). */
  const takeFailure = (operation: string): PendingFailure | undefined => {
    const queue = failures.get(operation);
    const failure = queue?.[0];
    if (!queue || !failure) return undefined;
    failure.remaining -= 1;
    if (failure.remaining <= 0) queue.shift();
    return failure;
  };

  // --- partitions ----------------------------------------------------------

  const newPartition = (table: TableRecord, input: PartitionInput, created?: Date): Partition => {
    const values = partitionValues(input.Values, table);
    // A partition's StorageDescriptor is its own (Location, Columns, ...): an update replaces it whole, never merges the table's in.
    checkColumns(input.StorageDescriptor?.Columns, "partitionInput.storageDescriptor.columns");
    return clean({
      ...input,
      Values: values,
      DatabaseName: table.table.DatabaseName,
      TableName: table.table.Name,
      CreationTime: created ?? new Date(),
      LastAccessTime: toDate(input.LastAccessTime),
      LastAnalyzedTime: toDate(input.LastAnalyzedTime),
      CatalogId: catalogId,
    });
  };

  const createPartition = (table: TableRecord, input: PartitionInput): void => {
    const partition = newPartition(table, input);
    const key = valuesKey(partition.Values ?? []);
    if (table.partitions.has(key)) throw new GlueError("AlreadyExistsException", "Partition already exists.");
    table.partitions.set(key, partition);
  };

  const updatePartition = (table: TableRecord, valueList: unknown, input: PartitionInput): void => {
    const oldKey = valuesKey(partitionValues(valueList, table));
    const existing = table.partitions.get(oldKey);
    if (!existing) throw new GlueError("EntityNotFoundException", "Cannot find partition.");
    const replacement = newPartition(table, { ...input, Values: input.Values ?? existing.Values }, existing.CreationTime);
    const newKey = valuesKey(replacement.Values ?? []);
    if (newKey !== oldKey) {
      if (table.partitions.has(newKey)) throw new GlueError("AlreadyExistsException", "Partition already exists.");
      table.partitions.delete(oldKey);
    }
    table.partitions.set(newKey, replacement);
  };

  const deletePartition = (table: TableRecord, valueList: unknown): void => {
    const key = valuesKey(partitionValues(valueList, table));
    if (!table.partitions.delete(key)) throw new GlueError("EntityNotFoundException", "Cannot find partition.");
  };

  // --- tables ----------------------------------------------------------------

  /** Other writers' UpdateTable calls, by `database.table`, each applied right before the next UpdateTable of that table. */
  const racingUpdates = new Map<string, ((table: Table) => TableInput)[]>();
  const raceKey = (record: TableRecord): string => `${record.table.DatabaseName ?? ""}.${record.table.Name ?? ""}`.toLowerCase();
  const copyOf = <T>(value: T): T => structuredClone(value);

  /** Other writers' CreateTable calls, by `database.table`, each applied right before the next CreateTable of that name. */
  const racingCreates = new Map<string, TableInput[]>();

  /** CreateTable's effect: a table of `tableInput` (its Name lowercased already) at VersionId 0. */
  const createTable = (database: DatabaseRecord, tableInput: TableInput): void => {
    checkColumns(tableInput.StorageDescriptor?.Columns, "tableInput.storageDescriptor.columns");
    const now = new Date();
    database.tables.set(tableInput.Name ?? "", {
      table: clean({
        ...tableInput,
        DatabaseName: database.database.Name,
        CreateTime: now,
        UpdateTime: now,
        LastAccessTime: toDate(tableInput.LastAccessTime),
        LastAnalyzedTime: toDate(tableInput.LastAnalyzedTime),
        IsRegisteredWithLakeFormation: false,
        CatalogId: catalogId,
        VersionId: "0",
      }),
      partitions: new Map(),
    });
  };

  /** UpdateTable's effect: the table becomes `tableInput`, keeping its name, database and creation time, at the next VersionId. */
  const replaceTable = (record: TableRecord, tableInput: TableInput): void => {
    checkColumns(tableInput.StorageDescriptor?.Columns, "tableInput.storageDescriptor.columns");
    const current = record.table;
    record.table = clean({
      ...tableInput,
      Name: current.Name,
      DatabaseName: current.DatabaseName,
      CreateTime: current.CreateTime,
      UpdateTime: new Date(),
      LastAccessTime: toDate(tableInput.LastAccessTime),
      LastAnalyzedTime: toDate(tableInput.LastAnalyzedTime),
      IsRegisteredWithLakeFormation: false,
      CatalogId: catalogId,
      VersionId: String(Number(current.VersionId ?? "0") + 1),
    });
  };

  // --- operations ----------------------------------------------------------

  const operations: Record<GlueOperation, (input: JsonObject, failure: PendingFailure | undefined) => unknown> = {
    CreateDatabase(input) {
      const databaseInput = requireInput<DatabaseInput>(input.DatabaseInput, "databaseInput");
      const name = requireString(databaseInput.Name, "databaseInput.name").toLowerCase();
      if (databases.has(name)) throw new GlueError("AlreadyExistsException", "Database already exists.");
      databases.set(name, {
        database: clean({ ...databaseInput, Name: name, CreateTime: new Date(), CatalogId: catalogId }),
        tables: new Map(),
      });
      return {};
    },
    GetDatabase(input) {
      return { Database: getDatabase(input.Name).database };
    },
    GetDatabases(input) {
      const list = [...databases.values()].map((d) => d.database);
      const page = paginate(list, input.NextToken, input.MaxResults, pageSize, 100);
      return { DatabaseList: page.items, NextToken: page.nextToken };
    },
    DeleteDatabase(input) {
      const record = getDatabase(input.Name);
      databases.delete(record.database.Name ?? "");
      return {};
    },
    CreateTable(input) {
      const database = getDatabase(input.DatabaseName);
      const tableInput = requireInput<TableInput>(input.TableInput, "tableInput");
      const name = requireString(tableInput.Name, "tableInput.name").toLowerCase();
      const race = racingCreates.get(`${database.database.Name ?? ""}.${name}`.toLowerCase())?.shift();
      if (race && !database.tables.has(name)) {
        // Another writer's CreateTable of the same name reached Glue first.
        createTable(database, { ...race, Name: name });
        calls.push({ operation: "CreateTable", input: { DatabaseName: database.database.Name, TableInput: race, racing: true } });
      }
      if (database.tables.has(name)) throw new GlueError("AlreadyExistsException", "Table already exists.");
      createTable(database, { ...tableInput, Name: name });
      return {};
    },
    GetTable(input) {
      return { Table: getTable(input.DatabaseName, input.Name).table };
    },
    GetTables(input) {
      const database = getDatabase(input.DatabaseName);
      let list = [...database.tables.values()].map((t) => t.table);
      if (typeof input.Expression === "string" && input.Expression !== "") {
        const pattern = globPattern(input.Expression);
        list = list.filter((t) => pattern.test(t.Name ?? ""));
      }
      const page = paginate(list, input.NextToken, input.MaxResults, pageSize, 100);
      return { TableList: page.items, NextToken: page.nextToken };
    },
    UpdateTable(input) {
      const tableInput = requireInput<TableInput>(input.TableInput, "tableInput");
      const record = getTable(input.DatabaseName, tableInput.Name);
      const race = racingUpdates.get(raceKey(record))?.shift();
      if (race) {
        // Another writer's UpdateTable reached Glue first: applied as it would be, with its own (current) VersionId.
        const other = race(copyOf(record.table));
        replaceTable(record, other);
        calls.push({ operation: "UpdateTable", input: { DatabaseName: record.table.DatabaseName, TableInput: other, racing: true } });
      }
      const current = record.table;
      if (input.VersionId !== undefined && input.VersionId !== current.VersionId) {
        throw new GlueError("ConcurrentModificationException", `Update table failed due to concurrent modifications: version ${String(input.VersionId)} is not the current version ${current.VersionId}.`);
      }
      replaceTable(record, tableInput);
      return {};
    },
    DeleteTable(input) {
      const database = getDatabase(input.DatabaseName);
      const name = requireString(input.Name, "name").toLowerCase();
      if (!database.tables.delete(name)) throw new GlueError("EntityNotFoundException", `Table ${name} not found.`);
      return {};
    },
    CreatePartition(input) {
      const table = getTable(input.DatabaseName, input.TableName);
      createPartition(table, requireInput<PartitionInput>(input.PartitionInput, "partitionInput"));
      return {};
    },
    GetPartition(input) {
      const table = getTable(input.DatabaseName, input.TableName);
      const partition = table.partitions.get(valuesKey(partitionValues(input.PartitionValues, table)));
      if (!partition) throw new GlueError("EntityNotFoundException", "Cannot find partition.");
      return { Partition: partition };
    },
    GetPartitions(input) {
      const table = getTable(input.DatabaseName, input.TableName);
      let list = [...table.partitions.values()];
      if (typeof input.Expression === "string" && input.Expression.trim() !== "") {
        const predicate = parseExpression(input.Expression, table.table.PartitionKeys ?? []);
        list = list.filter((p) => predicate(p.Values ?? []));
      }
      if (input.Segment !== undefined) {
        const segment = requireObject(input.Segment, "segment");
        const total = requireInteger(segment.TotalSegments, "segment.totalSegments", 1, 10);
        const number = requireInteger(segment.SegmentNumber, "segment.segmentNumber", 0, total - 1);
        list = list.filter((_p, index) => index % total === number);
      }
      if (input.ExcludeColumnSchema === true) {
        list = list.map((p) => (p.StorageDescriptor ? { ...p, StorageDescriptor: { ...p.StorageDescriptor, Columns: undefined } } : p));
      }
      const page = paginate(list, input.NextToken, input.MaxResults, pageSize, 1000);
      return { Partitions: page.items, NextToken: page.nextToken };
    },
    BatchGetPartition(input, failure) {
      const table = getTable(input.DatabaseName, input.TableName);
      const wanted = requireList(input.PartitionsToGet, "partitionsToGet", 1000);
      const partitions: Partition[] = [];
      const unprocessed: { Values: string[] }[] = [];
      wanted.forEach((entry, index) => {
        const values = partitionValues(requireObject(entry, `partitionsToGet.${index + 1}`).Values, table);
        if (failure?.entries?.includes(index)) {
          unprocessed.push({ Values: values });
          return;
        }
        const partition = table.partitions.get(valuesKey(values));
        if (partition) partitions.push(partition);
      });
      return { Partitions: partitions, UnprocessedKeys: unprocessed };
    },
    UpdatePartition(input) {
      const table = getTable(input.DatabaseName, input.TableName);
      updatePartition(table, input.PartitionValueList, requireInput<PartitionInput>(input.PartitionInput, "partitionInput"));
      return {};
    },
    DeletePartition(input) {
      const table = getTable(input.DatabaseName, input.TableName);
      deletePartition(table, input.PartitionValues);
      return {};
    },
    BatchCreatePartition(input, failure) {
      const table = getTable(input.DatabaseName, input.TableName);
      const list = requireList(input.PartitionInputList, "partitionInputList", 100);
      const errors: { PartitionValues: unknown; ErrorDetail: ErrorDetail }[] = [];
      list.forEach((entry, index) => {
        const partitionInput = requireInput<PartitionInput>(entry, `partitionInputList.${index + 1}`);
        const outcome = attempt(failure, index, () => createPartition(table, partitionInput));
        if (outcome) errors.push({ PartitionValues: partitionInput.Values, ErrorDetail: outcome });
      });
      return { Errors: errors };
    },
    BatchUpdatePartition(input, failure) {
      const table = getTable(input.DatabaseName, input.TableName);
      const entries = requireList(input.Entries, "entries", 100);
      const errors: { PartitionValueList: unknown; ErrorDetail: ErrorDetail }[] = [];
      entries.forEach((entry, index) => {
        const item = requireObject(entry, `entries.${index + 1}`);
        const partitionInput = requireInput<PartitionInput>(item.PartitionInput, `entries.${index + 1}.partitionInput`);
        const outcome = attempt(failure, index, () => updatePartition(table, item.PartitionValueList, partitionInput));
        if (outcome) errors.push({ PartitionValueList: item.PartitionValueList, ErrorDetail: outcome });
      });
      return { Errors: errors };
    },
    BatchDeletePartition(input, failure) {
      const table = getTable(input.DatabaseName, input.TableName);
      const list = requireList(input.PartitionsToDelete, "partitionsToDelete", 25);
      const errors: { PartitionValues: unknown; ErrorDetail: ErrorDetail }[] = [];
      list.forEach((entry, index) => {
        const values = requireObject(entry, `partitionsToDelete.${index + 1}`).Values;
        const outcome = attempt(failure, index, () => deletePartition(table, values));
        if (outcome) errors.push({ PartitionValues: values, ErrorDetail: outcome });
      });
      return { Errors: errors };
    },
  };

  // --- HTTP ----------------------------------------------------------------

  const server = http.createServer((req, res) => {
    void handle(req, res);
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const target = String(req.headers["x-amz-target"] ?? "");
    const operation = target.startsWith("AWSGlue.") ? target.slice("AWSGlue.".length) : "";
    let input: unknown;
    try {
      const text = await readText(req);
      input = text === "" ? {} : (JSON.parse(text) as unknown);
    } catch {
      sendJsonError(res, "SerializationException", "Could not parse the request body as JSON");
      return;
    }
    try {
      if (!isGlueOperation(operation)) throw new GlueError("UnknownOperationException", `Operation ${target} is not supported by the Glue emulator`);
      if (!isObject(input)) throw new GlueError("InvalidInputException", "The request body must be a JSON object");
      const failure = takeFailure(operation);
      if (failure && failure.entries === undefined) throw new GlueError(failure.error, failure.message ?? defaultMessage(failure.error));
      const output = operations[operation](input, failure);
      calls.push({ operation, input });
      sendJson(res, 200, output);
    } catch (error) {
      const glueError = error instanceof GlueError ? error : new GlueError("InternalServiceException", String(error));
      calls.push({ operation, input, error: glueError.code });
      sendJsonError(res, glueError.code, glueError.message);
    }
  }

  await new Promise<void>((resolve) => server.listen(0, HOST, resolve));
  const endpoint = `http://${HOST}:${(server.address() as AddressInfo).port}`;

  const copy = <T>(value: T): T => structuredClone(value);
  const state: GlueState = {
    databases: () => [...databases.values()].map((d) => copy(d.database)),
    database: (name) => {
      const record = databases.get(name.toLowerCase());
      return record ? copy(record.database) : undefined;
    },
    tables: (database) => [...(databases.get(database.toLowerCase())?.tables.values() ?? [])].map((t) => copy(t.table)),
    table: (database, name) => {
      const record = databases.get(database.toLowerCase())?.tables.get(name.toLowerCase());
      return record ? copy(record.table) : undefined;
    },
    partitions: (database, table) =>
      [...(databases.get(database.toLowerCase())?.tables.get(table.toLowerCase())?.partitions.values() ?? [])].map(copy),
    partition: (database, table, values) => {
      const partition = databases.get(database.toLowerCase())?.tables.get(table.toLowerCase())?.partitions.get(valuesKey(values));
      return partition ? copy(partition) : undefined;
    },
  };

  return {
    endpoint,
    region: REGION,
    clientConfig: { endpoint, region: REGION, credentials: CREDENTIALS },
    state,
    calls,
    callCount: (operation) => calls.filter((c) => c.operation === operation).length,
    raceNextCreate(database, input) {
      const key = `${database}.${input.Name ?? ""}`.toLowerCase();
      racingCreates.set(key, [...(racingCreates.get(key) ?? []), input]);
    },
    raceNextUpdate(database, table, change) {
      const key = `${database}.${table}`.toLowerCase();
      racingUpdates.set(key, [...(racingUpdates.get(key) ?? []), change]);
    },
    failNext(operation, failure) {
      const queue = failures.get(operation) ?? [];
      queue.push({
        entries: failure.entries,
        error: failure.error ?? "InternalServiceException",
        message: failure.message,
        remaining: failure.times ?? 1,
      });
      failures.set(operation, queue);
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

// ---------------------------------------------------------------------------
// Input checking

function isGlueOperation(name: string): name is GlueOperation {
  return [
    "CreateDatabase", "GetDatabase", "GetDatabases", "DeleteDatabase",
    "CreateTable", "GetTable", "GetTables", "UpdateTable", "DeleteTable",
    "CreatePartition", "GetPartition", "GetPartitions", "BatchGetPartition", "UpdatePartition", "DeletePartition",
    "BatchCreatePartition", "BatchUpdatePartition", "BatchDeletePartition",
  ].includes(name);
}

/** The message Glue's request validation gives (it answers InvalidInputException). */
function validationError(field: string, constraint: string, value?: unknown): GlueError {
  const shown = value === undefined ? "null" : JSON.stringify(value);
  return new GlueError("InvalidInputException", `1 validation error detected: Value '${shown}' at '${field}' failed to satisfy constraint: ${constraint}`);
}

function requireString(value: unknown, field: string): string {
  if (typeof value !== "string") throw validationError(field, "Member must not be null");
  if (value.length < 1 || value.length > 255) throw validationError(field, "Member must have length between 1 and 255", value);
  return value;
}

function requireObject(value: unknown, field: string): JsonObject {
  if (!isObject(value)) throw validationError(field, "Member must not be null");
  return value;
}

/** A request structure, checked to be an object; its fields are checked where they are used. */
function requireInput<T>(value: unknown, field: string): T {
  return requireObject(value, field) as T;
}

function requireList(value: unknown, field: string, max: number): unknown[] {
  if (!Array.isArray(value)) throw validationError(field, "Member must not be null");
  if (value.length > max) {
    throw new GlueError(
      "InvalidInputException",
      `1 validation error detected: Value at '${field}' failed to satisfy constraint: Member must have length less than or equal to ${max}`,
    );
  }
  return value;
}

function requireInteger(value: unknown, field: string, min: number, max: number): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max) {
    throw validationError(field, `Member must have value between ${min} and ${max}`, value);
  }
  return value;
}

/** A StorageDescriptor's Columns as Glue's validation takes them: each with a Name of 1 to 255 characters, a Type of at most 131,072. */
function checkColumns(columns: unknown, field: string): void {
  if (columns === undefined || columns === null) return;
  if (!Array.isArray(columns)) throw validationError(field, "Member must be a list");
  columns.forEach((column: unknown, index) => {
    const at = `${field}.${index + 1}`;
    const { Name, Type } = requireObject(column, at);
    requireString(Name, `${at}.member.name`);
    if (Type !== undefined && (typeof Type !== "string" || Type.length > 131072)) throw validationError(`${at}.member.type`, "Member must have length less than or equal to 131072", Type);
  });
}

function partitionValues(value: unknown, table: TableRecord): string[] {
  if (!Array.isArray(value) || !value.every((v): v is string => typeof v === "string")) {
    throw new GlueError("InvalidInputException", "Partition values must be a list of strings.");
  }
  if (value.some((v) => v.length > 1024)) throw validationError("values", "Member must have length less than or equal to 1024");
  const keys = table.table.PartitionKeys ?? [];
  if (value.length !== keys.length) {
    throw new GlueError("InvalidInputException", "The number of partition keys do not match the number of partition values");
  }
  return [...value];
}

function valuesKey(values: readonly string[]): string {
  return JSON.stringify(values);
}

/** Runs one batch entry: an injected per-entry failure or the entry's own error becomes its ErrorDetail. */
function attempt(failure: PendingFailure | undefined, index: number, work: () => void): ErrorDetail | undefined {
  if (failure?.entries?.includes(index)) {
    return { ErrorCode: failure.error, ErrorMessage: failure.message ?? defaultMessage(failure.error) };
  }
  try {
    work();
    return undefined;
  } catch (error) {
    if (error instanceof GlueError) return { ErrorCode: error.code, ErrorMessage: error.message };
    throw error;
  }
}

function defaultMessage(error: string): string {
  switch (error) {
    case "ThrottlingException":
      return "Rate exceeded";
    case "ConcurrentModificationException":
      return "Update partition failed due to concurrent modifications.";
    case "InternalServiceException":
      return "An internal service error occurred.";
    default:
      return `${error} (injected by the Glue emulator)`;
  }
}

function toDate(value: unknown): Date | undefined {
  if (value instanceof Date) return value;
  if (typeof value === "number") return new Date(value * 1000);
  if (typeof value === "string" && value !== "") return new Date(value);
  return undefined;
}

/** Drops undefined fields, so responses and state carry only what is set. */
function clean<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}

/** GetTables' Expression: a pattern where `*` matches anything (Glue treats it as a regular expression on the name). */
function globPattern(expression: string): RegExp {
  const source = expression.replace(/[.+?^${}()[\]\\]/g, "\\$&").replace(/\*/g, ".*");
  return new RegExp(`^(?:${source})$`, "i");
}

interface Page<T> {
  items: T[];
  nextToken?: string;
}

function paginate<T>(list: readonly T[], token: unknown, maxResults: unknown, defaultSize: number, limit: number): Page<T> {
  let size = defaultSize;
  if (maxResults !== undefined) size = requireInteger(maxResults, "maxResults", 1, limit);
  let offset = 0;
  if (token !== undefined && token !== null && token !== "") {
    const decoded = typeof token === "string" ? /^glue-page:(\d+)$/.exec(Buffer.from(token, "base64").toString("utf8")) : null;
    if (!decoded) throw new GlueError("InvalidInputException", "Invalid continuation token.");
    offset = Number(decoded[1]);
  }
  const items = list.slice(offset, offset + size);
  const next = offset + size;
  return { items, nextToken: next < list.length ? Buffer.from(`glue-page:${next}`, "utf8").toString("base64") : undefined };
}

// ---------------------------------------------------------------------------
// GetPartitions Expression: comparisons of partition keys with literals
// (=, <>, !=, <, <=, >, >=, [NOT] IN (...), BETWEEN ... AND ..., [NOT] LIKE,
// IS [NOT] NULL), combined with AND, OR, NOT and parentheses.

type Token = { kind: "ident" | "string" | "number" | "op" | "punct"; text: string };

function tokenize(expression: string): Token[] {
  const tokens: Token[] = [];
  const pattern = /\s*(?:('(?:[^']|'')*')|(-?\d+(?:\.\d+)?)|(<=|>=|<>|!=|=|<|>)|([(),])|("(?:[^"]|"")+"|`[^`]+`|[A-Za-z_][A-Za-z0-9_]*))/y;
  let position = 0;
  while (position < expression.length) {
    if (/^\s*$/.test(expression.slice(position))) break;
    pattern.lastIndex = position;
    const match = pattern.exec(expression);
    if (!match) throw new GlueError("InvalidInputException", `Unsupported expression '${expression}' at position ${position}`);
    position = pattern.lastIndex;
    if (match[1] !== undefined) tokens.push({ kind: "string", text: match[1].slice(1, -1).replace(/''/g, "'") });
    else if (match[2] !== undefined) tokens.push({ kind: "number", text: match[2] });
    else if (match[3] !== undefined) tokens.push({ kind: "op", text: match[3] });
    else if (match[4] !== undefined) tokens.push({ kind: "punct", text: match[4] });
    else if (match[5] !== undefined) tokens.push({ kind: "ident", text: match[5].replace(/^["`]|["`]$/g, "") });
  }
  return tokens;
}

type Predicate = (values: readonly string[]) => boolean;

function parseExpression(expression: string, keys: readonly Column[]): Predicate {
  const tokens = tokenize(expression);
  let index = 0;
  const fail = (why: string): never => {
    throw new GlueError("InvalidInputException", `Unsupported expression '${expression}': ${why}`);
  };
  const peekWord = (word: string): boolean => tokens[index]?.kind === "ident" && tokens[index]?.text.toUpperCase() === word;
  const takeWord = (word: string): boolean => {
    if (!peekWord(word)) return false;
    index += 1;
    return true;
  };
  const expectPunct = (text: string): void => {
    if (tokens[index]?.kind !== "punct" || tokens[index]?.text !== text) fail(`expected '${text}'`);
    index += 1;
  };
  const literal = (): string => {
    const token = tokens[index];
    if (!token || (token.kind !== "string" && token.kind !== "number")) return fail("expected a literal");
    index += 1;
    return token.text;
  };

  const orExpression = (): Predicate => {
    let left = andExpression();
    while (takeWord("OR")) {
      const a = left;
      const b = andExpression();
      left = (v) => a(v) || b(v);
    }
    return left;
  };
  const andExpression = (): Predicate => {
    let left = notExpression();
    while (takeWord("AND")) {
      const a = left;
      const b = notExpression();
      left = (v) => a(v) && b(v);
    }
    return left;
  };
  const notExpression = (): Predicate => {
    if (takeWord("NOT")) {
      const inner = notExpression();
      return (v) => !inner(v);
    }
    return primary();
  };
  const primary = (): Predicate => {
    const token = tokens[index];
    if (token?.kind === "punct" && token.text === "(") {
      index += 1;
      const inner = orExpression();
      expectPunct(")");
      return inner;
    }
    if (token?.kind !== "ident") return fail("expected a partition key");
    index += 1;
    const position = keys.findIndex((k) => (k.Name ?? "").toLowerCase() === token.text.toLowerCase());
    if (position < 0) return fail(`'${token.text}' is not a partition key`);
    const numeric = /^(tinyint|smallint|int|integer|bigint|float|double|decimal)/i.test(keys[position]?.Type ?? "");
    const compare = (a: string, b: string): number => (numeric ? Number(a) - Number(b) : a < b ? -1 : a > b ? 1 : 0);
    const at = (v: readonly string[]): string | undefined => v[position];

    if (takeWord("IS")) {
      const negated = takeWord("NOT");
      if (!takeWord("NULL")) fail("expected NULL");
      return (v) => (at(v) === undefined || at(v) === "__HIVE_DEFAULT_PARTITION__") !== negated;
    }
    const negated = takeWord("NOT");
    if (takeWord("IN")) {
      expectPunct("(");
      const list = [literal()];
      while (tokens[index]?.text === ",") {
        index += 1;
        list.push(literal());
      }
      expectPunct(")");
      return (v) => list.some((item) => compare(at(v) ?? "", item) === 0) !== negated;
    }
    if (takeWord("BETWEEN")) {
      const low = literal();
      if (!takeWord("AND")) fail("expected AND");
      const high = literal();
      return (v) => (compare(at(v) ?? "", low) >= 0 && compare(at(v) ?? "", high) <= 0) !== negated;
    }
    if (takeWord("LIKE")) {
      const pattern = new RegExp(`^${literal().replace(/[.*+?^${}()|[\]\\]/g, "\\$&").replace(/%/g, ".*").replace(/_/g, ".")}$`, "s");
      return (v) => pattern.test(at(v) ?? "") !== negated;
    }
    if (negated) fail("expected IN, BETWEEN or LIKE after NOT");
    const op = tokens[index];
    if (op?.kind !== "op") return fail("expected a comparison operator");
    index += 1;
    const value = literal();
    const tests: Record<string, (c: number) => boolean> = {
      "=": (c) => c === 0,
      "<>": (c) => c !== 0,
      "!=": (c) => c !== 0,
      "<": (c) => c < 0,
      "<=": (c) => c <= 0,
      ">": (c) => c > 0,
      ">=": (c) => c >= 0,
    };
    const test = tests[op.text] ?? fail(`unknown operator ${op.text}`);
    return (v) => test(compare(at(v) ?? "", value));
  };

  const predicate = orExpression();
  if (index < tokens.length) fail(`unexpected '${tokens[index]?.text ?? ""}'`);
  return predicate;
}

// ---------------------------------------------------------------------------
// AWS JSON 1.1 over HTTP

function sendJsonError(res: ServerResponse, code: string, message: string): void {
  const status = SERVER_ERRORS.has(code) ? 500 : 400;
  sendJson(res, status, { __type: code, Message: message }, { "x-amzn-errortype": `${code}:http://internal.amazon.com/coral/com.amazonaws.glue/` });
}

