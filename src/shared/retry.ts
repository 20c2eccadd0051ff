import { LakeswapError } from "../model/errors.js";

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

/** AWS error names that mean the credentials were refused, or do not allow the call. */
const DENIED = new Set([
  "AccessDenied", "AccessDeniedException", "AllAccessDisabled", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidSignatureException",
  "UnrecognizedClientException", "InvalidClientTokenId", "ExpiredToken", "ExpiredTokenException", "InvalidToken", "TokenRefreshRequired",
]);

/**
 * The ACCESS_DENIED error (exit 11) for an AWS call that found no credentials
 * or whose credentials were refused or not allowed; undefined for any other
 * error. `call` names the action and the resource, e.g. `s3:PutObject on s3://bucket/key`.
 */
export function accessDenied(call: string, error: unknown): LakeswapError | undefined {
  if (error instanceof LakeswapError || typeof error !== "object" || error === null) return undefined;
  const e = error as { name?: string; Code?: string; code?: string; message?: string; $metadata?: { httpStatusCode?: number } };
  const name = e.name ?? e.Code ?? e.code ?? "";
  const said = (e.message ?? "").trim();
  if (name === "CredentialsProviderError") {
    return new LakeswapError(
      "ACCESS_DENIED",
      `${call}: no AWS credentials were found (${said || name}). Set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or run where an instance or task role is available.`,
      { cause: error },
    );
  }
  if (!DENIED.has(name) && e.$metadata?.httpStatusCode !== 403) return undefined;
  const action = call.split(" ")[0] ?? call;
  return new LakeswapError(
    "ACCESS_DENIED",
    `access denied: ${call} was refused (${name || "403"}${said && said !== name ? `: ${said}` : ""}). Check that the credentials lakeswap runs with ` +
      `(AWS_PROFILE, AWS_ACCESS_KEY_ID, or the instance or task role) are valid and allow ${action} on that resource (README: "IAM actions lakeswap calls").`,
    { cause: error },
  );
}

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
 * jitter, a bounded number of times. The one place every adapter's retries
 * live; it also turns missing or refused credentials into ACCESS_DENIED. `what`
 * names the action and the resource (`s3:GetObject on s3://bucket/key`).
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
      const denied = accessDenied(what, error);
      if (denied) throw denied;
      if (attempt >= attempts || !retryable(error)) {
        // A lakeswap error already says what failed (e.g. which entries of a batch); others are named here.
        if (attempt > 1 && retryable(error) && !(error instanceof LakeswapError)) {
          throw new LakeswapError("STORE_ERROR", `${what} still failed after ${attempts} attempts: ${(error as Error).message}`, { retryable: true, cause: error });
        }
        throw error;
      }
      const ceiling = Math.min(maxMs, baseMs * 2 ** (attempt - 1));
      await new Promise((resolve) => setTimeout(resolve, Math.random() * ceiling));
    }
  }
}
