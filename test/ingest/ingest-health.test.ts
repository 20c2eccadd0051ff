import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { IngestPipelineConfig } from "../../src/config/ingest-config.js";
import { startIngestServer } from "../../src/ingest/http-server.js";
import { BackpressureError } from "../../src/ingest/http-errors.js";
import { Collector, type CollectorOptions } from "../../src/ingest/collector.js";
import { Metrics } from "../../src/ingest/metrics.js";
import { embeddedBackend } from "../support/lake-fixture.js";
import { ingestPipeline } from "../support/ingest-pipeline.js";

const PARTITION = ["%Y", "%m", "%d"].map((format, i) => ({ key: ["p_year", "p_month", "p_day"][i]!, expression: `strftime(ts, '${format}')` }));

function pipelineOf(walDir: string, wal: Partial<IngestPipelineConfig["wal"]> = {}): IngestPipelineConfig {
  const columns = [
    { name: "id", type: "BIGINT", nullable: false },
    { name: "pad", type: "VARCHAR", nullable: true },
    { name: "ts", type: "TIMESTAMPTZ", nullable: false },
  ];
  return ingestPipeline(walDir, columns, { partition: PARTITION, wal });
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  delete process.env.LAKESWAP_FAULT;
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function setup(wal: Partial<IngestPipelineConfig["wal"]> = {}, options: Pick<CollectorOptions, "unhealthyAfterFailingMs"> = {}): Promise<Collector> {
  const backend = await embeddedBackend();
  const walDir = await mkdtemp(path.join(os.tmpdir(), "lakeswap-wal-"));
  const lake = await backend.open();
  const service = await Collector.open({ pipeline: pipelineOf(walDir, wal), lake, deadLetterLake: lake, metrics: new Metrics(), log: () => undefined, ...options });
  cleanups.push(async () => {
    await service.close().catch(() => undefined);
    await lake.close();
    await backend.cleanup();
    await rm(walDir, { recursive: true, force: true });
  });
  return service;
}

function events(from: number, count: number): Buffer {
  return Buffer.from(Array.from({ length: count }, (_, i) => JSON.stringify({ id: from + i, pad: "x".repeat(200), ts: "2026-11-30T01:00:00Z" })).join("\n"));
}

const post = (service: Collector, from: number, count: number) => service.accept({ pipeline: "events", namespace: "pageviews", body: events(from, count), format: "ndjson" });

describe("the collector's readiness", () => {
  // /healthz answered 200 while landing kept failing (a full lake disk showed only in lastError).
  it("answers /healthz 503 with the cause once landing has failed for longer than its bound, and 200 again once it lands", async () => {
    const service = await setup({}, { unhealthyAfterFailingMs: 0 });
    const server = await startIngestServer({ handler: service, metrics: new Metrics(), port: 0 });
    cleanups.push(() => server.close());
    await post(service, 0, 10);
    process.env.LAKESWAP_FAULT = "ingest-after-upload:error";
    await expect(service.flush()).rejects.toThrow("fault injected at ingest-after-upload");
    const failing = await fetch(`${server.url}/healthz`);
    expect(failing.status).toBe(503);
    const { detail } = (await failing.json()) as { detail: { landingFailing: { since: string; failures: number; cause: string } } };
    expect(detail.landingFailing).toEqual({ since: expect.any(String), failures: 1, cause: expect.stringContaining("fault injected at ingest-after-upload") });
    delete process.env.LAKESWAP_FAULT;
    await service.flush();
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
  });

  it("stays ready while landing has failed for less than the bound (2 minutes by default)", async () => {
    const service = await setup();
    await post(service, 0, 10);
    process.env.LAKESWAP_FAULT = "ingest-after-upload:error";
    await expect(service.flush()).rejects.toThrow("fault injected");
    expect(service.health()).toMatchObject({ ok: true, detail: { lastError: expect.stringContaining("fault injected") } });
  });
});

describe("backpressure's Retry-After", () => {
  // It was segment_max_age (30 s and more) although the backlog cleared in about a second.
  it("is the time landing takes to bring the log under its limit at the drain rate measured, or until the next attempt while landing fails", async () => {
    const service = await setup({ maxBytes: 64 * 1024, segmentMaxBytes: 64 * 1024, segmentMaxAgeMs: 60_000 });
    await post(service, 0, 200);
    await service.flush();
    let from = 1000;
    while (!service.health().detail.walBytes || (service.health().detail.walBytes as number) < 64 * 1024) await post(service, (from += 100), 100);
    const refused = await post(service, 0, 1).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(BackpressureError);
    expect((refused as BackpressureError).retryAfterSeconds).toBe(1);

    // While landing fails: until its next attempt (1 s after the first failure, doubling).
    process.env.LAKESWAP_FAULT = "ingest-after-upload:error";
    await expect(service.flush()).rejects.toThrow("fault injected");
    await expect(service.flush()).rejects.toThrow("fault injected");
    const again = await post(service, 0, 1).catch((error: unknown) => error);
    expect((again as BackpressureError).retryAfterSeconds).toBe(2);
  });
});

describe("sealing while a landing runs", () => {
  // Sealing was queued behind the landing in progress, so segment_max_age was not honoured: at 20,000 events/s with
  // segment_max_age: 2s, time from 200 to queryable was p50 8.3 s / p99 15.6 s.
  it("seals a segment at segment_max_age although the landing of the one before it has not finished, and lands both", async () => {
    const backend = await embeddedBackend();
    const walDir = await mkdtemp(path.join(os.tmpdir(), "lakeswap-wal-"));
    const real = await backend.open();
    // The lake, with its registration of segments held until the test lets it go (a slow landing, e.g. S3 + Glue).
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let entered!: () => void;
    const registering = new Promise<void>((resolve) => (entered = resolve));
    // A segment is registered under its table's lease (lake/operations/register-segment.ts): the lease is held up.
    const parts = new Proxy(real.parts, {
      get(target, property, receiver) {
        const value = Reflect.get(target, property, receiver) as unknown;
        if (property !== "withLease" || typeof value !== "function") return typeof value === "function" ? value.bind(target) : value;
        return async (...args: unknown[]) => {
          entered();
          await released;
          return (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
        };
      },
    });
    const lake = new Proxy(real, {
      get(target, property, receiver) {
        if (property === "parts") return parts;
        const value = Reflect.get(target, property, receiver) as unknown;
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const service = await Collector.open({ pipeline: pipelineOf(walDir, { segmentMaxAgeMs: 200 }), lake, deadLetterLake: lake, metrics: new Metrics(), log: () => undefined });
    cleanups.push(async () => {
      release();
      await service.close().catch(() => undefined);
      await real.close();
      await backend.cleanup();
      await rm(walDir, { recursive: true, force: true });
    });
    service.start(20);
    await post(service, 0, 10);
    await registering;
    // The first segment is landing (held); the second is sealed at its age all the same.
    await post(service, 100, 10);
    await vi.waitFor(() => expect(service.health().detail.sealedSegments).toBe(2), { timeout: 5000, interval: 20 });
    release();
    await vi.waitFor(() => expect(service.counts.written).toBe(20), { timeout: 10_000, interval: 20 });
    expect(service.health().detail.sealedSegments).toBe(0);
  });
});
