import { PutObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { WriterLease } from "../../src/lake/lease.js";
import { S3Store, partSizeFor } from "../../src/store/s3/s3-store.js";
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

  it("sends again the keys DeleteObjects refused with a transient error, and stops on any other", async () => {
    const { store: s3, client } = await store();
    await Promise.all(["a", "b", "c"].map((k) => client.send(new PutObjectCommand({ Bucket: "lake", Key: `warehouse/events/d/${k}`, Body: "x" }))));
    // What S3 may answer under load: a 200 whose body refuses one key with InternalError (or, below, AccessDenied).
    let refuse: { key: string; code: string } | undefined = { key: "warehouse/events/d/b", code: "InternalError" };
    const sent: string[][] = [];
    client.middlewareStack.add(
      (next, context) => async (args) => {
        if (context.commandName !== "DeleteObjectsCommand") return next(args);
        const input = args.input as any;
        sent.push(input.Delete.Objects.map((o: { Key: string }) => o.Key));
        const refused = refuse;
        if (!refused) return next(args);
        refuse = undefined;
        const kept = input.Delete.Objects.filter((o: { Key: string }) => o.Key !== refused.key);
        const result = await next({ ...args, input: { ...input, Delete: { ...input.Delete, Objects: kept } } });
        const output = result.output as { Errors?: { Key: string; Code: string; Message: string }[] };
        output.Errors = [...(output.Errors ?? []), { Key: refused.key, Code: refused.code, Message: "refused by the test" }];
        return result;
      },
      { step: "initialize", name: "refuseOneKey" },
    );
    await s3.delete(["d/a", "d/b", "d/c"]);
    expect(sent).toEqual([["warehouse/events/d/a", "warehouse/events/d/b", "warehouse/events/d/c"], ["warehouse/events/d/b"]]);
    expect(await s3.list("d/")).toEqual([]);

    await Promise.all(["e", "f"].map((k) => client.send(new PutObjectCommand({ Bucket: "lake", Key: `warehouse/events/d/${k}`, Body: "x" }))));
    refuse = { key: "warehouse/events/d/e", code: "AccessDenied" };
    sent.length = 0;
    await expect(s3.delete(["d/e", "d/f"])).rejects.toThrow(/DeleteObjects failed for 1 of 2 keys \(warehouse\/events\/d\/e: AccessDenied/);
    expect(sent).toHaveLength(1);
    expect(await s3.list("d/")).toEqual([{ key: "d/e", size: 1 }]);
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

  it("re-initiates a multipart upload answered 409 ConditionalRequestConflict on CompleteMultipartUpload, as AWS documents", async () => {
    const { store: s3 } = await store();
    const { dir, cleanup } = tempDir();
    try {
      const file = path.join(dir, "part.parquet");
      writeFileSync(file, Buffer.alloc(9 * 1024 * 1024, 3));
      server!.failNext("CompleteMultipartUpload", {
        status: 409,
        code: "ConditionalRequestConflict",
        message: "A conflicting conditional operation is currently in progress against this resource. Please try again.",
      });
      await s3.putFile("t/day=1/run=20261101T000000Z-bbbbbb/part.parquet", file);
      // A new upload, every part sent again: CreateMultipartUpload twice, two parts each time.
      expect(server!.requests.count("CreateMultipartUpload")).toBe(2);
      expect(server!.requests.count("UploadPart")).toBe(4);
      expect(server!.requests.entries.filter((r) => r.operation === "CompleteMultipartUpload").map((r) => r.status)).toEqual([409, 200]);
      expect((await s3.get("t/day=1/run=20261101T000000Z-bbbbbb/part.parquet"))?.body.length).toBe(9 * 1024 * 1024);
    } finally {
      cleanup();
    }
  });

  it("turns refused credentials into ACCESS_DENIED (exit 11) naming the action and the resource", async () => {
    const { store: allowed } = await store();
    await allowed.put("k.json", "{}");
    for (const [accessKeyId, code] of [["denied", "AccessDenied"], ["unknown", "InvalidAccessKeyId"]] as const) {
      const client = new S3Client({ ...server!.clientConfig, credentials: { accessKeyId, secretAccessKey: "x" } });
      const s3 = new S3Store(client, { bucket: "lake", prefix: "warehouse/events" });
      const denied = await s3.get("k.json").catch((error: unknown) => error);
      expect(denied).toMatchObject({ code: "ACCESS_DENIED", exitCode: 11 });
      expect((denied as Error).message).toMatch(
        new RegExp(`^access denied: s3:GetObject on s3://lake/warehouse/events/k\\.json was refused \\(${code}: .*\\)\\. Check that the credentials`),
      );
      await expect(s3.putIfAbsent("_lakeswap/leases/t.json", "{}")).rejects.toMatchObject({
        code: "ACCESS_DENIED",
        message: expect.stringContaining("s3:PutObject (If-None-Match) on s3://lake/warehouse/events/_lakeswap/leases/t.json"),
      });
      await expect(s3.list("t/")).rejects.toMatchObject({ code: "ACCESS_DENIED", message: expect.stringContaining("s3:ListBucket on s3://lake/warehouse/events/t/*") });
      const { dir, cleanup } = tempDir();
      try {
        writeFileSync(path.join(dir, "f"), "x");
        await expect(s3.putFile("t/f", path.join(dir, "f"))).rejects.toMatchObject({ code: "ACCESS_DENIED", message: expect.stringContaining("s3:PutObject on s3://lake/warehouse/events/t/f") });
      } finally {
        cleanup();
      }
      client.destroy();
    }
  });

  it("says no AWS credentials were found (ACCESS_DENIED) when the default chain has none", async () => {
    await store();
    const saved = { ...process.env };
    for (const name of ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_WEB_IDENTITY_TOKEN_FILE"]) {
      delete process.env[name];
    }
    Object.assign(process.env, { AWS_SHARED_CREDENTIALS_FILE: "/nonexistent/credentials", AWS_CONFIG_FILE: "/nonexistent/config", AWS_EC2_METADATA_DISABLED: "true" });
    try {
      const { credentials: _none, ...config } = server!.clientConfig;
      const client = new S3Client(config);
      const s3 = new S3Store(client, { bucket: "lake", prefix: "warehouse/events" });
      await expect(s3.get("k.json")).rejects.toMatchObject({
        code: "ACCESS_DENIED",
        message: expect.stringMatching(/^s3:GetObject on s3:\/\/lake\/warehouse\/events\/k\.json: no AWS credentials were found \(.*\)\. Set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY/),
      });
      client.destroy();
    } finally {
      for (const name of Object.keys(process.env)) if (!(name in saved)) delete process.env[name];
      Object.assign(process.env, saved);
    }
  });

  it("retries a conditional request whose connection broke, and counts one whose answer was lost after S3 applied it as done", async () => {
    const { store: s3, client } = await store();
    // What a reused connection that S3 (or a proxy) had just closed gives: no answer, before or after the request was applied.
    let breaks: "before" | "after" | undefined;
    let calls = 0;
    client.middlewareStack.add(
      (next, context) => async (args) => {
        if (context.commandName !== "PutObjectCommand" && context.commandName !== "DeleteObjectCommand") return next(args);
        calls += 1;
        const when = breaks;
        breaks = undefined;
        const reset = () => Object.assign(new Error("read ECONNRESET"), { name: "TimeoutError", code: "ECONNRESET" });
        if (when === "before") throw reset();
        const result = await next(args);
        if (when === "after") throw reset();
        return result;
      },
      { step: "initialize", name: "breakTheConnection" },
    );
    const text = async (key: string) => Buffer.from((await s3.get(key))!.body).toString();
    for (const when of ["before", "after"] as const) {
      const key = `lease-${when}`;
      breaks = when;
      calls = 0;
      expect(await s3.putIfAbsent(key, "one")).toBe(true);
      expect(calls).toBe(2);
      expect(await text(key)).toBe("one");
      breaks = when;
      expect(await s3.putIfMatch(key, "two", (await s3.get(key))!.etag)).toBe(true);
      expect(await text(key)).toBe("two");
      breaks = when;
      expect(await s3.deleteIfMatch(key, (await s3.get(key))!.etag)).toBe(true);
      expect(await s3.get(key)).toBeUndefined();
    }
    // Refused for what it is, once the connection is fine: another writer's object is not ours.
    expect(await s3.putIfAbsent("taken", "theirs")).toBe(true);
    breaks = "before";
    expect(await s3.putIfAbsent("taken", "ours")).toBe(false);
    expect(await text("taken")).toBe("theirs");
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
    // Both believe they hold it: each one's fence (a conditional write the server ignores) overwrites the other's.
    await expect(one.assertHeld()).resolves.toBeUndefined();
    await expect(two.assertHeld()).resolves.toBeUndefined();
    await two.release();
    await one.release();
  });
});
