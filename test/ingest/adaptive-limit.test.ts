import { CreateDatabaseCommand, GetDatabaseCommand, GlueClient } from "@aws-sdk/client-glue";
import { setImmediate as tick } from "node:timers/promises";
import { afterEach, describe, expect, it } from "vitest";
import { InvalidInputError, LakeswapError } from "../../src/model/errors.js";
import { AdaptiveLimit, glueLimitFromEnv, isThrottling, uploadLimitFromEnv } from "../../src/shared/adaptive-limit.js";
import { startGlueEmulator, type GlueEmulator } from "../support/glue-emulator.js";

/** An AWS SDK v3 error as S3 throws it for SlowDown: name, and the HTTP status in $metadata. */
const slowDown = () => Object.assign(new Error("Please reduce your request rate."), { name: "SlowDown", $metadata: { httpStatusCode: 503 } });

/** A sleep that returns at once and remembers what it was asked to wait. */
function fakeSleep(): { sleep: (ms: number) => Promise<void>; waits: number[] } {
  const waits: number[] = [];
  return { waits, sleep: async (ms) => void waits.push(ms) };
}

/** Starts `count` calls at once; each checks the limit, then yields a few turns of the event loop. */
async function burst(limit: AdaptiveLimit, count: number, seen: { peak: number; limits: number[] }): Promise<void> {
  let running = 0;
  await Promise.all(
    Array.from({ length: count }, () =>
      limit.run(async () => {
        running += 1;
        seen.peak = Math.max(seen.peak, running);
        expect(running).toBeLessThanOrEqual(limit.inFlight);
        expect(limit.inFlight).toBeLessThanOrEqual(limit.current);
        seen.limits.push(limit.current);
        for (let i = 0; i < 3; i += 1) await tick();
        running -= 1;
      }),
    ),
  );
}

describe("AdaptiveLimit", () => {
  it("never has more than `current` calls in flight, and fills the limit", async () => {
    const limit = new AdaptiveLimit({ name: "test", initial: 3, max: 3 });
    const seen = { peak: 0, limits: [] as number[] };
    await burst(limit, 40, seen);
    expect(seen.peak).toBe(3);
    expect(limit.inFlight).toBe(0);
    expect(limit.current).toBe(3);
  });

  it("grows by one after `current` successes in a row while calls wait for it, up to max", async () => {
    const limit = new AdaptiveLimit({ name: "test", initial: 2, max: 5 });
    const seen = { peak: 0, limits: [] as number[] };
    await burst(limit, 200, seen);
    // 2 -> 3 after 2 successes, -> 4 after 3 more, -> 5 after 4 more; never past max.
    expect([...new Set(seen.limits)]).toEqual([2, 3, 4, 5]);
    expect(limit.current).toBe(5);
    expect(seen.peak).toBe(5);
  });

  it("does not grow while nothing waits for it", async () => {
    const limit = new AdaptiveLimit({ name: "test", initial: 2, max: 8 });
    for (let i = 0; i < 50; i += 1) await limit.run(async () => i);
    expect(limit.current).toBe(2);
  });

  it("halves on a throttled call and retries it after a jittered pause", async () => {
    const { sleep, waits } = fakeSleep();
    const limit = new AdaptiveLimit({ name: "test", initial: 8, max: 8, baseDelayMs: 50, sleep });
    let calls = 0;
    const value = await limit.run(async () => {
      calls += 1;
      if (calls === 1) throw slowDown();
      return "done";
    });
    expect(value).toBe("done");
    expect(calls).toBe(2);
    expect(limit.current).toBe(4);
    expect(limit.throttled).toBe(1);
    expect(waits).toHaveLength(1);
    expect(waits[0]).toBeGreaterThanOrEqual(0);
    expect(waits[0]).toBeLessThan(50);
  });

  it("halves once when the calls in flight are throttled together", async () => {
    const { sleep } = fakeSleep();
    const limit = new AdaptiveLimit({ name: "test", initial: 8, max: 8, sleep });
    const failed = new Set<number>();
    const limitsOnRetry: number[] = [];
    await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        limit.run(async () => {
          if (failed.has(i)) {
            limitsOnRetry.push(limit.current);
            return;
          }
          await tick();
          failed.add(i);
          throw slowDown();
        }),
      ),
    );
    expect(limit.throttled).toBe(8);
    // One congestion event: 8 -> 4, not 8 -> 1 (the retries may grow it again after that).
    expect(Math.min(...limitsOnRetry)).toBe(4);
  });

  it("gives up after maxAttempts with backoff doubling each time, halving down to 1", async () => {
    const { sleep, waits } = fakeSleep();
    const limit = new AdaptiveLimit({ name: "S3 uploads", initial: 8, max: 16, maxAttempts: 5, baseDelayMs: 100, sleep });
    let calls = 0;
    const error = await limit
      .run(async () => {
        calls += 1;
        throw Object.assign(new Error("Rate exceeded"), { name: "ThrottlingException", $metadata: { httpStatusCode: 400 } });
      })
      .catch((e: unknown) => e);
    expect(calls).toBe(5);
    expect(error).toBeInstanceOf(LakeswapError);
    expect((error as LakeswapError).retryable).toBe(true);
    expect((error as Error).message).toBe("S3 uploads: a call was still throttled after 5 attempts (the limit is now 1 in flight): Rate exceeded");
    expect(limit.current).toBe(1);
    expect(limit.throttled).toBe(5);
    expect(waits).toHaveLength(4);
    waits.forEach((ms, i) => expect(ms).toBeLessThan(100 * 2 ** i));
  });

  it("retries other transient failures without halving, and throws any other error at once", async () => {
    const { sleep, waits } = fakeSleep();
    const limit = new AdaptiveLimit({ name: "test", initial: 4, max: 4, sleep });
    let calls = 0;
    await limit.run(async () => {
      calls += 1;
      if (calls === 1) throw Object.assign(new Error("We encountered an internal error"), { name: "InternalError", $metadata: { httpStatusCode: 500 } });
    });
    expect(calls).toBe(2);
    expect(limit.current).toBe(4);
    expect(limit.throttled).toBe(0);

    const invalid = Object.assign(new Error("bad input"), { name: "InvalidInputException", $metadata: { httpStatusCode: 400 } });
    await expect(limit.run(async () => Promise.reject(invalid))).rejects.toBe(invalid);
    expect(waits).toHaveLength(1);
    expect(limit.inFlight).toBe(0);
  });

  it("gives its slot back while a throttled call waits to retry", async () => {
    let wake: () => void = () => undefined;
    const limit = new AdaptiveLimit({ name: "test", initial: 2, max: 2, sleep: () => new Promise<void>((resolve) => (wake = resolve)) });
    const order: string[] = [];
    let first = true;
    const throttled = limit.run(async () => {
      if (first) {
        first = false;
        throw slowDown();
      }
      order.push("throttled call done");
    });
    await tick();
    // The limit is now 1 and the throttled call sleeps: another call gets the slot.
    expect(limit.current).toBe(1);
    expect(limit.inFlight).toBe(0);
    await limit.run(async () => void order.push("other call done"));
    wake();
    await throttled;
    expect(order).toEqual(["other call done", "throttled call done"]);
  });

  it("knows AWS throttling errors by name, status and SDK trait", () => {
    const error = (name: string, status: number, extra: object = {}) => Object.assign(new Error(name), { name, $metadata: { httpStatusCode: status }, ...extra });
    for (const throttled of [
      error("SlowDown", 503), error("ServiceUnavailable", 503), error("ThrottlingException", 400), error("TooManyRequestsException", 429),
      error("RequestLimitExceeded", 503), error("Throttling", 400), error("Anything", 400, { $retryable: { throttling: true } }),
    ]) {
      expect(isThrottling(throttled), throttled.name).toBe(true);
    }
    for (const other of [error("AccessDenied", 403), error("InternalError", 500), error("PreconditionFailed", 412), error("ValidationException", 400)]) {
      expect(isThrottling(other), other.name).toBe(false);
    }
    expect(isThrottling(undefined)).toBe(false);
  });

  it("refuses a limit that cannot run anything", () => {
    expect(() => new AdaptiveLimit({ name: "S3 uploads", initial: 0, max: 4 })).toThrow("S3 uploads: the initial concurrency 0 is not allowed: use a whole number of at least 1");
    expect(() => new AdaptiveLimit({ name: "S3 uploads", initial: 4, max: 2 })).toThrow("S3 uploads: the maximum concurrency 2 is not allowed: use a whole number of at least 4");
  });
});

describe("limits from the environment", () => {
  it("starts uploads at 16 (up to 64) and Glue calls at 2 (up to 8) by default", () => {
    const uploads = uploadLimitFromEnv({});
    expect([uploads.current, uploads.max]).toEqual([16, 64]);
    const glue = glueLimitFromEnv({});
    expect([glue.current, glue.max]).toEqual([2, 8]);
    expect([uploadLimitFromEnv({ UPLOAD_CONCURRENCY: "", UPLOAD_CONCURRENCY_MAX: " " }).current]).toEqual([16]);
  });

  it("reads UPLOAD_CONCURRENCY(_MAX) and ATHENA_GLUE_CONTROL_PLANE_CONCURRENCY / ATHENA_GLUE_CP_MAX", () => {
    const uploads = uploadLimitFromEnv({ UPLOAD_CONCURRENCY: "4", UPLOAD_CONCURRENCY_MAX: "10" });
    expect([uploads.current, uploads.max]).toEqual([4, 10]);
    // A start above the default maximum raises the maximum with it.
    const wide = uploadLimitFromEnv({ UPLOAD_CONCURRENCY: "100" });
    expect([wide.current, wide.max]).toEqual([100, 100]);
    const glue = glueLimitFromEnv({ ATHENA_GLUE_CONTROL_PLANE_CONCURRENCY: "1", ATHENA_GLUE_CP_MAX: "3" });
    expect([glue.current, glue.max]).toEqual([1, 3]);
  });

  it("names the variable, the value and the fix for a bad value", () => {
    for (const bad of ["abc", "0", "2.5", "-3", "1e3"]) {
      expect(() => uploadLimitFromEnv({ UPLOAD_CONCURRENCY: bad })).toThrow(InvalidInputError);
      expect(() => uploadLimitFromEnv({ UPLOAD_CONCURRENCY: bad })).toThrow(
        `UPLOAD_CONCURRENCY '${bad}' is not a number of concurrent calls: set it to a whole number of at least 1 (default 16), or unset it`,
      );
    }
    expect(() => glueLimitFromEnv({ ATHENA_GLUE_CP_MAX: "many" })).toThrow(
      "ATHENA_GLUE_CP_MAX 'many' is not a number of concurrent calls: set it to a whole number of at least 1 (default 8), or unset it",
    );
    expect(() => glueLimitFromEnv({ ATHENA_GLUE_CP_MAX: "1" })).toThrow(
      "ATHENA_GLUE_CP_MAX '1' is below ATHENA_GLUE_CONTROL_PLANE_CONCURRENCY '2': the limit starts at ATHENA_GLUE_CONTROL_PLANE_CONCURRENCY and grows up to " +
        "ATHENA_GLUE_CP_MAX; set ATHENA_GLUE_CP_MAX to at least 2, or lower ATHENA_GLUE_CONTROL_PLANE_CONCURRENCY",
    );
    expect(() => uploadLimitFromEnv({ UPLOAD_CONCURRENCY: "32", UPLOAD_CONCURRENCY_MAX: "16" })).toThrow(/UPLOAD_CONCURRENCY_MAX '16' is below UPLOAD_CONCURRENCY '32'/);
  });
});

describe("AdaptiveLimit around Glue", () => {
  let glue: GlueEmulator | undefined;
  afterEach(async () => glue?.close());

  it("halves the Glue control-plane limit on ThrottlingException and the call succeeds on retry", async () => {
    glue = await startGlueEmulator();
    // SDK retries off, as lakeswap builds its clients: the limit must see the throttling to slow down.
    const client = new GlueClient({ ...glue.clientConfig, maxAttempts: 1 });
    await client.send(new CreateDatabaseCommand({ DatabaseInput: { Name: "events" } }));

    // What the SDK throws when Glue throttles: name ThrottlingException, HTTP 400.
    glue.failNext("GetDatabase", { error: "ThrottlingException" });
    const raw = await client.send(new GetDatabaseCommand({ Name: "events" })).catch((e: unknown) => e);
    expect(raw).toMatchObject({ name: "ThrottlingException", message: "Rate exceeded", $metadata: { httpStatusCode: 400 } });

    const limit = glueLimitFromEnv({});
    expect(limit.current).toBe(2);
    glue.failNext("GetDatabase", { error: "ThrottlingException", times: 2 });
    const before = glue.callCount("GetDatabase");
    const answer = await limit.run(() => client.send(new GetDatabaseCommand({ Name: "events" })));
    expect(answer.Database?.Name).toBe("events");
    expect(glue.callCount("GetDatabase") - before).toBe(3);
    expect(glue.calls.filter((c) => c.operation === "GetDatabase").map((c) => c.error ?? "ok").slice(-3)).toEqual(["ThrottlingException", "ThrottlingException", "ok"]);
    expect(limit.throttled).toBe(2);
    expect(limit.current).toBe(1);
  });
});
