import { createHash, randomBytes } from "node:crypto";
import { promises as fs } from "node:fs";
import path from "node:path";
import { LakeswapError } from "../core/errors.js";
import { writeConsequence } from "../core/manifest.js";
import { assertKey, type ObjectInfo, type ObjectStore, type TaggedObject } from "./object-store.js";

const TEMP_DIR = "_lakeswap/tmp";
const CAS_LOCK_STALE_MS = 10_000;

/** The embedded object store: keys are files under one local folder. */
export class LocalStore implements ObjectStore {
  readonly capabilities = { conditionalWrites: true, localPaths: true } as const;
  readonly description: string;
  private readonly root: string;

  constructor(root: string) {
    this.root = path.resolve(root);
    this.description = this.root;
  }

  localPath(key: string): string {
    return path.join(this.root, ...assertKey(key).split("/"));
  }

  async get(key: string): Promise<TaggedObject | undefined> {
    try {
      const body = await fs.readFile(this.localPath(key));
      return { body, etag: etagOf(body) };
    } catch (error) {
      if (isCode(error, "ENOENT")) return undefined;
      throw error;
    }
  }

  async getRange(key: string, offset: number, length: number): Promise<Uint8Array> {
    const handle = await fs.open(this.localPath(key), "r");
    try {
      const buffer = Buffer.alloc(length);
      const { bytesRead } = await handle.read(buffer, 0, length, offset);
      return buffer.subarray(0, bytesRead);
    } finally {
      await handle.close();
    }
  }

  async put(key: string, body: Uint8Array | string): Promise<void> {
    const target = this.localPath(key);
    await whenFull(key, target, async () => {
      const temp = await this.writeTemp(body);
      await intoFolder(target, () => fs.rename(temp, target));
      await fsyncPath(path.dirname(target));
    });
  }

  async putIfAbsent(key: string, body: Uint8Array | string): Promise<boolean> {
    const target = this.localPath(key);
    const temp = await whenFull(key, target, () => this.writeTemp(body));
    try {
      // link(2) fails with EEXIST atomically, and the object appears with its whole content.
      await intoFolder(target, () => fs.link(temp, target));
      await fsyncPath(path.dirname(target));
      return true;
    } catch (error) {
      if (isCode(error, "EEXIST")) return false;
      throw noSpaceError(key, target, error) ?? error;
    } finally {
      await fs.rm(temp, { force: true });
    }
  }

  async putIfMatch(key: string, body: Uint8Array | string, etag: string): Promise<boolean> {
    const target = this.localPath(key);
    const temp = await whenFull(key, target, () => this.writeTemp(body));
    try {
      return await whenFull(key, target, () => this.compareAndSwap(target, etag, async () => {
        await fs.rename(temp, target);
        await fsyncPath(path.dirname(target));
      }));
    } finally {
      await fs.rm(temp, { force: true });
    }
  }

  async deleteIfMatch(key: string, etag: string): Promise<boolean> {
    const target = this.localPath(key);
    return this.compareAndSwap(target, etag, async () => {
      await fs.rm(target, { force: true });
      await fsyncPath(path.dirname(target));
    });
  }

  async list(prefix: string): Promise<ObjectInfo[]> {
    const slash = prefix.lastIndexOf("/");
    const dirKey = slash >= 0 ? prefix.slice(0, slash) : "";
    const start = dirKey ? this.localPath(dirKey) : this.root;
    const found: ObjectInfo[] = [];
    const walk = async (dir: string, keyPrefix: string): Promise<void> => {
      let entries;
      try {
        entries = await fs.readdir(dir, { withFileTypes: true });
      } catch (error) {
        if (isCode(error, "ENOENT") || isCode(error, "ENOTDIR")) return;
        throw error;
      }
      // An empty data folder (a build killed right after creating its run folder) is listed as an S3-style
      // folder marker, `key/`, so GC can see and remove it; metadata folders are never listed.
      if (entries.length === 0 && keyPrefix.startsWith(prefix) && keyPrefix !== "" && !`${keyPrefix}/`.startsWith("_lakeswap/")) {
        found.push({ key: `${keyPrefix}/`, size: 0 });
      }
      for (const entry of entries) {
        const key = keyPrefix ? `${keyPrefix}/${entry.name}` : entry.name;
        // Only descend where keys can still match the prefix.
        if (!key.startsWith(prefix) && !prefix.startsWith(`${key}/`)) continue;
        if (entry.isDirectory()) {
          await walk(path.join(dir, entry.name), key);
        } else if (entry.isFile()) {
          const stat = await fs.stat(path.join(dir, entry.name)).catch(() => undefined);
          if (stat) found.push({ key, size: stat.size });
        }
        // Symlinks (partition pointers) are catalog state, not objects.
      }
    };
    await walk(start, dirKey);
    return found.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
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
      await fs.rm(file, { force: true });
      parents.add(path.dirname(file));
    }
    // Remove data folders left empty, deepest first, never the root itself. Metadata folders
    // (_lakeswap/…) stay: concurrent writers keep putting records there, and pruning them
    // would race their mkdir and rename; dropping a table removes its metadata folders.
    const metadata = path.join(this.root, "_lakeswap");
    const ordered = [...parents].filter((dir) => dir !== metadata && !dir.startsWith(metadata + path.sep)).sort((a, b) => b.length - a.length);
    for (const start of ordered) {
      let dir = start;
      while (dir.startsWith(this.root + path.sep) && dir !== this.root) {
        try {
          await fs.rmdir(dir);
        } catch {
          break;
        }
        dir = path.dirname(dir);
      }
    }
  }

  async putFile(key: string, localPath: string): Promise<void> {
    const target = this.localPath(key);
    await whenFull(key, target, async () => {
      await fs.mkdir(path.dirname(target), { recursive: true });
      await fs.copyFile(localPath, target);
      await fsyncPath(target);
    });
  }

  /** Writes `body` to a fsynced temporary file on the lake's filesystem. */
  private async writeTemp(body: Uint8Array | string): Promise<string> {
    const dir = path.join(this.root, TEMP_DIR);
    await fs.mkdir(dir, { recursive: true });
    const temp = path.join(dir, `${process.pid}-${randomBytes(6).toString("hex")}.tmp`);
    const handle = await fs.open(temp, "wx");
    try {
      await handle.writeFile(body);
      await handle.sync();
    } catch (error) {
      // A write that failed (a full disk) leaves no temporary file behind to fill it further.
      await handle.close().catch(() => undefined);
      await fs.rm(temp, { force: true });
      throw error;
    }
    await handle.close();
    return temp;
  }

  /** Runs `change` only if `target` still has `etag`, under a short exclusive lock file. */
  private async compareAndSwap(target: string, etag: string, change: () => Promise<void>): Promise<boolean> {
    const lock = `${target}.cas-lock`;
    await fs.mkdir(path.dirname(target), { recursive: true });
    for (let attempt = 0; ; attempt += 1) {
      try {
        await (await fs.open(lock, "wx")).close();
        break;
      } catch (error) {
        if (!isCode(error, "EEXIST")) throw error;
        const stat = await fs.stat(lock).catch(() => undefined);
        if (stat && Date.now() - stat.mtimeMs > CAS_LOCK_STALE_MS) await fs.rm(lock, { force: true });
        await new Promise((resolve) => setTimeout(resolve, Math.min(50, 2 + attempt)));
      }
    }
    try {
      const current = await fs.readFile(target).catch((error: unknown) => {
        if (isCode(error, "ENOENT")) return undefined;
        throw error;
      });
      if (current === undefined || etagOf(current) !== etag) return false;
      await change();
      return true;
    } finally {
      await fs.rm(lock, { force: true });
    }
  }
}

/**
 * A full disk or quota (ENOSPC, EDQUOT) as a NO_SPACE error (exit 10) that names the file and says
 * whether the pointer moved (by what the key holds: ../core/manifest.ts `writeConsequence`); undefined
 * for any other error.
 */
export function noSpaceError(key: string, file: string, error: unknown): LakeswapError | undefined {
  const code = isCode(error, "ENOSPC") ? "ENOSPC" : isCode(error, "EDQUOT") ? "EDQUOT" : undefined;
  if (code === undefined) return undefined;
  return new LakeswapError(
    "NO_SPACE",
    `${code === "ENOSPC" ? "no space left on the device" : "disk quota exceeded"} (${code}) writing '${file}': ${writeConsequence(key)}. Free space in the lake's folder and rerun`,
    { cause: error },
  );
}

/** Runs a write, turning a full disk into a NO_SPACE error naming the file. */
async function whenFull<T>(key: string, file: string, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (error) {
    throw noSpaceError(key, file, error) ?? error;
  }
}

function etagOf(body: Uint8Array): string {
  return createHash("sha256").update(body).digest("hex").slice(0, 32);
}

/**
 * Runs `place` (a rename or link into `target`'s folder), creating the folder
 * first. A concurrent delete may remove the folder once it is empty, between
 * the mkdir and the rename; then the folder is made again and `place` retried.
 */
async function intoFolder(target: string, place: () => Promise<void>): Promise<void> {
  for (let attempt = 0; ; attempt += 1) {
    try {
      await fs.mkdir(path.dirname(target), { recursive: true });
      await place();
      return;
    } catch (error) {
      if (!isCode(error, "ENOENT") || attempt >= 20) throw error;
    }
  }
}

/** fsyncs a file or a folder so a rename or write survives a power loss. */
export async function fsyncPath(target: string): Promise<void> {
  const handle = await fs.open(target, "r");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** True when `error` is a Node system error with the given code. */
export function isCode(error: unknown, code: string): boolean {
  return typeof error === "object" && error !== null && (error as { code?: unknown }).code === code;
}
