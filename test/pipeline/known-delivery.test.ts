import { renameSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import { advanceClock, resetClock } from "../../src/shared/clock.js";
import { BACKEND_FACTORIES, selectedBackends } from "../support/lake-fixture.js";
import { PipelineWorkspace, orders, toCsv } from "../support/pipeline-fixture.js";
import { rollbackSync } from "../../src/lake/operations/rollback.js";
import { identifyDelivery } from "../../src/lake/operations/deliveries.js";

// The same delivery again is planned from the summary its first landing kept, without reading it: the resend
// of a large delivery costs a digest of its bytes. Anything that could change what landing finds lands it anew.

afterEach(() => resetClock());

/**
 * What `action` does `ms` later, without waiting for them: the clock that stamps a hash (src/shared/clock.ts) is moved
 * on for the action only, as files written after it must not look older than they are.
 */
async function later<T>(ms: number, action: () => Promise<T>): Promise<T> {
  advanceClock(ms);
  try {
    return await action();
  } finally {
    resetClock();
  }
}

describe.each(selectedBackends())("a delivery seen before, on the %s backend", (backendName) => {
  it("is not read again when nothing is to be built, and is read again when its bytes, its declaration or the lake's state ask for it", async () => {
    const backend = await BACKEND_FACTORIES[backendName]!();
    const ws = new PipelineWorkspace();
    const lake = await backend.open();
    try {
      const rows = orders(3);
      const file = ws.delivery(rows);
      const first = await ws.pipeline(lake, { inputs: [file] }).sync();
      expect(first.totals).toMatchObject({ built: 7, failed: 0 });

      // Resent: the same report of what the delivery held, every partition skipped, and the delivery never landed
      // (the landing port refuses to run now).
      const landing = (lake as unknown as { landing: { land: unknown } }).landing;
      const land = landing.land;
      landing.land = () => Promise.reject(new Error("the delivery was read again"));
      try {
        const again = await ws.pipeline(lake, { inputs: [file] }).sync();
        expect(again.totals).toMatchObject({ built: 0, failed: 0, skipped: 7 });
        expect(again.loads[0]).toMatchObject({ rowsRead: 30, rowsLoaded: 30, rowsDeadLettered: 0, delivery: first.loads[0]!.delivery });
        const plan = await ws.pipeline(lake, { inputs: [file] }).plan();
        expect(plan.every((p) => p.action === "skip")).toBe(true);
      } finally {
        landing.land = land;
      }

      // Partitions to build from it (the first sync undone: every partition it created is gone) make it land again.
      await rollbackSync(lake, "last");
      const rebuilt = await ws.pipeline(lake, { inputs: [file] }).sync();
      expect(rebuilt.partitions.filter((p) => p.action === "build").map((p) => `${p.layer} ${p.partition} ${p.reason}`)).toContain("raw day=2026-11-01 new");

      // Other bytes under the same name are another delivery: read, and the changed day rebuilt.
      writeFileSync(file, toCsv(rows.map((r) => (r.id === 204 ? { ...r, amount: "9.99" } : r))));
      const changed = await ws.pipeline(lake, { inputs: [file] }).sync();
      expect(changed.partitions.filter((p) => p.layer === "raw" && p.action === "build").map((p) => `${p.partition} ${p.reason}`)).toEqual(["day=2026-11-02 content changed"]);
    } finally {
      await lake.close();
      ws.cleanup();
      await backend.cleanup();
    }
  });

  it("is named without being read when its files are the same files, unchanged and settled since they were hashed; any change reads them again", async () => {
    const backend = await BACKEND_FACTORIES[backendName]!();
    const ws = new PipelineWorkspace();
    const lake = await backend.open();
    try {
      const rows = orders(2);
      const file = ws.delivery(rows);
      const first = await ws.pipeline(lake, { inputs: [file] }).sync();
      const table = first.layers[0]!.table;
      // Just written (touched again now: a slow sync may have let it settle already): hashed, and hashed again while it
      // may still be changing within its file system's timestamp tick.
      utimesSync(file, new Date(), new Date());
      const fresh = await identifyDelivery(lake, [file], table);
      expect(fresh.hashed).toBe(true);
      // Settled (last changed more than 3 s before it was hashed): the next identify reads nothing.
      const [settled, reused] = await later(3200, async () => [await identifyDelivery(lake, [file], table), await identifyDelivery(lake, [file], table)]);
      expect(settled).toMatchObject({ id: fresh.id, hashed: true });
      expect(reused).toMatchObject({ id: fresh.id, hashed: false });
      const resent = await ws.pipeline(lake, { inputs: [file] }).sync();
      expect(resent.totals).toMatchObject({ built: 0, failed: 0 });

      // Other bytes of the same size, with the modification time put back: the change time moved, so it is read again.
      const { atime, mtime } = statSync(file);
      writeFileSync(file, toCsv(rows.map((r) => (r.id === 101 ? { ...r, amount: r.amount.replace(/\d$/, (d) => String((Number(d) + 1) % 10)) } : r))));
      utimesSync(file, atime, mtime);
      expect(statSync(file).size).toBe(statSync(file).size);
      const rewritten = await identifyDelivery(lake, [file], table);
      expect(rewritten.hashed).toBe(true);
      expect(rewritten.id).not.toBe(fresh.id);

      // Another file moved into its place (another inode) is read too, even with the first one's bytes.
      const copy = ws.delivery(rows);
      expect((await later(3200, () => identifyDelivery(lake, [file], table))).hashed).toBe(true);
      renameSync(copy, file);
      const replaced = await identifyDelivery(lake, [file], table);
      expect(replaced).toMatchObject({ id: fresh.id, hashed: true });
    } finally {
      await lake.close();
      ws.cleanup();
      await backend.cleanup();
    }
  }, 60_000);
});
