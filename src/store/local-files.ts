import fsCallbacks, { linkSync, mkdirSync, promises as fs, readFileSync, renameSync, unlinkSync, type Dirent, type Stats } from "node:fs";
import { randomBytes } from "node:crypto";
import path from "node:path";

// The local file system as the embedded store and catalog use it: folders made on demand, durable temporary files,
// fsyncs of files and folders (several requests for one folder sharing one fsync), and bounded concurrency.

/**
 * Runs `place` (a rename, link or symlink into `target`'s folder); only when
 * the folder is missing (ENOENT) is it made, with its missing parents, and
 * `place` retried, so a folder that exists costs no mkdir. A concurrent
 * delete may remove the folder once it is empty, between the mkdir and the
 * rename; then the folder is made again. Returns the folders that got a new
 * subfolder here (see `makeFolder`): fsync them too for the new entry to be
 * durable.
 */
export async function intoFolder(target: string, root: string, place: () => Promise<unknown>): Promise<string[]> {
  const created: string[] = [];
  for (let attempt = 0; ; attempt += 1) {
    try {
      await place();
      return created;
    } catch (error) {
      if (!isCode(error, "ENOENT") || attempt >= 20) throw error;
    }
    created.push(...(await makeFolder(path.dirname(target), root)));
  }
}

/**
 * Makes `dir` and its missing parents; returns the folders that hold a
 * folder made here (from the parent of the first folder made down to the
 * parent of `dir`), which must be fsynced for the new folders to survive a
 * power loss. Empty when `dir` existed. Folders above the lake's `root` (when
 * the lake's own folder was made) are fsynced here, best effort: lakeswap may
 * not be allowed to open them. The folders are made with synchronous calls
 * (page-cache operations of microseconds, as `writeTempFile`'s writes are).
 */
export async function makeFolder(dir: string, root: string): Promise<string[]> {
  const first = mkdirSync(dir, { recursive: true });
  if (first === undefined) return [];
  const parents: string[] = [];
  const outside: string[] = [];
  for (let folder = path.dirname(dir); ; folder = path.dirname(folder)) {
    (folder === root || folder.startsWith(root + path.sep) ? parents : outside).push(folder);
    if (folder === path.dirname(first) || folder === path.dirname(folder)) break;
  }
  await Promise.all(outside.map((folder) => fsyncPath(folder).catch(() => undefined)));
  return parents;
}

/** Bodies up to this size are written with synchronous calls (page-cache copies of microseconds); their fsync still goes to the thread pool. */
const SMALL_BODY_BYTES = 64 * 1024;

/**
 * Writes `body` to a new temporary file in `dir` (made if missing) and
 * fsyncs it (unless `durable: false`); a write that fails (a full disk) leaves no file behind.
 *
 * A small body (a pointer's state, a manifest, an outbox entry: every durable record of a build) is opened, written
 * and closed synchronously: each of those is a page-cache operation of microseconds, where a round trip through the
 * thread pool costs about 0.1 ms of waiting for a thread. Only the fsync, which may wait on the disk, goes through the
 * pool, so the event loop never waits on the disk.
 */
export async function writeTempFile(dir: string, body: Uint8Array | string, options: { readonly durable?: boolean } = {}): Promise<string> {
  const temp = path.join(dir, `${process.pid}-${randomBytes(6).toString("hex")}.tmp`);
  const bytes = typeof body === "string" ? Buffer.from(body) : body;
  const small = bytes.length <= SMALL_BODY_BYTES;
  let fd: number;
  for (let attempt = 0; ; attempt += 1) {
    try {
      fd = small ? fsCallbacks.openSync(temp, "wx") : await call<number>((done) => fsCallbacks.open(temp, "wx", done));
      break;
    } catch (error) {
      if (!isCode(error, "ENOENT") || attempt >= 20) throw error;
    }
    mkdirSync(dir, { recursive: true });
  }
  try {
    for (let offset = 0; offset < bytes.length; ) {
      offset += small ? fsCallbacks.writeSync(fd, bytes, offset, bytes.length - offset) : await call<number>((done) => fsCallbacks.write(fd, bytes, offset, bytes.length - offset, null, done));
    }
    if (options.durable !== false) await call((done) => fsCallbacks.fsync(fd, done));
  } catch (error) {
    closeQuietly(fd);
    await fs.rm(temp, { force: true });
    throw error;
  }
  fsCallbacks.closeSync(fd);
  return temp;
}

/** Closes a descriptor whose file is being given up on: an error closing it changes nothing for the caller. */
function closeQuietly(fd: number): void {
  try {
    fsCallbacks.closeSync(fd);
  } catch {
    // The write's own error is the one to report.
  }
}

/**
 * fsyncs a file or a folder so a rename or write survives a power loss. The fsync goes through the thread pool (it
 * may wait on the disk); the open and close around it are synchronous (microseconds each, where a round trip through
 * the pool costs about 0.1 ms: a durable record fsyncs a file and a folder, and a build writes several records).
 */
export async function fsyncPath(target: string): Promise<void> {
  const fd = fsCallbacks.openSync(target, "r");
  try {
    await call((done) => fsCallbacks.fsync(fd, done));
  } finally {
    fsCallbacks.closeSync(fd);
  }
}

/**
 * The folder reads the hot paths make (listings), through the callback API: the promise API costs about
 * twice the CPU per call (a FileHandle per read), which shows over thousands of partitions.
 */
export const lightFs = {
  readdir: (dir: string): Promise<string[]> => call<string[]>((done) => fsCallbacks.readdir(dir, done)),
  readdirTyped: (dir: string): Promise<Dirent[]> => call<Dirent[]>((done) => fsCallbacks.readdir(dir, { withFileTypes: true }, done)),
  stat: (file: string): Promise<Stats> => call<Stats>((done) => fsCallbacks.stat(file, done)),
};

/**
 * A small file's bytes (a pointer's state, a table definition, a lease, a manifest, an outbox entry), read
 * synchronously: microseconds, where through the thread pool open, stat, read and close are a round trip each.
 * Undefined where there is no file.
 */
export function readIfPresent(file: string): Buffer | undefined {
  try {
    return readFileSync(file);
  } catch (error) {
    if (isCode(error, "ENOENT")) return undefined;
    throw error;
  }
}

/** Removes a file; one already gone is fine (a temporary file given up on, a key two writers delete). */
export function unlinkIfPresent(file: string): void {
  try {
    unlinkSync(file);
  } catch (error) {
    if (!isCode(error, "ENOENT")) throw error;
  }
}

/** A callback-style fs call as a promise. */
function call<T = void>(start: (done: (error: NodeJS.ErrnoException | null, value?: T) => void) => void): Promise<T> {
  return new Promise<T>((resolve, reject) => start((error, value) => (error ? reject(error) : resolve(value as T))));
}

/**
 * fsyncs of folders, shared: a request joins the folder's next fsync if it
 * has not started yet (it starts after the request, so it covers every entry
 * made before the request), else queues a new one behind the running one.
 * Concurrent writes into one folder then cost one or two fsyncs, not one each.
 */
export class FolderSyncs {
  private readonly queued = new Map<string, Promise<void>>();
  private readonly running = new Map<string, Promise<void>>();

  sync(dir: string): Promise<void> {
    const queued = this.queued.get(dir);
    if (queued) return queued;
    const before = this.running.get(dir);
    const self: { done?: Promise<void> } = {};
    const done = (async () => {
      // Always yields first, so this fsync is queued (and `self.done` set) before it starts.
      await before?.catch(() => undefined);
      this.queued.delete(dir);
      this.running.set(dir, self.done as Promise<void>);
      try {
        await fsyncPath(dir);
      } finally {
        if (this.running.get(dir) === self.done) this.running.delete(dir);
      }
    })();
    self.done = done;
    this.queued.set(dir, done);
    return done;
  }
}

/**
 * Runs `work` on every item, at most `limit` at a time. After a failure no
 * further item starts, and the first error is thrown once the started ones
 * have ended (nothing keeps running behind the caller's back).
 */
export async function eachLimited<T>(items: readonly T[], limit: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  let failure: { error: unknown } | undefined;
  const worker = async (): Promise<void> => {
    while (failure === undefined && next < items.length) {
      const item = items[next++] as T;
      try {
        await work(item);
      } catch (error) {
        failure ??= { error };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  if (failure !== undefined) throw failure.error;
}

/** A gate that lets at most `limit` calls run at once. */
export function limiter(limit: number): <T>(task: () => Promise<T>) => Promise<T> {
  let active = 0;
  const waiting: (() => void)[] = [];
  return async <T>(task: () => Promise<T>): Promise<T> => {
    if (active >= limit) await new Promise<void>((resolve) => waiting.push(resolve));
    else active += 1;
    try {
      return await task();
    } finally {
      const wake = waiting.shift();
      if (wake) wake();
      else active -= 1;
    }
  };
}

/** True when `error` is a Node system error with the given code. */
export function isCode(error: unknown, code: string): boolean {
  return typeof error === "object" && error !== null && (error as { code?: unknown }).code === code;
}

/** Writes a file by temp file + fsync + rename + fsync of the folder (and of the folders that got a new folder on the way). */
export async function writeFileAtomic(file: string, text: string, tempDir: string, root: string): Promise<void> {
  const temp = await writeTempFile(tempDir, text);
  let folders: string[];
  try {
    // A rename within one file system: a metadata change of microseconds, made synchronously as the write was.
    folders = await intoFolder(file, root, async () => renameSync(temp, file));
  } catch (error) {
    await fs.rm(temp, { force: true });
    throw error;
  }
  await Promise.all([path.dirname(file), ...folders].map(fsyncPath));
}

/**
 * Places a file as writeFileAtomic does, but only where there is none (link(2) of the written temp file, not rename):
 * false, and nothing changed, where another writer's file is there already.
 */
export async function placeFileIfAbsent(file: string, text: string, tempDir: string, root: string): Promise<boolean> {
  const temp = await writeTempFile(tempDir, text);
  try {
    const folders = await intoFolder(file, root, async () => linkSync(temp, file));
    await Promise.all([path.dirname(file), ...folders].map(fsyncPath));
    return true;
  } catch (error) {
    if (isCode(error, "EEXIST")) return false;
    throw error;
  } finally {
    unlinkIfPresent(temp);
  }
}
