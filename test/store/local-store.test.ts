import { mkdirSync } from "node:fs";
import path from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { FolderSyncs, makeFolder } from "../../src/store/local-files.js";
import { LocalStore } from "../../src/store/local-store.js";
import { METADATA_FOLDERS } from "../../src/lake/layout.js";
import { recordFsyncs } from "../support/fsync-spy.js";
import { tempDir } from "../support/lake-fixture.js";

let workspace: ReturnType<typeof tempDir> | undefined;
afterEach(() => {
  vi.restoreAllMocks();
  workspace?.cleanup();
});

describe("the local store", () => {
  it("keeps writes and deletes of records in one folder safe when they run at once", async () => {
    workspace = tempDir();
    const store = new LocalStore(workspace.dir, { folders: METADATA_FOLDERS });
    // Each writer records and acknowledges entries, as concurrent partition builds do with the outbox.
    const writer = async (w: number) => {
      for (let i = 0; i < 150; i += 1) {
        const key = `_lakeswap/outbox/t/${w}-${i}.json`;
        await store.put(key, "{}");
        await store.delete([key]);
      }
    };
    await Promise.all([0, 1, 2, 3].map(writer));
    expect(await store.list("_lakeswap/outbox/")).toEqual([]);
  });

  it("makes a record in new folders durable: the file, its folder, and every folder that got a new one; writes into one folder share its fsyncs", async () => {
    workspace = tempDir();
    const root = path.join(workspace.dir, "lake");
    const store = new LocalStore(root, { folders: METADATA_FOLDERS });
    await store.put("_lakeswap/outbox/t/first.json", "{}");
    const fsyncs = recordFsyncs();
    // As a batch writes its manifests: one new folder per partition, under a table folder that is new too.
    await Promise.all(Array.from({ length: 16 }, (_, i) => store.put(`_lakeswap/manifests/t/day=${i}/r.json`, "{}")));
    fsyncs.restore();
    const manifests = path.join(root, "_lakeswap", "manifests");
    for (let i = 0; i < 16; i += 1) expect(fsyncs.count(path.join(manifests, "t", `day=${i}`)), `day=${i}`).toBe(1);
    // Each new folder's parent is fsynced, and writes that run at once share those fsyncs (how many depends on timing).
    for (const parent of [path.join(manifests, "t"), manifests]) {
      expect(fsyncs.count(parent), parent).toBeGreaterThanOrEqual(1);
      expect(fsyncs.count(parent), parent).toBeLessThan(16);
    }
    expect(fsyncs.count(path.join(root, "_lakeswap")), "the folder that got the new 'manifests' folder").toBe(1);

    const again = recordFsyncs();
    await Promise.all(Array.from({ length: 32 }, (_, i) => store.put(`_lakeswap/outbox/t/${i}.json`, "{}")));
    again.restore();
    // Each record's own file is fsynced; their shared folder a few times, not once per record.
    expect(again.count(path.join(root, "_lakeswap", "outbox", "t"))).toBeGreaterThanOrEqual(1);
    expect(again.count(path.join(root, "_lakeswap", "outbox", "t"))).toBeLessThan(16);
    expect(again.paths.filter((p) => p.endsWith(".tmp"))).toHaveLength(32);
  });

  it("writes writer leases without a single fsync, and keeps their conditional writes exact", async () => {
    workspace = tempDir();
    const root = path.join(workspace.dir, "lake");
    const store = new LocalStore(root, { folders: METADATA_FOLDERS });
    await store.put("_lakeswap/outbox/t/warm.json", "{}");
    const fsyncs = recordFsyncs();
    const key = "_lakeswap/leases/orders.json";
    expect(await store.putIfAbsent(key, "a")).toBe(true);
    expect(await store.putIfAbsent(key, "b"), "a lease object that exists is not overwritten").toBe(false);
    const first = (await store.get(key))!;
    expect(Buffer.from(first.body).toString()).toBe("a");
    expect(await store.putIfMatch(key, "c", first.etag)).toBe(true);
    expect(await store.putIfMatch(key, "d", first.etag), "a renewal on a stale tag (a takeover happened) is refused").toBe(false);
    const renewed = (await store.get(key))!;
    expect(await store.deleteIfMatch(key, first.etag)).toBe(false);
    expect(await store.deleteIfMatch(key, renewed.etag)).toBe(true);
    fsyncs.restore();
    expect(await store.get(key)).toBeUndefined();
    // A lease matters only while its holder lives: after a power loss every holder is gone, so no fsync is spent on one.
    expect(fsyncs.paths).toEqual([]);
    // Every other record is still made durable.
    const others = recordFsyncs();
    await store.put("_lakeswap/outbox/t/entry.json", "{}");
    others.restore();
    expect(others.paths.some((p) => p.endsWith(".tmp"))).toBe(true);
    expect(others.count(path.join(root, "_lakeswap", "outbox", "t"))).toBe(1);
  });

  it("shares a folder's fsync only with requests made before it started", async () => {
    workspace = tempDir();
    const dir = workspace.dir;
    const syncs = new FolderSyncs();
    const fsyncs = recordFsyncs();
    // Requests made together share one fsync; one made while it runs waits for the next; one made later gets its own.
    const together = Array.from({ length: 10 }, () => syncs.sync(dir));
    await new Promise((resolve) => setImmediate(resolve));
    const during = syncs.sync(dir);
    await Promise.all([...together, during]);
    const first = fsyncs.count(dir);
    await syncs.sync(dir);
    fsyncs.restore();
    expect(first).toBeLessThanOrEqual(2);
    expect(first).toBeGreaterThanOrEqual(1);
    expect(fsyncs.count(dir), "a later request gets its own fsync").toBe(first + 1);
  });

  it("makes only missing folders, and names the folders that got a new one", async () => {
    workspace = tempDir();
    const root = path.join(workspace.dir, "lake");
    mkdirSync(path.join(root, "a"), { recursive: true });
    expect(await makeFolder(path.join(root, "a", "b", "c"), root)).toEqual([path.join(root, "a", "b"), path.join(root, "a")]);
    expect(await makeFolder(path.join(root, "a", "b", "c"), root)).toEqual([]);
    expect(await makeFolder(path.join(root, "a", "b", "d"), root)).toEqual([path.join(root, "a", "b")]);
    // The lake's own folder made: its parent, outside the lake, is fsynced on the way and not returned.
    expect(await makeFolder(path.join(workspace.dir, "other", "x"), path.join(workspace.dir, "other"))).toEqual([path.join(workspace.dir, "other")]);
  });

  it("refuses keys that would leave the lake", () => {
    workspace = tempDir();
    const store = new LocalStore(workspace.dir, { folders: METADATA_FOLDERS });
    for (const key of ["../x", "a/../../x", "/etc/passwd", "a\\b", "a/./b"]) {
      expect(() => store.localPath(key), key).toThrow(/not a safe relative key/);
    }
  });
});
