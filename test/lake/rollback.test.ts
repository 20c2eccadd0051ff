import { GlueClient } from "@aws-sdk/client-glue";
import { S3Client } from "@aws-sdk/client-s3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { GlueCatalog } from "../../src/catalog/glue-catalog.js";
import { LocalCatalog } from "../../src/catalog/local-catalog.js";
import { Lake, type LakeSettings } from "../../src/lake/lake.js";
import type { SyncReport } from "../../src/pipeline/pipeline.js";
import { newRunId } from "../../src/model/run-id.js";
import type { SyncMove } from "../../src/lake/sync-record.js";
import { defineTable } from "../../src/model/table.js";
import { DuckDbEngine } from "../../src/engine/duckdb-engine.js";
import { DuckDbLanding } from "../../src/landing/duckdb/duckdb-landing.js";
import { SharedDuckDb } from "../../src/duckdb/shared-duckdb.js";
import type { ObjectStore } from "../../src/store/object-store.js";
import { LocalStore } from "../../src/store/local-store.js";
import { S3Store } from "../../src/store/s3/s3-store.js";
import { Child, lakeDirOf, runFolders } from "../support/crash-kit.js";
import { runMain } from "../support/main-cli.js";
import { BACKEND_FACTORIES, selectedBackends, spawnCli, type AwsServices, type TestBackend } from "../support/lake-fixture.js";
import { PipelineWorkspace, orders } from "../support/pipeline-fixture.js";
import { taggedRows } from "../support/rows-sql.js";
import { METADATA_FOLDERS } from "../../src/lake/layout.js";
import { recordSync } from "../../src/lake/operations/syncs.js";
import { replacePartition } from "../../src/lake/operations/replace.js";
import { rollbackPartition, rollbackSync } from "../../src/lake/operations/rollback.js";
import { partitionStates } from "../../src/lake/operations/partition-states.js";
import { collectGarbage } from "../../src/lake/operations/gc.js";
import { readHistory } from "../../src/lake/operations/history.js";
import { pinPartition, unpinPartition } from "../../src/lake/operations/pin.js";

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
    const store = stall.wrap(new LocalStore(dir, { folders: METADATA_FOLDERS }));
    const duckdb = new SharedDuckDb();
    return Lake.open({ store, catalog: new LocalCatalog(dir, { folders: METADATA_FOLDERS }), engine: new DuckDbEngine(store, { duckdb }), landing: new DuckDbLanding(store, { duckdb }) }, settings);
  }
  const { services, cliEnv: env } = backend as TestBackend & { services: AwsServices };
  const s3 = new S3Store(new S3Client(services.s3.clientConfig), { bucket: `${env.DATA_OUTPUT_S3_BUCKET}`, prefix: `${env.DATA_OUTPUT_S3_PREFIX}` });
  const store = stall.wrap(s3);
  const catalog = new GlueCatalog(new GlueClient(services.glue.clientConfig), {
    database: `${env.SCHEMA_OUTPUT_GLUE_DATABASE_NAME}`,
    uriOf: (key) => s3.uri(key),
  });
  const duckdb = new SharedDuckDb();
  return Lake.open({ store, catalog, engine: new DuckDbEngine(store, { duckdb }), landing: new DuckDbLanding(store, { duckdb }) }, settings);
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

  const recordTestSync = (moves: SyncMove[]) =>
    recordSync(lake, { format: 1, syncId: newRunId(), config: "test", startedAt: new Date().toISOString(), finishedAt: new Date().toISOString(), moves });

  /**
   * On the embedded lake a stalled writer that is alive keeps its table (its kernel lock lives as long as its
   * process): another writer is refused at once (LEASE_HELD, naming it), and the stalled one then finishes.
   */
  async function refusedWhileStalledAlive(work: (other: Lake) => Promise<unknown>): Promise<void> {
    const other = await backend.open({ leaseWaitMs: 0 });
    try {
      expect(await outcome(work(other))).toMatchObject({ failed: "LEASE_HELD", message: expect.stringContaining("that process is alive and holds the table's lock") });
    } finally {
      await other.close();
    }
  }
  const kernelLocked = backendName === "local";

  beforeEach(async () => {
    backend = await BACKEND_FACTORIES[backendName]!();
    // Waits long enough for a stalled writer's lease (1.5 s) to expire; the default grace window keeps every run.
    lake = await backend.open({ leaseWaitMs: 30_000 });
    await lake.createTable(
      defineTable({ name: TABLE, columns: [{ name: "id", type: "BIGINT" }, { name: "tag", type: "VARCHAR" }], partitionKeys: ["day"] }),
    );
    oldest = (await replacePartition(lake, TABLE, PARTITION, { select: OLDEST.select, signature: "v2:z" })).runId;
    old = (await replacePartition(lake, TABLE, PARTITION, { select: OLD.select, signature: "v2:a" })).runId;
  });

  afterEach(async () => {
    await stalled?.close();
    stalled = undefined;
    await lake.close();
    await backend.cleanup();
  });

  it("rollback --sync and a one-partition rollback move the target run's signature with the pointer", async () => {
    const synced = await replacePartition(lake, TABLE, PARTITION, { select: NEW.select, signature: "v2:b" });
    await recordTestSync([{ table: TABLE, layer: "raw", partition: PARTITION, run: synced.runId, previousRun: old }]);
    expect(await lake.pointer(TABLE, PARTITION)).toMatchObject({ runId: synced.runId, signature: "v2:b" });

    expect((await rollbackSync(lake, "last")).partitions).toEqual([
      { table: TABLE, partition: PARTITION, action: "rolled back", fromRunId: synced.runId, toRunId: old },
    ]);
    expect(await lake.pointer(TABLE, PARTITION)).toMatchObject({ runId: old, previousRunId: synced.runId, signature: "v2:a", movedBy: "rollback" });
    expect((await partitionStates(lake, TABLE)).get(PARTITION)).toMatchObject({ runId: old, signature: "v2:a", movedBy: "rollback" });
    expect(await view()).toEqual({ rows: OLD.rows, tag: OLD.tag });

    expect(await rollbackPartition(lake, TABLE, PARTITION)).toMatchObject({ fromRunId: old, toRunId: oldest, rows: OLDEST.rows });
    expect(await lake.pointer(TABLE, PARTITION)).toMatchObject({ runId: oldest, previousRunId: old, signature: "v2:z", movedBy: "rollback" });
    expect(await rollbackPartition(lake, TABLE, PARTITION, { toRunId: synced.runId })).toMatchObject({ toRunId: synced.runId, rows: NEW.rows });
    expect(await lake.pointer(TABLE, PARTITION)).toMatchObject({ runId: synced.runId, previousRunId: oldest, signature: "v2:b" });
  });

  it("a rollback whose writer stalled after deciding keeps its table while alive (embedded), or, its lease taken over, fails with LEASE_LOST and moves nothing", async () => {
    const stall = new Stall();
    stalled = await openStalledWriter(backend, stall, { leaseTtlMs: 1500, leaseWaitMs: 0 });
    // It hangs once it has read the pointer and the runs (the list of the partition's runs), under its lease.
    stall.at((call, key) => call === "list" && key.includes(PARTITION));
    const rollback = outcome(rollbackPartition(stalled, TABLE, PARTITION));
    await stall.reached;
    if (kernelLocked) {
      await refusedWhileStalledAlive((other) => replacePartition(other, TABLE, PARTITION, { select: NEW.select }));
      stall.resume();
      expect(await rollback).toMatchObject({ fromRunId: old, toRunId: oldest });
      expect(await view()).toEqual({ rows: OLDEST.rows, tag: OLDEST.tag });
      return;
    }

    // Another writer waits for the stalled writer's lease to expire, takes it over and swaps.
    const taken = await replacePartition(lake, TABLE, PARTITION, { select: NEW.select, signature: "v2:b" });
    expect(taken.previousRunId).toBe(old);
    stall.resume();

    expect(await rollback).toMatchObject({ failed: "LEASE_LOST" });
    expect(await lake.pointer(TABLE, PARTITION)).toMatchObject({ runId: taken.runId, previousRunId: old, signature: "v2:b", movedBy: "swap" });
    expect(await view()).toEqual({ rows: NEW.rows, tag: NEW.tag });
  });

  it("a rollback --sync whose writer stalled after deciding keeps its table while alive (embedded), or, its lease taken over, fails with LEASE_LOST and moves nothing", async () => {
    await recordTestSync([{ table: TABLE, layer: "raw", partition: PARTITION, run: old, previousRun: oldest }]);
    const stall = new Stall();
    stalled = await openStalledWriter(backend, stall, { leaseTtlMs: 1500, leaseWaitMs: 0 });
    // It hangs once it has found the pointer where the sync left it and listed the files of the run before it.
    stall.at((call, key) => call === "list" && key.includes(PARTITION));
    const rollback = outcome(rollbackSync(stalled, "last"));
    await stall.reached;
    if (kernelLocked) {
      await refusedWhileStalledAlive((other) => replacePartition(other, TABLE, PARTITION, { select: NEW.select }));
      stall.resume();
      expect(await rollback).toMatchObject({ partitions: [{ action: "rolled back", fromRunId: old, toRunId: oldest }] });
      expect(await view()).toEqual({ rows: OLDEST.rows, tag: OLDEST.tag });
      return;
    }

    const taken = await replacePartition(lake, TABLE, PARTITION, { select: NEW.select, signature: "v2:b" });
    expect(taken.previousRunId).toBe(old);
    stall.resume();

    expect(await rollback).toMatchObject({ failed: "LEASE_LOST" });
    expect(await lake.pointer(TABLE, PARTITION)).toMatchObject({ runId: taken.runId, previousRunId: old, signature: "v2:b", movedBy: "swap" });
    expect(await view()).toEqual({ rows: NEW.rows, tag: NEW.tag });
  });

  it("a gc whose writer stalled after deciding keeps its table while alive (embedded), or, its lease taken over, fails with LEASE_LOST and deletes nothing", async () => {
    const current = (await replacePartition(lake, TABLE, PARTITION, { select: NEW.select })).runId;
    // Current NEW, previous OLD (also the rollback target): with a grace window of 0 the oldest run is superseded.
    expect((await collectGarbage(lake, TABLE, { dryRun: true, graceMs: 0 }))[0]!.removed.map((r) => [r.runId, r.reason])).toEqual([[oldest, "superseded"]]);

    const stall = new Stall();
    stalled = await openStalledWriter(backend, stall, { leaseTtlMs: 1500, leaseWaitMs: 0 });
    // It hangs right before deleting: it has read the pointer and the runs, and now reads the pending catalog changes.
    stall.at((call, key) => call === "list" && key.includes("/outbox/"));
    const gc = outcome(collectGarbage(stalled, TABLE, { graceMs: 0 }));
    await stall.reached;
    if (kernelLocked) {
      await refusedWhileStalledAlive((other) => rollbackPartition(other, TABLE, PARTITION, { toRunId: oldest }));
      stall.resume();
      expect(await gc).toEqual([expect.objectContaining({ removed: [expect.objectContaining({ runId: oldest, reason: "superseded" })] })]);
      expect(await view()).toEqual({ rows: NEW.rows, tag: NEW.tag });
      return;
    }

    // Meanwhile another writer takes the lease over and rolls back to the oldest run, which the stalled gc meant to delete.
    expect(await rollbackPartition(lake, TABLE, PARTITION, { toRunId: oldest })).toMatchObject({ fromRunId: current, toRunId: oldest });
    stall.resume();

    expect(await gc).toMatchObject({ failed: "LEASE_LOST" });
    expect(await lake.pointer(TABLE, PARTITION)).toMatchObject({ runId: oldest, previousRunId: current });
    expect(await view()).toEqual({ rows: OLDEST.rows, tag: OLDEST.tag });
    const history = (await readHistory(lake, TABLE, PARTITION))[0]!;
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
      await expect(replacePartition(lake, TABLE, PARTITION, { select: NEW.select })).rejects.toThrow(/fault injected at after-build/);
    } finally {
      delete process.env.LAKESWAP_FAULT;
    }
    const incomplete = (await readHistory(lake, TABLE, PARTITION))[0]!.runs.find((r) => r.runId !== old && r.runId !== oldest);
    expect(incomplete).toMatchObject({ state: "incomplete", rows: undefined });
    expect(incomplete!.bytes).toBeGreaterThan(0);
    const current = (await replacePartition(lake, TABLE, PARTITION, { select: NEXT.select })).runId;
    expect([oldest, old, incomplete!.runId, current]).toEqual([oldest, old, incomplete!.runId, current].sort());

    // The newest run older than the current one is not a complete run, so it is not kept as the rollback target.
    const planned = (await collectGarbage(lake, TABLE, { dryRun: true, graceMs: 0 }))[0]!;
    expect(planned.removed.map((r) => [r.runId, r.reason])).toEqual([
      [oldest, "superseded"],
      [incomplete!.runId, "incomplete build"],
    ]);
    expect(planned.kept).toEqual([{ runId: old, reason: "previous" }, { runId: current, reason: "current" }]);
    // Within the grace window it stays, like any run.
    const young = (await collectGarbage(lake, TABLE, { dryRun: true, graceMs: 6 * HOUR }))[0]!;
    expect(young.kept.find((r) => r.runId === incomplete!.runId)).toEqual({ runId: incomplete!.runId, reason: "within grace window" });
    expect(young.removed).toEqual([]);

    // Rollback skips it: it goes to the newest complete older run, and refuses it by name.
    expect(await rollbackPartition(lake, TABLE, PARTITION)).toMatchObject({ fromRunId: current, toRunId: old, rows: OLD.rows });
    expect(await view()).toEqual({ rows: OLD.rows, tag: OLD.tag });
    await expect(rollbackPartition(lake, TABLE, PARTITION, { toRunId: incomplete!.runId })).rejects.toThrow(
      new RegExp(`run ${incomplete!.runId} of ${TABLE}/${PARTITION} does not exist or never completed`),
    );
    expect(await lake.pointer(TABLE, PARTITION)).toMatchObject({ runId: old, previousRunId: current });

    // Past the grace window gc removes it, and nothing that a rollback could still need.
    const done = (await collectGarbage(lake, TABLE, { graceMs: 0 }))[0]!;
    expect(done.removed.map((r) => [r.runId, r.reason])).toEqual([[incomplete!.runId, "incomplete build"]]);
    expect(done.kept).toEqual([
      { runId: oldest, reason: "rollback target" },
      { runId: old, reason: "current" },
      { runId: current, reason: "previous" },
    ]);
    expect((await readHistory(lake, TABLE, PARTITION))[0]!.runs.map((r) => [r.runId, r.state])).toEqual([
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
    const before = new Map([...(await partitionStates(lake, "orders_raw"))].map(([path, state]) => [path, state.signature]));
    const changed = workspace.delivery(rows.map((r) => (r.id === 101 ? { ...r, amount: "5.00" } : r)));
    const second = await workspace.pipeline(lake, { inputs: [changed] }).sync();
    expect(built(second)).toEqual([
      "analytics month=2026-11 build upstream changed",
      "raw day=2026-11-01 build content changed",
      "stage day=2026-11-01 build upstream changed",
    ]);
    expect(second.syncId > first.syncId).toBe(true);

    const undone = await rollbackSync(lake, second.syncId);
    expect(undone.partitions.map((p) => `${p.table} ${p.partition} ${p.action}`)).toEqual([
      "orders_monthly month=2026-11 rolled back",
      "orders_stage day=2026-11-01 rolled back",
      "orders_raw day=2026-11-01 rolled back",
    ]);
    expect((await partitionStates(lake, "orders_raw")).get("day=2026-11-01")?.signature).toBe(before.get("day=2026-11-01"));
    expect(await amount("orders_stage")).toEqual([["11.07"]]);

    // The raw day is pinned as it is now (rolled back); stage is rebuilt from it, as the rolled-back pointer asks.
    await pinPartition(lake, "orders_raw", "day=2026-11-01");
    expect(built(await workspace.pipeline(lake, { inputs: [changed] }).sync())).toEqual([
      "analytics month=2026-11 build rolled back",
      "stage day=2026-11-01 build rolled back",
    ]);
    expect(await amount("orders_stage")).toEqual([["11.07"]]);

    // Unpinned, the raw day takes the changed delivery again, and stage follows it: it was built from the old content.
    expect(await unpinPartition(lake, "orders_raw", "day=2026-11-01")).toBe(true);
    expect(built(await workspace.pipeline(lake, { inputs: [changed] }).sync())).toEqual([
      "analytics month=2026-11 build upstream changed",
      "raw day=2026-11-01 build rolled back",
      "stage day=2026-11-01 build upstream changed",
    ]);
    expect(await amount("orders_raw")).toEqual([["5.00"]]);
    expect(await amount("orders_stage")).toEqual([["5.00"]]);
  });
});

/**
 * Issue 25 item 1: `rollback --sync last` started while that sync still runs (frozen at a fault point after its record
 * exists, raw moved, stage not yet) used to roll back raw and let the sync move stage afterwards: raw = A, stage = B.
 * It now waits for the sync (the sync's own lease) and takes the leases of every table the sync moved, so it undoes
 * the sync's whole result; with --no-wait it refuses, naming the running sync. Either way the lake is one writer's whole result.
 */
describe.each(selectedBackends())("rollback --sync of a sync still running, on the %s backend", (backendName) => {
  let workspace: PipelineWorkspace;
  let backend: TestBackend;
  const children: Child[] = [];
  beforeEach(async () => {
    workspace = new PipelineWorkspace({ concurrency: 1 });
    backend = await BACKEND_FACTORIES[backendName]!();
  });
  afterEach(async () => {
    for (const child of children.splice(0)) {
      child.kill("SIGCONT");
      child.kill("SIGKILL");
      await child.exited;
    }
    await backend.cleanup();
    workspace.cleanup();
  });

  const A = orders(4, 3);
  const B = orders(4, 3).map((r) => ({ ...r, amount: `${r.id}.25` }));
  const amounts = (rows: typeof A, only: (r: (typeof A)[number]) => boolean = () => true): string[] =>
    rows.filter(only).map((r) => `${r.id}:${Number(r.amount).toFixed(2)}`).sort();
  const completed = (r: (typeof A)[number]): boolean => r.status === "completed";

  async function lakeHolds(): Promise<{ raw: string[]; stage: string[] }> {
    const lake = await backend.open({ readOnly: true });
    try {
      const read = async (table: string) => (await lake.query(`SELECT order_id, CAST(amount AS VARCHAR) FROM ${table}`)).rows.map(([id, amount]) => `${Number(id)}:${Number(amount).toFixed(2)}`).sort();
      return { raw: await read("orders_raw"), stage: await read("orders_stage") };
    } finally {
      await lake.close();
    }
  }

  async function frozenSyncOfB(): Promise<Child> {
    const first = await runMain([...backend.cliArgs, "sync", "-c", workspace.configFile, "--input", workspace.delivery(A)], backend.cliEnv);
    expect(first.code, first.stderr).toBe(0);
    // Frozen after stage's builds: raw's pointers moved and recorded, stage's not yet.
    const sync = new Child(spawnCli([...backend.cliArgs, "sync", "-c", workspace.configFile, "--input", workspace.delivery(B)], { ...backend.cliEnv, LAKESWAP_FAULT: "after-build:stop@2" }));
    children.push(sync);
    await sync.untilStopped("after-build");
    return sync;
  }

  it("waits for the sync to end, then undoes all of it: raw and stage both hold delivery A", async () => {
    const sync = await frozenSyncOfB();
    const rollback = new Child(spawnCli([...backend.cliArgs, "rollback", "--sync", "last", "--json", "--wait", "2m"], backend.cliEnv));
    children.push(rollback);
    await rollback.until("the rollback to wait for the running sync", () => /waiting for sync \d{8}T\d{6}Z-[0-9a-f]+: pid \d+ on .* \(sync /.test(rollback.stderr));
    sync.kill("SIGCONT");
    expect(await sync.exited, sync.stderr).toEqual({ code: 0, signal: null });
    expect(await rollback.exited, rollback.stderr).toEqual({ code: 0, signal: null });
    const result = JSON.parse(rollback.lines.join("\n")) as { partitions: { table: string; action: string }[] };
    const rolledBack = (table: string) => result.partitions.filter((p) => p.table === table && p.action === "rolled back").length;
    expect([rolledBack("orders_raw"), rolledBack("orders_stage")]).toEqual([4, 4]);
    expect(await lakeHolds()).toEqual({ raw: amounts(A), stage: amounts(A, completed) });
  });

  it("with --no-wait refuses at once (exit 4) naming the running sync, and the sync then ends whole: raw and stage both hold delivery B", async () => {
    const sync = await frozenSyncOfB();
    const refused = await runMain([...backend.cliArgs, "rollback", "--sync", "last", "--no-wait"], backend.cliEnv);
    expect(refused.code, refused.stderr).toBe(4);
    expect(refused.stderr).toMatch(/sync \d{8}T\d{6}Z-[0-9a-f]+ is still running, in pid \d+ on .* \(sync .*lakeswap\.yaml\) since /);
    sync.kill("SIGCONT");
    expect(await sync.exited, sync.stderr).toEqual({ code: 0, signal: null });
    expect(await lakeHolds()).toEqual({ raw: amounts(B), stage: amounts(B, completed) });
  });

  // Found by the model test: a sync's id was issued when it started, so a sync that started first but waited for
  // another's leases (or started in the same second) sorted before it, and `last` undid the other one.
  it("`last` is the sync that moved pointers last, though it started first and waited: its id is issued under the leases", async () => {
    const C = orders(4, 3).map((r) => ({ ...r, amount: `${r.id}.50` }));
    const first = await runMain([...backend.cliArgs, "sync", "-c", workspace.configFile, "--input", workspace.delivery(A)], backend.cliEnv);
    expect(first.code, first.stderr).toBe(0);
    const early = new Child(spawnCli([...backend.cliArgs, "sync", "-c", workspace.configFile, "--input", workspace.delivery(B)], { ...backend.cliEnv, LAKESWAP_FAULT: "sync-before-leases:stop" }));
    children.push(early);
    await early.untilStopped("sync-before-leases");
    const later = await runMain([...backend.cliArgs, "sync", "-c", workspace.configFile, "--input", workspace.delivery(C)], backend.cliEnv);
    expect(later.code, later.stderr).toBe(0);
    early.kill("SIGCONT");
    expect(await early.exited, early.stderr).toEqual({ code: 0, signal: null });
    expect(await lakeHolds()).toEqual({ raw: amounts(B), stage: amounts(B, completed) });

    const rollback = await runMain([...backend.cliArgs, "rollback", "--sync", "last", "--json"], backend.cliEnv);
    expect(rollback.code, rollback.stderr).toBe(0);
    expect(await lakeHolds()).toEqual({ raw: amounts(C), stage: amounts(C, completed) });
  });
});
