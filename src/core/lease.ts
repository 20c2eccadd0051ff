import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import type { ObjectStore } from "../store/object-store.js";
import { InvalidInputError, LakeswapError, LeaseHeldError } from "./errors.js";
import { leaseKey } from "./layout.js";

/** How long a lease lives without renewal; the holder renews it every third of this. */
export const DEFAULT_LEASE_TTL_MS = 60_000;

/** How long a writer waits for another writer's lease by default. */
export const DEFAULT_LEASE_WAIT_MS = 120_000;

/** Who holds a lease, as stored in the lease object. */
export interface LeaseRecord {
  readonly table: string;
  readonly token: string;
  readonly host: string;
  readonly pid: number;
  readonly command: string;
  readonly acquiredAt: string;
  readonly expiresAt: string;
}

/** How to take a lease. */
export interface LeaseOptions {
  /** How long to wait for another writer; 0 fails at once. */
  readonly waitMs: number;
  readonly ttlMs?: number;
  /** What this writer is doing, shown to a writer that has to wait. */
  readonly command: string;
  /** Called once when the lease is busy and this writer starts waiting. */
  readonly onWait?: (holder: LeaseRecord) => void;
}

/**
 * One writer per table: a lease object under `_lakeswap/leases/`, created only
 * if absent and taken over, only if unchanged, once it has expired (or, on the
 * same host, once its process is gone). The holder renews it while it works
 * and checks it is still held right before moving a pointer.
 */
export class WriterLease {
  private record: LeaseRecord;
  private etag: string;
  private renewTimer: NodeJS.Timeout | undefined;
  private lost: string | undefined;

  private constructor(
    private readonly store: ObjectStore,
    private readonly key: string,
    private readonly ttlMs: number,
    record: LeaseRecord,
    etag: string,
  ) {
    this.record = record;
    this.etag = etag;
  }

  /** Takes the writer lease of `table`, waiting up to `options.waitMs` for the current holder. */
  static async acquire(store: ObjectStore, table: string, options: LeaseOptions): Promise<WriterLease> {
    if (!store.capabilities.conditionalWrites) {
      throw new InvalidInputError(
        `the object store at ${store.description} does not support conditional writes, which the writer lease needs; use a store that does (S3, or the local folder)`,
      );
    }
    const ttlMs = options.ttlMs ?? DEFAULT_LEASE_TTL_MS;
    const key = leaseKey(table);
    const deadline = Date.now() + options.waitMs;
    let waiting = false;
    for (let attempt = 0; ; attempt += 1) {
      const record = newRecord(table, options.command, ttlMs);
      const body = JSON.stringify(record);
      if (await store.putIfAbsent(key, body)) {
        return WriterLease.start(store, key, ttlMs, record);
      }
      const current = await store.get(key);
      if (current === undefined) continue;
      const holder = parseRecord(current.body);
      // Our own write, answered "already exists" because a retry followed a lost response: we hold it.
      if (holder?.token === record.token) return WriterLease.start(store, key, ttlMs, record);
      if (holder === undefined || leaseAbandoned(holder)) {
        if (await store.putIfMatch(key, body, current.etag)) return WriterLease.start(store, key, ttlMs, record);
        continue;
      }
      if (Date.now() >= deadline) throw new LeaseHeldError(heldMessage(holder, options.waitMs));
      if (!waiting) {
        waiting = true;
        options.onWait?.(holder);
      }
      const pause = Math.min(1000, 50 * 2 ** Math.min(attempt, 5)) * (0.5 + Math.random() / 2);
      await sleep(Math.max(10, Math.min(pause, deadline - Date.now())));
    }
  }

  private static async start(store: ObjectStore, key: string, ttlMs: number, record: LeaseRecord): Promise<WriterLease> {
    const stored = await store.get(key);
    if (!stored) throw new LakeswapError("LEASE_LOST", `the lease '${key}' vanished right after it was taken`);
    const lease = new WriterLease(store, key, ttlMs, record, stored.etag);
    lease.renewTimer = setInterval(() => void lease.renew(), Math.max(1000, Math.floor(ttlMs / 3)));
    lease.renewTimer.unref();
    return lease;
  }

  /** Throws unless this writer still holds the lease; called right before a pointer moves. */
  async assertHeld(): Promise<void> {
    const current = await this.store.get(this.key);
    const holder = current ? parseRecord(current.body) : undefined;
    if (this.lost || holder?.token !== this.record.token) {
      const by = holder ? ` by pid ${holder.pid} on ${holder.host} (${holder.command})` : "";
      throw new LakeswapError(
        "LEASE_LOST",
        `the writer lease of table '${this.record.table}' was taken over${by}; this writer stopped before moving the pointer. Rerun the command.`,
      );
    }
  }

  /** Gives the lease up; a lease already taken over is left alone. */
  async release(): Promise<void> {
    if (this.renewTimer) clearInterval(this.renewTimer);
    this.renewTimer = undefined;
    const current = await this.store.get(this.key);
    if (current && parseRecord(current.body)?.token === this.record.token) {
      await this.store.deleteIfMatch(this.key, current.etag);
    }
  }

  private async renew(): Promise<void> {
    try {
      const renewed: LeaseRecord = { ...this.record, expiresAt: new Date(Date.now() + this.ttlMs).toISOString() };
      if (await this.store.putIfMatch(this.key, JSON.stringify(renewed), this.etag)) {
        const stored = await this.store.get(this.key);
        if (stored) this.etag = stored.etag;
        this.record = renewed;
      } else {
        this.lost = "taken over";
      }
    } catch {
      // A failed renewal is retried at the next tick; assertHeld decides before any pointer moves.
    }
  }
}

export { leaseKey };

function newRecord(table: string, command: string, ttlMs: number): LeaseRecord {
  const now = Date.now();
  return {
    table,
    token: randomBytes(12).toString("hex"),
    host: hostname(),
    pid: process.pid,
    command,
    acquiredAt: new Date(now).toISOString(),
    expiresAt: new Date(now + ttlMs).toISOString(),
  };
}

function parseRecord(body: Uint8Array): LeaseRecord | undefined {
  try {
    const value = JSON.parse(Buffer.from(body).toString("utf8")) as LeaseRecord;
    return typeof value.token === "string" && typeof value.expiresAt === "string" ? value : undefined;
  } catch {
    return undefined;
  }
}

/** Expired, or held by a process of this host that no longer exists. */
function leaseAbandoned(holder: LeaseRecord): boolean {
  if (Date.parse(holder.expiresAt) <= Date.now()) return true;
  if (holder.host !== hostname() || holder.pid === process.pid) return false;
  try {
    process.kill(holder.pid, 0);
    return false;
  } catch (error) {
    return (error as { code?: string }).code === "ESRCH";
  }
}

function heldMessage(holder: LeaseRecord, waitMs: number): string {
  const waited = waitMs > 0 ? `after waiting ${Math.round(waitMs / 1000)}s, ` : "";
  return (
    `${waited}table '${holder.table}' is being written by pid ${holder.pid} on ${holder.host} (${holder.command}) since ${holder.acquiredAt}; ` +
    `its lease expires at ${holder.expiresAt} unless renewed. Wait longer with --wait DURATION, or retry when it is done.`
  );
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
