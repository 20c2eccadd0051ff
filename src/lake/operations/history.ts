import { NotFoundError } from "../../model/errors.js";
import { manifestsPrefix, runsPrefix } from "../layout.js";
import { parsePartitionPath, partitionPath, type Partition } from "../../model/partition.js";
import { runIdTime } from "../../model/run-id.js";
import { listRuns, readManifest, runsOfListing, type LakeContext, type RunListing } from "../runs.js";
import { storageName, type TableDefinition } from "../../model/table.js";
import { partitionOf, type HasLakeParts, type PartitionInput } from "../parts.js";
import { listSyncs } from "./syncs.js";

/** One run in a partition's history. */
export interface RunHistoryEntry {
  readonly runId: string;
  readonly createdAt: string;
  readonly rows?: number;
  readonly bytes: number;
  readonly state: "current" | "previous" | "completed" | "incomplete";
  readonly signature?: string;
}

/** A partition's runs, newest first. */
export interface PartitionHistory {
  readonly table: string;
  readonly partition: string;
  readonly currentRunId?: string;
  readonly runs: readonly RunHistoryEntry[];
}

/**
 * Partitions of a table that have a pointer, runs or manifests, and the runs of each, from one listing of the table's
 * run folders and one of its manifests.
 */
export async function knownPartitions(ctx: LakeContext, table: TableDefinition): Promise<{ partitions: Partition[]; runs: Map<string, RunListing[]> }> {
  const paths = new Set<string>();
  for (const pointer of await ctx.catalog.listPointers(table)) paths.add(partitionPath(pointer.partition));
  const depth = table.partitionKeys.length;
  const collect = (prefix: string, keys: readonly { key: string }[]): void => {
    for (const { key } of keys) {
      const parts = key.slice(prefix.length).split("/");
      // Partition folders only (`day=…`): an Iceberg table's `metadata/` folder sits beside them on S3.
      if (parts.length > depth && table.partitionKeys.every((name, i) => parts[i]?.startsWith(`${name}=`))) paths.add(parts.slice(0, depth).join("/"));
    }
  };
  const [runsRoot, manifestsRoot] = [runsPrefix(ctx.catalog, table), manifestsPrefix(storageName(table))];
  const [objects, records] = await Promise.all([ctx.store.list(runsRoot), ctx.store.list(manifestsRoot)]);
  collect(runsRoot, objects);
  collect(manifestsRoot, records);
  const partitions = [...paths].sort().map((path) => parsePartitionPath(path, table.partitionKeys));
  return { partitions, runs: runsOfListing(ctx, table, partitions, objects, records) };
}

/** The runs of the given partitions, newest first; a named partition without runs is a NotFoundError. */
async function partitionHistories(ctx: LakeContext, table: TableDefinition, partitions: readonly Partition[], named: boolean, listed?: ReadonlyMap<string, readonly RunListing[]>): Promise<PartitionHistory[]> {
  const histories: PartitionHistory[] = [];
  for (const partition of partitions) {
    const pointer = await ctx.catalog.getPointer(table, partition);
    const runs = listed?.get(partitionPath(partition)) ?? (await listRuns(ctx, table, partition));
    const entries: RunHistoryEntry[] = [];
    for (const run of [...runs].reverse()) {
      if (run.files.length === 0) continue;
      const manifest = run.hasManifest ? await readManifest(ctx.store, table, partition, run.runId) : undefined;
      const state =
        run.runId === pointer?.runId ? "current"
        : run.runId === pointer?.previousRunId ? "previous"
        : manifest ? "completed" : "incomplete";
      entries.push({
        runId: run.runId,
        createdAt: runIdTime(run.runId).toISOString(),
        rows: manifest?.rows,
        bytes: run.files.reduce((sum, f) => sum + f.size, 0),
        state,
        signature: manifest?.signature,
      });
    }
    if (named && entries.length === 0) throw new NotFoundError(`partition ${table.name}/${partitionPath(partition)} has no runs`);
    histories.push({ table: table.name, partition: partitionPath(partition), currentRunId: pointer?.runId, runs: entries });
  }
  return histories;
}

/** The runs of one partition, or of every partition of a table, newest first. */
export async function readHistory(lake: HasLakeParts, tableName: string, partitionInput?: PartitionInput): Promise<PartitionHistory[]> {
  const table = await lake.parts.table(tableName);
  if (partitionInput !== undefined) return partitionHistories(lake.parts, table, [partitionOf(table, partitionInput, true)], true);
  const { partitions, runs } = await knownPartitions(lake.parts, table);
  return partitionHistories(lake.parts, table, partitions, false, runs);
}

/** One change of a table's schema, as the sync (or create-table) that made it recorded it. */
export interface SchemaHistoryEntry {
  /** The sync that made the change (a create-table's own record, with no moves, for a change outside a sync). */
  readonly syncId: string;
  readonly changedAt: string;
  /** What made it: the sync's config file, or `create-table <table>`. */
  readonly by: string;
  readonly fromVersion: number;
  readonly toVersion: number;
  /** The changes in words, as plan and the sync's report said them. */
  readonly changes: readonly string[];
  /**
   * Made in place (no run rewritten), by a rebuild by swap (`sync --rebuild-schema`: every run rewritten), or in a new
   * layout (the partition keys changed: built aside, then switched to).
   */
  readonly how: "in place" | "rebuilt by swap" | "new layout";
  /** The columns after the change, `name TYPE`. */
  readonly columns: readonly string[];
  /** The partition keys after the change. */
  readonly partitionKeys: readonly string[];
  /** The table's definition is this change's now (false once a later change or a rollback replaced it). */
  readonly current: boolean;
}

/** A table's schema now and the changes that led to it, newest first. */
export interface SchemaHistory {
  readonly table: string;
  readonly version: number;
  readonly columns: readonly string[];
  readonly changes: readonly SchemaHistoryEntry[];
}

/**
 * The schema changes of a table, newest first, from the records of the syncs (and create-table commands) that made
 * them; the table's current schema version and columns. Unreadable sync records are left out, as `lakeswap syncs` does.
 */
export async function readSchemaHistory(lake: HasLakeParts, tableName: string): Promise<SchemaHistory> {
  const table = await lake.parts.table(tableName);
  const columns = (definition: TableDefinition) => definition.columns.map((c) => `${c.name} ${c.type}`);
  const now = JSON.stringify(columns(table));
  const changes = (await listSyncs(lake, { skipUnreadable: true })).flatMap((record) =>
    (record.schemaChanges ?? [])
      .filter((change) => change.table === table.name)
      .map((change): SchemaHistoryEntry => ({
        syncId: record.syncId,
        changedAt: runIdTime(record.syncId).toISOString(),
        by: record.config,
        fromVersion: change.previous.schemaVersion ?? 0,
        toVersion: change.definition.schemaVersion ?? 0,
        changes: change.changes,
        how: change.relayout ? "new layout" : change.rebuilt ? "rebuilt by swap" : "in place",
        columns: columns(change.definition),
        partitionKeys: change.definition.partitionKeys,
        current: false,
      })),
  );
  // The newest change whose columns the table has now is the current one (a rollback of it brings back the one before).
  const keys = table.partitionKeys.join(",");
  const current = changes.findIndex((entry) => entry.toVersion === (table.schemaVersion ?? 0) && JSON.stringify(entry.columns) === now && entry.partitionKeys.join(",") === keys);
  return {
    table: table.name,
    version: table.schemaVersion ?? 0,
    columns: columns(table),
    changes: changes.map((entry, i) => (i === current ? { ...entry, current: true } : entry)),
  };
}
