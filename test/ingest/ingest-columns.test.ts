import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { IngestNamespaceConfig, IngestPipelineConfig } from "../../src/config/ingest-config.js";
import { Collector } from "../../src/ingest/collector.js";
import { Metrics } from "../../src/ingest/metrics.js";
import { compactTables } from "../../src/lake/operations/compact.js";
import { awsBackend, embeddedBackend, type TestBackend } from "../support/lake-fixture.js";
import { readCatalogFile } from "../support/plain-reader.js";
import { ingestPipeline } from "../support/ingest-pipeline.js";

// A namespace's columns grow with its senders. With unknown_fields: keep (the default) the table's last column is
// `extra`, after every declared one: a column added to the namespace's declaration lands before it, and was refused
// ("declare its existing columns first, in their order (..., extra)"), so that no column could ever be added to such a
// namespace. Readers match columns by name: a file written before the column existed reads it as NULL.

type Column = IngestNamespaceConfig["columns"][number];

function pipelineOf(walDir: string, columns: readonly Column[]): IngestPipelineConfig {
  return ingestPipeline(walDir, columns);
}

const ID: Column = { name: "event_id", type: "VARCHAR", nullable: false };
const TS: Column = { name: "ts", type: "TIMESTAMPTZ", nullable: false };
const COUNTRY: Column = { name: "country", type: "VARCHAR", nullable: true };
const SCORE: Column = { name: "score", type: "BIGINT", nullable: true };

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

describe.each([
  ["embedded", embeddedBackend],
  ["aws", awsBackend],
] as const)("a column added to a namespace that keeps unknown fields, on the %s lake", (_name, backend) => {
  it("is added to the table wherever it is declared, and rows written before it read it as NULL, compacted or not", async () => {
    const b: TestBackend = await backend();
    const walDir = await mkdtemp(path.join(os.tmpdir(), "lakeswap-wal-"));
    const lake = await b.open();
    cleanups.push(async () => {
      await lake.close();
      await b.cleanup();
      await rm(walDir, { recursive: true, force: true });
    });
    const land = async (columns: readonly Column[], lines: readonly object[]) => {
      const collector = await Collector.open({ pipeline: pipelineOf(walDir, columns), lake, deadLetterLake: lake, metrics: new Metrics(), log: () => undefined });
      try {
        await collector.accept({ pipeline: "events", namespace: "pageviews", body: Buffer.from(lines.map((l) => JSON.stringify(l)).join("\n")), format: "ndjson" });
        await collector.flush();
      } finally {
        await collector.close();
      }
    };
    await land([ID, TS], [{ event_id: "a", ts: "2026-11-30T01:00:00Z", country: "de" }]);
    // Every file holds every column: read as written (no read of every file's schema first).
    expect((await lake.table("pageviews")).columnsAdded).toBeUndefined();
    // Declared between the others, then one more: both are added; `country` of the first event stays in `extra`.
    await land([ID, COUNTRY, TS], [{ event_id: "b", ts: "2026-11-30T02:00:00Z", country: "fr" }]);
    await land([ID, COUNTRY, TS, SCORE], [{ event_id: "c", ts: "2026-11-30T03:00:00Z", country: "it", score: 7 }]);
    expect(await lake.table("pageviews")).toMatchObject({ columns: [ID, COUNTRY, TS, SCORE, { name: "extra" }].map((c) => ({ name: c.name })), columnsAdded: true });
    const rows = async () =>
      (await lake.query("SELECT event_id, country, CAST(score AS VARCHAR) AS score, extra FROM pageviews ORDER BY event_id")).rows.map((row) => row.map((v) => (v === null ? null : String(v))));
    const expected = [
      ["a", null, null, '{"country":"de"}'],
      ["b", "fr", null, null],
      ["c", "it", "7", null],
    ];
    expect(await rows()).toEqual(expected);
    if (b.name === "local") {
      const lakeDir = (b as TestBackend & { lakeDir: string }).lakeDir;
      expect(await readCatalogFile(lakeDir, "SELECT event_id, country, score FROM lake.pageviews ORDER BY event_id")).toEqual([["a", null, null], ["b", "fr", null], ["c", "it", 7n]]);
    }
    // Its segments were counted under three column sets: checked file by file, then signed again under the table's columns.
    const [report] = await compactTables(lake, "pageviews", { olderThanMs: 0 });
    expect(report).toMatchObject({ status: "compacted", files: 3, filesAfter: 1, reason: expect.stringMatching(/^signed again under the table's columns/) });
    expect(await rows()).toEqual(expected);
    // The day's signature is now that of its rows under the table's columns: compacted again (nothing to do) or landed whole, the same.
    const table = await lake.table("pageviews");
    const [pointer] = await lake.parts.catalog.listPointers(table);
    const scratch = await mkdtemp(path.join(os.tmpdir(), "lakeswap-whole-"));
    cleanups.push(() => rm(scratch, { recursive: true, force: true }));
    const whole = path.join(scratch, "whole.jsonl");
    const all = await lake.query("SELECT event_id, country, CAST(ts AS VARCHAR) AS ts, score, extra FROM pageviews");
    await writeFile(whole, all.rows.map((r) => JSON.stringify(Object.fromEntries(all.columns.map((c, i) => [c, typeof r[i] === "bigint" ? Number(r[i]) : r[i]])))).join("\n"));
    const landed = await lake.landing.land({
      files: [whole],
      format: "jsonl",
      header: false,
      delimiter: ",",
      columns: table.columns.map((c) => ({ name: c.name, type: c.type, nullable: true })),
      partition: [{ key: "day", expression: "strftime(ts, '%Y-%m-%d')" }],
      signatureColumns: table.columns.map((c) => c.name),
    });
    try {
      expect(landed.rowsRejected).toBe(0);
      expect(landed.partitions.map((p) => p.signature)).toEqual([pointer!.signature]);
    } finally {
      await lake.landing.releaseLanding(landed);
    }
  });
});
