import { InvalidInputError, LakeswapError, errorMessage } from "../model/errors.js";
import { isTransient } from "./retry.js";

/** How an adaptive limit starts, how far it may grow, and how it retries. */
export interface AdaptiveLimitOptions {
  /** What the limit guards, for messages (e.g. `S3 uploads`). */
  readonly name: string;
  /** Calls in flight at first (a whole number, at least 1). */
  readonly initial: number;
  /** The most calls in flight it ever allows (at least `initial`). */
  readonly max: number;
  /** Attempts per call in all, the first included, before a throttled or transient failure is thrown (default 8). */
  readonly maxAttempts?: number;
  /** The first backoff pause; it doubles every attempt, with full jitter, up to 20 s (default 100 ms). */
  readonly baseDelayMs?: number;
  /** Waits between attempts (default a timer; tests hand in a fake). */
  readonly sleep?: (ms: number) => Promise<void>;
  /** Told every change of the limit, for logs and metrics (default none). */
  readonly onChange?: (current: number, change: "grew" | "halved") => void;
}

/** The longest backoff pause between two attempts. */
const MAX_DELAY_MS = 20_000;

/**
 * Error names AWS services use when a caller goes too fast: S3 SlowDown, Glue
 * and most JSON services ThrottlingException, EC2 RequestLimitExceeded, and
 * the rest of the AWS SDK's own list of throttling codes.
 */
const THROTTLING = new Set([
  "SlowDown", "Throttling", "ThrottlingException", "ThrottledException", "TooManyRequestsException", "RequestLimitExceeded",
  "RequestThrottled", "RequestThrottledException", "ProvisionedThroughputExceededException", "BandwidthLimitExceeded",
  "EC2ThrottledException", "LimitExceededException", "PriorRequestNotComplete", "TransactionInProgressException",
]);

/**
 * True when an AWS call was refused because the caller goes too fast: a
 * throttling error name, HTTP 429 or 503 (S3 answers SlowDown and
 * ServiceUnavailable with 503), or the SDK's own throttling trait.
 */
export function isThrottling(error: unknown): boolean {
  if (typeof error !== "object" || error === null) return false;
  const e = error as { name?: string; Code?: string; code?: string; $metadata?: { httpStatusCode?: number }; $retryable?: { throttling?: boolean } };
  if (THROTTLING.has(e.name ?? "") || THROTTLING.has(e.Code ?? "") || THROTTLING.has(e.code ?? "")) return true;
  if (e.$retryable?.throttling === true) return true;
  const status = e.$metadata?.httpStatusCode;
  return status === 429 || status === 503;
}

/**
 * A concurrency limit that tunes itself (AIMD), shared by every call to one
 * service: it starts at `initial`, grows by one after `current` successes in
 * a row while callers are waiting for it (up to `max`), and halves (not below
 * 1) when a call is throttled. A throttled call gives its slot back, waits
 * (exponential backoff with full jitter) and runs again, up to `maxAttempts`
 * attempts; other transient failures (5xx, dropped connections) are retried
 * the same way without halving. Give it clients whose own SDK retries are off
 * (`maxAttempts: 1`), or it never sees the throttling the SDK absorbed.
 */
export class AdaptiveLimit {
  readonly name: string;
  readonly max: number;
  private limit: number;
  private active = 0;
  private throttledAttempts = 0;
  /** Successes in a row while calls were waiting for a slot. */
  private streak = 0;
  /** How many times the limit was halved: an attempt started before the last halving does not halve it again. */
  private decreases = 0;
  private readonly waiting: (() => void)[] = [];
  private readonly maxAttempts: number;
  private readonly baseDelayMs: number;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly onChange: (current: number, change: "grew" | "halved") => void;

  constructor(options: AdaptiveLimitOptions) {
    const whole = (value: number, what: string, min: number): number => {
      if (!Number.isInteger(value) || value < min) {
        throw new InvalidInputError(`${options.name}: ${what} ${String(value)} is not allowed: use a whole number of at least ${min}`);
      }
      return value;
    };
    this.name = options.name;
    this.limit = whole(options.initial, "the initial concurrency", 1);
    this.max = whole(options.max, "the maximum concurrency", options.initial);
    this.maxAttempts = whole(options.maxAttempts ?? 8, "maxAttempts", 1);
    this.baseDelayMs = options.baseDelayMs ?? 100;
    this.sleep = options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
    this.onChange = options.onChange ?? (() => undefined);
  }

  /** The current limit: how many calls may be in flight. */
  get current(): number {
    return this.limit;
  }

  /** Slots taken now: calls running or just handed a slot (a call waiting out a backoff pause holds none). */
  get inFlight(): number {
    return this.active;
  }

  /** Throttled attempts so far. */
  get throttled(): number {
    return this.throttledAttempts;
  }

  /**
   * Runs `work` once a slot is free; a throttled or transient failure is
   * retried (the slot is given back during the pause), any other is thrown
   * as it is. `work` must start a new request on every call.
   */
  async run<T>(work: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt += 1) {
      const slot = await this.acquire();
      let outcome: { value: T } | { failure: unknown };
      try {
        outcome = { value: await work() };
      } catch (failure) {
        outcome = { failure };
      }
      const demand = slot.waited || this.waiting.length > 0;
      this.release();
      if ("value" in outcome) {
        this.succeeded(slot.epoch, demand);
        return outcome.value;
      }
      const failure = outcome.failure;
      const throttled = isThrottling(failure);
      if (throttled) this.wasThrottled(slot.epoch);
      if (!throttled && !isTransient(failure)) throw failure;
      if (attempt >= this.maxAttempts) {
        throw new LakeswapError(
          "STORE_ERROR",
          `${this.name}: a call was still ${throttled ? "throttled" : "failing"} after ${attempt} attempts (the limit is now ${this.limit} in flight): ${errorMessage(failure)}`,
          { retryable: true, cause: failure },
        );
      }
      const ceiling = Math.min(MAX_DELAY_MS, this.baseDelayMs * 2 ** (attempt - 1));
      await this.sleep(Math.random() * ceiling);
    }
  }

  /** Takes a slot, in arrival order; `waited` says whether the limit held this call back. */
  private async acquire(): Promise<{ epoch: number; waited: boolean }> {
    if (this.active < this.limit && this.waiting.length === 0) {
      this.active += 1;
      return { epoch: this.decreases, waited: false };
    }
    // The slot is counted by whoever hands it over (release or growth), so none is taken twice.
    await new Promise<void>((resolve) => this.waiting.push(resolve));
    return { epoch: this.decreases, waited: true };
  }

  private release(): void {
    this.active -= 1;
    this.handOver();
  }

  private handOver(): void {
    while (this.active < this.limit && this.waiting.length > 0) {
      this.active += 1;
      this.waiting.shift()?.();
    }
  }

  /** `demand`: the call waited for its slot, or others wait now. */
  private succeeded(epoch: number, demand: boolean): void {
    // Growing a limit that nothing presses against would only let a later burst in unchecked; and a call started
    // before the last halving says nothing about the halved limit.
    if (!demand || epoch !== this.decreases) return;
    this.streak += 1;
    if (this.streak >= this.limit && this.limit < this.max) {
      this.limit += 1;
      this.streak = 0;
      this.onChange(this.limit, "grew");
      this.handOver();
    }
  }

  private wasThrottled(epoch: number): void {
    this.throttledAttempts += 1;
    this.streak = 0;
    // Calls that were already in flight when the limit was halved report the same congestion: halve once for it.
    if (epoch !== this.decreases) return;
    this.decreases += 1;
    const halved = Math.max(1, Math.floor(this.limit / 2));
    if (halved === this.limit) return;
    this.limit = halved;
    this.onChange(this.limit, "halved");
  }
}

/** The upload limit from UPLOAD_CONCURRENCY (initial, default 16) and UPLOAD_CONCURRENCY_MAX (default 64, at least initial). */
export function uploadLimitFromEnv(env: NodeJS.ProcessEnv): AdaptiveLimit {
  return limitFromEnv(env, "S3 uploads", { variable: "UPLOAD_CONCURRENCY", fallback: 16 }, { variable: "UPLOAD_CONCURRENCY_MAX", fallback: 64 });
}

/** The Glue control-plane limit from ATHENA_GLUE_CONTROL_PLANE_CONCURRENCY (default 2) and ATHENA_GLUE_CP_MAX (default 8). */
export function glueLimitFromEnv(env: NodeJS.ProcessEnv): AdaptiveLimit {
  return limitFromEnv(
    env,
    "Glue control-plane calls",
    { variable: "ATHENA_GLUE_CONTROL_PLANE_CONCURRENCY", fallback: 2 },
    { variable: "ATHENA_GLUE_CP_MAX", fallback: 8 },
  );
}

interface EnvSetting {
  readonly variable: string;
  readonly fallback: number;
}

function limitFromEnv(env: NodeJS.ProcessEnv, name: string, initialSetting: EnvSetting, maxSetting: EnvSetting): AdaptiveLimit {
  const initial = wholeFromEnv(env, initialSetting);
  const maxText = env[maxSetting.variable]?.trim();
  // An initial value above the default maximum raises the maximum with it, unless a maximum is set.
  const max = maxText ? wholeFromEnv(env, maxSetting) : Math.max(maxSetting.fallback, initial);
  if (max < initial) {
    throw new InvalidInputError(
      `${maxSetting.variable} '${maxText}' is below ${initialSetting.variable} '${initial}': the limit starts at ${initialSetting.variable} and grows up to ` +
        `${maxSetting.variable}; set ${maxSetting.variable} to at least ${initial}, or lower ${initialSetting.variable}`,
    );
  }
  return new AdaptiveLimit({ name, initial, max });
}

function wholeFromEnv(env: NodeJS.ProcessEnv, setting: EnvSetting): number {
  const text = env[setting.variable]?.trim();
  if (!text) return setting.fallback;
  const value = /^\d+$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new InvalidInputError(
      `${setting.variable} '${env[setting.variable]}' is not a number of concurrent calls: set it to a whole number of at least 1 (default ${setting.fallback}), or unset it`,
    );
  }
  return value;
}
