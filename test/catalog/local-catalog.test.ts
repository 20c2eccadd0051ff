import fs, { mkdirSync, readdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { PointerMove } from "../../src/catalog/catalog.js";
import { LocalCatalog } from "../../src/catalog/local-catalog.js";
import { writeConsequence, METADATA_FOLDERS } from "../../src/lake/layout.js";
import { parsePartitionPath, partitionPath } from "../../src/model/partition.js";
import { defineTable } from "../../src/model/table.js";
import { recordFsyncs } from "../support/fsync-spy.js";
import { tempDir } from "../support/lake-fixture.js";

// The embedded catalog's batch of pointer moves: durable runs, links and states, each folder fsynced once.

const TABLE = defineTable({ name: "t", columns: [{ name: "v", type: "BIGINT" }], partitionKeys: ["p_month", "p_day"] });
const OLD = "20261101T000000Z-aaaaaa";
const NEW = "20261102T000000Z-bbbbbb";
/** Three days in each of two months: two runs folders of three runs each, two pointer folders, two state folders. */
const PARTITIONS = ["01", "02"].flatMap((month) => ["01", "02", "03"].map((day) => `p_month=${month}/p_day=${day}`));

let workspace: ReturnType<typeof tempDir> | undefined;
afterEach(() => {
  vi.restoreAllMocks();
  workspace?.cleanup();
});

/** A lake with the table and, per partition, a run `runId` of two files. */
async function lakeWithRuns(runIds: readonly string[]): Promise<{ root: string; catalog: LocalCatalog }> {
  workspace = tempDir();
  const root = path.join(workspace.dir, "lake");
  const catalog = new LocalCatalog(root, { folders: METADATA_FOLDERS, describeWrite: writeConsequence });
  await catalog.open();
  await catalog.createTable(TABLE);
  for (const partition of PARTITIONS) {
    for (const runId of runIds) {
      const runDir = path.join(root, "t", "_runs", partition, `run=${runId}`);
      mkdirSync(runDir, { recursive: true });
      for (const file of ["a.parquet", "b.parquet"]) writeFileSync(path.join(runDir, file), "PAR1");
    }
  }
  return { root, catalog };
}

const moveTo = (runId: string, previousRunId?: string): PointerMove[] =>
  PARTITIONS.map((p) => ({ partition: parsePartitionPath(p, TABLE.partitionKeys), runId, location: `t/_runs/${p}/run=${runId}/`, previousRunId, signature: `v2:${runId}`, kind: "swap" }));

describe("the local catalog's batch of pointer moves", () => {
  it("makes every run file and folder durable, then fsyncs each folder once however many runs, links or states it holds", async () => {
    const { root, catalog } = await lakeWithRuns([NEW]);
    const fsyncs = recordFsyncs();
    await catalog.movePointers(TABLE, moveTo(NEW));
    fsyncs.restore();

    for (const partition of PARTITIONS) {
      const runDir = path.join(root, "t", "_runs", partition, `run=${NEW}`);
      for (const file of ["a.parquet", "b.parquet"]) expect(fsyncs.count(path.join(runDir, file)), `${partition}/${file}`).toBe(1);
      expect(fsyncs.count(runDir), `the run folder of ${partition}`).toBe(1);
      expect(await catalog.getPointer(TABLE, parsePartitionPath(partition, TABLE.partitionKeys))).toMatchObject({ runId: NEW, signature: `v2:${NEW}`, movedBy: "swap" });
    }
    for (const month of ["p_month=01", "p_month=02"]) {
      // Three runs, three links, three states in each of these folders: one fsync each.
      expect(fsyncs.count(path.join(root, "t", "_runs", month)), `runs folder ${month}`).toBe(1);
      expect(fsyncs.count(path.join(root, "t", month)), `pointer folder ${month}`).toBe(1);
      expect(fsyncs.count(path.join(root, "_lakeswap", "pointers", "t", month)), `state folder ${month}`).toBe(1);
    }
    // The folders above, new or not, once each (the table's twice: before the links, then for its new pointer folders).
    expect(fsyncs.count(path.join(root, "t", "_runs"))).toBe(1);
    expect(fsyncs.count(path.join(root, "_lakeswap", "pointers", "t"))).toBe(1);
    expect(fsyncs.count(path.join(root, "t"))).toBe(2);
    expect(readdirSync(path.join(root, "_lakeswap", "tmp")), "no staged state or link left").toEqual([]);
  });

  it("a pointer state that cannot be staged (a full disk) fails the batch before any pointer moved, and leaves no temporary file", async () => {
    const { root, catalog } = await lakeWithRuns([OLD, NEW]);
    await catalog.movePointers(TABLE, moveTo(OLD));
    // A state file is small: written with writeSync (a larger file would go through fs.write).
    const realWrite = fs.writeSync;
    vi.spyOn(fs, "writeSync").mockImplementation(((...args: unknown[]) => {
      const bytes = args[1];
      if (bytes instanceof Uint8Array && Buffer.from(bytes).toString("utf8").includes(`"run":"${NEW}"`)) {
        throw Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC" });
      }
      return (realWrite as (...a: unknown[]) => number)(...args);
    }) as typeof fs.writeSync);

    await expect(catalog.movePointers(TABLE, moveTo(NEW, OLD))).rejects.toMatchObject({ code: "NO_SPACE", message: expect.stringMatching(/no pointer moved/) });
    vi.restoreAllMocks();
    for (const partition of PARTITIONS) {
      expect(await catalog.getPointer(TABLE, parsePartitionPath(partition, TABLE.partitionKeys)), partition).toMatchObject({ runId: OLD, signature: `v2:${OLD}` });
    }
    expect(readdirSync(path.join(root, "_lakeswap", "tmp"))).toEqual([]);
  });

  it("a missing run fails the batch before any pointer moved, and leaves no temporary file", async () => {
    const { root, catalog } = await lakeWithRuns([OLD]);
    await catalog.movePointers(TABLE, moveTo(OLD));
    const moves = moveTo(NEW, OLD);
    mkdirSync(path.join(root, "t", "_runs", PARTITIONS[0]!, `run=${NEW}`), { recursive: true });
    await expect(catalog.movePointers(TABLE, moves)).rejects.toThrow(
      "run 20261102T000000Z-bbbbbb of t/p_month=01/p_day=02 does not exist (and 4 more of this batch); no pointer was moved",
    );
    for (const partition of PARTITIONS) expect((await catalog.getPointer(TABLE, parsePartitionPath(partition, TABLE.partitionKeys)))?.runId).toBe(OLD);
    expect(readdirSync(path.join(root, "_lakeswap", "tmp"))).toEqual([]);
  });

  it("lists the pointers of many partitions, sorted", async () => {
    const { catalog } = await lakeWithRuns([OLD]);
    await catalog.movePointers(TABLE, moveTo(OLD));
    const pointers = await catalog.listPointers(TABLE);
    expect(pointers.map((p) => [partitionPath(p.partition), p.runId])).toEqual(PARTITIONS.map((p) => [p, OLD]));
  });
});
