import { afterEach, expect } from "vitest";
import { spawnScript, type Child } from "./crash-kit.js";

/** One read of ./catalog-reader-loop.ts: every row of its tables, how many distinct markers, the smallest; or its error. */
export interface CatalogRead {
  readonly start: number;
  readonly end: number;
  readonly rows?: number;
  readonly markers?: number;
  readonly marker?: number | null;
  readonly error?: string;
}

/** What a glob read racing a swap may fail with (docs/lake.md, "Globbing the folders"): retryable, never a wrong result. */
export const GLOB_RACE = /Cannot open file .*No such file or directory|No files found that match the pattern/s;

/**
 * Plain DuckDB readers of a lake in child processes (./catalog-reader-loop.ts), one per mode, killed after each test.
 * `start` waits for each reader's first read; `stopAfter` waits for a read that began after `ms`, then ends them.
 */
export function catalogReaders(): {
  start(lakeDir: string, tables: readonly string[], modes: readonly string[], extra?: readonly string[]): Promise<Child[]>;
  stopAfter(ms: number): Promise<void>;
} {
  let readers: Child[] = [];
  afterEach(async () => {
    for (const reader of readers) reader.kill("SIGKILL");
    await Promise.all(readers.map((reader) => reader.exited));
    readers = [];
  });
  return {
    async start(lakeDir, tables, modes, extra = []) {
      readers = modes.map((mode) => spawnScript("catalog-reader-loop.ts", ["--mode", mode, "--lake", lakeDir, "--tables", tables.join(","), ...extra]));
      for (const reader of readers) await reader.until("the reader's first read", () => reader.lines.length > 0, 60_000);
      return readers;
    },
    async stopAfter(ms) {
      for (const reader of readers) {
        await reader.until("a read after the last sync", () => (JSON.parse(reader.lines.at(-1)!) as CatalogRead).start > ms, 60_000);
        reader.process.stdin?.end();
        expect(await reader.exited).toEqual({ code: 0, signal: null });
        expect(reader.stderr).toBe("");
      }
    },
  };
}
