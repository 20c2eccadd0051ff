import { GetObjectCommand, HeadObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { createHash, randomBytes } from "node:crypto";
import { createReadStream, writeFileSync } from "node:fs";
import { open } from "node:fs/promises";
import path from "node:path";
import { Readable } from "node:stream";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { LakeswapError } from "../../src/model/errors.js";
import { AdaptiveLimit } from "../../src/shared/adaptive-limit.js";
import { ATHENA_PART_SIZE, uploadFileOnce } from "../../src/store/s3/multipart-upload.js";
import { tempDir } from "../support/lake-fixture.js";
import { startS3Server, type S3Server } from "../support/s3-server.js";

const KIB = 1024;
const MIB = 1024 * KIB;
const BUCKET = "lake";

const quiet = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };

let server: S3Server;
let client: S3Client;
let folder: { dir: string; cleanup: () => void };
/** Every UploadPart the client sent: part number, declared length, whether the body was a stream. */
let partsSent: { part: number; length: number; streamed: boolean }[];

beforeEach(async () => {
  server = await startS3Server({ buckets: [BUCKET] });
  // SDK retries off, as lakeswap builds its clients: throttling must reach the adaptive limit. The quiet logger
  // keeps the SDK from printing "non-retryable streaming request" for every failure the tests inject.
  client = new S3Client({ ...server.clientConfig, maxAttempts: 1, logger: quiet });
  partsSent = [];
  client.middlewareStack.add(
    (next, context) => async (args) => {
      if (context.commandName === "UploadPartCommand") {
        const input = args.input as { PartNumber: number; ContentLength: number; Body: unknown };
        partsSent.push({ part: input.PartNumber, length: input.ContentLength, streamed: input.Body instanceof Readable });
      }
      return next(args);
    },
    { step: "initialize", name: "recordParts" },
  );
  folder = tempDir("lakeswap-upload-");
});
afterEach(async () => {
  client.destroy();
  await server.close();
  folder.cleanup();
});

/** A file of `size` random bytes. */
function makeFile(name: string, size: number): string {
  const file = path.join(folder.dir, name);
  writeFileSync(file, randomBytes(size));
  return file;
}

/** A large file of random blocks, written block by block. */
async function makeLargeFile(name: string, size: number): Promise<string> {
  const file = path.join(folder.dir, name);
  const handle = await open(file, "w");
  const block = randomBytes(MIB);
  for (let written = 0; written < size; written += block.length) await handle.write(block, 0, Math.min(block.length, size - written));
  await handle.close();
  return file;
}

async function sha256(stream: AsyncIterable<Uint8Array>): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of stream) hash.update(chunk);
  return hash.digest("hex");
}

const fileHash = (file: string) => sha256(createReadStream(file));

/** The object's bytes' hash, or undefined when the key holds nothing. */
async function objectHash(key: string): Promise<string | undefined> {
  try {
    const response = await client.send(new GetObjectCommand({ Bucket: BUCKET, Key: key }));
    return await sha256(response.Body as Readable);
  } catch (error) {
    if ((error as { name?: string }).name === "NoSuchKey") return undefined;
    throw error;
  }
}

const fastLimit = (initial: number, max: number, maxAttempts?: number) => new AdaptiveLimit({ name: "S3 uploads", initial, max, baseDelayMs: 1, maxAttempts });

describe("uploadFileOnce", () => {
  it("puts a file of at most one part in one PutObject, with its metadata", async () => {
    const file = makeFile("small.parquet", 100 * KIB);
    const result = await uploadFileOnce({
      client, bucket: BUCKET, key: "events/p_day=04/seg-1.parquet", file, limit: fastLimit(4, 4), partSize: 256 * KIB, metadata: { segment: "seg-1" },
    });
    expect(result).toEqual({ outcome: "created", bytes: 100 * KIB, parts: 1 });
    expect(server.requests.count("PutObject")).toBe(1);
    expect(server.requests.count("CreateMultipartUpload")).toBe(0);
    expect(await objectHash("events/p_day=04/seg-1.parquet")).toBe(await fileHash(file));
    const head = await client.send(new HeadObjectCommand({ Bucket: BUCKET, Key: "events/p_day=04/seg-1.parquet" }));
    expect(head.Metadata).toEqual({ segment: "seg-1" });

    const empty = makeFile("empty.parquet", 0);
    expect(await uploadFileOnce({ client, bucket: BUCKET, key: "events/empty.parquet", file: empty, limit: fastLimit(4, 4) })).toEqual({ outcome: "created", bytes: 0, parts: 1 });
    expect(await objectHash("events/empty.parquet")).toBe(await fileHash(empty));
  });

  it("uploads a larger file in streamed parts of exactly partSize, the last smaller", async () => {
    const file = makeFile("large.parquet", MIB + 123);
    const result = await uploadFileOnce({
      client, bucket: BUCKET, key: "events/large.parquet", file, limit: fastLimit(2, 2), partSize: 256 * KIB, metadata: { segment: "seg-2" },
    });
    expect(result).toEqual({ outcome: "created", bytes: MIB + 123, parts: 5 });
    expect(partsSent.map((p) => [p.part, p.length]).sort((a, b) => a[0]! - b[0]!)).toEqual([
      [1, 256 * KIB], [2, 256 * KIB], [3, 256 * KIB], [4, 256 * KIB], [5, 123],
    ]);
    expect(partsSent.every((p) => p.streamed)).toBe(true);
    expect(server.requests.count("CompleteMultipartUpload")).toBe(1);
    expect(server.requests.count("AbortMultipartUpload")).toBe(0);
    expect(await objectHash("events/large.parquet")).toBe(await fileHash(file));
    const head = await client.send(new HeadObjectCommand({ Bucket: BUCKET, Key: "events/large.parquet" }));
    expect(head.Metadata).toEqual({ segment: "seg-2" });
  });

  it("uploads a 40 MiB file in three parts of the Athena sink's 16 MiB", async () => {
    const size = 40 * MIB + 7;
    const file = await makeLargeFile("athena.parquet", size);
    const result = await uploadFileOnce({ client, bucket: BUCKET, key: "warehouse/events/page_view/p_year=2025/seg-3.parquet", file, limit: fastLimit(16, 64) });
    expect(ATHENA_PART_SIZE).toBe(16 * MIB);
    expect(result).toEqual({ outcome: "created", bytes: size, parts: 3 });
    expect(partsSent.map((p) => p.length).sort((a, b) => b - a)).toEqual([16 * MIB, 16 * MIB, 8 * MIB + 7]);
    expect(await objectHash("warehouse/events/page_view/p_year=2025/seg-3.parquet")).toBe(await fileHash(file));
  });

  it("answers exists on a second upload to the same key and leaves the object unchanged", async () => {
    const first = makeFile("first.parquet", 600 * KIB);
    const second = makeFile("second.parquet", 700 * KIB);
    const small = makeFile("small.parquet", 10 * KIB);
    const limit = fastLimit(4, 4);
    const upload = (file: string, key: string) => uploadFileOnce({ client, bucket: BUCKET, key, file, limit, partSize: 256 * KIB });

    expect(await upload(first, "events/multi.parquet")).toEqual({ outcome: "created", bytes: 600 * KIB, parts: 3 });
    expect(await upload(second, "events/multi.parquet")).toEqual({ outcome: "exists", bytes: 700 * KIB, parts: 3 });
    expect(await objectHash("events/multi.parquet")).toBe(await fileHash(first));
    // The refusal came from If-None-Match: * on CompleteMultipartUpload, and the refused upload was aborted.
    expect(server.requests.entries.filter((r) => r.operation === "CompleteMultipartUpload").map((r) => r.status)).toEqual([200, 412]);
    expect(server.requests.count("AbortMultipartUpload")).toBe(1);

    expect(await upload(small, "events/one.parquet")).toEqual({ outcome: "created", bytes: 10 * KIB, parts: 1 });
    expect(await upload(first, "events/one.parquet")).toEqual({ outcome: "exists", bytes: 600 * KIB, parts: 3 });
    expect(await upload(small, "events/multi.parquet")).toEqual({ outcome: "exists", bytes: 10 * KIB, parts: 1 });
    expect(await objectHash("events/one.parquet")).toBe(await fileHash(small));
    expect(await objectHash("events/multi.parquet")).toBe(await fileHash(first));
    expect(server.requests.preconditionFailures).toBe(3);
    expect(limit.throttled).toBe(0);
  });

  it("retries an UploadPart throttled with SlowDown 503 and halves the limit", async () => {
    const file = makeFile("throttled.parquet", 400 * KIB);
    const limit = fastLimit(4, 4);
    server.failNext("UploadPart", { status: 503, code: "SlowDown", message: "Please reduce your request rate." });
    const result = await uploadFileOnce({ client, bucket: BUCKET, key: "events/throttled.parquet", file, limit, partSize: 256 * KIB });
    expect(result).toEqual({ outcome: "created", bytes: 400 * KIB, parts: 2 });
    expect(server.requests.entries.filter((r) => r.operation === "UploadPart").map((r) => r.status).sort()).toEqual([200, 200, 503]);
    expect(limit.throttled).toBe(1);
    expect(limit.current).toBe(2);
    expect(await objectHash("events/throttled.parquet")).toBe(await fileHash(file));
  });

  it("grows the limit while uploads succeed and halves it on SlowDown", async () => {
    const changes: string[] = [];
    const limit = new AdaptiveLimit({ name: "S3 uploads", initial: 2, max: 8, baseDelayMs: 1, onChange: (current, change) => changes.push(`${change} ${current}`) });
    const first = makeFile("first.parquet", 48 * 32 * KIB);
    await uploadFileOnce({ client, bucket: BUCKET, key: "events/first.parquet", file: first, limit, partSize: 32 * KIB });
    // 48 parts queued on a limit of 2: it grows one step at a time while the parts succeed.
    expect(changes.length).toBeGreaterThan(0);
    expect(changes).toEqual(changes.map((_, i) => `grew ${3 + i}`));
    const grown = limit.current;
    expect(grown).toBe(2 + changes.length);

    changes.length = 0;
    server.failNext("UploadPart", { status: 503, code: "SlowDown" });
    const second = makeFile("second.parquet", 48 * 32 * KIB);
    await uploadFileOnce({ client, bucket: BUCKET, key: "events/second.parquet", file: second, limit, partSize: 32 * KIB });
    expect(limit.throttled).toBe(1);
    // The SlowDown halved it once (from where it stood then), and it grew again while the parts kept succeeding.
    const halvings = changes.filter((c) => c.startsWith("halved"));
    expect(halvings).toHaveLength(1);
    const at = changes.indexOf(halvings[0]!);
    const before = at === 0 ? grown : Number(changes[at - 1]!.split(" ")[1]);
    expect(halvings[0]).toBe(`halved ${Math.floor(before / 2)}`);
    expect(Math.floor(before / 2)).toBeLessThan(grown);
    expect(server.requests.entries.filter((r) => r.operation === "UploadPart" && r.status === 503)).toHaveLength(1);
    expect(await objectHash("events/second.parquet")).toBe(await fileHash(second));
  });

  it("starts the upload over when CompleteMultipartUpload or PutObject answers 409 ConditionalRequestConflict", async () => {
    const file = makeFile("conflict.parquet", 600 * KIB);
    server.failNext("CompleteMultipartUpload", { status: 409, code: "ConditionalRequestConflict" });
    const result = await uploadFileOnce({ client, bucket: BUCKET, key: "events/conflict.parquet", file, limit: fastLimit(4, 4), partSize: 256 * KIB });
    expect(result).toEqual({ outcome: "created", bytes: 600 * KIB, parts: 3 });
    expect(server.requests.count("CreateMultipartUpload")).toBe(2);
    expect(server.requests.count("UploadPart")).toBe(6);
    expect(server.requests.entries.filter((r) => r.operation === "CompleteMultipartUpload").map((r) => r.status)).toEqual([409, 200]);
    expect(server.requests.count("AbortMultipartUpload")).toBe(1);
    expect(await objectHash("events/conflict.parquet")).toBe(await fileHash(file));

    const small = makeFile("small.parquet", 10 * KIB);
    server.failNext("PutObject", { status: 409, code: "ConditionalRequestConflict" });
    expect(await uploadFileOnce({ client, bucket: BUCKET, key: "events/small.parquet", file: small, limit: fastLimit(4, 4) })).toMatchObject({ outcome: "created" });
    expect(server.requests.entries.filter((r) => r.operation === "PutObject").map((r) => r.status)).toEqual([409, 200]);

    server.failNext("PutObject", { status: 409, code: "ConditionalRequestConflict", times: 4 });
    await expect(uploadFileOnce({ client, bucket: BUCKET, key: "events/busy.parquet", file: small, limit: fastLimit(4, 4) })).rejects.toThrow(
      `uploading ${small} to s3://lake/events/busy.parquet failed: S3 answered 409 ConditionalRequestConflict 4 times`,
    );
  });

  it("aborts the multipart upload on a failed part, names the key, and leaves no object", async () => {
    const file = makeFile("bad.parquet", 2 * MIB);
    server.failNext("UploadPart", { status: 400, code: "InvalidDigest", message: "The Content-MD5 you specified was invalid." });
    const error = await uploadFileOnce({ client, bucket: BUCKET, key: "events/bad.parquet", file, limit: fastLimit(2, 2), partSize: 256 * KIB }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LakeswapError);
    expect((error as LakeswapError).code).toBe("STORE_ERROR");
    expect((error as Error).message).toBe(
      `uploading ${file} to s3://lake/events/bad.parquet failed: The Content-MD5 you specified was invalid. (the multipart upload was aborted; nothing was written to the key)`,
    );
    expect(server.requests.count("AbortMultipartUpload")).toBe(1);
    expect(server.requests.count("CompleteMultipartUpload")).toBe(0);
    // The parts still waiting for a slot were never sent; the one in flight finished before the abort.
    expect(server.requests.count("UploadPart")).toBeLessThan(8);
    expect(server.requests.entries.map((r) => r.operation).filter((o) => o !== "GetObject").at(-1)).toBe("AbortMultipartUpload");
    expect(await objectHash("events/bad.parquet")).toBeUndefined();
  });

  it("aborts the upload when a part stays throttled past the attempts allowed, and says so when the abort fails too", async () => {
    const file = makeFile("slow.parquet", 512 * KIB);
    const limit = fastLimit(2, 2, 3);
    server.failNext("UploadPart", { status: 503, code: "SlowDown", times: 6 });
    server.failNext("AbortMultipartUpload", { status: 500, code: "InternalError" });
    const error = await uploadFileOnce({ client, bucket: BUCKET, key: "events/slow.parquet", file, limit, partSize: 256 * KIB }).catch((e: unknown) => e);
    expect((error as Error).message).toMatch(
      /^uploading .*slow\.parquet to s3:\/\/lake\/events\/slow\.parquet failed: S3 uploads: a call was still throttled after 3 attempts \(the limit is now 1 in flight\)/,
    );
    expect((error as Error).message).toMatch(/aborting multipart upload \S+ failed too: its parts stay until a bucket lifecycle rule for incomplete uploads removes them\)$/);
    expect((error as LakeswapError).retryable).toBe(true);
    expect(limit.current).toBe(1);
    expect(server.requests.count("AbortMultipartUpload")).toBe(1);
    expect(await objectHash("events/slow.parquet")).toBeUndefined();
  });

  it("says access denied, naming the key, when the credentials are refused", async () => {
    const denied = new S3Client({ ...server.clientConfig, maxAttempts: 1, logger: quiet, credentials: { accessKeyId: "denied", secretAccessKey: "x" } });
    const file = makeFile("denied.parquet", KIB);
    const error = await uploadFileOnce({ client: denied, bucket: BUCKET, key: "events/denied.parquet", file, limit: fastLimit(2, 2) }).catch((e: unknown) => e);
    expect((error as LakeswapError).code).toBe("ACCESS_DENIED");
    expect((error as Error).message).toMatch(/^access denied: s3:PutObject on s3:\/\/lake\/events\/denied\.parquet was refused \(AccessDenied/);
    denied.destroy();
  });

  it("refuses a key that is not a safe relative key and a file of more than 10,000 parts", async () => {
    const file = makeFile("f.parquet", 20 * KIB);
    await expect(uploadFileOnce({ client, bucket: BUCKET, key: "/events/x.parquet", file, limit: fastLimit(2, 2) })).rejects.toThrow(
      `uploading ${file} to s3://lake//events/x.parquet: object key '/events/x.parquet' is not a safe relative key`,
    );
    await expect(uploadFileOnce({ client, bucket: BUCKET, key: "events/x.parquet", file, limit: fastLimit(2, 2), partSize: 1 })).rejects.toThrow(
      /20480 parts of 1 bytes is more than the 10000 S3 allows; use a larger part size or a smaller file/,
    );
    expect(server.requests.count()).toBe(0);
  });
});
