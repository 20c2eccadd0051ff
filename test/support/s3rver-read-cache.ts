/**
 * What s3rver's store (./s3rver-store.ts) reads from disk again and again,
 * kept in memory until a write of the same file. Test code only.
 */
import type { S3rverFilesystemStore, S3rverStoredObject } from "./s3rver-store.js";

type StoreMethod = (this: S3rverFilesystemStore, ...args: never[]) => unknown;
/** The file (cache key) a call of a store method reads or writes, from the method's arguments. */
type FileOf = (store: S3rverFilesystemStore, ...args: never[]) => string;

/**
 * What s3rver's store reads from disk again and again, kept in memory: an
 * object's metadata (a stat and two files, read for each object of every
 * listing and for each GET and HEAD), a bucket's CORS and website
 * configurations (read for every request, and almost always absent) and the
 * bucket itself (a stat for every request). Every write of the store goes
 * through a method wrapped here (a completed multipart upload through
 * putObject), which drops what it changes; answers are the ones read from
 * disk (ETag, Last-Modified, Content-Length, user metadata), byte for byte.
 */
export function cacheReads(prototype: Record<string, unknown>): void {
  const caches = new WeakMap<S3rverFilesystemStore, StoreReadCache>();
  const cacheOf = (store: S3rverFilesystemStore): StoreReadCache => {
    let cache = caches.get(store);
    if (!cache) caches.set(store, (cache = new StoreReadCache()));
    return cache;
  };
  const objectFile = (store: S3rverFilesystemStore, bucket: string, key: string): string => store.getResourcePath(bucket, key, "object");
  const subresourceFile = (store: S3rverFilesystemStore, bucket: string, key: string | undefined, type: string): string =>
    store.getResourcePath(bucket, key, `${type}.xml`);
  const bucketFolder = (store: S3rverFilesystemStore, bucket: string): string => store.getBucketPath(bucket);
  const reads = (name: string, fileOf: FileOf, copy: (value: never) => unknown = (value) => value): void => {
    const original = prototype[name] as StoreMethod;
    prototype[name] = async function (this: S3rverFilesystemStore, ...args: never[]) {
      return copy(await cacheOf(this).read(fileOf(this, ...args), () => original.apply(this, args) as Promise<never>));
    };
  };
  const writes = (name: string, fileOf: FileOf | typeof EVERY_FILE): void => {
    const original = prototype[name] as StoreMethod;
    prototype[name] = function (this: S3rverFilesystemStore, ...args: never[]) {
      return cacheOf(this).write(fileOf === EVERY_FILE ? EVERY_FILE : fileOf(this, ...args), () => original.apply(this, args) as Promise<unknown>);
    };
  };
  // Each caller gets a copy of the metadata, so that none can change the cache's.
  reads("getMetadata", objectFile, (metadata: Record<string, unknown>) => ({ ...metadata }));
  reads("getSubresource", subresourceFile);
  reads("getBucket", bucketFolder);
  writes("putMetadata", objectFile);
  writes("putObject", (store, object: S3rverStoredObject) => objectFile(store, object.bucket, object.key));
  writes("copyObject", (store, _sourceBucket: string, _sourceKey: string, bucket: string, key: string) => objectFile(store, bucket, key));
  writes("deleteObject", objectFile);
  writes("putSubresource", (store, bucket: string, key: string | undefined, resource: { type: string }) => subresourceFile(store, bucket, key, resource.type));
  writes("deleteSubresource", subresourceFile);
  writes("putBucket", bucketFolder);
  writes("deleteBucket", EVERY_FILE);
  // Synchronous: no read can run during it, and the ones under way are dropped.
  const reset = prototype.reset as (this: S3rverFilesystemStore) => void;
  prototype.reset = function (this: S3rverFilesystemStore) {
    try {
      reset.call(this);
    } finally {
      cacheOf(this).forget(EVERY_FILE);
    }
  };
}

/** A write that may change any file (a bucket deleted with everything in it). */
export const EVERY_FILE = Symbol("every file");

/**
 * Values read from files, kept until a write of the file. A read keeps its
 * value only if no write of its file began or was under way while it read
 * (it may have seen the file half-written, or before the write).
 */
export class StoreReadCache {
  private readonly values = new Map<string, unknown>();
  /** Reads under way; a write marks those of its file stale. */
  private readonly reads = new Set<{ readonly file: string; stale: boolean }>();
  /** Writes under way, per file. */
  private readonly writing = new Map<string | typeof EVERY_FILE, number>();

  async read<T>(file: string, load: () => Promise<T>): Promise<T> {
    if (this.values.has(file)) return this.values.get(file) as T;
    const read = { file, stale: false };
    this.reads.add(read);
    try {
      const value = await load();
      if (!read.stale && !this.writing.has(file) && !this.writing.has(EVERY_FILE)) this.values.set(file, value);
      return value;
    } finally {
      this.reads.delete(read);
    }
  }

  async write<T>(file: string | typeof EVERY_FILE, work: () => Promise<T>): Promise<T> {
    this.writing.set(file, (this.writing.get(file) ?? 0) + 1);
    this.forget(file);
    try {
      return await work();
    } finally {
      const left = (this.writing.get(file) ?? 1) - 1;
      if (left === 0) this.writing.delete(file);
      else this.writing.set(file, left);
      this.forget(file);
    }
  }

  forget(file: string | typeof EVERY_FILE): void {
    if (file === EVERY_FILE) this.values.clear();
    else this.values.delete(file);
    for (const read of this.reads) {
      if (file === EVERY_FILE || read.file === file) read.stale = true;
    }
  }
}
