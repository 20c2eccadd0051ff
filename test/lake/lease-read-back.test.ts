import { DeleteObjectCommand, GetObjectCommand, PutObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WriterLease } from "../../src/lake/lease.js";
import { S3Store } from "../../src/store/s3/s3-store.js";
import { startS3Server, type S3Server } from "../support/s3-server.js";

// Item 17 of issue 9: "the lease vanished right after it was taken" (AWS reader suite, once under load).
//
// Cause: WriterLease.start reads the lease back right after writing it, to learn its ETag. S3 is strongly
// read-after-write consistent, so on S3 that read always finds the object (the product code is right to call a
// missing lease lost). The test S3 server was not: s3rver answered a PutObject once it had read the body, before
// the file was opened and written (fs.createWriteStream opens asynchronously, and its errors went nowhere), and
// its DeleteObject removed the folders a key left empty. A lease released in `_lakeswap/leases/` while another
// table's lease was taken in the same folder (a sync leases a dataset's tables together) removed the folder
// between the PUT's mkdir and its open: the PUT answered 200, the file was never written, and the read-back got
// 404 NoSuchKey, "the lease vanished right after it was taken". The server now answers only once the file is
// written and closed, and leaves empty folders in place (makeS3rverBehaveLikeS3 in test/support/s3-server.ts).
// These tests fail without that, and hold the server to S3's guarantee. (Whose lease holds, and what a writer is
// told, on every store: test/contracts/lease.contract.ts.)

let server: S3Server;
let client: S3Client;

beforeAll(async () => {
  server = await startS3Server({ buckets: ["lake"] });
  client = new S3Client(server.clientConfig);
});
afterAll(async () => {
  client.destroy();
  await server.close();
});

describe("read-after-write on the S3 test server", () => {
  it("a GET right after a PUT returns the whole object just written, for new and overwritten keys, under concurrency", async () => {
    const misses: string[] = [];
    await Promise.all(
      Array.from({ length: 6 }, async (_, loop) => {
        for (let round = 0; round < 30; round += 1) {
          const key = `raw/${loop}/${round % 5}.json`;
          const body = JSON.stringify({ loop, round, pad: "x".repeat((round * 997) % 20_000) });
          await client.send(new PutObjectCommand({ Bucket: "lake", Key: key, Body: body }));
          const read = await client.send(new GetObjectCommand({ Bucket: "lake", Key: key })).catch((error: unknown) => error);
          const text = read instanceof Error ? `${read.name}` : await (read as { Body?: { transformToString(): Promise<string> } }).Body?.transformToString();
          if (text !== body) misses.push(`${key} round ${round}: ${String(text).slice(0, 40)}`);
        }
      }),
    );
    expect(misses).toEqual([]);
  });

  it("a key written while a sibling key of its folder is deleted is written whole and read back (no 5xx, no lost file)", async () => {
    server.requests.reset();
    const misses: string[] = [];
    for (let round = 0; round < 200; round += 1) {
      // Two tables' leases in one folder: one released while the other is taken, as a sync of a dataset does.
      await client.send(new PutObjectCommand({ Bucket: "lake", Key: "_lakeswap/leases/stage.json", Body: "stage" }));
      const body = JSON.stringify({ table: "raw", round });
      const settled = await Promise.allSettled([
        client.send(new DeleteObjectCommand({ Bucket: "lake", Key: "_lakeswap/leases/stage.json" })),
        client.send(new PutObjectCommand({ Bucket: "lake", Key: "_lakeswap/leases/raw.json", Body: body, IfNoneMatch: "*" })),
      ]);
      const read = await client.send(new GetObjectCommand({ Bucket: "lake", Key: "_lakeswap/leases/raw.json" })).catch((error: unknown) => error);
      const text = read instanceof Error ? read.name : await (read as { Body?: { transformToString(): Promise<string> } }).Body?.transformToString();
      if (text !== body || settled.some((r) => r.status === "rejected")) misses.push(`round ${round}: read ${String(text)}`);
      await client.send(new DeleteObjectCommand({ Bucket: "lake", Key: "_lakeswap/leases/raw.json" }));
    }
    expect(misses).toEqual([]);
    // S3 never answers these with a server error; s3rver did when the folder went away under the PUT.
    expect(server.requests.entries.filter((r) => r.status >= 500)).toEqual([]);
  });

  it("a writer lease is taken and read back hundreds of times, by competing writers, and never vanishes", async () => {
    const store = new S3Store(client, { bucket: "lake", prefix: "lakes/leases" });
    const errors: string[] = [];
    let held = 0;
    let maxHeld = 0;
    await Promise.all(
      Array.from({ length: 4 }, async (_, writer) => {
        for (let round = 0; round < 25; round += 1) {
          try {
            const lease = await WriterLease.acquire(store, "orders", { waitMs: 60_000, command: `writer ${writer} round ${round}` });
            held += 1;
            maxHeld = Math.max(maxHeld, held);
            await lease.assertHeld();
            held -= 1;
            await lease.release();
          } catch (error) {
            errors.push(error instanceof Error ? error.message : String(error));
          }
        }
      }),
    );
    expect(errors).toEqual([]);
    // One writer at a time, always.
    expect(maxHeld).toBe(1);
  });
});
