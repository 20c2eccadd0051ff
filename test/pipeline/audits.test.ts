import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadPipelineConfig } from "../../src/config/pipeline-config.js";
import type { Lake } from "../../src/lake/lake.js";
import { Pipeline } from "../../src/pipeline/pipeline.js";
import type { SyncReport } from "../../src/pipeline/sync-report.js";
import { BACKEND_FACTORIES, selectedBackends, tempDir, type TestBackend } from "../support/lake-fixture.js";
import { runMain } from "../support/main-cli.js";
import { readCatalogFile, readGlob } from "../support/plain-reader.js";
import { orders, toCsv, type OrderRow } from "../support/pipeline-fixture.js";

// Write-audit-publish: each audit kind holds the partition it fails (its pointer stays, its run is kept), on every
// backend, while the other partitions of the same sync go through; warnings only report.

const CONFIG = `datasets:
  orders:
    source: {format: csv, path: delivery.csv}
    columns:
      order_id: {type: BIGINT, nullable: false}
      customer_id: BIGINT
      amount: DECIMAL(10,2)
      status: VARCHAR
      order_ts: TIMESTAMP
      updated_at: TIMESTAMP
    partition:
      day: strftime(order_ts, '%Y-%m-%d')
    audits:
      - not_null: [amount]
      - unique: [order_id]
      - unique: {columns: [order_id], scope: table}
      - accepted_values: {status: [completed, cancelled]}
      - range: {amount: {min: 0}}
      - row_count: {max_change: 50%}
      - name: no_huge_orders
        sql: "SELECT order_id, amount FROM orders_raw WHERE amount > 4000 AND day = {{ day }}"
      - freshness: {column: order_ts, max_age: 1d}
        severity: warn
    layers:
      - name: stage
        sql: stage.sql
        columns: {order_id: BIGINT, amount: "DECIMAL(10,2)", order_ts: TIMESTAMP}
        audits:
          - name: big_orders
            severity: warn
            sql: "SELECT * FROM orders_stage WHERE amount > 1000"
`;

const STAGE_SQL = "SELECT order_id, amount, order_ts FROM orders_raw WHERE day = {{ day }} AND status = 'completed'\n";

/** A case: how day 1 is spoiled, the error audit that must hold it, and any other it fails too. */
const CASES: readonly { readonly audit: string; readonly spoil: (rows: OrderRow[]) => OrderRow[]; readonly failing: number; readonly also?: string }[] = [
  { audit: "not_null(amount)", failing: 1, spoil: (rows) => rows.map((r, i) => (i === 0 ? { ...r, amount: "" } : r)) },
  // A key twice in one partition is twice in the table too.
  { audit: "unique(order_id)", failing: 1, also: "unique(order_id; table)", spoil: (rows) => rows.map((r, i) => (i === 1 ? { ...r, id: rows[0]!.id } : r)) },
  { audit: "unique(order_id; table)", failing: 1, spoil: (rows) => rows.map((r, i) => (i === 0 ? { ...r, id: 300 } : r)) },
  { audit: "accepted_values(status)", failing: 2, spoil: (rows) => rows.map((r, i) => (i < 2 ? { ...r, status: "refunded" } : r)) },
  { audit: "range(amount)", failing: 1, spoil: (rows) => rows.map((r, i) => (i === 3 ? { ...r, amount: "-5.00" } : r)) },
  { audit: "row_count", failing: 1, spoil: (rows) => rows.slice(0, 3) },
  { audit: "no_huge_orders", failing: 1, spoil: (rows) => rows.map((r, i) => (i === 2 ? { ...r, amount: "5000.00" } : r)) },
];

const dayRows = (all: readonly OrderRow[], day: number): OrderRow[] => all.filter((r) => r.ts.startsWith(`2026-11-0${day}`));

for (const backendName of selectedBackends()) {
  describe(`data audits (${backendName})`, () => {
    let backend: TestBackend;
    let lake: Lake;
    let dir: string;
    let cleanup: () => void;
    const base = orders(3, 10);

    const sync = async (rows: readonly OrderRow[]): Promise<SyncReport> => {
      writeFileSync(path.join(dir, "delivery.csv"), toCsv(rows));
      return new Pipeline(lake, loadPipelineConfig(path.join(dir, "lakeswap.yaml"))).sync();
    };
    const rowsOf = async (table: string, day: string): Promise<string[]> =>
      (await lake.query(`SELECT CAST(order_id AS VARCHAR) || ':' || CAST(amount AS VARCHAR) FROM ${table} WHERE day = '${day}' ORDER BY 1`)).rows.map((r) => String(r[0]));

    beforeAll(async () => {
      backend = await BACKEND_FACTORIES[backendName]!();
      lake = await backend.open();
      ({ dir, cleanup } = tempDir("lakeswap-audits-"));
      mkdirSync(dir, { recursive: true });
      writeFileSync(path.join(dir, "lakeswap.yaml"), CONFIG);
      writeFileSync(path.join(dir, "stage.sql"), STAGE_SQL);
    });
    afterAll(async () => {
      await lake?.close();
      cleanup?.();
      await backend?.cleanup();
    });

    it("a clean delivery passes every error audit; a warn audit only reports", async () => {
      const report = await sync(base);
      expect(report.totals).toMatchObject({ built: 6, failed: 0 });
      // Freshness over November's orders, measured today: a warning on every raw partition, which is built anyway.
      const raw = report.partitions.filter((p) => p.table === "orders_raw");
      expect(raw.map((p) => p.action)).toEqual(["build", "build", "build"]);
      for (const p of raw) {
        expect(p.audits).toEqual([expect.objectContaining({ audit: "freshness(order_ts)", severity: "warn", failing: 1, samples: [{ order_ts: "2026-11-03 17:15:00" }] })]);
      }
      expect(report.partitions.filter((p) => p.table === "orders_stage").every((p) => p.audits === undefined)).toBe(true);
    });

    for (const [index, c] of CASES.entries()) {
      it(`${c.audit} holds the partition it fails; the others of the sync go through`, async () => {
        const before = await rowsOf("orders_raw", "2026-11-01");
        const stageBefore = await rowsOf("orders_stage", "2026-11-01");
        // Day 2 changes harmlessly in every case, so it is built beside the held day 1.
        const day2 = dayRows(base, 2).map((r, i) => (i === 0 ? { ...r, amount: `${100 + index}.00` } : r));
        const report = await sync([...c.spoil(dayRows(base, 1)), ...day2, ...dayRows(base, 3)]);
        const day1 = report.partitions.find((p) => p.table === "orders_raw" && p.partition === "day=2026-11-01")!;
        expect(day1.action).toBe("failed");
        const errors = (day1.audits ?? []).filter((f) => f.severity === "error");
        expect(errors.map((f) => [f.audit, f.failing])).toEqual([[c.audit, c.failing], ...(c.also ? [[c.also, c.failing]] : [])]);
        expect(day1.error).toContain(`audit ${c.audit} failed on orders_raw/day=2026-11-01`);
        expect(day1.error).toContain("kept for inspection");
        if (c.audit !== "row_count") expect(errors[0]!.samples.length).toBe(Math.min(c.failing, 5));
        // Readers keep the old rows (plain DuckDB too, over the glob and over lake.duckdb), and the layer below is not
        // built from the held run.
        expect(await rowsOf("orders_raw", "2026-11-01")).toEqual(before);
        if ("lakeDir" in backend) {
          const plain = "SELECT CAST(order_id AS VARCHAR) || ':' || CAST(amount AS VARCHAR) AS r FROM {table} WHERE day = '2026-11-01' ORDER BY 1";
          const lakeDir = String(backend.lakeDir);
          expect((await readGlob(lakeDir, "orders_raw", 1, plain)).map((r) => String(r[0]))).toEqual(before);
          expect((await readCatalogFile(lakeDir, plain.replace("{table}", "lake.orders_raw"))).map((r) => String(r[0]))).toEqual(before);
        }
        expect(await rowsOf("orders_stage", "2026-11-01")).toEqual(stageBefore);
        expect(report.partitions.find((p) => p.table === "orders_stage" && p.partition === "day=2026-11-01")?.action).toBe("skip");
        // The other partitions of the sync went through.
        expect(report.partitions.find((p) => p.table === "orders_raw" && p.partition === "day=2026-11-02")?.action).toBe("build");
        expect(await rowsOf("orders_raw", "2026-11-02")).toContain(`200:${100 + index}.00`);
        expect(report.totals.failed).toBe(1);
      });
    }

    it("a warn audit on a layer reports its rows and builds the partition", async () => {
      const day3 = dayRows(base, 3).map((r, i) => (i === 0 ? { ...r, amount: "2500.00" } : r));
      const report = await sync([...dayRows(base, 1), ...dayRows(base, 2), ...day3]);
      const stage = report.partitions.find((p) => p.table === "orders_stage" && p.partition === "day=2026-11-03")!;
      expect(stage.action).toBe("build");
      expect(stage.audits).toEqual([expect.objectContaining({ audit: "big_orders", severity: "warn", failing: 1, samples: [{ order_id: 300, amount: "2500.00", order_ts: "2026-11-03 08:15:00", day: "2026-11-03" }] })]);
      expect(await rowsOf("orders_stage", "2026-11-03")).toContain("300:2500.00");
    });

    if (backendName === "local") {
      it("the CLI exits 7 and names the audit, the partition, the count and the failing rows", async () => {
        writeFileSync(path.join(dir, "delivery.csv"), toCsv([...dayRows(base, 1).map((r, i) => (i === 0 ? { ...r, amount: "" } : r)), ...dayRows(base, 2), ...dayRows(base, 3)]));
        const text = await runMain(["sync", "--config", path.join(dir, "lakeswap.yaml"), ...backend.cliArgs], backend.cliEnv);
        expect(text.code).toBe(7);
        expect(text.stdout).toContain("held by audit not_null(amount)");
        expect(text.stdout).toContain("FAIL audit not_null(amount) failed on orders_raw/day=2026-11-01: 1 row with NULL in amount");
        expect(text.stdout).toMatch(/\{"order_id":100,"customer_id":7,"amount":null,/);
        const json = await runMain(["sync", "--json", "--config", path.join(dir, "lakeswap.yaml"), ...backend.cliArgs], backend.cliEnv);
        expect(json.code).toBe(7);
        const parsed = JSON.parse(json.stdout) as SyncReport & { error: { code: string } };
        expect(parsed.error.code).toBe("PARTIAL_FAILURE");
        expect(parsed.partitions.find((p) => p.action === "failed")?.audits?.[0]).toMatchObject({ audit: "not_null(amount)", partition: "day=2026-11-01", failing: 1 });
      });
    }
  });
}
