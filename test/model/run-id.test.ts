import { describe, expect, it } from "vitest";
import { isRunId, newRunId, newRunIdAfter, runIdTime } from "../../src/model/run-id.js";

describe("run ids", () => {
  it("are UTC YYYYMMDDTHHMMSSZ plus 6 hex chars, and carry their time", () => {
    const id = newRunId(new Date("2026-11-02T14:05:01.789Z"));
    expect(id).toMatch(/^20261102T140501Z-[0-9a-f]{6}$/);
    expect(isRunId(id)).toBe(true);
    expect(runIdTime(id).toISOString()).toBe("2026-11-02T14:05:01.000Z");
  });

  it("sort by time and never collide, even when issued within one second", () => {
    const now = new Date("2026-11-02T14:05:01Z");
    const ids = Array.from({ length: 5000 }, () => newRunId(now));
    expect(new Set(ids).size).toBe(ids.length);
    expect([...ids].sort()).toEqual(ids);
    const later = newRunId(new Date("2026-11-02T14:05:02Z"));
    expect(later > ids.at(-1)!).toBe(true);
  });

  it("rejects what is not a run id", () => {
    for (const bad of ["", "20261102T140501Z", "20261102T140501Z-XYZ123", "../20261102T140501Z-abcdef"]) {
      expect(isRunId(bad)).toBe(false);
    }
  });
});

describe("run ids after the newest run", () => {
  it("sort after the partition's newest run even when another host issued it later in the same second", () => {
    const latest = "20261102T140501Z-fffff0";
    const next = newRunIdAfter(latest, new Date("2026-11-02T14:05:01Z"));
    expect(next > latest).toBe(true);
    expect(isRunId(next)).toBe(true);
    expect(newRunIdAfter("20261102T140501Z-ffffff", new Date("2026-11-02T14:05:01Z")) > "20261102T140501Z-ffffff").toBe(true);
    expect(newRunIdAfter(undefined, new Date("2026-11-02T14:05:01Z"))).toMatch(/^20261102T140501Z-/);
  });

  it("differ for two writers that read the same newest run in the same second (each a process of its own)", async () => {
    const now = new Date("2026-11-02T14:05:01Z");
    // A fresh copy of the module per writer: what one process issued, the other does not know.
    let writers = 0;
    const writer = async (): Promise<typeof newRunIdAfter> => {
      writers += 1;
      const module = new URL(`../../src/model/run-id.ts?writer=${writers}`, import.meta.url).pathname;
      return ((await import(/* @vite-ignore */ module)) as { newRunIdAfter: typeof newRunIdAfter }).newRunIdAfter;
    };
    for (let round = 0; round < 50; round += 1) {
      // Above every id a fresh process issues first in a second (those start in the lower half).
      const latest = `20261102T140501Z-${(0x800000 + round * 0x10000).toString(16)}`;
      const [a, b] = [(await writer())(latest, now), (await writer())(latest, now)];
      expect([a > latest, b > latest, isRunId(a), isRunId(b)]).toEqual([true, true, true, true]);
      expect(a, `two writers after ${latest}`).not.toBe(b);
    }
  });
});

