import { mkdirSync, promises as fs } from "node:fs";
import path from "node:path";
import { AuditError, errorMessage, LakeswapError, RunTakenError } from "../model/errors.js";
import type { BuildResult } from "../model/build.js";
import { freshProcessFolder } from "../shared/process-folders.js";
import { fsyncPath } from "../store/local-files.js";
import { localCopies } from "../store/local-copies.js";
import type { ObjectStore } from "../store/object-store.js";

/**
 * How DuckDB, which reads and writes local paths, reaches a store's files. Chosen once per store
 * (`fileAccessFor`): where the store has local paths, DuckDB reads and writes its files in place; elsewhere (S3, any
 * store without them) it reads copies in scratch folders and writes there, and the files are uploaded. The DuckDB
 * engine and landing (./duckdb-engine.ts, ../landing/duckdb/) go through it, so a new store needs nothing of theirs.
 */
export interface FileAccess {
  /** How many staged runs are placed at once: renames are cheap, uploads share the network. */
  readonly placeConcurrency: number;
  /** The folders of these tables that users' SQL may reach; none where DuckDB does not read the lake's tables. */
  tableFolders(tables: readonly string[]): string[];
  /** The local path of a store file, read where it is; undefined where the store keeps its files elsewhere. */
  readonly pathInPlace: ((key: string) => string) | undefined;
  /**
   * Local paths of whole store files DuckDB reads, for `use` (a missing file fails it, naming the file). Copies are
   * made in a new folder inside `under` where it is given (a folder an instance that runs users' SQL may reach).
   */
  readable(keys: readonly string[], use: FileUse, under?: string): Promise<LocalFiles>;
  /** A new run's one file (`fileName`) under the fresh run prefix `runPrefix`: refused where the run exists already. */
  newRunFile(runPrefix: string, fileName: string): Promise<NewFile>;
  /** A new file at the store key `key` (in a run that exists). */
  newFile(key: string): Promise<NewFile>;
  /** A fresh folder where runs are staged, one sub-folder per partition, before each is placed with `placeRun`. */
  stage(id: string): Promise<{ readonly dir: string; remove(): Promise<void> }>;
  /** Moves one staged run folder's Parquet files into the run's own prefix, named after the run. */
  placeRun(staged: string, run: { readonly runId: string; readonly runPrefix: string }): Promise<BuildResult>;
}

/** Local files DuckDB reads (the store's own, or copies), and how to free what was made for them. */
interface LocalFiles {
  readonly paths: readonly string[];
  release(): Promise<void>;
}

/** A local path where DuckDB writes a file that then goes to its store key (`publish`), or is given up (`discard`). */
interface NewFile {
  readonly path: string;
  publish(): Promise<void>;
  discard(): Promise<void>;
}

/**
 * `stagingPrefix`: where, in a store with local paths, runs are staged before each is renamed into place (the lake's
 * temporary folder, from its layout; default `.lakeswap-staging`, which a lake opened by lakeswap never uses).
 */
export function fileAccessFor(store: ObjectStore, options: { readonly stagingPrefix?: string } = {}): FileAccess {
  return store.capabilities.localPaths ? new InPlaceFiles(store, options.stagingPrefix ?? ".lakeswap-staging") : new CopiedFiles(store);
}

/**
 * The name of the one Parquet file of a run written by DuckDB. It is unique
 * per run: a reader that listed a partition just before a swap and opens the
 * file just after gets "file not found" and can retry, never the bytes of
 * another run under a name it already read the footer of.
 */
export function runFileName(runId: string): string {
  return `part-${runId}.parquet`;
}

/** What a missing file stops, for `readable`'s message. */
const MISSING_STOPS = { compact: "nothing was compacted", merge: "nothing was merged", audit: "the audit could not read it", difference: "nothing was appended" } as const;

/** What store files are read for. */
type FileUse = keyof typeof MISSING_STOPS;

/** A store with local paths: DuckDB reads and writes its files where they are; runs are staged in the lake's own folder. */
class InPlaceFiles implements FileAccess {
  readonly placeConcurrency = 8;

  constructor(private readonly store: ObjectStore, private readonly stagingPrefix: string) {}

  tableFolders(tables: readonly string[]): string[] {
    return [...new Set(tables)].sort().map((table) => this.store.localPath(`${table}/`));
  }

  readonly pathInPlace = (key: string): string => this.store.localPath(key);

  async readable(keys: readonly string[]): Promise<LocalFiles> {
    return { paths: keys.map(this.pathInPlace), release: async () => undefined };
  }

  async newRunFile(runPrefix: string, fileName: string): Promise<NewFile> {
    const runDir = this.store.localPath(runPrefix);
    // Exclusive: a run prefix is fresh or the build stops. The partition's folder is made only where it is missing (a
    // partition's first run): one call for the others. Synchronous: a mkdir is a page-cache operation of microseconds,
    // where a round trip through the thread pool costs a build 0.5 ms of waiting for a thread.
    const makeRunDir = (): void => {
      try {
        mkdirSync(runDir);
      } catch (error) {
        throw (error as NodeJS.ErrnoException).code === "EEXIST" ? runTaken(runDir) : error;
      }
    };
    try {
      makeRunDir();
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
      mkdirSync(path.dirname(runDir), { recursive: true });
      makeRunDir();
    }
    const file = path.join(runDir, fileName);
    // Published durable (the file, its run folder, the partition folder it is new in), before the audit and the
    // outbox entry: a pointer move replayed after a power loss must find the run whole.
    // A failed build leaves nothing behind, not even an empty folder.
    return { path: file, publish: () => syncAll([file], runDir), discard: () => fs.rm(runDir, { recursive: true, force: true }) };
  }

  async newFile(key: string): Promise<NewFile> {
    const file = this.store.localPath(key);
    // Durable like a run's own file: it is in a run that an outbox entry will name.
    const publish = async (): Promise<void> => {
      await Promise.all([fsyncPath(file), fsyncPath(path.dirname(file))]);
    };
    return { path: file, publish, discard: async () => undefined };
  }

  async stage(id: string): Promise<{ readonly dir: string; remove(): Promise<void> }> {
    // In the lake's own temporary folder, so each run folder is one rename away. A killed process's stage is removed
    // by the next open.
    const dir = path.join(this.store.localPath(this.stagingPrefix), `${process.pid}-stage-${id}`);
    await fs.mkdir(dir, { recursive: true });
    return { dir, remove: () => fs.rm(dir, { recursive: true, force: true }) };
  }

  async placeRun(staged: string, run: { readonly runId: string; readonly runPrefix: string }): Promise<BuildResult> {
    const { entries, names, fileNameOf } = await stagedFiles(staged, run.runId);
    const runDir = this.store.localPath(run.runPrefix);
    const files: { key: string; size: number }[] = [];
    await fs.mkdir(path.dirname(runDir), { recursive: true });
    // A staged folder that holds only the run's files becomes the run's folder: no folder to make, none to remove
    // (on ext4, every new inode costs more while many were just freed). Exclusive, as a new folder is: a rename
    // would replace an empty folder, so the run's must not exist (run ids are fresh, and this writer holds the lease).
    if (names.length > 0 && names.length === entries.length) {
      const taken = await fs.lstat(runDir).then(() => true, (error: unknown) => (error as NodeJS.ErrnoException).code !== "ENOENT");
      if (taken) throw runTaken(runDir);
      for (const [index, name] of names.entries()) {
        const { size } = await fs.stat(path.join(staged, name));
        await fs.rename(path.join(staged, name), path.join(staged, fileNameOf(index)));
        files.push({ key: `${run.runPrefix}${fileNameOf(index)}`, size });
      }
      await fs.rename(staged, runDir);
      await syncAll(files.map((f) => this.store.localPath(f.key)), runDir);
      return { files };
    }
    // Exclusive: a run prefix is fresh or the build stops.
    await fs.mkdir(runDir).catch((error: unknown) => {
      throw (error as NodeJS.ErrnoException).code === "EEXIST" ? runTaken(runDir) : error;
    });
    for (const [index, name] of names.entries()) {
      const { size } = await fs.stat(path.join(staged, name));
      await fs.rename(path.join(staged, name), path.join(runDir, fileNameOf(index)));
      files.push({ key: `${run.runPrefix}${fileNameOf(index)}`, size });
    }
    await syncAll(files.map((f) => this.store.localPath(f.key)), runDir);
    return { files };
  }
}

/**
 * Makes a new run durable where it is written: its files, its folder, and the folder above (which got the run's
 * folder). A run is durable before it is audited and long before an outbox entry can name it.
 */
async function syncAll(files: readonly string[], runDir: string): Promise<void> {
  // One round: each fsync makes its own file's content or folder's entries durable, whatever order they end in, and
  // nothing leads to the run before all have ended (the outbox entry, the pointer move).
  await Promise.all([...files, runDir, path.dirname(runDir)].map(fsyncPath));
}

/** A store without local paths (S3): DuckDB reads copies and writes in the machine's temporary folder; files are uploaded. */
class CopiedFiles implements FileAccess {
  readonly placeConcurrency = 4;

  constructor(private readonly store: ObjectStore) {}

  tableFolders(): string[] {
    return [];
  }

  readonly pathInPlace = undefined;

  async readable(keys: readonly string[], use: FileUse, under?: string): Promise<LocalFiles> {
    return localCopies(this.store, keys, { kind: use, under, missing: (key) => new AuditError(`the run file ${key} is missing from the store; ${MISSING_STOPS[use]}`) });
  }

  async newRunFile(runPrefix: string, fileName: string): Promise<NewFile> {
    return this.newFile(`${runPrefix}${fileName}`, "lakeswap-run-", fileName);
  }

  async newFile(key: string, kind = "lakeswap-compact-", fileName = "compacted.parquet"): Promise<NewFile> {
    const scratch = await freshProcessFolder(kind);
    const file = path.join(scratch, fileName);
    const discard = () => fs.rm(scratch, { recursive: true, force: true });
    return {
      path: file,
      publish: async () => {
        try {
          await this.store.putFile(key, file);
        } finally {
          await discard();
        }
      },
      discard,
    };
  }

  async stage(id: string): Promise<{ readonly dir: string; remove(): Promise<void> }> {
    // A killed process's stage is removed by the next scratch folder any lakeswap process makes on the machine
    // (lakeswap-stage-<pid>-…).
    const parent = await freshProcessFolder("lakeswap-stage-");
    const dir = path.join(parent, `${process.pid}-stage-${id}`);
    const remove = () => fs.rm(parent, { recursive: true, force: true });
    try {
      await fs.mkdir(dir, { recursive: true });
    } catch (error) {
      await remove();
      throw error;
    }
    return { dir, remove };
  }

  async placeRun(staged: string, run: { readonly runId: string; readonly runPrefix: string }): Promise<BuildResult> {
    const { names, fileNameOf } = await stagedFiles(staged, run.runId);
    const files: { key: string; size: number }[] = [];
    for (const [index, name] of names.entries()) {
      const source = path.join(staged, name);
      const key = `${run.runPrefix}${fileNameOf(index)}`;
      const { size } = await fs.stat(source);
      // A run file is never overwritten (a conditional write where S3 has them): a taken one is another writer's run.
      await this.store.putFile(key, source).catch((error: unknown) => {
        throw error instanceof LakeswapError && error.code === "CONFLICT" ? new RunTakenError(`${errorMessage(error)}: run ${run.runId} is another writer's`) : error;
      });
      files.push({ key, size });
    }
    return { files };
  }
}


function runTaken(runDir: string): RunTakenError {
  return new RunTakenError(`the run folder ${runDir} exists already; nothing was written into it`);
}

/** A staged run folder's entries, its Parquet files in order, and the name each takes in its run. */
async function stagedFiles(staged: string, runId: string): Promise<{ entries: string[]; names: string[]; fileNameOf: (index: number) => string }> {
  const entries = await fs.readdir(staged).catch(() => [] as string[]);
  const names = entries.filter((name) => name.endsWith(".parquet")).sort();
  const fileNameOf = (index: number) => (names.length === 1 ? runFileName(runId) : runFileName(runId).replace(/\.parquet$/, `-${index}.parquet`));
  return { entries, names, fileNameOf };
}
