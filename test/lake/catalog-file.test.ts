import { promises as fs } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import type { Lake } from "../../src/lake/lake.js";
import { dropTable } from "../../src/lake/operations/drop-table.js";
import { collectGarbage } from "../../src/lake/operations/gc.js";
import { replacePartition } from "../../src/lake/operations/replace.js";
import { rollbackPartition } from "../../src/lake/operations/rollback.js";
import { defineTable } from "../../src/model/table.js";
import { openEmbeddedLake } from "../../src/open/open-lake.js";
import { runCli, tempDir } from "../support/lake-fixture.js";
import { tempLakes } from "../support/temp-lake.js";
import { DuckDBInstance } from "@duckdb/node-api";
import { readCatalogFile } from "../support/plain-reader.js";

// Issue 29 item 4: after every command that moves pointers, <lake>/lake.duckdb holds one view per table over the
// exact files of its current runs, which plain DuckDB opens read-only (no lakeswap code in the reading instance).

const openLake = tempLakes();
/** Each partition's rows and tags in the catalog file's view of `table`, as `day:rows:tags`. */
async function viewed(lakeDir: string, table: string, key = "day"): Promise<string[]> {
  const rows = await readCatalogFile(lakeDir, `SELECT ${key}, count(*), string_agg(DISTINCT tag, ',' ORDER BY tag) FROM lake.${table} GROUP BY ALL ORDER BY ALL`);
  return rows.map(([value, count, tags]) => `${String(value)}:${Number(count)}:${String(tags)}`);
}

const rows = (tag: string, count: number): string => `SELECT range AS id, '${tag}' AS tag FROM range(${count})`;

async function ordersLake(dir?: string): Promise<{ lake: Lake; lakeDir: string }> {
  const opened = await openLake(dir === undefined ? undefined : () => openEmbeddedLake(dir));
  await opened.lake.createTable(defineTable({ name: "orders", columns: [{ name: "id", type: "BIGINT" }, { name: "tag", type: "VARCHAR" }], partitionKeys: ["day"] }));
  return dir === undefined ? opened : { lake: opened.lake, lakeDir: dir };
}

describe("the catalog file lake.duckdb", () => {
  it("follows replace and rollback: the current rows of each partition, the declared columns and VARCHAR partition columns", async () => {
    const { lake, lakeDir } = await ordersLake();
    await replacePartition(lake, "orders", "day=2026-11-01", { select: rows("a", 3), landed: true });
    await replacePartition(lake, "orders", "day=2026-11-02", { select: rows("a", 4), landed: true });
    expect(await viewed(lakeDir, "orders")).toEqual(["2026-11-01:3:a", "2026-11-02:4:a"]);
    await replacePartition(lake, "orders", "day=2026-11-01", { select: rows("b", 5), landed: true });
    expect(await viewed(lakeDir, "orders")).toEqual(["2026-11-01:5:b", "2026-11-02:4:a"]);
    await rollbackPartition(lake, "orders", "day=2026-11-01");
    expect(await viewed(lakeDir, "orders")).toEqual(["2026-11-01:3:a", "2026-11-02:4:a"]);

    expect(await readCatalogFile(lakeDir, "SELECT column_name, column_type FROM (DESCRIBE lake.orders)")).toEqual([
      ["id", "BIGINT"],
      ["tag", "VARCHAR"],
      ["day", "VARCHAR"],
    ]);
    // Every path a view reads is a run's immutable file, absolute, never a pointer's path.
    const sql = String((await readCatalogFile(lakeDir, "SELECT sql FROM duckdb_views() WHERE view_name = 'orders'"))[0]?.[0]);
    expect(sql).toContain(`${path.resolve(lakeDir)}/orders/_runs/day=2026-11-01/run=`);
    expect(sql).not.toMatch(/orders\/day=/);
    expect(await readCatalogFile(lakeDir, "SELECT table_name, partitions, files FROM lake.lakeswap.tables")).toEqual([["orders", 2n, 2n]]);
    // The CLI's form: the file opened read-only as the database itself (`duckdb -readonly lake/lake.duckdb`).
    const instance = await DuckDBInstance.create(path.join(lakeDir, "lake.duckdb"), { access_mode: "READ_ONLY" });
    const connection = await instance.connect();
    expect((await connection.runAndReadAll("SELECT sum(id) FROM orders")).getRowsJS()).toEqual([[3n + 6n]]);
    connection.closeSync();
    instance.closeSync();
  });

  it("a file written by an earlier lakeswap (its record tables without the newer columns) gains them with the next command, and its views follow", async () => {
    const { lake, lakeDir } = await ordersLake();
    await replacePartition(lake, "orders", "day=2026-11-01", { select: rows("a", 3), landed: true });
    await lake.close();
    // The record tables as a lakeswap before their newer columns made them.
    const file = path.join(lakeDir, "lake.duckdb");
    await fs.rm(file);
    const older = await DuckDBInstance.create(file);
    const connection = await older.connect();
    await connection.run(
      "CREATE SCHEMA lakeswap; CREATE TABLE lakeswap.tables (table_name VARCHAR, partitions BIGINT, files BIGINT, updated_at TIMESTAMP); " +
        "CREATE TABLE lakeswap.history (table_name VARCHAR, sync_id VARCHAR, view_name VARCHAR, created_at TIMESTAMP, superseded_at TIMESTAMP)",
    );
    connection.closeSync();
    older.closeSync();
    const reopened = await openEmbeddedLake(lakeDir);
    try {
      await replacePartition(reopened, "orders", "day=2026-11-02", { select: rows("b", 4), landed: true });
    } finally {
      await reopened.close();
    }
    expect(await viewed(lakeDir, "orders")).toEqual(["2026-11-01:3:a", "2026-11-02:4:b"]);
    const columns = await readCatalogFile(lakeDir, "SELECT table_name, list(column_name ORDER BY column_index) FROM duckdb_columns() WHERE schema_name = 'lakeswap' GROUP BY ALL ORDER BY ALL");
    expect(columns).toEqual([
      ["history", ["table_name", "sync_id", "view_name", "created_at", "superseded_at", "definition", "overrides", "next_view"]],
      ["tables", ["table_name", "partitions", "files", "updated_at", "pointers", "state"]],
    ]);
  });

  it("has a view for a table without partition keys, an empty table (no rows, its columns) and none for a dropped table", async () => {
    const { lake, lakeDir } = await ordersLake();
    await lake.createTable(defineTable({ name: "countries", columns: [{ name: "code", type: "VARCHAR" }, { name: "tag", type: "VARCHAR" }], partitionKeys: [] }));
    await replacePartition(lake, "countries", "", { select: "SELECT 'fr' AS code, 'a' AS tag UNION ALL SELECT 'de', 'a'", landed: true });
    await lake.write(["orders"], "nothing", async () => undefined);
    expect(await readCatalogFile(lakeDir, "SELECT code FROM lake.countries ORDER BY code")).toEqual([["de"], ["fr"]]);
    expect(await readCatalogFile(lakeDir, "SELECT count(*) FROM lake.orders")).toEqual([[0n]]);
    expect(await readCatalogFile(lakeDir, "SELECT column_name, column_type FROM (DESCRIBE lake.orders)")).toEqual([
      ["id", "BIGINT"],
      ["tag", "VARCHAR"],
      ["day", "VARCHAR"],
    ]);
    await dropTable(lake, "countries");
    expect(await readCatalogFile(lakeDir, "SELECT view_name FROM duckdb_views() WHERE NOT internal AND schema_name = 'main' ORDER BY 1")).toEqual([["orders"]]);
    expect(await readCatalogFile(lakeDir, "SELECT table_name FROM lake.lakeswap.tables")).toEqual([["orders"]]);
  });

  it("quotes every path and value: a lake folder with quotes, spaces, '=', '%' and glob characters, partition values with '.', '-' and '_'", async () => {
    const { dir } = tempDir();
    const lakeDir = path.join(dir, "it's a [lake] x=1 %41*?");
    const { lake } = await ordersLake(lakeDir);
    await lake.createTable(defineTable({ name: "events", columns: [{ name: "id", type: "BIGINT" }, { name: "tag", type: "VARCHAR" }], partitionKeys: ["region", "day"] }));
    for (const [region, day, count] of [["eu-west.1", "2026-11-01", 2], ["us_east-2", "2026-11-01", 3], ["us_east-2", "v1.2_b-c", 4]] as const) {
      await replacePartition(lake, "events", { keys: ["region", "day"], values: [region, day] }, { select: rows(region, count), landed: true });
    }
    const seen = await readCatalogFile(lakeDir, "SELECT region, day, count(*), min(tag) FROM lake.events GROUP BY ALL ORDER BY ALL");
    expect(seen).toEqual([
      ["eu-west.1", "2026-11-01", 2n, "eu-west.1"],
      ["us_east-2", "2026-11-01", 3n, "us_east-2"],
      ["us_east-2", "v1.2_b-c", 4n, "us_east-2"],
    ]);
  });

  it("keeps both tables' newest state when writers of two tables update it at the same time", async () => {
    const { lake, lakeDir } = await ordersLake();
    await lake.createTable(defineTable({ name: "refunds", columns: [{ name: "id", type: "BIGINT" }, { name: "tag", type: "VARCHAR" }], partitionKeys: ["day"] }));
    // A second lake on the same folder: another writer, with its own catalog file updates.
    const other = await openEmbeddedLake(lakeDir);
    try {
      for (let round = 1; round <= 6; round += 1) {
        await Promise.all([
          replacePartition(lake, "orders", "day=2026-11-01", { select: rows(`o${round}`, round), landed: true }),
          replacePartition(other, "refunds", "day=2026-11-01", { select: rows(`r${round}`, round + 10), landed: true }),
        ]);
        expect([...(await viewed(lakeDir, "orders")), ...(await viewed(lakeDir, "refunds"))]).toEqual([`2026-11-01:${round}:o${round}`, `2026-11-01:${round + 10}:r${round}`]);
      }
    } finally {
      await other.close();
    }
    // No temporary copy is left behind.
    expect((await fs.readdir(path.join(lakeDir, "_lakeswap", "tmp"))).filter((name) => name.includes("catalog"))).toEqual([]);
  });

  it("a view left behind by a writer killed between its moves and its rewrite is brought up to date by the next command under the table's lease (gc too)", async () => {
    const { lake, lakeDir } = await ordersLake();
    await replacePartition(lake, "orders", "day=2026-11-01", { select: rows("a", 2), landed: true });
    await lake.close();
    // Killed after the pointer moved and its manifest was written: the command never rewrote lake.duckdb.
    const killed = await runCli(["replace", "orders", "--partition", "day=2026-11-01", "--sql", rows("b", 3), "--lake", lakeDir], { LAKESWAP_FAULT: "after-manifest:kill" });
    expect(killed.signal, killed.stderr).toBe("SIGKILL");
    const glob = async () => (await readCatalogFile(lakeDir, `SELECT count(*) FROM read_parquet('${lakeDir}/orders/*/*.parquet')`))[0]?.[0];
    const view = async () => (await readCatalogFile(lakeDir, "SELECT count(*) FROM lake.orders"))[0]?.[0];
    expect([await glob(), await view()]).toEqual([3n, 2n]);
    // gc moves no pointer, but it holds the table's lease: the stale view is rewritten.
    const gc = await runCli(["gc", "orders", "--lake", lakeDir]);
    expect(gc.code, gc.stderr).toBe(0);
    expect([await glob(), await view()]).toEqual([3n, 3n]);
  });

  it("never fails a command: a catalog file that cannot be written is left as it is, with a warning, and the next write rewrites it", async () => {
    const { lake, lakeDir } = await ordersLake();
    const file = path.join(lakeDir, "lake.duckdb");
    // Something that is not a database file stands where it goes.
    await fs.mkdir(file);
    const warnings: string[] = [];
    const onWarning = (warning: Error & { code?: string }): void => {
      if (warning.code === "LAKESWAP_CATALOG_FILE") warnings.push(warning.message);
    };
    process.on("warning", onWarning);
    try {
      expect((await replacePartition(lake, "orders", "day=2026-11-01", { select: rows("a", 3), landed: true })).rows).toBe(3);
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.off("warning", onWarning);
    }
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain(`${file} was not updated for orders`);
    expect((await fs.stat(file)).isDirectory()).toBe(true);
    await fs.rmdir(file);
    await replacePartition(lake, "orders", "day=2026-11-02", { select: rows("b", 2), landed: true });
    expect(await viewed(lakeDir, "orders")).toEqual(["2026-11-01:3:a", "2026-11-02:2:b"]);
  });

  it("GC keeps a run that stopped being current within the grace window, however old the run is: an older catalog file may still name it", async () => {
    const { lake, lakeDir } = await ordersLake();
    const ids: string[] = [];
    for (const tag of ["a", "b", "c"]) ids.push((await replacePartition(lake, "orders", "day=2026-11-01", { select: rows(tag, 2), landed: true })).runId);
    const [a, b] = ids as [string, string, string];
    // Run a, made long ago (its folder and manifest renamed to an old id), was current until b's swap, just now.
    const old = "20200101T000000Z-0a0a0a";
    const manifests = path.join(lakeDir, "_lakeswap", "manifests", "orders", "day=2026-11-01");
    const runs = path.join(lakeDir, "orders", "_runs", "day=2026-11-01");
    await fs.rename(path.join(runs, `run=${a}`), path.join(runs, `run=${old}`));
    const manifestA = JSON.parse(await fs.readFile(path.join(manifests, `${a}.json`), "utf8")) as Record<string, unknown>;
    await fs.writeFile(path.join(manifests, `${old}.json`), JSON.stringify({ ...manifestA, runId: old }));
    await fs.rm(path.join(manifests, `${a}.json`));
    const manifestB = JSON.parse(await fs.readFile(path.join(manifests, `${b}.json`), "utf8")) as Record<string, unknown>;
    await fs.writeFile(path.join(manifests, `${b}.json`), JSON.stringify({ ...manifestB, previousRunId: old }));
    const decision = async () => {
      const [report] = await collectGarbage(lake, "orders", { dryRun: true, graceMs: 3_600_000 });
      return [...report!.kept, ...report!.removed].find((r) => r.runId === old)?.reason;
    };
    expect(await decision()).toBe("replaced within grace window");
    // Replaced 2 hours ago, with a window of 1 hour: it goes.
    await fs.writeFile(path.join(manifests, `${b}.json`), JSON.stringify({ ...manifestB, previousRunId: old, swappedAt: new Date(Date.now() - 7_200_000).toISOString() }));
    expect(await decision()).toBe("superseded");
  });
});
