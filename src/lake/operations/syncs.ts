import { LakeswapError, LeaseHeldError, NotFoundError } from "../../model/errors.js";
import { firstRunIdOf, isRunId, newRunIdAfter } from "../../model/run-id.js";
import { syncLeaseName, syncRecordKey, SYNCS_PREFIX } from "../layout.js";
import { WriterLease } from "../lease.js";
import type { HasLakeParts } from "../parts.js";
import { parseSyncRecord, type SyncRecord } from "../sync-record.js";

/** Writes (or rewrites, as a sync goes) a sync's record of the pointers it moved. */
export async function recordSync(lake: HasLakeParts, record: SyncRecord): Promise<void> {
  await lake.parts.store.put(syncRecordKey(record.syncId), `${JSON.stringify(record, null, 2)}\n`);
}

/** Removes a sync's record: a sync whose intended moves all came to nothing (every build failed) leaves none. */
export async function forgetSync(lake: HasLakeParts, syncId: string): Promise<void> {
  await lake.parts.store.delete([syncRecordKey(syncId)]);
}

/** How far back a new sync id looks for recorded ones: an older one sorts before any id issued now anyway. */
const SYNC_IDS_LOOK_BACK_MS = 24 * 60 * 60_000;

/**
 * A new sync id, after every recorded one (record keys sort by sync id; one of another host, whose clock is ahead,
 * too). Only the records of the last day are listed: however long a lake's history, a sync starts with one short listing.
 */
export async function newSyncId(lake: HasLakeParts, now: Date = new Date()): Promise<string> {
  const startAfter = syncRecordKey(firstRunIdOf(new Date(now.getTime() - SYNC_IDS_LOOK_BACK_MS)));
  const ids = (await lake.parts.store.list(SYNCS_PREFIX, { startAfter })).map((object) => object.key.slice(SYNCS_PREFIX.length).replace(/\.json$/, "")).filter(isRunId);
  return newRunIdAfter(ids.sort().at(-1), now);
}

/**
 * The records of past syncs, newest first. An unreadable record stops the listing (a STORE_ERROR naming it),
 * unless `skipUnreadable`: then it is left out and handed to `onUnreadable` (lakeswap syncs reports it).
 */
export async function listSyncs(lake: HasLakeParts, options: { skipUnreadable?: boolean; onUnreadable?: (error: unknown) => void } = {}): Promise<SyncRecord[]> {
  const records: SyncRecord[] = [];
  for (const object of await lake.parts.store.list(SYNCS_PREFIX)) {
    try {
      const record = await syncRecord(lake, object.key);
      if (record) records.push(record);
    } catch (error) {
      // A listing can go on without an unreadable record; deciding which sync is the last one cannot.
      if (!options.skipUnreadable) throw error;
      options.onUnreadable?.(error);
    }
  }
  return records.sort((a, b) => (a.syncId < b.syncId ? 1 : a.syncId > b.syncId ? -1 : 0));
}

/**
 * The record of sync `syncId`. `last` names the newest sync that moved, or was about to move, a pointer, finished or
 * not (a held sync moved none until it is published; a schema change by create-table moved none, and is named by its
 * id); with `which: "held"`, the newest sync still held.
 */
export async function findSync(lake: HasLakeParts, syncId: string, which: "moved" | "held" = "moved"): Promise<SyncRecord> {
  const unpublished = (r: SyncRecord) => r.held !== undefined && (r.held.status === "held" || r.held.status === "discarded");
  const wanted = which === "held" ? (r: SyncRecord) => r.held?.status === "held" : (r: SyncRecord) => r.moves.length > 0 && !unpublished(r);
  const record = syncId === "last" ? (await listSyncs(lake)).find(wanted) : await syncRecord(lake, syncRecordKey(syncId));
  if (!record) {
    const none = which === "held" ? "no sync is held in this lake (lakeswap sync --hold holds one)" : "no sync has been recorded in this lake yet";
    throw new NotFoundError(syncId === "last" ? none : `no sync ${syncId} is recorded in this lake; lakeswap syncs lists them`);
  }
  return record;
}

/** How many ids a sync tries to claim before it gives up (each taken one was issued to another sync at that moment). */
const CLAIM_ATTEMPTS = 8;

/**
 * A new sync id and its lease (`holdSyncLease`), held by this process, with no record stored under the id: two
 * syncs of one lake that start together (they read the same newest record) never share an id, and so never write
 * each other's record. Taken before the sync records anything.
 */
export async function claimSyncId(lake: HasLakeParts, command: string): Promise<{ readonly syncId: string; release(): Promise<void> }> {
  for (let attempt = 1; ; attempt += 1) {
    const syncId = await newSyncId(lake);
    const lease = await holdSyncLease(lake, syncId, command).catch((error: unknown) => {
      if (error instanceof LeaseHeldError && attempt < CLAIM_ATTEMPTS) return undefined;
      throw error;
    });
    if (!lease) continue;
    // The lease of a sync that ended is free again: its record says the id is taken.
    if ((await lake.parts.store.get(syncRecordKey(syncId))) === undefined) return { syncId, release: () => lease.release() };
    await lease.release();
    if (attempt >= CLAIM_ATTEMPTS) throw new LakeswapError("CONFLICT", `no free sync id after ${CLAIM_ATTEMPTS} tries (the last, ${syncId}, is recorded already); run the command again`);
  }
}

/**
 * Takes the lease of a sync that is about to record its first move, held until `release` (its end): a
 * `rollback --sync` of it waits for it. Taken before its record is first written (`claimSyncId`), so whoever finds the
 * record finds the lease held while the sync runs; a sync killed leaves it to the next taker (same host: at once).
 */
async function holdSyncLease(lake: HasLakeParts, syncId: string, command: string): Promise<{ release(): Promise<void> }> {
  // No kernel lock: the table leases it is taken under keep a stalled sync's tables; this one only tells that it runs.
  return WriterLease.acquire(lake.parts.store, syncLeaseName(syncId), { waitMs: 0, ttlMs: lake.parts.settings.leaseTtlMs, command, kernelLock: false });
}

/** The sync record at `key`, if there is one. */
async function syncRecord(lake: HasLakeParts, key: string): Promise<SyncRecord | undefined> {
  const stored = await lake.parts.store.get(key);
  return stored ? parseSyncRecord(stored.body, key) : undefined;
}
