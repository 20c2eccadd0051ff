// The patched s3rver store (./s3rver-store.ts) against s3rver's own: after every kind of write, each answer of the
// patched store (metadata and configurations kept in memory, files read and written synchronously, listings walked
// from the prefix) is the one s3rver's unpatched store reads from the same folder.
import { createHash } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { PassThrough, Readable } from "node:stream";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { makeS3rverBehaveLikeS3 } from "./s3rver-store.js";

const require = createRequire(import.meta.url);

interface StoredObject {
  readonly key: string;
  readonly metadata: Record<string, unknown>;
  readonly content: Readable | null;
  readonly range?: { start: number; end: number };
}

/** The store's methods a test calls (s3rver's FilesystemStore). */
interface Store {
  putBucket(bucket: string): Promise<unknown>;
  deleteBucket(bucket: string): Promise<void>;
  getBucket(bucket: string): Promise<unknown>;
  putObject(object: unknown): Promise<{ size: number; md5: string }>;
  copyObject(sourceBucket: string, sourceKey: string, bucket: string, key: string, metadata: Record<string, string> | null): Promise<unknown>;
  deleteObject(bucket: string, key: string): Promise<void>;
  existsObject(bucket: string, key: string): Promise<boolean>;
  getMetadata(bucket: string, key: string): Promise<Record<string, unknown>>;
  getObject(bucket: string, key: string, options?: { start?: number; end?: number }): Promise<StoredObject | null>;
  listObjects(bucket: string, options: { prefix?: string; delimiter?: string; maxKeys?: number }): Promise<{ objects: StoredObject[]; commonPrefixes: string[] }>;
  initiateUpload(bucket: string, key: string, uploadId: string, metadata: Record<string, unknown>): Promise<void>;
  putPart(bucket: string, uploadId: string, partNumber: number, content: Readable): Promise<unknown>;
  putObjectMultipart(bucket: string, uploadId: string, parts: { number: number }[]): Promise<unknown>;
  getSubresource(bucket: string, key: string | undefined, type: string): Promise<unknown>;
  putSubresource(bucket: string, key: string | undefined, resource: unknown): Promise<void>;
}
type StoreClass = new (directory: string) => Store;

makeS3rverBehaveLikeS3();
const Patched = require("s3rver/lib/stores/filesystem.js") as StoreClass;
const S3Object = require("s3rver/lib/models/object.js") as new (bucket: string, key: string, content: unknown, metadata: Record<string, string>) => unknown;
const { getConfigModel } = require("s3rver/lib/models/config.js") as { getConfigModel(type: string): { validate(xml: string): unknown } };

/** s3rver's store as it ships: a second copy of its module, loaded past the patched one in the module cache. */
function pristineStoreClass(): StoreClass {
  const file = require.resolve("s3rver/lib/stores/filesystem.js");
  const patched = require.cache[file];
  delete require.cache[file];
  try {
    const pristine = require(file) as StoreClass;
    if ("lakeswapBehavesLikeS3" in pristine.prototype) throw new Error("s3rver's store was loaded patched");
    return pristine;
  } finally {
    require.cache[file] = patched;
  }
}
const Pristine = pristineStoreClass();

const BUCKET = "lake";
const CORS = "<CORSConfiguration><CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod></CORSRule></CORSConfiguration>";
const md5 = (bytes: string | Buffer): string => createHash("md5").update(bytes).digest("hex");

async function bytesOf(content: Readable | null): Promise<string | null> {
  if (content === null) return null;
  const chunks: Buffer[] = [];
  for await (const chunk of content) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("latin1");
}

/** What a store answers about a key: metadata, existence, and the bytes and range of a few reads (or the error code). */
async function answers(store: Store, key: string): Promise<unknown> {
  const settle = async <T>(work: () => Promise<T>): Promise<T | string> => work().catch((error: NodeJS.ErrnoException) => `error ${error.code}`);
  const reads = [undefined, { start: 3, end: 70_000 }, { start: 65_530 }, { start: 1_000_000 }];
  return {
    metadata: await settle(() => store.getMetadata(BUCKET, key)),
    exists: await store.existsObject(BUCKET, key),
    reads: await Promise.all(
      reads.map(async (options) => {
        const object = await store.getObject(BUCKET, key, options);
        return object && { metadata: object.metadata, range: object.range, bytes: await bytesOf(object.content) };
      }),
    ),
  };
}

/** A listing, with each object's metadata (s3rver's S3Object). */
async function listing(store: Store, options: { prefix?: string; delimiter?: string; maxKeys?: number }): Promise<unknown> {
  const { objects, commonPrefixes } = await store.listObjects(BUCKET, options);
  return { objects: objects.map((o) => ({ key: o.key, metadata: o.metadata })), commonPrefixes };
}

describe("s3rver's store, patched", () => {
  let directory: string;
  let store: Store;

  beforeEach(async () => {
    directory = await mkdtemp(path.join(tmpdir(), "lakeswap-s3rver-store-"));
    store = new Patched(directory);
    await store.putBucket(BUCKET);
  });
  afterEach(async () => {
    await rm(directory, { recursive: true, force: true });
  });

  /** Reads every key and listing through the patched store (so it has them in memory), then checks each against s3rver's own, read afresh. */
  async function expectAnswersOfS3rver(keys: readonly string[]): Promise<void> {
    const listings = [{}, { prefix: "t/" }, { prefix: "t/day=1/", delimiter: "/" }, { prefix: "t/", delimiter: "/" }, { maxKeys: 2 }];
    for (const key of keys) expect(await answers(store, key), key).toEqual(await answers(new Pristine(directory), key));
    for (const options of listings) expect(await listing(store, options)).toEqual(await listing(new Pristine(directory), options));
  }

  it("answers as s3rver's own store after every kind of write: put, overwrite, copy, new metadata, multipart, delete", async () => {
    const big = Buffer.alloc(100_000, "abcdefgh");
    const keys = ["t/day=1/run=a/part-0.parquet", "t/day=1/run=a/copy", "t/day=2/renamed", "t/lease", "t/empty"];
    const put = (key: string, content: Buffer | Readable, metadata: Record<string, string>) => store.putObject(new S3Object(BUCKET, key, content, metadata));
    await expectAnswersOfS3rver(keys);

    expect(await put(keys[0]!, big, { "content-type": "application/octet-stream", "x-amz-meta-rows": "7", authorization: "not kept" })).toEqual({ size: big.length, md5: md5(big) });
    await put(keys[3]!, Buffer.from("owner-a"), {});
    await put(keys[4]!, Buffer.alloc(0), { "cache-control": "no-cache" });
    await expectAnswersOfS3rver(keys);

    // Overwritten by a streamed body, with other metadata.
    await put(keys[0]!, Readable.from([Buffer.from("PAR1"), Buffer.alloc(70_000, 1), Buffer.from("PAR1")]), { "x-amz-meta-rows": "8" });
    await put(keys[3]!, Buffer.from("owner-b, a longer body"), { "content-type": "text/plain" });
    await expectAnswersOfS3rver(keys);

    // Copied as is; copied with new metadata (s3rver then has no MD5 file for it, and makes one when asked); given new metadata in place.
    await store.copyObject(BUCKET, keys[0]!, BUCKET, keys[1]!, null);
    await store.copyObject(BUCKET, keys[3]!, BUCKET, keys[2]!, { "content-type": "text/csv", "x-amz-meta-copied": "yes" });
    await store.copyObject(BUCKET, keys[3]!, BUCKET, keys[3]!, { "x-amz-meta-owner": "b" });
    await expectAnswersOfS3rver(keys);
    await store.copyObject(BUCKET, keys[3]!, BUCKET, keys[4]!, null);
    await expectAnswersOfS3rver(keys);

    // Completed from parts, over an object read before.
    await store.initiateUpload(BUCKET, keys[1]!, "upload-1", { "x-amz-meta-parts": "2" });
    await store.putPart(BUCKET, "upload-1", 1, Readable.from([big]));
    await store.putPart(BUCKET, "upload-1", 2, Readable.from([Buffer.from("tail")]));
    await store.putObjectMultipart(BUCKET, "upload-1", [{ number: 2 }, { number: 1 }]);
    await expectAnswersOfS3rver(keys);

    await store.deleteObject(BUCKET, keys[0]!);
    await store.deleteObject(BUCKET, keys[3]!);
    await expectAnswersOfS3rver(keys);
  });

  it("forgets a bucket's objects and configurations when the bucket is deleted", async () => {
    await store.putObject(new S3Object(BUCKET, "t/lease", Buffer.from("v1"), {}));
    await store.putSubresource(BUCKET, undefined, getConfigModel("cors").validate(CORS));
    expect(await store.getSubresource(BUCKET, undefined, "cors")).not.toBeNull();
    await expectAnswersOfS3rver(["t/lease"]);

    await store.deleteBucket(BUCKET);
    expect(await store.getBucket(BUCKET)).toBeNull();
    await store.putBucket(BUCKET);
    expect(await store.getBucket(BUCKET)).not.toBeNull();
    expect(await store.getSubresource(BUCKET, undefined, "cors")).toBeNull();
    await expectAnswersOfS3rver(["t/lease"]);
  });

  it("keeps nothing it read while a write of the same key was under way", async () => {
    const key = "t/lease";
    await store.putObject(new S3Object(BUCKET, key, Buffer.from("old"), {}));
    await expectAnswersOfS3rver([key]);

    // Read between the chunks of a streamed PUT: the object half written.
    const body = new PassThrough();
    const putting = store.putObject(new S3Object(BUCKET, key, body, { "x-amz-meta-v": "2" }));
    body.write("new and ");
    await new Promise((resolve) => setImmediate(resolve));
    await store.getMetadata(BUCKET, key);
    body.end("longer");
    await putting;
    await expectAnswersOfS3rver([key]);

    // Reads that began before a write and end after it (s3rver reads configurations and buckets asynchronously).
    const config = store.getSubresource(BUCKET, undefined, "cors");
    const bucket = store.getBucket("other");
    await store.putSubresource(BUCKET, undefined, getConfigModel("cors").validate(CORS));
    await store.putBucket("other");
    await Promise.all([config, bucket]);
    expect(await store.getSubresource(BUCKET, undefined, "cors")).toEqual(await new Pristine(directory).getSubresource(BUCKET, undefined, "cors"));
    expect(await store.getBucket("other")).not.toBeNull();
  });
});
