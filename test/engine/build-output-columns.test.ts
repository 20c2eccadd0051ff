// A build's output columns are learned by binding its SELECT over its inputs' shape (their columns, without a file),
// not over every file of its inputs: they depend on the inputs' columns only. (A PIVOT without an IN list, whose
// columns would be values read from the rows, is two statements to DuckDB, and refused as a layer's SQL.)
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Lake } from "../../src/lake/lake.js";
import { replacePartition } from "../../src/lake/operations/replace.js";
import { defineTable } from "../../src/model/table.js";
import { openEmbeddedLake } from "../../src/open/open-lake.js";
import { tempDir } from "../support/lake-fixture.js";

let workspace: ReturnType<typeof tempDir>;
let lake: Lake;
beforeAll(async () => {
  workspace = tempDir("lakeswap-build-columns-");
  lake = await openEmbeddedLake(path.join(workspace.dir, "lake"));
  await lake.createTable(defineTable({ name: "orders", columns: [{ name: "id", type: "BIGINT" }, { name: "status", type: "VARCHAR" }], partitionKeys: ["day"] }));
  await replacePartition(lake, "orders", "day=2026-11-01", { select: "SELECT range AS id, CASE WHEN range % 4 = 0 THEN 'cancelled' ELSE 'completed' END AS status FROM range(10)" });
});
afterAll(async () => {
  await lake.close();
  workspace.cleanup();
});

describe("a build's output columns", () => {
  it("of a PIVOT and of SELECT *, every declared column filled from the output column of its name", async () => {
    await lake.createTable(defineTable({ name: "by_status", columns: [{ name: "completed", type: "BIGINT" }, { name: "cancelled", type: "BIGINT" }], partitionKeys: ["day"] }));
    const pivot = "PIVOT (SELECT status FROM orders WHERE day = '2026-11-01') ON status IN ('cancelled', 'completed') USING count(*)";
    await replacePartition(lake, "by_status", "day=2026-11-01", { select: pivot });
    expect((await lake.query("SELECT completed, cancelled FROM by_status")).rows.map((r) => r.map(Number))).toEqual([[7, 3]]);
    await lake.createTable(defineTable({ name: "copied", columns: [{ name: "status", type: "VARCHAR" }, { name: "id", type: "BIGINT" }], partitionKeys: ["day"] }));
    await replacePartition(lake, "copied", "day=2026-11-01", { select: "SELECT * FROM orders" });
    expect((await lake.query("SELECT count(*), sum(id), count(DISTINCT status) FROM copied")).rows.map((r) => r.map(Number))).toEqual([[10, 45, 2]]);
  });

  it("of a SELECT naming a column its input lacks: refused as DuckDB binds it, the line counted in the SELECT, nothing moved", async () => {
    await lake.createTable(defineTable({ name: "ids", columns: [{ name: "id", type: "BIGINT" }], partitionKeys: ["day"] }));
    const failed = replacePartition(lake, "ids", "day=2026-11-01", { select: "SELECT id\nFROM orders\nWHERE no_such_column = 1" });
    await expect(failed).rejects.toThrow(/the SELECT failed: Binder Error: Referenced column "no_such_column" not found.*LINE 3:/s);
    expect(await lake.pointer("ids", "day=2026-11-01")).toBeUndefined();
  });

  // Bound once per shape: the SELECT with the partition's values taken out, over the inputs' columns and types.
  it("are bound once per shape of the SELECT, yet follow each partition's own SELECT, a changed input and an unaliased partition value", async () => {
    await lake.createTable(defineTable({ name: "shaped", columns: [{ name: "id", type: "BIGINT" }, { name: "tag", type: "VARCHAR" }], partitionKeys: ["day"] }));
    const select = (day: string, tag: string) => `SELECT id, ${tag} FROM orders WHERE day = '${day}'`;
    for (const day of ["2026-11-01", "2026-11-02"]) await replacePartition(lake, "shaped", `day=${day}`, { select: select("2026-11-01", `'${day}' AS tag`) });
    expect((await lake.query("SELECT day, count(*), min(tag) FROM shaped GROUP BY day ORDER BY day")).rows).toEqual([["2026-11-01", 10, "2026-11-01"], ["2026-11-02", 10, "2026-11-02"]]);
    // The same SELECT, but a column its value makes: its name is that partition's, whichever partition was bound first.
    for (const day of ["2026-11-03", "2026-11-04"]) {
      const failed = replacePartition(lake, "shaped", `day=${day}`, { select: `SELECT id, status AS tag, '${day}' FROM orders` });
      await expect(failed).rejects.toThrow(new RegExp(`shaped/day=${day} does not match the table: table 'shaped' has no column '${day}'`));
    }
    // The input gains a column: the same SELECT * is bound again, and now gives it.
    await lake.createTable(defineTable({ name: "star", columns: [{ name: "id", type: "BIGINT" }, { name: "status", type: "VARCHAR" }, { name: "note", type: "VARCHAR" }], partitionKeys: ["day"] }));
    await expect(replacePartition(lake, "star", "day=2026-11-01", { select: "SELECT * FROM orders" })).rejects.toThrow(/it lacks column note/);
    await lake.createTable(defineTable({ name: "orders", columns: [{ name: "id", type: "BIGINT" }, { name: "status", type: "VARCHAR" }, { name: "note", type: "VARCHAR" }], partitionKeys: ["day"] }));
    await replacePartition(lake, "star", "day=2026-11-01", { select: "SELECT * FROM orders" });
    expect((await lake.query("SELECT count(*), count(note) FROM star")).rows).toEqual([[10, 0]]);
  });
});
