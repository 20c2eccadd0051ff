/**
 * The ObjectStore port's contract (src/store/object-store.ts), run against every adapter: what the lake relies on
 * of a store, whatever it is backed by. An adapter passes these before the lake's own suites mean anything on it.
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it, vi } from "vitest";
import type { ObjectStore } from "../../src/store/object-store.js";
import { mapLimited } from "../../src/shared/map-limited.js";
import { eachFixture, type Fixture, type FixtureFactory } from "./fixture.js";

/** An empty store of its own (a fresh folder, a fresh S3 prefix). */
export interface ObjectStoreFixture extends Fixture {
  readonly store: ObjectStore;
}

const text = (body: Uint8Array | undefined): string | undefined => (body === undefined ? undefined : Buffer.from(body).toString("utf8"));

/** Registers the object store contract for the adapter `name`. */
export function objectStoreContract(name: string, factory: FixtureFactory<ObjectStoreFixture>): void {
  describe(`the object store contract: ${name}`, () => {
    const fixture = eachFixture(factory);
    const store = (): ObjectStore => fixture().store;

    it("declares conditional writes, which the writer lease needs", () => {
      expect(store().capabilities.conditionalWrites).toBe(true);
    });

    it("gives back what was put, byte for byte; a missing key is undefined, not an error", async () => {
      const bytes = Uint8Array.from([0, 1, 2, 250, 255]);
      await store().put("t/day=1/a.bin", bytes);
      await store().put("t/b.json", '{"ü":1}');
      expect(Buffer.from((await store().get("t/day=1/a.bin"))!.body)).toEqual(Buffer.from(bytes));
      expect(text((await store().get("t/b.json"))?.body)).toBe('{"ü":1}');
      expect(await store().get("t/missing.json")).toBeUndefined();
      expect(await store().get("nowhere/at/all")).toBeUndefined();
      await store().put("t/b.json", "replaced");
      expect(text((await store().get("t/b.json"))?.body)).toBe("replaced");
    });

    it("puts empty objects (text or bytes, plain or conditional) without a word on the terminal", async () => {
      // The AWS SDK warned on stderr ("a Stream of unknown length") for an empty string body, which it sent without a length.
      const warn = vi.spyOn(console, "warn");
      try {
        await store().put("t/empty-text", "");
        await store().put("t/empty-bytes", new Uint8Array());
        expect(await store().putIfAbsent("t/empty-once", "")).toBe(true);
        for (const key of ["t/empty-text", "t/empty-bytes", "t/empty-once"]) expect((await store().get(key))?.body.length, key).toBe(0);
        expect(warn).not.toHaveBeenCalled();
      } finally {
        warn.mockRestore();
      }
    });

    it("reads a byte range, fewer bytes at the object's end", async () => {
      await store().put("t/f.parquet", "0123456789");
      expect(text(await store().getRange("t/f.parquet", 2, 3))).toBe("234");
      expect(text(await store().getRange("t/f.parquet", 7, 10))).toBe("789");
    });

    it("lists every object under a prefix with its size, sorted by key, and nothing beside it", async () => {
      const keys = ["t/day=2/b", "t/day=1/a", "t/day=10/c", "t2/x", "u/t/y", "t/day=1/sub/d"];
      for (const key of keys) await store().put(key, key);
      expect(await store().list("t/")).toEqual(
        ["t/day=1/a", "t/day=1/sub/d", "t/day=10/c", "t/day=2/b"].map((key) => ({ key, size: Buffer.byteLength(key) })),
      );
      expect((await store().list("t/day=1/")).map((o) => o.key)).toEqual(["t/day=1/a", "t/day=1/sub/d"]);
      // A prefix is a prefix of keys, not only a folder.
      expect((await store().list("t/day=1")).map((o) => o.key)).toEqual(["t/day=1/a", "t/day=1/sub/d", "t/day=10/c"]);
      expect(await store().list("none/")).toEqual([]);
    });

    it("lists past a page: every one of 1,050 keys (S3 pages by 1,000)", async () => {
      const keys = Array.from({ length: 1050 }, (_, i) => `many/k${String(i).padStart(5, "0")}`);
      await mapLimited(keys, 32, (key) => store().put(key, "x"));
      const listed = await store().list("many/");
      expect(listed.map((o) => o.key)).toEqual(keys);
      // Only the keys after one (also from a later page), and, asked for at most some, at least those first ones.
      expect((await store().list("many/", { startAfter: "many/k00040" })).map((o) => o.key)).toEqual(keys.slice(41));
      expect((await store().list("many/", { startAfter: "many/k01049" })).map((o) => o.key)).toEqual([]);
      const cut = (await store().list("many/", { atMost: 10 })).map((o) => o.key);
      expect(cut.length).toBeGreaterThan(10);
      expect(cut).toEqual(keys.slice(0, cut.length));
    });

    it("puts if absent: once only, the first body kept; of writers racing for one key exactly one wins", async () => {
      expect(await store().putIfAbsent("_lakeswap/leases/t.json", "one")).toBe(true);
      expect(await store().putIfAbsent("_lakeswap/leases/t.json", "two")).toBe(false);
      expect(text((await store().get("_lakeswap/leases/t.json"))?.body)).toBe("one");
      const wins = await Promise.all(Array.from({ length: 8 }, (_, i) => store().putIfAbsent("_lakeswap/leases/race.json", `writer ${i}`)));
      expect(wins.filter(Boolean)).toHaveLength(1);
      expect(text((await store().get("_lakeswap/leases/race.json"))?.body)).toBe(`writer ${wins.indexOf(true)}`);
    });

    it("puts if unchanged: on the current tag only; a stale tag or a missing key is refused and changes nothing", async () => {
      await store().put("k.json", "one");
      const first = (await store().get("k.json"))!;
      expect((await store().get("k.json"))!.etag, "the same bytes, the same tag").toBe(first.etag);
      expect(await store().putIfMatch("k.json", "two", first.etag)).toBe(true);
      const second = (await store().get("k.json"))!;
      expect(second.etag).not.toBe(first.etag);
      expect(await store().putIfMatch("k.json", "three", first.etag)).toBe(false);
      expect(text((await store().get("k.json"))?.body)).toBe("two");
      expect(await store().putIfMatch("absent.json", "x", first.etag)).toBe(false);
      expect(await store().get("absent.json")).toBeUndefined();
      // Of writers racing on one tag, exactly one wins.
      const wins = await Promise.all(Array.from({ length: 6 }, (_, i) => store().putIfMatch("k.json", `writer ${i}`, second.etag)));
      expect(wins.filter(Boolean)).toHaveLength(1);
    });

    it("deletes if unchanged: on the current tag only; a stale tag leaves the object, a missing key is refused", async () => {
      await store().put("k.json", "one");
      const first = (await store().get("k.json"))!;
      await store().put("k.json", "two");
      expect(await store().deleteIfMatch("k.json", first.etag)).toBe(false);
      expect(text((await store().get("k.json"))?.body)).toBe("two");
      expect(await store().deleteIfMatch("k.json", (await store().get("k.json"))!.etag)).toBe(true);
      expect(await store().get("k.json")).toBeUndefined();
      expect(await store().deleteIfMatch("k.json", first.etag)).toBe(false);
    });

    it("deletes keys, missing ones not an error; a second delete of the same keys does nothing", async () => {
      await store().put("d/a", "a");
      await store().put("d/b", "b");
      await store().put("d/c", "c");
      await store().delete(["d/a", "d/b", "d/never"]);
      expect((await store().list("d/")).map((o) => o.key)).toEqual(["d/c"]);
      await store().delete(["d/a", "d/b", "d/never"]);
      await store().delete([]);
      expect((await store().list("d/")).map((o) => o.key)).toEqual(["d/c"]);
    });

    it("stores local files: putFile, and putFileIfAbsent once only; copies an object to a fresh key, the source kept", async () => {
      const dir = await mkdtemp(path.join(tmpdir(), "lakeswap-store-contract-"));
      try {
        const file = path.join(dir, "part.parquet");
        const bytes = randomBytes(70_000);
        await writeFile(file, bytes);
        await store().putFile("t/day=1/run=r1/part.parquet", file);
        expect(Buffer.from((await store().get("t/day=1/run=r1/part.parquet"))!.body)).toEqual(bytes);

        expect(await store().putFileIfAbsent("seg/one.parquet", file)).toBe(true);
        await writeFile(file, "other bytes");
        expect(await store().putFileIfAbsent("seg/one.parquet", file)).toBe(false);
        expect(Buffer.from((await store().get("seg/one.parquet"))!.body)).toEqual(bytes);

        await store().copy("t/day=1/run=r1/part.parquet", "t/day=1/run=r2/part.parquet", bytes.length);
        expect(Buffer.from((await store().get("t/day=1/run=r2/part.parquet"))!.body)).toEqual(bytes);
        expect((await store().list("t/day=1/")).map((o) => [o.key, o.size])).toEqual([
          ["t/day=1/run=r1/part.parquet", bytes.length],
          ["t/day=1/run=r2/part.parquet", bytes.length],
        ]);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    });

    it("names a key by an absolute URI (file:// or s3://) that keyOf maps back; a URI outside the lake or leaving it maps to nothing", () => {
      const key = "t/metadata/00001-ab.metadata.json";
      const uri = store().uri(key);
      expect(uri).toMatch(/^(file|s3):\/\//);
      expect(uri.endsWith(`/${key}`)).toBe(true);
      expect(store().keyOf(uri)).toBe(key);
      expect(store().keyOf(store().uri("t/day=1/run=x/a b.parquet"))).toBe("t/day=1/run=x/a b.parquet");
      expect(store().keyOf(uri.replace(key, "../elsewhere/x"))).toBeUndefined();
      expect(store().keyOf("s3://another-bucket/t/x")).toBeUndefined();
      expect(store().keyOf("file:///etc/passwd")).toBeUndefined();
    });

    it("refuses keys that would leave the lake, before touching anything", async () => {
      for (const key of ["../x", "a/../../x", "/etc/passwd", "a\\b", "a/./b"]) {
        await expect(store().put(key, "x"), key).rejects.toThrow(/not a safe relative key/);
        await expect(Promise.resolve().then(() => store().get(key)), key).rejects.toThrow(/not a safe relative key/);
      }
    });
  });
}
