import { afterEach, describe, expect, it } from "vitest";
import type { Lake } from "../../src/lake/lake.js";
import { BACKEND_FACTORIES, type TestBackend } from "../support/lake-fixture.js";
import { PipelineWorkspace, orders } from "../support/pipeline-fixture.js";

// The message of a bad row that stops a load, and dead letters of CSV rows (issue 9, items 9 and 21), on the
// embedded lake: landing is the same DuckDB code on both backends.

let workspace: PipelineWorkspace | undefined;
let lake: Lake | undefined;
let backend: TestBackend | undefined;
afterEach(async () => {
  await lake?.close();
  await backend?.cleanup();
  workspace?.cleanup();
  lake = undefined;
  backend = undefined;
  workspace = undefined;
});

async function start(options: { deadLetter?: boolean } = {}): Promise<{ ws: PipelineWorkspace; lake: Lake }> {
  workspace = new PipelineWorkspace(options);
  backend = await BACKEND_FACTORIES.local!();
  lake = await backend.open({ graceMs: 0, leaseWaitMs: 0 });
  return { ws: workspace, lake };
}

const header = "order_id,customer_id,amount,status,order_ts,updated_at";
const good = orders(1, 3).map((r) => `${r.id},${r.customer},${r.amount},${r.status},${r.ts},${r.updatedAt}`);

describe("bad rows", () => {
  it("stop the load with one short line naming the file, the line, the value and the fix, even for a 3 MB line (over DuckDB's CSV line limit)", async () => {
    const { ws, lake } = await start();
    const huge = `"${"x".repeat(3 * 1024 * 1024)}"`;
    const file = ws.delivery([header, good[0], `104,1,${huge},completed,2026-11-01 10:00:00,`, ...good.slice(1)].join("\n"));
    const error = await ws.pipeline(lake, { inputs: [file] }).sync().then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(error?.message).toBe(
      `${file}:3: column amount: '${"x".repeat(57)}...' is not a number (line: 104,1,"${"x".repeat(110)}...); 1 bad row(s) in all, nothing was loaded. ` +
        "Fix the file, or set dead_letter: <table> under datasets.orders to load the rest and keep the bad rows there.",
    );
    expect(await lake.listTables()).toEqual([]);
  }, 60_000);

  it("name the line of a NULL in a non-nullable column and of a NULL partition value", async () => {
    const { ws, lake } = await start();
    const file = ws.delivery([header, ...good, "105,1,1.00,completed,,"].join("\n"));
    await expect(ws.pipeline(lake, { inputs: [file] }).sync()).rejects.toThrow(
      `${file}:5: partition key day is NULL: its expression strftime(order_ts, '%Y-%m-%d') gives NULL for this row (line: 105,1,1.00,completed,,)`,
    );
  });

  it("go to the dead-letter table with the line number and the line as it is in the file", async () => {
    const { ws, lake } = await start({ deadLetter: true });
    const quoted = `106,1,"1.5",completed,"2026-11-01 10:00:00","2026-11-02 00:00:00 ""late"""`;
    const file = ws.delivery([header, good[0], quoted, `107,1,"1,5",completed,2026-11-01 10:00:00,`, ...good.slice(1)].join("\n"));
    const report = await ws.pipeline(lake, { inputs: [file] }).sync();
    expect(report.loads[0]).toMatchObject({ rowsRead: 5, rowsLoaded: 3, rowsDeadLettered: 2 });
    expect((await lake.query("SELECT line, reason, raw FROM orders_rejected ORDER BY line")).rows).toEqual([
      [3, `column updated_at: '2026-11-02 00:00:00 "late"' is not a timestamp`, quoted],
      [4, "column amount: '1,5' is not a number", `107,1,"1,5",completed,2026-11-01 10:00:00,`],
    ]);
  });
});
