import type { OutgoingHttpHeaders } from "node:http";
import { LakeswapError } from "../model/errors.js";

/** The collector cannot take events now: the client should retry after `retryAfterSeconds`, here or elsewhere (HTTP 503). */
export class UnavailableError extends LakeswapError {
  constructor(
    code: LakeswapError["code"],
    message: string,
    readonly retryAfterSeconds: number,
  ) {
    super(code, message, { retryable: true });
    this.name = "UnavailableError";
  }
}

/** The write-ahead log is over its size limit: the client should retry after `retryAfterSeconds` (HTTP 503). */
export class BackpressureError extends UnavailableError {
  constructor(message: string, retryAfterSeconds: number) {
    super("NO_SPACE", message, retryAfterSeconds);
    this.name = "BackpressureError";
  }
}

/** An answer other than 200, with the JSON error message and headers it goes out with. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly headers: OutgoingHttpHeaders = {},
  ) {
    super(message);
  }
}

/** A value from a client, cut short and without control characters, for a message. */
export function quoted(value: string): string {
  const clean = value.replace(/\p{Cc}/gu, "?");
  return clean.length > 64 ? `${clean.slice(0, 64)}...` : clean;
}

/** A size for a message: in MiB or KiB when it is a whole number of them, else in bytes. */
export function formatBytes(bytes: number): string {
  if (bytes >= 1024 * 1024 && bytes % (1024 * 1024) === 0) return `${bytes / (1024 * 1024)} MiB`;
  if (bytes >= 1024 && bytes % 1024 === 0) return `${bytes / 1024} KiB`;
  return `${bytes} bytes`;
}
