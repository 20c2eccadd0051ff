import { afterEach, describe, expect, it } from "vitest";
import type { Lake, PartitionState } from "../../src/lake/lake.js";
import { partitionStates } from "../../src/lake/operations/partition-states.js";
import { parsePartitionPath } from "../../src/model/partition.js";
import { defineTable } from "../../src/model/table.js";
import { BACKEND_FACTORIES, selectedBackends, type TestBackend } from "../support/lake-fixture.js";

// A writer reads a held table's states once and keeps them up to date with its own batches (a sync's layers read the
// table the layer above just wrote): what it answers must always be what the catalog holds.

const TABLE = "events";
const rows = (n: number, tag: string) => `SELECT range AS id, '${tag}' AS tag FROM range(${n})`;
const day = (d: number) => `day=2026-11-0${d}`;

describe.each(selectedBackends())("a writer's states of its tables on the %s backend", (backendName) => {
  let backend: TestBackend;
  let lake: Lake;

  afterEach(async () => {
    await lake.close();
    await backend.cleanup();
  });

  const open = async (): Promise<void> => {
    backend = await BACKEND_FACTORIES[backendName]!();
    lake = await backend.open({ graceMs: 0, leaseWaitMs: 0 });
    await lake.createTable(defineTable({ name: TABLE, columns: [{ name: "id", type: "BIGINT" }, { name: "tag", type: "VARCHAR" }], partitionKeys: ["day"] }));
  };
  const item = (partition: string, tag: string, signature: string | undefined, n = 3) => ({
    partition: parsePartitionPath(partition, ["day"]),
    select: rows(n, tag),
    ...(signature !== undefined ? { signature } : {}),
  });
  const build = { kind: "select", landed: true } as const;
  const fresh = async (): Promise<Map<string, PartitionState>> => partitionStates(lake, TABLE);

  it("are the catalog's after each batch: moves, a failed partition, an unsigned run, a single replace", async () => {
    await open();
    await lake.write([TABLE], "test", async (writer) => {
      expect(await writer.partitionStates(TABLE)).toEqual(new Map());
      // A batch of signed runs, two partitions new.
      await writer.replaceBatch(TABLE, [item(day(1), "a", "sig-1a"), item(day(2), "a", "sig-2a")], { build });
      expect(await writer.partitionStates(TABLE)).toEqual(await fresh());
      // One partition moves again, one fails (0 rows of a partition that has rows): only the first moves.
      const outcomes = await writer.replaceBatch(TABLE, [item(day(1), "b", "sig-1b"), item(day(2), "b", "sig-2b", 0)], { build });
      expect(outcomes.map((o) => o.error === undefined)).toEqual([true, false]);
      const afterFailure = await writer.partitionStates(TABLE);
      expect(afterFailure).toEqual(await fresh());
      expect(afterFailure.get(day(1))?.signature).toBe("sig-1b");
      expect(afterFailure.get(day(2))?.signature).toBe("sig-2a");
      // A run without a signature: its state comes from its manifest (rows, no signature).
      await writer.replaceBatch(TABLE, [item(day(3), "c", undefined, 4)], { build });
      const unsigned = await writer.partitionStates(TABLE);
      expect(unsigned).toEqual(await fresh());
      expect(unsigned.get(day(3))).toMatchObject({ rows: 4, pinned: false });
      // A single replace, then a batch again.
      await writer.replace(TABLE, day(1), { select: rows(5, "d"), landed: true });
      expect(await writer.partitionStates(TABLE)).toEqual(await fresh());
      await writer.replaceBatch(TABLE, [item(day(1), "e", "sig-1e")], { build });
      const last = await writer.partitionStates(TABLE);
      expect(last).toEqual(await fresh());
      // What the writer answers is a copy: a caller that changes it changes nothing kept.
      last.delete(day(1));
      expect((await writer.partitionStates(TABLE)).has(day(1))).toBe(true);
    });
    expect([...(await fresh()).values()].map((s) => [s.partition, s.signature])).toEqual([
      [day(1), "sig-1e"],
      [day(2), "sig-2a"],
      [day(3), undefined],
    ]);
  });
});
