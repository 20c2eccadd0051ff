import { writeFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { BACKEND_FACTORIES, selectedBackends } from "../support/lake-fixture.js";
import { PipelineWorkspace, orders, toCsv } from "../support/pipeline-fixture.js";

// The same delivery again is planned from the summary its first landing kept, without reading it: the resend
// of a large delivery costs a digest of its bytes. Anything that could change what landing finds lands it anew.

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
      await lake.rollbackSync("last");
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
});
