import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import { availableParallelism } from "node:os";
import {
  AbortMultipartUploadCommand, CompleteMultipartUploadCommand, CopyObjectCommand, CreateMultipartUploadCommand, DeleteObjectCommand,
  DeleteObjectsCommand, GetObjectCommand, ListObjectsV2Command, PutObjectCommand, UploadPartCopyCommand, type S3Client,
} from "@aws-sdk/client-s3";
import { Upload } from "@aws-sdk/lib-storage";
import { LakeswapError } from "../../model/errors.js";
import { isTransient, withRetry } from "../../shared/retry.js";
import { uploadLimitFromEnv, type AdaptiveLimit } from "../../shared/adaptive-limit.js";
import { uploadFileOnce } from "./multipart-upload.js";
import { assertKey, joinKey, type ListOptions, type ObjectInfo, type ObjectStore, type TaggedObject } from "../object-store.js";

const MIB = 1024 * 1024;
/** The largest object one CopyObject copies (5 GiB). */
const MAX_COPY_OBJECT_BYTES = 5 * 1024 * MIB;
/** S3 allows at most 10,000 parts per multipart upload. */
const MAX_PARTS = 10_000;

/** Where an S3 store keeps the lake, and how it uploads. */
export interface S3StoreOptions {
  readonly bucket: string;
  /** Key prefix of the lake inside the bucket (no leading or trailing '/'). */
  readonly prefix: string;
  /** Concurrent part uploads of one multipart upload (default: 4 per CPU, at least 4, at most 16). */
  readonly uploadConcurrency?: number;
  /** Whether the store honours If-None-Match / If-Match (S3 does; some S3-compatible stores do not). */
  readonly conditionalWrites?: boolean;
  /** The auto-tuned limit of the requests of ingested segment uploads (`putFileIfAbsent`); default from UPLOAD_CONCURRENCY(_MAX). */
  readonly ingestLimit?: AdaptiveLimit;
}

/** The multipart part size for an object of `size` bytes: max(8 MiB, size / 10,000). */
export function partSizeFor(size: number): number {
  return Math.max(8 * MIB, Math.ceil(size / MAX_PARTS));
}

/**
 * The AWS object store: the lake under `s3://bucket/prefix/`, through the AWS
 * SDK v3. Listings follow every page; deletes go in chunks of 1,000 with
 * every per-key error checked; run files are written with `If-None-Match: *`.
 */
export class S3Store implements ObjectStore {
  readonly capabilities: { readonly conditionalWrites: boolean; readonly localPaths: false };
  readonly description: string;
  readonly bucket: string;
  private readonly prefix: string;
  private readonly uploadConcurrency: number;
  private ingestLimit: AdaptiveLimit | undefined;

  constructor(
    private readonly client: S3Client,
    options: S3StoreOptions,
  ) {
    this.bucket = options.bucket;
    this.prefix = options.prefix.replace(/^\/+|\/+$/g, "");
    this.uploadConcurrency = options.uploadConcurrency ?? Math.min(16, Math.max(4, 4 * availableParallelism()));
    this.capabilities = { conditionalWrites: options.conditionalWrites ?? true, localPaths: false };
    this.ingestLimit = options.ingestLimit;
    this.description = `s3://${this.bucket}/${this.prefix}`;
    nameMissingBuckets(client);
  }

  /** The s3:// URI of a key (for Glue locations and Athena UNLOAD). */
  uri(key: string): string {
    return `s3://${this.bucket}/${this.fullKey(key)}`;
  }

  /** The store key of an s3:// URI inside this lake, or undefined if it lies elsewhere. */
  keyOf(uri: string): string | undefined {
    const head = `s3://${this.bucket}/${this.prefix ? `${this.prefix}/` : ""}`;
    if (!uri.startsWith(head)) return undefined;
    try {
      return assertKey(uri.slice(head.length));
    } catch {
      return undefined;
    }
  }

  localPath(key: string): string {
    throw new LakeswapError("STORE_ERROR", `the S3 store has no local path for '${key}'`);
  }

  async get(key: string): Promise<TaggedObject | undefined> {
    try {
      // The body is read inside the retry: a connection that breaks while it streams is a transient failure too.
      return await withRetry(`s3:GetObject on ${this.uri(key)}`, async () => {
        const response = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: this.fullKey(key) }));
        return { body: (await response.Body?.transformToByteArray()) ?? new Uint8Array(), etag: response.ETag ?? "" };
      });
    } catch (error) {
      if (isStatus(error, 404) || errorName(error) === "NoSuchKey") return undefined;
      throw error;
    }
  }

  async getRange(key: string, offset: number, length: number): Promise<Uint8Array> {
    const range = `bytes=${offset}-${offset + Math.max(0, length - 1)}`;
    return withRetry(`s3:GetObject on ${this.uri(key)} (${range})`, async () => {
      const response = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: this.fullKey(key), Range: range }));
      return (await response.Body?.transformToByteArray()) ?? new Uint8Array();
    });
  }

  async put(key: string, body: Uint8Array | string): Promise<void> {
    await withRetry(`s3:PutObject on ${this.uri(key)}`, () => this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: this.fullKey(key), Body: bytesOf(body) })));
  }

  async putIfAbsent(key: string, body: Uint8Array | string): Promise<boolean> {
    return this.conditional(
      `s3:PutObject (If-None-Match) on ${this.uri(key)}`,
      () => this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: this.fullKey(key), Body: bytesOf(body), IfNoneMatch: "*" })),
      () => this.holds(key, body),
    );
  }

  async putIfMatch(key: string, body: Uint8Array | string, etag: string): Promise<boolean> {
    return this.conditional(
      `s3:PutObject (If-Match) on ${this.uri(key)}`,
      () => this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: this.fullKey(key), Body: bytesOf(body), IfMatch: etag })),
      () => this.holds(key, body),
    );
  }

  async deleteIfMatch(key: string, etag: string): Promise<boolean> {
    return this.conditional(
      `s3:DeleteObject (If-Match) on ${this.uri(key)}`,
      () => this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: this.fullKey(key), IfMatch: etag })),
      async () => (await this.get(key)) === undefined,
    );
  }

  async list(prefix: string, options: ListOptions = {}): Promise<ObjectInfo[]> {
    const objects: ObjectInfo[] = [];
    const full = this.fullKey(prefix, true);
    let token: string | undefined;
    do {
      const page = await withRetry(`s3:ListBucket on s3://${this.bucket}/${full}*`, () =>
        this.client.send(
          new ListObjectsV2Command({ Bucket: this.bucket, Prefix: full, ContinuationToken: token, ...(options.startAfter !== undefined && !token ? { StartAfter: this.fullKey(options.startAfter) } : {}) }),
        ),
      );
      for (const object of page.Contents ?? []) {
        if (object.Key) objects.push({ key: this.relativeKey(object.Key), size: object.Size ?? 0 });
      }
      token = page.IsTruncated && objects.length <= (options.atMost ?? Infinity) ? page.NextContinuationToken : undefined;
    } while (token);
    return objects.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  async delete(keys: readonly string[]): Promise<void> {
    for (let start = 0; start < keys.length; start += 1000) {
      // S3 answers DeleteObjects with per-key errors; keys refused with a transient code (InternalError,
      // SlowDown, …) are sent again, with backoff, as AWS advises; any other refusal stops the delete.
      let remaining = keys.slice(start, start + 1000);
      await withRetry(`s3:DeleteObject on ${remaining.length} keys under ${this.description}`, async () => {
        const response = await this.client.send(
          new DeleteObjectsCommand({ Bucket: this.bucket, Delete: { Objects: remaining.map((key) => ({ Key: this.fullKey(key) })), Quiet: true } }),
        );
        const failed = (response.Errors ?? []).filter((e) => e.Code !== "NoSuchKey");
        if (failed.length === 0) return;
        const transient = failed.every((e) => isTransient({ code: e.Code }));
        const failedKeys = new Set(failed.map((e) => e.Key));
        const first = failed.slice(0, 3).map((e) => `${e.Key}: ${e.Code} ${e.Message ?? ""}`.trim());
        const total = remaining.length;
        if (transient) remaining = remaining.filter((key) => failedKeys.has(this.fullKey(key)));
        throw new LakeswapError(
          "STORE_ERROR",
          `DeleteObjects failed for ${failed.length} of ${total} keys (${first.join("; ")}); nothing was assumed deleted, rerun lakeswap gc`,
          { retryable: transient },
        );
      });
    }
  }

  /** An ingested segment's file: the Athena sink's fixed 16 MiB parts, every request through the auto-tuned upload limit. */
  async putFileIfAbsent(key: string, localPath: string): Promise<boolean> {
    this.ingestLimit ??= uploadLimitFromEnv(process.env);
    const { outcome } = await uploadFileOnce({ client: this.client, bucket: this.bucket, key: this.fullKey(assertKey(key)), file: localPath, limit: this.ingestLimit });
    return outcome === "created";
  }

  async putFile(key: string, localPath: string): Promise<void> {
    const { size } = await stat(localPath);
    const uri = `s3://${this.bucket}/${this.fullKey(key)}`;
    const what = `s3:PutObject on ${uri}`;
    // A 409 ConditionalRequestConflict (a conflicting operation on the key while a conditional upload completes)
    // is retried as AWS documents it: a new multipart upload (CreateMultipartUpload), every part sent again.
    await withRetry(
      what,
      async () => {
        const upload = new Upload({
          client: this.client,
          queueSize: this.uploadConcurrency,
          partSize: partSizeFor(size),
          leavePartsOnError: false,
          params: {
            Bucket: this.bucket,
            Key: this.fullKey(key),
            Body: createReadStream(localPath),
            ContentLength: size,
            // Run files are fresh: never overwrite an object that is already there.
            ...(this.capabilities.conditionalWrites ? { IfNoneMatch: "*" } : {}),
          },
        });
        try {
          await upload.done();
        } catch (error) {
          if (isStatus(error, 412) || errorName(error) === "PreconditionFailed") {
            throw new LakeswapError("CONFLICT", `${uri} already exists; a run file is never overwritten`);
          }
          throw error;
        }
      },
      { retryable: (error) => errorName(error) === "ConditionalRequestConflict" || isStatus(error, 409) || isTransient(error) },
    );
  }

  async copy(from: string, to: string, size: number): Promise<void> {
    // URL-encoded as S3 wants it; '/' and '=' (in every partition path) stay as they are, which S3 and its emulators all read.
    const source = encodeURI(`${this.bucket}/${this.fullKey(from)}`).replace(/[?#+]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
    const target = { Bucket: this.bucket, Key: this.fullKey(to) };
    const what = `s3:CopyObject of ${this.uri(from)} to ${this.uri(to)}`;
    if (size <= MAX_COPY_OBJECT_BYTES) {
      await withRetry(what, () => this.client.send(new CopyObjectCommand({ ...target, CopySource: source })));
      return;
    }
    // CopyObject takes at most 5 GiB: larger objects are copied part by part (UploadPartCopy), still inside S3.
    const { UploadId } = await withRetry(what, () => this.client.send(new CreateMultipartUploadCommand(target)));
    try {
      const partSize = Math.max(partSizeFor(size), 512 * MIB);
      const ranges = Array.from({ length: Math.ceil(size / partSize) }, (_, i) => [i * partSize, Math.min(size, (i + 1) * partSize) - 1] as const);
      const parts = await Promise.all(
        ranges.map(async ([first, last], index) => {
          const response = await withRetry(what, () =>
            this.client.send(
              new UploadPartCopyCommand({ ...target, UploadId, PartNumber: index + 1, CopySource: source, CopySourceRange: `bytes=${first}-${last}` }),
            ),
          );
          return { PartNumber: index + 1, ETag: response.CopyPartResult?.ETag };
        }),
      );
      await withRetry(what, () => this.client.send(new CompleteMultipartUploadCommand({ ...target, UploadId, MultipartUpload: { Parts: parts } })));
    } catch (error) {
      await this.client.send(new AbortMultipartUploadCommand({ ...target, UploadId })).catch(() => undefined);
      throw error;
    }
  }

  /**
   * A conditional request, retried when S3 refused it without applying it (503, a conflicting request) and when its
   * connection broke before an answer came (a reset, a timeout: a reused connection that S3 or a proxy had just closed).
   * Such a request may have been applied all the same: when a retry is then refused (the condition no longer holds,
   * perhaps because of that first attempt), `applied` decides whether the store holds this request's outcome.
   */
  private async conditional(what: string, send: () => Promise<unknown>, applied: () => Promise<boolean>): Promise<boolean> {
    let unanswered = false;
    try {
      await withRetry(
        what,
        async () => {
          try {
            await send();
          } catch (error) {
            if (noAnswer(error)) unanswered = true;
            throw error;
          }
        },
        { retryable: (error) => errorName(error) === "ConditionalRequestConflict" || isStatus(error, 503) || noAnswer(error) },
      );
      return true;
    } catch (error) {
      if (isStatus(error, 412) || isStatus(error, 404) || errorName(error) === "PreconditionFailed" || errorName(error) === "NoSuchKey") {
        return unanswered && (await applied());
      }
      throw error;
    }
  }

  /** Whether the object at `key` holds exactly `body`. */
  private async holds(key: string, body: Uint8Array | string): Promise<boolean> {
    const current = await this.get(key);
    return current !== undefined && Buffer.compare(current.body, typeof body === "string" ? Buffer.from(body) : body) === 0;
  }

  private fullKey(key: string, allowEmpty = false): string {
    if (!(allowEmpty && key === "")) assertKey(key.replace(/\/$/, "") || key);
    const joined = joinKey(this.prefix, key);
    return key.endsWith("/") ? `${joined}/` : joined;
  }

  private relativeKey(fullKey: string): string {
    return this.prefix ? fullKey.slice(this.prefix.length + 1) : fullKey;
  }
}

/**
 * Makes every call of the client that names a bucket that does not exist fail with a STORE_ERROR (exit 8) naming
 * the bucket, the call and the fix, instead of S3's bare "The specified bucket does not exist" (which a GetObject
 * would even take for a missing key). Added once per client, before its retries.
 */
function nameMissingBuckets(client: S3Client): void {
  client.middlewareStack.add(
    (next, context) => async (args) => {
      try {
        return await next(args);
      } catch (error) {
        if (errorName(error) !== "NoSuchBucket") throw error;
        const input = args.input as { Bucket?: string; Key?: string; Prefix?: string };
        const bucket = input.Bucket ?? "(unnamed)";
        const call = `s3:${(context.commandName ?? "S3 call").replace(/Command$/, "")} on s3://${bucket}/${input.Key ?? input.Prefix ?? ""}`;
        throw new LakeswapError(
          "STORE_ERROR",
          `the S3 bucket '${bucket}' does not exist (${call}): create it, or name the lake's bucket in DATA_OUTPUT_S3_BUCKET (or data_sinks), and check the region and endpoint`,
          { cause: error },
        );
      }
    },
    { step: "initialize", name: "lakeswapNamesMissingBuckets", override: true },
  );
}

function errorName(error: unknown): string | undefined {
  return (error as { name?: string; Code?: string }).name ?? (error as { Code?: string }).Code;
}

/** A transient failure with no HTTP answer at all (a reset or timed-out connection): the request may or may not have been applied. */
function noAnswer(error: unknown): boolean {
  return isTransient(error) && (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode === undefined && !(error instanceof LakeswapError);
}

function isStatus(error: unknown, status: number): boolean {
  return (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode === status;
}

/**
 * A body as bytes: the SDK sends no content-length for an empty string, then warns on the user's terminal ("Are you
 * using a Stream of unknown length ...?") for a marker or record that is empty.
 */
function bytesOf(body: Uint8Array | string): Uint8Array {
  return typeof body === "string" ? Buffer.from(body) : body;
}
