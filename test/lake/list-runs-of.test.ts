import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { listRuns, listRunsOf, type LakeContext } from "../../src/lake/runs.js";
import { manifestKey, runLocation, runsPrefix } from "../../src/lake/layout.js";
import { parsePartitionPath, partitionPath, type Partition } from "../../src/model/partition.js";
import { defineTable, type TableDefinition } from "../../src/model/table.js";
import type { ObjectStore } from "../../src/store/object-store.js";
import { tempLakes } from "../support/temp-lake.js";

// listRunsOf answers, for many partitions of a remote store, from one listing of the table's runs and one of its
// manifests instead of two listings per partition: the answer must be exactly what listRuns gives for each.

const openLake = tempLakes();

const TABLE = defineTable({ name: "t", columns: [{ name: "v", type: "BIGINT" }], partitionKeys: ["day", "region"] });
/** Its name is the table's and more: its keys start with the table's name, never with its prefix. */
const SIBLING = defineTable({ name: "t_more", columns: [{ name: "v", type: "BIGINT" }], partitionKeys: ["day", "region"] });

/** The lake's store as a remote one (listings paid per call), counting its listings. */
function remote(store: ObjectStore): { store: ObjectStore; lists: () => number } {
  let lists = 0;
  const wrapped = Object.create(store, {
    capabilities: { value: { ...store.capabilities, localPaths: false } },
    list: {
      value: (prefix: string, options?: { readonly atMost?: number }) => {
        lists += 1;
        return store.list(prefix, options);
      },
    },
  }) as ObjectStore;
  return { store: wrapped, lists: () => lists };
}

/** Writes a run's files (or only its empty folder) and, where asked, its manifest, as a lake would. */
function writeRun(lakeDir: string, ctx: LakeContext, table: TableDefinition, partition: Partition, runId: string, what: { files?: string[]; manifest?: boolean }): void {
  const folder = path.join(lakeDir, runLocation(ctx.catalog, table, partition, runId));
  mkdirSync(folder, { recursive: true });
  for (const name of what.files ?? []) writeFileSync(path.join(folder, name), "x");
  if (what.manifest) {
    const key = path.join(lakeDir, manifestKey(table.name, partition, runId));
    mkdirSync(path.dirname(key), { recursive: true });
    writeFileSync(key, "{}");
  }
}

describe("listRunsOf on a store whose listings are remote calls", () => {
  it("gives every partition exactly listRuns' runs (files, empty run folders, manifests; a sibling table's never) from two listings", async () => {
    const { lake, lakeDir } = await openLake();
    const local = lake.parts;
    const partitions = Array.from({ length: 12 }, (_, i) => parsePartitionPath(`day=2026-11-${String(i + 1).padStart(2, "0")}/region=${i % 2 ? "eu" : "us"}`, ["day", "region"]));
    partitions.forEach((partition, i) => {
      if (i % 4 === 3) return; // some partitions hold nothing yet
      writeRun(lakeDir, local, TABLE, partition, `20261101T00000${i % 10}Z-00000a`, { files: ["part-0.parquet", "_SUCCESS"], manifest: true });
      if (i % 3 === 0) writeRun(lakeDir, local, TABLE, partition, `20261102T000000Z-0000${i}b`, { files: ["part-0.parquet", "part-1.parquet"] });
      if (i % 5 === 0) writeRun(lakeDir, local, TABLE, partition, `20261103T000000Z-00000c`, {});
      if (i % 2 === 0) writeRun(lakeDir, local, SIBLING, partition, `20261104T000000Z-00000d`, { files: ["part-0.parquet"], manifest: true });
    });
    // A manifest whose run's files are gone, and a folder that is no run.
    writeRun(lakeDir, local, TABLE, partitions[7]!, "20261105T000000Z-00000e", { manifest: true });
    mkdirSync(path.join(lakeDir, runsPrefix(local.catalog, TABLE, partitions[1]!), "not-a-run"), { recursive: true });
    // Runs of a partition not asked for.
    writeRun(lakeDir, local, TABLE, parsePartitionPath("day=2026-12-01/region=us", ["day", "region"]), "20261106T000000Z-00000f", { files: ["part-0.parquet"], manifest: true });

    const { store, lists } = remote(local.store);
    const ctx: LakeContext = { ...local, store };
    const together = await listRunsOf(ctx, TABLE, partitions);
    expect(lists()).toBe(2);
    const alone = new Map(await Promise.all(partitions.map(async (p) => [partitionPath(p), await listRuns(local, TABLE, p)] as const)));
    expect(together).toEqual(alone);
    expect([...together.values()].flat().length, "the fixture has runs to find").toBeGreaterThan(12);
  });

  it("lists each partition on its own when the table holds more keys than their own listings would cost", async () => {
    const { lake, lakeDir } = await openLake();
    const local = lake.parts;
    const partitions = Array.from({ length: 8 }, (_, i) => parsePartitionPath(`day=2026-11-0${i + 1}/region=us`, ["day", "region"]));
    // 8 partitions' own listings are 16 calls; their table holds more than 8,000 keys (8 pages and more).
    writeRun(lakeDir, local, TABLE, partitions[0]!, "20261101T000000Z-00000a", { files: Array.from({ length: 8_001 }, (_, i) => `part-${i}.parquet`), manifest: true });
    writeRun(lakeDir, local, TABLE, partitions[1]!, "20261101T000000Z-00000b", { files: ["part-0.parquet"], manifest: true });
    const { store, lists } = remote(local.store);
    const together = await listRunsOf({ ...local, store }, TABLE, partitions);
    expect(lists()).toBe(2 + 2 * partitions.length);
    expect(together.get(partitionPath(partitions[0]!))?.[0]?.files).toHaveLength(8_001);
    expect(together.get(partitionPath(partitions[1]!))?.map((run) => run.runId)).toEqual(["20261101T000000Z-00000b"]);
    expect(together.get(partitionPath(partitions[2]!))).toEqual([]);
  });
});
