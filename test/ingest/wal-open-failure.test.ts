import fs from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, afterEach, describe, expect, it, vi } from "vitest";
import type * as WalSync from "../../src/ingest/wal/wal-sync.js";

// The log's sync thread fails to start (a worker thread refused: out of memory, a thread limit). Here by a stand-in
// for startSyncer, the one way to make that happen on demand.
vi.mock("../../src/ingest/wal/wal-sync.js", async (original) => ({
  ...(await original<typeof WalSync>()),
  startSyncer: () => Promise.reject(Object.assign(new Error("no thread for the syncer"), { code: "ERR_WORKER_INIT_FAILED" })),
}));

// Test files share their worker's process (vitest.config.ts): the log's modules are loaded anew, so they take the stand-in,
// and the files after this one load the real ones again.
vi.resetModules();
const { WriteAheadLog } = await import("../../src/ingest/wal/write-ahead-log.js");
afterAll(() => {
  vi.doUnmock("../../src/ingest/wal/wal-sync.js");
  vi.resetModules();
});

/** The files this process holds open inside `dir`. */
function openFilesIn(dir: string): string[] {
  return fs
    .readdirSync("/proc/self/fd")
    .map((fd) => {
      try {
        return fs.readlinkSync(path.join("/proc/self/fd", fd));
      } catch {
        return "";
      }
    })
    .filter((target) => target.startsWith(`${dir}${path.sep}`));
}

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

describe.runIf(process.platform === "linux")("a write-ahead log whose sync thread fails to start", () => {
  it("fails to open with the thread's error, holding no segment open and no lock", async () => {
    const dir = fs.mkdtempSync(path.join(tmpdir(), "lakeswap-wal-nosyncer-"));
    dirs.push(dir);
    // A segment left by an earlier run, as recovery finds it (an open segment is opened again for appends).
    fs.writeFileSync(path.join(dir, "id"), "0123456789abcdef\n");
    fs.writeFileSync(path.join(dir, "000000000001.open"), Buffer.alloc(0));
    const options = { dir, segmentMaxBytes: 1 << 20, segmentMaxAgeMs: 60_000, maxBytes: 1 << 30 };
    await expect(WriteAheadLog.open(options)).rejects.toThrow("no thread for the syncer");
    expect(openFilesIn(dir)).toEqual([]);
    expect(fs.existsSync(path.join(dir, "lock"))).toBe(false);
    // Nothing holds the folder: a second try fails the same way, not on a lock.
    await expect(WriteAheadLog.open(options)).rejects.toThrow("no thread for the syncer");
    expect(openFilesIn(dir)).toEqual([]);
  });
});
