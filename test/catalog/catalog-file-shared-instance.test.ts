import { promises as fs } from "node:fs";
import { expect, it } from "vitest";
import { replacePartition } from "../../src/lake/operations/replace.js";
import { defineTable } from "../../src/model/table.js";
import { readCatalogFile } from "../support/plain-reader.js";
import { tempLakes } from "../support/temp-lake.js";

// Regression: the catalog file was rewritten in the lake's landing instance while a sync had it open. A landing that
// drops its relations lists every database's tables and views (duckdb_tables(), duckdb_views()), which holds each
// attached database's checkpoint lock for a moment: the rewrite's CHECKPOINT then failed, the update was lost with a
// warning, and readers of lake.duckdb kept the state before (seen in a model test run: no rows after a first sync).
// Every update must land whole, whatever the landing does meanwhile.
const openLake = tempLakes();

it("every update of the catalog file lands whole while the lake's landing drops its relations over and over", async () => {
  const { lake, lakeDir } = await openLake();
  await lake.createTable(defineTable({ name: "orders", columns: [{ name: "id", type: "BIGINT" }], partitionKeys: ["day"] }));
  const warnings: string[] = [];
  const onWarning = (warning: Error) => warnings.push(warning.message);
  process.on("warning", onWarning);
  // What a landing does when it is done with a delivery: drop its relations, found by listing every database's.
  const dropping = { relation: "landed_none", rejectedRelation: "rejected_none" } as unknown as Parameters<typeof lake.landing.releaseLanding>[0];
  let releasing = true;
  let released = 0;
  // Three at once, as landings of several deliveries in one process (the collector's) may be.
  const releaseLoops = [1, 2, 3].map(async () => {
    while (releasing) {
      await lake.landing.releaseLanding(dropping);
      released += 1;
    }
  });
  const replaces = 80;
  try {
    for (let i = 1; i <= replaces; i += 1) {
      await replacePartition(lake, "orders", `day=2026-11-${String((i % 28) + 1).padStart(2, "0")}`, { select: `SELECT ${i}::BIGINT AS id`, landed: true });
    }
  } finally {
    releasing = false;
    await Promise.all(releaseLoops);
    process.off("warning", onWarning);
  }
  expect(released).toBeGreaterThan(replaces);
  expect(warnings).toEqual([]);
  // The file shows the last replace of each day: days 1-28 hold the ids of the last 28 replaces.
  expect(await readCatalogFile(lakeDir, "SELECT count(*), sum(id) FROM lake.orders")).toEqual([[28n, BigInt(((replaces - 27 + replaces) * 28) / 2)]]);
  expect((await fs.readdir(lakeDir)).filter((name) => name.startsWith("lake.duckdb"))).toEqual(["lake.duckdb"]);
});
