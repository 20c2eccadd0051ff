import { expect, it } from "vitest";
import type { Lake } from "../../src/lake/lake.js";
import { defineTable } from "../../src/model/table.js";
import { parsePartition } from "../../src/model/partition.js";
import type { Child } from "../support/crash-kit.js";
import { GLOB_RACE, catalogReaders, type CatalogRead } from "../support/catalog-readers.js";
import { tempLakes } from "../support/temp-lake.js";

// Issue 29 item 5, the reader half: a plain DuckDB process that opens lake.duckdb read-only in a loop while 100 syncs
// each replace every partition of two tables sees 0 errors and 0 reads mixing two syncs, where a reader of the same
// tables through the folders' glob does not (its failures and mixed reads are counted and reported, not asserted:
// how many hit a swap depends on the machine's timing).

const openLake = tempLakes();
const TABLES = ["orders", "refunds"] as const;
const DAYS = ["2026-11-01", "2026-11-02"];
const ROWS = 5;
const SYNCS = 100;

const readers = catalogReaders();

/** One sync: every partition of both tables replaced with ROWS rows marked `marker`, under both leases, as a pipeline sync does. */
async function sync(lake: Lake, marker: number): Promise<void> {
  await lake.write([...TABLES], `sync ${marker}`, async (writer) => {
    for (const table of TABLES) {
      const items = DAYS.map((day) => ({ partition: parsePartition(`day=${day}`, ["day"]), select: `SELECT range AS id, ${marker} AS marker FROM range(${ROWS})` }));
      const outcomes = await writer.replaceBatch(table, items, { build: { kind: "select", landed: true }, allowEmpty: false });
      for (const outcome of outcomes) if (outcome.error !== undefined) throw outcome.error;
    }
  });
}

/** Whole: every row of both tables, all from one sync. */
const whole = (read: CatalogRead): boolean => read.error === undefined && read.rows === TABLES.length * DAYS.length * ROWS && read.markers === 1;

it(`a plain DuckDB reader of lake.duckdb sees ${SYNCS} syncs of two tables with 0 errors and 0 mixed reads; a glob reader needs retries`, async (context) => {
  const { lake, lakeDir } = await openLake();
  for (const table of TABLES) {
    await lake.createTable(defineTable({ name: table, columns: [{ name: "id", type: "BIGINT" }, { name: "marker", type: "INTEGER" }], partitionKeys: ["day"] }));
  }
  await sync(lake, 0);
  const [catalog, glob] = (await readers.start(lakeDir, TABLES, ["catalog", "glob"])) as [Child, Child];

  const syncsStart = Date.now();
  for (let marker = 1; marker <= SYNCS; marker += 1) await sync(lake, marker);
  const syncsEnd = Date.now();
  await readers.stopAfter(syncsEnd);

  const reads = catalog.json<CatalogRead>();
  const during = reads.filter((r) => r.start >= syncsStart && r.end <= syncsEnd);
  expect(reads.filter((r) => r.error !== undefined).map((r) => r.error), `of ${reads.length} reads of lake.duckdb, the failed`).toEqual([]);
  expect(reads.filter((r) => !whole(r)), `of ${reads.length} reads of lake.duckdb, those not of one whole sync`).toEqual([]);
  // The reads overlapped the syncs and followed them: many syncs were seen, each read of one whole sync, in order.
  expect(during.length).toBeGreaterThan(20);
  const markers = reads.map((r) => r.marker as number);
  expect(new Set(markers.filter((_, i) => reads[i]!.start >= syncsStart && reads[i]!.end <= syncsEnd)).size).toBeGreaterThan(10);
  expect(markers.every((marker, i) => i === 0 || marker >= markers[i - 1]!)).toBe(true);
  expect(markers.at(-1)).toBe(SYNCS);

  const globReads = glob.json<CatalogRead>().filter((r) => r.start >= syncsStart && r.end <= syncsEnd);
  const failed = globReads.filter((r) => r.error !== undefined);
  const mixed = globReads.filter((r) => r.error === undefined && !whole(r));
  // What it failed with is always the retryable missing file of README's "Reading a lake with plain DuckDB".
  expect(failed.filter((r) => !GLOB_RACE.test(r.error!)).map((r) => r.error)).toEqual([]);
  // And it needs them: over 100 syncs that move two tables one after the other, its reads fail or mix syncs (a view of
  // lake.duckdb changes only once both tables moved). Seen every run so far: dozens of each.
  expect(failed.length + mixed.length, "the glob reader's reads that failed or mixed two syncs").toBeGreaterThan(0);
  context.annotate(`during ${SYNCS} syncs: lake.duckdb reader ${during.length} reads, 0 failed, 0 mixed; glob reader ${globReads.length} reads, ${failed.length} failed (retryable), ${mixed.length} mixed two syncs`);
});
