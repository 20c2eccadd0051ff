import { LakeswapError } from "./errors.js";

/** How a call is retried. */
export interface RetryPolicy {
  /** Attempts in all, the first included (default 6). */
  readonly attempts?: number;
  /** The first pause; it doubles every attempt, with full jitter (default 100 ms). */
  readonly baseMs?: number;
  /** The longest pause (default 5 s). */
  readonly maxMs?: number;
  /** Whether an error may go away on its own (throttling, timeouts, 5xx). */
  readonly retryable?: (error: unknown) => boolean;
}

const TRANSIENT = new Set([
  "ThrottlingException", "Throttling", "TooManyRequestsException", "RequestLimitExceeded", "SlowDown",
  "ServiceUnavailable", "InternalServerException", "InternalFailure", "InternalError", "RequestTimeout",
  "TimeoutError", "ECONNRESET", "EPIPE", "ETIMEDOUT", "ConcurrentModificationException",
]);

/** True for errors AWS services return when a retry may succeed: throttling, 5xx, dropped connections. */
export function isTransient(error: unknown): boolean {
  if (error instanceof LakeswapError) return error.retryable;
  const e = error as { name?: string; code?: string; $metadata?: { httpStatusCode?: number }; $retryable?: unknown };
  if (e.$retryable) return true;
  if (TRANSIENT.has(e.name ?? "") || TRANSIENT.has(e.code ?? "")) return true;
  const status = e.$metadata?.httpStatusCode ?? 0;
  return status === 429 || status >= 500;
}

/**
 * Runs `call`, retrying transient failures with exponential backoff and full
 * jitter, a bounded number of times. The one place every adapter's retries live.
 */
export async function withRetry<T>(what: string, call: () => Promise<T>, policy: RetryPolicy = {}): Promise<T> {
  const attempts = policy.attempts ?? 6;
  const baseMs = policy.baseMs ?? 100;
  const maxMs = policy.maxMs ?? 5000;
  const retryable = policy.retryable ?? isTransient;
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await call();
    } catch (error) {
      if (attempt >= attempts || !retryable(error)) {
        if (attempt > 1 && retryable(error)) {
          throw new LakeswapError("STORE_ERROR", `${what} still failed after ${attempts} attempts: ${(error as Error).message}`, { retryable: true, cause: error });
        }
        throw error;
      }
      const ceiling = Math.min(maxMs, baseMs * 2 ** (attempt - 1));
      await new Promise((resolve) => setTimeout(resolve, Math.random() * ceiling));
    }
  }
}
