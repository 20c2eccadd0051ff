// StoreReadCache (./s3rver-read-cache.ts): which values it keeps, with reads and writes held under way by hand.
import { describe, expect, it } from "vitest";
import { EVERY_FILE, StoreReadCache } from "./s3rver-read-cache.js";

describe("StoreReadCache", () => {
  /** A promise settled by hand, so a read or a write can be held under way. */
  function gate<T = void>(): { promise: Promise<T>; open(value: T): void } {
    let open!: (value: T) => void;
    const promise = new Promise<T>((resolve) => (open = resolve));
    return { promise, open };
  }

  it("keeps a value read while no write of its file began or was under way, until the next write", async () => {
    const cache = new StoreReadCache();
    const loaded: string[] = [];
    const read = (file: string, value: string, held?: Promise<void>) =>
      cache.read(file, async () => {
        await held;
        loaded.push(value);
        return value;
      });

    expect(await read("a", "a1")).toBe("a1");
    expect(await read("a", "never loaded")).toBe("a1");
    expect(await read("b", "b1")).toBe("b1");
    await cache.write("a", async () => undefined);
    expect(await read("a", "a2")).toBe("a2");
    expect(await read("b", "never loaded")).toBe("b1");

    // Began before a write and ended after it: not kept.
    const before = gate();
    const spanning = read("c", "c1, read before the write", before.promise);
    await cache.write("c", async () => undefined);
    before.open();
    await spanning;
    expect(await read("c", "c2")).toBe("c2");
    // Read during a write, twice, and begun during a write, ended after it: none kept.
    const write = gate();
    const writing = cache.write("a", () => write.promise);
    expect(await read("a", "a4, half written")).toBe("a4, half written");
    expect(await read("a", "a5, half written")).toBe("a5, half written");
    const during = gate();
    const late = read("a", "a6, begun during the write", during.promise);
    write.open();
    await writing;
    during.open();
    await late;
    expect(await read("a", "a7")).toBe("a7");
    expect(await read("a", "never loaded")).toBe("a7");

    // A write of every file (a bucket deleted) drops every value, and keeps reads under way from being kept.
    const whole = gate();
    const everything = cache.write(EVERY_FILE, () => whole.promise);
    expect(await read("b", "b2, during")).toBe("b2, during");
    whole.open();
    await everything;
    expect(await read("a", "a8")).toBe("a8");
    expect(await read("b", "b3")).toBe("b3");
    expect(loaded).toEqual(["a1", "b1", "a2", "c1, read before the write", "c2", "a4, half written", "a5, half written", "a6, begun during the write", "a7", "b2, during", "a8", "b3"]);
  });
});
