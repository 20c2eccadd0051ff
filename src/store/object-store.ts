/** One object of a store listing. */
export interface ObjectInfo {
  readonly key: string;
  readonly size: number;
}

/** What an object store can do; the core reads these and chooses, or fails early. */
export interface ObjectStoreCapabilities {
  /** Writes with "only if absent" / "only if unchanged" semantics (the writer lease needs them). */
  readonly conditionalWrites: boolean;
  /** Keys map to local file paths an embedded engine can write to directly. */
  readonly localPaths: boolean;
}

/** A stored object's bytes and the tag that `putIfMatch` compares against. */
export interface TaggedObject {
  readonly body: Uint8Array;
  readonly etag: string;
}

/** A kernel lock held for the life of the process that took it: the kernel releases it when that process dies, however it dies. */
export interface ProcessLock {
  /** Why the lock is no longer held although it was not released (its holder was killed), else undefined. */
  readonly lost: string | undefined;
  /** Gives the lock up; resolves once another process can take it. */
  release(): Promise<void>;
}

/** How much of a listing to give (ObjectStore.list). */
export interface ListOptions {
  readonly startAfter?: string;
  readonly atMost?: number;
}

/**
 * The object-store port: flat '/'-separated keys relative to the lake root.
 * Every adapter checks keys (no '..', no absolute paths) before use.
 */
export interface ObjectStore {
  readonly capabilities: ObjectStoreCapabilities;
  /** Where the lake lives, for messages: a folder or an s3:// URI. */
  readonly description: string;
  get(key: string): Promise<TaggedObject | undefined>;
  /** `length` bytes of the object at `key` from `offset` (fewer at its end): a Parquet footer without the whole file. */
  getRange(key: string, offset: number, length: number): Promise<Uint8Array>;
  /**
   * Writes the object, durable once this resolves. `fresh`: the key is new and nothing relies on the object until the
   * put resolved (an outbox entry: no pointer moves before it is stored), so a store may make its content and its name
   * durable in one round; a power loss before the put resolved may then leave it empty or torn, which its reader must
   * take as never written (the outbox quarantines it).
   */
  put(key: string, body: Uint8Array | string, options?: { readonly fresh?: boolean }): Promise<void>;
  /** Writes only if no object exists at `key`; returns false if one does. */
  putIfAbsent(key: string, body: Uint8Array | string): Promise<boolean>;
  /** Replaces the object only if its tag is still `etag`; returns false otherwise. */
  putIfMatch(key: string, body: Uint8Array | string, etag: string): Promise<boolean>;
  /** Deletes the object only if its tag is still `etag`; returns false otherwise. */
  deleteIfMatch(key: string, etag: string): Promise<boolean>;
  /**
   * Every object under `prefix`, all pages, sorted by key; with `startAfter`, only those whose key sorts after it. With
   * `atMost`, a store whose listing is paid per page may stop early once it has more than that many: an answer longer
   * than `atMost` may then be cut short (it is the first keys, in order).
   */
  list(prefix: string, options?: ListOptions): Promise<ObjectInfo[]>;
  /** Deletes the given keys; missing keys are not an error. */
  delete(keys: readonly string[]): Promise<void>;
  /**
   * Stores a local file at `key` only if no object is there (an ingested segment's file: a retry writes the
   * same key); returns false if one is. Locally a link(2) of the fsynced file; on S3 a PutObject, or a multipart
   * upload of 16 MiB parts, with `If-None-Match: *`.
   */
  putFileIfAbsent(key: string, localPath: string): Promise<boolean>;
  /** Uploads a local file to `key` (multipart where the store needs it). */
  putFile(key: string, localPath: string): Promise<void>;
  /**
   * Copies the object at `from` to the fresh key `to` inside the store, without
   * moving its bytes through lakeswap: a hard link locally (a copy where the file
   * system cannot link), a server-side copy on S3 (`size`, the object's bytes,
   * chooses a multipart copy above 5 GiB). `to` is a fresh key.
   */
  copy(from: string, to: string, size: number): Promise<void>;
  /** The local path of `key`, when the store has `localPaths`. */
  localPath(key: string): string;
  /**
   * The absolute URI of `key`, as engines and table formats name files (Iceberg metadata, Glue locations): a
   * `file://` URL locally, `s3://bucket/key` on S3.
   */
  uri(key: string): string;
  /** The store key a URI of this store names (the inverse of `uri`), or undefined for a URI outside the lake. */
  keyOf(uri: string): string | undefined;
  /**
   * Stores on a local file system only: takes the exclusive kernel lock named by `key` without waiting, for
   * this process's life (the writer lease holds it besides its lease object). "busy": another process holds
   * it; `unavailable`: the lock cannot be taken here (the reason), and the lease object alone decides.
   */
  tryLock?(key: string): Promise<ProcessLock | "busy" | { readonly unavailable: string }>;
}

/** Joins key parts with '/', dropping empty parts. */
export function joinKey(...parts: string[]): string {
  return parts
    .flatMap((part) => part.split("/"))
    .filter((part) => part.length > 0)
    .join("/");
}

/** Checks a store key: relative, '/'-separated, no '.' or '..' segments, no NUL or backslash. */
export function assertKey(key: string): string {
  if (
    key.length === 0 ||
    key.startsWith("/") ||
    key.includes("\\") ||
    key.includes("\0") ||
    key.split("/").some((part) => part === "." || part === "..")
  ) {
    throw new Error(`object key '${key}' is not a safe relative key`);
  }
  return key;
}
