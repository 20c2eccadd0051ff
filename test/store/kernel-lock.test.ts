// The kernel lock of the embedded lake's writer lease (src/store/kernel-lock.ts): flock(2) held for the life of the
// process, through lakeswap's DuckDB extension where it is built, else through a flock(1) child. Both are held to the
// same cases, with real processes: what the lease (src/lake/lease.ts) relies on to keep one writer per table.
import { existsSync, readdirSync, readlinkSync } from "node:fs";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { NATIVE_EXTENSION_PATH } from "../../src/duckdb/duckdb-open.js";
import { takeKernelLock, type KernelLockAnswer } from "../../src/store/kernel-lock.js";
import type { ProcessLock } from "../../src/store/object-store.js";
import { spawnScript, until, type Child } from "../support/crash-kit.js";
import { tempDir } from "../support/lake-fixture.js";

const nativeBuilt = existsSync(NATIVE_EXTENSION_PATH) && process.env.LAKESWAP_NATIVE !== "off";

/** The files process `pid` has open (its descriptors' targets), from /proc. */
function openFiles(pid: number | "self"): string[] {
  const fds = path.join("/proc", String(pid), "fd");
  return readdirSync(fds).flatMap((fd) => {
    try {
      return [readlinkSync(path.join(fds, fd))];
    } catch {
      return [];
    }
  });
}

function held(answer: KernelLockAnswer): ProcessLock {
  if (typeof answer === "string" || "unavailable" in answer) throw new Error(`the lock was not taken: ${JSON.stringify(answer)}`);
  return answer;
}

describe.each([
  { way: "lakeswap's extension", native: true },
  { way: "flock(1)", native: false },
])("the kernel lock through $way", ({ native }) => {
  let workspace: ReturnType<typeof tempDir>;
  let file: string;
  const children: Child[] = [];
  const sleepers: number[] = [];
  const take = () => takeKernelLock(file, { native });
  const holder = async (): Promise<Child> => {
    const child = spawnScript("lock-holder.ts", ["--file", file, "--native", native ? "on" : "off"]);
    children.push(child);
    expect(await child.nextJson(0)).toEqual({ answer: "held", pid: child.pid });
    return child;
  };

  /**
   * The lock, taken right after its holder was killed: the kernel closes a dead process's descriptors before its
   * parent sees it exit, so the extension's lock is free at once; a flock(1) child first has to see its stdin close.
   */
  const freeOnceDied = async (): Promise<ProcessLock> => {
    const first = await take();
    if (native) expect(first, "free at once").not.toBe("busy");
    const lock = first !== "busy" ? first : await until("the lock to be free", async () => {
      const answer = await take();
      return answer === "busy" ? undefined : answer;
    });
    return held(lock);
  };

  beforeEach(() => {
    workspace = tempDir("lakeswap-lock-");
    // In a folder not made yet: the lock makes it.
    file = path.join(workspace.dir, "leases", "orders.lock");
  });
  afterEach(async () => {
    for (const child of children.splice(0)) {
      child.kill("SIGKILL");
      await child.exited;
    }
    for (const pid of sleepers.splice(0)) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // Gone already.
      }
    }
    workspace.cleanup();
  });

  it.runIf(!native || nativeBuilt)("is exclusive within one process too; release frees it for the next taker of this process", async () => {
    const first = held(await take());
    expect(await take(), "a second lock of the same file, in the same process").toBe("busy");
    // The native lock is a descriptor of this process on the file; flock(1)'s is its child's.
    expect(openFiles("self").filter((target) => target === file)).toHaveLength(native ? 1 : 0);
    await first.release();
    await first.release();
    expect(openFiles("self")).not.toContain(file);
    const second = held(await take());
    expect(second.lost).toBeUndefined();
    await second.release();
  });

  it.runIf(!native || nativeBuilt)("a lock another process holds is busy here until that process releases it", async () => {
    const other = await holder();
    expect(await take()).toBe("busy");
    other.send("release");
    expect(await other.nextJson(1)).toEqual({ released: true });
    const mine = held(await take());
    // And the other way round: this process's lock is busy for another process.
    const refused = spawnScript("lock-holder.ts", ["--file", file, "--native", native ? "on" : "off"]);
    children.push(refused);
    expect(await refused.nextJson(0)).toEqual({ answer: "busy", pid: refused.pid });
    await mine.release();
  });

  it.runIf(!native || nativeBuilt)("a holder killed with kill -9 leaves the lock free, at once with the extension", async () => {
    const other = await holder();
    expect(await take()).toBe("busy");
    other.kill("SIGKILL");
    await other.exited;
    await (await freeOnceDied()).release();
  });

  it.runIf(!native || nativeBuilt)("a child process the holder started never keeps the lock: it is free once the holder dies", async () => {
    const other = await holder();
    other.send("spawn-sleep");
    const { sleeper } = await other.nextJson<{ sleeper: number }>(1);
    sleepers.push(sleeper);
    expect(openFiles(sleeper), "the lock file is not open in the child").not.toContain(file);
    other.kill("SIGKILL");
    await other.exited;
    const lock = await freeOnceDied();
    expect(() => process.kill(sleeper, 0), "the holder's child still runs").not.toThrow();
    await lock.release();
  });
});
