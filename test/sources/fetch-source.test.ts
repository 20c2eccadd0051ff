import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it, vi } from "vitest";
import type { HttpSource } from "../../src/sources/source.js";
import { startReportApi } from "../support/report-api.js";

// Loaded afresh, with the once-a-minute memory of src/shared/process-folders.ts empty: test files share their worker's process.
vi.resetModules();
const { fetchSource } = await import("../../src/sources/fetch-source.js");

const source = (url: string): HttpSource => ({
  concurrency: 2,
  spec: { url: `${url}/report?date={{ date }}`, headers: {}, rows: "rows", fields: {}, pagination: { kind: "cursor", path: "next_cursor", param: "cursor" }, timeoutMs: 5000, maxAttempts: 2, maxPages: 100 },
});

describe("fetchSource", () => {
  it("fetches each day into its own file, reports a failed day with its error, removes its folder on release and the folders of dead syncs on start", async () => {
    const api = await startReportApi({ pageSize: 2 });
    // The folder a sync killed while it fetched leaves behind: its process is gone. A process id above the largest
    // that Linux hands out (2^22), so no process started meanwhile can have taken it (on a busy machine, ids wrap
    // around 32,768 within seconds).
    const dead = 4_194_305;
    // A temporary folder of this test's own: a process looks for dead folders in a folder at most once a minute, and
    // another test in this process may have looked in the run's temporary folder just before.
    const machineTmp = process.env.TMPDIR;
    const ownTmp = mkdtempSync(path.join(os.tmpdir(), "fetch-source-"));
    process.env.TMPDIR = ownTmp;
    expect(os.tmpdir(), "TMPDIR reaches os.tmpdir()").toBe(ownTmp);
    const leftover = path.join(os.tmpdir(), `lakeswap-fetch-${dead}-test`);
    mkdirSync(leftover, { recursive: true });
    writeFileSync(path.join(leftover, "date=2026-11-01.jsonl"), "{}\n");
    try {
      api.setDay("2026-11-01", [{ page: "/a", sessions: 1 }, { page: "/b", sessions: 2 }, { page: "/c", sessions: 3 }]);
      api.failDay("2026-11-03", 404);
      const fetched = await fetchSource({ dataset: "ga4", source: source(api.url), key: "date", values: ["2026-11-01", "2026-11-02", "2026-11-03"], columns: ["page", "sessions"] });
      expect(existsSync(leftover), "a dead sync's folder is removed").toBe(false);
      const [first, second, third] = fetched.partitions;
      expect(first).toMatchObject({ value: "2026-11-01", rows: 3 });
      expect(readFileSync(first!.file!, "utf8").trim().split("\n").map((line) => JSON.parse(line) as unknown)).toEqual([
        { page: "/a", sessions: 1 },
        { page: "/b", sessions: 2 },
        { page: "/c", sessions: 3 },
      ]);
      expect(second).toMatchObject({ value: "2026-11-02", rows: 0 });
      expect(readFileSync(second!.file!, "utf8")).toBe("");
      expect(third!.file).toBeUndefined();
      expect(third!.error).toContain("404");
      const folder = path.dirname(first!.file!);
      expect(path.basename(folder)).toMatch(new RegExp(`^lakeswap-fetch-${process.pid}-`));
      await fetched.release();
      expect(existsSync(folder)).toBe(false);
    } finally {
      await api.close();
      rmSync(ownTmp, { recursive: true, force: true });
      if (machineTmp === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = machineTmp;
    }
  });
});
