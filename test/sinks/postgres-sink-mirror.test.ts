import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import type pg from "pg";
import { describe, expect, it } from "vitest";
import { loadPipelineConfig } from "../../src/config/pipeline-config.js";
import { Pipeline, type SyncReport } from "../../src/pipeline/pipeline.js";
import { openEmbeddedLake } from "../../src/open/open-lake.js";
import { openSink } from "../../src/sinks/open-sink.js";
import { BACKEND_FACTORIES, runCli, tempDir } from "../support/lake-fixture.js";
import { postgresAvailable } from "../support/postgres.js";
import { usePostgres } from "../support/shared-services.js";
import { rollbackPartition, rollbackSync } from "../../src/lake/operations/rollback.js";
import { partitionStates } from "../../src/lake/operations/partition-states.js";

/*
 * Invariant 10 for the PostgreSQL sink: after every sync the target holds exactly the lake's rows (issue 25
 * items 4, 5, 17, 18), also where a partition was emptied, rolled back, or the target was dropped or truncated.
 * The dataset is the README's upsert example (customers, `order_by: [updated_at]`, `delete_flag: deleted`),
 * partitioned by state.
 */

const postgres = usePostgres("mirror");

type SinkBlock = string;
const REPLACE: SinkBlock = "{url: \"${DATABASE_URL}\", table: crm.customers, mode: partition_replace}";
const UPSERT: SinkBlock = "{url: \"${DATABASE_URL}\", table: crm.customers, mode: upsert, primary_key: [customer_id]}";
const UPSERT_HARD: SinkBlock = "{url: \"${DATABASE_URL}\", table: crm.customers, mode: upsert, primary_key: [customer_id], hard_delete: true}";

/** The README's upsert example with a sink; `time` names its timestamp column (updated_at there). */
function yaml(sink: SinkBlock, time = "updated_at"): string {
  return `datasets:
  customers:
    source: {format: csv, path: "customers/*.csv"}
    write: upsert
    primary_key: [customer_id]
    order_by: [${time}]
    delete_flag: deleted
    columns:
      customer_id: {type: BIGINT, nullable: false}
      name: VARCHAR
      state: VARCHAR
      ${time}: TIMESTAMP
      deleted: BOOLEAN
    partition: {st: upper(state)}
    sinks:
      postgres: ${sink}
`;
}

/** A customer row: id, state, and whether it deletes the key. */
type Customer = readonly [id: number, state: string, deleted?: boolean];

/** The first delivery: 3 customers in AS, 3 in CA, 4 in VI. */
const FIRST: readonly Customer[] = [
  [1, "as"], [2, "as"], [3, "as"], [4, "ca"], [5, "ca"], [6, "ca"], [7, "vi"], [8, "vi"], [9, "vi"], [10, "vi"],
];
/**
 * Deletes every key of VI and moves AS's keys to CA: partitions AS and VI become empty. Also deletes a key that
 * does not exist, naming a state nobody lives in: partition ZZ is made, empty.
 */
const EMPTYING: readonly Customer[] = [[1, "ca"], [2, "ca"], [3, "ca"], [7, "vi", true], [8, "vi", true], [9, "vi", true], [10, "vi", true], [99, "zz", true]];

async function workspace(sink: SinkBlock, time = "updated_at") {
  const { url: databaseUrl, query } = await postgres.database();
  process.env.DATABASE_URL = databaseUrl;
  const { dir, cleanup } = tempDir("lakeswap-sink-mirror-");
  postgres.onCleanup(cleanup);
  mkdirSync(path.join(dir, "customers"));
  const configFile = path.join(dir, "lakeswap.yaml");
  writeFileSync(configFile, yaml(sink, time));
  const lakeDir = path.join(dir, "lake");
  const lake = await openEmbeddedLake(lakeDir, { graceMs: 0, leaseWaitMs: 0 });
  postgres.onCleanup(() => lake.close());
  let counter = 0;
  const db = <Row extends pg.QueryResultRow>(sql: string): Promise<Row[]> => query<Row>(sql);
  const ws = {
    dir, lake, lakeDir, configFile, databaseUrl, db,
    deliver(rows: readonly Customer[]): string {
      counter += 1;
      const file = path.join(dir, "customers", `d${counter}.csv`);
      const lines = rows.map(([id, state, deleted]) => `${id},customer ${id},${state},2026-11-0${counter} 10:00:00,${deleted ? "true" : "false"}`);
      writeFileSync(file, `customer_id,name,state,${time},deleted\n${lines.join("\n")}\n`);
      return file;
    },
    sync(file: string): Promise<SyncReport> {
      return new Pipeline(lake, loadPipelineConfig(configFile), { inputs: [file], openSink }).sync();
    },
    /** The lake's rows, `id name st updated_at`, sorted (by id, then state and time: partition_replace may hold an id in two states). */
    async lakeRows(): Promise<string[]> {
      const result = await lake.query(`SELECT customer_id, name, st, strftime(${time}, '%Y-%m-%d %H:%M:%S') FROM customers_raw ORDER BY customer_id, st, ${time}`);
      return result.rows.map((row) => row.map(String).join(" "));
    },
    /** The target's live rows (for upsert: those not marked deleted), in the same form. */
    async targetRows(): Promise<string[]> {
      const upsert = (await db("SELECT 1 FROM pg_attribute WHERE attrelid = 'crm.customers'::regclass AND attname = '_lakeswap_deleted_at'")).length > 0;
      const rows = await db<{ line: string }>(
        `SELECT concat_ws(' ', customer_id, name, st, to_char(${time}, 'YYYY-MM-DD HH24:MI:SS')) AS line FROM crm.customers ${upsert ? "WHERE _lakeswap_deleted_at IS NULL" : ""} ORDER BY customer_id, st, ${time}`,
      );
      return rows.map((row) => row.line);
    },
  };
  return ws;
}

/** The partitions whose state row names the lake's current run (their transactions committed), sorted. */
async function committedPartitions(ws: Awaited<ReturnType<typeof workspace>>): Promise<string[]> {
  const state = await ws.db<{ p: string; run: string }>("SELECT partition AS p, run_id AS run FROM crm.lakeswap_state ORDER BY partition");
  const runs = await partitionStates(ws.lake, "customers_raw");
  return state.filter((r) => r.run === runs.get(r.p)?.runId).map((r) => r.p);
}

function sinkLines(report: SyncReport): string[] {
  return report.sinks.filter((s) => s.action !== "skipped").map((s) => `${s.partition} ${s.action} ${s.reason} ${s.rows ?? ""}`.trim()).sort();
}

describe.skipIf(!postgresAvailable())("PostgreSQL sink: the target equals the lake", () => {
  // Item 4: AS and VI emptied; the emptied partitions could never be sent ("run ... has no files", exit 7).
  it.each([
    ["partition_replace", REPLACE],
    ["upsert with hard_delete", UPSERT_HARD],
  ])("%s: a partition the lake emptied is sent as no rows, in the same transaction as its state row", async (_mode, sink) => {
    const ws = await workspace(sink);
    await ws.sync(ws.deliver(FIRST));
    expect(await ws.targetRows()).toEqual(await ws.lakeRows());
    const emptying = ws.deliver(EMPTYING);
    const report = await ws.sync(emptying);
    expect(report.sinks.filter((s) => s.action === "failed")).toEqual([]);
    expect(sinkLines(report)).toEqual(["st=AS sent changed 0", "st=CA sent changed 6", "st=VI sent changed 0", "st=ZZ sent new 0"]);
    expect(await ws.lakeRows()).toHaveLength(6);
    expect((await ws.db("SELECT * FROM crm.customers"))).toHaveLength(6);
    expect(await ws.targetRows()).toEqual(await ws.lakeRows());
    // Recorded: the next sync sends nothing.
    const again = await ws.sync(emptying);
    expect(sinkLines(again)).toEqual([]);
    expect(await ws.targetRows()).toEqual(await ws.lakeRows());
  });

  it("an S3 lake's emptied partition is sent as no rows too (s3rver, the Glue and Athena emulators)", async () => {
    const ws = await workspace(REPLACE);
    const backend = await BACKEND_FACTORIES.aws!();
    const lake = await backend.open();
    postgres.onCleanup(() => backend.cleanup());
    postgres.onCleanup(() => lake.close());
    const sync = (file: string) => new Pipeline(lake, loadPipelineConfig(ws.configFile), { inputs: [file], openSink }).sync();
    await sync(ws.deliver(FIRST));
    const report = await sync(ws.deliver(EMPTYING));
    expect(sinkLines(report)).toEqual(["st=AS sent changed 0", "st=CA sent changed 6", "st=VI sent changed 0", "st=ZZ sent new 0"]);
    expect(await ws.db("SELECT customer_id FROM crm.customers")).toHaveLength(6);
    expect(await ws.db("SELECT customer_id FROM crm.customers WHERE st <> 'CA'")).toEqual([]);
  }, 120_000);

  // Item 18: upsert by default keeps a key the lake deleted, but marked: never `deleted = false` and unmarked.
  it("upsert (soft delete, the default) marks a key the lake deleted: _lakeswap_deleted_at set and the delete flag true", async () => {
    const ws = await workspace(UPSERT);
    await ws.sync(ws.deliver(FIRST));
    const report = await ws.sync(ws.deliver([[4, "ca", true], [5, "ca", true], [7, "vi", true], [8, "vi", true], [9, "vi", true], [10, "vi", true], [1, "ca"]]));
    expect(report.sinks.filter((s) => s.action === "failed")).toEqual([]);
    expect(await ws.targetRows()).toEqual(await ws.lakeRows());
    const marked = await ws.db<{ customer_id: string; st: string; deleted: boolean; marked: boolean }>(
      "SELECT customer_id::text, st, deleted, _lakeswap_deleted_at IS NOT NULL AS marked FROM crm.customers ORDER BY customers.customer_id",
    );
    expect(marked.map((r) => `${r.customer_id} ${r.st} ${r.deleted} ${r.marked}`)).toEqual([
      "1 CA false false",
      "2 AS false false",
      "3 AS false false",
      "4 CA true true",
      "5 CA true true",
      "6 CA false false",
      "7 VI true true",
      "8 VI true true",
      "9 VI true true",
      "10 VI true true",
    ]);
    // A deleted key delivered again comes back: its mark cleared, its values the lake's.
    await ws.sync(ws.deliver([[4, "ca"]]));
    const back = await ws.db<{ deleted: boolean; marked: boolean }>("SELECT deleted, _lakeswap_deleted_at IS NOT NULL AS marked FROM crm.customers WHERE customer_id = 4");
    expect(back).toEqual([{ deleted: false, marked: false }]);
    expect(await ws.targetRows()).toEqual(await ws.lakeRows());
  });

  it("upsert with hard_delete deletes a key the lake deleted, in the partition's transaction", async () => {
    const ws = await workspace(UPSERT_HARD);
    await ws.sync(ws.deliver(FIRST));
    await ws.sync(ws.deliver([[4, "ca", true], [5, "ca", true], [9, "vi", true]]));
    expect(await ws.lakeRows()).toHaveLength(7);
    expect((await ws.db<{ id: string }>("SELECT customer_id::text AS id FROM crm.customers ORDER BY customer_id")).map((r) => r.id)).toEqual(["1", "2", "3", "6", "7", "8", "10"]);
    expect(await ws.targetRows()).toEqual(await ws.lakeRows());
  });

  // Item 17: the README's upsert example has a column updated_at; the sink's own stamp is _lakeswap_updated_at.
  it("upsert accepts a layer with its own updated_at column; a target an older lakeswap made keeps working", async () => {
    const ws = await workspace(UPSERT);
    await ws.sync(ws.deliver(FIRST));
    const columns = await ws.db<{ name: string; type: string }>(
      "SELECT attname AS name, format_type(atttypid, atttypmod) AS type FROM pg_attribute WHERE attrelid = 'crm.customers'::regclass AND attnum > 0 ORDER BY attnum",
    );
    expect(columns.map((c) => `${c.name} ${c.type}`)).toEqual([
      "customer_id bigint", "name text", "state text", "updated_at timestamp without time zone", "deleted boolean", "st text",
      "_lakeswap_updated_at timestamp with time zone", "_lakeswap_deleted_at timestamp with time zone",
    ]);
    // Each write finds its partition's rows by an index, not by scanning the table.
    const indexes = await ws.db<{ def: string }>("SELECT indexdef AS def FROM pg_indexes WHERE schemaname = 'crm' AND tablename = 'customers' ORDER BY indexname");
    expect(indexes.map((i) => i.def)).toEqual([
      "CREATE INDEX customers_lakeswap_partition ON crm.customers USING btree (st)",
      "CREATE UNIQUE INDEX customers_pkey ON crm.customers USING btree (customer_id)",
    ]);
    expect(await ws.targetRows()).toEqual(await ws.lakeRows());

    // A target made by an older lakeswap (its stamp named updated_at), for a layer without such a column: kept working.
    const legacy = await workspace(UPSERT, "seen_at");
    await legacy.db(
      "CREATE SCHEMA crm; CREATE TABLE crm.customers (customer_id bigint NOT NULL, name text, state text, seen_at timestamp, deleted boolean, st text NOT NULL, " +
        "updated_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (customer_id))",
    );
    await legacy.sync(legacy.deliver(FIRST));
    const report = await legacy.sync(legacy.deliver([[7, "vi", true]]));
    expect(report.sinks.filter((s) => s.action === "failed")).toEqual([]);
    const stamped = await legacy.db<{ id: string; marked: boolean; stamped: boolean }>(
      "SELECT customer_id::text AS id, _lakeswap_deleted_at IS NOT NULL AS marked, updated_at > now() - interval '1 hour' AS stamped FROM crm.customers ORDER BY customer_id",
    );
    expect(stamped).toHaveLength(10);
    expect(stamped.filter((r) => r.marked).map((r) => r.id)).toEqual(["7"]);
    expect(stamped.every((r) => r.stamped)).toBe(true);

    // The same old target for a layer that now sends its own updated_at: refused with the migration to run.
    const clash = await workspace(UPSERT);
    await clash.db(
      "CREATE SCHEMA crm; CREATE TABLE crm.customers (customer_id bigint NOT NULL, name text, state text, deleted boolean, st text NOT NULL, " +
        "updated_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (customer_id))",
    );
    const refused = await clash.sync(clash.deliver(FIRST));
    expect(refused.sinks.map((s) => `${s.partition} ${s.action} ${s.reason}`)).toEqual(["* failed target failed"]);
    expect(refused.sinks[0]!.error).toMatch(/column 'updated_at' is timestamp with time zone in the existing table, but lake table customers_raw sends timestamp without time zone/);
    expect(refused.sinks[0]!.error).toMatch(/made by an older lakeswap, whose upsert stamped updated_at; .*RENAME COLUMN updated_at TO _lakeswap_updated_at/);
  });

  // Item 5: the state table claimed partitions a recreated (or truncated) target no longer held: nothing was sent.
  it.each([
    ["dropped (lakeswap recreates it)", "DROP TABLE crm.customers"],
    ["truncated", "TRUNCATE crm.customers"],
    ["dropped and recreated by hand", "DROP TABLE crm.customers; CREATE TABLE crm.customers (customer_id bigint, name text, state text, updated_at timestamp, deleted boolean, st text)"],
  ])("a target %s is sent in full by the next sync of the same delivery", async (_what, statement) => {
    const ws = await workspace(REPLACE);
    const delivery = ws.deliver(FIRST);
    await ws.sync(delivery);
    await ws.db(statement);
    const report = await ws.sync(delivery);
    expect(sinkLines(report)).toEqual(["st=AS sent new 3", "st=CA sent new 3", "st=VI sent new 4"]);
    expect(await ws.targetRows()).toEqual(await ws.lakeRows());
    expect(sinkLines(await ws.sync(delivery))).toEqual([]);
  });

  it("a state table an older lakeswap made (no target identity) is upgraded, and its partitions sent once more", async () => {
    const ws = await workspace(REPLACE);
    const delivery = ws.deliver(FIRST);
    await ws.sync(delivery);
    await ws.db("ALTER TABLE crm.lakeswap_state DROP COLUMN target_oid, DROP COLUMN target_filenode");
    expect(sinkLines(await ws.sync(delivery))).toEqual(["st=AS sent new 3", "st=CA sent new 3", "st=VI sent new 4"]);
    expect(sinkLines(await ws.sync(delivery))).toEqual([]);
    expect(await ws.targetRows()).toEqual(await ws.lakeRows());
  });

  // Sink x rollback: a rollback --sync that undoes the emptying, then one that removes the partition the first sync made.
  it.each([
    ["partition_replace", REPLACE],
    ["upsert", UPSERT],
    ["upsert with hard_delete", UPSERT_HARD],
  ])("%s: after rollback --sync, the next sync makes the target equal the lake again", async (_mode, sink) => {
    const ws = await workspace(sink);
    await ws.sync(ws.deliver([[1, "as"], [2, "as"], [4, "ca"]]));
    const added = await ws.sync(ws.deliver([[7, "vi"], [8, "vi"], [5, "ca"]]));
    const emptied = await ws.sync(ws.deliver([[1, "ca"], [2, "ca"], [7, "vi", true]]));
    expect(await ws.targetRows()).toEqual(await ws.lakeRows());

    // Undo the emptying: AS holds its keys again, VI its deleted key; the next sync (a delivery that changes nothing) sends them.
    await rollbackSync(ws.lake, emptied.syncId);
    const restored = await ws.sync(ws.deliver([[4, "ca"]]));
    expect(restored.sinks.filter((s) => s.action === "failed")).toEqual([]);
    expect(await ws.lakeRows()).toEqual(["1 customer 1 AS 2026-11-01 10:00:00", "2 customer 2 AS 2026-11-01 10:00:00", "4 customer 4 CA 2026-11-04 10:00:00", "5 customer 5 CA 2026-11-02 10:00:00", "7 customer 7 VI 2026-11-02 10:00:00", "8 customer 8 VI 2026-11-02 10:00:00"]);
    expect(await ws.targetRows()).toEqual(await ws.lakeRows());

    // Undo the sync that created VI: the lake no longer has the partition, nor the target its rows.
    await rollbackSync(ws.lake, restored.syncId);
    await rollbackSync(ws.lake, added.syncId);
    const removed = await ws.sync(ws.deliver([[4, "ca"]]));
    expect(removed.sinks.filter((s) => s.action === "failed")).toEqual([]);
    expect(removed.sinks.filter((s) => s.action === "removed").map((s) => s.partition)).toEqual(["st=VI"]);
    expect(await ws.targetRows()).toEqual(await ws.lakeRows());
    expect((await ws.db<{ p: string }>("SELECT partition AS p FROM crm.lakeswap_state ORDER BY partition")).map((r) => r.p)).toEqual(["st=AS", "st=CA"]);
  });

  it.each([
    ["partition_replace", REPLACE],
    ["upsert", UPSERT],
  ])("%s: after a rollback of one emptied partition, the next sync sends its rows again", async (_mode, sink) => {
    const ws = await workspace(sink);
    await ws.sync(ws.deliver(FIRST));
    await ws.sync(ws.deliver(EMPTYING));
    await rollbackPartition(ws.lake, "customers_raw", "st=VI");
    const report = await ws.sync(ws.deliver([[4, "ca"]]));
    expect(sinkLines(report)).toEqual(["st=CA sent changed 6", "st=VI sent changed 4"]);
    expect(await ws.lakeRows()).toHaveLength(10);
    expect(await ws.targetRows()).toEqual(await ws.lakeRows());
  });

  // Sink x a killed send: the target's transaction is the swap. Killed before the second partition's COMMIT. Two
  // partitions are in their transactions at once (AS and CA, then VI), so the first COMMIT is AS's or CA's.
  it("a sync killed before a partition's COMMIT leaves that partition as it was; the next sync makes the target equal the lake", async () => {
    const ws = await workspace(UPSERT);
    await ws.sync(ws.deliver(FIRST));
    const emptying = ws.deliver(EMPTYING);
    const env = { DATABASE_URL: ws.databaseUrl, LAKESWAP_FAULT: "sink-before-commit:kill@2" };
    const killed = await runCli(["sync", "-c", ws.configFile, "--lake", ws.lakeDir, "--input", emptying], env);
    expect(killed.signal).toBe("SIGKILL");
    const committed = await committedPartitions(ws);
    const after = await ws.db<{ customer_id: string; st: string; marked: boolean }>(
      "SELECT customer_id::text, st, _lakeswap_deleted_at IS NOT NULL AS marked FROM crm.customers ORDER BY customers.customer_id",
    );
    const untouched = ["4 CA false", "5 CA false", "6 CA false", "7 VI false", "8 VI false", "9 VI false", "10 VI false"];
    // One partition went whole, with its state row, the other not at all, VI untouched: AS's keys marked (they left
    // it), keys 1-3 not yet in CA; or keys 1-3 moved to CA (AS's transaction, which would mark nothing more, killed).
    const byCommitted: Record<string, string[]> = {
      "st=AS": ["1 AS true", "2 AS true", "3 AS true", ...untouched],
      "st=CA": ["1 CA false", "2 CA false", "3 CA false", ...untouched],
    };
    expect(Object.keys(byCommitted)).toContain(committed.join(","));
    expect(after.map((r) => `${r.customer_id} ${r.st} ${r.marked}`)).toEqual(byCommitted[committed.join(",")]);

    const rerun = await ws.sync(emptying);
    const other = committed[0] === "st=AS" ? "st=CA sent changed 6" : "st=AS sent changed 0";
    expect(sinkLines(rerun)).toEqual([other, "st=VI sent changed 0", "st=ZZ sent new 0"].sort());
    expect(await ws.targetRows()).toEqual(await ws.lakeRows());
  }, 60_000);

  // The same kill on partition_replace's partitioned layout: the new leaf lives in the transaction, so it dies with it.
  it("partition_replace: a sync killed before a partition's COMMIT leaves that partition's leaf as it was and no stray table", async () => {
    const ws = await workspace(REPLACE);
    await ws.sync(ws.deliver(FIRST));
    const tables = "SELECT count(*)::int AS n FROM pg_class WHERE relnamespace = 'crm'::regnamespace AND relkind = 'r' AND relname LIKE 'customers%'";
    expect(await ws.db(tables)).toEqual([{ n: 3 }]);
    const emptying = ws.deliver(EMPTYING);
    const env = { DATABASE_URL: ws.databaseUrl, LAKESWAP_FAULT: "sink-before-commit:kill@2" };
    const killed = await runCli(["sync", "-c", ws.configFile, "--lake", ws.lakeDir, "--input", emptying], env);
    expect(killed.signal).toBe("SIGKILL");
    // One of AS and CA (in their transactions at once) swapped whole, with its state row; the other's leaf untouched
    // (its new leaf rolled back); VI untouched. AS emptied: an empty leaf; CA: keys 1-3 came to it.
    const committed = await committedPartitions(ws);
    const line = (id: number, st: string, day: number): string => `${id} customer ${id} ${st} 2026-11-0${day} 10:00:00`;
    const vi = [line(7, "VI", 1), line(8, "VI", 1), line(9, "VI", 1), line(10, "VI", 1)];
    const byCommitted: Record<string, string[]> = {
      "st=AS": [line(4, "CA", 1), line(5, "CA", 1), line(6, "CA", 1), ...vi],
      "st=CA": [line(1, "AS", 1), line(1, "CA", 2), line(2, "AS", 1), line(2, "CA", 2), line(3, "AS", 1), line(3, "CA", 2), line(4, "CA", 1), line(5, "CA", 1), line(6, "CA", 1), ...vi],
    };
    expect(Object.keys(byCommitted)).toContain(committed.join(","));
    expect(await ws.targetRows()).toEqual(byCommitted[committed.join(",")]);
    expect(await ws.db(tables)).toEqual([{ n: 3 }]);
    const rerun = await ws.sync(emptying);
    const other = committed[0] === "st=AS" ? "st=CA sent changed 6" : "st=AS sent changed 0";
    expect(sinkLines(rerun)).toEqual([other, "st=VI sent changed 0", "st=ZZ sent new 0"].sort());
    expect(await ws.targetRows()).toEqual(await ws.lakeRows());
    expect(await ws.db(tables)).toEqual([{ n: 4 }]);
  }, 60_000);
});
