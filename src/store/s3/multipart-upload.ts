import { createReadStream, type ReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import { setTimeout as delay } from "node:timers/promises";
import {
  AbortMultipartUploadCommand, CompleteMultipartUploadCommand, CreateMultipartUploadCommand, PutObjectCommand, UploadPartCommand,
  type CompletedPart, type S3Client,
} from "@aws-sdk/client-s3";
import { InvalidInputError, LakeswapError, errorMessage } from "../../model/errors.js";
import { accessDenied } from "../../shared/retry.js";
import { assertKey } from "../object-store.js";
import type { AdaptiveLimit } from "../../shared/adaptive-limit.js";

/** The multipart part size of the Athena sink: fixed at 16 MiB, as its documentation says. */
export const ATHENA_PART_SIZE = 16 * 1024 * 1024;

/** S3 allows at most 10,000 parts per multipart upload. */
const MAX_PARTS = 10_000;

/** Uploads in all when S3 answers 409 ConditionalRequestConflict (another write to the key raced this one). */
const CONFLICT_ATTEMPTS = 4;

/** One local file to upload to one key, exactly once. */
export interface UploadOnceRequest {
  readonly client: S3Client;
  readonly bucket: string;
  /** The full object key inside the bucket. */
  readonly key: string;
  /** The local file's path. */
  readonly file: string;
  /** The limit every S3 request of the upload runs through (one part is one call). */
  readonly limit: AdaptiveLimit;
  /** Bytes per part (default ATHENA_PART_SIZE); a file of at most one part goes in one PutObject. S3 wants at least 5 MiB. */
  readonly partSize?: number;
  /** User metadata stored with the object (`x-amz-meta-*`). */
  readonly metadata?: Record<string, string>;
}

/** What happened: `created` (this call wrote the object) or `exists` (the key already held an object, left unchanged). */
export type UploadOnceResult = { readonly outcome: "created" | "exists"; readonly bytes: number; readonly parts: number };

/**
 * Uploads a local file to `s3://bucket/key` only if no object is there
 * (`If-None-Match: *`): one PutObject for a file of at most one part, else a
 * multipart upload whose parts are read from the file as they are sent. A key
 * that already holds an object answers `exists`. A 409 ConditionalRequestConflict
 * starts the upload over, as S3 asks, a bounded number of times. Any failure
 * aborts the multipart upload (best effort) and throws an error naming the key.
 */
export async function uploadFileOnce(request: UploadOnceRequest): Promise<UploadOnceResult> {
  const { bucket, key, file } = request;
  const partSize = request.partSize ?? ATHENA_PART_SIZE;
  const uri = `s3://${bucket}/${key}`;
  if (!Number.isSafeInteger(partSize) || partSize < 1) {
    throw new InvalidInputError(`uploading ${file} to ${uri}: part size ${partSize} is not a whole number of bytes; use at least 5 MiB (S3's smallest part)`);
  }
  try {
    assertKey(key);
  } catch (error) {
    throw new InvalidInputError(`uploading ${file} to ${uri}: ${errorMessage(error)}`);
  }
  const { size } = await stat(file);
  const parts = Math.max(1, Math.ceil(size / partSize));
  if (parts > MAX_PARTS) {
    throw new InvalidInputError(
      `uploading ${file} (${size} bytes) to ${uri}: ${parts} parts of ${partSize} bytes is more than the ${MAX_PARTS} S3 allows; use a larger part size or a smaller file`,
    );
  }
  const upload: Upload = { ...request, uri, size, partSize, parts };
  for (let attempt = 1; ; attempt += 1) {
    const outcome = size <= partSize ? await putOnce(upload) : await multipartOnce(upload);
    if (outcome !== "conflict") return { outcome, bytes: size, parts };
    if (attempt >= CONFLICT_ATTEMPTS) {
      throw new LakeswapError(
        "STORE_ERROR",
        `uploading ${file} to ${uri} failed: S3 answered 409 ConditionalRequestConflict ${attempt} times (another write to the key kept racing this one); retry the upload`,
        { retryable: true },
      );
    }
    // S3: "on a 409 failure you should retry the upload"; a short jittered pause lets the other write finish.
    await delay(Math.random() * 100 * 2 ** attempt);
  }
}

interface Upload extends UploadOnceRequest {
  readonly uri: string;
  readonly size: number;
  readonly partSize: number;
  readonly parts: number;
}

type Attempt = "created" | "exists" | "conflict";

async function putOnce(upload: Upload): Promise<Attempt> {
  const { client, bucket, key, file, size, limit, metadata, uri } = upload;
  try {
    await limit.run(() =>
      withFileRange(file, 0, size, (body) =>
        client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body, ContentLength: size, IfNoneMatch: "*", Metadata: metadata })),
      ),
    );
    return "created";
  } catch (error) {
    if (keyExists(error)) return "exists";
    if (conflict(error)) return "conflict";
    throw uploadError(upload, `s3:PutObject on ${uri}`, error, "");
  }
}

async function multipartOnce(upload: Upload): Promise<Attempt> {
  const { client, bucket, key, file, size, partSize, parts, limit, metadata, uri } = upload;
  let uploadId: string | undefined;
  try {
    const created = await limit.run(() => client.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key, Metadata: metadata })));
    uploadId = created.UploadId;
    if (!uploadId) throw new LakeswapError("STORE_ERROR", `S3 answered CreateMultipartUpload for ${uri} without an UploadId`);
    const id = uploadId;

    // Every part is queued on the limit at once, but a part's bytes are read only while it is sent. After the first
    // failure the parts still waiting give up; those in flight finish (at most `limit.current` parts), so that no part
    // lands after the abort below, as S3 advises.
    let firstFailure: { error: unknown } | undefined;
    const sent = await Promise.allSettled(
      Array.from({ length: parts }, (_, index) => {
        const offset = index * partSize;
        const length = Math.min(partSize, size - offset);
        return limit
          .run(() => {
            if (firstFailure) throw new PartAbandoned();
            return withFileRange(file, offset, length, (body) =>
              client.send(new UploadPartCommand({ Bucket: bucket, Key: key, UploadId: id, PartNumber: index + 1, Body: body, ContentLength: length })),
            );
          })
          .then((response): CompletedPart => {
            if (!response.ETag) throw new LakeswapError("STORE_ERROR", `S3 answered UploadPart ${index + 1} of ${uri} without an ETag`);
            return { PartNumber: index + 1, ETag: response.ETag };
          })
          .catch((error: unknown) => {
            firstFailure ??= { error };
            throw error;
          });
      }),
    );
    if (firstFailure) throw firstFailure.error;
    const completed = sent.map((result) => (result as PromiseFulfilledResult<CompletedPart>).value);

    await limit.run(() =>
      client.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId: id, MultipartUpload: { Parts: completed }, IfNoneMatch: "*" })),
    );
    return "created";
  } catch (error) {
    // Parts of an upload that never completes are billed until aborted; no part is in flight any more.
    const id = uploadId;
    const aborted =
      id === undefined ||
      (await client.send(new AbortMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId: id })).then(
        () => true,
        () => false,
      ));
    if (keyExists(error)) return "exists";
    if (conflict(error)) return "conflict";
    const after =
      id === undefined ? "" : aborted
        ? " (the multipart upload was aborted; nothing was written to the key)"
        : ` (nothing was written to the key; aborting multipart upload ${id} failed too: its parts stay until a bucket lifecycle rule for incomplete uploads removes them)`;
    throw uploadError(upload, `s3:PutObject (multipart) on ${uri}`, error, after);
  }
}

/** Thrown by a part that had not started when another part failed. */
class PartAbandoned extends Error {
  constructor() {
    super("part abandoned: another part of the upload failed");
    this.name = "PartAbandoned";
  }
}

/** Sends the bytes [offset, offset + length) of a file as a stream opened for this attempt alone, and closes it. */
async function withFileRange<T>(file: string, offset: number, length: number, send: (body: ReadStream | Uint8Array) => Promise<T>): Promise<T> {
  if (length === 0) return send(new Uint8Array());
  const body = createReadStream(file, { start: offset, end: offset + length - 1 });
  try {
    return await send(body);
  } finally {
    body.destroy();
  }
}

/** The error a failed upload throws: ACCESS_DENIED for refused credentials, else STORE_ERROR naming the file and the key. */
function uploadError(upload: Upload, call: string, error: unknown, after: string): LakeswapError {
  const denied = accessDenied(call, error);
  if (denied) return denied;
  // What the limit gave up retrying may work later; anything else it threw at once.
  const retryable = error instanceof LakeswapError ? error.retryable : false;
  return new LakeswapError("STORE_ERROR", `uploading ${upload.file} to ${upload.uri} failed: ${errorMessage(error)}${after}`, { retryable, cause: error });
}

function errorName(error: unknown): string | undefined {
  if (typeof error !== "object" || error === null) return undefined;
  return (error as { name?: string }).name ?? (error as { Code?: string }).Code;
}

function status(error: unknown): number | undefined {
  if (typeof error !== "object" || error === null) return undefined;
  return (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
}

function keyExists(error: unknown): boolean {
  return errorName(error) === "PreconditionFailed" || status(error) === 412;
}

function conflict(error: unknown): boolean {
  return errorName(error) === "ConditionalRequestConflict" || status(error) === 409;
}
