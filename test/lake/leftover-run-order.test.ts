import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { expect, it } from "vitest";
import { defineTable } from "../../src/model/table.js";
import { parsePartition } from "../../src/model/partition.js";
import { newRunId } from "../../src/model/run-id.js";
import { tempLakes } from "../support/temp-lake.js";

const openLake = tempLakes();

// Found by the model test (seed 99): a sync and a `rollback --sync last` at once, the rollback removing the pointer of
// a partition the sync had created (its run stays until GC), then a sync in the same second built that partition
// again under a run id that sorted before the one left behind, breaking "run order is swap order".
it("a batch's new run sorts after a run left behind in a partition without a pointer, also one of the same second", async () => {
  const { lake, lakeDir } = await openLake();
  await lake.createTable(defineTable({ name: "t", columns: [{ name: "id", type: "BIGINT" }], partitionKeys: ["day"] }));
  // A run another process wrote this second, with a suffix above any this process would issue first.
  const leftover = `${newRunId().slice(0, 16)}-fffff0`;
  const folder = path.join(lakeDir, "t", "_runs", "day=2026-11-01", `run=${leftover}`);
  mkdirSync(folder, { recursive: true });
  writeFileSync(path.join(folder, "part-0.parquet"), "");
  const [outcome] = await lake.write(["t"], "test", (writer) =>
    writer.replaceBatch("t", [{ partition: parsePartition("day=2026-11-01", ["day"]), select: "SELECT 1::BIGINT AS id" }], { build: { kind: "select", landed: true }, allowEmpty: false }),
  );
  expect(outcome?.error).toBeUndefined();
  expect(outcome!.runId! > leftover, `${outcome!.runId} sorts after ${leftover}`).toBe(true);
  expect((await lake.query("SELECT count(*) FROM t")).rows).toEqual([[1]]);
});
