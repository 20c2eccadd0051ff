import { existsSync, promises as fs } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { CATALOG_FILE_STATES } from "../../src/lake/layout.js";
import { replacePartition } from "../../src/lake/operations/replace.js";
import { defineTable } from "../../src/model/table.js";
import { runCli, tempDir } from "../support/lake-fixture.js";
import { readCatalogFile } from "../support/plain-reader.js";
import { tempLakes } from "../support/temp-lake.js";

// A command that moves nothing (a resend of a known delivery, gc) still checks that the catalog file shows each table
// it holds as it is. It reads what the file shows from a record kept beside it, `_lakeswap/catalog-file-states.json`,
// instead of opening the file, so that it never loads DuckDB: about a quarter of such a command's time. The record
// is used only for the very file it was written for.

const openLake = tempLakes();
const rows = (tag: string, count: number): string => `SELECT range AS id, '${tag}' AS tag FROM range(${count})`;

/** A lake with table `orders`, one partition of two rows written through lakeswap. */
async function ordersLake(): Promise<string> {
  const { lake, lakeDir } = await openLake();
  await lake.createTable(defineTable({ name: "orders", columns: [{ name: "id", type: "BIGINT" }, { name: "tag", type: "VARCHAR" }], partitionKeys: ["day"] }));
  await replacePartition(lake, "orders", "day=2026-11-01", { select: rows("a", 2), landed: true });
  await lake.close();
  return lakeDir;
}

/** The catalog file's own record of what each view shows (`lakeswap.tables`), read by plain DuckDB. */
async function fileStates(lakeDir: string): Promise<Record<string, string>> {
  const found = await readCatalogFile(lakeDir, "SELECT table_name, pointers FROM lake.lakeswap.tables ORDER BY ALL");
  return Object.fromEntries(found.map(([name, pointers]) => [String(name), String(pointers)]));
}

async function keptStates(lakeDir: string): Promise<Record<string, string> | undefined> {
  const file = path.join(lakeDir, CATALOG_FILE_STATES);
  return existsSync(file) ? (JSON.parse(await fs.readFile(file, "utf8")) as { tables: Record<string, string> }).tables : undefined;
}

/** Runs `lakeswap <args>` in a child process and returns it with the native libraries it loaded (Node's `process.dlopen`). */
async function runRecordingNativeLoads(args: readonly string[]) {
  const scratch = tempDir("lakeswap-native-loads-");
  try {
    const preload = path.join(scratch.dir, "record-dlopen.cjs");
    const loads = path.join(scratch.dir, "loads.txt");
    await fs.writeFile(
      preload,
      `const fs = require("node:fs"); const dlopen = process.dlopen;\n` +
        `process.dlopen = function (module, filename, ...rest) { fs.appendFileSync(${JSON.stringify(loads)}, filename + "\\n"); return dlopen.call(this, module, filename, ...rest); };\n`,
    );
    const result = await runCli(args, { NODE_OPTIONS: `--require ${preload}` });
    const loaded = existsSync(loads) ? (await fs.readFile(loads, "utf8")).split("\n").filter(Boolean) : [];
    return { ...result, loaded };
  } finally {
    scratch.cleanup();
  }
}

describe("what the catalog file shows, kept beside it", () => {
  it("is recorded by every update, and a command that moves nothing reads it instead of the file: DuckDB is never loaded", async () => {
    const lakeDir = await ordersLake();
    expect(await keptStates(lakeDir)).toEqual(await fileStates(lakeDir));
    // gc holds the table's lease and moves nothing: the view is checked against the pointers, from the record.
    const gc = await runRecordingNativeLoads(["gc", "orders", "--lake", lakeDir]);
    expect(gc.code, gc.stderr).toBe(0);
    expect(gc.loaded.filter((file) => file.includes("duckdb"))).toEqual([]);
  });

  it("a lake without the record (from before it, or a record lost to a crash): the first command reads the file and keeps the record", async () => {
    const lakeDir = await ordersLake();
    await fs.rm(path.join(lakeDir, CATALOG_FILE_STATES));
    const first = await runRecordingNativeLoads(["gc", "orders", "--lake", lakeDir]);
    expect(first.code, first.stderr).toBe(0);
    expect(first.loaded.some((file) => file.includes("duckdb"))).toBe(true);
    expect(await keptStates(lakeDir)).toEqual(await fileStates(lakeDir));
    const second = await runRecordingNativeLoads(["gc", "orders", "--lake", lakeDir]);
    expect(second.loaded.filter((file) => file.includes("duckdb"))).toEqual([]);
  });

  it("a record that is not of the file there now is not used: a catalog file put back from before is found stale and rewritten", async () => {
    const lakeDir = await ordersLake();
    const older = path.join(lakeDir, "..", "lake-before.duckdb");
    await fs.copyFile(path.join(lakeDir, "lake.duckdb"), older);
    const replaced = await runCli(["replace", "orders", "--partition", "day=2026-11-01", "--sql", rows("b", 3), "--lake", lakeDir]);
    expect(replaced.code, replaced.stderr).toBe(0);
    // The file from before the replace comes back (a restore, or a writer's rename lost): the record names the newer one.
    await fs.copyFile(older, path.join(lakeDir, "lake.duckdb"));
    const view = async () => (await readCatalogFile(lakeDir, "SELECT count(*) FROM lake.orders"))[0]?.[0];
    expect(await view()).toBe(2n);
    const gc = await runCli(["gc", "orders", "--lake", lakeDir]);
    expect(gc.code, gc.stderr).toBe(0);
    expect(await view()).toBe(3n);
    expect(await keptStates(lakeDir)).toEqual(await fileStates(lakeDir));
  });

  it("a lake whose last table is dropped keeps no record", async () => {
    const lakeDir = await ordersLake();
    const dropped = await runCli(["drop-table", "orders", "--lake", lakeDir]);
    expect(dropped.code, dropped.stderr).toBe(0);
    expect(existsSync(path.join(lakeDir, "lake.duckdb"))).toBe(false);
    expect(await keptStates(lakeDir)).toBeUndefined();
  });
});
