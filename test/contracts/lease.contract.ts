/**
 * The writer lease's contract (src/lake/lease.ts) over every object store it runs on: one writer per table, a
 * holder named to whoever has to wait, a lease taken over only once it expired (and by one writer only), a fence
 * that refuses a writer whose lease was taken, and a release that frees the table. The lease is written once, in
 * the lake; an object store that keeps its conditional-write promises gets all of this.
 */
import { hostname } from "node:os";
import { afterEach, describe, expect, it } from "vitest";
import { WriterLease, leaseKey, type LeaseRecord } from "../../src/lake/lease.js";
import { advanceClock, resetClock } from "../../src/shared/clock.js";
import type { ObjectStore } from "../../src/store/object-store.js";
import { eachFixture, type FixtureFactory } from "./fixture.js";
import type { ObjectStoreFixture } from "./object-store.contract.js";

/** A lease record of a writer on another host, unexpired: only that host could tell whether its pid still runs. */
function otherHost(table: string): LeaseRecord {
  return {
    table,
    token: "0123456789abcdef01234567",
    host: `not-${hostname()}`,
    pid: 4_194_999,
    command: "replace orders/day=2026-11-01",
    acquiredAt: new Date().toISOString(),
    expiresAt: new Date(Date.now() + 60_000).toISOString(),
  };
}

/** Without the kernel lock: the rules of the lease object alone, which are the same on every store. */
const OBJECT_ONLY = { waitMs: 0, kernelLock: false } as const;

/** Registers the lease contract over the store adapter `name`. */
export function leaseContract(name: string, factory: FixtureFactory<ObjectStoreFixture>): void {
  describe(`the writer lease contract over ${name}`, () => {
    const fixture = eachFixture(factory);
    const store = (): ObjectStore => fixture().store;
    const held: WriterLease[] = [];
    afterEach(async () => {
      resetClock();
      for (const lease of held.splice(0)) await lease.release().catch(() => undefined);
    });
    const acquire = async (command: string, options: { waitMs?: number; kernelLock?: boolean; ttlMs?: number; onWait?: (holder: LeaseRecord) => void } = {}) => {
      const lease = await WriterLease.acquire(store(), "orders", { waitMs: 0, command, ...options });
      held.push(lease);
      return lease;
    };

    it("is exclusive: a second writer is refused at once, told who holds it and since when; release frees the table", async () => {
      const first = await acquire("sync one");
      await expect(acquire("sync two")).rejects.toMatchObject({
        code: "LEASE_HELD",
        message: expect.stringMatching(new RegExp(`table 'orders' is being written by pid ${process.pid} on ${hostname()} \\(sync one\\) since \\d{4}-`)),
      });
      await first.fence();
      await first.release();
      expect(await store().get(leaseKey("orders")), "the lease object is gone").toBeUndefined();
      const second = await acquire("sync two");
      await second.fence();
    });

    it("a waiting writer gets the table once its holder releases it", async () => {
      const first = await acquire("sync one");
      let waitedFor: LeaseRecord | undefined;
      const second = await acquire("sync two", {
        waitMs: 60_000,
        onWait: (holder) => {
          waitedFor = holder;
          void first.release();
        },
      });
      expect(waitedFor).toMatchObject({ table: "orders", command: "sync one", pid: process.pid });
      await second.fence();
    });

    it("an unexpired lease of another host holds, whatever its pid, and is left as it was", async () => {
      const theirs = otherHost("orders");
      await store().put(leaseKey("orders"), JSON.stringify(theirs));
      await expect(acquire("replace orders/day=2026-11-02", OBJECT_ONLY)).rejects.toThrow(
        `table 'orders' is being written by pid 4194999 on not-${hostname()} (replace orders/day=2026-11-01)`,
      );
      expect(JSON.parse(Buffer.from((await store().get(leaseKey("orders")))!.body).toString())).toEqual(theirs);
    });

    it("an expired lease is taken over, by one writer of those racing for it; the old holder's fence then refuses it, and its release leaves the new lease", async () => {
      const stalled = await acquire("stalled sync", { ...OBJECT_ONLY, ttlMs: 60_000 });
      advanceClock(61_000);
      const racing = await Promise.allSettled(["sync two", "sync three", "sync four"].map((command) => acquire(command, OBJECT_ONLY)));
      const winners = racing.filter((r): r is PromiseFulfilledResult<WriterLease> => r.status === "fulfilled");
      expect(winners).toHaveLength(1);
      for (const lost of racing.filter((r) => r.status === "rejected")) expect((lost as PromiseRejectedResult).reason).toMatchObject({ code: "LEASE_HELD" });
      await expect(stalled.fence()).rejects.toMatchObject({
        code: "LEASE_LOST",
        message: expect.stringMatching(/the writer lease of table 'orders' was taken over by pid \d+ on .*; this writer moved no pointer after losing it/),
      });
      await stalled.release();
      await winners[0]!.value.fence();
      await expect(acquire("sync five", OBJECT_ONLY)).rejects.toMatchObject({ code: "LEASE_HELD" });
    });

    it("a lease taken over between its write and its read-back says who took it", async () => {
      const inner = store();
      let takeover: "other writer" | "removed" = "other writer";
      // Another writer gets in right after this writer's lease was written (this writer stalled past its TTL there).
      const racing = new Proxy(inner, {
        get(target, property, receiver) {
          if (property !== "putIfAbsent") return Reflect.get(target, property, receiver) as unknown;
          return async (key: string, body: string) => {
            const written = await target.putIfAbsent(key, body);
            if (written && takeover === "other writer") await target.put(key, JSON.stringify(otherHost("orders")));
            if (written && takeover === "removed") await target.delete([key]);
            return written;
          };
        },
      });
      const command = { waitMs: 0, command: "replace orders/day=2026-11-02" };
      await expect(WriterLease.acquire(racing, "orders", command)).rejects.toThrow(
        new RegExp(
          `the writer lease of table 'orders' was taken over right after this writer took it .*: it is held by pid 4194999 on not-${hostname()} \\(replace orders/day=2026-11-01\\) since `,
        ),
      );
      await inner.delete([leaseKey("orders")]);
      takeover = "removed";
      await expect(WriterLease.acquire(racing, "orders", command)).rejects.toThrow("another writer took it, or removed it, and has released it since");
    });
  });
}
