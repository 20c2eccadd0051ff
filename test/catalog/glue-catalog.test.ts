import { GlueClient } from "@aws-sdk/client-glue";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { PointerMove } from "../../src/catalog/catalog.js";
import { GlueCatalog } from "../../src/catalog/glue-catalog.js";
import { movePointers, removePointers } from "../../src/lake/commit/move.js";
import { makePartition, partitionPath } from "../../src/model/partition.js";
import { defineTable } from "../../src/model/table.js";
import { startGlueEmulator, type GlueEmulator } from "../support/glue-emulator.js";

const TABLE = defineTable({ name: "orders", columns: [{ name: "id", type: "BIGINT" }, { name: "amount", type: "DECIMAL(10,2)" }], partitionKeys: ["day"] });
const runId = (i: number) => `20261101T${String(100000 + i).slice(-6)}Z-aaaaaa`;
const day = (i: number) => makePartition([["day", `d${String(i).padStart(4, "0")}`]]);
const move = (i: number, run = runId(i)): PointerMove => ({ partition: day(i), runId: run, location: `orders/${partitionPath(day(i))}/run=${run}/`, kind: "swap", signature: `v1:${i}` });

let glue: GlueEmulator;
let catalog: GlueCatalog;
beforeEach(async () => {
  glue = await startGlueEmulator();
  catalog = new GlueCatalog(new GlueClient(glue.clientConfig), { database: "lake", uriOf: (key) => `s3://bucket/prefix/${key}` });
  await catalog.open();
  await catalog.createTable(TABLE);
});
afterEach(async () => glue.close());

describe("the Glue catalog", () => {
  it("creates a Parquet table with string partition keys and keeps lakeswap's definition", async () => {
    const table = glue.state.table("lake", "orders")!;
    expect(table.StorageDescriptor?.SerdeInfo?.SerializationLibrary).toBe("org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe");
    expect(table.StorageDescriptor?.Columns).toEqual([{ Name: "id", Type: "bigint" }, { Name: "amount", Type: "decimal(10,2)" }]);
    expect(table.PartitionKeys).toEqual([{ Name: "day", Type: "string" }]);
    expect(await catalog.getTable("orders")).toEqual(TABLE);
    await catalog.createTable(TABLE); // the same definition again is a no-op
  });

  it("swaps with one BatchUpdatePartition entry setting Location and Parameters together, or creates the partition", async () => {
    await catalog.movePointers(TABLE, [move(1)]);
    expect(glue.callCount("BatchCreatePartition")).toBe(1);
    await catalog.movePointers(TABLE, [{ ...move(1, runId(2)), previousRunId: runId(1) }]);
    const updates = glue.calls.filter((c) => c.operation === "BatchUpdatePartition" && c.error === undefined);
    expect(updates).toHaveLength(1);
    const partition = glue.state.partition("lake", "orders", ["d0001"])!;
    expect(partition.StorageDescriptor?.Location).toBe(`s3://bucket/prefix/orders/day=d0001/run=${runId(2)}/`);
    expect(partition.Parameters).toMatchObject({ "lakeswap.run": runId(2), "lakeswap.previous_run": runId(1), "lakeswap.signature": "v1:1" });
    expect(await catalog.getPointer(TABLE, day(1))).toMatchObject({ runId: runId(2), previousRunId: runId(1), signature: "v1:1", movedBy: "swap" });
  });

  it("creates a new partition's pointer with one BatchCreatePartition, no failed update first; one registered by another tool is updated", async () => {
    await catalog.movePointers(TABLE, [move(1)]);
    expect(glue.calls.map((c) => `${c.operation}${c.error ? ` ${c.error}` : ""}`).filter((c) => c.includes("Partition"))).toEqual(["BatchCreatePartition"]);
    // The partition exists, but the writer found no pointer of its own (another tool registered it): it is updated.
    await catalog.movePointers(TABLE, [move(1, runId(5))]);
    expect(glue.calls.filter((c) => c.operation === "BatchUpdatePartition" && c.error === undefined)).toHaveLength(1);
    expect(await catalog.getPointer(TABLE, day(1))).toMatchObject({ runId: runId(5) });
  });

  it("moves many pointers in batches of at most 100 (the lake splits them by the catalog's capability), retrying the entries that failed", async () => {
    await catalog.movePointers(TABLE, Array.from({ length: 30 }, (_, i) => move(i)));
    glue.failNext("BatchUpdatePartition", { entries: [3, 7], error: "InternalServiceException", times: 1 });
    const moves = Array.from({ length: 250 }, (_, i) => move(i, runId(i + 1000)));
    await expect(catalog.movePointers(TABLE, moves), "a batch larger than the catalog takes").rejects.toThrow(/at most 100 entries per call, not 250/);
    await movePointers(catalog, TABLE, moves);
    const batches = glue.calls.filter((c) => c.operation === "BatchUpdatePartition" || c.operation === "BatchCreatePartition");
    for (const call of batches) {
      const input = call.input as { Entries?: unknown[]; PartitionInputList?: unknown[] };
      expect((input.Entries ?? input.PartitionInputList ?? []).length).toBeLessThanOrEqual(100);
    }
    const pointers = await catalog.listPointers(TABLE);
    expect(pointers).toHaveLength(250);
    expect(pointers.every((p) => p.runId === runId(Number(partitionPath(p.partition).slice(5)) + 1000))).toBe(true);
  });

  it("reports, by partition, entries that keep failing; none is silently left behind", async () => {
    const moves = [move(0), move(1), move(2)];
    await catalog.movePointers(TABLE, moves);
    // Now update them, with the first two entries of every batch failing (the retries send only those two).
    const again = moves.map((m, i) => ({ ...m, runId: runId(i + 500) }));
    glue.failNext("BatchUpdatePartition", { entries: [0, 1], error: "InternalServiceException", times: 10 });
    await expect(catalog.movePointers(TABLE, again)).rejects.toThrow(
      /2 of 3 partition pointers of orders did not move: day=d0000 \(InternalServiceException.*day=d0001 \(InternalServiceException/,
    );
    expect((await catalog.getPointer(TABLE, day(2)))?.runId).toBe(runId(502));
    expect((await catalog.getPointer(TABLE, day(0)))?.runId).toBe(runId(0));
    expect((await catalog.getPointer(TABLE, day(1)))?.runId).toBe(runId(1));
  });

  it("checks every entry of BatchCreatePartition: a failed create is retried, and one that keeps failing is reported", async () => {
    // Three new partitions: BatchUpdatePartition finds none of them, so they are created in one BatchCreatePartition.
    glue.failNext("BatchCreatePartition", { entries: [1], error: "InternalServiceException", times: 1 });
    await catalog.movePointers(TABLE, [move(0), move(1), move(2)]);
    expect(glue.callCount("BatchCreatePartition"), "the failed entry was sent again").toBe(2);
    expect((await catalog.listPointers(TABLE)).map((p) => [partitionPath(p.partition), p.runId])).toEqual([
      ["day=d0000", runId(0)],
      ["day=d0001", runId(1)],
      ["day=d0002", runId(2)],
    ]);

    glue.failNext("BatchCreatePartition", { entries: [0], error: "ResourceNumberLimitExceededException", times: 10 });
    await expect(catalog.movePointers(TABLE, [move(3), move(4)])).rejects.toThrow(
      /1 of 2 partition pointers of orders did not move: day=d0003 \(ResourceNumberLimitExceededException/,
    );
    expect(await catalog.getPointer(TABLE, day(3))).toBeUndefined();
    expect(await catalog.getPointer(TABLE, day(4))).toMatchObject({ runId: runId(4) });
  });

  it("checks every entry of BatchDeletePartition: a partition that could not be removed is reported and stays", async () => {
    await catalog.movePointers(TABLE, [move(0), move(1), move(2)]);
    glue.failNext("BatchDeletePartition", { entries: [1], error: "InternalServiceException", times: 1 });
    await expect(catalog.removePointers(TABLE, [day(0), day(1), day(2)])).rejects.toThrow(
      /1 partitions of orders could not be removed: d0001: InternalServiceException/,
    );
    expect((await catalog.listPointers(TABLE)).map((p) => [partitionPath(p.partition), p.runId])).toEqual([["day=d0001", runId(1)]]);
    // A partition that is already gone is not an error.
    await catalog.removePointers(TABLE, [day(1), day(7)]);
    expect(await catalog.listPointers(TABLE)).toEqual([]);
  });

  it("follows GetPartitions to the last page and deletes in batches of 25", async () => {
    // Pages of 1,000 partitions (the most Glue returns at once): 2,100 partitions are three pages.
    const count = 2100;
    await movePointers(catalog, TABLE, Array.from({ length: count }, (_, i) => move(i)));
    const listed = glue.callCount("GetPartitions");
    expect(await catalog.listPointers(TABLE)).toHaveLength(count);
    expect(glue.callCount("GetPartitions") - listed).toBe(3);
    await removePointers(catalog, TABLE, Array.from({ length: count }, (_, i) => day(i)));
    expect(glue.state.partitions("lake", "orders")).toEqual([]);
    const deletes = glue.calls.filter((c) => c.operation === "BatchDeletePartition");
    expect(deletes.length).toBe(Math.ceil(count / 25));
  });

  it("retries throttling with backoff", async () => {
    glue.failNext("GetPartition", { error: "ThrottlingException", times: 4 });
    await catalog.movePointers(TABLE, [move(1)]);
    expect(await catalog.getPointer(TABLE, day(1))).toMatchObject({ runId: runId(1) });
  });

  it("rebuilds an empty table whose partition keys differ, and refuses when it has partitions", async () => {
    const byMonth = defineTable({ ...TABLE, partitionKeys: ["month"] });
    await catalog.createTable(byMonth);
    expect(glue.state.table("lake", "orders")?.PartitionKeys).toEqual([{ Name: "month", Type: "string" }]);
    await catalog.movePointers(byMonth, [{ partition: makePartition([["month", "2026-11"]]), runId: runId(1), location: `orders/month=2026-11/run=${runId(1)}/`, kind: "swap" }]);
    await expect(catalog.createTable(TABLE)).rejects.toThrow(/is partitioned by \(month\), not \(day\), and has partitions; lakeswap will not drop them/);
  });

  it("turns an update of a partition that does not exist into a create, and a create of one that exists into an update", async () => {
    await catalog.movePointers(TABLE, [move(5)]);
    // The writer saw a pointer, but the partition is gone (removed by another tool): the entry is created instead.
    glue.failNext("BatchUpdatePartition", { entries: [0], error: "EntityNotFoundException", times: 1 });
    await catalog.movePointers(TABLE, [{ ...move(5, runId(6)), previousRunId: runId(5) }]);
    expect(await catalog.getPointer(TABLE, day(5))).toMatchObject({ runId: runId(6) });
    // The writer saw none, but the partition exists (created concurrently): the entry is an update.
    await catalog.movePointers(TABLE, [move(5, runId(7))]);
    expect(await catalog.getPointer(TABLE, day(5))).toMatchObject({ runId: runId(7), previousRunId: undefined });
  });
});

describe("the writer's fence in the Glue catalog", () => {
  it("is called right before each batch call (and each retry), and once it throws no further call is made", async () => {
    await movePointers(catalog, TABLE, Array.from({ length: 150 }, (_, i) => move(i)));
    const order: string[] = [];
    const seen = glue.calls.length;
    const fence = async (): Promise<void> => {
      order.push(`fence before call ${glue.calls.length - seen + 1}`);
    };
    glue.failNext("BatchUpdatePartition", { entries: [3], error: "InternalServiceException", times: 1 });
    await movePointers(catalog, TABLE, Array.from({ length: 150 }, (_, i) => ({ ...move(i, runId(i + 1000)), previousRunId: runId(i) })), fence);
    // Two batches (100, with the retry of its one failed entry, then 50): each call right after its own fence.
    expect(order).toEqual(["fence before call 1", "fence before call 2", "fence before call 3"]);
    expect(glue.calls.slice(seen).map((c) => c.operation)).toEqual(["BatchUpdatePartition", "BatchUpdatePartition", "BatchUpdatePartition"]);

    // A fence that fails at the second batch: the first batch moved, the second was never sent.
    let fences = 0;
    const lost = async (): Promise<void> => {
      fences += 1;
      if (fences === 2) throw Object.assign(new Error("the writer lease of table 'orders' was taken over"), { code: "LEASE_LOST" });
    };
    const before = glue.calls.length;
    await expect(movePointers(catalog, TABLE, Array.from({ length: 150 }, (_, i) => ({ ...move(i, runId(i + 2000)), previousRunId: runId(i + 1000) })), lost)).rejects.toThrow(
      "taken over",
    );
    expect(glue.calls.slice(before).map((c) => c.operation)).toEqual(["BatchUpdatePartition"]);
    expect((await catalog.listPointers(TABLE)).filter((p) => p.runId === runId(p.partition.values[0] === undefined ? 0 : Number(p.partition.values[0].slice(1)) + 2000))).toHaveLength(100);
  });
});
