/**
 * s3rver's filesystem store (the class every S3 test server of a process
 * shares), patched so that it behaves as S3 does, reads and writes its files
 * with synchronous calls, lists from the prefix's folder and answers from
 * memory what it would otherwise read from disk for every request
 * (./s3rver-read-cache.ts). Test code only.
 */
import { createHash } from "node:crypto";
import { closeSync, mkdirSync, openSync, readdirSync, readFileSync, readSync, statSync, unlinkSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { Readable } from "node:stream";
import { cacheReads } from "./s3rver-read-cache.js";

const require = createRequire(import.meta.url);

/** An object as s3rver's controllers hand it to the store. */
export interface S3rverStoredObject {
  readonly bucket: string;
  readonly key: string;
  readonly content: Buffer | NodeJS.ReadableStream;
  readonly metadata: Record<string, string>;
}

/** The part of s3rver's filesystem store that is called here. */
export interface S3rverFilesystemStore {
  getBucketPath(bucket: string): string;
  getResourcePath(bucket: string, key: string | undefined, resource: string): string;
  getMetadata(bucket: string, key: string): Promise<Record<string, unknown>>;
  putMetadata(bucket: string, key: string, metadata: Record<string, string>, md5?: string): Promise<void>;
}

interface S3rverListOptions {
  readonly delimiter?: string;
  readonly startAfter?: string;
  readonly prefix?: string;
  readonly maxKeys?: number;
}

/**
 * Patches s3rver's filesystem store (once a process): two fixes so that it
 * behaves as S3 does, its files read and written with synchronous calls, its
 * listings walked from the prefix's folder (`listObjectsFromPrefix`) and what
 * it reads again and again answered from memory (`cacheReads`). The fixes:
 *
 * - it answers a PUT before the object's bytes are on disk: putObject resolves
 *   once the body has been read through (the MD5 is known), not once the file
 *   write has finished, so a GET right after the PUT could find no file yet
 *   (404) or a short one. S3 reads its own writes (a lease read back right
 *   after it was taken, a run file read after its upload), so putObject here
 *   resolves once the file is written and closed (CompleteMultipartUpload goes
 *   through it too);
 * - deleteObject removes the folders the key leaves empty, racing a PUT of a
 *   sibling key (two partitions' outbox records in one folder, written and
 *   deleted at once): the folder goes away under the PUT, or is refilled
 *   before its rmdir, and one of the two requests fails with a 500 that S3
 *   would never give. S3 has no folders; here empty ones are left in place
 *   (listings read files only).
 *
 * Synchronous calls: the store's files are small, mostly on the run's memory
 * file system (test/support/test-tmpdir.ts), and an asynchronous call (a round
 * trip through libuv's thread pool) costs several times the CPU of the call
 * itself: stat, reading the metadata of an object, writing it, opening it for
 * a GET were most of the S3 server's CPU. A body still streams in and out in
 * chunks; the answers (ETag, Last-Modified, Content-Length, user metadata,
 * bytes and ranges) are those of s3rver's own methods.
 */
export function makeS3rverBehaveLikeS3(): void {
  const store = require("s3rver/lib/stores/filesystem.js") as { prototype: Record<string, unknown> };
  if (store.prototype.lakeswapBehavesLikeS3) return;
  store.prototype.lakeswapBehavesLikeS3 = true;
  store.prototype.putObject = putObject;
  store.prototype.putMetadata = putMetadata;
  store.prototype.getMetadata = getMetadataFrom(store.prototype.getMetadata as GetMetadata);
  store.prototype.getObject = getObject;
  store.prototype.existsObject = existsObject;
  store.prototype.deleteObject = deleteObject;
  store.prototype.listObjects = listObjectsFromPrefix(store.prototype.listObjects as ListObjects);
  cacheReads(store.prototype);
}

const S3Object = require("s3rver/lib/models/object.js") as {
  new (bucket: string, key: string, content: NodeJS.ReadableStream | null, metadata: Record<string, unknown>): { range?: { start: number; end: number } };
  readonly ALLOWED_METADATA: readonly string[];
};

async function putObject(this: S3rverFilesystemStore, object: S3rverStoredObject): Promise<{ size: number; md5: string }> {
  const objectPath = this.getResourcePath(object.bucket, object.key, "object");
  let file: number;
  try {
    file = openSync(objectPath, "w");
  } catch (error) {
    // The key's folder is made when it is missing only: most keys go to a folder that holds others already.
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    mkdirSync(path.dirname(objectPath), { recursive: true });
    file = openSync(objectPath, "w");
  }
  const digest = createHash("md5");
  let size = 0;
  const write = (chunk: Buffer): void => {
    writeFileSync(file, chunk);
    digest.update(chunk);
    size += chunk.length;
  };
  try {
    if (Buffer.isBuffer(object.content)) write(object.content);
    else for await (const chunk of object.content as AsyncIterable<Buffer>) write(chunk);
  } finally {
    closeSync(file);
  }
  const md5 = digest.digest("hex");
  await this.putMetadata(object.bucket, object.key, object.metadata, md5);
  return { size, md5 };
}

/** s3rver's: the object's MD5 (unless none is given), then the headers S3 keeps (a few standard ones and `x-amz-meta-*`) as JSON. */
async function putMetadata(this: S3rverFilesystemStore, bucket: string, key: string, metadata: Record<string, string>, md5?: string): Promise<void> {
  const kept: Record<string, string> = {};
  for (const name of S3Object.ALLOWED_METADATA) if (name in metadata) kept[name] = metadata[name] as string;
  for (const [name, value] of Object.entries(metadata)) if (name.startsWith("x-amz-meta-")) kept[name] = value;
  if (md5) writeFileSync(this.getResourcePath(bucket, key, "object.md5"), md5);
  writeFileSync(this.getResourcePath(bucket, key, "metadata.json"), JSON.stringify(kept, null, 2));
}

type GetMetadata = (this: S3rverFilesystemStore, bucket: string, key: string) => Promise<Record<string, unknown>>;

/** s3rver's getMetadata, read synchronously; an object without its MD5 file (copied with new metadata) takes s3rver's own, which makes one. */
function getMetadataFrom(original: GetMetadata): GetMetadata {
  return async function getMetadata(this: S3rverFilesystemStore, bucket, key) {
    const objectPath = this.getResourcePath(bucket, key, "object");
    const stat = statSync(objectPath);
    const md5 = readIfExists(`${objectPath}.md5`);
    if (md5 === undefined) return original.call(this, bucket, key);
    const stored = readIfExists(this.getResourcePath(bucket, key, "metadata.json"));
    return {
      ...(stored === undefined ? undefined : (JSON.parse(stored) as Record<string, unknown>)),
      etag: JSON.stringify(md5),
      "last-modified": stat.mtime.toUTCString(),
      "content-length": stat.size,
    };
  };
}

function readIfExists(file: string): string | undefined {
  try {
    return readFileSync(file, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
}

/** s3rver's getObject (a range of the object's bytes, none when the range is not satisfiable), from a file opened before it answers. */
async function getObject(this: S3rverFilesystemStore, bucket: string, key: string, options?: { start?: number; end?: number }): Promise<unknown> {
  let metadata: Record<string, unknown>;
  let file: number;
  try {
    metadata = await this.getMetadata(bucket, key);
    file = openSync(this.getResourcePath(bucket, key, "object"), "r");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw error;
  }
  const lastByte = Math.max(0, Number(metadata["content-length"]) - 1);
  // `||` as s3rver's: a start that is not a number (a suffix range) is 0.
  const range = { start: options?.start || 0, end: Math.min(options?.end || Infinity, lastByte) };
  const ranged = options !== undefined && (options.start !== undefined || Boolean(options.end));
  const satisfiable = range.start >= 0 && Math.min(range.end, lastByte) >= range.start;
  if (!satisfiable) closeSync(file);
  const object = new S3Object(bucket, key, satisfiable ? new FileRange(file, range.start, range.end) : null, metadata);
  if (ranged) object.range = range;
  return object;
}

/** The bytes `start` to `end` (inclusive) of an open file, read as they are asked for; the file is closed when the stream ends or is destroyed. */
class FileRange extends Readable {
  constructor(
    private readonly file: number,
    private position: number,
    private readonly end: number,
  ) {
    // The chunks of a file stream (s3rver's).
    super({ highWaterMark: 64 * 1024 });
  }

  override _read(size: number): void {
    const length = Math.min(size, this.end + 1 - this.position);
    if (length <= 0) {
      this.push(null);
      return;
    }
    const chunk = Buffer.allocUnsafe(length);
    const read = readSync(this.file, chunk, 0, length, this.position);
    this.position += read;
    this.push(read === 0 ? null : chunk.subarray(0, read));
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    closeSync(this.file);
    callback(error);
  }
}

async function existsObject(this: S3rverFilesystemStore, bucket: string, key: string): Promise<boolean> {
  return statSync(this.getResourcePath(bucket, key, "object"), { throwIfNoEntry: false }) !== undefined;
}

async function deleteObject(this: S3rverFilesystemStore, bucket: string, key: string): Promise<void> {
  for (const resource of ["object", "object.md5", "metadata.json"]) {
    try {
      unlinkSync(this.getResourcePath(bucket, key, resource));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    }
  }
}

/**
 * The ETag of the object at a key, as s3rver answers a HEAD of it (from the
 * object's metadata), or undefined when the bucket or the key does not exist.
 */
export async function storedEtag(store: S3rverFilesystemStore, bucket: string, key: string): Promise<string | undefined> {
  try {
    return String((await store.getMetadata(bucket, key)).etag);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
}

type ListObjects = (this: S3rverFilesystemStore, bucket: string, options: S3rverListOptions) => Promise<unknown>;

/**
 * s3rver's listObjects, walking from the prefix's folder: s3rver's walks the
 * bucket from its root and stats every entry of each folder on the way, so
 * in the run's shared S3 each listing of a lake stat-ed the folder of every
 * lake made so far (and the walk is synchronous). The folders above the
 * prefix's are checked as s3rver's walk checks them, entries' types come from
 * readdir, and the keys, their order and the truncation are s3rver's. A
 * prefix with an empty, `.` or `..` segment takes s3rver's own walk.
 */
function listObjectsFromPrefix(original: ListObjects): ListObjects {
  const objectSuffix = "._S3rver_object";
  return async function listObjects(this: S3rverFilesystemStore, bucket, options) {
    const { delimiter = "", startAfter = "", prefix = "", maxKeys = Infinity } = options;
    const folders = prefix.includes("/") ? prefix.slice(0, prefix.lastIndexOf("/")).split("/") : [];
    if (process.platform === "win32" || folders.some((f) => f === "" || f === "." || f === "..")) return original.call(this, bucket, options);
    const bucketPath = this.getBucketPath(bucket);
    const startAfterPath = [bucketPath, startAfter].join("/");
    const prefixPath = [bucketPath, prefix].join("/");
    // s3rver's filter of the folders its walk enters.
    const enters = (dirPath: string): boolean => {
      if (dirPath < startAfterPath && !startAfterPath.includes(dirPath)) return false;
      if (dirPath.startsWith(prefixPath)) return !(delimiter && dirPath.slice(prefixPath.length).includes(delimiter));
      return prefixPath.startsWith(dirPath);
    };
    function* walk(dir: string): Generator<string> {
      for (const entry of readdirSync(dir, { withFileTypes: true })) {
        const entryPath = path.posix.join(dir, entry.name);
        if (!entry.isDirectory()) yield entryPath;
        else if (enters(entryPath)) yield* walk(entryPath);
      }
    }
    let start: string | undefined = bucketPath;
    for (const folder of folders) {
      start = path.posix.join(start, folder);
      if (!enters(start) || statSync(start, { throwIfNoEntry: false })?.isDirectory() !== true) {
        start = undefined;
        break;
      }
    }
    const commonPrefixes = new Set<string>();
    const keys: string[] = [];
    let isTruncated = false;
    for (const keyPath of start === undefined ? [] : walk(start)) {
      if (!keyPath.endsWith(objectSuffix)) continue;
      const key = keyPath.slice(bucketPath.length + 1, -objectSuffix.length);
      if (key <= startAfter || !key.startsWith(prefix)) continue;
      if (delimiter) {
        const index = key.slice(prefix.length).indexOf(delimiter);
        if (index !== -1) {
          commonPrefixes.add(key.slice(0, prefix.length + index + 1));
          continue;
        }
      }
      if (keys.length < maxKeys) keys.push(key);
      else {
        isTruncated = true;
        break;
      }
    }
    const metadata = await Promise.all(
      keys.map((key) =>
        this.getMetadata(bucket, key).catch((error: NodeJS.ErrnoException) => {
          if (error.code === "ENOENT") return undefined;
          throw error;
        }),
      ),
    );
    return {
      objects: keys.flatMap((key, i) => {
        const found = metadata[i];
        return found === undefined ? [] : [new S3Object(bucket, key, null, found)];
      }),
      commonPrefixes: [...commonPrefixes].sort(),
      isTruncated,
    };
  };
}
