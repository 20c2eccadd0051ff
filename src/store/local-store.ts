import { createHash, randomBytes } from "node:crypto";
import fsCallbacks, { closeSync, linkSync, mkdirSync, openSync, promises as fs, readSync, renameSync, rmdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { LakeswapError } from "../model/errors.js";
import { takeKernelLock } from "./kernel-lock.js";
import { FolderSyncs, fsyncPath, intoFolder, isCode, lightFs, limiter, readIfPresent, unlinkIfPresent, writeTempFile } from "./local-files.js";
import { assertKey, type ListOptions, type ObjectInfo, type ObjectStore, type ProcessLock, type TaggedObject } from "./object-store.js";

const CAS_LOCK_STALE_MS = 10_000;

/** `file://` URLs of keys remembered at most (LocalStore.uri). */
const URI_MEMO = 50_000;
/** Folder reads and file stats of one listing in flight at once. */
const LIST_CONCURRENCY = 16;

/** The embedded object store: keys are files under one local folder. */
export class LocalStore implements ObjectStore {
  readonly capabilities = { conditionalWrites: true, localPaths: true } as const;
  readonly description: string;
  private readonly root: string;
  private readonly folders = new FolderSyncs();

  private readonly describeWrite: DescribeWrite;
  private readonly metadataFolders: MetadataFolders;

  /**
   * `folders` are the lake's metadata folders (../lake/layout.ts); `describeWrite` says what a failed write of a key
   * means (the lake's layout knows; default: nothing more).
   */
  constructor(root: string, options: { readonly folders: MetadataFolders; readonly describeWrite?: DescribeWrite }) {
    this.root = path.resolve(root);
    this.description = this.root;
    this.metadataFolders = options.folders;
    this.describeWrite = options.describeWrite ?? describeNothing;
  }

  private readonly uris = new Map<string, string>();

  localPath(key: string): string {
    return path.join(this.root, ...assertKey(key).split("/"));
  }

  /**
   * The `file://` URL of `key`, remembered: an Iceberg commit names each of a table's files several times, and
   * pathToFileURL costs about 10 µs a call (the memory is bounded: it starts afresh past URI_MEMO entries).
   */
  uri(key: string): string {
    let uri = this.uris.get(key);
    if (uri === undefined) {
      uri = pathToFileURL(this.localPath(key)).href;
      if (this.uris.size >= URI_MEMO) this.uris.clear();
      this.uris.set(key, uri);
    }
    return uri;
  }

  keyOf(uri: string): string | undefined {
    const root = `${pathToFileURL(this.root).href.replace(/\/$/, "")}/`;
    if (!uri.startsWith(root)) return undefined;
    const key = decodeURIComponent(uri.slice(root.length));
    try {
      return assertKey(key);
    } catch {
      return undefined;
    }
  }

  /** Runs a write, turning a full disk into a NO_SPACE error naming the file. */
  private async whenFull<T>(key: string, file: string, write: () => Promise<T>): Promise<T> {
    try {
      return await write();
    } catch (error) {
      throw noSpaceError(key, file, error, this.describeWrite) ?? error;
    }
  }

  async get(key: string): Promise<TaggedObject | undefined> {
    // Objects read whole are the lake's records (leases, manifests, outbox entries): small, read synchronously.
    const body = readIfPresent(this.localPath(key));
    return body === undefined ? undefined : { body, etag: etagOf(body) };
  }

  /** The kernel lock of `key` (flock(2) on that file, held by the native extension or a flock(1) child: ./kernel-lock.ts). */
  async tryLock(key: string): Promise<ProcessLock | "busy" | { readonly unavailable: string }> {
    return takeKernelLock(this.localPath(key));
  }

  async getRange(key: string, offset: number, length: number): Promise<Uint8Array> {
    // A small range (a Parquet footer, read by the audit of every new run) is read synchronously: a page-cache read of
    // microseconds, where open, read and close through the thread pool are a round trip each, behind any fsync there.
    if (length <= SMALL_RANGE_BYTES) return readRangeSync(this.localPath(key), offset, length);
    const handle = await fs.open(this.localPath(key), "r");
    try {
      const buffer = Buffer.alloc(length);
      const { bytesRead } = await handle.read(buffer, 0, length, offset);
      return buffer.subarray(0, bytesRead);
    } finally {
      await handle.close();
    }
  }

  async put(key: string, body: Uint8Array | string, options: { readonly fresh?: boolean } = {}): Promise<void> {
    const target = this.localPath(key);
    await this.whenFull(key, target, async () => {
      // A fresh object's file is fsynced after its rename, with its folder: one round of fsyncs instead of two in turn.
      const temp = options.fresh ? await writeTempFile(path.join(this.root, this.metadataFolders.temp), body, { durable: false }) : await this.writeTemp(body);
      let created: string[];
      try {
        created = await intoFolder(target, this.root, async () => renameSync(temp, target));
      } catch (error) {
        await fs.rm(temp, { force: true });
        throw error;
      }
      await Promise.all([this.syncFolders(path.dirname(target), created), options.fresh ? fsyncPath(target) : undefined]);
    });
  }

  async putIfAbsent(key: string, body: Uint8Array | string): Promise<boolean> {
    const target = this.localPath(key);
    return this.linkIfAbsent(key, target, await this.whenFull(key, target, () => this.writeTemp(body, key)));
  }

  /** Links a durable temporary file in at `target` unless something is there; the temporary file goes either way. */
  private async linkIfAbsent(key: string, target: string, temp: string): Promise<boolean> {
    try {
      // link(2) fails with EEXIST atomically, and the object appears with its whole content.
      const created = await intoFolder(target, this.root, async () => linkSync(temp, target));
      if (!this.isVolatile(key)) await this.syncFolders(path.dirname(target), created);
      return true;
    } catch (error) {
      if (isCode(error, "EEXIST")) return false;
      throw noSpaceError(key, target, error, this.describeWrite) ?? error;
    } finally {
      rmSync(temp, { force: true });
    }
  }

  async putIfMatch(key: string, body: Uint8Array | string, etag: string): Promise<boolean> {
    const target = this.localPath(key);
    // A volatile object (a lease, whose renewal is the fence before every pointer move) is a few hundred bytes never
    // fsynced: written and renamed into place synchronously, in microseconds, not a thread-pool round trip per step.
    if (this.isVolatile(key)) return this.whenFull(key, target, () => this.compareAndSwap(target, etag, async () => this.replaceVolatile(target, body)));
    const temp = await this.whenFull(key, target, () => this.writeTemp(body, key));
    try {
      return await this.whenFull(key, target, () => this.compareAndSwap(target, etag, async () => {
        renameSync(temp, target);
        await this.folders.sync(path.dirname(target));
      }));
    } finally {
      rmSync(temp, { force: true });
    }
  }

  /** Writes a volatile object's new content to a temporary file and renames it over `target`, synchronously and without fsync. */
  private replaceVolatile(target: string, body: Uint8Array | string): void {
    const dir = path.join(this.root, this.metadataFolders.temp);
    const temp = path.join(dir, `${process.pid}-${randomBytes(6).toString("hex")}.tmp`);
    try {
      try {
        writeFileSync(temp, body, { flag: "wx" });
      } catch (error) {
        if (!isCode(error, "ENOENT")) throw error;
        mkdirSync(dir, { recursive: true });
        writeFileSync(temp, body, { flag: "wx" });
      }
      renameSync(temp, target);
    } catch (error) {
      rmSync(temp, { force: true });
      throw error;
    }
  }

  async deleteIfMatch(key: string, etag: string): Promise<boolean> {
    const target = this.localPath(key);
    return this.compareAndSwap(target, etag, async () => {
      await fs.rm(target, { force: true });
      if (!this.isVolatile(key)) await this.folders.sync(path.dirname(target));
    });
  }

  async list(prefix: string, options: ListOptions = {}): Promise<ObjectInfo[]> {
    const slash = prefix.lastIndexOf("/");
    const dirKey = slash >= 0 ? prefix.slice(0, slash) : "";
    const start = dirKey ? this.localPath(dirKey) : this.root;
    const found: ObjectInfo[] = [];
    // Folders are read and files sized a few at a time (the listing is sorted at the end); a slot is held
    // for one call only, never while a subfolder is walked.
    const slot = limiter(LIST_CONCURRENCY);
    const walk = async (dir: string, keyPrefix: string): Promise<void> => {
      let entries;
      try {
        entries = await slot(() => lightFs.readdirTyped(dir));
      } catch (error) {
        if (isCode(error, "ENOENT") || isCode(error, "ENOTDIR")) return;
        throw error;
      }
      // An empty data folder (a build killed right after creating its run folder) is listed as an S3-style
      // folder marker, `key/`, so GC can see and remove it; metadata folders are never listed.
      if (entries.length === 0 && keyPrefix.startsWith(prefix) && keyPrefix !== "" && !`${keyPrefix}/`.startsWith(`${this.metadataFolders.metadata}/`)) {
        found.push({ key: `${keyPrefix}/`, size: 0 });
      }
      await Promise.all(
        entries.map(async (entry) => {
          const key = keyPrefix ? `${keyPrefix}/${entry.name}` : entry.name;
          // Only descend where keys can still match the prefix.
          if (!key.startsWith(prefix) && !prefix.startsWith(`${key}/`)) return;
          if (entry.isDirectory()) {
            await walk(path.join(dir, entry.name), key);
          } else if (entry.isFile() && (options.startAfter === undefined || key > options.startAfter)) {
            // A file at or before `startAfter` is not sized (a new sync id lists the last day's records of many).
            const stat = await slot(() => lightFs.stat(path.join(dir, entry.name))).catch(() => undefined);
            if (stat) found.push({ key, size: stat.size });
          }
          // Symlinks (partition pointers) are catalog state, not objects.
        }),
      );
    };
    await walk(start, dirKey);
    const after = options.startAfter;
    return (after === undefined ? found : found.filter((o) => o.key > after)).sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  async delete(keys: readonly string[]): Promise<void> {
    const parents = new Set<string>();
    for (const key of keys) {
      if (key.endsWith("/")) {
        // A folder marker: the folder goes once it is empty (pruned below, with the parents).
        parents.add(this.localPath(key.slice(0, -1)));
        continue;
      }
      const file = this.localPath(key);
      // unlink(2) is a metadata change of microseconds: a few keys (an outbox entry's acknowledgement) are removed
      // synchronously, not in two round trips through the thread pool each (fs.rm stats before it unlinks); many keys
      // (GC) through the pool, so that the event loop (a collector's HTTP server) never waits on a long deletion.
      if (keys.length <= SYNC_DELETE_KEYS) unlinkIfPresent(file);
      else await fs.rm(file, { force: true });
      parents.add(path.dirname(file));
    }
    // Remove data folders left empty, deepest first, never the root itself. Metadata folders
    // (the lake's metadata folder) stay: concurrent writers keep putting records there, and pruning them
    // would race their mkdir and rename; dropping a table removes its metadata folders.
    const metadata = path.join(this.root, this.metadataFolders.metadata);
    const ordered = [...parents].filter((dir) => dir !== metadata && !dir.startsWith(metadata + path.sep)).sort((a, b) => b.length - a.length);
    for (const start of ordered) {
      let dir = start;
      while (dir.startsWith(this.root + path.sep) && dir !== this.root) {
        try {
          if (keys.length <= SYNC_DELETE_KEYS) rmdirSync(dir);
          else await fs.rmdir(dir);
        } catch {
          break;
        }
        dir = path.dirname(dir);
      }
    }
  }

  async putFileIfAbsent(key: string, localPath: string): Promise<boolean> {
    const target = this.localPath(key);
    // The file's bytes are made durable first; its link then appears whole, or fails with EEXIST, atomically.
    const temp = await this.whenFull(key, target, async () => {
      const dir = path.join(this.root, this.metadataFolders.temp);
      await fs.mkdir(dir, { recursive: true });
      const copy = path.join(dir, `${process.pid}-${randomBytes(6).toString("hex")}.tmp`);
      try {
        // Copied by the kernel (never through lakeswap's memory), then made durable before it is linked into place.
        await fs.copyFile(localPath, copy, fsCallbacks.constants.COPYFILE_EXCL);
        await fsyncPath(copy);
      } catch (error) {
        await fs.rm(copy, { force: true });
        throw error;
      }
      return copy;
    });
    return this.linkIfAbsent(key, target, temp);
  }

  async putFile(key: string, localPath: string): Promise<void> {
    const target = this.localPath(key);
    await this.whenFull(key, target, async () => {
      await fs.mkdir(path.dirname(target), { recursive: true });
      await fs.copyFile(localPath, target);
      await fsyncPath(target);
    });
  }

  async copy(from: string, to: string, _size: number): Promise<void> {
    const source = this.localPath(from);
    const target = this.localPath(to);
    await this.whenFull(to, target, async () => {
      await fs.mkdir(path.dirname(target), { recursive: true });
      try {
        // Run files are immutable: one inode shared by two runs is safe, and removing one run's link leaves the other's.
        await fs.link(source, target);
        await this.folders.sync(path.dirname(target));
      } catch (error) {
        if (!isCode(error, "EXDEV") && !isCode(error, "EPERM") && !isCode(error, "EMLINK") && !isCode(error, "ENOTSUP")) throw error;
        await fs.copyFile(source, target, fsCallbacks.constants.COPYFILE_EXCL);
        await fsyncPath(target);
      }
    });
  }

  /** Writes `body` to a temporary file on the lake's filesystem, fsynced unless it is for a volatile `key`. */
  private async writeTemp(body: Uint8Array | string, key?: string): Promise<string> {
    return writeTempFile(path.join(this.root, this.metadataFolders.temp), body, { durable: key === undefined || !this.isVolatile(key) });
  }

  /** Whether `key` is in a folder whose objects live only as long as their writer (MetadataFolders.volatile). */
  private isVolatile(key: string): boolean {
    return (this.metadataFolders.volatile ?? []).some((folder) => key.startsWith(`${folder}/`));
  }

  /** fsyncs the folder a new entry went into, and the folders that got a new subfolder on its way (`created`), concurrent requests for a folder sharing one fsync. */
  private async syncFolders(dir: string, created: readonly string[]): Promise<void> {
    await Promise.all([dir, ...created].map((folder) => this.folders.sync(folder)));
  }

  /**
   * Runs `change` only if `target` still has `etag`, under a short exclusive lock file. The lock and the read are
   * synchronous (a lease renewal, the fence before every pointer move, takes a few microseconds so, not a round trip
   * through the thread pool per call).
   */
  private async compareAndSwap(target: string, etag: string, change: () => Promise<void>): Promise<boolean> {
    const lock = `${target}.cas-lock`;
    for (let attempt = 0; ; attempt += 1) {
      try {
        closeSync(openSync(lock, "wx"));
        break;
      } catch (error) {
        // The folder is made when it is missing, not checked before every lock.
        if (isCode(error, "ENOENT") && attempt < 20) {
          mkdirSync(path.dirname(target), { recursive: true });
          continue;
        }
        if (!isCode(error, "EEXIST")) throw error;
        const stat = statSync(lock, { throwIfNoEntry: false });
        if (stat && Date.now() - stat.mtimeMs > CAS_LOCK_STALE_MS) rmSync(lock, { force: true });
        await new Promise((resolve) => setTimeout(resolve, Math.min(50, 2 + attempt)));
      }
    }
    try {
      const current = readIfPresent(target);
      if (current === undefined || etagOf(current) !== etag) return false;
      await change();
      return true;
    } finally {
      rmSync(lock, { force: true });
    }
  }
}

/** What a failed write of one key means for the data, for the message of a full disk (the lake's layout knows). */
export type DescribeWrite = (key: string) => string;

/**
 * Where the embedded lake keeps its own records in its folder (../lake/layout.ts `METADATA_FOLDERS`): the metadata
 * folder (never listed as data, never pruned), its temporary folder, and the areas in it that hold a folder per table.
 */
export interface MetadataFolders {
  readonly metadata: string;
  readonly temp: string;
  readonly tableAreas: readonly string[];
  /**
   * Folders whose objects matter only while the process that wrote them lives (writer leases): written and removed
   * without fsync. After a power loss every holder is gone; a lease left old, empty or torn is then taken over as
   * abandoned, so durability would buy nothing, and a lease renewal (the fence before each pointer move) would
   * otherwise cost two fsyncs.
   */
  readonly volatile?: readonly string[];
}

const describeNothing: DescribeWrite = () => "the write did not complete";

/**
 * A full disk or quota (ENOSPC, EDQUOT) as a NO_SPACE error (exit 10) that names the file and says
 * whether the pointer moved (`describeWrite`, by what the key holds); undefined for any other error.
 */
export function noSpaceError(key: string, file: string, error: unknown, describeWrite: DescribeWrite): LakeswapError | undefined {
  const code = isCode(error, "ENOSPC") ? "ENOSPC" : isCode(error, "EDQUOT") ? "EDQUOT" : undefined;
  if (code === undefined) return undefined;
  return new LakeswapError(
    "NO_SPACE",
    `${code === "ENOSPC" ? "no space left on the device" : "disk quota exceeded"} (${code}) writing '${file}': ${describeWrite(key)}. Free space in the lake's folder and rerun`,
    { cause: error },
  );
}


function etagOf(body: Uint8Array): string {
  return createHash("sha256").update(body).digest("hex").slice(0, 32);
}

/** The most keys `LocalStore.delete` removes with synchronous calls; more (GC) go through the thread pool. */
const SYNC_DELETE_KEYS = 16;

/** A range of at most this many bytes is read synchronously (LocalStore.getRange). */
const SMALL_RANGE_BYTES = 64 * 1024;

function readRangeSync(file: string, offset: number, length: number): Uint8Array {
  const fd = openSync(file, "r");
  try {
    const buffer = Buffer.alloc(length);
    const bytesRead = readSync(fd, buffer, 0, length, offset);
    return buffer.subarray(0, bytesRead);
  } finally {
    closeSync(fd);
  }
}
