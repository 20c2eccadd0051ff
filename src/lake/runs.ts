import type { Catalog, Pointer } from "../catalog/catalog.js";
import type { Engine, PartitionSnapshot, TableSnapshot } from "../engine/engine.js";
import type { Landing } from "../landing/landing.js";
import type { ObjectInfo, ObjectStore } from "../store/object-store.js";
import { manifestKey, manifestsPrefix, runLocation, runsPrefix } from "./layout.js";
import { lakeTables } from "./scratch-tables.js";
import { parseManifest, type RunManifest } from "./manifest.js";
import { parsePartitionPath, partitionPath, type Partition } from "../model/partition.js";
import { isRunId, runIdTime } from "../model/run-id.js";
import { mapLimited } from "../shared/map-limited.js";
import { storageName, type TableDefinition } from "../model/table.js";
import { errorMessage } from "../model/errors.js";

/** The ports the lake's modules work over, and what they share: the outbox, the lease check, the grace window. */
export interface LakeContext {
  readonly store: ObjectStore;
  readonly catalog: Catalog;
  readonly engine: Engine;
  readonly landing: Landing;
  readonly graceMs: number;
  /** Fails unless this process still holds the table's writer lease (checked right before anything is moved or deleted). */
  leaseCheck(table: string): Promise<void>;
}

/** A stored object of a run. */
export interface RunFile {
  readonly key: string;
  readonly size: number;
}

/** One run of a partition, as its folder and its manifest show it. */
export interface RunListing {
  readonly runId: string;
  readonly files: readonly RunFile[];
  /** Folder markers of the run (`…/run=<id>/`): an empty run folder left by a build killed as it started. */
  readonly markers: readonly string[];
  readonly hasManifest: boolean;
}

/** The store key prefix of one run, ending in '/'. */
export function runPrefix(catalog: Pick<Catalog, "capabilities">, table: TableDefinition, partition: Partition, runId: string): string {
  return runLocation(catalog, table, partition, runId);
}

/** A run's file that is not data: '_' and '.' files are hidden, as in Hive. */
function isHiddenRunFile(name: string): boolean {
  return /^[_.]/.test(name);
}

/** The data files under a run prefix: DuckDB names them *.parquet, Athena's UNLOAD gives no extension; hidden files and folder markers aside. */
export async function listRunFiles(store: ObjectStore, prefix: string): Promise<RunFile[]> {
  return (await store.list(prefix)).filter((o) => !o.key.endsWith("/") && !isHiddenRunFile(o.key.slice(prefix.length)));
}

/** A run recorded before (staged, or in an outbox entry) that a pointer is about to move to, and whether it was recorded with no files. */
export interface RecordedRun {
  readonly partition: Partition;
  readonly runId: string;
  readonly recordedEmpty: boolean;
}

/**
 * Whether each recorded run is still there for its pointer to move to (gc may have removed it), from one listing of the
 * partitions' runs (listRunsOf: of the whole table where that takes fewer calls): one with files still has a data file;
 * one of no files is its folder where runs are folders (an embedded lake: gc removes it like any other), and is nothing
 * to look for where they are not (S3: an empty run is no object at all).
 */
export async function runsStillThere(ctx: LakeContext, table: TableDefinition, recorded: readonly RecordedRun[]): Promise<boolean[]> {
  const local = ctx.store.capabilities.localPaths;
  const looked = recorded.filter((r) => !r.recordedEmpty || local);
  const listed = looked.length > 0 ? await listRunsOf(ctx, table, looked.map((r) => r.partition)) : new Map<string, RunListing[]>();
  return recorded.map((r) => {
    if (r.recordedEmpty && !local) return true;
    const prefix = runPrefix(ctx.catalog, table, r.partition, r.runId);
    const run = listed.get(partitionPath(r.partition))?.find((listing) => listing.runId === r.runId);
    return r.recordedEmpty ? run !== undefined : (run?.files ?? []).some((f) => !isHiddenRunFile(f.key.slice(prefix.length)));
  });
}

/** The names of a run's files within its prefix (Pointer.runFiles), or undefined where one is not directly in it. */
export function runFileNames(prefix: string, files: readonly RunFile[]): string[] | undefined {
  const names = files.map((f) => (f.key.startsWith(prefix) ? f.key.slice(prefix.length) : ""));
  return names.every((name) => name !== "" && !name.includes("/")) ? names : undefined;
}

/** The data file keys of one run. */
export async function runFiles(ctx: LakeContext, table: TableDefinition, partition: Partition, runId: string): Promise<string[]> {
  return (await listRunFiles(ctx.store, runPrefix(ctx.catalog, table, partition, runId))).map((f) => f.key);
}

/** Every run of a partition (folders and manifests), oldest first. */
export async function listRuns(ctx: LakeContext, table: TableDefinition, partition: Partition): Promise<RunListing[]> {
  const prefix = runsPrefix(ctx.catalog, table, partition);
  const manifests = manifestsPrefix(storageName(table), partition);
  // The run folders and the manifests are listed at once.
  const [objects, records] = await Promise.all([ctx.store.list(prefix), ctx.store.list(manifests)]);
  return runsListed(prefix, objects, manifests, records);
}

/** From this many partitions on, a remote store's listing of the whole table may take fewer calls than two per partition. */
const WHOLE_TABLE_FROM = 8;
/** Keys per page of a remote listing (S3's ListObjectsV2). */
const KEYS_PER_PAGE = 1000;

/**
 * Every run of each of `partitions` (as listRuns), by partition path. Where a listing is a remote call and the
 * partitions are many, the table's run folders and manifests are listed once each (one call per thousand keys) rather
 * than twice per partition; if that would take more calls than the partitions' own listings, those are made instead.
 */
export async function listRunsOf(ctx: LakeContext, table: TableDefinition, partitions: readonly Partition[]): Promise<Map<string, RunListing[]>> {
  if (!ctx.store.capabilities.localPaths && partitions.length >= WHOLE_TABLE_FROM) {
    const listed = await listWholeTable(ctx, table, partitions);
    if (listed) return listed;
  }
  const runs = await mapLimited(partitions, 16, (partition) => listRuns(ctx, table, partition));
  return new Map(partitions.map((partition, i) => [partitionPath(partition), runs[i] ?? []]));
}

/** listRunsOf from one listing of the table's run folders and one of its manifests; undefined where they hold too many keys. */
async function listWholeTable(ctx: LakeContext, table: TableDefinition, partitions: readonly Partition[]): Promise<Map<string, RunListing[]> | undefined> {
  // At most as many pages as the partitions' own listings would make calls, both listings together.
  const atMost = partitions.length * KEYS_PER_PAGE;
  const [objects, records] = await Promise.all([ctx.store.list(runsPrefix(ctx.catalog, table), { atMost }), ctx.store.list(manifestsPrefix(storageName(table)), { atMost })]);
  if (objects.length + records.length > atMost) return undefined;
  return runsOfListing(ctx, table, partitions, objects, records);
}

/**
 * The runs of each of `partitions` (as listRuns gives them), by partition path, from a listing of the whole table's run
 * folders (`objects`, under `runsPrefix(table)`) and one of its manifests (`records`).
 */
export function runsOfListing(ctx: Pick<LakeContext, "catalog">, table: TableDefinition, partitions: readonly Partition[], objects: readonly ObjectInfo[], records: readonly ObjectInfo[]): Map<string, RunListing[]> {
  const root = runsPrefix(ctx.catalog, table);
  const listed = partitions.map((partition) => ({ partition, prefix: runsPrefix(ctx.catalog, table, partition), manifests: manifestsPrefix(storageName(table), partition), objects: [] as ObjectInfo[], records: [] as ObjectInfo[] }));
  const byPrefix = new Map(listed.map((p) => [p.prefix, p]));
  const byManifests = new Map(listed.map((p) => [p.manifests, p]));
  const depth = table.partitionKeys.length;
  for (const object of objects) {
    // A run's objects sit in its partition's folder: one folder below the table's per partition key.
    let end = root.length;
    for (let level = 0; level < depth && end > 0; level++) end = object.key.indexOf("/", end) + 1;
    if (end > 0) byPrefix.get(object.key.slice(0, end))?.objects.push(object);
  }
  for (const record of records) byManifests.get(record.key.slice(0, record.key.lastIndexOf("/") + 1))?.records.push(record);
  return new Map(listed.map((p) => [partitionPath(p.partition), runsListed(p.prefix, p.objects, p.manifests, p.records)]));
}

/** The runs of one partition, oldest first, from the listings of its run folders (`prefix`) and its manifests (`manifests`). */
function runsListed(prefix: string, objects: readonly ObjectInfo[], manifests: string, records: readonly ObjectInfo[]): RunListing[] {
  const runs = new Map<string, { files: RunFile[]; markers: string[]; hasManifest: boolean }>();
  const entry = (runId: string) => {
    let run = runs.get(runId);
    if (!run) runs.set(runId, (run = { files: [], markers: [], hasManifest: false }));
    return run;
  };
  for (const object of objects) {
    const folder = object.key.slice(prefix.length).split("/")[0] ?? "";
    const runId = folder.replace(/^run=/, "");
    if (!folder.startsWith("run=") || !isRunId(runId)) continue;
    if (object.key.endsWith("/")) entry(runId).markers.push(object.key);
    else entry(runId).files.push(object);
  }
  for (const object of records) {
    const name = object.key.slice(manifests.length);
    const runId = name.replace(/\.json$/, "");
    if (!name.includes("/") && isRunId(runId)) entry(runId).hasManifest = true;
  }
  return [...runs.entries()]
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([runId, run]) => ({ runId, files: run.files, markers: run.markers, hasManifest: run.hasManifest }));
}

export async function readManifest(store: ObjectStore, table: TableDefinition, partition: Partition, runId: string): Promise<RunManifest | undefined> {
  const key = manifestKey(storageName(table), partition, runId);
  const stored = await store.get(key);
  return stored ? parseManifest(stored.body, key) : undefined;
}

export async function writeManifest(store: ObjectStore, table: TableDefinition, partition: Partition, manifest: RunManifest): Promise<void> {
  await store.put(manifestKey(storageName(table), partition, manifest.runId), `${JSON.stringify(manifest, null, 2)}\n`);
}

/** The manifest of the current run; rebuilt from its files if the process died between swap and manifest. */
export async function ensureManifest(ctx: LakeContext, table: TableDefinition, pointer: Pointer): Promise<RunManifest> {
  const existing = await readManifest(ctx.store, table, pointer.partition, pointer.runId);
  if (existing) return existing;
  const files = await listRunFiles(ctx.store, runPrefix(ctx.catalog, table, pointer.partition, pointer.runId));
  const manifest: RunManifest = {
    format: 1,
    table: table.name,
    partition: partitionPath(pointer.partition),
    runId: pointer.runId,
    rows: await ctx.engine.countRows(table, { partition: pointer.partition, runId: pointer.runId, files: files.map((f) => f.key) }),
    files,
    bytes: files.reduce((sum, f) => sum + f.size, 0),
    previousRunId: pointer.previousRunId,
    signature: pointer.signature,
    builtAt: runIdTime(pointer.runId).toISOString(),
    swappedAt: new Date().toISOString(),
    buildSeconds: 0,
    recovered: true,
  };
  await writeManifest(ctx.store, table, pointer.partition, manifest);
  return manifest;
}

/** Which tables (and which of their partitions) a listing of current runs covers. */
export interface SnapshotScope {
  /** Only these tables (default: every table); a named table that does not exist is left out. */
  readonly tables?: readonly string[];
  /** Only these partitions of some tables. */
  readonly partitions?: readonly { readonly table: string; readonly partitions: readonly string[] }[];
  /** List each run's files (store keys; default true); without, every run's `files` is empty. */
  readonly files?: boolean;
  /**
   * Tables read without their lease (another writer's: a lookup, an ingested raw table), with how their pointers are
   * listed at a state a finished batch left (./settled-pointers.ts), never halfway through the writer's moves.
   */
  readonly settled?: { readonly tables: readonly string[]; readonly pointers: (table: TableDefinition) => Promise<Pointer[]> };
}

/** Run folders listed at once. */
const LISTINGS_AT_ONCE = 8;

/**
 * The current run of every partition in scope, from one listing of each table's pointers, with each run's
 * files: the one listing of current runs (queries, builds, upsert merges, sinks, `lakeswap tables`). A run
 * without files (an emptied partition) is listed too.
 */
export async function currentRuns(ctx: LakeContext, scope: SnapshotScope = {}): Promise<TableSnapshot[]> {
  const tables = scope.tables !== undefined ? await tablesNamed(ctx, scope.tables) : await lakeTables(ctx.catalog);
  const snapshots: TableSnapshot[] = [];
  for (const table of tables) {
    const limit = scope.partitions?.find((l) => l.table === table.name);
    const pointers = await pointersInScope(ctx, table, limit?.partitions, scope.settled);
    const partitions = await mapLimited(pointers, LISTINGS_AT_ONCE, async (pointer): Promise<PartitionSnapshot> => ({
      partition: pointer.partition,
      runId: pointer.runId,
      ...(pointer.signature !== undefined ? { signature: pointer.signature } : {}),
      // The run's files as the pointer's state names them (the embedded catalog), else listed.
      files: scope.files === false ? [] : pointer.runFiles ? pointer.runFiles.map((name) => `${runPrefix(ctx.catalog, table, pointer.partition, pointer.runId)}${name}`) : await runFiles(ctx, table, pointer.partition, pointer.runId),
    }));
    snapshots.push({ table, partitions });
  }
  return snapshots;
}

/** The pointers of a table a listing of current runs covers: only some partitions (`wanted`), or all; settled where the scope says. */
async function pointersInScope(ctx: LakeContext, table: TableDefinition, wanted: readonly string[] | undefined, settled: SnapshotScope["settled"]): Promise<Pointer[]> {
  if (settled?.tables.includes(table.name)) {
    const all = await settled.pointers(table);
    const set = wanted && new Set(wanted);
    return set ? all.filter((p) => set.has(partitionPath(p.partition))) : all;
  }
  if (!wanted) return ctx.catalog.listPointers(table);
  // Only some partitions (a build's inputs): read one by one where they are a few, as a swap reads its own.
  const limited = await currentPointers(ctx, table, wanted.map((p) => parsePartitionPath(p, table.partitionKeys)));
  return [...limited.values()].sort((a, b) => (partitionPath(a.partition) < partitionPath(b.partition) ? -1 : 1));
}

/**
 * What the engine reads of the tables in scope: their current runs, resolved once so a query reads one
 * consistent state. An engine that reads tables through the catalog (Athena) gets no file listing; one that
 * reads files gets the runs that have some.
 */
export async function engineSnapshot(ctx: LakeContext, scope: SnapshotScope): Promise<TableSnapshot[]> {
  const files = ctx.engine.capabilities.readsRunFiles;
  const snapshots = await currentRuns(ctx, { ...scope, files });
  return files ? snapshots.map((s) => ({ table: s.table, partitions: s.partitions.filter((p) => p.files.length > 0) })) : snapshots;
}

/** The definitions of the named tables that exist, read one by one (never another table's definition). */
async function tablesNamed(ctx: LakeContext, names: readonly string[]): Promise<TableDefinition[]> {
  const tables: TableDefinition[] = [];
  for (const name of [...new Set(names)].sort()) {
    const table = await ctx.catalog.getTable(name);
    if (table) tables.push(table);
  }
  return tables;
}

/** The pointers of the given partitions: one listing of the table's pointers for a batch, single reads for a few. */
export async function currentPointers(ctx: Pick<LakeContext, "catalog">, table: TableDefinition, partitions: readonly Partition[]): Promise<Map<string, Pointer>> {
  const pointers = new Map<string, Pointer>();
  if (partitions.length <= 4) {
    for (const partition of partitions) {
      const pointer = await ctx.catalog.getPointer(table, partition);
      if (pointer) pointers.set(partitionPath(partition), pointer);
    }
    return pointers;
  }
  const wanted = new Set(partitions.map(partitionPath));
  for (const pointer of await ctx.catalog.listPointers(table)) {
    const path = partitionPath(pointer.partition);
    if (wanted.has(path)) pointers.set(path, pointer);
  }
  return pointers;
}

/** Best-effort removal of a run that will never be current (GC removes it later if this fails). */
export async function discardRun(ctx: LakeContext, prefix: string): Promise<void> {
  try {
    const objects = await ctx.store.list(prefix);
    // The prefix itself too: where the store has folders, the run's empty folder goes with its files.
    await ctx.store.delete([...objects.map((o) => o.key), prefix]);
  } catch (error) {
    process.emitWarning(`could not remove the unused run ${prefix}: ${errorMessage(error)}; lakeswap gc will`);
  }
}
