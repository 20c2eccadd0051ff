import { afterEach, describe, expect, it } from "vitest";
import { Progress, type ProgressStream } from "../../src/cli/output.js";
import { defineTable } from "../../src/model/table.js";
import { runMain } from "../support/main-cli.js";
import { tempLakes } from "../support/temp-lake.js";
import { replacePartition } from "../../src/lake/operations/replace.js";

const openLake = tempLakes();

/** A stand-in for stderr: a terminal of `columns` columns (or a pipe), keeping what was written. */
function stderrOf(isTTY: boolean, columns = 80): ProgressStream & { readonly written: string[] } {
  const written: string[] = [];
  return {
    isTTY,
    columns,
    written,
    write: (text: string | Uint8Array) => {
      written.push(String(text));
      return true;
    },
  } as ProgressStream & { readonly written: string[] };
}

describe("the progress bar of long syncs and gc", () => {
  it("draws on a terminal and clears itself when done", () => {
    const stderr = stderrOf(true);
    const progress = new Progress(false, stderr);
    progress.update(1, 4, "events/p_day=2026-12-01");
    progress.done();
    expect(stderr.written).toEqual(["\r\x1b[K[#####...............] 1/4 events/p_day=2026-12-01", "\r\x1b[K"]);
  });

  it("writes nothing to a pipe or a file, nor under --json even on a terminal", () => {
    for (const [json, stderr] of [[false, stderrOf(false)], [true, stderrOf(true)]] as const) {
      const progress = new Progress(json, stderr);
      progress.update(1, 2, "events/p_day=2026-12-01");
      progress.done();
      expect(stderr.written).toEqual([]);
    }
  });

  // A label longer than the terminal wrapped the line, and each redraw cleared only its last row: the bar piled up.
  it("cuts the line to the terminal's width, so that it never wraps", () => {
    const stderr = stderrOf(true, 40);
    new Progress(false, stderr).update(3, 10, `build: ${"very_long_table_name/".repeat(5)}p_day=2026-12-01`);
    const line = stderr.written[0]!.replace("\r\x1b[K", "");
    expect(Array.from(line)).toHaveLength(39);
    expect(line).toBe("[######..............] 3/10 build: ver…");
  });
});

describe("gc on a terminal", () => {
  const isTTY = Object.getOwnPropertyDescriptor(process.stderr, "isTTY");
  afterEach(() => {
    if (isTTY) Object.defineProperty(process.stderr, "isTTY", isTTY);
    else delete (process.stderr as { isTTY?: boolean }).isTTY;
  });

  // With --json the bar was drawn all the same whenever stderr was a terminal.
  it("draws its progress bar on stderr, but not with --json", async () => {
    const { lake, lakeDir } = await openLake();
    await lake.createTable(defineTable({ name: "t", columns: [{ name: "id", type: "BIGINT" }], partitionKeys: ["day"] }));
    await replacePartition(lake, "t", "day=2026-11-01", { select: "SELECT 1 AS id" });
    Object.defineProperty(process.stderr, "isTTY", { value: true, configurable: true });

    const text = await runMain(["gc", "--dry-run", "--lake", lakeDir]);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stderr).toContain("\r\x1b[K[....................] 0/1 t/day=2026-11-01");
    const json = await runMain(["gc", "--dry-run", "--lake", lakeDir, "--json"]);
    expect(json.code, json.stderr).toBe(0);
    expect(json.stderr).toBe("");
    expect(JSON.parse(json.stdout)).toMatchObject({ dryRun: true, removedRuns: 0 });
  });
});
