import { writeFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { syncRecordKey, type SyncRecord } from "../../src/lake/sync-record.js";
import { openEmbeddedLake } from "../../src/open/open-lake.js";
import { partitionPath } from "../../src/model/partition.js";
import { runCli } from "../support/lake-fixture.js";
import { MONTHLY_SQL, PipelineWorkspace, STAGE_SQL, orders } from "../support/pipeline-fixture.js";
import { defineTable } from "../../src/model/table.js";
import { tempLakes } from "../support/temp-lake.js";
import { replacePartition } from "../../src/lake/operations/replace.js";
import { claimSyncId, listSyncs, newSyncId, recordSync } from "../../src/lake/operations/syncs.js";
import { newRunId } from "../../src/model/run-id.js";
import type { ObjectStore } from "../../src/store/object-store.js";
import { rollbackSync } from "../../src/lake/operations/rollback.js";

const openLake = tempLakes();

describe("an unreadable sync record", () => {
  it("stops rollback --sync last naming the file (it may be the last sync), while the listing goes on without it", async () => {
    const { lake, lakeDir } = await openLake();
    await lake.createTable(defineTable({ name: "t", columns: [{ name: "v", type: "BIGINT" }], partitionKeys: ["day"] }));
    const first = await replacePartition(lake, "t", "day=2026-11-01", { select: "SELECT 1 AS v" });
    const second = await replacePartition(lake, "t", "day=2026-11-01", { select: "SELECT 2 AS v" });
    const older = "20261101T000000Z-00000a";
    const newer = "20261102T000000Z-00000b";
    await recordSync(lake, { format: 1, syncId: older, config: "x.yaml", startedAt: "2026-11-01T00:00:00Z", moves: [{ table: "t", layer: "raw", partition: "day=2026-11-01", run: first.runId }] });
    await recordSync(lake, { format: 1, syncId: newer, config: "x.yaml", startedAt: "2026-11-02T00:00:00Z", moves: [{ table: "t", layer: "raw", partition: "day=2026-11-01", run: second.runId, previousRun: first.runId }] });
    writeFileSync(path.join(lakeDir, ...syncRecordKey(newer).split("/")), "{ torn");

    await expect(rollbackSync(lake, "last")).rejects.toThrow(new RegExp(`sync record '_lakeswap/syncs/${newer}.json' is not valid JSON`));
    expect((await lake.pointer("t", "day=2026-11-01"))?.runId).toBe(second.runId);
    expect((await listSyncs(lake, { skipUnreadable: true })).map((r) => r.syncId)).toEqual([older]);
  });
});

describe("a new sync's id", () => {
  it("sorts after every recorded sync's, one a host with its clock ahead wrote too, from a listing of the last day's records only", async () => {
    const { lake } = await openLake();
    const now = new Date();
    const at = (hours: number): string => newRunId(new Date(now.getTime() + hours * 3_600_000));
    const record = (syncId: string) => recordSync(lake, { format: 1, syncId, config: "x.yaml", startedAt: now.toISOString(), moves: [] });
    const old = [at(-24 * 400), at(-24 * 30), at(-49)];
    for (const syncId of old) await record(syncId);
    const listed: string[] = [];
    const store = Object.create(lake.parts.store, {
      list: {
        value: async (prefix: string, options?: object) => {
          const objects = await lake.parts.store.list(prefix, options);
          listed.push(...objects.map((o) => o.key));
          return objects;
        },
      },
    }) as ObjectStore;
    const watched = { parts: { ...lake.parts, store } };

    // Only records older than a day: the new id is issued now, after them, and none of them is listed.
    const first = await newSyncId(watched, now);
    expect(old.every((id) => first > id)).toBe(true);
    expect(listed).toEqual([]);

    // A record of this hour, and one three hours ahead (another host's clock): the new id sorts after both.
    const recent = at(-1);
    const ahead = at(3);
    await record(recent);
    await record(ahead);
    const second = await newSyncId(watched, now);
    expect(second > ahead, `${second} sorts after ${ahead}`).toBe(true);
    expect(listed.map((key) => key.replace(/^.*\//, "").replace(/\.json$/, ""))).toEqual([recent, ahead]);
  });
});

describe("syncs that start together", () => {
  it("claim different ids, after the newest record of the same second, each with its lease held and no record under it", async () => {
    const { lake } = await openLake();
    // A sync recorded this second, high in the second: ids issued now sort before it, so each claim steps past it.
    const latest = `${newRunId().slice(0, -6)}c00000`;
    await recordSync(lake, { format: 1, syncId: latest, config: "x.yaml", startedAt: new Date().toISOString(), moves: [] });
    const claims = await Promise.all(Array.from({ length: 6 }, (_, i) => claimSyncId(lake, `sync ${i}.yaml`)));
    try {
      const ids = claims.map((c) => c.syncId);
      expect(new Set(ids).size, ids.join(" ")).toBe(ids.length);
      expect(ids.every((id) => id > latest)).toBe(true);
      for (const id of ids) expect(await lake.parts.store.get(syncRecordKey(id))).toBeUndefined();
    } finally {
      await Promise.all(claims.map((c) => c.release()));
    }
  });
});

describe("syncs of several datasets on one lake, in processes started together", () => {
  it("each record their own sync, under an id of their own: every record names one dataset's moves, and rollback --sync of one moves only its tables back", async () => {
    const DATASETS = ["orders", "sales", "items", "parts"];
    const lakeDir = (await openLake()).lakeDir;
    const workspaces = DATASETS.map((name) => {
      const ws = new PipelineWorkspace({ concurrency: 2 });
      ws.editConfig((yaml) => yaml.replaceAll("orders", name));
      ws.writeSql("stage.sql", STAGE_SQL.replaceAll("orders", name));
      ws.writeSql("monthly.sql", MONTHLY_SQL.replaceAll("orders", name));
      return ws;
    });
    try {
      const ROUNDS = 3;
      for (let round = 0; round < ROUNDS; round += 1) {
        const runs = await Promise.all(
          workspaces.map((ws) => runCli(["--lake", lakeDir, "sync", "-c", ws.configFile, "--input", ws.redeliver(orders(3, 3 + round)), "--json"])),
        );
        for (const run of runs) expect(run.code, run.stderr).toBe(0);
      }
      const lake = await openEmbeddedLake(lakeDir);
      try {
        const records = await listSyncs(lake);
        expect(records).toHaveLength(DATASETS.length * ROUNDS);
        expect(new Set(records.map((r) => r.syncId)).size).toBe(records.length);
        const datasetOf = (record: SyncRecord): string[] => [...new Set(record.moves.map((m) => m.table.replace(/_(raw|stage|monthly)$/, "")))];
        const datasetByConfig = new Map(workspaces.map((ws, i) => [ws.configFile, DATASETS[i]]));
        for (const record of records) expect(datasetOf(record), `sync ${record.syncId} of ${record.config}`).toEqual([datasetByConfig.get(record.config)]);
        expect(records.map((r) => datasetOf(r)[0]).sort()).toEqual(DATASETS.flatMap((d) => Array(ROUNDS).fill(d)).sort());
        // The newest sync of one dataset, rolled back: its tables go back a round, the others' stay.
        const sales = records.find((r) => datasetOf(r)[0] === "sales")!;
        const before = await lake.snapshot();
        await rollbackSync(lake, sales.syncId);
        const after = await lake.snapshot();
        const runsOf = (snapshots: typeof before, table: string) =>
          Object.fromEntries(snapshots.find((s) => s.table.name === table)!.partitions.map((p) => [partitionPath(p.partition), p.runId]));
        for (const table of ["orders_raw", "items_stage", "parts_monthly"]) expect(runsOf(after, table), table).toEqual(runsOf(before, table));
        const moved = sales.moves.filter((m) => m.table === "sales_raw");
        expect(moved).toHaveLength(3);
        expect(runsOf(after, "sales_raw")).toEqual(Object.fromEntries(moved.map((m) => [m.partition, m.previousRun])));
      } finally {
        await lake.close();
      }
    } finally {
      for (const ws of workspaces) ws.cleanup();
    }
  }, 120_000);
});
