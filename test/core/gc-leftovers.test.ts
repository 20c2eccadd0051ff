import { existsSync, mkdirSync, readdirSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { defineTable } from "../../src/core/table.js";
import { openEmbeddedLake } from "../../src/open-lake.js";
import { tempLakes } from "../support/temp-lake.js";

// What builds that died leave behind in a local lake, and GC.

const openLake = tempLakes();

describe("GC of what dead builds left", () => {
  it("removes an empty run folder (a build killed as it started) once it is past the grace window, and keeps a young one", async () => {
    const { lake, lakeDir } = await openLake((dir) => openEmbeddedLake(dir, { graceMs: 3_600_000 }));
    await lake.createTable(defineTable({ name: "t", columns: [{ name: "v", type: "BIGINT" }], partitionKeys: ["day"] }));
    const current = await lake.replacePartition("t", "day=2026-11-01", { select: "SELECT 1 AS v" });
    const partitionDir = path.dirname(path.join(lakeDir, "t", "_runs", "day=2026-11-01", "x"));
    const runsBefore = readdirSync(partitionDir);
    expect(runsBefore).toEqual([`run=${current.runId}`]);
    // As a build killed right after it made its run folder leaves it: an old one, and one from a build that is barely a minute old.
    const old = "20200101T000000Z-000aaa";
    const young = `${new Date(Date.now() - 60_000).toISOString().replace(/[-:]/g, "").replace(/\.\d+Z$/, "Z")}-0000bb`;
    mkdirSync(path.join(partitionDir, `run=${old}`));
    mkdirSync(path.join(partitionDir, `run=${young}`));

    const dry = await lake.gc("t", { dryRun: true });
    expect(dry.flatMap((r) => r.removed.map((x) => `${x.runId} ${x.reason}`))).toEqual([`${old} incomplete build`]);
    expect(existsSync(path.join(partitionDir, `run=${old}`))).toBe(true);

    const report = await lake.gc("t");
    expect(report.flatMap((r) => r.removed.map((x) => x.runId))).toEqual([old]);
    expect(readdirSync(partitionDir).sort()).toEqual([`run=${current.runId}`, `run=${young}`].sort());
    expect((await lake.query("SELECT v FROM t")).rows).toEqual([[1]]);
  });
});
