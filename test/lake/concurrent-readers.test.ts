import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Lake } from "../../src/lake/lake.js";
import { defineTable } from "../../src/model/table.js";
import { lakeDirOf, spawnScript, type Child } from "../support/crash-kit.js";
import { BACKEND_FACTORIES, selectedBackends, type TestBackend } from "../support/lake-fixture.js";
import { replacePartition } from "../../src/lake/operations/replace.js";

// Invariant 1: a reader sees the old run or the new run, never nothing, never a mix. The reader runs in
// another process and queries one partition in a tight loop while this process replaces it 80 times,
// alternating between 100 rows tagged 'a' and 120 rows tagged 'b'.

const TABLE = "events";
const DAY = "2026-11-01";
const PARTITION = `day=${DAY}`;
/**
 * 80 swaps on the embedded lake: a read takes a few milliseconds and a swap tens, so several hundred reads fall
 * across every phase of the swaps (the test asserts that reads overlapped them). On the emulated AWS services every read
 * is an Athena query that downloads the partition, and each swap waits for one: fewer.
 */
const SWAPS_BY_BACKEND: Record<string, number> = { local: 80, aws: 16 };
const CONTENT = {
  a: { rows: 100, select: "SELECT range AS id, 'a' AS tag FROM range(100)" },
  b: { rows: 120, select: "SELECT range AS id, 'b' AS tag FROM range(120)" },
} as const;

interface Observation {
  readonly start: number;
  readonly end: number;
  readonly rows?: number;
  readonly tags?: number;
  readonly tag?: string | null;
  readonly error?: string;
}

/** 'a' or 'b' when the read saw exactly one whole run, else a description of what it saw (first line, file names elided). */
function seen(o: Observation): string {
  if (o.error !== undefined) return `error: ${(o.error.split("\n")[0] ?? "").replace(/"[^"]*"/g, '"…"')}`;
  for (const [tag, content] of Object.entries(CONTENT)) {
    if (o.rows === content.rows && o.tags === 1 && o.tag === tag) return tag;
  }
  return `rows=${o.rows} tags=${o.tags} min(tag)=${o.tag}`;
}

describe.each(selectedBackends())("concurrent readers on the %s backend", (backendName) => {
  let backend: TestBackend;
  let lake: Lake;
  let reader: Child | undefined;

  beforeEach(async () => {
    backend = await BACKEND_FACTORIES[backendName]!();
    lake = await backend.open();
    await lake.createTable(
      defineTable({ name: TABLE, columns: [{ name: "id", type: "BIGINT" }, { name: "tag", type: "VARCHAR" }], partitionKeys: ["day"] }),
    );
    await replacePartition(lake, TABLE, PARTITION, { select: CONTENT.a.select, landed: true });
  });

  afterEach(async () => {
    reader?.kill("SIGKILL");
    await reader?.exited;
    reader = undefined;
    await lake.close();
    await backend.cleanup();
  });

  it.for([
    { mode: "duckdb", reader: "plain DuckDB reading <lake>/<table>/*/*.parquet with hive partitioning (no lakeswap code)" },
    { mode: "lakeswap", reader: "lakeswap query semantics through the library (openEmbeddedLake + lake.query)" },
  ])(`a reader in another process ($mode) sees exactly the old or the new run during repeated swaps`, async ({ mode }, context) => {
    const SWAPS = SWAPS_BY_BACKEND[backendName] ?? 80;
    if (mode === "duckdb" && lakeDirOf(backend) === undefined) context.skip("plain DuckDB reads the embedded lake's folder only");
    reader = spawnScript(
      "reader-loop.ts",
      ["--mode", mode, "--table", TABLE, "--column", "day", "--value", DAY, ...backend.cliArgs],
      backend.cliEnv,
    );
    // The reader is up and reading before the first swap.
    await reader.until("the reader's first read", () => reader!.lines.length > 0, 60_000);

    const writesStart = Date.now();
    const swapped: string[] = [];
    for (let i = 0; i < SWAPS; i += 1) {
      const tag = i % 2 === 0 ? "b" : "a";
      // Built where raw files are landed (DuckDB), so on AWS the test exercises the swap, not the emulated Athena.
      const result = await replacePartition(lake, TABLE, PARTITION, { select: CONTENT[tag].select, landed: true });
      expect(result.rows).toBe(CONTENT[tag].rows);
      swapped.push(result.runId);
      if (backendName !== "local") {
        // A remote read (an Athena query) is slower than a swap: let one read start after each swap, so reads and swaps interleave.
        const swappedAt = Date.now();
        await reader.until("a read after the swap", () => reader!.lines.some((line) => (JSON.parse(line) as Observation).start > swappedAt), 60_000);
      }
    }
    const writesEnd = Date.now();
    // One read that started after the last swap, then stop the reader.
    await reader.until("a read after the last swap", () => (JSON.parse(reader!.lines.at(-1)!) as Observation).start > writesEnd);
    reader.process.stdin?.end();
    expect(await reader.exited).toEqual({ code: 0, signal: null });
    expect(reader.stderr).toBe("");

    expect(new Set(swapped).size).toBe(SWAPS);
    const observations = reader.json<Observation>();
    const tally = (reads: readonly Observation[]) => {
      const counts: Record<string, number> = {};
      for (const o of reads) counts[seen(o)] = (counts[seen(o)] ?? 0) + 1;
      return counts;
    };
    const answers = observations.filter((o) => o.error === undefined);
    expect(tally(answers.filter((o) => !["a", "b"].includes(seen(o)))), `of ${observations.length} reads, answers that are not one whole run`).toEqual({});
    const failed = observations.filter((o) => o.error !== undefined);
    if (mode === "lakeswap") {
      // lakeswap resolves the pointer once per query and reads that run's immutable files: no read fails.
      expect(tally(failed), `of ${observations.length} reads, the ones that failed`).toEqual({});
    } else {
      // Plain DuckDB resolves paths several times per query (glob, plan, scan). A swap in between makes a
      // later step miss the file, which went away with its run's name: a retryable "cannot open file" or
      // "no files found", never another run's bytes (README, "Reading a lake with plain DuckDB").
      const otherErrors = failed.filter((o) => !/Cannot open file .*No such file or directory|No files found that match the pattern/s.test(o.error!));
      expect(tally(otherErrors), `of ${observations.length} reads, failures other than a retryable missing file`).toEqual({});
      expect(failed.length, `retryable failures among ${observations.length} reads`).toBeLessThan(observations.length * 0.05);
    }

    // The reads really overlapped the swaps: many of them ran while the writer worked, and they saw the
    // partition change back and forth (each change is a swap that happened between two reads).
    const during = observations.filter((o) => o.start >= writesStart && o.end <= writesEnd);
    const local = backendName === "local";
    expect(during.length).toBeGreaterThan(local ? 50 : 10);
    const changes = during.filter((o, i) => i > 0 && seen(o) !== seen(during[i - 1]!)).length;
    expect(changes).toBeGreaterThan(local ? 20 : 4);
    // A read after the last swap sees it: an even number of swaps starting from 'a' ends on 'a'.
    expect(observations.filter((o) => o.start > writesEnd).map(seen)).toContain("a");
  });
});
