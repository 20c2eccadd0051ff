import { writeFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { parseByteSize } from "../../src/duckdb/duckdb-text.js";
import { tempDir } from "../support/lake-fixture.js";
import { runMain } from "../support/main-cli.js";

// DuckDB holds a buffer per open partition and column while it writes partitioned files: a delivery of thousands
// of partitions, written in one pass, ran out of memory at the landing's limit. They are written in groups sized
// to the limit.

/** A folder with lakeswap.yaml (dataset `events`: `id` and one more column, partitioned by `day`) and events.csv; `args` syncs it. */
function eventsProject(prefix: string, column: string, day: string, csv: string): { dir: string; cleanup: () => void; args: string[] } {
  const { dir, cleanup } = tempDir(prefix);
  writeFileSync(
    path.join(dir, "lakeswap.yaml"),
    `datasets:\n  events:\n    source: {format: csv, path: events.csv}\n    columns:\n      id: {type: BIGINT, nullable: false}\n      ${column}\n    partition:\n      day: ${day}\n`,
  );
  writeFileSync(path.join(dir, "events.csv"), csv);
  return { dir, cleanup, args: ["--lake", path.join(dir, "lake"), "sync", "-c", path.join(dir, "lakeswap.yaml"), "--json"] };
}

describe("a delivery of thousands of partitions", () => {
  it("lands under a small memory limit, every partition whole, and its resend builds nothing", async () => {
    const days = 2500;
    const start = Date.UTC(1990, 0, 1);
    const lines = Array.from({ length: days * 3 }, (_, i) => `${i},${new Date(start + (i % days) * 86_400_000).toISOString().slice(0, 10)} 0${i % 3}:00:00`);
    const { dir, cleanup, args } = eventsProject("lakeswap-many-", "ts: TIMESTAMP", "strftime(ts, '%Y-%m-%d')", `id,ts\n${lines.join("\n")}\n`);
    try {
      const env = { LAKESWAP_MEMORY_LIMIT: "32MB" };
      const first = await runMain(args, env);
      expect(first.code, first.stderr).toBe(0);
      expect(JSON.parse(first.stdout).totals).toMatchObject({ built: days, failed: 0, rows: days * 3 });
      const counted = await runMain(["--lake", path.join(dir, "lake"), "query", "SELECT count(*) AS n, count(DISTINCT day) AS days, min(c) AS least FROM (SELECT day, count(*) AS c FROM events_raw GROUP BY day)", "--json"]);
      expect(JSON.parse(counted.stdout)).toEqual([{ n: days, days, least: 3 }]);
      const again = await runMain(args, env);
      expect(JSON.parse(again.stdout).totals).toMatchObject({ built: 0, skipped: days });
    } finally {
      cleanup();
    }
  }, 300_000);

  // The first load's signature runs beside the write ahead of its runs, and both draw on one memory limit: at 32 MB
  // the signature of the 2,500 partitions above ran out of memory about one time in four (CI, 2026-12-01), and the
  // sync failed. It is now taken again alone. The fault point fails it the way DuckDB does, every time.
  it("signs a first load again, alone, when its signature ran out of memory beside the write ahead", async () => {
    const lines = Array.from({ length: 40 }, (_, i) => `${i},2026-11-${String((i % 20) + 1).padStart(2, "0")}`);
    const { dir, cleanup, args } = eventsProject("lakeswap-sign-oom-", "seen: DATE", "strftime(seen, '%Y-%m-%d')", `id,seen\n${lines.join("\n")}\n`);
    const lake = path.join(dir, "lake");
    try {
      const first = await runMain(args, { LAKESWAP_FAULT: "signing-beside-write-ahead:oom" });
      expect(first.code, first.stderr).toBe(0);
      expect(JSON.parse(first.stdout).totals).toMatchObject({ built: 20, failed: 0, rows: 40 });
      const counted = await runMain(["--lake", lake, "query", "SELECT day, count(*) AS n, sum(id) AS ids FROM events_raw GROUP BY day ORDER BY day", "--json"]);
      const expected = Array.from({ length: 20 }, (_, d) => ({ day: `2026-11-${String(d + 1).padStart(2, "0")}`, n: 2, ids: d + (d + 20) }));
      expect(JSON.parse(counted.stdout)).toEqual(expected);
      // The signatures kept are those of the rows: the same delivery again builds nothing.
      const again = await runMain(args);
      expect(JSON.parse(again.stdout).totals).toMatchObject({ built: 0, skipped: 20 });
    } finally {
      cleanup();
    }
  }, 120_000);

  it("reads DuckDB's memory sizes", () => {
    expect(parseByteSize("976.5 MiB")).toBe(976.5 * 1024 ** 2);
    expect(parseByteSize("1.0 GiB")).toBe(1024 ** 3);
    expect(parseByteSize("128MB")).toBe(128 * 1000 ** 2);
    expect(parseByteSize("512 bytes")).toBe(512);
    expect(parseByteSize("lots")).toBeUndefined();
  });
});
