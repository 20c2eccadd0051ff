import { afterEach, describe, expect, it } from "vitest";
import type { Lake } from "../../src/lake/lake.js";
import { collectGarbage } from "../../src/lake/operations/gc.js";
import { replacePartition } from "../../src/lake/operations/replace.js";
import { defineTable } from "../../src/model/table.js";
import { embeddedBackend } from "../support/lake-fixture.js";

// A held sync may stage a run of no rows (an upsert that deletes every row of a day). gc removes staged runs after the
// grace window, that one too; its publication must then refuse the partition, as it refuses one whose staged run had
// files, and leave nothing pending. Before, it moved on: the catalog refused the whole batch (`publish` exit 2, "run
// ... does not exist; no pointer was moved") and its outbox entry stayed pending. Found by the model test (upsert:
// sync --hold, gc --grace 0, publish).

describe("publishing a held sync whose empty staged run gc removed", () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  /** A lake whose table has two days of 3 rows, and a held batch staged over them: day 1 emptied (a run of no file), day 2 of 2 other rows. */
  const heldLake = async () => {
    const backend = await embeddedBackend();
    cleanups.push(() => backend.cleanup());
    const lake: Lake = await backend.open({ graceMs: 0 });
    cleanups.push(() => lake.close());
    await lake.createTable(defineTable({ name: "items", columns: [{ name: "id", type: "BIGINT" }], partitionKeys: ["day"] }));
    for (const day of ["2026-11-01", "2026-11-02"]) await replacePartition(lake, "items", `day=${day}`, { select: "SELECT range AS id FROM range(3)", landed: true });
    const staged = await lake.write(["items"], "test: a held sync", (writer) =>
      writer.replaceBatch(
        "items",
        [
          { partition: { keys: ["day"], values: ["2026-11-01"] }, select: "SELECT range AS id FROM range(0)" },
          { partition: { keys: ["day"], values: ["2026-11-02"] }, select: "SELECT range + 10 AS id FROM range(2)" },
        ],
        { build: { kind: "select", landed: true }, stage: true, allowEmpty: true },
      ),
    );
    expect(staged.map((s) => [s.partition, s.staged?.rows])).toEqual([["day=2026-11-01", 0], ["day=2026-11-02", 2]]);
    // A run of no rows that an upsert's merge stages has no file at all (this build wrote an empty one): its manifest
    // names none, and its folder is what there is of it.
    const runs = staged.map((s) => (s.staged!.rows === 0 ? { ...s.staged!, files: [] } : s.staged!));
    const publish = () => lake.write(["items"], "test: publish", (writer) => writer.publishStaged([{ table: "items", runs }], "20261205T000000Z-000001", async () => undefined));
    return { lake, publish };
  };

  it("publishes an empty staged run that is still there", async () => {
    const { lake, publish } = await heldLake();
    const { moved, refused } = await publish();
    expect([moved.map((m) => m.outcome.partition), refused]).toEqual([["day=2026-11-01", "day=2026-11-02"], []]);
    const rows = await lake.query("SELECT day, count(*) FROM items GROUP BY day ORDER BY day");
    expect(rows.rows).toEqual([["2026-11-02", 2]]);
  });

  it("refuses each partition whose staged run gc removed, the empty one too, and leaves the table writable", async () => {
    const { lake, publish } = await heldLake();
    // gc with no grace window: staged runs are neither current nor kept.
    await collectGarbage(lake, "items");
    const { moved, refused } = await publish();
    expect(moved).toEqual([]);
    expect(refused.map((r) => [r.partition, r.reason.replace(/run \S+/, "run R")])).toEqual([
      ["day=2026-11-01", "its staged run R is gone (gc removes staged runs after the grace window); rerun the sync"],
      ["day=2026-11-02", "its staged run R is gone (gc removes staged runs after the grace window); rerun the sync"],
    ]);
    // Nothing pending: the next writer of the table works, and readers see the rows of before.
    expect(await lake.pendingChanges()).toEqual([]);
    await replacePartition(lake, "items", "day=2026-11-02", { select: "SELECT 7 AS id", landed: true });
    const rows = await lake.query("SELECT day, count(*) FROM items GROUP BY day ORDER BY day");
    expect(rows.rows).toEqual([["2026-11-01", 3], ["2026-11-02", 1]]);
  });
});
