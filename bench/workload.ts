import { defineTable, type TableDefinition } from "../src/model/table.js";

/** Rows in the small partition of the swap benchmark. */
export const SMALL_ROWS = 1_000;

/** Rows in the large partition (and in the replace benchmark). */
export const LARGE_ROWS = 1_000_000;

/** The benchmark table: one partition key, the columns the generating SELECT returns. */
export const BENCH_TABLE: TableDefinition = defineTable({
  name: "orders",
  columns: [
    { name: "id", type: "BIGINT" },
    { name: "customer", type: "VARCHAR" },
    { name: "amount", type: "DECIMAL(10,2)" },
    { name: "ts", type: "TIMESTAMP" },
  ],
  partitionKeys: ["day"],
  compression: "snappy",
});

/** A SELECT that generates `rows` rows of the benchmark table from DuckDB's range(). */
export function generatingSelect(rows: number): string {
  if (!Number.isSafeInteger(rows) || rows < 0) throw new Error(`row count must be a non-negative integer, got ${rows}`);
  return [
    "SELECT range AS id,",
    "  'customer-' || (range % 10000) AS customer,",
    "  CAST((range % 100000) / 100 AS DECIMAL(10,2)) AS amount,",
    "  TIMESTAMP '2026-11-01' + to_seconds(range % 86400) AS ts",
    `FROM range(${rows})`,
  ].join("\n");
}
