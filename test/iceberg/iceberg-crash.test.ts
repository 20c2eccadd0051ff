import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { embeddedBackend, runCli, type TestBackend } from "../support/lake-fixture.js";
import { runMain } from "../support/main-cli.js";
import { CRASH_COLUMNS as COLUMNS, CRASH_POINTS as POINTS, CRASH_TABLES as TABLES, crashWorkspace, hiveFiles, hiveRows, icebirdRows, validateTable } from "../support/iceberg-kit.js";

// Invariant 10 under SIGKILL: a sync killed after its Hive pointers moved and before its Iceberg commit, or inside it
// (the new metadata file written, the hint not yet moved), leaves the Iceberg view behind; the next command that
// takes the table's lease brings it in line, and from then on both views read the same rows.

const { ws, fileA, fileB } = crashWorkspace();
const backends: TestBackend[] = [];
afterAll(async () => {
  for (const backend of backends) await backend.cleanup();
  ws.cleanup();
});

/** The table's hinted snapshot files equal the Hive view's current run files, and icebird reads DuckDB's rows. */
async function agrees(lakeDir: string, table: (typeof TABLES)[number]): Promise<boolean> {
  const { metadata, snapshots } = await validateTable(lakeDir, table);
  const current = snapshots.find((s) => s.snapshotId === metadata["current-snapshot-id"]);
  const same = JSON.stringify(current?.files.map((f) => f.key)) === JSON.stringify(await hiveFiles(lakeDir, table));
  if (!same) return false;
  expect(await icebirdRows(lakeDir, table, COLUMNS[table])).toEqual((await hiveRows(lakeDir, table, COLUMNS[table], "day")).rows);
  return true;
}

describe("a sync killed around its Iceberg commit", () => {
  it.each(POINTS)("killed at %s: the next command brings the Iceberg view in line with the pointers", async (point) => {
    const backend = await embeddedBackend();
    backends.push(backend);
    const lakeDir = backend.lakeDir;
    const sync = (file: string): string[] => [...backend.cliArgs, "sync", "-c", ws.configFile, "--input", file, "--json"];
    expect((await runMain(sync(fileA))).code).toBe(0);
    for (const table of TABLES) expect(await agrees(lakeDir, table)).toBe(true);

    const [name, nth = "1"] = point.split("@");
    const killed = await runCli(sync(fileB), { LAKESWAP_FAULT: `${name}:kill@${nth}` });
    expect(killed.signal, killed.stderr).toBe("SIGKILL");
    // The pointers moved to B; the Iceberg view of the table killed in its commit (and of raw, not reached) did not.
    const behind = point.endsWith("@2") ? ["orders_raw"] : ["orders_raw", "orders_stage"];
    for (const table of TABLES) expect(await agrees(lakeDir, table), `${table} agrees after the kill`).toBe(!behind.includes(table));
    // Each table whose commit the kill prevented keeps its mark: the next command under its lease recovers it (a table
    // without a mark is not even checked, so the mark is what recovery rests on).
    const marked = (table: string): boolean => existsSync(path.join(lakeDir, "_lakeswap", "iceberg", `${table}.pending`));
    for (const table of TABLES) expect(marked(table), `${table} marked`).toBe(behind.includes(table));
    const inside = point.startsWith("during") ? (point.endsWith("@2") ? "orders_raw" : "orders_stage") : undefined;
    if (inside) {
      // Killed between the metadata file and the hint: v2 is written, the hint still names v1.
      expect(existsSync(path.join(lakeDir, inside, "metadata", "v2.metadata.json"))).toBe(true);
      expect(readFileSync(path.join(lakeDir, inside, "metadata", "version-hint.text"), "utf8")).toBe("1");
    }

    // The rerun builds nothing (the pointers are on B already) and recovers the Iceberg view under the leases.
    const rerun = await runMain(sync(fileB));
    expect(rerun.code, rerun.stderr).toBe(0);
    for (const table of TABLES) {
      expect(await agrees(lakeDir, table), `${table} agrees after the rerun`).toBe(true);
      const { metadata } = await validateTable(lakeDir, table);
      // Exactly one snapshot for A and one for B: a killed commit's metadata file is adopted, never committed twice.
      expect(metadata.snapshots, table).toHaveLength(2);
      const hint = Number(readFileSync(path.join(lakeDir, table, "metadata", "version-hint.text"), "utf8"));
      expect(hint).toBe(2);
    }
    for (const table of TABLES) expect(marked(table), `${table} marked after the rerun`).toBe(false);
    // A third sync moves nothing and commits nothing.
    expect((await runMain(sync(fileB))).code).toBe(0);
    for (const table of TABLES) expect((await validateTable(lakeDir, table)).version).toBe(2);
  }, 120_000);
});
