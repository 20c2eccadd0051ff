import { promises as fs } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { commitIceberg } from "../../src/lake/commit/iceberg-commit.js";
import { replacePartition } from "../../src/lake/operations/replace.js";
import { defineTable } from "../../src/model/table.js";
import { openEmbeddedLake } from "../../src/open/open-lake.js";
import { icebirdRows, validateTable } from "../support/iceberg-kit.js";
import { tempLakes } from "../support/temp-lake.js";

// A schema changed in place (issue #31) is a new Iceberg schema: field ids kept by name, a new column numbered after
// the last, the partition spec still on the key's field, earlier snapshots still read with the schema they had. The
// files written before keep their own Parquet schema (no coupon, n as INT32, amount as DECIMAL(10,2)); an independent
// reader (icebird over HTTP) reads them as the new schema through the name mapping.

const openLake = tempLakes();

const BEFORE = [
  { name: "id", type: "BIGINT" },
  { name: "n", type: "INTEGER" },
  { name: "amount", type: "DECIMAL(10,2)" },
];
const AFTER = [
  { name: "id", type: "BIGINT" },
  { name: "coupon", type: "VARCHAR" },
  { name: "n", type: "BIGINT" },
  { name: "amount", type: "DECIMAL(12,2)" },
];
const BIG_N = 2 ** 31 + 12_345;

interface Field {
  readonly id: number;
  readonly name: string;
  readonly type: string;
}

/** icebird's rows (`icebirdRows`), sorted, a missing value as NULL (icebird gives null for a NULL it read, undefined for a field a file lacks). */
async function icebird(lakeDir: string, columns: readonly string[], version?: number): Promise<string[]> {
  const rows = await icebirdRows(lakeDir, "orders", columns, version);
  return rows.map((row) => row.split("|").map((v) => (v === "null" || v === "undefined" ? "NULL" : v)).join("|")).sort();
}

async function metadataVersion(lakeDir: string, table: string, version: number): Promise<Record<string, any>> {
  return JSON.parse(await fs.readFile(path.join(lakeDir, table, "metadata", `v${version}.metadata.json`), "utf8")) as Record<string, any>;
}

describe("an Iceberg table whose schema changes in place", () => {
  it("records a new schema with field ids kept, reads old files as the new schema and old snapshots as the old one", async () => {
    const { lake, lakeDir } = await openLake((dir) => openEmbeddedLake(dir, { graceMs: 0, leaseWaitMs: 0 }));
    await lake.createTable(defineTable({ name: "orders", columns: BEFORE, partitionKeys: ["day"], iceberg: true }));
    await replacePartition(lake, "orders", "day=2026-11-01", { select: "SELECT range::BIGINT AS id, (range * 10)::INTEGER AS n, (range + 0.25)::DECIMAL(10,2) AS amount FROM range(3)" });
    await replacePartition(lake, "orders", "day=2026-11-02", { select: "SELECT (100 + range)::BIGINT AS id, (-range)::INTEGER AS n, 99999999.75::DECIMAL(10,2) AS amount FROM range(2)" });
    const old = await validateTable(lakeDir, "orders");
    const oldFields = (old.metadata.schemas as { fields: Field[] }[])[0]!.fields;
    expect(oldFields.map((f) => `${f.id}:${f.name}:${f.type}`)).toEqual(["1:id:long", "2:n:int", "3:amount:decimal(10, 2)", "4:day:string"]);

    const changed = await lake.createTable(defineTable({ name: "orders", columns: AFTER, partitionKeys: ["day"], iceberg: true }));
    expect(changed.columns.map((c) => c.name)).toEqual(["id", "coupon", "n", "amount"]);
    await replacePartition(lake, "orders", "day=2026-11-03", {
      select: `SELECT 200::BIGINT AS id, 'SAVE10' AS coupon, ${BIG_N}::BIGINT AS n, 9999999999.5::DECIMAL(12,2) AS amount UNION ALL SELECT 201, NULL, -${BIG_N}, -0.5`,
    });

    const { metadata, snapshots } = await validateTable(lakeDir, "orders");
    // Two schemas: the first as it was, the second current, with the ids of id, n, amount and day kept.
    expect((metadata.schemas as { "schema-id": number }[]).map((s) => s["schema-id"])).toEqual([0, 1]);
    expect(metadata["current-schema-id"]).toBe(1);
    expect((metadata.schemas as { fields: Field[] }[])[0]!.fields).toEqual(oldFields);
    const fields = (metadata.schemas as { fields: Field[] }[])[1]!.fields;
    expect(fields.map((f) => `${f.id}:${f.name}:${f.type}`)).toEqual(["1:id:long", "5:coupon:string", "2:n:long", "3:amount:decimal(12, 2)", "4:day:string"]);
    expect(metadata["last-column-id"]).toBe(5);
    // The partition spec is the one it was: its source id still names the key's field.
    expect(metadata["partition-specs"]).toEqual(old.metadata["partition-specs"]);
    expect(metadata["partition-specs"][0].fields[0]["source-id"]).toBe(fields.find((f) => f.name === "day")?.id);
    // Each snapshot names the schema it was committed with.
    const snapshotSchemas = (metadata.snapshots as { "schema-id": number }[]).map((s) => s["schema-id"]);
    expect(snapshotSchemas.at(-1)).toBe(1);
    expect(snapshotSchemas.slice(0, (old.metadata.snapshots as unknown[]).length)).toEqual((old.metadata.snapshots as unknown[]).map(() => 0));

    // Metrics by the field ids of the schema written: the new file's n bounds are 8-byte longs under id 2, coupon under
    // id 5; the old files' n bounds were widened to 8 bytes (exact), their amount bounds kept.
    const current = snapshots.at(-1)!;
    expect(current.files).toHaveLength(3);
    const byDay = (day: string) => current.files.find((f) => f.partition.day === day)!.metrics;
    expect(byDay("2026-11-03").upper[2]?.readBigInt64LE(0)).toBe(BigInt(BIG_N));
    expect(byDay("2026-11-03").lower[2]?.readBigInt64LE(0)).toBe(BigInt(-BIG_N));
    expect(byDay("2026-11-03").nullCounts[5]).toBe(1);
    expect(byDay("2026-11-03").valueCounts[5]).toBe(2);
    expect(byDay("2026-11-01").upper[2]?.readBigInt64LE(0)).toBe(20n);
    expect(byDay("2026-11-02").lower[2]?.readBigInt64LE(0)).toBe(-1n);
    expect(byDay("2026-11-01").valueCounts[5]).toBeUndefined();
    expect(byDay("2026-11-02").valueCounts[3]).toBe(2);

    // Every row of the current snapshot as the new schema: NULL coupon in the old files, the big n exact. (icebird
    // reads no partition key: it looks the value up in the manifest's partition record by field id, which Avro
    // decoding keys by name; and it reads a DECIMAL as a JavaScript number, so amounts here are exact in binary.)
    const columns = ["id", "coupon", "n", "amount"];
    const oldRows = ["0|NULL|0|0.25", "1|NULL|10|1.25", "2|NULL|20|2.25", "100|NULL|0|99999999.75", "101|NULL|-1|99999999.75"];
    const newRows = [`200|SAVE10|${BIG_N}|9999999999.5`, `201|NULL|-${BIG_N}|-0.5`];
    expect(await icebird(lakeDir, columns)).toEqual([...oldRows, ...newRows].sort());
    // Time travel to the metadata before the change (icebird reads a snapshot as the metadata file naming it current):
    // its snapshot, with its schema, which has no coupon.
    const before = await metadataVersion(lakeDir, "orders", old.version);
    expect(before["current-schema-id"]).toBe(0);
    expect(before.schemas).toHaveLength(1);
    expect(await icebird(lakeDir, columns, old.version)).toEqual([...oldRows].sort());
  });

  it("publishes a schema changed in place with no new snapshot where no file changed, and widens old bounds at the next one", async () => {
    const { lake, lakeDir } = await openLake((dir) => openEmbeddedLake(dir, { graceMs: 0, leaseWaitMs: 0 }));
    await lake.createTable(defineTable({ name: "orders", columns: BEFORE, partitionKeys: ["day"], iceberg: true }));
    await replacePartition(lake, "orders", "day=2026-11-01", { select: "SELECT range::BIGINT AS id, (range - 1)::INTEGER AS n, 1.5::DECIMAL(10,2) AS amount FROM range(3)" });
    const old = await validateTable(lakeDir, "orders");
    const changed = await lake.createTable(defineTable({ name: "orders", columns: AFTER, partitionKeys: ["day"], iceberg: true }));
    // The create-table command that changed it publishes the new schema, with no new snapshot (no file changed); the
    // next command under the lease that moves nothing writes nothing more.
    const schemaOnly = await validateTable(lakeDir, "orders");
    await lake.parts.withLease("orders", "test", async () => undefined);
    expect((await validateTable(lakeDir, "orders")).version).toBe(schemaOnly.version);
    expect(schemaOnly.version).toBe(old.version + 1);
    expect(schemaOnly.metadata["current-schema-id"]).toBe(1);
    expect(schemaOnly.metadata["current-snapshot-id"]).toBe(old.metadata["current-snapshot-id"]);
    expect(schemaOnly.metadata.snapshots).toEqual(old.metadata.snapshots);
    expect(await icebird(lakeDir, ["id", "coupon", "n", "amount"])).toEqual(["0|NULL|-1|1.5", "1|NULL|0|1.5", "2|NULL|1|1.5"]);
    // Committed again with nothing changed: nothing written.
    expect(await lake.parts.withLease("orders", "test", () => commitIceberg(lake.parts, changed))).toBeUndefined();
    expect((await validateTable(lakeDir, "orders")).version).toBe(schemaOnly.version);
    // The next snapshot: the old file's int bounds of n are written as longs (its manifest rewritten, not reused).
    expect(old.snapshots.at(-1)!.files[0]!.metrics.lower[2]).toHaveLength(4);
    await replacePartition(lake, "orders", "day=2026-11-02", { select: "SELECT 7::BIGINT AS id, 'X' AS coupon, 5::BIGINT AS n, 2.5::DECIMAL(12,2) AS amount" });
    const { snapshots } = await validateTable(lakeDir, "orders");
    const oldFile = snapshots.at(-1)!.files.find((f) => f.partition.day === "2026-11-01")!;
    expect(oldFile.metrics.lower[2]?.readBigInt64LE(0)).toBe(-1n);
    expect(oldFile.metrics.upper[2]?.readBigInt64LE(0)).toBe(1n);
    expect(snapshots.at(-1)!.manifests.some((m) => old.snapshots.at(-1)!.manifests.includes(m))).toBe(false);
  });
});
