import { randomBytes } from "node:crypto";
import { promises as fs } from "node:fs";
import path from "node:path";
import { InvalidInputError, LakeswapError, errorMessage } from "../core/errors.js";
import { faultPoint } from "../core/faults.js";
import { parsePartitionPath, partitionPath, type Partition } from "../core/partition.js";
import { isRunId } from "../core/run-id.js";
import { mapLimited } from "../core/runs.js";
import { assertTableName } from "../core/sql.js";
import { defineTable, type TableDefinition } from "../core/table.js";
import { fsyncPath, isCode, noSpaceError } from "../store/local-store.js";
import { runFolder, type Catalog, type Pointer, type PointerMove, type PointerMoveKind } from "./catalog.js";

const META = "_lakeswap";
const RUNS = "_runs";
const STALE_TEMP_MS = 3_600_000;
/** Files fsynced (and pointer states written) at once. */
const FSYNC_CONCURRENCY = 8;

interface PointerState {
  run: string;
  previous?: string;
  signature?: string;
  movedBy?: PointerMoveKind;
  movedAt: string;
}

/**
 * The embedded catalog is the lake folder itself. Table definitions are JSON
 * files under `_lakeswap/tables/`; each partition's pointer is a relative
 * symlink `<table>/<partition path>` to its run folder
 * `<table>/_runs/<partition path>/run=<id>/`, replaced with one rename(2).
 * Plain DuckDB reading `<table>/*\/*.parquet` sees exactly the current runs.
 */
export class LocalCatalog implements Catalog {
  readonly capabilities = { maxBatchUpdate: 1 } as const;
  private readonly root: string;

  constructor(root: string) {
    this.root = path.resolve(root);
  }

  async open(): Promise<void> {
    const tempDir = path.join(this.root, META, "tmp");
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
    let text: string;
    try {
      text = await fs.readFile(file, "utf8");
    } catch (error) {
      if (isCode(error, "ENOENT")) return undefined;
      throw error;
    }
    return defineTable(parseStoredJson(text, file, "table definition") as TableDefinition);
  }

  async listTables(): Promise<TableDefinition[]> {
    let names: string[];
    try {
      names = await fs.readdir(path.join(this.root, META, "tables"));
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
    if (existing) {
      if (JSON.stringify(existing) === JSON.stringify(table)) return;
      throw new LakeswapError(
        "CONFLICT",
        `table '${table.name}' already exists with a different definition; drop it first (lakeswap drop-table ${table.name}) or declare it as it is`,
      );
    }
    await fs.mkdir(path.join(this.root, table.name), { recursive: true });
    await writeFileAtomic(this.tableFile(table.name), `${JSON.stringify(table, null, 2)}\n`, path.join(this.root, META, "tmp")).catch((error: unknown) => {
      throw noSpaceError(`${META}/tables/${table.name}.json`, this.tableFile(table.name), error) ?? error;
    });
  }

  async dropTable(name: string): Promise<void> {
    // The table's objects are gone by now; what is left of its metadata are folders.
    for (const area of ["pointers", "manifests", "outbox", "pins"]) {
      await fs.rm(path.join(this.root, META, area, name), { recursive: true, force: true });
    }
    await fs.rm(this.tableFile(name), { force: true });
    await fs.rm(path.join(this.root, name), { recursive: true, force: true });
    for (const dir of ["pointers", "tables", "tmp", "manifests", "leases", "pins", "outbox", ""]) {
      await fs.rmdir(path.join(this.root, META, dir)).catch(() => undefined);
    }
  }

  runsPrefix(table: TableDefinition, partition?: Partition): string {
    return partition ? `${table.name}/${RUNS}/${partitionPath(partition)}/` : `${table.name}/${RUNS}/`;
  }

  async getPointer(table: TableDefinition, partition: Partition): Promise<Pointer | undefined> {
    const link = this.pointerPath(table, partition);
    let target: string;
    try {
      target = await fs.readlink(link);
    } catch (error) {
      if (isCode(error, "ENOENT")) return undefined;
      if (isCode(error, "EINVAL")) {
        throw new LakeswapError("STORE_ERROR", `'${link}' should be a partition pointer (a symlink) but is not; move it away and rerun`);
      }
      throw error;
    }
    const runId = path.basename(target).replace(/^run=/, "");
    if (!isRunId(runId)) {
      throw new LakeswapError("STORE_ERROR", `partition pointer '${link}' points to '${target}', which is not a run folder`);
    }
    const state = await this.readState(table, partition);
    if (state !== undefined && state.run === runId) {
      return { partition, runId, previousRunId: state.previous, signature: state.signature, movedBy: state.movedBy };
    }
    // The process died between the rename and the state write: the state still
    // describes the pointer as it was before, so its run is the previous one.
    return { partition, runId, previousRunId: state?.run };
  }

  async listPointers(table: TableDefinition): Promise<Pointer[]> {
    const pointers: Pointer[] = [];
    const walk = async (dir: string, depth: number, parts: string[]): Promise<void> => {
      let entries;
      try {
        entries = await fs.readdir(dir, { withFileTypes: true });
      } catch (error) {
        if (isCode(error, "ENOENT")) return;
        throw error;
      }
      for (const entry of entries) {
        if (entry.name === RUNS || !entry.name.includes("=")) continue;
        const key = table.partitionKeys[depth];
        if (!entry.name.startsWith(`${key}=`)) continue;
        if (depth === table.partitionKeys.length - 1) {
          if (!entry.isSymbolicLink()) continue;
          const partition = parsePartitionPath([...parts, entry.name].join("/"), table.partitionKeys);
          const pointer = await this.getPointer(table, partition);
          if (pointer) pointers.push(pointer);
        } else if (entry.isDirectory()) {
          await walk(path.join(dir, entry.name), depth + 1, [...parts, entry.name]);
        }
      }
    };
    await walk(path.join(this.root, table.name), 0, []);
    return pointers.sort((a, b) => compare(partitionPath(a.partition), partitionPath(b.partition)));
  }

  async movePointer(table: TableDefinition, move: PointerMove): Promise<void> {
    await this.movePointers(table, [move]);
  }

  /**
   * Moves many pointers: every run they lead to is made durable first (its
   * files and folder fsynced), then each pointer is one rename(2) of a new
   * link over the old one, then each partition folder is fsynced once, then
   * the pointer states are written. A process killed between a rename and
   * its state leaves a state that names the run before (read as the
   * previous run, unsigned), which the outbox replay sets right.
   */
  async movePointers(table: TableDefinition, moves: readonly PointerMove[]): Promise<void> {
    await mapLimited(moves, FSYNC_CONCURRENCY, (move) => this.syncRun(table, move));
    const tempDir = path.join(this.root, META, "tmp");
    await fs.mkdir(tempDir, { recursive: true });
    const linkDirs = new Set<string>();
    for (const move of moves) {
      const link = this.pointerPath(table, move.partition);
      const linkDir = path.dirname(link);
      if (!linkDirs.has(linkDir)) await fs.mkdir(linkDir, { recursive: true });
      linkDirs.add(linkDir);
      const runDir = path.join(this.root, ...this.runsPrefix(table, move.partition).split("/"), runFolder(move.runId));
      // Temporary links live outside the table folder: a glob over the table would follow them.
      const temp = path.join(tempDir, `link-${process.pid}-${randomBytes(6).toString("hex")}`);
      await fs.symlink(path.relative(linkDir, runDir), temp).catch((error: unknown) => {
        throw noSpaceError(`${META}/tmp/${path.basename(temp)}`, temp, error) ?? error;
      });
      faultPoint("before-swap-rename");
      await fs.rename(temp, link);
      faultPoint("during-batch-swap");
    }
    for (const dir of linkDirs) await fsyncPath(dir);
    const movedAt = new Date().toISOString();
    await mapLimited(moves, FSYNC_CONCURRENCY, async (move) => {
      const state: PointerState = { run: move.runId, previous: move.previousRunId, signature: move.signature, movedBy: move.kind, movedAt };
      const stateFile = this.stateFile(table, move.partition);
      await writeFileAtomic(stateFile, `${JSON.stringify(state)}\n`, tempDir).catch((error: unknown) => {
        throw noSpaceError(`${META}/pointers/${table.name}/${partitionPath(move.partition)}.json`, stateFile, error) ?? error;
      });
    });
  }

  /** Makes a run durable before a pointer leads to it: its files, its folder, and the folder that holds it. */
  private async syncRun(table: TableDefinition, move: PointerMove): Promise<void> {
    const runDir = path.join(this.root, ...this.runsPrefix(table, move.partition).split("/"), runFolder(move.runId));
    const stat = await fs.stat(runDir).catch(() => undefined);
    if (!stat?.isDirectory()) {
      throw new InvalidInputError(`run ${move.runId} of ${table.name}/${partitionPath(move.partition)} does not exist; the pointer was not moved`);
    }
    for (const file of await fs.readdir(runDir)) await fsyncPath(path.join(runDir, file));
    await fsyncPath(runDir);
    await fsyncPath(path.dirname(runDir));
  }

  async removeIfEmpty(): Promise<boolean> {
    if ((await this.listTables()).length > 0) return false;
    for (const dir of ["pointers", "tables", "tmp", "manifests", "leases", "pins", "outbox", ""]) {
      await fs.rmdir(path.join(this.root, META, dir)).catch(() => undefined);
    }
    return true;
  }

  async removePointers(table: TableDefinition, partitions: readonly Partition[]): Promise<void> {
    for (const partition of partitions) await this.removePointer(table, partition);
  }

  async removePointer(table: TableDefinition, partition: Partition): Promise<void> {
    const link = this.pointerPath(table, partition);
    await fs.rm(link, { force: true });
    await fs.rm(this.stateFile(table, partition), { force: true });
    // Drop intermediate partition folders left empty (p_year=2025/p_month=03/).
    let dir = path.dirname(link);
    const tableDir = path.join(this.root, table.name);
    while (dir.startsWith(tableDir + path.sep)) {
      if (!(await fs.rmdir(dir).then(() => true, () => false))) break;
      dir = path.dirname(dir);
    }
    await fsyncPath(tableDir).catch(() => undefined);
  }

  private tableFile(name: string): string {
    assertTableName(name);
    return path.join(this.root, META, "tables", `${name}.json`);
  }

  private pointerPath(table: TableDefinition, partition: Partition): string {
    return path.join(this.root, table.name, ...partitionPath(partition).split("/"));
  }

  private stateFile(table: TableDefinition, partition: Partition): string {
    return path.join(this.root, META, "pointers", table.name, `${partitionPath(partition)}.json`);
  }

  private async readState(table: TableDefinition, partition: Partition): Promise<PointerState | undefined> {
    const file = this.stateFile(table, partition);
    let text: string;
    try {
      text = await fs.readFile(file, "utf8");
    } catch (error) {
      if (isCode(error, "ENOENT")) return undefined;
      throw error;
    }
    const fix = "delete it and rerun: the pointer itself is intact, the partition then counts as unsigned and the next sync rebuilds it";
    const state = parseStoredJson(text, file, "pointer state file", fix) as Partial<PointerState> | null;
    if (typeof state !== "object" || state === null || typeof state.run !== "string") {
      throw new LakeswapError("STORE_ERROR", `pointer state file '${file}' is not a lakeswap pointer state (no 'run'); ${fix}`);
    }
    return state as PointerState;
  }
}

/** Parses a metadata file's JSON, or a STORE_ERROR naming the file, what it should be and the fix. */
function parseStoredJson(text: string, file: string, what: string, fix = "restore it from a backup, or move it away and rerun"): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new LakeswapError("STORE_ERROR", `${what} '${file}' is not valid JSON (${errorMessage(error)}); ${fix}`);
  }
}

/** Writes a file by temp file + fsync + rename + fsync of the folder. */
async function writeFileAtomic(file: string, text: string, tempDir: string): Promise<void> {
  await fs.mkdir(tempDir, { recursive: true });
  await fs.mkdir(path.dirname(file), { recursive: true });
  const temp = path.join(tempDir, `${process.pid}-${randomBytes(6).toString("hex")}.tmp`);
  const handle = await fs.open(temp, "wx");
  try {
    await handle.writeFile(text);
    await handle.sync();
  } catch (error) {
    await handle.close().catch(() => undefined);
    await fs.rm(temp, { force: true });
    throw error;
  }
  await handle.close();
  await fs.rename(temp, file);
  await fsyncPath(path.dirname(file));
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return isCode(error, "EPERM");
  }
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
