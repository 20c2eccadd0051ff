import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { awsBackend, runCli } from "../support/lake-fixture.js";
import { runMain } from "../support/main-cli.js";
import { AwsLakeReader, agreeOnAws } from "../support/iceberg-aws-kit.js";
import { CRASH_COLUMNS as COLUMNS, CRASH_POINTS as POINTS, CRASH_TABLES as TABLES, crashWorkspace } from "../support/iceberg-kit.js";

// Invariant 10 under SIGKILL on AWS: a sync killed after its Hive pointers moved and before its Iceberg commit, or
// inside it (the uniquely named metadata file written, Glue's UpdateTable not made), leaves Glue's metadata_location
// where it was; the next command that takes the table's lease commits the current runs, and from then on both views
// read the same rows. A killed commit's metadata file is never adopted: the metadata log goes from the first sync's
// metadata straight to the rerun's.

const { ws, fileA, fileB } = crashWorkspace();
const cleanups: (() => Promise<void> | void)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  ws.cleanup();
});

/** Whether the current snapshot of the table Glue names holds exactly the Hive view's current run files. */
async function inLine(reader: AwsLakeReader, table: string): Promise<boolean> {
  const { metadata, snapshots } = await reader.validate(table);
  const current = snapshots.find((s) => s.snapshotId === metadata["current-snapshot-id"]);
  return JSON.stringify(current?.files.map((f) => f.key)) === JSON.stringify(await reader.hiveFiles(table));
}

describe("a sync on AWS killed around its Iceberg commit", () => {
  it.each(POINTS)("killed at %s: Glue keeps the old metadata_location; the next command commits the current runs", async (point) => {
    const backend = await awsBackend();
    const reader = new AwsLakeReader(backend.services, backend.target);
    cleanups.push(() => backend.cleanup(), () => reader.close());
    const sync = (file: string): string[] => [...backend.cliArgs, "sync", "-c", ws.configFile, "--input", file, "--json"];
    const first = await runMain(sync(fileA), backend.cliEnv);
    expect(first.code, first.stderr).toBe(0);
    const before = new Map<string, string>();
    for (const table of TABLES) before.set(table, (await agreeOnAws(reader, table, COLUMNS[table])).metadataLocation);

    const [name, nth = "1"] = point.split("@");
    const killed = await runCli(sync(fileB), { ...backend.cliEnv, LAKESWAP_FAULT: `${name}:kill@${nth}` });
    expect(killed.signal, killed.stderr).toBe("SIGKILL");
    // The pointers moved to B; the Iceberg view of the table killed in its commit (and of raw, not reached) did not.
    const behind = point.endsWith("@2") ? ["orders_raw"] : ["orders_raw", "orders_stage"];
    for (const table of TABLES) {
      const glue = await reader.icebergTable(table);
      expect(glue.metadataLocation === before.get(table), `${table}'s metadata_location is the first sync's`).toBe(behind.includes(table));
      expect(await inLine(reader, table), `${table} in line after the kill`).toBe(!behind.includes(table));
    }
    const inside = point.startsWith("during") ? (point.endsWith("@2") ? "orders_raw" : "orders_stage") : undefined;
    const metadataFiles = async (table: string): Promise<string[]> => (await reader.list(`${table}/metadata/`)).filter((key) => key.endsWith(".metadata.json"));
    if (inside) {
      // Killed between its metadata file and Glue's UpdateTable: the file is there, and nothing names it.
      const files = await metadataFiles(inside);
      expect(files).toHaveLength(2);
      expect(files.map((key) => reader.uri(key))).toContain(before.get(inside));
    }

    // The rerun builds nothing (the pointers are on B already) and commits each table's current runs under its lease.
    const rerun = await runMain(sync(fileB), backend.cliEnv);
    expect(rerun.code, rerun.stderr).toBe(0);
    for (const table of TABLES) {
      const view = await agreeOnAws(reader, table, COLUMNS[table]);
      // One snapshot for A and one for B; the chain goes from A's metadata to the new one, never through a killed commit's file.
      expect(view.snapshots, table).toHaveLength(2);
      expect(view.previous).toBe(before.get(table));
      expect(view.log).toEqual([before.get(table)]);
      expect(path.basename(view.metadataLocation)).toMatch(/^00002-/);
    }
    // A third sync moves nothing and commits nothing.
    const after = new Map<string, string>();
    for (const table of TABLES) after.set(table, (await reader.icebergTable(table)).metadataLocation);
    expect((await runMain(sync(fileB), backend.cliEnv)).code).toBe(0);
    for (const table of TABLES) expect((await reader.icebergTable(table)).metadataLocation).toBe(after.get(table));
  }, 180_000);
});
