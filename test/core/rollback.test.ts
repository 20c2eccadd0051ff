import { GlueClient } from "@aws-sdk/client-glue";
import { S3Client } from "@aws-sdk/client-s3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { GlueCatalog } from "../../src/catalog/glue-catalog.js";
import { LocalCatalog } from "../../src/catalog/local-catalog.js";
import { Lake, type LakeSettings } from "../../src/core/lake.js";
import type { SyncReport } from "../../src/core/pipeline.js";
import { newRunId } from "../../src/core/run-id.js";
import type { SyncMove } from "../../src/core/sync-record.js";
import { defineTable } from "../../src/core/table.js";
import { DuckDbEngine } from "../../src/engine/duckdb-engine.js";
import type { ObjectStore } from "../../src/store/object-store.js";
import { LocalStore } from "../../src/store/local-store.js";
import { S3Store } from "../../src/store/s3-store.js";
import { lakeDirOf, runFolders } from "../support/crash-kit.js";
import { BACKEND_FACTORIES, selectedBackends, type AwsServices, type TestBackend } from "../support/lake-fixture.js";
import { PipelineWorkspace, orders } from "../support/pipeline-fixture.js";
import { taggedRows } from "../support/rows-sql.js";

// Rollback (one partition, or every partition of a sync) restores the run's signature with its pointer
// (invariant 4), acts only while it still holds the table's lease (invariant 7), and never picks a run that
// did not complete; GC collects such a run after the grace window and also deletes only under its lease.

const TABLE = "orders";
const DAY = "2026-11-01";
const PARTITION = `day=${DAY}`;
const OLDEST = taggedRows("z", 90);
const OLD = taggedRows("a", 100);
const NEW = taggedRows("b", 120);
const NEXT = taggedRows("c", 130);
const HOUR = 3_600_000;

/** The store calls a stall holds back (everything but the synchronous helpers). */
const STORE_CALLS = new Set(["get", "put", "putIfAbsent", "putIfMatch", "deleteIfMatch", "list", "delete", "putFile"]);

/**
 * A writer that hangs at a chosen store call, as a stopped process would: from that call on, every call of
 * its store waits (its lease renewals too, so its lease expires), until `resume`.
 */
class Stall {
  readonly reached: Promise<void>;
  private markReached: () => void = () => undefined;
  private when: ((call: string, key: string) => boolean) | undefined;
  private gate: Promise<void> | undefined;
  private open: () => void = () => undefined;

  constructor() {
    this.reached = new Promise((resolve) => {
      this.markReached = resolve;
    });
  }

  /** Hangs at the first store call, from now on, for which `when` holds. */
  at(when: (call: string, key: string) => boolean): void {
    this.when = when;
  }

  resume(): void {
    this.open();
  }

  wrap(store: ObjectStore): ObjectStore {
    return new Proxy(store, {
      get: (target, property, receiver) => {
        const value: unknown = Reflect.get(target, property, receiver);
        if (typeof value !== "function" || typeof property !== "string" || !STORE_CALLS.has(property)) return value;
        return async (...args: unknown[]): Promise<unknown> => {
          const key = typeof args[0] === "string" ? args[0] : "";
          if (this.gate === undefined && this.when?.(property, key)) {
            this.gate = new Promise((resolve) => {
              this.open = resolve;
            });
            this.markReached();
          }
          if (this.gate !== undefined) await this.gate;
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    });
  }
}

/** A second writer on the same lake as `backend`, whose store calls go through `stall`. */
async function openStalledWriter(backend: TestBackend, stall: Stall, settings: LakeSettings): Promise<Lake> {
  const dir = lakeDirOf(backend);
  if (dir !== undefined) {
    const store = stall.wrap(new LocalStore(dir));
    const duckdb = new DuckDbEngine(store);
    return Lake.open({ store, catalog: new LocalCatalog(dir), engine: duckdb, landing: duckdb }, settings);
  }
  const { services, cliEnv: env } = backend as TestBackend & { services: AwsServices };
  const s3 = new S3Store(new S3Client(services.s3.clientConfig), { bucket: `${env.DATA_OUTPUT_S3_BUCKET}`, prefix: `${env.DATA_OUTPUT_S3_PREFIX}` });
  const store = stall.wrap(s3);
  const catalog = new GlueCatalog(new GlueClient(services.glue.clientConfig), {
    database: `${env.SCHEMA_OUTPUT_GLUE_DATABASE_NAME}`,
    uriOf: (key) => s3.uri(key),
  });
  const duckdb = new DuckDbEngine(store);
  return Lake.open({ store, catalog, engine: duckdb, landing: duckdb }, settings);
}

/** The outcome of a promise: its value, or the error's code and message. */
async function outcome<T>(work: Promise<T>): Promise<T | { failed: string; message: string }> {
  try {
    return await work;
  } catch (error) {
    return { failed: String((error as { code?: unknown }).code), message: String((error as Error).message) };
  }
}

describe.each(selectedBackends())("rollback and gc on the %s backend", (backendName) => {
  let backend: TestBackend;
  let lake: Lake;
  let stalled: Lake | undefined;
  let oldest: string;
  let old: string;

  async function view(): Promise<{ rows: number; tag: string | null }> {
    const [rows, tag] = (await lake.query(`SELECT count(*), min(tag) FROM ${TABLE} WHERE day = '${DAY}'`)).rows[0] ?? [];
    return { rows: Number(rows), tag: (tag as string | null) ?? null };
  }

  const recordSync = (moves: SyncMove[]) =>
    lake.recordSync({ format: 1, syncId: newRunId(), config: "test", startedAt: new Date().toISOString(), finishedAt: new Date().toISOString(), moves });

  beforeEach(async () => {
    backend = await BACKEND_FACTORIES[backendName]!();
    // Waits long enough for a stalled writer's lease (1.5 s) to expire; the default grace window keeps every run.
    lake = await backend.open({ leaseWaitMs: 30_000 });
    await lake.createTable(
      defineTable({ name: TABLE, columns: [{ name: "id", type: "BIGINT" }, { name: "tag", type: "VARCHAR" }], partitionKeys: ["day"] }),
    );
    oldest = (await lake.replacePartition(TABLE, PARTITION, { select: OLDEST.select, signature: "v2:z" })).runId;
    old = (await lake.replacePartition(TABLE, PARTITION, { select: OLD.select, signature: "v2:a" })).runId;
  });

  afterEach(async () => {
    await stalled?.close();
    stalled = undefined;
    await lake.close();
    await backend.cleanup();
  });

  it("rollback --sync and a one-partition rollback move the target run's signature with the pointer", async () => {
    const synced = await lake.replacePartition(TABLE, PARTITION, { select: NEW.select, signature: "v2:b" });
    await recordSync([{ table: TABLE, layer: "raw", partition: PARTITION, run: synced.runId, previousRun: old }]);
    expect(await lake.pointer(TABLE, PARTITION)).toMatchObject({ runId: synced.runId, signature: "v2:b" });

    expect((await lake.rollbackSync("last")).partitions).toEqual([
      { table: TABLE, partition: PARTITION, action: "rolled back", fromRunId: synced.runId, toRunId: old },
    ]);
    expect(await lake.pointer(TABLE, PARTITION)).toMatchObject({ runId: old, previousRunId: synced.runId, signature: "v2:a", movedBy: "rollback" });
    expect((await lake.partitionStates(TABLE)).get(PARTITION)).toMatchObject({ runId: old, signature: "v2:a", movedBy: "rollback" });
    expect(await view()).toEqual({ rows: OLD.rows, tag: OLD.tag });

    expect(await lake.rollback(TABLE, PARTITION)).toMatchObject({ fromRunId: old, toRunId: oldest, rows: OLDEST.rows });
    expect(await lake.pointer(TABLE, PARTITION)).toMatchObject({ runId: oldest, previousRunId: old, signature: "v2:z", movedBy: "rollback" });
    expect(await lake.rollback(TABLE, PARTITION, { toRunId: synced.runId })).toMatchObject({ toRunId: synced.runId, rows: NEW.rows });
    expect(await lake.pointer(TABLE, PARTITION)).toMatchObject({ runId: synced.runId, previousRunId: oldest, signature: "v2:b" });
  });

  it("a rollback whose writer stalled after deciding, and whose lease was taken over, fails with LEASE_LOST and moves nothing", async () => {
    const stall = new Stall();
    stalled = await openStalledWriter(backend, stall, { leaseTtlMs: 1500, leaseWaitMs: 0 });
    // It hangs once it has read the pointer and the runs (the list of the partition's runs), under its lease.
    stall.at((call, key) => call === "list" && key.includes(PARTITION));
    const rollback = outcome(stalled.rollback(TABLE, PARTITION));
    await stall.reached;

    // Another writer waits for the stalled writer's lease to expire, takes it over and swaps.
    const taken = await lake.replacePartition(TABLE, PARTITION, { select: NEW.select, signature: "v2:b" });
    expect(taken.previousRunId).toBe(old);
    stall.resume();

    expect(await rollback).toMatchObject({ failed: "LEASE_LOST" });
    expect(await lake.pointer(TABLE, PARTITION)).toMatchObject({ runId: taken.runId, previousRunId: old, signature: "v2:b", movedBy: "swap" });
    expect(await view()).toEqual({ rows: NEW.rows, tag: NEW.tag });
  });

  it("a rollback --sync whose writer stalled after deciding, and whose lease was taken over, fails with LEASE_LOST and moves nothing", async () => {
    await recordSync([{ table: TABLE, layer: "raw", partition: PARTITION, run: old, previousRun: oldest }]);
    const stall = new Stall();
    stalled = await openStalledWriter(backend, stall, { leaseTtlMs: 1500, leaseWaitMs: 0 });
    // It hangs once it has found the pointer where the sync left it and listed the files of the run before it.
    stall.at((call, key) => call === "list" && key.includes(PARTITION));
    const rollback = outcome(stalled.rollbackSync("last"));
    await stall.reached;

    const taken = await lake.replacePartition(TABLE, PARTITION, { select: NEW.select, signature: "v2:b" });
    expect(taken.previousRunId).toBe(old);
    stall.resume();

    expect(await rollback).toMatchObject({ failed: "LEASE_LOST" });
    expect(await lake.pointer(TABLE, PARTITION)).toMatchObject({ runId: taken.runId, previousRunId: old, signature: "v2:b", movedBy: "swap" });
    expect(await view()).toEqual({ rows: NEW.rows, tag: NEW.tag });
  });

  it("a gc whose writer stalled after deciding, and whose lease was taken over, fails with LEASE_LOST and deletes nothing", async () => {
    const current = (await lake.replacePartition(TABLE, PARTITION, { select: NEW.select })).runId;
    // Current NEW, previous OLD (also the rollback target): with a grace window of 0 the oldest run is superseded.
    expect((await lake.gc(TABLE, { dryRun: true, graceMs: 0 }))[0]!.removed.map((r) => [r.runId, r.reason])).toEqual([[oldest, "superseded"]]);

    const stall = new Stall();
    stalled = await openStalledWriter(backend, stall, { leaseTtlMs: 1500, leaseWaitMs: 0 });
    // It hangs right before deleting: it has read the pointer and the runs, and now reads the pending catalog changes.
    stall.at((call, key) => call === "list" && key.includes("/outbox/"));
    const gc = outcome(stalled.gc(TABLE, { graceMs: 0 }));
    await stall.reached;

    // Meanwhile another writer takes the lease over and rolls back to the oldest run, which the stalled gc meant to delete.
    expect(await lake.rollback(TABLE, PARTITION, { toRunId: oldest })).toMatchObject({ fromRunId: current, toRunId: oldest });
    stall.resume();

    expect(await gc).toMatchObject({ failed: "LEASE_LOST" });
    expect(await lake.pointer(TABLE, PARTITION)).toMatchObject({ runId: oldest, previousRunId: current });
    expect(await view()).toEqual({ rows: OLDEST.rows, tag: OLDEST.tag });
    const history = (await lake.history(TABLE, PARTITION))[0]!;
    expect(history.runs.map((r) => [r.runId, r.state, r.rows])).toEqual([
      [current, "previous", NEW.rows],
      [old, "completed", OLD.rows],
      [oldest, "current", OLDEST.rows],
    ]);
  });

  it("a run older than the current one with files but no manifest is an incomplete build: never a rollback target, collected after the grace window", async () => {
    // A build that failed after writing its files (and was not cleaned up): files, no manifest, never current.
    process.env.LAKESWAP_FAULT = "after-build:error";
    try {
      await expect(lake.replacePartition(TABLE, PARTITION, { select: NEW.select })).rejects.toThrow(/fault injected at after-build/);
    } finally {
      delete process.env.LAKESWAP_FAULT;
    }
    const incomplete = (await lake.history(TABLE, PARTITION))[0]!.runs.find((r) => r.runId !== old && r.runId !== oldest);
    expect(incomplete).toMatchObject({ state: "incomplete", rows: undefined });
    expect(incomplete!.bytes).toBeGreaterThan(0);
    const current = (await lake.replacePartition(TABLE, PARTITION, { select: NEXT.select })).runId;
    expect([oldest, old, incomplete!.runId, current]).toEqual([oldest, old, incomplete!.runId, current].sort());

    // The newest run older than the current one is not a complete run, so it is not kept as the rollback target.
    const planned = (await lake.gc(TABLE, { dryRun: true, graceMs: 0 }))[0]!;
    expect(planned.removed.map((r) => [r.runId, r.reason])).toEqual([
      [oldest, "superseded"],
      [incomplete!.runId, "incomplete build"],
    ]);
    expect(planned.kept).toEqual([{ runId: old, reason: "previous" }, { runId: current, reason: "current" }]);
    // Within the grace window it stays, like any run.
    const young = (await lake.gc(TABLE, { dryRun: true, graceMs: 6 * HOUR }))[0]!;
    expect(young.kept.find((r) => r.runId === incomplete!.runId)).toEqual({ runId: incomplete!.runId, reason: "within grace window" });
    expect(young.removed).toEqual([]);

    // Rollback skips it: it goes to the newest complete older run, and refuses it by name.
    expect(await lake.rollback(TABLE, PARTITION)).toMatchObject({ fromRunId: current, toRunId: old, rows: OLD.rows });
    expect(await view()).toEqual({ rows: OLD.rows, tag: OLD.tag });
    await expect(lake.rollback(TABLE, PARTITION, { toRunId: incomplete!.runId })).rejects.toThrow(
      new RegExp(`run ${incomplete!.runId} of ${TABLE}/${PARTITION} does not exist or never completed`),
    );
    expect(await lake.pointer(TABLE, PARTITION)).toMatchObject({ runId: old, previousRunId: current });

    // Past the grace window gc removes it, and nothing that a rollback could still need.
    const done = (await lake.gc(TABLE, { graceMs: 0 }))[0]!;
    expect(done.removed.map((r) => [r.runId, r.reason])).toEqual([[incomplete!.runId, "incomplete build"]]);
    expect(done.kept).toEqual([
      { runId: oldest, reason: "rollback target" },
      { runId: old, reason: "current" },
      { runId: current, reason: "previous" },
    ]);
    expect((await lake.history(TABLE, PARTITION))[0]!.runs.map((r) => [r.runId, r.state])).toEqual([
      [current, "previous"],
      [old, "current"],
      [oldest, "completed"],
    ]);
    const dir = lakeDirOf(backend);
    if (dir !== undefined) expect(await runFolders(dir, TABLE, PARTITION), "run folders (empty ones included)").toEqual([oldest, old, current]);
    expect(await view()).toEqual({ rows: OLD.rows, tag: OLD.tag });
  });
});

describe.each(selectedBackends())("a sync rolled back on the %s backend", (backendName) => {
  let workspace: PipelineWorkspace;
  let backend: TestBackend;
  let lake: Lake;
  beforeEach(async () => {
    workspace = new PipelineWorkspace();
    backend = await BACKEND_FACTORIES[backendName]!();
    lake = await backend.open({ graceMs: 0, leaseWaitMs: 0 });
  });
  afterEach(async () => {
    await lake.close();
    await backend.cleanup();
    workspace.cleanup();
  });

  const built = (report: SyncReport): string[] =>
    report.partitions.filter((p) => p.action !== "skip").map((p) => `${p.layer} ${p.partition} ${p.action} ${p.reason}`).sort();
  const amount = async (table: string): Promise<unknown[][]> =>
    [...(await lake.query(`SELECT CAST(amount AS VARCHAR) FROM ${table} WHERE order_id = 101`)).rows] as unknown[][];

  it("restores each partition's signature with its run, so what is built from a pinned, rolled-back partition is rebuilt when it changes again", async () => {
    const rows = orders(2);
    const first = await workspace.pipeline(lake, { inputs: [workspace.delivery(rows)] }).sync();
    const before = new Map([...(await lake.partitionStates("orders_raw"))].map(([path, state]) => [path, state.signature]));
    const changed = workspace.delivery(rows.map((r) => (r.id === 101 ? { ...r, amount: "5.00" } : r)));
    const second = await workspace.pipeline(lake, { inputs: [changed] }).sync();
    expect(built(second)).toEqual([
      "analytics month=2026-11 build upstream changed",
      "raw day=2026-11-01 build content changed",
      "stage day=2026-11-01 build upstream changed",
    ]);
    expect(second.syncId > first.syncId).toBe(true);

    const undone = await lake.rollbackSync(second.syncId);
    expect(undone.partitions.map((p) => `${p.table} ${p.partition} ${p.action}`)).toEqual([
      "orders_monthly month=2026-11 rolled back",
      "orders_stage day=2026-11-01 rolled back",
      "orders_raw day=2026-11-01 rolled back",
    ]);
    expect((await lake.partitionStates("orders_raw")).get("day=2026-11-01")?.signature).toBe(before.get("day=2026-11-01"));
    expect(await amount("orders_stage")).toEqual([["11.07"]]);

    // The raw day is pinned as it is now (rolled back); stage is rebuilt from it, as the rolled-back pointer asks.
    await lake.pin("orders_raw", "day=2026-11-01");
    expect(built(await workspace.pipeline(lake, { inputs: [changed] }).sync())).toEqual([
      "analytics month=2026-11 build rolled back",
      "stage day=2026-11-01 build rolled back",
    ]);
    expect(await amount("orders_stage")).toEqual([["11.07"]]);

    // Unpinned, the raw day takes the changed delivery again, and stage follows it: it was built from the old content.
    expect(await lake.unpin("orders_raw", "day=2026-11-01")).toBe(true);
    expect(built(await workspace.pipeline(lake, { inputs: [changed] }).sync())).toEqual([
      "analytics month=2026-11 build upstream changed",
      "raw day=2026-11-01 build rolled back",
      "stage day=2026-11-01 build upstream changed",
    ]);
    expect(await amount("orders_raw")).toEqual([["5.00"]]);
    expect(await amount("orders_stage")).toEqual([["5.00"]]);
  });
});
