import { expect, it } from "vitest";
import type { Lake } from "../../src/lake/lake.js";
import { defineTable, type Column } from "../../src/model/table.js";
import { parsePartition } from "../../src/model/partition.js";
import type { Child } from "../support/crash-kit.js";
import { GLOB_RACE, catalogReaders, type CatalogRead } from "../support/catalog-readers.js";
import { tempLakes } from "../support/temp-lake.js";

// Issue 31 item 4, embedded: plain DuckDB readers (lake.duckdb, and the folders' glob with union_by_name) read in a loop
// while syncs replace every partition and the table's schema changes in place twice (a column added in the middle,
// then the marker widened from INTEGER to BIGINT, which also gets values only BIGINT holds): the catalog file's
// reader sees 0 errors and 0 wrong reads, and the glob reader fails only as a glob read racing a swap may (a file
// gone), never on the files' differing schemas.

const openLake = tempLakes();
const DAYS = ["2026-11-01", "2026-11-02", "2026-11-03"];
const ROWS = 5;
const SYNCS = 45;

const readers = catalogReaders();

const V1: Column[] = [{ name: "id", type: "BIGINT" }, { name: "marker", type: "INTEGER" }];
const V2: Column[] = [{ name: "id", type: "BIGINT" }, { name: "note", type: "VARCHAR" }, { name: "marker", type: "INTEGER" }];
const V3: Column[] = [{ name: "id", type: "BIGINT" }, { name: "note", type: "VARCHAR" }, { name: "marker", type: "BIGINT" }];

/** The marker of sync `n`: from the widening on, a value only BIGINT holds (distinct per sync, increasing). */
const markerOf = (n: number, wide: boolean): number => (wide ? 3_000_000_000 + n : n);

/** One sync: every partition replaced with ROWS rows marked `marker`, with the columns the table has now. */
async function sync(lake: Lake, marker: number, columns: readonly Column[]): Promise<void> {
  const note = columns.some((c) => c.name === "note") ? `, 'n' || range AS note` : "";
  await lake.write(["orders"], `sync ${marker}`, async (writer) => {
    const items = DAYS.map((day) => ({ partition: parsePartition(`day=${day}`, ["day"]), select: `SELECT range AS id${note}, ${marker}::${columns.at(-1)!.type} AS marker FROM range(${ROWS})` }));
    const outcomes = await writer.replaceBatch("orders", items, { build: { kind: "select", landed: true }, allowEmpty: false });
    for (const outcome of outcomes) if (outcome.error !== undefined) throw outcome.error;
  });
}

it(`plain DuckDB readers see ${SYNCS} syncs and two schema changes in place with 0 errors and 0 wrong reads (lake.duckdb), and the glob by name only races swaps`, async (context) => {
  const { lake, lakeDir } = await openLake();
  await lake.createTable(defineTable({ name: "orders", columns: V1, partitionKeys: ["day"] }));
  await sync(lake, 0, V1);
  const [catalog, glob] = (await readers.start(lakeDir, ["orders"], ["catalog", "glob"], ["--by-name"])) as [Child, Child];

  const syncsStart = Date.now();
  let columns: readonly Column[] = V1;
  for (let n = 1; n <= SYNCS; n += 1) {
    // A third of the way: a column added in the middle; two thirds: the marker widened. Each a command of its own, as create-table is.
    if (n === SYNCS / 3) columns = (await lake.createTable(defineTable({ name: "orders", columns: V2, partitionKeys: ["day"] }))).columns;
    if (n === (2 * SYNCS) / 3) columns = (await lake.createTable(defineTable({ name: "orders", columns: V3, partitionKeys: ["day"] }))).columns;
    await sync(lake, markerOf(n, n >= (2 * SYNCS) / 3), columns);
  }
  const syncsEnd = Date.now();
  expect((await lake.table("orders")).schemaVersion).toBe(2);
  await readers.stopAfter(syncsEnd);

  const whole = (r: CatalogRead): boolean => r.error === undefined && r.rows === DAYS.length * ROWS && r.markers === 1;
  const reads = catalog.json<CatalogRead>();
  const during = reads.filter((r) => r.start >= syncsStart && r.end <= syncsEnd);
  expect(reads.filter((r) => r.error !== undefined).map((r) => r.error), `of ${reads.length} reads of lake.duckdb, the failed`).toEqual([]);
  expect(reads.filter((r) => !whole(r)), `of ${reads.length} reads of lake.duckdb, those not of one whole sync`).toEqual([]);
  expect(during.length).toBeGreaterThan(10);
  const markers = reads.map((r) => r.marker as number);
  expect(markers.every((marker, i) => i === 0 || marker >= markers[i - 1]!)).toBe(true);
  expect(markers.at(-1)).toBe(markerOf(SYNCS, true));

  const globReads = glob.json<CatalogRead>().filter((r) => r.start >= syncsStart);
  const failed = globReads.filter((r) => r.error !== undefined);
  // Only the retryable missing file of a glob read racing a swap: never a schema the reader could not read.
  expect(failed.filter((r) => !GLOB_RACE.test(r.error!)).map((r) => r.error)).toEqual([]);
  expect((globReads.at(-1) as CatalogRead).marker).toBe(markerOf(SYNCS, true));
  context.annotate(`during ${SYNCS} syncs and 2 schema changes: lake.duckdb reader ${during.length} reads, 0 failed; glob reader ${globReads.length} reads, ${failed.length} failed (retryable)`);
});
