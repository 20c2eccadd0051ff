import { rmSync } from "node:fs";
import path from "node:path";
import { DuckDBInstance } from "@duckdb/node-api";
import { describe, expect, it } from "vitest";
import { replacePartition } from "../../src/lake/operations/replace.js";
import { defineTable } from "../../src/model/table.js";
import { openEmbeddedLake } from "../../src/open/open-lake.js";
import { validateTable, type FileMetricsView } from "../support/iceberg-kit.js";
import { tempLakes } from "../support/temp-lake.js";

// Engines prune data files by the manifests' column metrics: every bound lakeswap writes must hold every value of its
// file (a bound too tight makes an engine skip rows silently), and a bound it cannot know exactly is left out. Checked
// against plain DuckDB's min, max and counts of each file, decoded here with the spec's single-value serialization.

const COLUMNS = [
  { name: "id", type: "BIGINT", iceberg: "long" },
  { name: "qty", type: "INTEGER", iceberg: "int" },
  { name: "small", type: "SMALLINT", iceberg: "int" },
  { name: "amount", type: "DECIMAL(10,2)", iceberg: "decimal(10, 2)" },
  { name: "huge", type: "DECIMAL(18,4)", iceberg: "decimal(18, 4)" },
  { name: "wide", type: "DECIMAL(38,0)", iceberg: "decimal(38, 0)" },
  { name: "ratio", type: "DOUBLE", iceberg: "double" },
  { name: "score", type: "FLOAT", iceberg: "float" },
  { name: "day_of", type: "DATE", iceberg: "date" },
  { name: "at", type: "TIMESTAMP", iceberg: "timestamp" },
  { name: "at_tz", type: "TIMESTAMPTZ", iceberg: "timestamptz" },
  { name: "flag", type: "BOOLEAN", iceberg: "boolean" },
  { name: "note", type: "VARCHAR", iceberg: "string" },
  { name: "empty", type: "INTEGER", iceberg: "int" },
] as const;

/** Rows with NULLs, negatives, -0.0 beside 0.0, sub-millisecond times and (in `huge`) unscaled values past 2^50. */
function select(rows: number, offset: number): string {
  return `SELECT (range - ${offset})::BIGINT AS id, (range % 1000 - 500)::INTEGER AS qty, CASE WHEN range % 7 = 0 THEN NULL ELSE (range % 300 - 150)::SMALLINT END AS small,
    ((range % 20000) / 100 - 100)::DECIMAL(10,2) AS amount, ((range % 1000) * 1e11)::DECIMAL(18,4) AS huge, (range - 5)::DECIMAL(38,0) AS wide,
    CASE WHEN range = 3 THEN -0.0 WHEN range = 4 THEN 0.0 ELSE (range % 97) / 7.0 - 5 END::DOUBLE AS ratio, ((range % 11) * 0.5 - 2)::FLOAT AS score,
    (DATE '2026-11-01' + (range % 40 - 20)::INTEGER) AS day_of, TIMESTAMP '2026-11-01 00:00:00' + to_microseconds(range * 1001) AS at,
    (TIMESTAMPTZ '2026-11-01 00:00:00+00' - to_microseconds(range * 3)) AS at_tz, range % 3 = 0 AS flag, 'n' || range AS note, NULL::INTEGER AS empty
    FROM range(${rows})`;
}

/** The value a bound holds, per the spec's single-value serialization, as text DuckDB would print. */
function decode(type: string, bytes: Buffer): string {
  if (type === "int" || type === "date") return String(bytes.readInt32LE(0));
  if (type === "long" || type.startsWith("timestamp")) return String(bytes.readBigInt64LE(0));
  if (type === "float") return String(bytes.readFloatLE(0));
  if (type === "double") return String(bytes.readDoubleLE(0));
  if (type === "boolean") return String(bytes[0]);
  const scale = Number(/, (\d+)\)$/.exec(type)?.[1]);
  let unscaled = 0n;
  for (const byte of bytes) unscaled = (unscaled << 8n) | BigInt(byte);
  if ((bytes[0] ?? 0) & 0x80) unscaled -= 1n << BigInt(bytes.length * 8);
  const digits = (unscaled < 0n ? -unscaled : unscaled).toString().padStart(scale + 1, "0");
  return `${unscaled < 0n ? "-" : ""}${digits.slice(0, digits.length - scale)}${scale > 0 ? `.${digits.slice(-scale)}` : ""}`;
}

/** DuckDB's min and max of a column in one file, as `decode` prints them. */
function asText(type: string, column: string): string {
  if (type === "date") return `(${column} - DATE '1970-01-01')`;
  if (type.startsWith("timestamp")) return `epoch_us(${column})`;
  if (type === "boolean") return `${column}::INTEGER`;
  if (type === "float" || type === "double") return `${column}::DOUBLE`;
  return column;
}

const openLake = tempLakes();

describe("Iceberg manifests carry each data file's column metrics", () => {
  it("value and null counts for every column; exact lower and upper bounds where the footer gives them, none elsewhere", async () => {
    const { lake, lakeDir } = await openLake((dir) => openEmbeddedLake(dir, { graceMs: 0, leaseWaitMs: 0 }));
    await lake.createTable(defineTable({ name: "facts", columns: COLUMNS.map((c) => ({ name: c.name, type: c.type })), partitionKeys: ["day"], iceberg: true }));
    // One partition of several row groups (DuckDB writes 122,880 rows per group), one small, one with a single row.
    await replacePartition(lake, "facts", "day=2026-11-01", { select: select(300_000, 1000) });
    await replacePartition(lake, "facts", "day=2026-11-02", { select: select(50, -7) });
    await replacePartition(lake, "facts", "day=2026-11-03", { select: select(1, 0) });
    const { metadata, snapshots } = await validateTable(lakeDir, "facts");
    const fields = (metadata.schemas as { fields: { id: number; name: string; type: string }[] }[])[0]!.fields;
    const current = snapshots.at(-1)!;
    expect(current.files).toHaveLength(3);
    const duck = await (await DuckDBInstance.create(":memory:")).connect();
    let bounded = 0;
    for (const file of current.files) {
      const metrics: FileMetricsView = file.metrics;
      const at = path.join(lakeDir, file.key).replace(/'/g, "''");
      for (const column of COLUMNS) {
        const id = fields.find((f) => f.name === column.name)!.id;
        const reader = await duck.runAndReadAll(
          `SELECT count(*)::VARCHAR, (count(*) - count("${column.name}"))::VARCHAR, min(${asText(column.iceberg, `"${column.name}"`)})::VARCHAR, max(${asText(column.iceberg, `"${column.name}"`)})::VARCHAR FROM read_parquet('${at}')`,
        );
        const [rows, nulls, min, max] = reader.getRows()[0]!.map((v) => (v === null ? null : String(v)));
        const where = `${column.name} in ${file.key}`;
        expect(String(metrics.valueCounts[id]), where).toBe(rows);
        expect(String(metrics.nullCounts[id]), where).toBe(nulls);
        const [lower, upper] = [metrics.lower[id], metrics.upper[id]];
        expect(lower === undefined, `${where}: both bounds or neither`).toBe(upper === undefined);
        // Strings (a writer may truncate them), 38-digit decimals, unscaled values past 2^50 and all-NULL columns: no bounds.
        const unknowable = column.iceberg === "string" || column.name === "wide" || (column.name === "huge" && file.records > 1) || min === null;
        if (unknowable) {
          expect(lower, where).toBeUndefined();
          continue;
        }
        expect(lower, where).toBeDefined();
        bounded += 1;
        const eq = (a: string, b: string | null | undefined): boolean => (column.iceberg === "float" || column.iceberg === "double" ? Number(a) === Number(b) : a === b);
        expect(eq(decode(column.iceberg, lower!), min), `${where}: lower ${decode(column.iceberg, lower!)} = min ${min}`).toBe(true);
        expect(eq(decode(column.iceberg, upper!), max), `${where}: upper ${decode(column.iceberg, upper!)} = max ${max}`).toBe(true);
      }
    }
    expect(bounded).toBeGreaterThanOrEqual(3 * 10);
    const first = current.files.find((f) => f.partition.day === "2026-11-01")!;
    // A replace carries the other partitions' entries (with their metrics) into the next manifest unchanged.
    await replacePartition(lake, "facts", "day=2026-11-02", { select: select(10, 3) });
    const after = (await validateTable(lakeDir, "facts")).snapshots.at(-1)!;
    const kept = after.files.find((f) => f.key === first.key);
    expect(kept?.metrics).toEqual(first.metrics);
    // The commit took the metrics the audit read from each new file's footer; read again from the footers (another
    // process republishing the table from scratch), they are the same.
    await lake.close();
    rmSync(path.join(lakeDir, "facts", "metadata"), { recursive: true });
    const again = await openEmbeddedLake(lakeDir, { graceMs: 0, leaseWaitMs: 0 });
    try {
      await replacePartition(again, "facts", "day=2026-11-03", { select: select(1, 0) });
    } finally {
      await again.close();
    }
    const republished = (await validateTable(lakeDir, "facts")).snapshots.at(-1)!;
    for (const file of after.files.filter((f) => f.partition.day !== "2026-11-03")) {
      expect(republished.files.find((f) => f.key === file.key)?.metrics, file.key).toEqual(file.metrics);
    }
  }, 120_000);
});
