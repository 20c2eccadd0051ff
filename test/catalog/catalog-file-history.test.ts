import { mkdirSync, statSync } from "node:fs";
import path from "node:path";
import { DuckDBInstance, type DuckDBConnection } from "@duckdb/node-api";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_CHAIN } from "../../src/catalog/catalog-file-history.js";
import { DuckDbCatalogFile } from "../../src/catalog/duckdb-catalog-file.js";
import { CATALOG_FILE, CATALOG_FILE_LOCK, CATALOG_FILE_STATES, METADATA_FOLDERS, TEMP_PREFIX } from "../../src/lake/layout.js";
import type { PartitionSnapshot } from "../../src/model/build.js";
import { defineTable, type TableDefinition } from "../../src/model/table.js";
import { LocalStore } from "../../src/store/local-store.js";
import { tempDir } from "../support/lake-fixture.js";

// The catalog file's past views (`<table>__at_<sync id>`) are chained (src/catalog/catalog-file-history.ts): the
// newest reads the table's view but for the partitions changed since, each older one the next newer one. Whatever
// happens between syncs (partitions rewritten, emptied, removed, added; writes that are no sync; a column added in
// place), plain DuckDB reads each past view as the table was right after its sync, with the columns it had then.

const HOUR_MS = 3_600_000;

/** One partition as the model has it: its run, its rows (0: an emptied partition, a run without files), whether its file has `note`. */
interface ModelRun {
  readonly runId: string;
  readonly rows: number;
  readonly note: boolean;
}

/**
 * One update of the catalog file: which partitions change and how, whether it is a sync's (`again`: the same sync's
 * as the last one, as a held sync's publication writes it again), whether the table gains `note` first.
 */
interface Step {
  readonly sync: boolean;
  readonly again: boolean;
  readonly addNote: boolean;
  readonly changes: readonly { readonly partition: number; readonly to: "rows" | "empty" | "gone"; readonly rows: number }[];
}

const step: fc.Arbitrary<Step> = fc.record({
  sync: fc.integer({ min: 0, max: 9 }).map((n) => n < 7),
  again: fc.integer({ min: 0, max: 9 }).map((n) => n < 2),
  addNote: fc.boolean(),
  changes: fc.array(fc.record({ partition: fc.nat(5), to: fc.constantFrom("rows" as const, "rows" as const, "empty" as const, "gone" as const), rows: fc.integer({ min: 1, max: 3 }) }), { minLength: 1, maxLength: 3 }),
});

describe("lake.duckdb's past views, chained", () => {
  let duck: DuckDBInstance;
  let writer: DuckDBConnection;
  const dirs: (() => void)[] = [];
  beforeAll(async () => {
    duck = await DuckDBInstance.create(":memory:");
    writer = await duck.connect();
  });
  afterAll(() => {
    writer.closeSync();
    duck.closeSync();
    for (const cleanup of dirs) cleanup();
  });

  /** A table with `keys` partition keys; partition i's values. */
  const layout = (keys: number) => {
    const partitionKeys = ["region", "day"].slice(2 - keys);
    const valuesOf = (i: number) => (keys === 0 ? [] : keys === 1 ? [`2026-11-0${i + 1}`] : [i % 2 === 0 ? "eu" : "us", `2026-11-0${i + 1}`]);
    return { partitionKeys, valuesOf, partitions: keys === 0 ? 1 : 6 };
  };

  it("reads each past view as the table was right after its sync, over random updates (runs, emptied and removed partitions, plain writes, a column added)", async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(0, 1, 2), fc.array(step, { minLength: 14, maxLength: 26 }), async (keys, steps) => {
        const { dir, cleanup } = tempDir("lakeswap-history-");
        dirs.push(cleanup);
        const { partitionKeys, valuesOf, partitions } = layout(keys);
        const store = new LocalStore(dir, { folders: METADATA_FOLDERS });
        const file = new DuckDbCatalogFile(store, { file: CATALOG_FILE, lock: CATALOG_FILE_LOCK, states: CATALOG_FILE_STATES, temp: TEMP_PREFIX });
        let table: TableDefinition = defineTable({ name: "events", columns: [{ name: "id", type: "BIGINT" }, { name: "tag", type: "VARCHAR" }], partitionKeys });
        const state = new Map<number, ModelRun>();
        const files = new Map<number, string[]>();
        /** Each sync's view: the table's columns and each partition's run right after it. */
        const expected = new Map<string, { columns: string[]; state: Map<number, ModelRun> }>();
        let run = 0;
        let lastSync: string | undefined;
        for (const [index, { sync, again, addNote, changes }] of steps.entries()) {
          if (addNote && !table.columns.some((c) => c.name === "note")) table = { ...table, columns: [...table.columns, { name: "note", type: "VARCHAR" }], schemaVersion: 1 };
          const note = table.columns.some((c) => c.name === "note");
          for (const change of changes) {
            const p = change.partition % partitions;
            if (change.to === "gone") {
              state.delete(p);
              files.delete(p);
              continue;
            }
            const runId = `20261201T0000${String(run).padStart(2, "0")}Z-${String(run).padStart(6, "0")}`;
            run += 1;
            const rows = change.to === "empty" ? 0 : change.rows;
            const prefix = path.join("events", "_runs", ...partitionKeys.map((key, i) => `${key}=${valuesOf(p)[i]}`), `run=${runId}`);
            const key = path.join(prefix, `part-${runId}.parquet`);
            if (rows > 0) {
              mkdirSync(path.join(dir, prefix), { recursive: true });
              await writer.run(`COPY (SELECT range AS id, '${runId}' AS tag${note ? ", 'n' AS note" : ""} FROM range(${rows})) TO '${path.join(dir, key)}' (FORMAT PARQUET)`);
            }
            state.set(p, { runId, rows, note });
            files.set(p, rows > 0 ? [key] : []);
          }
          const snapshot: PartitionSnapshot[] = [...state].map(([p, r]) => ({ partition: { keys: partitionKeys, values: valuesOf(p) }, runId: r.runId, files: files.get(p) ?? [] }));
          const syncId = again && lastSync !== undefined ? lastSync : sync ? `20261201T0100${String(index).padStart(2, "0")}Z-${String(index).padStart(6, "0")}` : undefined;
          lastSync = syncId ?? lastSync;
          await file.update([{ name: "events", snapshot: { table, partitions: snapshot } }], undefined, { syncId, graceMs: HOUR_MS });
          if (syncId) expected.set(`events__at_${syncId.replace(/[^A-Za-z0-9]/g, "_")}`, { columns: [...table.columns.map((c) => c.name), ...partitionKeys], state: new Map(state) });
          if (index % 6 === 5 || index === steps.length - 1) await checkViews(path.join(dir, CATALOG_FILE), expected, valuesOf, partitionKeys);
        }
      }),
      { numRuns: 8 },
    );
  });

  it("grows by the partitions a sync changed, not by every file of the table at each sync", async () => {
    const { dir, cleanup } = tempDir("lakeswap-history-");
    dirs.push(cleanup);
    const store = new LocalStore(dir, { folders: METADATA_FOLDERS });
    const file = new DuckDbCatalogFile(store, { file: CATALOG_FILE, lock: CATALOG_FILE_LOCK, states: CATALOG_FILE_STATES, temp: TEMP_PREFIX });
    const table = defineTable({ name: "events", columns: [{ name: "id", type: "BIGINT" }], partitionKeys: ["day"] });
    mkdirSync(path.join(dir, "events"), { recursive: true });
    await writer.run(
      `COPY (SELECT range AS id, strftime(DATE '2020-01-01' + CAST(range AS INTEGER), '%Y-%m-%d') AS day FROM range(1000)) TO '${path.join(dir, "events", "_runs")}' (FORMAT PARQUET, PARTITION_BY (day))`,
    );
    const days = Array.from({ length: 1000 }, (_, i) => new Date(Date.UTC(2020, 0, 1 + i)).toISOString().slice(0, 10));
    let partitions = days.map((day) => ({ partition: { keys: ["day"], values: [day] }, runId: "r0", files: [`events/_runs/day=${day}/data_0.parquet`] }));
    const sizes: number[] = [];
    for (let s = 0; s < 30; s += 1) {
      // Each sync rewrites one partition (its run id is all that changes here).
      partitions = partitions.map((p, i) => (i === s ? { ...p, runId: `r${s + 1}` } : p));
      await file.update([{ name: "events", snapshot: { table, partitions } }], undefined, { syncId: `20261201T0000${String(s).padStart(2, "0")}Z-abcdef`, graceMs: HOUR_MS });
      sizes.push(statSync(path.join(dir, CATALOG_FILE)).size);
    }
    const reader = await DuckDBInstance.create(path.join(dir, CATALOG_FILE), { access_mode: "READ_ONLY" });
    const connection = await reader.connect();
    try {
      const views = (await connection.runAndReadAll("SELECT view_name, length(sql) FROM duckdb_views() WHERE NOT internal ORDER BY 1")).getRowsJS();
      const tableView = Number(views.find((v) => v[0] === "events")?.[1]);
      const past = views.filter((v) => String(v[0]).startsWith("events__at_"));
      expect(past).toHaveLength(30);
      // A view naming every file, once per sync, was 30 of the table's view; chained, three of them name every file.
      const pastText = past.reduce((sum, v) => sum + Number(v[1]), 0);
      expect(pastText, `the past views' text against the table view's ${tableView} characters`).toBeLessThan(4 * tableView);
      // The file grows in DuckDB's blocks of 256 kB: by one or two each MAX_CHAIN syncs (a new chain's first view names
      // every file, and the file holds its catalog twice while a checkpoint rewrites it), not by a table view's text each sync.
      const block = 256 * 1024;
      expect(sizes.at(-1)! - sizes[2]!, `the file's growth over 27 syncs (a table view is ${tableView} characters)`).toBeLessThanOrEqual(2 * block * Math.ceil(27 / MAX_CHAIN));
      expect(27 * tableView).toBeGreaterThan(2 * block * Math.ceil(27 / MAX_CHAIN));
      for (const [view] of past) {
        const runs = await connection.runAndReadAll(`SELECT count(*), count(DISTINCT day) FROM ${view as string}`);
        expect(runs.getRowsJS(), String(view)).toEqual([[1000n, 1000n]]);
      }
    } finally {
      connection.closeSync();
      reader.closeSync();
    }
  });

  it("keeps its records as views, and turns the record tables of an earlier lakeswap into views with their rows", async () => {
    const { dir, cleanup } = tempDir("lakeswap-records-");
    dirs.push(cleanup);
    const store = new LocalStore(dir, { folders: METADATA_FOLDERS });
    const file = new DuckDbCatalogFile(store, { file: CATALOG_FILE, lock: CATALOG_FILE_LOCK, states: CATALOG_FILE_STATES, temp: TEMP_PREFIX });
    const table = defineTable({ name: "events", columns: [{ name: "id", type: "BIGINT" }], partitionKeys: ["day"] });
    mkdirSync(path.join(dir, "events"), { recursive: true });
    await writer.run(`COPY (SELECT range AS id, 'd' || (range % 3) AS day FROM range(30)) TO '${path.join(dir, "events", "_runs")}' (FORMAT PARQUET, PARTITION_BY (day))`);
    const partition = (day: string, runId: string) => ({ partition: { keys: ["day"], values: [day] }, runId, files: [`events/_runs/day=${day}/data_0.parquet`] });
    const sync = (n: number, partitions: PartitionSnapshot[]) =>
      file.update([{ name: "events", snapshot: { table, partitions } }], undefined, { syncId: `20261201T00000${n}Z-abcdef`, graceMs: HOUR_MS });
    const location = path.join(dir, CATALOG_FILE);
    const read = async (sql: string) => {
      const reader = await DuckDBInstance.create(location, { access_mode: "READ_ONLY" });
      const connection = await reader.connect();
      try {
        return (await connection.runAndReadAll(sql)).getRowsJS();
      } finally {
        connection.closeSync();
        reader.closeSync();
      }
    };
    const records = "SELECT (SELECT list(view_name ORDER BY view_name) FROM duckdb_views() WHERE schema_name = 'lakeswap'), (SELECT count(*) FROM duckdb_tables() WHERE schema_name = 'lakeswap')";
    const history = "SELECT table_name, sync_id, view_name, CAST(created_at AS VARCHAR), definition FROM lakeswap.history ORDER BY view_name";
    const pastCounts = "SELECT (SELECT count(*) FROM events__at_20261201T000001Z_abcdef), (SELECT count(*) FROM events__at_20261201T000002Z_abcdef), (SELECT count(*) FROM events)";

    await sync(1, [partition("d0", "r1")]);
    await sync(2, [partition("d0", "r1"), partition("d1", "r2")]);
    expect(await read(records)).toEqual([[["history", "tables"], 0n]]);
    expect(await read("SELECT table_name, partitions, files, typeof(updated_at) FROM lakeswap.tables")).toEqual([["events", 2n, 2n, "TIMESTAMP"]]);
    const before = await read(history);
    expect(before).toHaveLength(2);

    // The records as an earlier lakeswap kept them: tables, with the same rows.
    const older = await DuckDBInstance.create(location);
    const connection = await older.connect();
    await connection.run(
      "CREATE TABLE lakeswap.tables_then AS SELECT * FROM lakeswap.tables; CREATE TABLE lakeswap.history_then AS SELECT * FROM lakeswap.history; " +
        "DROP VIEW lakeswap.tables; DROP VIEW lakeswap.history; ALTER TABLE lakeswap.tables_then RENAME TO tables; ALTER TABLE lakeswap.history_then RENAME TO history",
    );
    connection.closeSync();
    older.closeSync();
    expect(await read(records)).toEqual([[null, 2n]]);

    await sync(3, [partition("d0", "r1"), partition("d1", "r2"), partition("d2", "r3")]);
    expect(await read(records)).toEqual([[["history", "tables"], 0n]]);
    const after = await read(history);
    // Every row of before is kept as it was (the time to the microsecond), with the new sync's.
    expect(after.slice(0, 2)).toEqual(before);
    expect(after.map((row) => row[2])).toEqual(["events__at_20261201T000001Z_abcdef", "events__at_20261201T000002Z_abcdef", "events__at_20261201T000003Z_abcdef"]);
    expect(await read(pastCounts)).toEqual([[10n, 20n, 30n]]);
  });
});

/** Reads every past view of the file as plain DuckDB does and compares it with the model's state after its sync. */
async function checkViews(
  location: string,
  expected: ReadonlyMap<string, { columns: string[]; state: ReadonlyMap<number, ModelRun> }>,
  valuesOf: (p: number) => string[],
  keys: readonly string[],
): Promise<void> {
  const instance = await DuckDBInstance.create(":memory:");
  const connection = await instance.connect();
  try {
    await connection.run(`ATTACH '${location}' AS lake (READ_ONLY)`);
    for (const [view, { columns, state }] of expected) {
      const described = (await connection.runAndReadAll(`DESCRIBE lake.${view}`)).getRowsJS().map((row) => String(row[0]));
      expect(described, `${view}'s columns`).toEqual(columns);
      const partition = keys.length === 0 ? "'-'" : `concat_ws('/', ${keys.join(", ")})`;
      const note = columns.includes("note") ? "count(note)" : "CAST(0 AS BIGINT)";
      const seen = (await connection.runAndReadAll(`SELECT ${partition} AS p, count(*), min(tag), max(tag), ${note} FROM lake.${view} GROUP BY ALL HAVING count(*) > 0 ORDER BY p`)).getRowsJS();
      const want = [...state]
        .filter(([, run]) => run.rows > 0)
        .map(([p, run]) => [keys.length === 0 ? "-" : valuesOf(p).join("/"), BigInt(run.rows), run.runId, run.runId, columns.includes("note") && run.note ? BigInt(run.rows) : 0n])
        .sort((a, b) => (String(a[0]) < String(b[0]) ? -1 : 1));
      expect(seen, `${view}: partition, rows, its run (min and max tag), notes`).toEqual(want);
    }
  } finally {
    connection.closeSync();
    instance.closeSync();
  }
}
