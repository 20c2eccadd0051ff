import { writeFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { syncRecordKey } from "../../src/lake/sync-record.js";
import { defineTable } from "../../src/model/table.js";
import { tempLakes } from "../support/temp-lake.js";
import { replacePartition } from "../../src/lake/operations/replace.js";
import { listSyncs, recordSync } from "../../src/lake/operations/syncs.js";
import { rollbackSync } from "../../src/lake/operations/rollback.js";

const openLake = tempLakes();

describe("an unreadable sync record", () => {
  it("stops rollback --sync last naming the file (it may be the last sync), while the listing goes on without it", async () => {
    const { lake, lakeDir } = await openLake();
    await lake.createTable(defineTable({ name: "t", columns: [{ name: "v", type: "BIGINT" }], partitionKeys: ["day"] }));
    const first = await replacePartition(lake, "t", "day=2026-11-01", { select: "SELECT 1 AS v" });
    const second = await replacePartition(lake, "t", "day=2026-11-01", { select: "SELECT 2 AS v" });
    const older = "20261101T000000Z-00000a";
    const newer = "20261102T000000Z-00000b";
    await recordSync(lake, { format: 1, syncId: older, config: "x.yaml", startedAt: "2026-11-01T00:00:00Z", moves: [{ table: "t", layer: "raw", partition: "day=2026-11-01", run: first.runId }] });
    await recordSync(lake, { format: 1, syncId: newer, config: "x.yaml", startedAt: "2026-11-02T00:00:00Z", moves: [{ table: "t", layer: "raw", partition: "day=2026-11-01", run: second.runId, previousRun: first.runId }] });
    writeFileSync(path.join(lakeDir, ...syncRecordKey(newer).split("/")), "{ torn");

    await expect(rollbackSync(lake, "last")).rejects.toThrow(new RegExp(`sync record '_lakeswap/syncs/${newer}.json' is not valid JSON`));
    expect((await lake.pointer("t", "day=2026-11-01"))?.runId).toBe(second.runId);
    expect((await listSyncs(lake, { skipUnreadable: true })).map((r) => r.syncId)).toEqual([older]);
  });
});
