import type { CatalogCapabilities } from "../catalog/catalog.js";
import { partitionPath, type Partition } from "../model/partition.js";
import { ingestedInPlace, storageName, type TableDefinition } from "../model/table.js";

/**
 * Every store key lakeswap uses, in one place: its own records and the runs' folders. The records all
 * live under `_lakeswap/` in the lake's own store, never under a table's
 * location, so a plain reader's glob never sees them, and on S3 they are as
 * durable as the runs they describe. This file is the only one that spells that folder: the embedded
 * adapters are handed it (`METADATA_FOLDERS`).
 */
const METADATA_PREFIX = "_lakeswap";

/** Temporary files of a writer (staged runs, new links, atomic writes); a dead writer's are removed by the next open. */
export const TEMP_PREFIX = `${METADATA_PREFIX}/tmp`;

/** The folders the embedded adapters (local store, local catalog) keep lakeswap's records and temporary files in. */
export const METADATA_FOLDERS = {
  metadata: METADATA_PREFIX,
  temp: TEMP_PREFIX,
  // The areas below that keep a folder per table (`<area>/<table>/`), removed with the table.
  tableAreas: ["manifests", "pins", "outbox", "deliveries", "ingest", "layouts"],
  // Writer leases: worth something only while their holder lives (written without fsync; ../store/local-store.ts).
  volatile: [`${METADATA_PREFIX}/leases`],
} as const;

/** The catalog file for plain readers at the embedded lake's root (../catalog/catalog-file.ts): `duckdb -readonly lake/lake.duckdb`. */
export const CATALOG_FILE = "lake.duckdb";

/** The file whose kernel lock orders the catalog file's updates across processes. */
export const CATALOG_FILE_LOCK = `${METADATA_PREFIX}/catalog-file.lock`;

/** What the catalog file shows of each table, kept beside it so that a command that moved nothing need not open it. */
export const CATALOG_FILE_STATES = `${METADATA_PREFIX}/catalog-file-states.json`;

/**
 * The lake's identity, `{"id": "<uuid>"}`, written once by the first command that needs it (./lake-identity.ts): it
 * stays with the lake's folder or prefix when that is moved or copied, and tells two lakes apart where both write to
 * one place outside them (a PostgreSQL target's state rows).
 */
export const LAKE_ID_KEY = `${METADATA_PREFIX}/lake-id.json`;

/** Where runs go when the catalog's pointers sit at the partitions' own paths (`pointersInStore`): `<table>/_runs/<partition path>/`. */
const RUNS_BESIDE_POINTERS = "_runs";

/**
 * The store key prefix under which the runs of `partition` (or of every partition) live, ending in '/':
 * `<table>/<partition path>/` as Hive lays them out, or `<table>/_runs/<partition path>/` where the catalog's
 * pointer occupies the partition's path itself (the local catalog's symlinks).
 */
export function runsPrefix(catalog: { readonly capabilities: CatalogCapabilities }, table: TableDefinition, partition?: Partition): string {
  const root = catalog.capabilities.pointersInStore ? `${storageName(table)}/${RUNS_BESIDE_POINTERS}` : storageName(table);
  const path = partition ? partitionPath(partition) : "";
  return path ? `${root}/${path}/` : `${root}/`;
}

/**
 * The store key prefix of one run of a partition, ending in '/'. An ingested table from before runs has none: every
 * file of a partition sits in the partition's own folder, `<table>/<partition path>/`, whatever the registration's run id.
 */
export function runLocation(catalog: { readonly capabilities: CatalogCapabilities }, table: TableDefinition, partition: Partition, runId: string): string {
  if (ingestedInPlace(table)) return ingestPartitionPrefix(table, partition);
  return `${runsPrefix(catalog, table, partition)}${runFolder(runId)}/`;
}

/** The folder of an ingested table's partition, `<table>/p_year=2026/p_month=11/p_day=30/`; its segment files are written there. */
export function ingestPartitionPrefix(table: TableDefinition, partition: Partition): string {
  const path = partitionPath(partition);
  return path ? `${table.name}/${path}/` : `${table.name}/`;
}

/** The folder name of a run inside its partition's runs prefix. */
function runFolder(runId: string): string {
  return `run=${runId}`;
}

/** A partition's path as a key prefix, `day=2026-11-01/`; empty for the whole table (a table without partition keys). */
function partitionFolder(partition: Partition): string {
  const path = partitionPath(partition);
  return path === "" ? "" : `${path}/`;
}

/** The store key prefix of the manifests of one partition, or of a whole table. */
export function manifestsPrefix(table: string, partition?: Partition): string {
  return partition ? `${METADATA_PREFIX}/manifests/${table}/${partitionFolder(partition)}` : `${METADATA_PREFIX}/manifests/${table}/`;
}

/** The store key of a run's manifest. */
export function manifestKey(table: string, partition: Partition, runId: string): string {
  return `${manifestsPrefix(table, partition)}${runId}.json`;
}

/** The store key prefix of a table's pins. */
export function pinsPrefix(table: string): string {
  return `${METADATA_PREFIX}/pins/${table}/`;
}

/** The name a pin of the whole table (a table without partition keys) has under the table's pins. */
const WHOLE_TABLE_PIN = "_table";

/** The store key of a partition's pin (a pinned partition is never rebuilt by a sync). */
export function pinKey(table: string, partition: Partition): string {
  return `${pinsPrefix(table)}${partitionPath(partition) || WHOLE_TABLE_PIN}.json`;
}

/** The partition path a pin's key names (the inverse of `pinKey`, below the table's pins prefix). */
export function pinnedPartition(name: string): string {
  const path = name.replace(/\.json$/, "");
  return path === WHOLE_TABLE_PIN ? "" : path;
}

/** The store key prefix of a raw table's landing summaries (what a delivery held, by its digest and the dataset's declaration). */
export function deliveriesPrefix(table: string): string {
  return `${METADATA_PREFIX}/deliveries/${table}/`;
}

/** The store key of one landing summary. */
export function deliveryKey(table: string, key: string): string {
  return `${deliveriesPrefix(table)}${key}.json`;
}

/** The store key of what was last found out about the files a raw table's deliveries were named by (`paths`: a digest of the paths). */
export function deliveryFilesKey(table: string, paths: string): string {
  return `${deliveriesPrefix(table)}files-${paths}.json`;
}

/** The store key prefix of the outbox entries of one table, or of every table. */
export function outboxPrefix(table?: string): string {
  return table ? `${METADATA_PREFIX}/outbox/${table}/` : `${METADATA_PREFIX}/outbox/`;
}

/** The store key prefix of the records of a table's layouts other than its current one (../lake/operations/relayout.ts). */
export function layoutRecordsPrefix(table: string): string {
  return `${METADATA_PREFIX}/layouts/${table}/`;
}

/** The store key of the record of one layout of a table (`storage`: its storage name, or the table's own). */
export function layoutRecordKey(table: string, storage: string): string {
  return `${layoutRecordsPrefix(table)}${storage}.json`;
}

/** The store key of one outbox entry. */
export function outboxEntryKey(table: string, id: string): string {
  return `${outboxPrefix(table)}${id}.json`;
}

/** Where unreadable metadata files are moved, under their own path: `_lakeswap/quarantine/outbox/<table>/<id>.json`. */
const QUARANTINE_PREFIX = `${METADATA_PREFIX}/quarantine/`;

/** The quarantine key of an unreadable metadata file. */
export function quarantineKey(key: string): string {
  return `${QUARANTINE_PREFIX}${key.startsWith(`${METADATA_PREFIX}/`) ? key.slice(METADATA_PREFIX.length + 1) : key}`;
}

/** The store prefix of the sync records. */
export const SYNCS_PREFIX = `${METADATA_PREFIX}/syncs/`;

/** The store key of one sync's record. */
export function syncRecordKey(syncId: string): string {
  return `${SYNCS_PREFIX}${syncId}.json`;
}

/** The store key of a table's writer lease. */
export function leaseKey(table: string): string {
  return `${METADATA_PREFIX}/leases/${table}.json`;
}

/**
 * The store key of the file whose kernel lock a writer holds besides its lease, on stores that have kernel locks.
 * Kept while the table exists (a writer waiting on a removed file's lock and one on its new file would both hold
 * "the" lock); drop-table removes it under the lease, where only a writer racing the drop of its own table could
 * lock the old file, and the lease object still decides between them.
 */
export function leaseLockKey(table: string): string {
  return `${METADATA_PREFIX}/leases/${table}.lock`;
}

/** The name of the lease a running sync holds from its first record to its end (not a table name: those have no '-'). */
export function syncLeaseName(syncId: string): string {
  return `sync-${syncId}`;
}

/** The store key prefix of an ingested table's partition tallies (what its segments added, `ingestTallyKey`). */
export function ingestTalliesPrefix(table: string): string {
  return `${METADATA_PREFIX}/ingest/${table}/`;
}

/** The store key of an ingested partition's tally: its rows and signature lane sums, and the last segment of each collector counted in them. */
export function ingestTallyKey(table: string, partition: Partition): string {
  return `${ingestTalliesPrefix(table)}${partitionPath(partition) || "_table"}.json`;
}

/**
 * What a failed write of a metadata object means for the pointers, by where it goes, for the
 * message of a full disk: the write before the swap (outbox entry, run files, lease, pin) leaves the
 * pointer where it was; the ones after it (manifest, sync record) come after the pointer moved.
 */
export function writeConsequence(key: string): string {
  const area = key.startsWith(`${METADATA_PREFIX}/`)
    ? key.split("/")[1]
    : key.includes(`/${RUNS_BESIDE_POINTERS}/`)
      ? "runs"
      : key.startsWith(icebergMetadataPrefix(key.split("/")[0] ?? ""))
        ? "iceberg"
        : undefined;
  switch (area) {
    case "outbox":
      return "recording a pointer move in the outbox, before the swap: the pointer did not move";
    case "manifests":
      return "writing a run's manifest, after the swap: the pointer did move to the new run; the manifest is rebuilt from the run's files by the next command";
    case "syncs":
      return "writing the sync's record: pointers this sync moved so far did move (lakeswap history shows them); free space and rerun the sync";
    case "leases":
      return "writing a writer lease: no pointer moved by this write";
    case "pins":
      return "writing a pin: no pointer moved";
    case "pointers":
      return "writing a pointer's state file, after the swap: the pointer did move; free space and rerun, the partition is rebuilt by the next sync";
    case "tables":
      return "writing a table definition: the table was not created";
    case "runs":
      return "writing a run's files, before the swap: the pointer did not move";
    case "iceberg":
      return "writing the table's Iceberg metadata, after its pointers moved: the Hive view is current, the Iceberg view one command behind; free space and rerun, the next command commits it";
    default:
      return "no pointer moved by this write";
  }
}

/**
 * The folder of an `iceberg: true` table's Iceberg metadata, inside the table's own folder as the file-system
 * catalogs (DuckDB's `iceberg_scan`, Hadoop's, pyiceberg's static tables) expect it: `<table>/metadata/`. Its files
 * end in `.json`, `.avro` and `.text`, so the Hive view's `<table>/*\/*.parquet` glob never reads them.
 */
export function icebergMetadataPrefix(table: string): string {
  return `${table}/metadata/`;
}

/** The store key of version `version` of a table's Iceberg metadata, `<table>/metadata/v<N>.metadata.json` (written create-exclusive). */
export function icebergMetadataKey(table: string, version: number): string {
  return `${icebergMetadataPrefix(table)}v${version}.metadata.json`;
}

/** The version a metadata key names (the inverse of `icebergMetadataKey`), or undefined for another file. */
export function icebergMetadataVersion(table: string, key: string): number | undefined {
  const match = /^v([1-9][0-9]{0,8})\.metadata\.json$/.exec(key.slice(icebergMetadataPrefix(table).length));
  return match ? Number(match[1]) : undefined;
}

/**
 * The store key of version `version` of a table's Iceberg metadata where a catalog holds the pointer (Glue),
 * `<table>/metadata/00005-<uuid>.metadata.json` as Trino and Iceberg's own catalogs name it: unique, so a writer that
 * lost the race to commit its version never writes over the winner's file.
 */
export function icebergCatalogMetadataKey(table: string, version: number, uuid: string): string {
  return `${icebergMetadataPrefix(table)}${String(version).padStart(5, "0")}-${uuid}.metadata.json`;
}

/** The version a metadata file name of `icebergCatalogMetadataKey` names, or undefined for another name (a file another tool wrote). */
export function icebergCatalogMetadataVersion(key: string): number | undefined {
  const match = /(?:^|\/)([0-9]{5,9})-[0-9a-f-]{36}\.metadata\.json$/.exec(key);
  return match ? Number(match[1]) : undefined;
}

/** The store key of `version-hint.text`, the Iceberg pointer: the number of the current metadata version, replaced by rename. */
export function icebergVersionHintKey(table: string): string {
  return `${icebergMetadataPrefix(table)}version-hint.text`;
}

/** The store key of a snapshot's manifest list, `snap-<snapshot id>-1-<uuid>.avro` as Iceberg's writers name it. */
export function icebergManifestListKey(table: string, snapshotId: number, uuid: string): string {
  return `${icebergMetadataPrefix(table)}snap-${snapshotId}-1-${uuid}.avro`;
}

/** The store key of a manifest, `<uuid>-m0.avro`. */
export function icebergManifestKey(table: string, uuid: string): string {
  return `${icebergMetadataPrefix(table)}${uuid}-m0.avro`;
}

/**
 * The store key of the mark a command on an `iceberg: true` table leaves while the table's Iceberg view may be behind
 * its pointers (./commit/iceberg-pending.ts): written before the command's work, removed once its commit is made.
 */
export function icebergPendingKey(table: string): string {
  return `${METADATA_PREFIX}/iceberg/${table}.pending`;
}
