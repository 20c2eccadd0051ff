/**
 * An S3-protocol server for tests: s3rver (objects on disk in a temporary
 * folder; its store patched, ./s3rver-store.ts) behind a small HTTP proxy in
 * the same process that adds what s3rver lacks and the product relies on:
 *
 * - conditional writes, as S3 does them: PutObject, CopyObject and
 *   CompleteMultipartUpload with `If-None-Match: *` fail with 412
 *   PreconditionFailed when the key exists; with `If-Match: <etag>` they fail
 *   with 412 when the current ETag differs and with 404 NoSuchKey when the key
 *   is absent. DeleteObject with `If-Match` (an ETag or `*`) likewise. Every
 *   write to a key (conditional or not) is serialized per key inside the
 *   proxy, so check-then-write is atomic;
 * - `aws-chunked` request bodies (what SDK v3 sends for streaming uploads with
 *   flexible checksums) decoded before s3rver stores them;
 * - ListObjectsV2 paging (s3rver's continuation tokens need a DES cipher that
 *   Node 20's OpenSSL no longer has, so the proxy pages with markers itself);
 * - DeleteObjects done key by key (s3rver deletes them concurrently and can
 *   fail on its own folder cleanup), with per-object `<ETag>` conditions and
 *   Quiet mode;
 * - AbortMultipartUpload answered (s3rver does not route it);
 * - any access key accepted (s3rver only knows its own), except two that
 *   stand for refused credentials: `denied` (a policy allows nothing: every
 *   request answers 403 AccessDenied) and `unknown` (403 InvalidAccessKeyId);
 * - `failNext` answers the next matching requests with an S3 error instead of
 *   serving them (e.g. 409 ConditionalRequestConflict on
 *   CompleteMultipartUpload), so clients' handling of it is exercised.
 *
 * Requests must be path-style (`forcePathStyle: true`). Test code only.
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import http, { type IncomingHttpHeaders, type IncomingMessage, type RequestListener, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { pipeline, Transform, type TransformCallback } from "node:stream";
import { makeS3rverBehaveLikeS3, storedEtag, type S3rverFilesystemStore } from "./s3rver-store.js";

export interface S3ServerOptions {
  /** false: pass If-None-Match / If-Match through to s3rver, which ignores them (default true). */
  readonly enforceConditionalWrites?: boolean;
  /** Buckets to create at start. */
  readonly buckets?: readonly string[];
}

type S3Operation =
  | "ListBuckets" | "CreateBucket" | "DeleteBucket" | "HeadBucket" | "ListObjects" | "DeleteObjects"
  | "PutObject" | "CopyObject" | "GetObject" | "HeadObject" | "DeleteObject"
  | "CreateMultipartUpload" | "UploadPart" | "CompleteMultipartUpload" | "AbortMultipartUpload"
  | "Other";

interface S3RequestRecord {
  readonly operation: S3Operation;
  readonly method: string;
  readonly bucket?: string;
  readonly key?: string;
  /** The HTTP status the client received. */
  readonly status: number;
}

interface S3RequestLog {
  /** Every request the proxy answered, oldest first. */
  readonly entries: readonly S3RequestRecord[];
  /** How many requests (of one operation, if given) were answered. */
  count(operation?: S3Operation): number;
  /** How many conditional requests were refused (412 PreconditionFailed, or 404 NoSuchKey for If-Match). */
  readonly preconditionFailures: number;
  reset(): void;
}

/** An error the proxy answers instead of serving a request (`S3Server.failNext`). */
interface S3InjectedFailure {
  readonly status: number;
  readonly code: string;
  readonly message?: string;
  /** Only requests for keys that match (a substring or a pattern); default every key. */
  readonly key?: string | RegExp;
  /** How many requests (default 1). */
  readonly times?: number;
}

/** The access key ids the proxy refuses, as S3 refuses credentials it does not accept. */
const REFUSED_ACCESS_KEYS = { denied: "denied", unknown: "unknown" } as const;

export interface S3Server {
  /** The proxy's endpoint, e.g. `http://127.0.0.1:49152`: give it to the S3 client with `forcePathStyle: true`. */
  readonly endpoint: string;
  readonly region: string;
  /** A ready configuration for `new S3Client(...)`. */
  readonly clientConfig: {
    readonly endpoint: string;
    readonly region: string;
    readonly forcePathStyle: true;
    readonly credentials: { readonly accessKeyId: string; readonly secretAccessKey: string };
  };
  /** Creates a bucket (no error if it already exists). */
  bucket(name: string): Promise<void>;
  readonly requests: S3RequestLog;
  /** The next matching requests of `operation` are answered with this error; nothing is stored. */
  failNext(operation: S3Operation, failure: S3InjectedFailure): void;
  close(): Promise<void>;
}

interface S3rverInstance {
  /** Koa's middleware, composed when the server starts. */
  middleware: { readonly name: string }[];
  readonly store: S3rverFilesystemStore;
  run(): Promise<AddressInfo>;
  /** Koa's handler of a request. */
  callback(): RequestListener;
  close(): Promise<void>;
}
type S3rverConstructor = new (options: {
  address: string;
  port: number;
  silent: boolean;
  directory: string;
  vhostBuckets: boolean;
  configureBuckets: { name: string }[];
}) => S3rverInstance;

const require = createRequire(import.meta.url);
const S3rver = require("s3rver") as S3rverConstructor;
makeS3rverBehaveLikeS3();

const HOST = "127.0.0.1";
const REGION = "us-east-1";

export async function startS3Server(options: S3ServerOptions = {}): Promise<S3Server> {
  const enforce = options.enforceConditionalWrites ?? true;
  const directory = await mkdtemp(path.join(tmpdir(), "lakeswap-s3-"));
  const s3rver = new S3rver({
    address: HOST,
    port: 0,
    silent: true,
    directory,
    vhostBuckets: false,
    configureBuckets: (options.buckets ?? []).map((name) => ({ name })),
  });
  // koa-logger formats a colored line for every request and response (and counts streamed bodies) only for a
  // silent logger to drop them; the controllers' own logger (`ctx.logger`) stays.
  s3rver.middleware = s3rver.middleware.filter((middleware) => middleware.name !== "logger");
  const upstreamAddress = await s3rver.run();
  const upstream = { host: HOST, port: upstreamAddress.port, handle: s3rver.callback(), store: s3rver.store };

  const log: S3RequestRecord[] = [];
  let preconditionFailures = 0;
  const locks = new KeyedMutex();
  const failures: { operation: S3Operation; failure: S3InjectedFailure; remaining: number }[] = [];

  const server = http.createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (!res.headersSent) sendError(res, 500, "InternalError", `emulator proxy: ${String(error)}`);
      else res.destroy();
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://proxy");
    const { bucket, key } = splitPath(url.pathname);
    const method = req.method ?? "GET";
    const operation = classify(method, bucket, key, url.searchParams, req.headers);
    res.on("finish", () => {
      log.push({ operation, method, bucket, key, status: res.statusCode });
    });

    const accessKey = /Credential=([^/,\s]+)\//.exec(headerValue(req.headers, "authorization") ?? "")?.[1];
    if (accessKey === REFUSED_ACCESS_KEYS.denied || accessKey === REFUSED_ACCESS_KEYS.unknown) {
      await drain(req);
      if (accessKey === REFUSED_ACCESS_KEYS.denied) sendError(res, 403, "AccessDenied", "Access Denied");
      else sendError(res, 403, "InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records.", { AWSAccessKeyId: accessKey });
      return;
    }
    const injected = failures.find(
      (f) => f.operation === operation && (f.failure.key === undefined || (typeof f.failure.key === "string" ? (key ?? "").includes(f.failure.key) : f.failure.key.test(key ?? ""))),
    );
    if (injected) {
      injected.remaining -= 1;
      if (injected.remaining <= 0) failures.splice(failures.indexOf(injected), 1);
      await drain(req);
      sendError(res, injected.failure.status, injected.failure.code, injected.failure.message ?? `${injected.failure.code} (injected by the S3 test server)`);
      return;
    }
    if (operation === "HeadBucket" && bucket !== undefined) {
      // s3rver answers HEAD on a bucket with its GET handler: a listing of up to 1,000 keys, each key's metadata read, for
      // nothing (the shared bucket of a test run holds every lake made so far). Its location answers as a HEAD does.
      await drain(req);
      const status = await bucketStatus(upstream, bucket);
      res.writeHead(status, status === 200 ? { "x-amz-bucket-region": "us-east-1" } : {}).end();
      return;
    }
    if (operation === "AbortMultipartUpload") {
      // s3rver keeps parts of unfinished uploads in its own folder; forgetting them is enough here.
      await drain(req);
      res.writeHead(204).end();
      return;
    }
    if (operation === "ListObjects" && url.searchParams.get("list-type") === "2" && bucket !== undefined) {
      await listObjectsV2(res, upstream, bucket, url.searchParams);
      return;
    }
    if (operation === "DeleteObjects" && bucket !== undefined) {
      await deleteObjects(req, res, upstream, bucket, enforce ? locks : undefined);
      return;
    }
    if (!enforce || bucket === undefined) {
      await forward(req, res, upstream);
      return;
    }
    // Reads take the key's lock too: a PUT rewrites the object's file in place, and a GET or HEAD meanwhile would
    // see it half written, where S3 shows the old object or the new one.
    const readsKey = key !== undefined && ["GetObject", "HeadObject"].includes(operation);
    const writesKey = key !== undefined && ["PutObject", "CopyObject", "CompleteMultipartUpload", "DeleteObject"].includes(operation);
    if (readsKey) {
      await locks.withKeys([`${bucket}/${key}`], () => forward(req, res, upstream));
      return;
    }
    if (!writesKey) {
      await forward(req, res, upstream);
      return;
    }
    await locks.withKeys([`${bucket}/${key}`], async () => {
      const refusal = await checkPreconditions(operation, req.headers, upstream.store, bucket, key);
      if (refusal) {
        preconditionFailures += 1;
        await drain(req);
        sendError(res, refusal.status, refusal.code, refusal.message, refusal.extra);
        return;
      }
      await forward(req, res, upstream);
    });
  }

  await new Promise<void>((resolve) => server.listen(0, HOST, resolve));
  const endpoint = `http://${HOST}:${(server.address() as AddressInfo).port}`;

  return {
    endpoint,
    region: REGION,
    clientConfig: { endpoint, region: REGION, forcePathStyle: true, credentials: { accessKeyId: "test", secretAccessKey: "test" } },
    async bucket(name: string): Promise<void> {
      const response = await fetch(`http://${HOST}:${upstream.port}/${encodeURIComponent(name)}`, { method: "PUT" });
      const text = await response.text();
      if (!response.ok && !/BucketAlready(Exists|OwnedByYou)/.test(text)) {
        throw new Error(`creating bucket ${name} failed: ${response.status} ${text}`);
      }
    },
    requests: {
      get entries() {
        return log;
      },
      count: (operation?: S3Operation) => (operation ? log.filter((r) => r.operation === operation).length : log.length),
      get preconditionFailures() {
        return preconditionFailures;
      },
      reset: () => {
        log.length = 0;
        preconditionFailures = 0;
      },
    },
    failNext(operation: S3Operation, failure: S3InjectedFailure): void {
      failures.push({ operation, failure, remaining: failure.times ?? 1 });
    },
    async close(): Promise<void> {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await s3rver.close();
      await rm(directory, { recursive: true, force: true });
    },
  };
}

// ---------------------------------------------------------------------------
// Conditional requests

interface Refusal {
  status: number;
  code: string;
  message: string;
  extra?: Record<string, string>;
}

const PRECONDITION_MESSAGE = "At least one of the pre-conditions you specified did not hold";

async function checkPreconditions(
  operation: S3Operation,
  headers: IncomingHttpHeaders,
  store: S3rverFilesystemStore,
  bucket: string,
  key: string,
): Promise<Refusal | undefined> {
  const ifNoneMatch = headerValue(headers, "if-none-match");
  const ifMatch = headerValue(headers, "if-match");
  if (ifNoneMatch === undefined && ifMatch === undefined) return undefined;
  if (operation === "DeleteObject" && ifNoneMatch !== undefined) {
    return { status: 501, code: "NotImplemented", message: "A header you provided implies functionality that is not implemented", extra: { Header: "If-None-Match" } };
  }
  if (ifNoneMatch !== undefined && ifNoneMatch.trim() !== "*") {
    return { status: 501, code: "NotImplemented", message: "A header you provided implies functionality that is not implemented", extra: { Header: "If-None-Match" } };
  }
  const current = await storedEtag(store, bucket, key);
  if (ifMatch !== undefined) {
    if (current === undefined) return { status: 404, code: "NoSuchKey", message: "The specified key does not exist.", extra: { Key: key } };
    const wanted = ifMatch.split(",").map(normalizeEtag);
    if (!wanted.includes("*") && !wanted.includes(normalizeEtag(current))) {
      return { status: 412, code: "PreconditionFailed", message: PRECONDITION_MESSAGE, extra: { Condition: "If-Match" } };
    }
  }
  if (ifNoneMatch !== undefined && current !== undefined) {
    return { status: 412, code: "PreconditionFailed", message: PRECONDITION_MESSAGE, extra: { Condition: "If-None-Match" } };
  }
  return undefined;
}

function normalizeEtag(etag: string): string {
  return etag.trim().replace(/^W\//, "").replace(/"/g, "");
}

/** s3rver, in this process: its address (for the proxy's own requests), its handler of a request and its store. */
interface Upstream {
  host: string;
  port: number;
  handle: RequestListener;
  store: S3rverFilesystemStore;
}

// ---------------------------------------------------------------------------
// Forwarding

/**
 * Hands a client's request to s3rver's handler, as from a client of its own
 * (its credentials, an `aws-chunked` body decoded); s3rver answers the client
 * directly (a second HTTP connection per request cost about a sixth of the
 * server's CPU).
 */
function forward(req: IncomingMessage, res: ServerResponse, upstream: Upstream): Promise<void> {
  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (value !== undefined) headers[name] = value;
  }
  delete headers["expect"];
  headers["host"] = `${upstream.host}:${upstream.port}`;
  const authorization = headerValue(req.headers, "authorization");
  if (authorization) headers["authorization"] = authorization.replace(/Credential=[^/,\s]+\//, "Credential=S3RVER/");

  const encodings = (headerValue(req.headers, "content-encoding") ?? "").split(",").map((e) => e.trim()).filter(Boolean);
  const chunked = encodings.includes("aws-chunked") || /^STREAMING-/.test(headerValue(req.headers, "x-amz-content-sha256") ?? "");
  if (chunked) {
    const rest = encodings.filter((e) => e !== "aws-chunked");
    if (rest.length > 0) headers["content-encoding"] = rest.join(",");
    else delete headers["content-encoding"];
    delete headers["transfer-encoding"];
    delete headers["x-amz-trailer"];
    const decoded = headerValue(req.headers, "x-amz-decoded-content-length");
    if (decoded !== undefined) headers["content-length"] = decoded;
    headers["x-amz-content-sha256"] = "UNSIGNED-PAYLOAD";
  }

  const request = chunked ? decodedRequest(req) : req;
  request.headers = headers;
  return new Promise((resolve) => {
    res.once("close", () => resolve());
    upstream.handle(request, res);
  });
}

/** The request with its `aws-chunked` body decoded: what s3rver reads (a broken upload fails its read). */
function decodedRequest(req: IncomingMessage): IncomingMessage {
  const body = pipeline(req, new AwsChunkedDecoder(), () => undefined);
  const { method, url, socket, httpVersion, httpVersionMajor, httpVersionMinor } = req;
  return Object.assign(body, { method, url, socket, httpVersion, httpVersionMajor, httpVersionMinor }) as unknown as IncomingMessage;
}

/**
 * ListObjectsV2 served from s3rver's (working) version-1 listing: the
 * continuation token is the last key returned, base64url-encoded.
 */
async function listObjectsV2(res: ServerResponse, upstream: Upstream, bucket: string, query: URLSearchParams): Promise<void> {
  const token = query.get("continuation-token");
  let startAfter = query.get("start-after") ?? undefined;
  if (token !== null) {
    const decoded = Buffer.from(token, "base64url").toString("utf8");
    if (!decoded.startsWith("v2:")) {
      sendError(res, 400, "InvalidArgument", "The continuation token provided is incorrect", { ArgumentName: "continuation-token" });
      return;
    }
    startAfter = decoded.slice(3);
  }
  const v1 = new URLSearchParams();
  for (const name of ["prefix", "delimiter", "max-keys", "encoding-type"]) {
    const value = query.get(name);
    if (value !== null) v1.set(name, value);
  }
  if (startAfter) v1.set("marker", startAfter);
  const response = await fetch(`http://${upstream.host}:${upstream.port}/${encodeURIComponent(bucket)}?${v1.toString()}`);
  let xml = await response.text();
  if (response.status === 200) {
    const keys = [...xml.matchAll(/<Contents><Key>([\s\S]*?)<\/Key>/g)].map((m) => m[1] ?? "");
    const truncated = /<IsTruncated>true<\/IsTruncated>/.test(xml);
    const last = keys[keys.length - 1];
    const next = truncated && last !== undefined ? Buffer.from(`v2:${decodeXml(last)}`, "utf8").toString("base64url") : undefined;
    const v2Fields =
      (token !== null ? `<ContinuationToken>${escapeXml(token)}</ContinuationToken>` : "") +
      (token === null && startAfter ? `<StartAfter>${escapeXml(startAfter)}</StartAfter>` : "") +
      `<KeyCount>${keys.length}</KeyCount>` +
      (next !== undefined ? `<NextContinuationToken>${next}</NextContinuationToken>` : "");
    xml = xml
      .replace(/<Marker>[\s\S]*?<\/Marker>|<Marker\/>/, "")
      .replace(/<NextMarker>[\s\S]*?<\/NextMarker>/, "")
      .replace(/(<Prefix>[\s\S]*?<\/Prefix>|<Prefix\/>)/, `$1${v2Fields}`);
    if (query.get("fetch-owner") !== "true") xml = xml.replace(/<Owner>[\s\S]*?<\/Owner>/g, "");
  }
  res.writeHead(response.status, { "content-type": "application/xml", "content-length": Buffer.byteLength(xml) });
  res.end(xml);
}

/** DeleteObjects: up to 1000 keys, each deleted (under its key lock) and reported on its own. */
async function deleteObjects(req: IncomingMessage, res: ServerResponse, upstream: Upstream, bucket: string, locks: KeyedMutex | undefined): Promise<void> {
  const xml = (await readBody(req)).toString("utf8");
  const objects = [...xml.matchAll(/<Object>([\s\S]*?)<\/Object>/g)].map((m) => {
    const inner = m[1] ?? "";
    const key = /<Key>([\s\S]*?)<\/Key>/.exec(inner)?.[1];
    const etag = /<ETag>([\s\S]*?)<\/ETag>/.exec(inner)?.[1];
    return { key: key === undefined ? undefined : decodeXml(key), etag: etag === undefined ? undefined : decodeXml(etag) };
  });
  if (objects.length === 0 || objects.length > 1000 || objects.some((o) => o.key === undefined)) {
    sendError(res, 400, "MalformedXML", "The XML you provided was not well-formed or did not validate against our published schema");
    return;
  }
  if ((await bucketStatus(upstream, bucket)) === 404) {
    sendError(res, 404, "NoSuchBucket", "The specified bucket does not exist", { BucketName: bucket });
    return;
  }
  const quiet = /<Quiet>\s*true\s*<\/Quiet>/i.test(xml);
  const results: string[] = [];
  for (const { key, etag } of objects) {
    const name = key ?? "";
    const deleteOne = async (): Promise<void> => {
      if (etag !== undefined && locks !== undefined) {
        const refusal = await checkPreconditions("DeleteObject", { "if-match": etag }, upstream.store, bucket, name);
        if (refusal) {
          results.push(`<Error><Key>${escapeXml(name)}</Key><Code>${refusal.code}</Code><Message>${escapeXml(refusal.message)}</Message></Error>`);
          return;
        }
      }
      const status = await upstreamStatus(upstream, "DELETE", `/${encodeURIComponent(bucket)}/${encodeKey(name)}`);
      if (status >= 300) {
        results.push(`<Error><Key>${escapeXml(name)}</Key><Code>InternalError</Code><Message>delete answered ${status}</Message></Error>`);
      } else if (!quiet) {
        results.push(`<Deleted><Key>${escapeXml(name)}</Key></Deleted>`);
      }
    };
    if (locks) await locks.withKeys([`${bucket}/${name}`], deleteOne);
    else await deleteOne();
  }
  const body = `<?xml version="1.0" encoding="UTF-8"?>\n<DeleteResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">${results.join("")}</DeleteResult>`;
  res.writeHead(200, { "content-type": "application/xml", "content-length": Buffer.byteLength(body) });
  res.end(body);
}

/**
 * Whether a bucket exists upstream (200, or 404), from its location: s3rver answers a HEAD (or GET) of the bucket by
 * listing up to 1,000 of its keys, and its location by reading the bucket's folder alone.
 */
function bucketStatus(upstream: Upstream, bucket: string): Promise<number> {
  return upstreamStatus(upstream, "GET", `/${encodeURIComponent(bucket)}?location`);
}

function upstreamStatus(upstream: Upstream, method: string, requestPath: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const request = http.request({ host: upstream.host, port: upstream.port, method, path: requestPath }, (response) => {
      response.resume();
      response.on("end", () => resolve(response.statusCode ?? 0));
    });
    request.on("error", reject);
    request.end();
  });
}

/**
 * Decodes an `aws-chunked` body: `<hex size>[;chunk-signature=…]\r\n<data>\r\n`
 * chunks, a zero-size chunk, then trailing headers (checksums), which are dropped.
 */
class AwsChunkedDecoder extends Transform {
  private pending: Buffer = Buffer.alloc(0);
  private remaining = 0;
  private state: "size" | "data" | "crlf" | "trailer" = "size";

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.pending = this.pending.length > 0 ? Buffer.concat([this.pending, chunk]) : chunk;
    try {
      this.consume();
      callback();
    } catch (error) {
      callback(error as Error);
    }
  }

  private consume(): void {
    for (;;) {
      if (this.state === "trailer") {
        this.pending = Buffer.alloc(0);
        return;
      }
      if (this.state === "size") {
        const end = this.pending.indexOf("\r\n");
        if (end < 0) return;
        const line = this.pending.subarray(0, end).toString("latin1");
        this.pending = this.pending.subarray(end + 2);
        const size = parseInt(line.split(";")[0] ?? "", 16);
        if (Number.isNaN(size)) throw new Error(`malformed aws-chunked chunk header '${line}'`);
        this.remaining = size;
        this.state = size === 0 ? "trailer" : "data";
        continue;
      }
      if (this.state === "data") {
        if (this.pending.length === 0) return;
        const take = Math.min(this.remaining, this.pending.length);
        this.push(this.pending.subarray(0, take));
        this.pending = this.pending.subarray(take);
        this.remaining -= take;
        if (this.remaining === 0) this.state = "crlf";
        continue;
      }
      // crlf after a chunk's data
      if (this.pending.length < 2) return;
      this.pending = this.pending.subarray(2);
      this.state = "size";
    }
  }
}

// ---------------------------------------------------------------------------
// Helpers

function splitPath(pathname: string): { bucket?: string; key?: string } {
  const trimmed = pathname.replace(/^\/+/, "");
  if (trimmed === "") return {};
  const slash = trimmed.indexOf("/");
  if (slash < 0) return { bucket: decodeURIComponent(trimmed) };
  const key = trimmed.slice(slash + 1);
  return { bucket: decodeURIComponent(trimmed.slice(0, slash)), key: key === "" ? undefined : decodeURIComponent(key) };
}

function classify(method: string, bucket: string | undefined, key: string | undefined, query: URLSearchParams, headers: IncomingHttpHeaders): S3Operation {
  if (bucket === undefined) return method === "GET" ? "ListBuckets" : "Other";
  if (key === undefined) {
    if (method === "POST" && query.has("delete")) return "DeleteObjects";
    if (method === "GET" && [...query.keys()].every((k) => ["list-type", "prefix", "delimiter", "max-keys", "continuation-token", "start-after", "marker", "encoding-type", "fetch-owner", "x-id"].includes(k))) return "ListObjects";
    if (method === "PUT" && [...query.keys()].length === 0) return "CreateBucket";
    if (method === "DELETE") return "DeleteBucket";
    if (method === "HEAD") return "HeadBucket";
    return "Other";
  }
  switch (method) {
    case "PUT":
      if (query.has("uploadId")) return "UploadPart";
      if (query.has("tagging") || query.has("acl")) return "Other";
      return headers["x-amz-copy-source"] !== undefined ? "CopyObject" : "PutObject";
    case "POST":
      if (query.has("uploads")) return "CreateMultipartUpload";
      if (query.has("uploadId")) return "CompleteMultipartUpload";
      return "Other";
    case "DELETE":
      return query.has("uploadId") ? "AbortMultipartUpload" : "DeleteObject";
    case "GET":
      return query.has("tagging") || query.has("acl") || query.has("uploadId") ? "Other" : "GetObject";
    case "HEAD":
      return "HeadObject";
    default:
      return "Other";
  }
}

function encodeKey(key: string): string {
  return key.split("/").map(encodeURIComponent).join("/");
}

function headerValue(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value.join(",") : value;
}

function decodeXml(text: string): string {
  return text
    .replace(/&#x([0-9a-fA-F]+);/g, (_m, hex: string) => String.fromCodePoint(parseInt(hex, 16)))
    .replace(/&#(\d+);/g, (_m, dec: string) => String.fromCodePoint(parseInt(dec, 10)))
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&quot;/g, '"')
    .replace(/&apos;/g, "'")
    .replace(/&amp;/g, "&");
}

function escapeXml(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

function sendError(res: ServerResponse, status: number, code: string, message: string, extra: Record<string, string> = {}): void {
  const requestId = randomBytes(8).toString("hex").toUpperCase();
  const fields = Object.entries(extra).map(([name, value]) => `<${name}>${escapeXml(value)}</${name}>`).join("");
  const body =
    `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>${escapeXml(message)}</Message>` +
    `${fields}<RequestId>${requestId}</RequestId><HostId>${requestId}</HostId></Error>`;
  res.writeHead(status, {
    "content-type": "application/xml",
    "content-length": Buffer.byteLength(body),
    "x-amz-request-id": requestId,
  });
  res.end(body);
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

async function drain(req: IncomingMessage): Promise<void> {
  if (req.readableEnded) return;
  await new Promise<void>((resolve, reject) => {
    req.on("end", resolve);
    req.on("error", reject);
    req.resume();
  });
}

/** Runs work while holding locks on every given key (taken in sorted order, so no deadlock). */
class KeyedMutex {
  private readonly tails = new Map<string, Promise<void>>();

  async withKeys<T>(keys: readonly string[], work: () => Promise<T>): Promise<T> {
    const unique = [...new Set(keys)].sort();
    const releases: (() => void)[] = [];
    try {
      for (const key of unique) releases.push(await this.acquire(key));
      return await work();
    } finally {
      for (const release of releases.reverse()) release();
    }
  }

  private async acquire(key: string): Promise<() => void> {
    const previous = this.tails.get(key) ?? Promise.resolve();
    let release!: () => void;
    const current = new Promise<void>((resolve) => {
      release = resolve;
    });
    const tail = previous.then(() => current);
    this.tails.set(key, tail);
    await previous;
    return () => {
      release();
      if (this.tails.get(key) === tail) this.tails.delete(key);
    };
  }
}
