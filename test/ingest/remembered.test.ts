import { appendFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { Remembered, RememberedFile } from "../../src/ingest/remembered.js";
import { SeenIds } from "../../src/ingest/event-dedupe.js";
import { advanceClock, resetClock } from "../../src/shared/clock.js";

// What the collector keeps past a landed segment (idempotency keys, event ids): bounded in time and count, and a
// file that survives a crash in the middle of an append.

const HOUR = 3_600_000;
const CODEC = {
  format: (name: string, at: number) => [name, at],
  parse: (line: unknown): [string, number] | undefined => (Array.isArray(line) && typeof line[0] === "string" && typeof line[1] === "number" ? [line[0], line[1]] : undefined),
};

const dirs: string[] = [];
afterEach(() => {
  resetClock();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function fileIn(): string {
  const dir = mkdtempSync(path.join(tmpdir(), "lakeswap-remembered-"));
  dirs.push(dir);
  return path.join(dir, "kept.jsonl");
}

describe("Remembered", () => {
  it("forgets a value once its window has passed, and the oldest past the count, counting only the latter as evictions", () => {
    const remembered = new Remembered<number>(HOUR, 3, (at) => at);
    const start = Date.now();
    remembered.restore([["c", start + 2], ["a", start], ["b", start + 1]]);
    remembered.set("d", start + 3);
    expect([...remembered.entries()].map(([name]) => name)).toEqual(["b", "c", "d"]);
    expect(remembered.evictions).toBe(1);
    advanceClock(HOUR + 1000);
    expect(remembered.get("d")).toBeUndefined();
    remembered.set("e", Date.now() + HOUR + 1000);
    expect([...remembered.entries()].map(([name]) => name)).toEqual(["e"]);
    expect(remembered.evictions).toBe(1);
  });
});

describe("SeenIds", () => {
  const line = (id: string) => Buffer.from(JSON.stringify({ event_id: id }));
  it("an id taken by a write that fails is free again; one taken by a write in flight makes the next request wait for it", async () => {
    const dir = path.dirname(fileIn());
    const seen = await SeenIds.open(dir, "clicks", { field: "event_id", windowMs: HOUR, maxIds: 100 });
    const first = seen.filter([line("a"), line("b")], Date.now());
    expect(first).toMatchObject({ duplicates: 0, taken: ["a", "b"] });
    let fail!: (error: Error) => void;
    const write = new Promise<never>((_resolve, reject) => (fail = reject));
    seen.hold(first.taken, write);
    const waiting = seen.filter([line("b"), line("c")], Date.now());
    expect(waiting.wait).toBeInstanceOf(Promise);
    fail(new Error("disk full"));
    await waiting.wait;
    // The first request stored nothing: b is no duplicate.
    expect(seen.filter([line("b"), line("c")], Date.now())).toMatchObject({ duplicates: 0, taken: ["b", "c"] });
    expect(seen.filter([line("c"), line("d"), line("d")], Date.now())).toMatchObject({ duplicates: 2, taken: ["d"] });
  });
});

describe("RememberedFile", () => {
  it("skips a line torn by a crash, keeps what is still in the window, and writes the file anew with it", async () => {
    const file = fileIn();
    const now = Date.now();
    appendFileSync(file, `${JSON.stringify(["old", now - 2 * HOUR])}\n${JSON.stringify(["kept", now])}\n["torn", 17`);
    const remembered = new Remembered<number>(HOUR, 100, (at) => at);
    await new RememberedFile(file, CODEC).load(remembered);
    expect([...remembered.entries()]).toEqual([["kept", now]]);
    expect(readFileSync(file, "utf8")).toBe(`${JSON.stringify(["kept", now])}\n`);
  });

  it("appends durably, and rewrites instead once the file would hold far more lines than is remembered", async () => {
    const file = fileIn();
    const remembered = new Remembered<number>(HOUR, 10, (at) => at);
    const kept = new RememberedFile(file, CODEC);
    await kept.load(remembered);
    const at = Date.now();
    for (let i = 0; i < 1100; i += 1) {
      remembered.set(`id${i}`, at);
      await kept.append([[`id${i}`, at]], remembered);
    }
    const lines = readFileSync(file, "utf8").trim().split("\n");
    // Never more than twice what is remembered plus a margin: the file does not grow with every id ever taken.
    expect(lines.length).toBeLessThanOrEqual(2 * 10 + 1024);
    const reloaded = new Remembered<number>(HOUR, 10, (value) => value);
    await new RememberedFile(file, CODEC).load(reloaded);
    expect([...reloaded.entries()].map(([name]) => name)).toEqual(Array.from({ length: 10 }, (_, i) => `id${1090 + i}`));
  });
});
