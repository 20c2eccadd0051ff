import { spawn, spawnSync } from "node:child_process";
import { mkdirSync, readFileSync } from "node:fs";
import { hostname } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { leaseKey, leaseLockKey, METADATA_FOLDERS } from "../../src/lake/layout.js";
import { WriterLease } from "../../src/lake/lease.js";
import { LocalStore } from "../../src/store/local-store.js";
import { tempDir } from "../support/lake-fixture.js";

// A writer killed with SIGKILL before it had loaded DuckDB held its table's kernel lock through a flock(1) child. That
// child ends once it sees its pipe from the dead writer close: a moment after the writer is gone. A lease taken in that
// moment without waiting (`--no-wait`, the outbox replay of the next writer) found the kernel lock busy and gave up,
// though the lease names a process of this host that no longer exists (CI, once: a killed replace's outbox entry was
// not replayed). Such a lock is now waited for, briefly, as the promise goes: a dead writer's lease is taken at once.

let workspace: ReturnType<typeof tempDir>;
let store: LocalStore;
beforeAll(() => {
  workspace = tempDir("lakeswap-lease-dead-holder-");
  store = new LocalStore(workspace.dir, { folders: METADATA_FOLDERS });
});
afterAll(() => workspace.cleanup());

describe("the lease of a writer of this host that is gone", () => {
  it("is taken without waiting while its kernel lock is still held by a helper that is about to end", async () => {
    const table = "orders";
    // A lease left by a writer that no longer exists: a process of this host, ended, its lease far from expiry.
    const gone = spawnSync(process.execPath, ["-e", ""]).pid;
    const now = Date.now();
    const record = {
      table, token: "dead-writer", host: hostname(), pid: gone, command: `replace ${table}`,
      acquiredAt: new Date(now).toISOString(), expiresAt: new Date(now + 60_000).toISOString(),
    };
    await store.put(leaseKey(table), new TextEncoder().encode(JSON.stringify(record)));
    // Its kernel lock, still held for a moment, as the dead writer's flock(1) child holds it until it notices.
    const lockFile = store.localPath(leaseLockKey(table));
    mkdirSync(path.dirname(lockFile), { recursive: true });
    const helper = spawn("flock", ["--exclusive", lockFile, "sh", "-c", "echo locked; sleep 0.4"], { stdio: ["ignore", "pipe", "ignore"] });
    await new Promise((resolve) => helper.stdout!.once("data", resolve));

    const lease = await WriterLease.acquire(store, table, { waitMs: 0, command: "the next writer" });
    try {
      // Ended as the kernel sees it: Node sets the child's exitCode only once its event loop has handled the exit, which
      // may come after the lease (CI, once).
      expect(processEnded(helper.pid!), "taken once the helper ended").toBe(true);
    } finally {
      await lease.release();
    }
  });

  it("held by a live process of this host, is not waited for by a writer that does not wait", async () => {
    const table = "events";
    const lockFile = store.localPath(leaseLockKey(table));
    mkdirSync(path.dirname(lockFile), { recursive: true });
    const holder = spawn("flock", ["--exclusive", lockFile, "sh", "-c", "echo locked; sleep 5"], { stdio: ["ignore", "pipe", "ignore"] });
    await new Promise((resolve) => holder.stdout!.once("data", resolve));
    const now = Date.now();
    const record = {
      table, token: "live-writer", host: hostname(), pid: holder.pid, command: `replace ${table}`,
      acquiredAt: new Date(now).toISOString(), expiresAt: new Date(now + 60_000).toISOString(),
    };
    await store.put(leaseKey(table), new TextEncoder().encode(JSON.stringify(record)));
    try {
      const started = Date.now();
      await expect(WriterLease.acquire(store, table, { waitMs: 0, command: "the next writer" })).rejects.toThrow(/is being written by pid/);
      expect(Date.now() - started).toBeLessThan(1000);
    } finally {
      holder.kill("SIGKILL");
    }
  });
});

/** Whether process `pid` has ended: gone, or a zombie its parent has not reaped yet (Linux's /proc). */
function processEnded(pid: number): boolean {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return true;
  }
  // The state is the field after the command name, which is in parentheses and may hold spaces.
  const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
  return state === "Z" || state === "X";
}
