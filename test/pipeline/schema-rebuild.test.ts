import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { DuckDBInstance } from "@duckdb/node-api";
import { afterEach, describe, expect, it } from "vitest";
import type { Lake } from "../../src/lake/lake.js";
import { rollbackPartition, rollbackSync } from "../../src/lake/operations/rollback.js";
import { publishSync } from "../../src/lake/operations/publish.js";
import { readSchemaHistory } from "../../src/lake/operations/history.js";
import { pinPartition } from "../../src/lake/operations/pin.js";
import { listSyncs } from "../../src/lake/operations/syncs.js";
import { selectedBackends } from "../support/lake-fixture.js";
import { declarationWorkspace, readAlong } from "../support/pipeline-fixture.js";
import { GLOB_RACE } from "../support/catalog-readers.js";
import { icebirdRows } from "../support/iceberg-kit.js";

// Issue 31 item 3: a change that cannot be made in place (a column narrowed, dropped or renamed, a scale changed) is
// made by `sync --rebuild-schema`: every partition rewritten under the new columns, then the pointers and the
// definition moved, readers reading throughout, with rollback --sync to the old definition and runs.

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const DAYS = 5;
const PER_DAY = 4;

/** Orders by day with a stage layer. */
function yaml(raw: string, stage: string, write = "partition_replace"): string {
  return `datasets:
  orders:
    source: {format: csv, path: deliveries/*.csv}
    write: ${write}
    columns: ${raw}
    partition: {day: "strftime(ts, '%Y-%m-%d')"}
    layers:
      - name: stage
        sql: sql/stage.sql
        columns: ${stage}
`;
}

const BEFORE = yaml("{id: {type: BIGINT, nullable: false}, n: BIGINT, amount: 'DECIMAL(10,2)', note: VARCHAR, ts: TIMESTAMP}", "{id: BIGINT, n: BIGINT, amount: 'DECIMAL(10,2)'}");
const STAGE_BEFORE = "SELECT id, n, amount FROM orders_raw WHERE day = {{ day }}\n";
/**
 * n narrowed to INTEGER, note dropped, amount renamed total (`renamed`): none of it can be made in place. Glue's
 * readers (Athena) match columns by name, so there a rename is refused (below) and the column keeps its name.
 */
function after(renamed: boolean): string {
  const amount = renamed ? "total: {type: 'DECIMAL(10,2)', renamed_from: amount}" : "amount: 'DECIMAL(10,2)'";
  return yaml(`{id: {type: BIGINT, nullable: false}, n: INTEGER, ${amount}, ts: TIMESTAMP}`, `{id: BIGINT, n: INTEGER, ${amount}}`);
}
const stageAfter = (renamed: boolean): string => `SELECT id, n, ${renamed ? "total" : "amount"} FROM orders_raw WHERE day = {{ day }}\n`;

/** The rows, `id,n,amount,note,ts` (before) or `id,n,<amount>,ts` (after: the same values, note gone). */
function delivery(after: boolean, n: (id: number) => number = (id) => id * 7, amountName = "total"): string {
  const rows: string[] = [];
  for (let day = 1; day <= DAYS; day++) {
    for (let i = 0; i < PER_DAY; i++) {
      const id = day * 10 + i;
      const amount = `${id}.${String(i).padStart(2, "0")}`;
      const ts = `2026-11-0${day} 1${i}:00:00`;
      rows.push(after ? `${id},${n(id)},${amount},${ts}` : `${id},${n(id)},${amount},note ${id},${ts}`);
    }
  }
  return `${after ? `id,n,${amountName},ts` : "id,n,amount,note,ts"}\n${rows.join("\n")}\n`;
}

async function workspace(backendName: string) {
  const ws = await declarationWorkspace(backendName, "lakeswap-rebuild-", cleanups);
  return {
    ...ws,
    configure(text: string, stageSql: string): void {
      writeFileSync(ws.configFile, text);
      writeFileSync(path.join(ws.dir, "sql", "stage.sql"), stageSql);
    },
  };
}

/** `day id n amount` rows of a table, sorted; `amount` is the column's name there. */
async function rows(lake: Lake, table: string, amount: string): Promise<string[]> {
  const result = await lake.query(`SELECT day, id, n, ${amount} FROM ${table} ORDER BY day, id`);
  return result.rows.map((row) => row.map((v) => String(v)).join(" "));
}

/** Every row of every day, as the delivery holds them. */
function expectedRows(n: (id: number) => number = (id) => id * 7): string[] {
  const all: string[] = [];
  for (let day = 1; day <= DAYS; day++) {
    for (let i = 0; i < PER_DAY; i++) {
      const id = day * 10 + i;
      all.push(`2026-11-0${day} ${id} ${n(id)} ${id}.${String(i).padStart(2, "0")}`);
    }
  }
  return all;
}

/** `day id n amount` rows of a table as the catalog file's view shows them to a plain DuckDB reader (embedded lakes). */
async function catalogFileRows(lakeDir: string, table: string, amount: string): Promise<string[]> {
  const instance = await DuckDBInstance.create(path.join(lakeDir, "lake.duckdb"), { access_mode: "READ_ONLY" });
  try {
    const connection = await instance.connect();
    const result = await connection.runAndReadAll(`SELECT day, id, n, CAST(${amount} AS VARCHAR) FROM ${table} ORDER BY day, id`);
    connection.closeSync();
    return result.getRowsJS().map((row) => row.map((v) => String(v)).join(" "));
  } finally {
    instance.closeSync();
  }
}

function columnsOf(lake: Lake, table: string): Promise<string[]> {
  return lake.table(table).then((t) => t.columns.map((c) => `${c.name} ${c.type}`));
}

/** A delivery's lines in reverse order, its header first. */
function reversed(text: string): string {
  const [header, ...lines] = text.trim().split("\n");
  return `${[header, ...lines.reverse()].join("\n")}\n`;
}

for (const backendName of selectedBackends()) {
  // Glue's readers match a partition's columns by name: a rename is refused there (tested below).
  const renamed = backendName === "local";
  const name = renamed ? "total" : "amount";
  describe(`schema rebuilt by swap (${backendName})`, () => {
    it("narrows, drops (and renames) with --rebuild-schema while a reader reads; a resend builds nothing; rollback --sync restores the old definition and runs", async () => {
      const ws = await workspace(backendName);
      ws.configure(BEFORE, STAGE_BEFORE);
      await ws.sync(ws.deliver(delivery(false)));
      const before = { raw: await rows(ws.lake, "orders_raw", "amount"), stage: await rows(ws.lake, "orders_stage", "amount") };
      expect(before.raw).toEqual(expectedRows());

      // Without the flag: refused before anything is written, naming the changes and the command.
      ws.configure(after(renamed), stageAfter(renamed));
      const file = ws.deliver(delivery(true, undefined, name));
      const named = renamed ? ".*column amount renamed to total" : "";
      await expect(ws.sync(file)).rejects.toThrow(new RegExp(`cannot change in place: column n changes from BIGINT to INTEGER${named}.*column note \\(VARCHAR\\) is no longer declared.*lakeswap sync --rebuild-schema`));
      expect(await columnsOf(ws.lake, "orders_raw")).toEqual(["id BIGINT", "n BIGINT", "amount DECIMAL(10,2)", "note VARCHAR", "ts TIMESTAMP"]);

      // The plan names the rebuild and every partition it rewrites.
      const plan = await ws.cli(["plan", "-c", ws.configFile, "--input", file, "--rebuild-schema", "--json"]);
      expect(plan.code, plan.stderr).toBe(0);
      const planned = (JSON.parse(plan.stdout) as { schemaChanges: { table: string; rebuilds?: string[] }[] }).schemaChanges;
      const days = Array.from({ length: DAYS }, (_, i) => `day=2026-11-0${i + 1}`);
      expect(planned.map((s) => [s.table, s.rebuilds])).toEqual([
        ["orders_raw", days],
        ["orders_stage", days],
      ]);

      // A reader reads the raw table all along: every read sees every row, under either definition, never an error.
      const reader = await ws.backend.open({ readOnly: true });
      cleanups.push(() => reader.close());
      const idsAndN = (rows: readonly (readonly unknown[])[]) => rows.map((row) => `${String(row[0])}:${String(row[1])}`);
      // Embedded, plain DuckDB too, over the documented glob (no lakeswap code): the union of both shapes, every row once.
      const lakeDir = (ws.backend as { lakeDir?: string }).lakeDir;
      const duck = lakeDir === undefined ? undefined : await DuckDBInstance.create(":memory:");
      const plain = await duck?.connect();
      const glob = lakeDir === undefined ? "" : `${path.join(lakeDir, "orders_raw")}/*/*.parquet`.replace(/'/g, "''");
      const { result: report, reads: all } = await readAlong(
        {
          lakeswap: async () => idsAndN((await reader.query("SELECT id, n FROM orders_raw")).rows),
          ...(plain ? { plain: async () => idsAndN((await plain.runAndReadAll(`SELECT id, n FROM read_parquet('${glob}', union_by_name = true, hive_partitioning = true)`)).getRowsJS()) } : {}),
        },
        () => ws.sync(file, { rebuildSchema: true }),
      );
      plain?.closeSync();
      duck?.closeSync();
      const reads = all.filter((r) => r.reader === "lakeswap");
      const plainReads = all.filter((r) => r.reader === "plain");
      expect(reads.filter((r) => r.error !== undefined)).toEqual([]);
      // A glob racing a swap may fail to open a file it listed (docs/lake.md, "Globbing the folders"): retryable, never a wrong result.
      expect(plainReads.filter((r) => r.error !== undefined && !GLOB_RACE.test(r.error))).toEqual([]);
      expect(reads.length).toBeGreaterThan(0);
      if (lakeDir !== undefined) expect(plainReads.filter((r) => r.error === undefined).length).toBeGreaterThan(0);
      const ids = expectedRows().map((row) => row.split(" ")).map(([, id, n]) => `${id}:${n}`).sort();
      for (const read of [...reads, ...plainReads.filter((r) => r.error === undefined)]) expect(read.rows).toEqual(ids);

      expect(report.schemaChanges?.map((s) => [s.table, s.rebuilt])).toEqual([
        ["orders_raw", DAYS],
        ["orders_stage", DAYS],
      ]);
      // The raw runs rewritten sign as the new delivery does: nothing to build there. Their signatures changed (note
      // was signed), so the stage is built from them (where its SQL changed too, for the rename, that is the reason).
      expect(report.partitions.filter((p) => p.action === "build").map((p) => `${p.layer} ${p.reason}`)).toEqual(Array(DAYS).fill(renamed ? "stage transform changed" : "stage upstream changed"));
      expect(await columnsOf(ws.lake, "orders_raw")).toEqual(["id BIGINT", "n INTEGER", `${name} DECIMAL(10,2)`, "ts TIMESTAMP"]);
      expect(await columnsOf(ws.lake, "orders_stage")).toEqual(["id BIGINT", "n INTEGER", `${name} DECIMAL(10,2)`]);
      expect(await rows(ws.lake, "orders_raw", name)).toEqual(expectedRows());
      expect(await rows(ws.lake, "orders_stage", name)).toEqual(expectedRows());
      const described = await ws.lake.query("SELECT * FROM orders_raw LIMIT 1");
      expect(described.columns).toEqual(["id", "n", name, "ts", "day"]);
      // The catalog file's views, for plain readers, are the new table's.
      if (lakeDir !== undefined) expect(await catalogFileRows(lakeDir, "orders_raw", name)).toEqual(expectedRows());

      // The same rows again, in another order: nothing to build anywhere.
      const again = await ws.sync(ws.deliver(reversed(delivery(true, undefined, name))), { rebuildSchema: true });
      expect(again.schemaChanges).toBeUndefined();
      expect(again.partitions.filter((p) => p.action === "build")).toEqual([]);

      // history --schema and syncs say how the change was made.
      const history = await readSchemaHistory(ws.lake, "orders_raw");
      expect(history.changes.map((c) => [c.syncId, c.how, c.current])).toEqual([[report.syncId, "rebuilt by swap", true]]);
      const syncs = await ws.cli(["syncs"]);
      expect(syncs.stdout).toContain(`sync ${report.syncId} rebuilt schemas by swap:`);
      expect(syncs.stdout).toContain("  orders_raw: (rebuilt) column n changes from BIGINT to INTEGER: it narrows (values may no longer fit)");

      // A partition is never moved back alone to a run from before the rebuild (its columns are not the table's).
      await expect(rollbackPartition(ws.lake, "orders_raw", "day=2026-11-02")).rejects.toThrow(/was written before table orders_raw was rebuilt by swap under other columns; roll back the sync that rebuilt it/);

      // rollback --sync of the rebuild: the old definitions and runs, as they were.
      const back = await rollbackSync(ws.lake, report.syncId);
      expect(back.schemas?.map((s) => [s.table, s.action])).toEqual([
        ["orders_stage", "restored"],
        ["orders_raw", "restored"],
      ]);
      expect(back.partitions.filter((p) => p.action === "rolled back")).toHaveLength(2 * DAYS);
      expect(await columnsOf(ws.lake, "orders_raw")).toEqual(["id BIGINT", "n BIGINT", "amount DECIMAL(10,2)", "note VARCHAR", "ts TIMESTAMP"]);
      expect(await rows(ws.lake, "orders_raw", "amount")).toEqual(before.raw);
      expect(await rows(ws.lake, "orders_stage", "amount")).toEqual(before.stage);
      expect((await ws.lake.query("SELECT count(note) FROM orders_raw")).rows[0]?.map(String)).toEqual([String(DAYS * PER_DAY)]);
      if (lakeDir !== undefined) expect(await catalogFileRows(lakeDir, "orders_raw", "amount")).toEqual(before.raw);
    }, 240_000);

    it("refuses a rebuild whose values the new type cannot hold, naming the column and the value, and moves nothing", async () => {
      const ws = await workspace(backendName);
      ws.configure(BEFORE, STAGE_BEFORE);
      await ws.sync(ws.deliver(delivery(false, (id) => (id === 32 ? 5_000_000_000 : id))));
      const pointers = async () => (await ws.lake.snapshot({ tables: ["orders_raw"] }))[0]?.partitions.map((p) => p.runId);
      const runs = await pointers();
      ws.configure(after(renamed), stageAfter(renamed));
      await expect(ws.sync(ws.deliver(delivery(true, undefined, name)), { rebuildSchema: true })).rejects.toThrow(/orders_raw\/day=2026-11-03: .*column n holds 5000000000, which INTEGER cannot hold/);
      expect(await pointers()).toEqual(runs);
      expect(await columnsOf(ws.lake, "orders_raw")).toEqual(["id BIGINT", "n BIGINT", "amount DECIMAL(10,2)", "note VARCHAR", "ts TIMESTAMP"]);
    }, 120_000);

    it("a rebuild that stops on the way leaves every row readable; the next sync finishes it (embedded: any sync; Glue: with the flag again)", async () => {
      const ws = await workspace(backendName);
      ws.configure(BEFORE, STAGE_BEFORE);
      await ws.sync(ws.deliver(delivery(false)));
      // Only the raw table changes: n narrowed, note dropped (the stage keeps n BIGINT, widened from the raw table's).
      ws.configure(yaml("{id: {type: BIGINT, nullable: false}, n: INTEGER, amount: 'DECIMAL(10,2)', ts: TIMESTAMP}", "{id: BIGINT, n: BIGINT, amount: 'DECIMAL(10,2)'}"), STAGE_BEFORE);
      const file = ws.deliver(delivery(true, undefined, "amount"));
      process.env.LAKESWAP_FAULT = "rebuild-after-move:fail";
      try {
        await expect(ws.sync(file, { rebuildSchema: true })).rejects.toThrow(/fault injected at rebuild-after-move/);
      } finally {
        delete process.env.LAKESWAP_FAULT;
      }
      expect(await rows(ws.lake, "orders_raw", "amount")).toEqual(expectedRows());
      const table = await ws.lake.table("orders_raw");
      if (renamed) {
        // The definition moved first: the next sync that declares the table finishes the rebuild, flag or not.
        expect(table.rebuilding).toEqual({ renames: {} });
        const report = await ws.sync(file);
        expect(report.schemaChanges).toEqual([{ table: "orders_raw", changes: ["the rebuild by swap of an earlier sync finished"], rebuilt: 0 }]);
      } else {
        // Glue: the table keeps its old columns (less note) until the last step; the same command again finishes it.
        expect(table.columns.map((c) => `${c.name} ${c.type}`)).toEqual(["id BIGINT", "n BIGINT", "amount DECIMAL(10,2)", "ts TIMESTAMP"]);
        await expect(ws.sync(file)).rejects.toThrow(/column n changes from BIGINT to INTEGER.*--rebuild-schema/);
        await ws.sync(file, { rebuildSchema: true });
      }
      expect(await columnsOf(ws.lake, "orders_raw")).toEqual(["id BIGINT", "n INTEGER", "amount DECIMAL(10,2)", "ts TIMESTAMP"]);
      expect((await ws.lake.table("orders_raw")).rebuilding).toBeUndefined();
      expect(await rows(ws.lake, "orders_raw", "amount")).toEqual(expectedRows());
      expect(await rows(ws.lake, "orders_stage", "amount")).toEqual(expectedRows());
    }, 120_000);

    it("rollback --sync of a rebuild is refused whole while one of its tables has runs written since: no definition is restored", async () => {
      const ws = await workspace(backendName);
      ws.configure(BEFORE, STAGE_BEFORE);
      await ws.sync(ws.deliver(delivery(false)));
      ws.configure(after(renamed), stageAfter(renamed));
      const report = await ws.sync(ws.deliver(delivery(true, undefined, name)), { rebuildSchema: true });
      // A later run of one raw partition only (the stage keeps the rebuild's).
      await ws.lake.write(["orders_raw"], "test", (writer) => writer.replace("orders_raw", "day=2026-11-02", { select: `SELECT id, n, ${name}, ts FROM orders_raw WHERE day = '2026-11-02'` }));
      const columns = { raw: await columnsOf(ws.lake, "orders_raw"), stage: await columnsOf(ws.lake, "orders_stage") };
      await expect(rollbackSync(ws.lake, report.syncId)).rejects.toThrow(/rebuilt the schema of orders_raw, and runs written since are current \(day=2026-11-02\)/);
      // Neither table was restored: the stage (judged first, rollable on its own) kept the rebuilt definition too.
      expect({ raw: await columnsOf(ws.lake, "orders_raw"), stage: await columnsOf(ws.lake, "orders_stage") }).toEqual(columns);
      expect(await rows(ws.lake, "orders_stage", name)).toEqual(expectedRows());
    }, 120_000);

    it("rollback --sync of a rebuild that stopped on the way restores the old definition and runs", async () => {
      const ws = await workspace(backendName);
      ws.configure(BEFORE, STAGE_BEFORE);
      await ws.sync(ws.deliver(delivery(false)));
      const before = await rows(ws.lake, "orders_raw", "amount");
      ws.configure(yaml("{id: {type: BIGINT, nullable: false}, n: INTEGER, amount: 'DECIMAL(10,2)', ts: TIMESTAMP}", "{id: BIGINT, n: BIGINT, amount: 'DECIMAL(10,2)'}"), STAGE_BEFORE);
      process.env.LAKESWAP_FAULT = "rebuild-after-move:fail";
      try {
        await expect(ws.sync(ws.deliver(delivery(true, undefined, "amount")), { rebuildSchema: true })).rejects.toThrow(/fault injected/);
      } finally {
        delete process.env.LAKESWAP_FAULT;
      }
      const stopped = (await listSyncs(ws.lake)).sort((a, b) => (a.syncId < b.syncId ? -1 : 1)).at(-1)!;
      expect(stopped.error).toMatch(/fault injected/);
      const back = await rollbackSync(ws.lake, stopped.syncId);
      expect(back.schemas?.map((s) => [s.table, s.action])).toEqual([["orders_raw", "restored"]]);
      const table = await ws.lake.table("orders_raw");
      expect([table.columns.map((c) => `${c.name} ${c.type}`), table.rebuilding]).toEqual([["id BIGINT", "n BIGINT", "amount DECIMAL(10,2)", "note VARCHAR", "ts TIMESTAMP"], undefined]);
      expect(await rows(ws.lake, "orders_raw", "amount")).toEqual(before);
      expect((await ws.lake.query("SELECT count(note) FROM orders_raw")).rows[0]?.map(String)).toEqual([String(DAYS * PER_DAY)]);
      // The old config again: the next sync takes it as it is (what was rolled back is built again, as after any rollback).
      ws.configure(BEFORE, STAGE_BEFORE);
      const next = await ws.sync(ws.deliver(delivery(false)));
      expect(next.schemaChanges).toBeUndefined();
      expect(new Set(next.partitions.filter((p) => p.action === "build").map((p) => p.reason))).toEqual(new Set(["rolled back"]));
      expect(await rows(ws.lake, "orders_raw", "amount")).toEqual(before);
    }, 120_000);

    it("a held sync's runs staged before a rebuild are not published into the rebuilt table (written under other columns)", async () => {
      const ws = await workspace(backendName);
      ws.configure(BEFORE, STAGE_BEFORE);
      await ws.sync(ws.deliver(delivery(false)));
      // Held: day 6, new, staged under the old columns.
      const day6 = "id,n,amount,note,ts\n60,420,60.00,note 60,2026-11-06 10:00:00\n";
      const held = await ws.sync(ws.deliver(day6), { hold: true });
      expect(held.held?.status).toBe("held");
      ws.configure(after(false), stageAfter(false));
      await ws.sync(ws.deliver(delivery(true, undefined, "amount")), { rebuildSchema: true });
      const published = await publishSync(ws.lake, held.syncId);
      expect(published.refused.map((r) => `${r.table} ${r.partition} ${r.reason}`)).toContainEqual(
        expect.stringMatching(/^orders_raw day=2026-11-06 its staged run \S+ was written before the table was rebuilt by swap under other columns; rerun the sync$/),
      );
      expect(await rows(ws.lake, "orders_raw", "amount")).toEqual(expectedRows());
    }, 120_000);

    it("rebuilds a table replaced as a whole (write: replace, no partition keys) and rolls it back", async () => {
      const ws = await workspace(backendName);
      const whole = (columns: string) => `datasets:\n  ref:\n    source: {format: csv, path: deliveries/*.csv}\n    write: replace\n    columns: ${columns}\n`;
      ws.configure(whole("{id: {type: BIGINT, nullable: false}, n: BIGINT, note: VARCHAR}"), STAGE_BEFORE);
      await ws.sync(ws.deliver("id,n,note\n1,10,a\n2,20,b\n"));
      ws.configure(whole("{id: {type: BIGINT, nullable: false}, n: INTEGER}"), STAGE_BEFORE);
      const report = await ws.sync(ws.deliver("id,n\n2,20\n1,10\n"), { rebuildSchema: true });
      expect(report.schemaChanges?.map((s) => [s.table, s.rebuilt])).toEqual([["ref_raw", 1]]);
      expect(report.partitions.filter((p) => p.action === "build")).toEqual([]);
      expect((await ws.lake.query("SELECT id, n FROM ref_raw ORDER BY id")).rows.map((r) => r.map(String).join(" "))).toEqual(["1 10", "2 20"]);
      expect(await columnsOf(ws.lake, "ref_raw")).toEqual(["id BIGINT", "n INTEGER"]);
      await rollbackSync(ws.lake, report.syncId);
      expect(await columnsOf(ws.lake, "ref_raw")).toEqual(["id BIGINT", "n BIGINT", "note VARCHAR"]);
      expect((await ws.lake.query("SELECT id, n, note FROM ref_raw ORDER BY id")).rows.map((r) => r.map(String).join(" "))).toEqual(["1 10 a", "2 20 b"]);
    }, 120_000);

    it("a pinned partition is rewritten under the new columns and stays pinned", async () => {
      const ws = await workspace(backendName);
      ws.configure(BEFORE, STAGE_BEFORE);
      await ws.sync(ws.deliver(delivery(false)));
      await pinPartition(ws.lake, "orders_raw", "day=2026-11-02");
      ws.configure(after(false), stageAfter(false));
      const report = await ws.sync(ws.deliver(delivery(true, (id) => (id === 21 ? 1 : id * 7), "amount")), { rebuildSchema: true });
      expect(report.schemaChanges?.map((s) => [s.table, s.rebuilt])).toEqual([
        ["orders_raw", DAYS],
        ["orders_stage", DAYS],
      ]);
      // Day 2 changed in the delivery, and is pinned: skipped, its rows as they were, under the new columns.
      expect(report.partitions.find((p) => p.table === "orders_raw" && p.partition === "day=2026-11-02")).toMatchObject({ action: "skip", reason: "pinned" });
      expect(await rows(ws.lake, "orders_raw", "amount")).toEqual(expectedRows());
      const runs = (await ws.lake.snapshot({ tables: ["orders_raw"] }))[0]?.partitions ?? [];
      const table = await ws.lake.table("orders_raw");
      expect(runs.filter((p) => p.runId < (table.rebuiltAt ?? ""))).toEqual([]);
    }, 120_000);

    it("write: append: a narrowing is rebuilt and a delivery appended before is still recognised; a change to what rows sign as is refused (it would append them again)", async () => {
      const ws = await workspace(backendName);
      const appendYaml = (n: string, note: boolean) =>
        yaml(`{id: {type: BIGINT, nullable: false}, n: ${n}, amount: 'DECIMAL(10,2)', ${note ? "note: VARCHAR, " : ""}ts: TIMESTAMP}`, "{id: BIGINT, n: BIGINT, amount: 'DECIMAL(10,2)'}", "append");
      ws.configure(appendYaml("BIGINT", true), STAGE_BEFORE);
      const first = delivery(false);
      await ws.sync(ws.deliver(first));
      ws.configure(appendYaml("INTEGER", true), STAGE_BEFORE);
      const report = await ws.sync(ws.deliver(reversed(first)), { rebuildSchema: true });
      expect(report.schemaChanges?.map((s) => [s.table, s.rebuilt])).toEqual([["orders_raw", DAYS]]);
      expect(report.partitions.filter((p) => p.layer === "raw").map((p) => p.reason)).toEqual(Array(DAYS).fill("already appended"));
      expect(await rows(ws.lake, "orders_raw", "amount")).toEqual(expectedRows());
      // Dropping note (signed) would make every delivery appended so far unrecognisable: refused, nothing moved.
      ws.configure(appendYaml("INTEGER", false), STAGE_BEFORE);
      await expect(ws.sync(ws.deliver(delivery(true, undefined, "amount")), { rebuildSchema: true })).rejects.toThrow(/is appended to \(write: append\), and the change alters what its rows sign as .*would be appended again/);
      expect(await columnsOf(ws.lake, "orders_raw")).toEqual(["id BIGINT", "n INTEGER", "amount DECIMAL(10,2)", "note VARCHAR", "ts TIMESTAMP"]);
    }, 120_000);

    it("write: upsert: a table rebuilt by swap takes the next delivery's changes merged under its new columns", async () => {
      const ws = await workspace(backendName);
      const upsertYaml = (n: string, note: boolean) =>
        yaml(`{id: {type: BIGINT, nullable: false}, n: ${n}, amount: 'DECIMAL(10,2)', ${note ? "note: VARCHAR, " : ""}ts: TIMESTAMP}`, "{id: BIGINT, n: BIGINT, amount: 'DECIMAL(10,2)'}", "upsert").replace(
          "    write: upsert\n",
          "    write: upsert\n    primary_key: [id]\n",
        );
      ws.configure(upsertYaml("BIGINT", true), STAGE_BEFORE);
      await ws.sync(ws.deliver(delivery(false)));
      ws.configure(upsertYaml("INTEGER", false), STAGE_BEFORE);
      // One order of day 3 changed: merged into the rebuilt rows; every other row as it was.
      const changed = delivery(true, (id) => (id === 31 ? 999 : id * 7), "amount").split("\n").filter((line, i) => i === 0 || line.startsWith("31,")).join("\n");
      const report = await ws.sync(ws.deliver(`${changed}\n`), { rebuildSchema: true });
      expect(report.schemaChanges?.map((s) => [s.table, s.rebuilt])).toEqual([["orders_raw", DAYS]]);
      expect(report.partitions.filter((p) => p.layer === "raw" && p.action === "build").map((p) => p.partition)).toEqual(["day=2026-11-03"]);
      expect(await rows(ws.lake, "orders_raw", "amount")).toEqual(expectedRows((id) => (id === 31 ? 999 : id * 7)));
      expect(await columnsOf(ws.lake, "orders_raw")).toEqual(["id BIGINT", "n INTEGER", "amount DECIMAL(10,2)", "ts TIMESTAMP"]);
    }, 120_000);

    it("rebuilds an iceberg: true table: the Iceberg view gets a new schema, a narrowed column a new field id, a dropped one gone", async () => {
      const ws = await workspace(backendName);
      const iceberg = (text: string) => text.replace("    write: partition_replace\n", "    write: partition_replace\n    iceberg: true\n");
      ws.configure(iceberg(BEFORE), STAGE_BEFORE);
      await ws.sync(ws.deliver(delivery(false)));
      ws.configure(iceberg(yaml("{id: {type: BIGINT, nullable: false}, n: INTEGER, amount: 'DECIMAL(10,2)', ts: TIMESTAMP}", "{id: BIGINT, n: BIGINT, amount: 'DECIMAL(10,2)'}")), STAGE_BEFORE);
      const report = await ws.sync(ws.deliver(delivery(true, undefined, "amount")), { rebuildSchema: true });
      expect(report.schemaChanges?.map((s) => [s.table, s.rebuilt])).toEqual([["orders_raw", DAYS]]);
      expect(report.snapshots?.map((s) => s.table)).toContain("orders_raw");
      expect(await rows(ws.lake, "orders_raw", "amount")).toEqual(expectedRows());
      const lakeDir = (ws.backend as { lakeDir?: string }).lakeDir;
      if (lakeDir === undefined) return;
      // An independent reader (icebird) of the current snapshot: every row, n read as the new field's int.
      const expectedIceberg = expectedRows().map((row) => row.split(" ")).map(([, id, n, amount]) => `${id}|${n}|${amount}`).sort();
      // icebird reads a decimal as a JavaScript number: shown with the column's scale.
      const read = (await icebirdRows(lakeDir, "orders_raw", ["id", "n", "amount"])).map((row) => row.split("|")).map(([id, n, amount]) => `${id}|${n}|${Number(amount).toFixed(2)}`);
      expect(read.sort()).toEqual(expectedIceberg);
      const metadata = JSON.parse(readFileSync(path.join(lakeDir, "orders_raw", "metadata", `v${readFileSync(path.join(lakeDir, "orders_raw", "metadata", "version-hint.text"), "utf8").trim()}.metadata.json`), "utf8")) as {
        schemas: { "schema-id": number; fields: { id: number; name: string; type: string }[] }[];
        "current-schema-id": number;
      };
      const [first, current] = [metadata.schemas[0]!, metadata.schemas.find((s) => s["schema-id"] === metadata["current-schema-id"])!];
      const field = (schema: typeof first, name: string) => schema.fields.find((f) => f.name === name);
      expect([field(first, "n")?.type, field(current, "n")?.type]).toEqual(["long", "int"]);
      expect(field(current, "n")?.id).toBeGreaterThan(Math.max(...first.fields.map((f) => f.id)));
      expect(field(current, "id")?.id).toBe(field(first, "id")?.id);
      expect(field(current, "note")).toBeUndefined();
    }, 120_000);

    it(renamed ? "changes a DECIMAL's scale by swap, values rescaled" : "builds aside what Athena could not read while the pointers move (a scale changed, a rename): a new layout, switched to in one step while readers read, and rolled back", async () => {
      const ws = await workspace(backendName);
      ws.configure(BEFORE, STAGE_BEFORE);
      await ws.sync(ws.deliver(delivery(false)));
      const scaled = yaml("{id: {type: BIGINT, nullable: false}, n: BIGINT, amount: 'DECIMAL(12,4)', note: VARCHAR, ts: TIMESTAMP}", "{id: BIGINT, n: BIGINT, amount: 'DECIMAL(10,2)'}");
      ws.configure(scaled, STAGE_BEFORE);
      const file = ws.deliver(delivery(false));
      if (!renamed) {
        // Athena reads a partition's DECIMAL(12,4) under the table's DECIMAL(10,2) nowhere, nor a renamed column by its
        // new name: each sync builds its tables aside, in a new layout (same keys), and switches to it in one step.
        const reader = await ws.backend.open({ readOnly: true });
        cleanups.push(() => reader.close());
        const ids = async () => (await reader.query("SELECT id FROM orders_raw")).rows.map((row) => String(row[0]));
        const all = expectedRows().map((row) => row.split(" ")[1]!).sort();
        const scaling = await readAlong({ raw: ids }, () => ws.sync(file, { rebuildSchema: true }));
        expect(scaling.reads.filter((r) => r.error !== undefined || JSON.stringify(r.rows) !== JSON.stringify(all))).toEqual([]);
        expect(scaling.result.schemaChanges?.map((s) => [s.table, s.rebuilt, s.layout?.startsWith("orders_raw__layout_")])).toEqual([["orders_raw", DAYS, true]]);
        expect(await columnsOf(ws.lake, "orders_raw")).toEqual(["id BIGINT", "n BIGINT", "amount DECIMAL(12,4)", "note VARCHAR", "ts TIMESTAMP"]);
        expect(await rows(ws.lake, "orders_raw", "CAST(amount AS VARCHAR)")).toEqual(expectedRows().map((row) => `${row}00`));
        expect((await ws.sync(ws.deliver(reversed(delivery(false))))).partitions.filter((p) => p.action === "build")).toEqual([]);
        // A rename (with n narrowed, note dropped) on both tables: the stage's new layout built from the raw one's.
        ws.configure(after(true), stageAfter(true));
        const renamed = ws.deliver(delivery(true));
        // The plan says so: both tables in new layouts, every stage partition built there (from the raw one's).
        const plan = await ws.cli(["plan", "-c", ws.configFile, "--input", renamed, "--rebuild-schema", "--json"]);
        expect(plan.code, plan.stderr).toBe(0);
        const planned = JSON.parse(plan.stdout) as { schemaChanges: { table: string; relayout?: boolean }[]; partitions: { table: string; action: string }[] };
        expect(planned.schemaChanges.map((c) => [c.table, c.relayout])).toEqual([["orders_raw", true], ["orders_stage", true]]);
        expect(planned.partitions.filter((p) => p.table === "orders_stage").map((p) => p.action)).toEqual(Array(DAYS).fill("build"));
        const renaming = await readAlong({ raw: ids }, () => ws.sync(renamed, { rebuildSchema: true }));
        expect(renaming.reads.filter((r) => r.error !== undefined || JSON.stringify(r.rows) !== JSON.stringify(all))).toEqual([]);
        expect(renaming.result.schemaChanges?.map((s) => [s.table, s.layout !== undefined])).toEqual([["orders_raw", true], ["orders_stage", true]]);
        expect(await columnsOf(ws.lake, "orders_raw")).toEqual(["id BIGINT", "n INTEGER", "total DECIMAL(10,2)", "ts TIMESTAMP"]);
        expect(await rows(ws.lake, "orders_raw", "total")).toEqual(expectedRows());
        expect(await rows(ws.lake, "orders_stage", "total")).toEqual(expectedRows());
        // Rolled back, one sync after the other: each table as it was, its old layout read again.
        await rollbackSync(ws.lake, renaming.result.syncId);
        expect(await columnsOf(ws.lake, "orders_raw")).toEqual(["id BIGINT", "n BIGINT", "amount DECIMAL(12,4)", "note VARCHAR", "ts TIMESTAMP"]);
        expect(await rows(ws.lake, "orders_stage", "amount")).toEqual(expectedRows());
        await rollbackSync(ws.lake, scaling.result.syncId);
        expect(await columnsOf(ws.lake, "orders_raw")).toEqual(["id BIGINT", "n BIGINT", "amount DECIMAL(10,2)", "note VARCHAR", "ts TIMESTAMP"]);
        expect(await rows(ws.lake, "orders_raw", "amount")).toEqual(expectedRows());
        // Not where a new layout could not carry the table on (here: a publication held to the dataset's end), nor for some partitions.
        ws.configure(scaled.replace("    write: partition_replace\n", "    write: partition_replace\n    publish: all_or_nothing\n"), STAGE_BEFORE);
        await expect(ws.sync(file, { rebuildSchema: true })).rejects.toThrow(/'orders_raw' cannot be rebuilt here: its readers could not read it halfway rebuilt, so it would be built aside in a new layout, and its dataset publishes all_or_nothing/);
        ws.configure(scaled, STAGE_BEFORE);
        await expect(ws.sync(file, { rebuildSchema: true, partitions: ["day=2026-11-01"] })).rejects.toThrow(/'orders_raw' is rebuilt aside .* run lakeswap sync --rebuild-schema without --partition/);
        expect(await columnsOf(ws.lake, "orders_raw")).toEqual(["id BIGINT", "n BIGINT", "amount DECIMAL(10,2)", "note VARCHAR", "ts TIMESTAMP"]);
        return;
      }
      const report = await ws.sync(file, { rebuildSchema: true });
      expect(report.schemaChanges?.map((s) => [s.table, s.rebuilt])).toEqual([["orders_raw", DAYS]]);
      expect(await columnsOf(ws.lake, "orders_raw")).toEqual(["id BIGINT", "n BIGINT", "amount DECIMAL(12,4)", "note VARCHAR", "ts TIMESTAMP"]);
      // Back to two decimals: every value has two, so it is exact. One more digit anywhere would be rounded: refused.
      ws.configure(BEFORE, STAGE_BEFORE);
      const exact = await ws.sync(ws.deliver(delivery(false)), { rebuildSchema: true });
      expect(exact.schemaChanges?.map((s) => [s.table, s.rebuilt])).toEqual([["orders_raw", DAYS]]);
      ws.configure(scaled, STAGE_BEFORE);
      await ws.sync(ws.deliver(delivery(false).replace("21.01,", "21.0125,")), { rebuildSchema: true });
      ws.configure(BEFORE, STAGE_BEFORE);
      const [changesBefore, syncsBefore] = [(await readSchemaHistory(ws.lake, "orders_raw")).changes, await listSyncs(ws.lake)];
      const day2 = (await ws.lake.pointer("orders_raw", "day=2026-11-02"))?.runId;
      await expect(ws.sync(ws.deliver(delivery(false)), { rebuildSchema: true })).rejects.toThrow(
        new RegExp(`orders_raw/day=2026-11-02: its run ${day2} cannot be rewritten under the new columns: column amount holds 21\\.0125, which DECIMAL\\(10,2\\) cannot hold exactly`),
      );
      // Refused before anything moved: not listed as made (no sync records it, the schema's history is as it was).
      expect((await readSchemaHistory(ws.lake, "orders_raw")).changes).toEqual(changesBefore);
      expect(await listSyncs(ws.lake)).toEqual(syncsBefore);
      // The table stays as it was (four decimals, 21.0125): the delivery as first sent brings day 2 back.
      ws.configure(scaled, STAGE_BEFORE);
      await ws.sync(file);
      expect(await rows(ws.lake, "orders_raw", "CAST(amount AS VARCHAR)")).toEqual(expectedRows().map((row) => `${row}00`));
      // The raw signatures are those of the rows as they are now: the same delivery again builds nothing.
      expect((await ws.sync(ws.deliver(reversed(delivery(false))))).partitions.filter((p) => p.action === "build")).toEqual([]);
    }, 120_000);
  });
}
