import fsCallbacks, { promises as fs, readFileSync, type Dirent, type Stats } from "node:fs";
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
 * not be allowed to open them.
 */
export async function makeFolder(dir: string, root: string): Promise<string[]> {
  const first = await fs.mkdir(dir, { recursive: true });
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

/**
 * Writes `body` to a new temporary file in `dir` (made if missing) and
 * fsyncs it (unless `durable: false`); a write that fails (a full disk) leaves no file behind.
 */
export async function writeTempFile(dir: string, body: Uint8Array | string, options: { readonly durable?: boolean } = {}): Promise<string> {
  const temp = path.join(dir, `${process.pid}-${randomBytes(6).toString("hex")}.tmp`);
  let fd: number;
  for (let attempt = 0; ; attempt += 1) {
    try {
      fd = await call<number>((done) => fsCallbacks.open(temp, "wx", done));
      break;
    } catch (error) {
      if (!isCode(error, "ENOENT") || attempt >= 20) throw error;
    }
    await fs.mkdir(dir, { recursive: true });
  }
  try {
    const bytes = typeof body === "string" ? Buffer.from(body) : body;
    for (let offset = 0; offset < bytes.length; ) {
      offset += await call<number>((done) => fsCallbacks.write(fd, bytes, offset, bytes.length - offset, null, done));
    }
    if (options.durable !== false) await call((done) => fsCallbacks.fsync(fd, done));
  } catch (error) {
    await call((done) => fsCallbacks.close(fd, done)).catch(() => undefined);
    await fs.rm(temp, { force: true });
    throw error;
  }
  await call((done) => fsCallbacks.close(fd, done));
  return temp;
}

/**
 * fsyncs a file or a folder so a rename or write survives a power loss. (Through the callback API: a
 * promise FileHandle costs about twice the CPU per file, which shows when thousands are fsynced.)
 */
export async function fsyncPath(target: string): Promise<void> {
  const fd = await call<number>((done) => fsCallbacks.open(target, "r", done));
  try {
    await call((done) => fsCallbacks.fsync(fd, done));
  } finally {
    await call((done) => fsCallbacks.close(fd, done));
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
    folders = await intoFolder(file, root, () => fs.rename(temp, file));
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
    const folders = await intoFolder(file, root, () => fs.link(temp, file));
    await Promise.all([path.dirname(file), ...folders].map(fsyncPath));
    return true;
  } catch (error) {
    if (isCode(error, "EEXIST")) return false;
    throw error;
  } finally {
    await fs.rm(temp, { force: true });
  }
}
