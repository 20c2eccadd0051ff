// Glue's shapes as lakeswap reads and writes them: a table's stored definition, per-entry errors of batch calls, column
// lists, the inputs of tables, views and partitions, and the pointer a partition is.
import type { Column, ErrorDetail, Partition as GluePartition, PartitionInput, StorageDescriptor, Table as GlueTable, TableInput } from "@aws-sdk/client-glue";
import { glueColumnType, trinoColumnType } from "../model/column-types.js";
import { LakeswapError } from "../model/errors.js";
import { WHOLE_TABLE, makePartition, partitionPath } from "../model/partition.js";
import { isRunId } from "../model/run-id.js";
import { quoteIdentifier } from "../model/sql.js";
import { parseTableDefinition, storageName, type TableDefinition } from "../model/table.js";
import type { Pointer, PointerMove, PointerMoveKind } from "./catalog.js";

/** The table definition lakeswap stored with a Glue table, or undefined for tables it did not create. */
export function definitionOf(table: GlueTable): TableDefinition | undefined {
  const stored = table.Parameters?.["lakeswap.definition"];
  if (!stored) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(stored);
  } catch {
    throw new LakeswapError("STORE_ERROR", `Glue table ${table.Name} has a lakeswap.definition parameter that is not JSON; restore it (lakeswap create-table writes it) or drop the table`);
  }
  return parseTableDefinition(value, `lakeswap.definition of Glue table ${table.Name}`);
}

function sameValues(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}

/** The items whose entries Glue reported as failed, each with its reason (an entry is named by its partition values). */
export function entryErrors<T>(items: readonly T[], valuesOf: (item: T) => readonly string[], errors: readonly { values?: readonly string[]; detail?: ErrorDetail }[]): { item: T; detail?: ErrorDetail }[] {
  return errors.flatMap((error) => {
    const item = items.find((i) => sameValues(valuesOf(i), error.values ?? []));
    return item === undefined ? [] : [{ item, detail: error.detail }];
  });
}

/** Whether two column lists are the same names and types, in the same order. */
export function sameColumns(a: readonly Column[], b: readonly Column[]): boolean {
  return sameValues(a.map((c) => `${c.Name} ${c.Type}`), b.map((c) => `${c.Name} ${c.Type}`));
}

const PARQUET_STORAGE = {
  InputFormat: "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
  OutputFormat: "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
  SerdeInfo: { SerializationLibrary: "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe", Parameters: { "serialization.format": "1" } },
} as const;

/** A Glue table Athena reads as a view (a table switched to another layout of it: viewInput), and the Parameters Athena gives one. */
export const VIEW = "VIRTUAL_VIEW";
export const VIEW_PARAMETERS: readonly string[] = ["presto_view", "comment"];
/** The Parameter naming the table whose layout a Glue table is (GlueCatalog.createLayout). */
export const LAYOUT_OF = "lakeswap.layout_of";

/** Where a table without partition keys points before its first run (and after its pointer is removed): a prefix nothing is written under. */
export const NO_RUN = "_no_run";

/** The Parameters of a pointer: a partition's, or a table's without partition keys. */
const P = { run: "lakeswap.run", previous: "lakeswap.previous_run", signature: "lakeswap.signature", movedBy: "lakeswap.moved_by" } as const;
export const POINTER_PARAMETERS: readonly string[] = Object.values(P);

/** A Parquet StorageDescriptor of the table's columns, as Glue and Athena read them (one mapping of column types for every backend: ../model/column-types.ts). */
export function storageDescriptor(table: TableDefinition, location: string): StorageDescriptor {
  return { Columns: table.columns.map((c) => ({ Name: c.name, Type: glueColumnType(c.type) })), Location: location, ...PARQUET_STORAGE, Compressed: true };
}

/**
 * The Parameters that say what a Glue table is to lakeswap: the definition of the table it is (`lakeswap.definition`,
 * which getTable and listTables read), or, for a layout's own table, the definition of the table as that layout holds
 * it (`lakeswap.layout`) and whose layout it is (`lakeswap.layout_of`): such a table is not listed as a table.
 */
export function declaredParameters(table: TableDefinition): Record<string, string> {
  return storageName(table) === table.name ? { "lakeswap.definition": JSON.stringify(table) } : { "lakeswap.layout": JSON.stringify(table), [LAYOUT_OF]: table.name };
}

/** A new Glue table for `table`, or for the layout it names, with no run yet; `uriOf` gives a store key's s3:// URI. */
export function newTableInput(table: TableDefinition, uriOf: (key: string) => string): TableInput {
  const name = storageName(table);
  return {
    Name: name,
    TableType: "EXTERNAL_TABLE",
    Parameters: { classification: "parquet", EXTERNAL: "TRUE", "parquet.compression": table.compression.toUpperCase(), ...declaredParameters(table) },
    // A table without partition keys reads its Location: an empty prefix until its first run, never the folder its runs are written under.
    StorageDescriptor: storageDescriptor(table, `${uriOf(table.partitionKeys.length === 0 ? `${name}/${NO_RUN}` : name)}/`),
    PartitionKeys: table.partitionKeys.map((key) => ({ Name: key, Type: "string" })),
  };
}

/**
 * The table's own Glue entry (`live`) as an Athena view over the Glue table of its layout: `SELECT *`, the columns and
 * then the partition keys as the layout has them, in Athena's form (`/* Presto View: <base64 JSON> *\/`), with the
 * table's definition. What the entry held as a table stays (its Parameters, the Location of a table without keys).
 */
export function viewInput(table: TableDefinition, database: string, live: GlueTable): TableInput {
  const keys = table.partitionKeys.map((key) => ({ name: key, type: "varchar" }));
  const columns = [...table.columns.map((c) => ({ name: c.name, type: trinoColumnType(c.type) })), ...keys];
  const view = { originalSql: `SELECT * FROM ${quoteIdentifier(database)}.${quoteIdentifier(storageName(table))}`, catalog: "awsdatacatalog", schema: database, columns };
  return {
    Name: table.name,
    TableType: VIEW,
    ViewOriginalText: `/* Presto View: ${Buffer.from(JSON.stringify(view)).toString("base64")} */`,
    ViewExpandedText: "/* Presto View */",
    Parameters: { ...live.Parameters, presto_view: "true", comment: "Presto View", "lakeswap.definition": JSON.stringify(table) },
    StorageDescriptor: { ...live.StorageDescriptor, Columns: [...(storageDescriptor(table, "").Columns ?? []), ...keys.map((k) => ({ Name: k.name, Type: "string" }))] },
    PartitionKeys: [],
  };
}

/** The pointer Parameters of a move: its run, how it moved, the run before and the signature. */
export function pointerParameters(move: PointerMove): Record<string, string> {
  const parameters: Record<string, string> = { [P.run]: move.runId, [P.movedBy]: move.kind };
  if (move.previousRunId) parameters[P.previous] = move.previousRunId;
  if (move.signature) parameters[P.signature] = move.signature;
  return parameters;
}

/** The partition a move writes: its run's location, the columns given, the pointer Parameters. */
export function partitionInput(table: TableDefinition, columns: readonly Column[], move: PointerMove, uriOf: (key: string) => string): PartitionInput {
  const location = `${uriOf(move.location.replace(/\/$/, ""))}/`;
  return { Values: [...move.partition.values], StorageDescriptor: { ...storageDescriptor(table, location), Columns: [...columns] }, Parameters: pointerParameters(move) };
}

/** The pointer a Glue partition is; one that names no lakeswap run is refused. */
export function pointerOf(table: TableDefinition, partition: GluePartition): Pointer {
  const values = partition.Values ?? [];
  // A partition the catalog holds: written before NULL spellings were refused, it must still be read (assertPartitionValue).
  const parsed = makePartition(table.partitionKeys.map((key, i) => [key, values[i] ?? ""] as const), true);
  const parameters = partition.Parameters ?? {};
  const location = partition.StorageDescriptor?.Location ?? "";
  const runId = parameters[P.run] ?? /run=([^/]+)\/?$/.exec(location)?.[1] ?? "";
  if (!isRunId(runId)) {
    throw new LakeswapError("STORE_ERROR", `Glue partition ${table.name}/${partitionPath(parsed)} points to '${location}', which is not a lakeswap run; replace it with lakeswap replace`);
  }
  return { partition: parsed, runId, previousRunId: parameters[P.previous], signature: parameters[P.signature], movedBy: parameters[P.movedBy] as PointerMoveKind | undefined };
}

/** The pointer of a table without partition keys (`live`, as Glue holds it): its own Parameters; none before its first run. */
export function tablePointerOf(table: TableDefinition, live: GlueTable | undefined): Pointer | undefined {
  const parameters = live?.Parameters ?? {};
  const runId = parameters[P.run];
  if (!live || runId === undefined) return undefined;
  if (!isRunId(runId)) throw new LakeswapError("STORE_ERROR", `Glue table ${table.name} names run '${runId}' in its ${P.run} parameter, which is not a run id`);
  return { partition: WHOLE_TABLE, runId, previousRunId: parameters[P.previous], signature: parameters[P.signature], movedBy: parameters[P.movedBy] as PointerMoveKind | undefined };
}
