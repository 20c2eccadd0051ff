import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Lake } from "../../src/lake/lake.js";
import { embeddedBackend, type TestBackend } from "../support/lake-fixture.js";
import { PipelineWorkspace, orders } from "../support/pipeline-fixture.js";

// A `sql:` audit is users' SQL: it runs in an instance that reaches only the audited table's own files, reads the
// staged partition under the table's name, and a SQL that cannot run holds the partitions (never passes them).

describe("sql: audits run sandboxed", () => {
  let backend: TestBackend;
  let lake: Lake;
  const ws = new PipelineWorkspace();
  let original: string | undefined;
  /** The config with one `sql:` audit, named probe, on the raw table. */
  const audit = (sql: string) =>
    ws.editConfig((yaml) => (original ??= yaml).replace("    layers:\n", `    audits:\n      - name: probe\n        sql: ${JSON.stringify(sql)}\n    layers:\n`));

  beforeAll(async () => {
    backend = await embeddedBackend();
    lake = await backend.open();
    ws.redeliver(orders(2, 3));
    await ws.pipeline(lake).sync();
  });
  afterAll(async () => {
    await lake?.close();
    ws.cleanup();
    await backend?.cleanup();
  });

  it.each([
    ["a file outside the lake", "SELECT * FROM read_csv('/etc/passwd')", /the SQL of audit probe of table orders_raw calls the table function read_csv\('\/etc\/passwd'\), which reads files.*nothing was run/],
    ["another lake table", "SELECT * FROM orders_stage", /audit probe of table orders_raw failed: .*orders_stage.*it may read only orders_raw/],
    ["two statements", "SELECT 1; SELECT 2", /exactly one|one SELECT|one statement/i],
  ])("refuses to read %s: the partitions are held, with the reason", async (_what, sql, message) => {
    audit(sql);
    ws.redeliver(orders(2, 3).map((r) => ({ ...r, amount: "1.00" })));
    const report = await ws.pipeline(lake).sync();
    const raw = report.partitions.filter((p) => p.table === "orders_raw");
    expect(raw.map((p) => p.action)).toEqual(["failed", "failed"]);
    expect(raw[0]!.error).toMatch(message);
    expect((await lake.query("SELECT count(*) FROM orders_raw WHERE amount = 1.00")).rows).toEqual([[0]]);
  });

  it("reads the staged partition's rows (partition columns included) under the table's name, {{ day }} rendered", async () => {
    audit("SELECT order_id FROM orders_raw WHERE day = {{ day }} AND amount = 1.00 AND order_id % 100 = 0");
    const report = await ws.pipeline(lake).sync();
    const raw = report.partitions.filter((p) => p.table === "orders_raw");
    expect(raw.map((p) => [p.partition, p.audits?.[0]?.samples])).toEqual([
      ["day=2026-11-01", [{ order_id: 100 }]],
      ["day=2026-11-02", [{ order_id: 200 }]],
    ]);
  });
});
