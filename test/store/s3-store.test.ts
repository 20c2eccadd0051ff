import { PutObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { WriterLease } from "../../src/core/lease.js";
import { S3Store, partSizeFor } from "../../src/store/s3-store.js";
import { tempDir } from "../support/lake-fixture.js";
import { startS3Server, type S3Server } from "../support/s3-server.js";

let server: S3Server | undefined;
afterEach(async () => server?.close());

async function store(options: { enforceConditionalWrites?: boolean } = {}): Promise<{ store: S3Store; client: S3Client }> {
  server = await startS3Server({ buckets: ["lake"], ...options });
  const client = new S3Client(server.clientConfig);
  return { store: new S3Store(client, { bucket: "lake", prefix: "warehouse/events", uploadConcurrency: 2 }), client };
}

describe("the S3 store", () => {
  it("sizes multipart parts as max(8 MiB, size / 10,000)", () => {
    expect(partSizeFor(1)).toBe(8 * 1024 * 1024);
    expect(partSizeFor(200 * 1024 ** 3)).toBe(Math.ceil((200 * 1024 ** 3) / 10_000));
  });

  it("lists past the first 1,000 keys and deletes in chunks of 1,000", async () => {
    const { store: s3, client } = await store();
    await Promise.all(
      Array.from({ length: 1100 }, (_, i) =>
        client.send(new PutObjectCommand({ Bucket: "lake", Key: `warehouse/events/t/k${String(i).padStart(5, "0")}`, Body: "x" })),
      ),
    );
    const listed = await s3.list("t/");
    expect(listed).toHaveLength(1100);
    expect(listed[0]).toEqual({ key: "t/k00000", size: 1 });
    server!.requests.reset();
    await s3.delete(listed.map((o) => o.key));
    expect(server!.requests.count("DeleteObjects")).toBe(2);
    expect(await s3.list("t/")).toEqual([]);
  });

  it("uploads a file multipart and never overwrites a run file", async () => {
    const { store: s3 } = await store();
    const { dir, cleanup } = tempDir();
    try {
      const file = path.join(dir, "part.parquet");
      writeFileSync(file, Buffer.alloc(9 * 1024 * 1024, 7));
      await s3.putFile("t/day=1/run=20261101T000000Z-aaaaaa/part.parquet", file);
      expect(server!.requests.count("UploadPart")).toBe(2);
      expect((await s3.get("t/day=1/run=20261101T000000Z-aaaaaa/part.parquet"))?.body.length).toBe(9 * 1024 * 1024);
      await expect(s3.putFile("t/day=1/run=20261101T000000Z-aaaaaa/part.parquet", file)).rejects.toThrow(/already exists; a run file is never overwritten/);
    } finally {
      cleanup();
    }
  });

  it("writes conditionally: if absent, if unchanged", async () => {
    const { store: s3 } = await store();
    expect(await s3.putIfAbsent("k", "one")).toBe(true);
    expect(await s3.putIfAbsent("k", "two")).toBe(false);
    const current = (await s3.get("k"))!;
    expect(await s3.putIfMatch("k", "three", current.etag)).toBe(true);
    expect(await s3.putIfMatch("k", "four", current.etag)).toBe(false);
    expect(Buffer.from((await s3.get("k"))!.body).toString()).toBe("three");
    expect(await s3.deleteIfMatch("k", current.etag)).toBe(false);
    expect(await s3.deleteIfMatch("k", (await s3.get("k"))!.etag)).toBe(true);
    expect(await s3.get("k")).toBeUndefined();
  });

  it("holds one writer per table only because the store enforces conditional writes", async () => {
    const { store: enforced } = await store();
    const first = await WriterLease.acquire(enforced, "orders", { waitMs: 0, command: "one" });
    await expect(WriterLease.acquire(enforced, "orders", { waitMs: 0, command: "two" })).rejects.toThrow(/is being written by pid/);
    await first.release();
    await server!.close();

    // A server that ignores If-None-Match lets the second writer in: the lease test above would fail against it.
    const { store: ignoring } = await store({ enforceConditionalWrites: false });
    const one = await WriterLease.acquire(ignoring, "orders", { waitMs: 0, command: "one" });
    const two = await WriterLease.acquire(ignoring, "orders", { waitMs: 0, command: "two" });
    await expect(one.assertHeld()).rejects.toThrow(/was taken over/);
    await two.release();
  });
});
