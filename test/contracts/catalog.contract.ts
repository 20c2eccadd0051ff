/**
 * The Catalog port's contract (src/catalog/catalog.ts), run against every adapter, through its batch calls only:
 * table definitions declared, read, listed and dropped; pointers moved and removed in batches (at most the
 * catalog's own batch size per call, as the core sends them), each with its run, previous run, signature and why it
 * moved; and the writer's fence: a writer whose lease was stolen moves and removes nothing.
 */
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { Catalog, Pointer, PointerMove } from "../../src/catalog/catalog.js";
import { METADATA_FOLDERS, runLocation } from "../../src/lake/layout.js";
import { WriterLease } from "../../src/lake/lease.js";
import { makePartition, partitionPath, type Partition } from "../../src/model/partition.js";
import { defineTable, type TableDefinition } from "../../src/model/table.js";
import { advanceClock, resetClock } from "../../src/shared/clock.js";
import { LocalStore } from "../../src/store/local-store.js";
import { tempDir } from "../support/lake-fixture.js";
import { eachFixture, type Fixture, type FixtureFactory } from "./fixture.js";

/** A fresh, opened catalog of its own (a lake folder, a Glue database), and a way to write runs its pointers can move to. */
export interface CatalogFixture extends Fixture {
  readonly catalog: Catalog;
  /** Writes a complete run at `location` (a store key prefix the lake's layout chose), for a catalog that checks that it exists. */
  writeRun(location: string): Promise<void>;
}

const ORDERS = defineTable({ name: "orders", columns: [{ name: "id", type: "BIGINT" }, { name: "amount", type: "DECIMAL(10,2)" }], partitionKeys: ["day"] });
const EVENTS = defineTable({ name: "events", columns: [{ name: "v", type: "VARCHAR" }], partitionKeys: ["p_month", "p_day"] });
const runId = (n: number): string => `202611${String(n).padStart(2, "0")}T000000Z-aaaaaa`;
const day = (i: number): Partition => makePartition([["day", `2026-11-${String(i).padStart(2, "0")}`]]);

/** `path -> run` of a table's pointers, sorted by path (the port promises no order). */
const byPath = (pointers: readonly Pointer[]): [string, string][] =>
  pointers.map((p): [string, string] => [partitionPath(p.partition), p.runId]).sort((a, b) => (a[0] < b[0] ? -1 : 1));

/** Registers the catalog contract for the adapter `name`. */
export function catalogContract(name: string, factory: FixtureFactory<CatalogFixture>): void {
  describe(`the catalog contract: ${name}`, () => {
    const fixture = eachFixture(factory);
    const catalog = (): Catalog => fixture().catalog;
    afterEach(() => resetClock());

    /** Moves of `partitions` to fresh runs `run` (written first), in batches of the catalog's size, as the core sends them. */
    const moveAll = async (table: TableDefinition, partitions: readonly Partition[], run: string, extra: Partial<PointerMove> = {}, fence?: () => Promise<void>) => {
      const moves: PointerMove[] = [];
      for (const partition of partitions) {
        const location = runLocation(catalog(), table, partition, run);
        await fixture().writeRun(location);
        moves.push({ partition, runId: run, location, signature: `v2:${run}:${partitionPath(partition)}`, kind: "swap", ...extra });
      }
      // The core splits a larger batch by the catalog's capability (Infinity: one call).
      const size = Math.min(catalog().capabilities.maxBatchUpdate, moves.length);
      for (let start = 0; start < moves.length; start += size) await catalog().movePointers(table, moves.slice(start, start + size), fence);
    };

    it("declares, reads, lists and drops table definitions; declaring the same definition again is a no-op", async () => {
      expect(await catalog().listTables()).toEqual([]);
      expect(await catalog().getTable("orders")).toBeUndefined();
      await catalog().createTable(ORDERS);
      await catalog().createTable(EVENTS);
      await catalog().createTable(ORDERS);
      expect(await catalog().getTable("orders")).toEqual(ORDERS);
      expect(await catalog().getTable("events")).toEqual(EVENTS);
      expect((await catalog().listTables()).map((t) => t.name).sort()).toEqual(["events", "orders"]);
      await catalog().dropTable("events");
      expect(await catalog().getTable("events")).toBeUndefined();
      expect(await catalog().listTables()).toEqual([ORDERS]);
    });

    it("moves a batch of new pointers, each with its run and signature, and says a swap moved them; an unknown partition has none", async () => {
      await catalog().createTable(ORDERS);
      expect(await catalog().listPointers(ORDERS)).toEqual([]);
      await moveAll(ORDERS, [day(1), day(2), day(3)], runId(1));
      expect(await catalog().getPointer(ORDERS, day(2))).toMatchObject({ partition: day(2), runId: runId(1), signature: `v2:${runId(1)}:day=2026-11-02`, movedBy: "swap" });
      expect(await catalog().getPointer(ORDERS, day(9))).toBeUndefined();
      expect(byPath(await catalog().listPointers(ORDERS))).toEqual([1, 2, 3].map((i) => [partitionPath(day(i)), runId(1)]));
    });

    it("moves existing pointers on, keeping the run before; a rollback says so; the listing follows every move", async () => {
      await catalog().createTable(ORDERS);
      await moveAll(ORDERS, [day(1), day(2)], runId(1));
      await moveAll(ORDERS, [day(2), day(3)], runId(2), { previousRunId: runId(1) });
      expect(await catalog().getPointer(ORDERS, day(2))).toMatchObject({ runId: runId(2), previousRunId: runId(1), movedBy: "swap" });
      expect(byPath(await catalog().listPointers(ORDERS))).toEqual([
        [partitionPath(day(1)), runId(1)],
        [partitionPath(day(2)), runId(2)],
        [partitionPath(day(3)), runId(2)],
      ]);
      await catalog().movePointers(ORDERS, [{ partition: day(2), runId: runId(1), location: runLocation(catalog(), ORDERS, day(2), runId(1)), previousRunId: runId(2), signature: "v2:back", kind: "rollback" }]);
      expect(await catalog().getPointer(ORDERS, day(2))).toMatchObject({ runId: runId(1), previousRunId: runId(2), signature: "v2:back", movedBy: "rollback" });
      expect(byPath(await catalog().listPointers(ORDERS))[1]).toEqual([partitionPath(day(2)), runId(1)]);
    });

    it("moves more pointers than one batch carries, batch after batch, and lists them all", async () => {
      await catalog().createTable(EVENTS);
      const size = Math.min(catalog().capabilities.maxBatchUpdate, 100);
      const partitions = Array.from({ length: size + 20 }, (_, i) =>
        makePartition([["p_month", String(1 + Math.floor(i / 28)).padStart(2, "0")], ["p_day", String(1 + (i % 28)).padStart(2, "0")]]),
      );
      await moveAll(EVENTS, partitions, runId(1));
      const listed = await catalog().listPointers(EVENTS);
      expect(listed).toHaveLength(partitions.length);
      expect(new Set(listed.map((p) => p.runId))).toEqual(new Set([runId(1)]));
    });

    it("keeps each table's pointers apart, and a dropped table's pointers go with it", async () => {
      await catalog().createTable(ORDERS);
      await catalog().createTable(EVENTS);
      await moveAll(ORDERS, [day(1)], runId(1));
      await moveAll(EVENTS, [makePartition([["p_month", "11"], ["p_day", "01"]])], runId(2));
      expect(byPath(await catalog().listPointers(ORDERS))).toEqual([[partitionPath(day(1)), runId(1)]]);
      await catalog().dropTable("orders");
      await catalog().createTable(ORDERS);
      expect(await catalog().listPointers(ORDERS)).toEqual([]);
      expect(await catalog().listPointers(EVENTS)).toHaveLength(1);
    });

    it("removes a batch of pointers; a partition already gone is not an error", async () => {
      await catalog().createTable(ORDERS);
      await moveAll(ORDERS, [day(1), day(2), day(3)], runId(1));
      await catalog().removePointers(ORDERS, [day(1), day(3)]);
      expect(await catalog().getPointer(ORDERS, day(1))).toBeUndefined();
      expect(byPath(await catalog().listPointers(ORDERS))).toEqual([[partitionPath(day(2)), runId(1)]]);
      await catalog().removePointers(ORDERS, [day(1), day(3), day(7)]);
      await catalog().removePointers(ORDERS, []);
      expect(byPath(await catalog().listPointers(ORDERS))).toEqual([[partitionPath(day(2)), runId(1)]]);
    });

    it("calls the fence before it moves or removes: a writer whose lease was stolen moves and removes nothing", async () => {
      await catalog().createTable(ORDERS);
      await moveAll(ORDERS, [day(1), day(2)], runId(1));
      const leases = tempDir();
      try {
        // A real lease, stolen the way a stalled writer loses it: it expires, and another writer takes it over.
        const store = new LocalStore(path.join(leases.dir, "lake"), { folders: METADATA_FOLDERS });
        const stalled = await WriterLease.acquire(store, "orders", { waitMs: 0, kernelLock: false, command: "stalled sync" });
        await stalled.fence();
        advanceClock(120_000);
        const thief = await WriterLease.acquire(store, "orders", { waitMs: 0, kernelLock: false, command: "other sync" });
        const fence = () => stalled.fence();
        await expect(moveAll(ORDERS, [day(1), day(3)], runId(2), { previousRunId: runId(1) }, fence)).rejects.toMatchObject({ code: "LEASE_LOST" });
        await expect(catalog().removePointers(ORDERS, [day(2)], fence)).rejects.toMatchObject({ code: "LEASE_LOST" });
        expect(byPath(await catalog().listPointers(ORDERS))).toEqual([
          [partitionPath(day(1)), runId(1)],
          [partitionPath(day(2)), runId(1)],
        ]);
        // The writer that holds the lease moves them.
        await moveAll(ORDERS, [day(1), day(3)], runId(2), { previousRunId: runId(1) }, () => thief.fence());
        await catalog().removePointers(ORDERS, [day(2)], () => thief.fence());
        expect(byPath(await catalog().listPointers(ORDERS))).toEqual([
          [partitionPath(day(1)), runId(2)],
          [partitionPath(day(3)), runId(2)],
        ]);
        await thief.release();
        await stalled.release();
      } finally {
        leases.cleanup();
      }
    });
  });
}
