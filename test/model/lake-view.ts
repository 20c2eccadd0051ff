// What a lake holds, read as a plain reader would, with no lakeswap code: the pointers and their state files, the run
// folders, the manifests, the metadata areas, and the rows through a DuckDB instance of its own over the Parquet files the
// pointers name (embedded: the README's glob over the pointer symlinks).
import { mkdirSync, promises as fs } from "node:fs";
import path from "node:path";
import { GetObjectCommand, ListObjectsV2Command, type S3Client } from "@aws-sdk/client-s3";
import { DuckDBInstance } from "@duckdb/node-api";
import type { GlueState } from "../support/glue-emulator.js";
import { hiveFiles, validateTable } from "../support/iceberg-kit.js";
import { tempDir } from "../support/lake-fixture.js";
import { CLICKS } from "./append-model.js";
import { DAYS, RAW, STAGE, TABLES, type Day, type RowText, type TableName, type WriteMode } from "./model.js";

/** One partition's pointer as the lake shows it. */
interface PointerView {
  readonly run: string;
  /** The pointer state (embedded: `_lakeswap/pointers/<table>/day=….json`; Glue: the partition's Parameters). */
  readonly previous?: string;
  readonly signature?: string;
  readonly movedBy?: string;
}

/** A run's manifest, the fields the model checks. */
interface ManifestView {
  readonly rows: number;
  readonly signature?: string;
}

/** One table as the lake shows it. */
interface TableView {
  readonly pointers: Map<Day, PointerView>;
  /** Run ids with files or a manifest, per day. */
  readonly runs: Map<Day, Set<string>>;
  /** Run ids with data files, per day. */
  readonly withFiles: Map<Day, Set<string>>;
  /** Run ids with a manifest, per day. */
  readonly manifests: Map<Day, Map<string, ManifestView>>;
  /** The rows a plain reader sees, per day (sorted row texts). */
  readonly rows: Map<Day, RowText[]>;
}

/** The whole lake as the model test checks it. */
export interface LakeView {
  readonly tables: Record<TableName, TableView>;
  /** Outbox entries still pending (store keys). */
  readonly outbox: readonly string[];
  /** Writer leases still held (store keys). */
  readonly leases: readonly string[];
  /** Pinned partitions (`table/day=…`). */
  readonly pins: ReadonlySet<string>;
  /** The ingest pipeline's tables (./ingest.ts): the namespace tables' rows (ev2's prefixed `ev2 `) and the dead letters' original lines, sorted. */
  readonly ingest: { readonly events: RowText[]; readonly deadLetters: string[]; readonly reasons: string[] };
  /** Sync records: id, moves; a held sync's status and staged runs (with the run each was staged against). */
  readonly syncs: readonly {
    syncId: string;
    finished: boolean;
    moves: readonly { table: string; partition: string; run: string; previousRun?: string; pending?: boolean }[];
    held?: { readonly status: string; readonly runs: readonly { table: string; partition: string; runId: string; previousRunId?: string }[] };
  }[];
  /** Embedded lakes: the rows of each table's view in the catalog file lake.duckdb, per day, read with plain DuckDB. */
  readonly catalogFile?: Record<TableName, Map<Day, RowText[]>>;
  /** Embedded lakes: the rows (`day:row`, sorted) of each past sync's view of raw and stage in lake.duckdb, by view name. */
  readonly pastViews?: Map<string, string>;
}

/** Reads an embedded lake folder. */
type SyncRecordView = LakeView["syncs"][number];

const syncRecordView = (text: string): SyncRecordView => {
  type StagedRun = { table: string; partition: string; runId: string; previousRunId?: string };
  const record = JSON.parse(text) as { syncId: string; finishedAt?: string; moves: SyncRecordView["moves"]; held?: { status: string; tables: { runs: StagedRun[] }[] } };
  const held = record.held && { status: record.held.status, runs: record.held.tables.flatMap((t) => t.runs.map(({ table, partition, runId, previousRunId }) => ({ table, partition, runId, previousRunId }))) };
  return { syncId: record.syncId, finished: record.finishedAt !== undefined, moves: record.moves, ...(held ? { held } : {}) };
};

/** The embedded lake's sync records alone: read while a writer runs, they never name a data file a swap may remove. */
export async function embeddedSyncRecords(lakeDir: string): Promise<SyncRecordView[]> {
  const syncs = [];
  for (const name of await list(lakeDir, "_lakeswap", "syncs")) syncs.push(syncRecordView(await fs.readFile(path.join(lakeDir, "_lakeswap", "syncs", name), "utf8")));
  return syncs;
}

/** The AWS lake's sync records alone (`names` under `_lakeswap/syncs/`, listed when not given). */
export async function awsSyncRecords(lake: AwsLakeLocation, names?: readonly string[]): Promise<SyncRecordView[]> {
  const prefix = `${lake.prefix}/_lakeswap/syncs/`;
  const syncs = [];
  for (const name of names ?? (await listKeys(lake, prefix)).map((key) => key.slice(prefix.length))) syncs.push(syncRecordView(await getText(lake, `${prefix}${name}`)));
  return syncs;
}

export async function viewEmbeddedLake(lakeDir: string, write: WriteMode = "partition_replace"): Promise<LakeView> {
  const tables = {} as Record<TableName, TableView>;
  for (const table of TABLES) tables[table] = await viewEmbeddedTable(lakeDir, table, write);
  const pins = new Set<string>();
  for (const table of TABLES) for (const name of await list(lakeDir, "_lakeswap", "pins", table)) pins.add(`${table}/${name.replace(/\.json$/, "")}`);
  const syncs = await embeddedSyncRecords(lakeDir);
  return {
    tables,
    ingest: await ingestRows(...([...INGEST_TABLES, DEAD_LETTER_TABLE].map((table) => path.join(lakeDir, table, "*", "*", "*", "*.parquet")) as [string, string, string])),
    outbox: await walk(path.join(lakeDir, "_lakeswap", "outbox")),
    // A table's kernel-lock file (`<table>.lock`) stays for good; a lease object (`.json`) is a lease held.
    leases: (await walk(path.join(lakeDir, "_lakeswap", "leases"))).filter((key) => !key.endsWith(".lock")),
    pins,
    syncs,
    ...(await catalogFileRows(lakeDir, write)),
  };
}

let attached = 0;

/**
 * The rows of raw and stage through the catalog file's views (`ATTACH 'lake.duckdb' (READ_ONLY)`), per day, and those
 * of their past syncs' views; none before the file exists.
 */
async function catalogFileRows(lakeDir: string, write: WriteMode): Promise<{ catalogFile: Record<TableName, Map<Day, RowText[]>>; pastViews: Map<string, string> }> {
  const rows = { [RAW]: new Map(), [STAGE]: new Map(), [CLICKS]: new Map() } as Record<TableName, Map<Day, RowText[]>>;
  const pastViews = new Map<string, string>();
  const file = path.join(lakeDir, "lake.duckdb");
  if (!(await fs.stat(file).catch(() => undefined))) return { catalogFile: rows, pastViews };
  const connection = await (await readerInstance()).connect();
  const alias = `catalog_${(attached += 1)}`;
  try {
    await connection.run(`ATTACH '${file.replace(/'/g, "''")}' AS ${alias} (READ_ONLY)`);
    const views = (await connection.runAndReadAll(`SELECT view_name FROM duckdb_views() WHERE database_name = '${alias}'`)).getRowsJS().map((row) => String(row[0]));
    for (const table of TABLES) {
      if (views.includes(table)) {
        for (const [day, text] of (await connection.runAndReadAll(`SELECT day::VARCHAR, ${rowText(table, write)} FROM ${alias}.${table}`)).getRowsJS()) {
          rows[table].set(day as Day, [...(rows[table].get(day as Day) ?? []), String(text)]);
        }
        for (const list of rows[table].values()) list.sort();
      }
      for (const view of views.filter((name) => name.startsWith(`${table}__at_`))) {
        const past = await connection.runAndReadAll(`SELECT day::VARCHAR || ':' || ${rowText(table, write)} FROM ${alias}.${view}`);
        pastViews.set(view, past.getRowsJS().map((row) => String(row[0])).sort().join(" "));
      }
    }
    await connection.run(`DETACH ${alias}`);
  } finally {
    connection.closeSync();
  }
  return { catalogFile: rows, pastViews };
}

/** A row of `table` as the model compares it (`k|d|v|cat[|del]`, `k|v10`, `id|ts|page`), as a DuckDB expression. */
function rowText(table: TableName, write: WriteMode): string {
  if (table === CLICKS) return "id::VARCHAR || '|' || strftime(ts, '%Y-%m-%d %H:%M:%S') || '|' || page";
  const deleteFlag = write === "upsert" ? " || '|' || coalesce(del, false)::VARCHAR" : "";
  return table === RAW ? `k::VARCHAR || '|' || d::VARCHAR || '|' || v::VARCHAR || '|' || cat${deleteFlag}` : "k::VARCHAR || '|' || v10::VARCHAR";
}

async function viewEmbeddedTable(lakeDir: string, table: TableName, write: WriteMode): Promise<TableView> {
  const pointers = new Map<Day, PointerView>();
  const runs = new Map<Day, Set<string>>();
  const withFiles = new Map<Day, Set<string>>();
  const manifests = new Map<Day, Map<string, ManifestView>>();
  for (const day of DAYS) {
    const link = path.join(lakeDir, table, `day=${day}`);
    const target = await fs.readlink(link).catch((error: NodeJS.ErrnoException) => {
      if (error.code === "ENOENT") return undefined;
      throw error;
    });
    if (target !== undefined) {
      const run = path.basename(target).replace(/^run=/, "");
      const stateText = await fs.readFile(path.join(lakeDir, "_lakeswap", "pointers", table, `day=${day}.json`), "utf8").catch(() => undefined);
      const state = stateText === undefined ? {} : JSON.parse(stateText);
      pointers.set(day, { run, previous: state.run === run ? state.previous : `(state of ${state.run})`, signature: state.run === run ? state.signature : undefined, movedBy: state.movedBy });
    }
    const ids = new Set<string>();
    for (const name of await list(lakeDir, table, "_runs", `day=${day}`)) {
      const files = await list(lakeDir, table, "_runs", `day=${day}`, name);
      if (files.some((f) => !f.startsWith("_") && !f.startsWith("."))) ids.add(name.replace(/^run=/, ""));
    }
    if (ids.size > 0) withFiles.set(day, new Set(ids));
    const byRun = new Map<string, ManifestView>();
    for (const name of await list(lakeDir, "_lakeswap", "manifests", table, `day=${day}`)) {
      const manifest = JSON.parse(await fs.readFile(path.join(lakeDir, "_lakeswap", "manifests", table, `day=${day}`, name), "utf8"));
      byRun.set(name.replace(/\.json$/, ""), { rows: manifest.rows, signature: manifest.signature });
      ids.add(name.replace(/\.json$/, ""));
    }
    if (ids.size > 0) runs.set(day, ids);
    if (byRun.size > 0) manifests.set(day, byRun);
  }
  return { pointers, runs, withFiles, manifests, rows: await plainRows(path.join(lakeDir, table, "*", "*.parquet"), table, write) };
}

/** The rows of a table by day, read by the plain reader's DuckDB (readerInstance) from a glob of Parquet files (hive partitioning). */
async function plainRows(glob: string, table: TableName, write: WriteMode): Promise<Map<Day, RowText[]>> {
  const rows = new Map<Day, RowText[]>();
  const columns = rowText(table, write);
  // By column name, as docs/lake.md says for a table whose schema changed in place (AddColumnCommand).
  const files = `read_parquet('${glob.replace(/'/g, "''")}', hive_partitioning = true, hive_types = {'day': VARCHAR}, union_by_name = true)`;
  const connection = await (await readerInstance()).connect();
  let found: unknown[][];
  try {
    found = (await connection.runAndReadAll(`SELECT day, ${columns} FROM ${files}`)).getRowsJS();
  } catch (error) {
    if (/No files found/.test(String(error))) return rows;
    throw error;
  } finally {
    connection.closeSync();
  }
  for (const [day, text] of found) {
    const list = rows.get(day as Day) ?? [];
    list.push(String(text));
    rows.set(day as Day, list);
  }
  for (const list of rows.values()) list.sort();
  return rows;
}

/** The ingest pipeline's tables: `ev` and `ev2` (its namespaces) and `events` (their dead letters). */
const INGEST_TABLES = ["ev", "ev2"] as const;
const DEAD_LETTER_TABLE = "events";

/**
 * The rows of the namespace tables (`id|amt|u|h|x`, NULL as 'NULL'; those of ev2 prefixed `ev2 `) and the dead
 * letters' lines, from globs of Parquet files.
 */
async function ingestRows(eventsGlob: string, otherGlob: string, deadGlob: string): Promise<LakeView["ingest"]> {
  const column = (name: string) => `coalesce(${name}::VARCHAR, 'NULL')`;
  const row = ["id", "amt", "u", "h", "x"].map(column).join(" || '|' || ");
  const events = [...(await readGlob(eventsGlob, `SELECT ${row} FROM %FILES%`)), ...(await readGlob(otherGlob, `SELECT 'ev2 ' || ${row} FROM %FILES%`))];
  const deadLetters = await readGlob(deadGlob, "SELECT raw FROM %FILES%");
  const reasons = await readGlob(deadGlob, "SELECT raw || ' => ' || reason FROM %FILES%");
  return { events: events.sort(), deadLetters: deadLetters.sort(), reasons: reasons.sort() };
}

/** One text column of a query over a glob of Parquet files, read by the plain reader's DuckDB ([] without files). */
async function readGlob(glob: string, sql: string): Promise<string[]> {
  const connection = await (await readerInstance()).connect();
  try {
    const files = `read_parquet('${glob.replace(/'/g, "''")}', hive_partitioning = false)`;
    return (await connection.runAndReadAll(sql.replace("%FILES%", files))).getRowsJS().map((row) => String(row[0]));
  } catch (error) {
    if (/No files found/.test(String(error))) return [];
    throw error;
  } finally {
    connection.closeSync();
  }
}

let reader: Promise<DuckDBInstance> | undefined;

/**
 * The plain reader's DuckDB: one instance for the process (a fresh one per read cost 15-25 ms of CPU to open and close,
 * a fifth of the model test's own CPU), with its cache of file contents off (DuckDB's cache of Parquet footers is off
 * by default), so that every read lists the files and reads their bytes again, as a new process would.
 */
function readerInstance(): Promise<DuckDBInstance> {
  reader ??= DuckDBInstance.create(":memory:", { enable_external_file_cache: "false" });
  return reader;
}

async function list(...parts: string[]): Promise<string[]> {
  return (await fs.readdir(path.join(...parts)).catch(() => [] as string[])).sort();
}

/** Every file under a folder (relative paths), or [] when it does not exist. */
async function walk(dir: string): Promise<string[]> {
  const found: string[] = [];
  for (const entry of await fs.readdir(dir, { withFileTypes: true }).catch(() => [])) {
    if (entry.isDirectory()) found.push(...(await walk(path.join(dir, entry.name))).map((f) => `${entry.name}/${f}`));
    else found.push(entry.name);
  }
  return found;
}


/** Where an AWS lake is, and the clients a plain reader uses: S3 (the SDK) and the Glue emulator's catalog as it stands. */
export interface AwsLakeLocation {
  readonly s3: S3Client;
  readonly bucket: string;
  readonly prefix: string;
  readonly glue: GlueState;
  readonly database: string;
}

/** Reads an AWS lake: Glue partitions (Location, Parameters), S3 objects, and the rows of the files each Location names. */
export async function viewAwsLake(lake: AwsLakeLocation, write: WriteMode = "partition_replace"): Promise<LakeView> {
  const keys = await listKeys(lake, `${lake.prefix}/`);
  const relative = keys.map((k) => k.slice(lake.prefix.length + 1));
  const { dir, cleanup } = tempDir("lakeswap-model-view-");
  try {
    const tables = {} as Record<TableName, TableView>;
    for (const table of TABLES) tables[table] = await viewAwsTable(lake, table, relative, dir, write);
    const under = (prefix: string) => relative.filter((k) => k.startsWith(prefix)).map((k) => k.slice(prefix.length));
    const pins = new Set<string>();
    for (const table of TABLES) for (const name of under(`_lakeswap/pins/${table}/`)) pins.add(`${table}/${name.replace(/\.json$/, "")}`);
    const syncs = await awsSyncRecords(lake, under("_lakeswap/syncs/"));
    const ingest = await ingestRows(...(await Promise.all([...INGEST_TABLES, DEAD_LETTER_TABLE].map((table) => downloadTable(lake, relative, table, dir)))) as [string, string, string]);
    return { tables, ingest, outbox: under("_lakeswap/outbox/"), leases: under("_lakeswap/leases/"), pins, syncs };
  } finally {
    cleanup();
  }
}

async function viewAwsTable(lake: AwsLakeLocation, table: TableName, keys: readonly string[], scratch: string, write: WriteMode): Promise<TableView> {
  const pointers = new Map<Day, PointerView>();
  const runs = new Map<Day, Set<string>>();
  const withFiles = new Map<Day, Set<string>>();
  const manifests = new Map<Day, Map<string, ManifestView>>();
  const exists = lake.glue.table(lake.database, table) !== undefined;
  const partitions = exists ? lake.glue.partitions(lake.database, table) : [];
  for (const day of DAYS) {
    const partition = partitions.find((p) => p.Values?.[0] === day);
    if (partition) {
      const parameters = partition.Parameters ?? {};
      const location = partition.StorageDescriptor?.Location ?? "";
      const run = /run=([^/]+)\/?$/.exec(location)?.[1] ?? `(location ${location})`;
      if (parameters["lakeswap.run"] !== undefined && parameters["lakeswap.run"] !== run) throw new Error(`${table}/day=${day}: Location ${location} but lakeswap.run ${parameters["lakeswap.run"]}`);
      pointers.set(day, { run, previous: parameters["lakeswap.previous_run"], signature: parameters["lakeswap.signature"], movedBy: parameters["lakeswap.moved_by"] });
      // The current run's files, as a plain reader of the Location gets them.
      const prefix = location.replace(/^s3:\/\/[^/]+\//, "");
      const folder = path.join(scratch, table, `day=${day}`);
      mkdirSync(folder, { recursive: true });
      for (const key of await listKeys(lake, prefix.endsWith("/") ? prefix : `${prefix}/`)) {
        const name = key.slice(key.lastIndexOf("/") + 1);
        if (name === "" || name.startsWith("_") || name.startsWith(".")) continue;
        await fs.writeFile(path.join(folder, `${name.replace(/\.parquet$/, "")}.parquet`), await getBytes(lake, key));
      }
    }
    const ids = new Set<string>();
    const runPrefix = `${table}/day=${day}/`;
    for (const key of keys.filter((k) => k.startsWith(runPrefix))) {
      const [folder, name] = key.slice(runPrefix.length).split("/");
      if (folder?.startsWith("run=") && name && !name.startsWith("_") && !name.startsWith(".")) ids.add(folder.slice("run=".length));
    }
    if (ids.size > 0) withFiles.set(day, new Set(ids));
    const byRun = new Map<string, ManifestView>();
    const manifestPrefix = `_lakeswap/manifests/${table}/day=${day}/`;
    for (const key of keys.filter((k) => k.startsWith(manifestPrefix))) {
      const manifest = JSON.parse(await getText(lake, `${lake.prefix}/${key}`));
      const id = key.slice(manifestPrefix.length).replace(/\.json$/, "");
      byRun.set(id, { rows: manifest.rows, signature: manifest.signature });
      ids.add(id);
    }
    if (ids.size > 0) runs.set(day, ids);
    if (byRun.size > 0) manifests.set(day, byRun);
  }
  return { pointers, runs, withFiles, manifests, rows: await plainRows(path.join(scratch, table, "*", "*.parquet"), table, write) };
}

/**
 * Copies an ingested table's data objects into `scratch`, as Athena reads them: the objects under each Glue
 * partition's Location (a run's files; a run a compaction replaced is not read), hidden files aside. Returns their glob.
 */
async function downloadTable(lake: AwsLakeLocation, keys: readonly string[], table: string, scratch: string): Promise<string> {
  const folder = path.join(scratch, `ingest-${table}`);
  mkdirSync(folder, { recursive: true });
  const exists = lake.glue.table(lake.database, table) !== undefined;
  const locations = (exists ? lake.glue.partitions(lake.database, table) : []).map((p) => (p.StorageDescriptor?.Location ?? "").replace(/^s3:\/\/[^/]+\//, "").replace(/\/?$/, "/"));
  const read = keys.filter((k) => locations.some((location) => `${lake.prefix}/${k}`.startsWith(location)) && k.endsWith(".parquet") && !path.basename(k).startsWith("_"));
  for (const [i, key] of read.entries()) {
    await fs.writeFile(path.join(folder, `${i}.parquet`), await getBytes(lake, `${lake.prefix}/${key}`));
  }
  return path.join(folder, "*.parquet");
}

async function listKeys(lake: AwsLakeLocation, prefix: string): Promise<string[]> {
  const keys: string[] = [];
  let token: string | undefined;
  do {
    const page = await lake.s3.send(new ListObjectsV2Command({ Bucket: lake.bucket, Prefix: prefix, ContinuationToken: token }));
    keys.push(...(page.Contents ?? []).map((o) => o.Key ?? "").filter((k) => k.length > 0 && !k.endsWith("/")));
    token = page.NextContinuationToken;
  } while (token);
  return keys.sort();
}

async function getBytes(lake: AwsLakeLocation, key: string): Promise<Uint8Array> {
  const answer = await lake.s3.send(new GetObjectCommand({ Bucket: lake.bucket, Key: key }));
  return answer.Body!.transformToByteArray();
}

async function getText(lake: AwsLakeLocation, key: string): Promise<string> {
  return Buffer.from(await getBytes(lake, key)).toString("utf8");
}

/** An object of an AWS lake as text (`key` below the lake's prefix), or undefined when there is none. */
export async function readAwsText(lake: AwsLakeLocation, key: string): Promise<string | undefined> {
  return getText(lake, `${lake.prefix}/${key}`).catch((error: { name?: string }) => {
    if (error.name === "NoSuchKey" || error.name === "NotFound") return undefined;
    throw error;
  });
}

/** Where an `iceberg: true` table's current snapshot differs from its Hive pointers' current run files (or is not valid). */
export async function icebergProblems(lakeDir: string, table: string): Promise<string[]> {
  try {
    const hive = await hiveFiles(lakeDir, table);
    const { metadata, snapshots } = await validateTable(lakeDir, table);
    const current = snapshots.find((s) => s.snapshotId === metadata["current-snapshot-id"]);
    const iceberg = current?.files.map((f) => f.key) ?? [];
    return JSON.stringify(iceberg) === JSON.stringify(hive) ? [] : [`${table}: the Iceberg snapshot's files ${iceberg.join(" ")} are not the Hive view's current run files ${hive.join(" ")}`];
  } catch (error) {
    // No metadata at all is right only while the table has no current run.
    if ((error as NodeJS.ErrnoException).code === "ENOENT" && (await hiveFiles(lakeDir, table).catch(() => [])).length === 0) return [];
    return [`${table}: its Iceberg metadata is not valid: ${error instanceof Error ? error.message : String(error)}`];
  }
}
