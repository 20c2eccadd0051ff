import { randomBytes } from "node:crypto";
import { promises as fs, readlinkSync, renameSync, symlinkSync, type Dirent } from "node:fs";
import path from "node:path";
import { InvalidInputError, LakeswapError, TableCreatedMeanwhileError, errorMessage } from "../model/errors.js";
import { faultPoint } from "../shared/faults.js";
import { WHOLE_TABLE, isWholeTable, parsePartitionPath, partitionPath, type Partition } from "../model/partition.js";
import { isRunId } from "../model/run-id.js";
import { assertTableName } from "../model/sql.js";
import { ingestedInPlace, isLayoutOf, parseTableDefinition, sameDeclaration, storageName, tableChange, type TableDefinition } from "../model/table.js";
import { eachLimited, fsyncPath, intoFolder, isCode, lightFs, makeFolder, placeFileIfAbsent, readIfPresent, writeFileAtomic, writeTempFile } from "../store/local-files.js";
import { noSpaceError, type DescribeWrite, type MetadataFolders } from "../store/local-store.js";
import type { Catalog, Fence, Pointer, PointerMove, PointerMoveKind } from "./catalog.js";
import { processAlive } from "../shared/process-folders.js";

/** The pointer of a table without partition keys: `<table>/current`, a link to its current run. */
const WHOLE_TABLE_LINK = "current";
/** Its state file's name under the table's pointer states. */
const WHOLE_TABLE_STATE = "_table";
const STALE_TEMP_MS = 3_600_000;
/** Files and folders fsynced (pointer states written, links renamed, pointers read) at once. */
const FSYNC_CONCURRENCY = 16;

/** A pointer's new state, written and fsynced, waiting in the temporary folder for its link to move. */
interface StagedState {
  readonly temp: string;
  readonly file: string;
  readonly partition: string;
}

interface PointerState {
  run: string;
  previous?: string;
  signature?: string;
  movedBy?: PointerMoveKind;
  movedAt: string;
  /** The run's data file names (Pointer.runFiles), when the move named them. */
  files?: string[];
}

/**
 * The embedded catalog is the lake folder itself. Table definitions are JSON
 * files under `<metadata>/tables/`; each partition's pointer is a relative
 * symlink `<table>/<partition path>` to its run folder (the move's location, which the lake
 * places beside the pointers), replaced with one rename(2), with its state under `<metadata>/pointers/`.
 * Plain DuckDB reading `<table>/*\/*.parquet` sees exactly the current runs.
 */
export class LocalCatalog implements Catalog {
  /** A batch of any size: its fsyncs are shared, and each pointer's move is one rename(2) whatever the batch. */
  readonly capabilities = { maxBatchUpdate: Number.POSITIVE_INFINITY, maxBatchRemove: Number.POSITIVE_INFINITY, pointersInStore: true, readsRunsByName: true } as const;
  private readonly root: string;
  private readonly folders: MetadataFolders;
  private readonly describeWrite: DescribeWrite;

  /**
   * `folders` are the lake's metadata folders (../lake/layout.ts); `describeWrite` says what a failed write of a key
   * means (the lake's layout knows; default: nothing more).
   */
  constructor(root: string, options: { readonly folders: MetadataFolders; readonly describeWrite?: DescribeWrite }) {
    this.root = path.resolve(root);
    this.folders = options.folders;
    this.describeWrite = options.describeWrite ?? (() => "the write did not complete");
  }

  /** A folder of the catalog's own under the lake's metadata folder (`tables`, `pointers`). */
  private metadataDir(...parts: string[]): string {
    return path.join(this.root, this.folders.metadata, ...parts);
  }

  async open(options: { readonly readOnly?: boolean } = {}): Promise<void> {
    if (options.readOnly) return;
    const tempDir = path.join(this.root, this.folders.temp);
    let entries: string[];
    try {
      entries = await fs.readdir(tempDir);
    } catch (error) {
      if (isCode(error, "ENOENT")) return;
      throw error;
    }
    for (const name of entries) {
      const file = path.join(tempDir, name);
      const pid = Number(/^(?:link-)?(\d+)-/.exec(name)?.[1]);
      const stat = await fs.lstat(file).catch(() => undefined);
      if (!stat) continue;
      const ownerGone = Number.isInteger(pid) && pid > 0 && !processAlive(pid);
      // Links, files, and staged run folders (`<pid>-stage-…`) of a writer that is gone.
      if (ownerGone || Date.now() - stat.mtimeMs > STALE_TEMP_MS) await fs.rm(file, { recursive: true, force: true });
    }
  }

  async getTable(name: string): Promise<TableDefinition | undefined> {
    const file = this.tableFile(name);
    // Read by every command and several times a sync: synchronously, as pointers are.
    const text = readIfPresent(file)?.toString("utf8");
    if (text === undefined) return undefined;
    return parseTableDefinition(parseStoredJson(text, file, "table definition"), `'${file}'`, name);
  }

  async listTables(): Promise<TableDefinition[]> {
    let names: string[];
    try {
      names = await fs.readdir(this.metadataDir("tables"));
    } catch (error) {
      if (isCode(error, "ENOENT")) return [];
      throw error;
    }
    const tables: TableDefinition[] = [];
    // Only files named like a table are definitions (a stray file is not a table, nor a path to follow).
    for (const name of names.filter((n) => /^[a-z][a-z0-9_]{0,127}\.json$/.test(n)).sort()) {
      const table = await this.getTable(name.slice(0, -".json".length));
      if (table) tables.push(table);
    }
    return tables;
  }

  async createTable(table: TableDefinition): Promise<void> {
    const existing = await this.getTable(table.name);
    // The same definition again is a no-op, one that cannot be is refused naming why (tableChange); a change is never
    // written over it here: the caller judges the declaration against that table, and makes a change with updateTable.
    if (existing) {
      if (tableChange(existing, table) === "same") return;
      throw new TableCreatedMeanwhileError(table.name, "this lake");
    }
    // The table's folder (and the lake's, on the first table) made durable where it is new.
    const made = await makeFolder(path.join(this.root, table.name), this.root);
    await Promise.all(made.map(fsyncPath));
    // A new table's definition is placed only where none is (another writer may be creating the table too).
    const placed = await placeFileIfAbsent(this.tableFile(table.name), `${JSON.stringify(table, null, 2)}\n`, path.join(this.root, this.folders.temp), this.root).catch((error: unknown) => {
      throw noSpaceError(`${this.folders.metadata}/tables/${table.name}.json`, this.tableFile(table.name), error, this.describeWrite) ?? error;
    });
    if (placed) return;
    const created = await this.getTable(table.name);
    if (!created || !sameDeclaration(created, table)) throw new TableCreatedMeanwhileError(table.name, "this lake");
  }

  async updateTable(table: TableDefinition, fence?: Fence): Promise<void> {
    await fence?.();
    await this.writeDefinition(table);
  }

  private async writeDefinition(table: TableDefinition): Promise<void> {
    await writeFileAtomic(this.tableFile(table.name), `${JSON.stringify(table, null, 2)}\n`, path.join(this.root, this.folders.temp), this.root).catch((error: unknown) => {
      throw noSpaceError(`${this.folders.metadata}/tables/${table.name}.json`, this.tableFile(table.name), error, this.describeWrite) ?? error;
    });
  }

  async dropTable(name: string): Promise<void> {
    assertTableName(name);
    // The table's objects are gone by now; what is left of its metadata are its folders, one in each area that
    // keeps a folder per table, which the store never prunes while writers may put records there.
    // Each layout of the table too (`<table>__layout_…`: its pointers, runs and manifests since its partition keys changed).
    const areaDirs = ["pointers", ...this.folders.tableAreas].map((area) => this.metadataDir(area));
    const listed = await Promise.all([this.root, ...areaDirs].map((dir) => fs.readdir(dir).catch(() => [] as string[])));
    const layouts = [...new Set(listed.flat().filter((entry) => isLayoutOf(entry, name)))];
    for (const area of ["pointers", ...this.folders.tableAreas]) {
      for (const storage of [name, ...layouts]) await fs.rm(this.metadataDir(area, storage), { recursive: true, force: true });
    }
    const areas = await fs.readdir(this.metadataDir()).catch(() => [] as string[]);
    await fs.rm(this.tableFile(name), { force: true });
    for (const storage of [name, ...layouts]) await fs.rm(path.join(this.root, storage), { recursive: true, force: true });
    // Areas left empty go, and the metadata folder with them when it is empty: a lake whose last table was dropped is an empty folder.
    for (const area of areas) await fs.rmdir(this.metadataDir(area)).catch(() => undefined);
    await fs.rmdir(this.metadataDir()).catch(() => undefined);
  }

  async getPointer(table: TableDefinition, partition: Partition): Promise<Pointer | undefined> {
    return ingestedInPlace(table) ? this.readIngestPointer(table, partition) : this.readPointer(table, partition);
  }

  /**
   * A pointer's link and state file, read synchronously: a link and a file of a few hundred bytes cost microseconds
   * so (through the thread pool, a round trip each: ten times as much). Undefined where there is no link.
   */
  private readPointer(table: TableDefinition, partition: Partition): Pointer | undefined {
    const link = this.pointerPath(table, partition);
    let target: string | undefined;
    try {
      target = readlinkSync(link);
    } catch (error) {
      target = pointerLinkError(link, error);
    }
    if (target === undefined) return undefined;
    const file = this.stateFile(table, partition);
    return pointerOf(partition, link, target, file, readStateText(file));
  }

  /** An ingested partition's registration: its state file alone (its folder is the partition's data, not a link), read as a pointer is. */
  private readIngestPointer(table: TableDefinition, partition: Partition): Pointer | undefined {
    const file = this.stateFile(table, partition);
    const text = readStateText(file);
    if (text === undefined) return undefined;
    const state = parseState(text, file);
    return { partition, runId: state.run, previousRunId: state.previous, signature: state.signature, movedBy: state.movedBy };
  }

  /** The registered partitions of an ingested table: its state files, `<metadata>/pointers/<table>/<partition path>.json`. */
  private async ingestPointers(table: TableDefinition): Promise<Pointer[]> {
    // A state file per partition, in folders of the keys above the last: `p_year=2026/p_month=12/p_day=01.json`.
    const partitions = await walkPartitions(this.metadataDir("pointers", storageName(table)), table.partitionKeys, (entry) =>
      entry.isFile() && entry.name.endsWith(".json") ? entry.name.slice(0, -".json".length) : undefined,
    );
    const pointers = partitions.map((partition) => this.readIngestPointer(table, partition));
    return pointers.filter((p): p is Pointer => p !== undefined).sort((a, b) => compare(partitionPath(a.partition), partitionPath(b.partition)));
  }

  async listPointers(table: TableDefinition): Promise<Pointer[]> {
    if (ingestedInPlace(table)) return this.ingestPointers(table);
    if (table.partitionKeys.length === 0) {
      const pointer = await this.getPointer(table, WHOLE_TABLE);
      return pointer ? [pointer] : [];
    }
    // A pointer is a link named after the last key, in folders of the keys above it (its runs are under _runs/).
    const partitions = await walkPartitions(path.join(this.root, storageName(table)), table.partitionKeys, (entry) => (entry.isSymbolicLink() ? entry.name : undefined));
    const pointers = partitions.map((partition) => this.readPointer(table, partition)).filter((p): p is Pointer => p !== undefined);
    return pointers.sort((a, b) => compare(partitionPath(a.partition), partitionPath(b.partition)));
  }

  /**
   * Moves many pointers. First every run they lead to is made durable (its
   * files, its folder and the folders above it up to the table's, each folder
   * once), while each pointer's new state is staged in a fsynced temporary
   * file. Then each pointer is one rename(2) of a new link over the old one,
   * then the states are renamed into place, and every folder that got a link
   * or a state is fsynced once, in one round. A process killed between a
   * link's rename and its state's leaves a state that names the run before
   * (read as the previous run, unsigned), which the outbox replay sets right;
   * its staged files are removed by the next open. A power loss in that round
   * may keep either rename alone: read the same way, and replayed.
   */
  async movePointers(table: TableDefinition, batch: readonly PointerMove[], fence?: Fence): Promise<void> {
    // The moves run a few at a time: two of one partition would race, so only its last one is made (as one after the other would end).
    const moves = [...new Map(batch.map((move) => [partitionPath(move.partition), move])).values()];
    if (moves.length === 0) return;
    const tempDir = path.join(this.root, this.folders.temp);
    const [runs, states] = await Promise.allSettled([this.syncRuns(table, moves), this.stageStates(table, moves, tempDir)]);
    if (runs.status === "rejected") {
      if (states.status === "fulfilled") await removeAll(states.value.map((s) => s.temp));
      throw runs.reason;
    }
    if (states.status === "rejected") throw states.reason;
    const staged = states.value;
    const folders = new Set<string>(); // that got a link or a state: fsynced in one round at the end
    try {
      // Once, right before the renames: the writer's kernel lock (held for its life) keeps its table from here on.
      await fence?.();
      faultPoint("after-fence");
      // An ingested partition from before runs is registered by its state alone: its files are in place (and durable) already.
      if (!ingestedInPlace(table)) await this.swapLinks(table, moves, tempDir, folders);
    } catch (error) {
      await removeAll(staged.map((s) => s.temp));
      throw error;
    }
    await eachLimited(staged, FSYNC_CONCURRENCY, async ({ temp, file, partition }) => {
      try {
        for (const folder of await intoFolder(file, this.root, async () => renameSync(temp, file))) folders.add(folder);
      } catch (error) {
        await fs.rm(temp, { force: true });
        throw noSpaceError(`${this.folders.metadata}/pointers/${storageName(table)}/${partition}.json`, file, error, this.describeWrite) ?? error;
      }
      folders.add(path.dirname(file));
    }).catch(async (error: unknown) => {
      await removeAll(staged.map((s) => s.temp));
      // The links that moved stand (the outbox entry replays the states): made durable as far as they go.
      await eachLimited([...folders], FSYNC_CONCURRENCY, fsyncPath).catch(() => undefined);
      throw error;
    });
    await eachLimited([...folders], FSYNC_CONCURRENCY, fsyncPath);
  }

  /**
   * Each pointer's new state in a fsynced temporary file, before any pointer moves. On a failure (a full
   * disk) none is left behind and the error says that no pointer moved; a process killed here leaves files
   * the next open removes.
   */
  private async stageStates(table: TableDefinition, moves: readonly PointerMove[], tempDir: string): Promise<StagedState[]> {
    const movedAt = new Date().toISOString();
    const staged: StagedState[] = [];
    try {
      await eachLimited(moves, FSYNC_CONCURRENCY, async (move) => {
        const state: PointerState = { run: move.runId, previous: move.previousRunId, signature: move.signature, movedBy: move.kind, movedAt, files: move.runFiles && [...move.runFiles] };
        const file = this.stateFile(table, move.partition);
        const temp = await writeTempFile(tempDir, `${JSON.stringify(state)}\n`).catch((error: unknown) => {
          throw noSpaceError(`${this.folders.temp}/${path.basename(file)}`, file, error, this.describeWrite) ?? error;
        });
        staged.push({ temp, file, partition: partitionPath(move.partition) });
      });
    } catch (error) {
      await removeAll(staged.map((s) => s.temp));
      throw error;
    }
    return staged;
  }

  /**
   * Makes the runs durable before any pointer leads to them: every file of each run, each run folder, and
   * every folder above them up to the table's (each folder once, however many runs it holds), so a run
   * folder made just now survives a power loss with its parents. A missing run fails the batch before
   * anything moved.
   */
  private async syncRuns(table: TableDefinition, moves: readonly PointerMove[]): Promise<void> {
    // An ingested partition's files were made durable one by one as they were written (each with its folder), and a
    // compacted run as it was placed.
    if (table.ingest) return;
    const tableDir = path.join(this.root, storageName(table));
    const runDirs = [...new Set(moves.map((move) => this.runDir(table, move)))];
    const paths: string[] = [];
    const folders = new Set<string>([tableDir]);
    const missing: PointerMove[] = [];
    await eachLimited(moves, FSYNC_CONCURRENCY, async (move) => {
      const runDir = this.runDir(table, move);
      let names: string[];
      try {
        names = await lightFs.readdir(runDir);
      } catch (error) {
        if (!isCode(error, "ENOENT") && !isCode(error, "ENOTDIR")) throw error;
        missing.push(move);
        return;
      }
      for (const name of names) paths.push(path.join(runDir, name));
    });
    if (missing.length > 0) {
      // Named in the batch's order, whichever readdir failed first.
      const first = moves.find((move) => missing.includes(move)) as PointerMove;
      const more = missing.length > 1 ? ` (and ${missing.length - 1} more of this batch)` : "";
      throw new InvalidInputError(`run ${first.runId} of ${table.name}/${partitionPath(first.partition)} does not exist${more}; no pointer was moved`);
    }
    for (const runDir of runDirs) {
      for (let dir = path.dirname(runDir); dir.startsWith(tableDir + path.sep); dir = path.dirname(dir)) folders.add(dir);
    }
    await eachLimited([...new Set(paths), ...runDirs, ...folders], FSYNC_CONCURRENCY, fsyncPath);
  }

  /**
   * Renames a new link over each pointer, a few at a time (each one is atomic; a batch never was), and adds every
   * folder that got a link, or a new folder on the way to one, to `folders` (fsynced by the caller, once each).
   */
  private async swapLinks(table: TableDefinition, moves: readonly PointerMove[], tempDir: string, folders: Set<string>): Promise<void> {
    const temps: string[] = [];
    try {
      await eachLimited(moves, FSYNC_CONCURRENCY, async (move) => {
        const link = this.pointerPath(table, move.partition);
        const linkDir = path.dirname(link);
        // An ingested partition's registration mostly keeps its run (a segment added files to it): its link stays.
        if (table.ingest && (await fs.readlink(link).catch(() => undefined)) === path.relative(linkDir, this.runDir(table, move))) return;
        // Temporary links live outside the table folder: a glob over the table would follow them.
        const temp = path.join(tempDir, `link-${process.pid}-${randomBytes(6).toString("hex")}`);
        await intoFolder(temp, this.root, async () => symlinkSync(path.relative(linkDir, this.runDir(table, move)), temp)).catch((error: unknown) => {
          throw noSpaceError(`${this.folders.temp}/${path.basename(temp)}`, temp, error, this.describeWrite) ?? error;
        });
        temps.push(temp);
        faultPoint("before-swap-rename");
        for (const folder of await intoFolder(link, this.root, async () => renameSync(temp, link))) folders.add(folder);
        temps.splice(temps.indexOf(temp), 1);
        folders.add(linkDir);
        faultPoint("during-batch-swap");
      });
    } finally {
      await removeAll(temps);
    }
  }

  /** The run folder a move leads to (its location, under the lake folder). */
  private runDir(_table: TableDefinition, move: PointerMove): string {
    return path.join(this.root, ...move.location.split("/").filter(Boolean));
  }

  async removePointers(table: TableDefinition, partitions: readonly Partition[], fence?: Fence): Promise<void> {
    if (partitions.length > 0) await fence?.();
    for (const partition of partitions) await this.removePointer(table, partition);
  }

  private async removePointer(table: TableDefinition, partition: Partition): Promise<void> {
    if (ingestedInPlace(table)) {
      await fs.rm(this.stateFile(table, partition), { force: true });
      return;
    }
    const link = this.pointerPath(table, partition);
    await fs.rm(link, { force: true });
    await fs.rm(this.stateFile(table, partition), { force: true });
    // Drop intermediate partition folders left empty (p_year=2025/p_month=03/).
    let dir = path.dirname(link);
    const tableDir = path.join(this.root, storageName(table));
    while (dir.startsWith(tableDir + path.sep)) {
      if (!(await fs.rmdir(dir).then(() => true, () => false))) break;
      dir = path.dirname(dir);
    }
    await fsyncPath(tableDir).catch(() => undefined);
  }

  private tableFile(name: string): string {
    assertTableName(name);
    return this.metadataDir("tables", `${name}.json`);
  }

  private pointerPath(table: TableDefinition, partition: Partition): string {
    if (isWholeTable(partition)) return path.join(this.root, storageName(table), WHOLE_TABLE_LINK);
    return path.join(this.root, storageName(table), ...partitionPath(partition).split("/"));
  }

  private stateFile(table: TableDefinition, partition: Partition): string {
    return this.metadataDir("pointers", storageName(table), `${partitionPath(partition) || WHOLE_TABLE_STATE}.json`);
  }
}

/**
 * The partitions found under `root`, one folder level per partition key (`p_year=2026/p_month=12/`); at the last
 * level `leaf` names the partition's last `key=value` of an entry (a link, a state file) or skips it.
 */
async function walkPartitions(root: string, keys: readonly string[], leaf: (entry: Dirent) => string | undefined): Promise<Partition[]> {
  const partitions: Partition[] = [];
  const walk = async (dir: string, depth: number, parts: string[]): Promise<void> => {
    let entries;
    try {
      entries = await lightFs.readdirTyped(dir);
    } catch (error) {
      if (isCode(error, "ENOENT")) return;
      throw error;
    }
    for (const entry of entries) {
      if (!entry.name.startsWith(`${keys[depth]}=`)) continue;
      if (depth === keys.length - 1) {
        const name = leaf(entry);
        if (name !== undefined) partitions.push(parsePartitionPath([...parts, name].join("/"), keys));
      } else if (entry.isDirectory()) {
        await walk(path.join(dir, entry.name), depth + 1, [...parts, entry.name]);
      }
    }
  };
  await walk(root, 0, []);
  return partitions;
}

/** The target of a pointer link that could not be read: undefined where there is none, else the error, named. */
function pointerLinkError(link: string, error: unknown): undefined {
  if (isCode(error, "ENOENT")) return undefined;
  if (isCode(error, "EINVAL")) {
    throw new LakeswapError("STORE_ERROR", `'${link}' should be a partition pointer (a symlink) but is not; move it away and rerun`);
  }
  throw error;
}

/** A pointer state file's text, undefined where there is none. */
function readStateText(file: string): string | undefined {
  return readIfPresent(file)?.toString("utf8");
}

/** A pointer from its link's target and its state file's text (undefined: no state file). */
function pointerOf(partition: Partition, link: string, target: string, stateFile: string, stateText: string | undefined): Pointer {
  const runId = path.basename(target).replace(/^run=/, "");
  if (!isRunId(runId)) {
    throw new LakeswapError("STORE_ERROR", `partition pointer '${link}' points to '${target}', which is not a run folder`);
  }
  const state = stateText === undefined ? undefined : parseState(stateText, stateFile);
  if (state !== undefined && state.run === runId) {
    const runFiles = plainFileNames(state.files);
    return { partition, runId, previousRunId: state.previous, signature: state.signature, movedBy: state.movedBy, ...(runFiles ? { runFiles } : {}) };
  }
  // The process died between the rename and the state write: the state still
  // describes the pointer as it was before, so its run is the previous one.
  return { partition, runId, previousRunId: state?.run };
}

/**
 * A state's file names, where every one is a plain name (letters, digits, '.', '_', '-', '='; not '.' or '..'): a
 * state edited by hand, or written by another tool, never names a path outside its run, nor a glob. Undefined
 * otherwise, and the run's folder is listed instead.
 */
function plainFileNames(files: unknown): string[] | undefined {
  if (!Array.isArray(files) || !files.every((name) => typeof name === "string" && /^[A-Za-z0-9._=-]{1,255}$/.test(name) && name !== "." && name !== "..")) return undefined;
  return files as string[];
}

function parseState(text: string, file: string): PointerState {
  const fix = "delete it and rerun: the pointer itself is intact, the partition then counts as unsigned and the next sync rebuilds it";
  const state = parseStoredJson(text, file, "pointer state file", fix) as Partial<PointerState> | null;
  if (typeof state !== "object" || state === null || typeof state.run !== "string") {
    throw new LakeswapError("STORE_ERROR", `pointer state file '${file}' is not a lakeswap pointer state (no 'run'); ${fix}`);
  }
  return state as PointerState;
}

/** Parses a metadata file's JSON, or a STORE_ERROR naming the file, what it should be and the fix. */
function parseStoredJson(text: string, file: string, what: string, fix = "restore it from a backup, or move it away and rerun"): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new LakeswapError("STORE_ERROR", `${what} '${file}' is not valid JSON (${errorMessage(error)}); ${fix}`);
  }
}

/** Removes files, best effort (what is left, the next open removes). */
async function removeAll(files: readonly string[]): Promise<void> {
  await Promise.all(files.map((file) => fs.rm(file, { force: true }).catch(() => undefined)));
}


function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
