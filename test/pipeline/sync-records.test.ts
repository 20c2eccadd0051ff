import { writeFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { syncRecordKey } from "../../src/lake/sync-record.js";
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
