import { afterAll, describe, expect, it } from "vitest";
import { dropTable } from "../../src/lake/operations/drop-table.js";
import { publishSync } from "../../src/lake/operations/publish.js";
import { replacePartition } from "../../src/lake/operations/replace.js";
import { embeddedBackend } from "../support/lake-fixture.js";
import { readCatalogFile } from "../support/plain-reader.js";
import { PipelineWorkspace, orders } from "../support/pipeline-fixture.js";

// Issue 29 item 4 with the syncs' history: lake.duckdb also holds `<table>__at_<sync id>`, each table's state right
// after each retained sync that changed it, which plain DuckDB reads; a past sync's view goes once its files may
// (the grace window after its state stopped being current).

describe("lake.duckdb x sync history", () => {
  const ws = new PipelineWorkspace();
  const cleanups: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const cleanup of cleanups) await cleanup();
    ws.cleanup();
  });

  const view = (table: string, syncId: string) => `lake.${table}__at_${syncId.replace(/[^A-Za-z0-9]/g, "_")}`;

  it("has a view of each table as of each retained sync, read by plain DuckDB; one past the grace window goes", async () => {
    const backend = await embeddedBackend();
    cleanups.push(() => backend.cleanup());
    const lake = await backend.open({ graceMs: 0 });
    cleanups.push(() => lake.close());
    const amounts = async (relation: string) => (await readCatalogFile(backend.lakeDir, `SELECT CAST(sum(amount) AS DOUBLE) FROM ${relation}`))[0]?.[0];

    ws.redeliver(orders(2, 3));
    const first = await ws.pipeline(lake).sync();
    ws.redeliver(orders(2, 3).map((r) => ({ ...r, amount: "1.00" })));
    const second = await ws.pipeline(lake).sync();

    expect(await amounts("lake.orders_raw")).toBe(6);
    expect(await amounts(view("orders_raw", second.syncId))).toBe(6);
    expect(await amounts(view("orders_stage", second.syncId))).toBe(6);
    // The first sync's state, as it was: 10.00 + 11.07 + 12.14 + 20.00 + 21.07 + 22.14.
    expect(await amounts(view("orders_raw", first.syncId))).toBeCloseTo(96.42, 6);
    const history = await readCatalogFile(backend.lakeDir, "SELECT table_name, sync_id FROM lake.lakeswap.history ORDER BY sync_id, table_name");
    expect(history).toEqual([
      ["orders_monthly", first.syncId], ["orders_raw", first.syncId], ["orders_stage", first.syncId],
      ["orders_monthly", second.syncId], ["orders_raw", second.syncId], ["orders_stage", second.syncId],
    ]);

    // With no grace window, the first sync's state stopped being current at the second: its views go with the next write.
    ws.redeliver(orders(2, 3).map((r) => ({ ...r, amount: "2.00" })));
    const third = await ws.pipeline(lake).sync();
    const names = (await readCatalogFile(backend.lakeDir, "SELECT view_name FROM duckdb_views() WHERE NOT internal AND view_name LIKE 'orders_raw__at_%' ORDER BY 1")).map((r) => r[0]);
    expect(names).toEqual([view("orders_raw", second.syncId), view("orders_raw", third.syncId)].map((v) => v.slice("lake.".length)));

    // A dropped table's views go with it, its past ones too; the other tables' stay.
    await dropTable(lake, "orders_monthly");
    const left = await readCatalogFile(backend.lakeDir, "SELECT view_name FROM duckdb_views() WHERE NOT internal AND view_name LIKE 'orders_%' ORDER BY 1");
    expect(left.map((r) => String(r[0])).filter((name) => name.startsWith("orders_monthly"))).toEqual([]);
    expect(left.map((r) => r[0])).toContain(view("orders_stage", third.syncId).slice("lake.".length));
    expect(await readCatalogFile(backend.lakeDir, "SELECT count(*) FROM lake.lakeswap.history WHERE table_name = 'orders_monthly'")).toEqual([[0n]]);
  });

  it("keeps each past sync's state through a held sync, a write that is no sync, and the held sync's publication", async () => {
    const backend = await embeddedBackend();
    cleanups.push(() => backend.cleanup());
    const lake = await backend.open();
    cleanups.push(() => lake.close());
    const amounts = async (relation: string) =>
      (await readCatalogFile(backend.lakeDir, `SELECT string_agg(CAST(amount AS VARCHAR), ',' ORDER BY day, order_id) FROM ${relation}`))[0]?.[0];

    ws.redeliver(orders(2, 2));
    const first = await ws.pipeline(lake).sync();
    const firstState = await amounts("lake.orders_raw");
    // Held: its view is written with the table as it was; then a replace of another day (no sync), and the publication.
    ws.redeliver(orders(2, 2).map((r) => ({ ...r, amount: "5.00" })));
    const held = await ws.pipeline(lake, { hold: true }).sync();
    expect(await amounts(view("orders_raw", first.syncId))).toBe(firstState);
    await replacePartition(lake, "orders_stage", "day=2026-11-09", { select: "SELECT 1 AS order_id, 7 AS customer_id, 9.99 AS amount, TIMESTAMP '2026-11-09 10:00:00' AS order_ts" });
    expect((await publishSync(lake, held.syncId)).refused).toEqual([]);

    expect(await amounts("lake.orders_raw")).toBe("5.00,5.00,5.00,5.00");
    expect(await amounts(view("orders_raw", held.syncId))).toBe("5.00,5.00,5.00,5.00");
    // The first sync's views show it as it was, whatever moved since.
    expect(await amounts(view("orders_raw", first.syncId))).toBe(firstState);
    expect(await amounts(view("orders_stage", first.syncId))).toBe(firstState);
  });
});
