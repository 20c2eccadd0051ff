import { existsSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { parsePartitionPath } from "../../src/model/partition.js";
import { defineTable } from "../../src/model/table.js";
import { openEmbeddedLake } from "../../src/open/open-lake.js";
import { tempLakes } from "../support/temp-lake.js";
import { replacePartition } from "../../src/lake/operations/replace.js";
import { collectGarbage } from "../../src/lake/operations/gc.js";

// What builds that died leave behind in a local lake, and GC.

const openLake = tempLakes();

describe("GC of what dead builds left", () => {
  it("removes an empty run folder (a build killed as it started) once it is past the grace window, and keeps a young one", async () => {
    const { lake, lakeDir } = await openLake((dir) => openEmbeddedLake(dir, { graceMs: 3_600_000 }));
    await lake.createTable(defineTable({ name: "t", columns: [{ name: "v", type: "BIGINT" }], partitionKeys: ["day"] }));
    const current = await replacePartition(lake, "t", "day=2026-11-01", { select: "SELECT 1 AS v" });
    const partitionDir = path.dirname(path.join(lakeDir, "t", "_runs", "day=2026-11-01", "x"));
    const runsBefore = readdirSync(partitionDir);
    expect(runsBefore).toEqual([`run=${current.runId}`]);
    // As a build killed right after it made its run folder leaves it: an old one, and one from a build that is barely a minute old.
    const old = "20200101T000000Z-000aaa";
    const young = `${new Date(Date.now() - 60_000).toISOString().replace(/[-:]/g, "").replace(/\.\d+Z$/, "Z")}-0000bb`;
    mkdirSync(path.join(partitionDir, `run=${old}`));
    mkdirSync(path.join(partitionDir, `run=${young}`));

    const dry = await collectGarbage(lake, "t", { dryRun: true });
    expect(dry.flatMap((r) => r.removed.map((x) => `${x.runId} ${x.reason}`))).toEqual([`${old} incomplete build`]);
    expect(existsSync(path.join(partitionDir, `run=${old}`))).toBe(true);

    const report = await collectGarbage(lake, "t");
    expect(report.flatMap((r) => r.removed.map((x) => x.runId))).toEqual([old]);
    expect(readdirSync(partitionDir).sort()).toEqual([`run=${current.runId}`, `run=${young}`].sort());
    expect((await lake.query("SELECT v FROM t")).rows).toEqual([[1]]);
  });

  it("GC after a batch of swaps lists every partition it swapped, new ones too: a dead writer's old leftover in a partition swapped for the first time goes at once", async () => {
    const { lake, lakeDir } = await openLake((dir) => openEmbeddedLake(dir, { graceMs: 3_600_000 }));
    await lake.createTable(defineTable({ name: "t", columns: [{ name: "v", type: "BIGINT" }], partitionKeys: ["day"] }));
    const days = ["2026-11-01", "2026-11-02", "2026-11-03", "2026-11-04", "2026-11-05", "2026-11-06"];
    // A writer killed mid-build long ago left a run in a partition that never got a pointer.
    const leftover = "20200101T000000Z-000aaa";
    const leftoverDir = path.join(lakeDir, "t", "_runs", "day=2026-11-03", `run=${leftover}`);
    mkdirSync(leftoverDir, { recursive: true });
    writeFileSync(path.join(leftoverDir, "half.parquet"), "PAR1");

    const reports = await lake.write(["t"], "test", async (writer) => {
      const outcomes = await writer.replaceBatch(
        "t",
        days.map((day, i) => ({ partition: parsePartitionPath(`day=${day}`, ["day"]), select: `SELECT ${i} AS v` })),
        { build: { kind: "select" } },
      );
      expect(outcomes.map((o) => o.error)).toEqual(days.map(() => undefined));
      return writer.collectGarbage("t", days.map((day) => `day=${day}`));
    });
    expect(reports.map((r) => r.partition)).toEqual(days.map((day) => `day=${day}`));
    expect(reports.flatMap((r) => r.removed.map((x) => `${r.partition} ${x.runId} ${x.reason}`))).toEqual([`day=2026-11-03 ${leftover} incomplete build`]);
    expect(existsSync(leftoverDir)).toBe(false);
    expect((await lake.query("SELECT count(*) FROM t")).rows).toEqual([[6]]);
  });
});
