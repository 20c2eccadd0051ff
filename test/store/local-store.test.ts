import { afterEach, describe, expect, it } from "vitest";
import { LocalStore } from "../../src/store/local-store.js";
import { tempDir } from "../support/lake-fixture.js";

let workspace: ReturnType<typeof tempDir> | undefined;
afterEach(() => workspace?.cleanup());

describe("the local store", () => {
  it("writes conditionally: if absent, if unchanged", async () => {
    workspace = tempDir();
    const store = new LocalStore(workspace.dir);
    expect(await store.putIfAbsent("_lakeswap/leases/t.json", "one")).toBe(true);
    expect(await store.putIfAbsent("_lakeswap/leases/t.json", "two")).toBe(false);
    const current = (await store.get("_lakeswap/leases/t.json"))!;
    expect(await store.putIfMatch("_lakeswap/leases/t.json", "three", current.etag)).toBe(true);
    expect(await store.putIfMatch("_lakeswap/leases/t.json", "four", current.etag)).toBe(false);
    expect(await store.deleteIfMatch("_lakeswap/leases/t.json", current.etag)).toBe(false);
    expect(Buffer.from((await store.get("_lakeswap/leases/t.json"))!.body).toString()).toBe("three");
  });

  it("keeps writes and deletes of records in one folder safe when they run at once", async () => {
    workspace = tempDir();
    const store = new LocalStore(workspace.dir);
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

  it("refuses keys that would leave the lake", () => {
    workspace = tempDir();
    const store = new LocalStore(workspace.dir);
    for (const key of ["../x", "a/../../x", "/etc/passwd", "a\\b", "a/./b"]) {
      expect(() => store.localPath(key), key).toThrow(/not a safe relative key/);
    }
  });
});
