import type { IcebergSchema, Snapshot } from "../../catalog/iceberg/table-metadata.js";
import { declaredTypeOfIceberg, icebergColumnType } from "../../model/column-types.js";
import type { PartitionSnapshot, TableSnapshot } from "../../model/build.js";
import { InvalidInputError, LakeswapError, NotFoundError } from "../../model/errors.js";
import { partitionOfValues, partitionPath } from "../../model/partition.js";
import { isRunId } from "../../model/run-id.js";
import { defineTable, inLayout, storageName, type TableDefinition } from "../../model/table.js";
import { snapshotFiles, type SnapshotFile } from "../commit/iceberg-commit.js";
import { keyOfUrl, latestMetadata } from "../commit/iceberg-pointer.js";
import type { HasLakeParts } from "../parts.js";
import type { SnapshotScope } from "../runs.js";
import type { SyncRecord } from "../sync-record.js";
import { findSync } from "./syncs.js";

/**
 * `lakeswap query --as-of`: a query over earlier snapshots of `iceberg: true` tables. Each table is read as its
 * Iceberg snapshot at that point says (the files of that snapshot, which GC keeps while the snapshot is retained),
 * never as the Hive pointers say now. A sync names, in every table it changed, the snapshot it committed; in a table
 * it did not change, the newest snapshot committed before it ended. A moment names the newest snapshot at or
 * before it.
 */

/** What `--as-of` names: a sync (its id, or `last`), a moment (ms since the epoch), or one snapshot by id. */
export type AsOf =
  | { readonly syncId: string }
  | { readonly atMs: number; readonly text: string }
  | { readonly snapshotId: number };

const TIMESTAMP = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(\.\d{1,3})?)?)?(Z|[+-]\d{2}:?\d{2})?$/;

/** Parses `--as-of`: a sync id or `last`, a snapshot id (digits), or an ISO-8601 timestamp (no zone: UTC; a date alone: its midnight, UTC). */
export function parseAsOf(value: string): AsOf {
  if (value === "last" || isRunId(value)) return { syncId: value };
  if (/^[1-9]\d{0,15}$/.test(value) && Number.isSafeInteger(Number(value))) return { snapshotId: Number(value) };
  const match = TIMESTAMP.exec(value);
  if (match) {
    const [, year, month, day, hour = "00", minute = "00", second = "00", fraction = "", zone = "Z"] = match;
    const offset = zone === "Z" ? zone : `${zone.slice(0, 3)}:${zone.slice(-2)}`;
    const atMs = Date.parse(`${year}-${month}-${day}T${hour}:${minute}:${second}${fraction}${offset}`);
    // Date.parse rolls 2026-02-30 over to March: the day must survive the round trip (in UTC, before the offset).
    const utcDay = new Date(Date.UTC(Number(year), Number(month) - 1, Number(day))).toISOString().slice(0, 10);
    if (Number.isFinite(atMs) && utcDay === `${year}-${month}-${day}` && Number(hour) < 24 && Number(minute) < 60 && Number(second) < 60) return { atMs, text: value };
  }
  throw new InvalidInputError(
    `--as-of '${value}' is neither a sync id (YYYYMMDDTHHMMSSZ-xxxxxx, or last: lakeswap syncs lists them), a timestamp ` +
      "(2026-11-02T14:05:00Z; without a zone, UTC) nor a snapshot id (lakeswap history TABLE --snapshots lists them)",
  );
}

/** Describes an `--as-of` for messages. */
function describeAsOf(asOf: AsOf, sync: SyncRecord | undefined): string {
  if ("syncId" in asOf) return `sync ${sync?.syncId ?? asOf.syncId}`;
  if ("snapshotId" in asOf) return `snapshot ${asOf.snapshotId}`;
  return `${asOf.text} (${new Date(asOf.atMs).toISOString()})`;
}

/**
 * The snapshot of `table` that `asOf` names, among those the table's metadata retains. `sync` is the record of the
 * sync named, when a sync is.
 */
async function snapshotAsOf(lake: HasLakeParts, table: TableDefinition, asOf: AsOf, sync?: SyncRecord): Promise<{ snapshot: Snapshot; schema?: IcebergSchema }> {
  if (!table.iceberg) {
    throw new InvalidInputError(
      `table '${table.name}' is not published as Iceberg (iceberg: true), so lakeswap keeps no earlier state of it to read as of ${describeAsOf(asOf, sync)}; ` +
        "leave it out of the query, or declare iceberg: true for it (its snapshots start at its next sync)",
    );
  }
  const latest = await latestMetadata(lake.parts, table);
  const snapshot = findSnapshot(table, latest?.metadata.snapshots ?? [], asOf, sync);
  return { snapshot, schema: latest?.metadata.schemas.find((s) => s["schema-id"] === snapshot["schema-id"]) };
}

/** The snapshot `asOf` names among a table's `snapshots`: see snapshotAsOf. */
function findSnapshot(table: TableDefinition, retained: readonly Snapshot[], asOf: AsOf, sync?: SyncRecord): Snapshot {
  const snapshots = [...retained].sort((a, b) => a["sequence-number"] - b["sequence-number"]);
  const listed = `lakeswap history ${table.name} --snapshots lists the ones kept`;
  let found: Snapshot | undefined;
  if ("snapshotId" in asOf) {
    found = snapshots.find((s) => s["snapshot-id"] === asOf.snapshotId);
    if (!found) throw new NotFoundError(`table '${table.name}' has no snapshot ${asOf.snapshotId} (never made, or expired by gc); ${listed}`);
    return found;
  }
  if (sync) {
    const recorded = sync.snapshots?.find((s) => s.table === table.name)?.snapshotId;
    found = snapshots.find((s) => s["snapshot-id"] === recorded) ?? snapshots.filter((s) => s.summary["lakeswap.sync-id"] === sync.syncId).at(-1);
    if (found) return found;
    if (sync.moves.some((move) => move.table === table.name)) {
      throw new NotFoundError(
        `no snapshot of table '${table.name}' records sync ${sync.syncId}: gc expired it, or the sync stopped before its commit and the next command ` +
          `committed its moves; ${listed}, and --as-of takes a snapshot id`,
      );
    }
  }
  // A moment: the sync's end (a sync that did not change this table), or the time given.
  const atMs = sync ? Date.parse(sync.finishedAt ?? sync.startedAt) : "atMs" in asOf ? asOf.atMs : Number.NaN;
  found = snapshots.filter((s) => s["timestamp-ms"] <= atMs).at(-1);
  if (!found) {
    const oldest = snapshots[0];
    throw new NotFoundError(
      `table '${table.name}' has no snapshot at or before ${describeAsOf(asOf, sync)}` +
        (oldest ? `: its oldest kept is ${oldest["snapshot-id"]} of ${new Date(oldest["timestamp-ms"]).toISOString()}; ${listed}` : ": it has none yet"),
    );
  }
  return found;
}

/** The partitions of a snapshot as a query reads them: its files grouped by partition, under the run they belong to. */
function snapshotPartitions(lake: HasLakeParts, table: TableDefinition, snapshot: Snapshot, files: readonly SnapshotFile[]): PartitionSnapshot[] {
  const byPartition = new Map<string, { partition: PartitionSnapshot["partition"]; runId: string; files: string[] }>();
  for (const file of files) {
    const key = keyOfUrl(lake.parts.store, file.filePath);
    if (key === undefined) throw new InvalidInputError(`snapshot ${snapshot["snapshot-id"]} of table '${table.name}' names '${file.filePath}', which is not in this lake; lakeswap reads only its own files`);
    const partition = partitionOfValues(table.partitionKeys, table.partitionKeys.map((k) => file.partition[k]));
    const path = partitionPath(partition);
    const entry = byPartition.get(path) ?? { partition, runId: /\/run=([^/]+)\//.exec(key)?.[1] ?? "", files: [] };
    entry.files.push(key);
    byPartition.set(path, entry);
  }
  return [...byPartition.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([, entry]) => entry);
}

/**
 * What a query reads `--as-of`: the snapshot each table in scope had then. A table the query names must be an
 * Iceberg table; when the query's tables cannot be told, every Iceberg table is visible (and no other).
 */
export async function snapshotsAsOf(lake: HasLakeParts, scope: SnapshotScope, asOfText: string): Promise<TableSnapshot[]> {
  const asOf = parseAsOf(asOfText);
  const ctx = lake.parts;
  if (!ctx.engine.capabilities.readsRunFiles) {
    throw new InvalidInputError(
      `query --as-of reads snapshot files with the embedded engine; this lake's engine (Athena) reads tables through the catalog: ` +
        `query the table's Iceberg twin in Athena with FOR VERSION AS OF <snapshot id> (lakeswap history TABLE --snapshots lists the ids)`,
    );
  }
  const sync = "syncId" in asOf ? await findSync(lake, asOf.syncId) : undefined;
  const named = scope.tables !== undefined;
  const tables: TableDefinition[] = [];
  for (const name of named ? [...new Set(scope.tables)].sort() : []) {
    const table = await ctx.catalog.getTable(name);
    if (table) tables.push(table);
  }
  if (!named) tables.push(...(await ctx.catalog.listTables()).filter((t) => t.iceberg));
  const result: TableSnapshot[] = [];
  for (const table of tables) {
    const { snapshot, schema } = await snapshotAsOf(lake, table, asOf, sync);
    const files = await snapshotFiles(lake.parts.store, snapshot);
    const then = asWrittenUnder(asLaidOut(table, files, (url) => keyOfUrl(lake.parts.store, url)), snapshot, schema);
    result.push({ table: then, partitions: snapshotPartitions(lake, then, snapshot, files) });
  }
  return result;
}

/**
 * The table as a snapshot's files lay it out: where its partition keys changed since (a new layout,
 * ../operations/relayout.ts), the keys of the snapshot's partitions and the layout its files are in, so that its
 * partitions are read under the keys they had and from the folder their runs are in.
 */
function asLaidOut(table: TableDefinition, files: readonly SnapshotFile[], keyOf: (url: string) => string | undefined): TableDefinition {
  const first = files[0];
  if (!first) return table;
  const keys = Object.keys(first.partition);
  const storage = keyOf(first.filePath)?.split("/")[0];
  if (keys.join("/") === table.partitionKeys.join("/") && storage === storageName(table)) return table;
  return inLayout(table, storage ?? table.name, keys);
}

/**
 * The table with the columns of the schema a snapshot was committed with (its `schema-id`), not the definition's now:
 * a column added, renamed, retyped or dropped since (or a change rolled back since) reads as it was then. A column
 * keeps its declared type where the definition's has the same Iceberg type, else the type its files hold. Its files are
 * read by column name (they may differ, as after a change in place), a column a file lacks as NULL.
 */
function asWrittenUnder(table: TableDefinition, snapshot: Snapshot, schema: IcebergSchema | undefined): TableDefinition {
  const id = `snapshot ${snapshot["snapshot-id"]} of table '${table.name}'`;
  if (!schema) throw new LakeswapError("STORE_ERROR", `${id} names schema ${snapshot["schema-id"]}, which the table's Iceberg metadata does not hold; it cannot be read as it was`);
  const columns = schema.fields
    .filter((field) => !table.partitionKeys.includes(field.name))
    .map((field) => {
      const type = table.columns.find((c) => c.name === field.name && icebergColumnType(c.type) === field.type)?.type ?? declaredTypeOfIceberg(field.type);
      if (type === undefined) throw new LakeswapError("STORE_ERROR", `${id} has column ${field.name} of Iceberg type '${field.type}', which lakeswap does not read; query it with an Iceberg reader`);
      return { name: field.name, type };
    });
  return defineTable({ ...table, columns, rebuilding: undefined, schemaVersion: Math.max(1, table.schemaVersion ?? 0) });
}

/** One retained Iceberg snapshot of a table, as `lakeswap history TABLE --snapshots` shows it. */
export interface SnapshotHistoryEntry {
  readonly snapshotId: number;
  readonly parentSnapshotId?: number;
  readonly sequenceNumber: number;
  readonly committedAt: string;
  readonly current: boolean;
  /** The lakeswap command that committed it (`sync lakeswap.yaml`, `replace events/day=...`, `recover`, ...). */
  readonly command?: string;
  readonly syncId?: string;
  readonly operation?: string;
  readonly addedFiles: number;
  readonly deletedFiles: number;
  readonly addedRecords: number;
  readonly deletedRecords: number;
  readonly totalFiles: number;
  readonly totalRecords: number;
}

/** The retained snapshots of an `iceberg: true` table, newest first (none before its first commit). */
export async function snapshotHistory(lake: HasLakeParts, tableName: string): Promise<SnapshotHistoryEntry[]> {
  const table = await lake.parts.table(tableName);
  if (!table.iceberg) throw new InvalidInputError(`table '${table.name}' is not published as Iceberg (iceberg: true), so it has no snapshots; lakeswap history ${table.name} lists its runs`);
  const metadata = (await latestMetadata(lake.parts, table))?.metadata;
  if (!metadata) return [];
  const count = (summary: Readonly<Record<string, string>>, key: string): number => Number(summary[key] ?? 0);
  return [...metadata.snapshots]
    .sort((a, b) => b["sequence-number"] - a["sequence-number"])
    .map((s) => ({
      snapshotId: s["snapshot-id"],
      ...(s["parent-snapshot-id"] !== undefined ? { parentSnapshotId: s["parent-snapshot-id"] } : {}),
      sequenceNumber: s["sequence-number"],
      committedAt: new Date(s["timestamp-ms"]).toISOString(),
      current: s["snapshot-id"] === metadata["current-snapshot-id"],
      command: s.summary["lakeswap.command"],
      syncId: s.summary["lakeswap.sync-id"],
      operation: s.summary.operation,
      addedFiles: count(s.summary, "added-data-files"),
      deletedFiles: count(s.summary, "deleted-data-files"),
      addedRecords: count(s.summary, "added-records"),
      deletedRecords: count(s.summary, "deleted-records"),
      totalFiles: count(s.summary, "total-data-files"),
      totalRecords: count(s.summary, "total-records"),
    }));
}
