import { createHash, randomUUID } from "node:crypto";
import { performance } from "node:perf_hooks";
import { fileMetrics, renumberMetrics, widenBounds, type FileMetrics } from "../../catalog/iceberg/file-metrics.js";
import { readContainerFile, readMetrics, summarizePartitions, writeManifest, writeManifestList, type DataFileEntry, type ManifestFileEntry } from "../../catalog/iceberg/manifest-files.js";
import {
  currentSchema,
  currentSnapshot,
  emptyMetadata,
  icebergSchemaFields,
  promotedFields,
  tablePartitionSpec,
  withTableSchema,
  type Snapshot,
  type TableMetadata,
} from "../../catalog/iceberg/table-metadata.js";
import { readFooters } from "../../landing/parquet-footers.js";
import type { FileFacts } from "./file-facts.js";
import { LakeswapError } from "../../model/errors.js";
import { partitionPath, type Partition } from "../../model/partition.js";
import type { TableDefinition } from "../../model/table.js";
import { faultPoint } from "../../shared/faults.js";
import { mapLimited } from "../../shared/map-limited.js";
import type { ObjectStore } from "../../store/object-store.js";
import { icebergManifestKey, icebergManifestListKey } from "../layout.js";
import { assertIcebergSupported, commitMetadata, fileUrl, keyOfUrl, latestMetadata, repairPointer, type LatestMetadata } from "./iceberg-pointer.js";
import { listRunFiles, runPrefix, type LakeContext } from "../runs.js";

/**
 * The Iceberg view of an `iceberg: true` table: after the Hive pointers of a command moved, one snapshot whose data
 * files are exactly the current runs' files, committed as a pointer move of its own under the table's lease
 * (./iceberg-pointer.ts: embedded, `vN.metadata.json` create-exclusive then `version-hint.text` replaced by rename;
 * on Glue, an UpdateTable of the table's ICEBERG table on the VersionId read).
 * A commit is derived from the current pointers alone, so it is idempotent: a command that finds the current
 * snapshot's files already equal to the current runs' does nothing, and one that finds them different (a writer
 * killed between its pointer moves and its commit) commits them. That is how a crash is recovered.
 */

/** Runs listed at once. */
const LISTINGS_AT_ONCE = 8;

/** The summary key that holds a digest of a snapshot's data files (store keys), so a commit knows without reading manifests whether it is needed. */
const FILES_DIGEST = "lakeswap.files-digest";

/** What a context must offer a commit: the ports and the fence of the table's lease. */
export type IcebergContext = Pick<LakeContext, "store" | "catalog" | "landing" | "leaseCheck"> & { readonly fileFacts?: FileFacts };

/** What one Iceberg commit did (a sync's report lists them): the snapshot, its files, and what committing cost. */
export interface IcebergCommit {
  readonly table: string;
  readonly snapshotId: number;
  readonly addedFiles: number;
  readonly deletedFiles: number;
  readonly totalFiles: number;
  /** Metadata files written (a manifest, a manifest list, a metadata file) and their bytes. */
  readonly filesWritten: number;
  readonly bytesWritten: number;
  /** Manifests of the previous snapshot listed again as they are. */
  readonly manifestsReused: number;
  /** Calls that move the table's Iceberg pointer (the version hint; on AWS, Glue). */
  readonly catalogCalls: number;
  /** Wall time of the command's Iceberg work: the check for a view left behind before its work, and the commit after it. */
  readonly ms: number;
}

/** One data file of the current runs: its size, once known (a listed run's; the previous snapshot's; else listed later). */
interface CurrentFile {
  readonly key: string;
  readonly size?: number;
  readonly partition: Partition;
  /** The run's prefix: listed to learn the file's size, when nothing else says it. */
  readonly prefix: string;
}

/** A current file whose size is known. */
type SizedFile = CurrentFile & { readonly size: number };

/** A data file of a snapshot, from its manifests. */
export interface SnapshotFile {
  readonly filePath: string;
  readonly snapshotId: number;
  readonly sequenceNumber: number;
  readonly fileSequenceNumber: number;
  readonly recordCount: number;
  readonly fileSizeInBytes: number;
  readonly partition: Readonly<Record<string, string>>;
  readonly metrics: FileMetrics;
}

/** One manifest of a snapshot: its manifest-list record, its live entries, and whether it holds deleted entries. */
interface SnapshotManifest {
  readonly record: ManifestFileEntry;
  readonly live: readonly SnapshotFile[];
  readonly hasDeleted: boolean;
  /** Its entries' bounds were widened to the current schema's types: it is rewritten, never listed again as it is. */
  readonly widened?: boolean;
}

/** The manifests of a snapshot, read whole. */
async function snapshotManifests(store: ObjectStore, snapshot: Snapshot): Promise<SnapshotManifest[]> {
  const manifests: SnapshotManifest[] = [];
  for (const manifest of await readAvro(store, snapshot["manifest-list"])) {
    const live: SnapshotFile[] = [];
    let hasDeleted = false;
    for (const entry of await readAvro(store, String(manifest.manifest_path))) {
      if (entry.status === 2) {
        hasDeleted = true;
        continue;
      }
      const dataFile = entry.data_file as Record<string, unknown>;
      live.push({
        filePath: String(dataFile.file_path),
        snapshotId: Number(entry.snapshot_id ?? manifest.added_snapshot_id),
        sequenceNumber: Number(entry.sequence_number ?? manifest.sequence_number),
        fileSequenceNumber: Number(entry.file_sequence_number ?? manifest.sequence_number),
        recordCount: Number(dataFile.record_count),
        fileSizeInBytes: Number(dataFile.file_size_in_bytes),
        partition: dataFile.partition as Record<string, string>,
        metrics: readMetrics(dataFile),
      });
    }
    const count = (field: string): number => Number(manifest[field] ?? 0);
    const record: ManifestFileEntry = {
      manifestPath: String(manifest.manifest_path),
      manifestLength: count("manifest_length"),
      partitionSpecId: count("partition_spec_id"),
      sequenceNumber: count("sequence_number"),
      minSequenceNumber: count("min_sequence_number"),
      addedSnapshotId: count("added_snapshot_id"),
      addedFilesCount: count("added_files_count"),
      existingFilesCount: count("existing_files_count"),
      deletedFilesCount: count("deleted_files_count"),
      addedRowsCount: count("added_rows_count"),
      existingRowsCount: count("existing_rows_count"),
      deletedRowsCount: count("deleted_rows_count"),
      partitions: Array.isArray(manifest.partitions)
        ? (manifest.partitions as Record<string, unknown>[]).map((p) => ({
            containsNull: p.contains_null === true,
            lowerBound: Buffer.isBuffer(p.lower_bound) ? p.lower_bound.toString("utf8") : undefined,
            upperBound: Buffer.isBuffer(p.upper_bound) ? p.upper_bound.toString("utf8") : undefined,
          }))
        : undefined,
    };
    manifests.push({ record, live, hasDeleted });
  }
  return manifests;
}

/** The live data files of a snapshot (its manifests' entries that are not deleted). */
export async function snapshotFiles(store: ObjectStore, snapshot: Snapshot): Promise<SnapshotFile[]> {
  return (await snapshotManifests(store, snapshot)).flatMap((m) => m.live);
}

/** The records of an Avro file this lake wrote, named by its file URL. */
async function readAvro(store: ObjectStore, url: string): Promise<Record<string, unknown>[]> {
  const key = keyOfUrl(store, url);
  const stored = key === undefined ? undefined : await store.get(key);
  if (!stored) throw new LakeswapError("STORE_ERROR", `Iceberg file '${url}' is missing from ${store.description}; move the table's metadata folder away and rerun to start its Iceberg history afresh`);
  return (await readContainerFile(stored.body)).records;
}

/**
 * The current runs' data files of a table, from its pointers: named by the pointer where its state names them (the
 * embedded catalog: no listing), else listed with their sizes.
 */
async function currentFiles(ctx: IcebergContext, table: TableDefinition): Promise<CurrentFile[]> {
  const pointers = await ctx.catalog.listPointers(table);
  const listed = await mapLimited(pointers, LISTINGS_AT_ONCE, async (pointer): Promise<CurrentFile[]> => {
    const prefix = runPrefix(ctx.catalog, table, pointer.partition, pointer.runId);
    if (pointer.runFiles) return pointer.runFiles.map((name) => ({ key: `${prefix}${name}`, partition: pointer.partition, prefix }));
    return (await listRunFiles(ctx.store, prefix)).map((file) => ({ ...file, partition: pointer.partition, prefix }));
  });
  return listed.flat().sort((a, b) => (a.key < b.key ? -1 : 1));
}

/** The files with their sizes: from the previous snapshot's entries where it has them, else from a listing of their run. */
async function sized(ctx: IcebergContext, files: readonly CurrentFile[], previous: readonly SnapshotFile[]): Promise<SizedFile[]> {
  const known = new Map(previous.map((f) => [f.filePath, f.fileSizeInBytes]));
  const size = new Map<string, number>();
  for (const file of files) {
    const found = file.size ?? known.get(fileUrl(ctx.store, file.key)) ?? ctx.fileFacts?.size(file.key);
    if (found !== undefined) size.set(file.key, found);
  }
  const unknown = [...new Set(files.filter((f) => !size.has(f.key)).map((f) => f.prefix))];
  for (const listing of await mapLimited(unknown, LISTINGS_AT_ONCE, (prefix) => listRunFiles(ctx.store, prefix))) {
    for (const object of listing) size.set(object.key, object.size);
  }
  return files.map((file) => {
    const bytes = size.get(file.key);
    if (bytes === undefined) throw new LakeswapError("STORE_ERROR", `the current run file '${file.key}' is missing from ${ctx.store.description}; the Iceberg snapshot was not committed (lakeswap history shows the partition's runs)`);
    return { ...file, size: bytes };
  });
}

function filesDigest(files: readonly { readonly key: string }[]): string {
  return createHash("sha256").update(files.map((f) => f.key).join("\n")).digest("hex");
}

/** How many times a commit that lost a race to another writer of the Iceberg table is derived again and retried. */
const COMMIT_ATTEMPTS = 5;

/**
 * Brings a table's Iceberg view in line with its Hive pointers, under the table's lease (the caller holds it):
 * commits one snapshot of the current runs' files unless the current snapshot already has exactly them, and
 * moves the hint to the newest metadata if a killed commit left it behind. A commit that lost a race (another writer
 * moved the catalog's entry first) is derived again from a fresh read, a bounded number of times, and never writes
 * over the other. Returns what the commit did, if it made one.
 */
export async function commitIceberg(ctx: IcebergContext, table: TableDefinition, summary: Readonly<Record<string, string>> = {}): Promise<IcebergCommit | undefined> {
  if (!table.iceberg) return undefined;
  // A rebuild by swap on the way (model/table.ts `rebuilding`: killed, or undone by a rollback) leaves current runs of
  // both shapes, which no one Iceberg schema reads (a retyped column's files under one field id, a renamed column's
  // under one name). The view stays on its last snapshot, the runs before the rebuild (kept by GC as the previous
  // runs), until the command that finishes the rebuild commits: `waitsForRebuild`.
  if (waitsForRebuild(table)) return undefined;
  const started = performance.now();
  assertIcebergSupported(ctx, table);
  for (let attempt = 1; ; attempt += 1) {
    const outcome = await commitOnce(ctx, table, summary, started);
    if (outcome !== "conflict") return outcome;
    if (attempt >= COMMIT_ATTEMPTS) {
      throw new LakeswapError(
        "CONFLICT",
        `the Iceberg table of '${table.name}' was committed by another writer ${attempt} times while lakeswap committed it; its Hive view is current: rerun the command to publish it (nothing was overwritten)`,
        { retryable: true },
      );
    }
    // Jittered, growing: two writers that keep colliding drift apart.
    await new Promise((resolve) => setTimeout(resolve, Math.random() * 50 * attempt));
  }
}

/** Whether the table's Iceberg view waits for a rebuild by swap to finish before its next commit (`commitIceberg`). */
export function waitsForRebuild(table: TableDefinition): boolean {
  return table.rebuilding !== undefined;
}

/** One attempt of `commitIceberg`: read the current metadata, derive the snapshot from the pointers, commit it. */
async function commitOnce(ctx: IcebergContext, table: TableDefinition, summary: Readonly<Record<string, string>>, started: number): Promise<IcebergCommit | undefined | "conflict"> {
  const latest = await latestMetadata(ctx, table);
  const named = await currentFiles(ctx, table);
  // Nothing was ever published and nothing is there (a dropped table, a table not yet loaded).
  if (!latest && named.length === 0) return undefined;
  const digest = filesDigest(named);
  const current = latest && currentSnapshot(latest.metadata);
  if (latest && (current?.summary[FILES_DIGEST] === digest || (current === undefined && named.length === 0))) {
    return commitSchemaOnly(ctx, table, latest);
  }
  faultPoint("before-iceberg-commit");
  const now = Date.now();
  // The table's schema as its definition says now (a new schema where it changed in place since the last commit).
  const base = withTableSchema(latest?.metadata ?? emptyMetadata(table, randomUUID(), fileUrl(ctx.store, table.name), now), table);
  const snapshotId = newSnapshotId(base);
  const sequenceNumber = base["last-sequence-number"] + 1;
  const previous = current ? await previousManifests(ctx.store, base, current) : [];
  const files = await sized(ctx, named, previous.flatMap((m) => m.live));
  const reused = reusableManifests(previous, new Set(files.map((f) => fileUrl(ctx.store, f.key))));
  const inReused = new Set(reused.flatMap((m) => m.live.map((f) => f.filePath)));
  const entries = await manifestEntries(ctx, files.filter((f) => !inReused.has(fileUrl(ctx.store, f.key))), previous.flatMap((m) => m.live).filter((f) => !inReused.has(f.filePath)), { snapshotId, sequenceNumber, metadata: base, table });
  const { bytes, ...snapshot } = await writeSnapshotFiles(ctx.store, table, base, { entries, reused: reused.map((m) => m.record) }, { snapshotId, sequenceNumber, parent: current?.["snapshot-id"], now });
  const added = entries.filter((e) => e.status === 1);
  const deleted = entries.filter((e) => e.status === 2);
  const live = [...entries.filter((e) => e.status !== 2), ...reused.flatMap((m) => m.live)];
  const sum = <T>(list: readonly T[], pick: (e: T) => number): string => String(list.reduce((total, e) => total + pick(e), 0));
  const fullSnapshot: Snapshot = {
    ...snapshot,
    summary: {
      operation: deleted.length === 0 ? "append" : added.length === 0 ? "delete" : "overwrite",
      "added-data-files": String(added.length),
      "deleted-data-files": String(deleted.length),
      "added-records": sum(added, (e) => e.recordCount),
      "deleted-records": sum(deleted, (e) => e.recordCount),
      "added-files-size": sum(added, (e) => e.fileSizeInBytes),
      "removed-files-size": sum(deleted, (e) => e.fileSizeInBytes),
      "total-data-files": String(live.length),
      "total-records": sum(live, (e) => e.recordCount),
      "total-files-size": sum(live, (e) => e.fileSizeInBytes),
      "lakeswap.manifests-reused": String(reused.length),
      "total-delete-files": "0",
      "total-position-deletes": "0",
      "total-equality-deletes": "0",
      ...summary,
      [FILES_DIGEST]: digest,
    },
  };
  const metadata: TableMetadata = {
    ...base,
    "last-sequence-number": sequenceNumber,
    "last-updated-ms": now,
    "current-snapshot-id": snapshotId,
    snapshots: [...base.snapshots, fullSnapshot],
    "snapshot-log": [...base["snapshot-log"], { "snapshot-id": snapshotId, "timestamp-ms": now }],
    "metadata-log": metadataLog(ctx.store, latest),
    refs: { ...base.refs, main: { "snapshot-id": snapshotId, type: "branch" } },
  };
  const written = await commitMetadata(ctx, table, latest, metadata);
  if (written.outcome === "conflict") return "conflict";
  return {
    table: table.name,
    snapshotId,
    addedFiles: added.length,
    deletedFiles: deleted.length,
    totalFiles: live.length,
    filesWritten: 3,
    bytesWritten: bytes + written.bytes,
    manifestsReused: reused.length,
    catalogCalls: written.catalogCalls,
    ms: performance.now() - started,
  };
}

/** The metadata log of the version after `latest`: its log, and `latest` itself. */
function metadataLog(store: ObjectStore, latest: LatestMetadata | undefined): TableMetadata["metadata-log"] {
  if (!latest) return [];
  return [...latest.metadata["metadata-log"], { "metadata-file": fileUrl(store, latest.key), "timestamp-ms": latest.metadata["last-updated-ms"] }];
}

/**
 * Where the current snapshot already holds the current runs' files: a metadata version with the table's schema and
 * no new snapshot, where the schema changed in place since (the Iceberg view's columns follow the Hive view's even
 * before a partition is written again); else only the pointer moved to the newest metadata if a killed commit left it
 * behind. No snapshot is committed either way.
 */
async function commitSchemaOnly(ctx: IcebergContext, table: TableDefinition, latest: LatestMetadata): Promise<undefined | "conflict"> {
  const evolved = withTableSchema(latest.metadata, table);
  if (evolved === latest.metadata) {
    await repairPointer(ctx, table, latest);
    return undefined;
  }
  const written = await commitMetadata(ctx, table, latest, { ...evolved, "last-updated-ms": Date.now(), "metadata-log": metadataLog(ctx.store, latest) });
  return written.outcome === "conflict" ? "conflict" : undefined;
}

/**
 * The manifests of the current snapshot, for the next one. Where a field's type was promoted since that snapshot's
 * schema (int to long, float to double), their files' bounds are widened to the current schema's types and no
 * manifest is listed again as it is (each is rewritten once, with the widened bounds).
 */
async function previousManifests(store: ObjectStore, base: TableMetadata, current: Snapshot): Promise<SnapshotManifest[]> {
  const manifests = await snapshotManifests(store, current);
  const promoted = promotedFields(base.schemas.find((s) => s["schema-id"] === current["schema-id"]), currentSchema(base));
  if (promoted.size === 0) return manifests;
  return manifests.map((m) => ({ ...m, widened: true, live: m.live.map((f) => ({ ...f, metrics: widenBounds(f.metrics, promoted) })) }));
}

/** A snapshot id not used by the table yet: positive, below 2^53 (exact as a JSON number and an Avro long in JavaScript). */
function newSnapshotId(base: TableMetadata): number {
  const used = new Set(base.snapshots.map((s) => s["snapshot-id"]));
  for (;;) {
    const id = Number.parseInt(randomUUID().replace(/-/g, "").slice(0, 13), 16);
    if (id > 0 && !used.has(id)) return id;
  }
}

/**
 * The entries of the new snapshot's one new manifest: the current files that no reused manifest lists (existing ones
 * keep the snapshot and sequence numbers that added them, new ones are added now with their record counts read from
 * their Parquet footers), and the previous snapshot's files that are gone, as deleted.
 */
async function manifestEntries(
  ctx: IcebergContext,
  files: readonly SizedFile[],
  previous: readonly SnapshotFile[],
  at: { readonly snapshotId: number; readonly sequenceNumber: number; readonly metadata: TableMetadata; readonly table: TableDefinition },
): Promise<DataFileEntry[]> {
  const before = new Map(previous.map((f) => [f.filePath, f]));
  const urls = files.map((f) => fileUrl(ctx.store, f.key));
  const fresh = files.filter((_, i) => !before.has(urls[i] as string));
  // Record counts and column metrics as the audit of each new file found them in its footer (keyed by the schema the
  // table's definition derives as first published, so renumbered to the metadata's field ids where the schema has the
  // same columns and types), or from the footer read again.
  const fields = schemaFields(at.metadata);
  const ids = sameColumns(icebergSchemaFields(at.table), fields);
  const facts = new Map(fresh.flatMap((f) => {
    const fact = ids ? ctx.fileFacts?.take(f.key, f.size) : undefined;
    return fact && ids ? [[f.key, { ...fact, metrics: renumberMetrics(fact.metrics, ids) }] as const] : [];
  }));
  const unread = fresh.filter((f) => !facts.has(f.key));
  const footers = unread.length > 0 ? await readFooters(ctx.store, unread) : [];
  unread.forEach((f, i) => {
    const footer = footers[i];
    if (footer) facts.set(f.key, { size: f.size, rows: Number(footer.num_rows), metrics: fileMetrics(footer, fields) });
  });
  const now = new Set(urls);
  const entries: DataFileEntry[] = files.map((file, i) => {
    const url = urls[i] as string;
    const old = before.get(url);
    const partition = partitionValues(file.partition);
    if (old) return { status: 0, snapshotId: old.snapshotId, sequenceNumber: old.sequenceNumber, fileSequenceNumber: old.fileSequenceNumber, filePath: url, partition, recordCount: old.recordCount, fileSizeInBytes: old.fileSizeInBytes, metrics: old.metrics };
    const fact = facts.get(file.key);
    return { status: 1, snapshotId: at.snapshotId, sequenceNumber: at.sequenceNumber, fileSequenceNumber: at.sequenceNumber, filePath: url, partition, recordCount: fact?.rows ?? 0, fileSizeInBytes: file.size, metrics: fact?.metrics };
  });
  // A deleted entry is never read by scan planning, only to tell what a snapshot changed (and which files it removed):
  // it keeps the file's path, partition, counts and size, not its column metrics, which only scan pruning reads.
  for (const old of previous) {
    if (now.has(old.filePath)) continue;
    entries.push({ status: 2, snapshotId: at.snapshotId, sequenceNumber: old.sequenceNumber, fileSequenceNumber: old.fileSequenceNumber, filePath: old.filePath, partition: old.partition, recordCount: old.recordCount, fileSizeInBytes: old.fileSizeInBytes });
  }
  return entries;
}

/** The fields of the table's current schema: what a file's column metrics are keyed by. */
function schemaFields(metadata: TableMetadata): { id: number; name: string; type: string }[] {
  return [...(currentSchema(metadata)?.fields ?? [])];
}

/** Where two schemas have the same fields but for their ids (names, types, order), each field id of `from` to its id in `to`. */
function sameColumns(from: readonly { id: number; name: string; type: string }[], to: readonly { id: number; name: string; type: string }[]): Map<number, number> | undefined {
  if (from.length !== to.length || from.some((f, i) => f.name !== to[i]?.name || f.type !== to[i]?.type)) return undefined;
  return new Map(from.map((f, i) => [f.id, (to[i] as { id: number }).id]));
}

/** Past this many manifests carried over, a snapshot folds them all into its one new manifest (reads stay few). */
const MAX_REUSED_MANIFESTS = 100;

/**
 * The previous snapshot's manifests the new one lists as they are: those whose files are all still current and
 * that hold no deleted entry (a deletion belongs to the snapshot that made it) and need no widened bounds. The others' current files are
 * carried into the new manifest as existing entries.
 */
function reusableManifests(previous: readonly SnapshotManifest[], current: ReadonlySet<string>): SnapshotManifest[] {
  const reusable = previous.filter((m) => !m.hasDeleted && m.widened !== true && m.live.length > 0 && m.live.every((f) => current.has(f.filePath)));
  return reusable.length > MAX_REUSED_MANIFESTS ? [] : reusable;
}

/** A partition's values by key, as strings (what the Hive view reads from the path). */
function partitionValues(partition: Partition): Record<string, string> {
  const values: Record<string, string> = {};
  for (const part of partitionPath(partition).split("/").filter((p) => p.length > 0)) {
    const at = part.indexOf("=");
    values[part.slice(0, at)] = part.slice(at + 1);
  }
  return values;
}

/** Writes a snapshot's manifest and manifest list; returns the snapshot (without its summary). */
async function writeSnapshotFiles(
  store: ObjectStore,
  table: TableDefinition,
  base: TableMetadata,
  manifests: { readonly entries: readonly DataFileEntry[]; readonly reused: readonly ManifestFileEntry[] },
  at: { readonly snapshotId: number; readonly sequenceNumber: number; readonly parent?: number; readonly now: number },
): Promise<Omit<Snapshot, "summary"> & { readonly bytes: number }> {
  const schema = base.schemas.find((s) => s["schema-id"] === base["current-schema-id"]);
  const spec = base["partition-specs"].find((s) => s["spec-id"] === base["default-spec-id"])?.fields ?? tablePartitionSpec(table);
  const partitionFields = spec.map((f) => ({ name: f.name, fieldId: f["field-id"] }));
  // A deleted entry is written under the spec of the new manifest, so one of a file partitioned otherwise (the table's
  // partition keys changed since: lake/operations/relayout.ts) is left out of it; the snapshot's summary still counts it.
  const specKeys = partitionFields.map((f) => f.name).join("/");
  const entries = manifests.entries.filter((e) => e.status !== 2 || Object.keys(e.partition).join("/") === specKeys);
  const manifest = await writeManifest(entries, { schemaJson: JSON.stringify(schema), schemaId: base["current-schema-id"], specJson: JSON.stringify(spec), specId: base["default-spec-id"] }, partitionFields);
  const manifestKey = icebergManifestKey(table.name, randomUUID());
  await store.put(manifestKey, manifest);
  const count = (status: number, field: "files" | "rows"): number => entries.filter((e) => e.status === status).reduce((total, e) => total + (field === "files" ? 1 : e.recordCount), 0);
  const live = entries.filter((e) => e.status !== 2);
  const list = await writeManifestList(
    [
      {
        manifestPath: fileUrl(store, manifestKey),
        manifestLength: manifest.length,
        partitionSpecId: base["default-spec-id"],
        sequenceNumber: at.sequenceNumber,
        minSequenceNumber: live.length > 0 ? Math.min(...live.map((e) => e.sequenceNumber)) : at.sequenceNumber,
        addedSnapshotId: at.snapshotId,
        addedFilesCount: count(1, "files"),
        existingFilesCount: count(0, "files"),
        deletedFilesCount: count(2, "files"),
        addedRowsCount: count(1, "rows"),
        existingRowsCount: count(0, "rows"),
        deletedRowsCount: count(2, "rows"),
        partitions: summarizePartitions(partitionFields.map((f) => f.name), live.map((e) => e.partition)),
      },
      ...manifests.reused,
    ],
    { snapshotId: at.snapshotId, parentSnapshotId: at.parent, sequenceNumber: at.sequenceNumber },
  );
  const listKey = icebergManifestListKey(table.name, at.snapshotId, randomUUID());
  await store.put(listKey, list);
  return {
    "snapshot-id": at.snapshotId,
    ...(at.parent !== undefined ? { "parent-snapshot-id": at.parent } : {}),
    "sequence-number": at.sequenceNumber,
    "timestamp-ms": at.now,
    "manifest-list": fileUrl(store, listKey),
    "schema-id": base["current-schema-id"],
    bytes: manifest.length + list.length,
  };
}
