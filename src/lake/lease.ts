import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import type { ObjectStore } from "../store/object-store.js";
import { InvalidInputError, LakeswapError, LeaseHeldError } from "../model/errors.js";
import type { ProcessLock } from "../store/object-store.js";
import { leaseKey, leaseLockKey } from "./layout.js";
import { now as clockNow } from "../shared/clock.js";

/** How long a lease lives without renewal; the holder renews it every third of this. */
const DEFAULT_LEASE_TTL_MS = 60_000;

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
  /** Also hold the kernel lock where the store has one (default true; a running sync's own lease goes without). */
  readonly kernelLock?: boolean;
}

/**
 * One writer per table: a lease object under the lake's metadata folder (`leaseKey`, ./layout.ts), created only
 * if absent and taken over, only if unchanged, once it has expired (or, on the
 * same host, once its process is gone). Where the store has kernel locks (the
 * local folder), the holder also holds the table's kernel lock for its whole
 * life: the kernel drops it when the process dies, and a process that is only
 * paused or stopped keeps it, so its table is never taken from it. Every
 * pointer move is fenced (`fence`): a conditional write of the lease object on
 * the tag this writer holds, which a takeover changes.
 */
export class WriterLease {
  private record: LeaseRecord;
  private etag: string;
  private renewTimer: NodeJS.Timeout | undefined;
  private lost: string | undefined;
  /** Lease writes (renewals, fences) one at a time: two on the same tag would fail each other. */
  private writes: Promise<unknown> = Promise.resolve();

  private constructor(
    private readonly store: ObjectStore,
    private readonly key: string,
    private readonly ttlMs: number,
    record: LeaseRecord,
    etag: string,
    private readonly lock: ProcessLock | undefined,
  ) {
    this.record = record;
    this.etag = etag;
  }

  /** Takes the writer lease of `table` (or of a running sync: `syncLeaseName`), waiting up to `options.waitMs` for the current holder. */
  static async acquire(store: ObjectStore, table: string, options: LeaseOptions): Promise<WriterLease> {
    if (!store.capabilities.conditionalWrites) {
      throw new InvalidInputError(
        `the object store at ${store.description} does not support conditional writes, which the writer lease needs; use a store that does (S3, or the local folder)`,
      );
    }
    const ttlMs = options.ttlMs ?? DEFAULT_LEASE_TTL_MS;
    const key = leaseKey(table);
    const started = Date.now();
    const deadline = started + options.waitMs;
    let waiting = false;
    for (let attempt = 0; ; attempt += 1) {
      const lock = options.kernelLock === false ? undefined : await takeLock(store, table);
      let holder: LeaseRecord | undefined;
      if (lock !== "busy") {
        const record = newRecord(table, options.command, ttlMs);
        const taken = await takeLeaseObject(store, key, record, lock !== undefined).catch(async (error: unknown) => {
          await lock?.release();
          throw error;
        });
        if (taken === true) return WriterLease.start(store, key, ttlMs, record, lock);
        await lock?.release();
        if (taken === "retry") continue;
        holder = taken;
      } else {
        // The kernel lock is held: by a live process of this host (it may be stopped or paused, not dead).
        holder = parseRecord((await store.get(key))?.body);
      }
      const shown = holder ?? unknownHolder(table);
      // A kernel lock outlives a killed writer by a moment where its flock(1) child held it (the child ends once it
      // sees its pipe from the writer close): while the lease names a process of this host that is gone, the lock is
      // waited for that long, also by a writer that does not wait, so that a dead writer's lease is taken at once.
      const releasing = lock === "busy" && holder !== undefined && processGone(holder) && Date.now() < started + RELEASING_LOCK_MS;
      if (Date.now() >= deadline && !releasing) throw new LeaseHeldError(heldMessage(shown, options.waitMs, lock === "busy"));
      if (!waiting) {
        waiting = true;
        options.onWait?.(shown);
      }
      const pause = Math.min(1000, 50 * 2 ** Math.min(attempt, 5)) * (0.5 + Math.random() / 2);
      await sleep(Math.max(10, Math.min(pause, deadline - Date.now())));
    }
  }

  private static async start(store: ObjectStore, key: string, ttlMs: number, record: LeaseRecord, lock: ProcessLock | undefined): Promise<WriterLease> {
    const stored = await store.get(key);
    const holder = parseRecord(stored?.body);
    if (!stored || holder?.token !== record.token) {
      await lock?.release();
      // Only a takeover (after this writer's lease expired: a stalled process) or a removal gets in between.
      throw new LakeswapError(
        "LEASE_LOST",
        `the writer lease of ${leaseSubject(record.table)} was taken over right after this writer took it (its lease expired before it read it back: ` +
          `was the process paused?): ${holder ? `it is held by ${holderText(holder)} since ${holder.acquiredAt}` : "another writer took it, or removed it, and has released it since"}. Rerun the command.`,
      );
    }
    const lease = new WriterLease(store, key, ttlMs, record, stored.etag, lock);
    lease.renewTimer = setInterval(() => void lease.renew(), Math.max(1000, Math.floor(ttlMs / 3)));
    lease.renewTimer.unref();
    return lease;
  }

  /**
   * Fences a pointer move: called right before each catalog call that moves pointers. It renews the lease
   * object with a conditional write on the tag this writer last wrote, which fails once another writer took
   * the lease over (a takeover writes the object anew), and throws LEASE_LOST then; so does a kernel lock
   * that was lost. A writer that stalls after this call and before its catalog call lands is the residual
   * window where the store has no kernel lock (S3): it must stall for longer than the lease's TTL.
   */
  async fence(): Promise<void> {
    const ok = await this.serially(() => this.extend());
    if (ok && this.lost === undefined && this.lock?.lost === undefined) return;
    const current = await this.store.get(this.key);
    const holder = parseRecord(current?.body);
    const by = holder && holder.token !== this.record.token ? ` by ${holderText(holder)}` : "";
    const why = this.lock?.lost !== undefined ? ` (${this.lock.lost})` : "";
    throw new LakeswapError(
      "LEASE_LOST",
      `the writer lease of ${leaseSubject(this.record.table)} was taken over${by}${why}; this writer moved no pointer after losing it. Rerun the command.`,
    );
  }

  /** Throws unless this writer still holds the lease (the fence, by another name: ./lake.ts checks before every move). */
  async assertHeld(): Promise<void> {
    await this.fence();
  }

  /** Gives the lease up; a lease already taken over is left alone. */
  async release(): Promise<void> {
    if (this.renewTimer) clearInterval(this.renewTimer);
    this.renewTimer = undefined;
    try {
      await this.serially(async () => {
        const current = await this.store.get(this.key);
        if (current && parseRecord(current.body)?.token === this.record.token) {
          await this.store.deleteIfMatch(this.key, current.etag);
        }
      });
    } finally {
      // After the lease object: a writer that finds the kernel lock free finds the object gone too.
      await this.lock?.release();
    }
  }

  private async renew(): Promise<void> {
    try {
      if (!(await this.serially(() => this.extend()))) this.lost = "taken over";
    } catch {
      // A failed renewal is retried at the next tick; the fence decides before any pointer moves.
    }
  }

  /** Writes the lease object with a new expiry, only if it still has the tag this writer holds; false if not. */
  private async extend(): Promise<boolean> {
    if (this.lost !== undefined) return false;
    const renewed: LeaseRecord = { ...this.record, expiresAt: new Date(clockNow() + this.ttlMs).toISOString() };
    if (!(await this.store.putIfMatch(this.key, JSON.stringify(renewed), this.etag))) return false;
    const stored = await this.store.get(this.key);
    if (!stored || parseRecord(stored.body)?.token !== this.record.token) return false;
    this.etag = stored.etag;
    this.record = renewed;
    return true;
  }

  private serially<T>(work: () => Promise<T>): Promise<T> {
    const next = this.writes.then(work, work);
    this.writes = next.catch(() => undefined);
    return next;
  }
}

/** Removes the lease object at `key` if its holder is gone (expired, or a dead process of this host); true if it did. */
export async function removeAbandonedLease(store: ObjectStore, key: string): Promise<boolean> {
  const current = await store.get(key);
  const holder = parseRecord(current?.body);
  if (!current || !holder || !leaseAbandoned(holder, false)) return false;
  return store.deleteIfMatch(key, current.etag);
}

/** How a lease is named in messages: `table 'orders'`, or `sync 20261202T...` for a running sync's lease. */
export function leaseSubject(name: string): string {
  return name.startsWith("sync-") ? `sync ${name.slice("sync-".length)}` : `table '${name}'`;
}

/**
 * The kernel lock of a lease where the store has one: undefined where it has none (S3), or where it cannot be
 * taken here (warned once: the lease object alone then decides, and a stalled writer's table can be taken over).
 */
async function takeLock(store: ObjectStore, table: string): Promise<ProcessLock | "busy" | undefined> {
  if (!store.tryLock) return undefined;
  const lock = await store.tryLock(leaseLockKey(table));
  if (typeof lock === "object" && "unavailable" in lock) {
    if (!warnedNoLock) {
      warnedNoLock = true;
      process.emitWarning(
        `${lock.unavailable}: the writer lease of this lake falls back to its lease file alone, so a writer that stalls for longer than the lease's TTL loses its table ` +
          "(its later pointer moves are refused). Build lakeswap's native extension (npm run build:native, with a C compiler) or install util-linux for the kernel lock that keeps a stalled writer's table its own.",
      );
    }
    return undefined;
  }
  return lock;
}
let warnedNoLock = false;

/**
 * Writes `record` as the lease object: created if absent, or over a holder that is gone. Returns true when
 * written, the holder when it holds the lease, "retry" when the object changed under this attempt. With the
 * table's kernel lock held (`locked`), a holder of this host is gone whatever its lease says: its process
 * would hold the lock if it were alive.
 */
async function takeLeaseObject(store: ObjectStore, key: string, record: LeaseRecord, locked: boolean): Promise<true | "retry" | LeaseRecord> {
  const body = JSON.stringify(record);
  if (await store.putIfAbsent(key, body)) return true;
  const current = await store.get(key);
  if (current === undefined) return "retry";
  const holder = parseRecord(current.body);
  // Our own write, answered "already exists" because a retry followed a lost response: we hold it.
  if (holder?.token === record.token) return true;
  if (holder === undefined || leaseAbandoned(holder, locked)) return (await store.putIfMatch(key, body, current.etag)) ? true : "retry";
  return holder;
}

export { leaseKey };

function newRecord(table: string, command: string, ttlMs: number): LeaseRecord {
  const now = clockNow();
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

function parseRecord(body: Uint8Array | undefined): LeaseRecord | undefined {
  if (body === undefined) return undefined;
  try {
    const value = JSON.parse(Buffer.from(body).toString("utf8")) as LeaseRecord;
    return typeof value.token === "string" && typeof value.expiresAt === "string" ? value : undefined;
  } catch {
    return undefined;
  }
}

/** How long a kernel lock is waited for after its lease's process of this host is gone (its flock(1) child ending). */
const RELEASING_LOCK_MS = 3000;

/** Whether the lease names a process of this host, not this one, that no longer exists. */
function processGone(holder: LeaseRecord): boolean {
  if (holder.host !== hostname() || holder.pid === process.pid) return false;
  try {
    process.kill(holder.pid, 0);
    return false;
  } catch (error) {
    return (error as { code?: string }).code === "ESRCH";
  }
}

/**
 * Expired, or held by a process of this host that no longer exists (`locked`: this writer holds the table's
 * kernel lock, which that process would hold if it were alive). A lease of another host holds until it expires:
 * its pid means nothing here.
 */
function leaseAbandoned(holder: LeaseRecord, locked: boolean): boolean {
  if (Date.parse(holder.expiresAt) <= clockNow()) return true;
  if (holder.host !== hostname()) return false;
  if (locked) return true;
  return processGone(holder);
}

function heldMessage(holder: LeaseRecord, waitMs: number, kernelLock: boolean): string {
  const waited = waitMs > 0 ? `after waiting ${Math.round(waitMs / 1000)}s, ` : "";
  const busy = holder.table.startsWith("sync-") ? "is still running, in" : "is being written by";
  const until = kernelLock
    ? "that process is alive and holds the table's lock until it ends (if it hangs, stop it: its table is free once it is gone)"
    : `its lease expires at ${holder.expiresAt} unless renewed`;
  return (
    `${waited}${leaseSubject(holder.table)} ${busy} ${holderText(holder)} since ${holder.acquiredAt}; ` +
    `${until}. Wait longer with --wait DURATION, or retry when it is done.`
  );
}

function holderText(holder: LeaseRecord): string {
  return `pid ${holder.pid} on ${holder.host} (${holder.command})`;
}

/** Who holds a kernel lock whose lease object could not be read (being written, or just removed). */
function unknownHolder(table: string): LeaseRecord {
  const now = new Date().toISOString();
  return { table, token: "", host: "this host", pid: 0, command: "unknown command", acquiredAt: now, expiresAt: now };
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
