import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { DuckDbCatalogFile } from "../../src/catalog/duckdb-catalog-file.js";
import { Collector } from "../../src/ingest/collector.js";
import { Metrics } from "../../src/ingest/metrics.js";
import { ingestPipeline } from "../support/ingest-pipeline.js";
import { embeddedBackend } from "../support/lake-fixture.js";
import { readCatalogFile } from "../support/plain-reader.js";

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** One request's body: `count` events of three days, ids from `from`. */
function events(from: number, count: number): Buffer {
  const lines = Array.from({ length: count }, (_, k) => JSON.stringify({ event_id: `e${from + k}`, n: k, ts: `2026-11-0${1 + ((from + k) % 3)}T12:00:00Z` }));
  return Buffer.from(lines.join("\n"));
}

describe("a collector landing a backlog of segments, read through lake.duckdb", () => {
  it("rewrites the catalog file about once a second and at the end of the round, not once a segment; a plain reader sees whole requests only, never fewer rows, and every row once the round ends", async () => {
    const backend = await embeddedBackend();
    const walDir = await mkdtemp(path.join(os.tmpdir(), "lakeswap-wal-"));
    const lake = await backend.open();
    const columns = [
      { name: "event_id", type: "VARCHAR", nullable: false },
      { name: "n", type: "BIGINT", nullable: true },
      { name: "ts", type: "TIMESTAMPTZ", nullable: false },
    ];
    // Segments of a few requests each, as a collector that was down (or slower than its clients) finds them.
    const pipeline = ingestPipeline(walDir, columns, { wal: { segmentMaxBytes: 20_000 } });
    const collector = await Collector.open({ pipeline, lake, deadLetterLake: lake, metrics: new Metrics(), log: () => undefined });
    cleanups.push(async () => {
      await collector.close().catch(() => undefined);
      await lake.close();
      await backend.cleanup();
      await rm(walDir, { recursive: true, force: true });
    });
    const PER_REQUEST = 100;
    const REQUESTS = 150;
    const post = (request: number) => collector.accept({ pipeline: "events", namespace: "pageviews", body: events(request * PER_REQUEST, PER_REQUEST), format: "ndjson" });
    await post(0);
    await collector.flush();
    for (let request = 1; request < REQUESTS; request += 1) await post(request);

    const update = DuckDbCatalogFile.prototype.update;
    const rewrites: number[] = [];
    const spy = vi.spyOn(DuckDbCatalogFile.prototype, "update").mockImplementation(function (this: DuckDbCatalogFile, ...args) {
      rewrites.push(Date.now());
      return update.apply(this, args);
    });
    cleanups.push(async () => spy.mockRestore());
    const counts: number[] = [];
    let draining = true;
    const reader = (async () => {
      while (draining) counts.push(Number((await readCatalogFile(backend.lakeDir, "SELECT count(*) FROM lake.pageviews"))[0]?.[0]));
    })();
    const started = Date.now();
    const landed = await collector.flush();
    const drainMs = Date.now() - started;
    draining = false;
    await reader;

    expect(landed.length, "segments landed by the round").toBeGreaterThanOrEqual(30);
    expect(rewrites.length, `rewrites of lake.duckdb for ${landed.length} segments in ${drainMs} ms`).toBeLessThanOrEqual(Math.ceil(drainMs / 1000) + 1);
    // Not once a segment (the bound above already says how much fewer where segments land faster than one a second: a
    // third of them on an idle machine; a loaded one lands fewer a second, so this bound is the one that holds there).
    expect(rewrites.length).toBeLessThan(landed.length);
    expect(counts.length).toBeGreaterThan(0);
    expect(counts.filter((count) => count % PER_REQUEST !== 0), "reads that saw part of a request").toEqual([]);
    expect(counts.filter((count, i) => i > 0 && count < counts[i - 1]!), "reads that saw fewer rows than the one before").toEqual([]);
    expect(Number((await readCatalogFile(backend.lakeDir, "SELECT count(*) FROM lake.pageviews"))[0]?.[0])).toBe(REQUESTS * PER_REQUEST);
  });
});
