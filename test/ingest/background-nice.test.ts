import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { freePort, spawnScript, until } from "../support/crash-kit.js";
import { runCli, tempDir } from "../support/lake-fixture.js";

// `lakeswap serve` acknowledges events on its JavaScript thread and lands them on DuckDB's and libuv's threads;
// on Linux it lowers those to --background-nice (default 10), so that acknowledging wins the CPU when both want it.

/** The nice value of each thread of a process, by thread id (field 19 of /proc/<pid>/task/<tid>/stat). */
function niceValues(pid: number): Map<number, number> {
  const values = new Map<number, number>();
  for (const task of readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${task}/stat`, "utf8");
      // The command name (field 2) is in parentheses and may hold spaces: count the fields after its ')'.
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      values.set(Number(task), Number(fields[16]));
    } catch {
      // the thread ended meanwhile
    }
  }
  return values;
}

function config(dir: string): string {
  const file = path.join(dir, "lakeswap.yaml");
  writeFileSync(
    file,
    [
      "lake: ./lake",
      "pipelines:",
      "  events:",
      "    namespaces:",
      "      clicks:",
      "        columns: {event_id: {type: VARCHAR, nullable: false}, ts: {type: TIMESTAMPTZ, nullable: false}}",
      "        time: {field: ts}",
      "    wal: {dir: ./wal, segment_max_age: 100ms}",
      "",
    ].join("\n"),
  );
  return file;
}

describe.runIf(process.platform === "linux")("the collector's background threads (serve --background-nice)", () => {
  for (const [label, args, expected] of [
    ["by default at nice 10", [], 10],
    ["at the nice value asked for", ["--background-nice", "15"], 15],
    ["left at the requests' priority with 0", ["--background-nice", "0"], 0],
  ] as const) {
    it(`lowers every thread but the one that answers requests and the log's sync thread, ${label}, landing included`, async () => {
      const { dir, cleanup } = tempDir("lakeswap-nice-");
      const port = await freePort();
      const server = spawnScript("run-cli.ts", ["serve", "-c", config(dir), "--port", String(port), "--host", "127.0.0.1", "--flush-interval", "50", ...args]);
      try {
        const url = `http://127.0.0.1:${port}`;
        await until("the collector to answer", async () => (await fetch(`${url}/healthz`).then((r) => r.status === 200).catch(() => false)) || undefined);
        const events = Array.from({ length: 50 }, (_, i) => JSON.stringify({ event_id: `e${i}`, ts: "2026-12-01T10:00:00Z" })).join("\n");
        const posted = await fetch(`${url}/v1/events/clicks`, { method: "POST", headers: { "content-type": "application/x-ndjson" }, body: events });
        expect(posted.status).toBe(200);
        // Landed (DuckDB's threads exist from the first landing on), and the next flush has lowered them.
        await until("the events to be landed", async () => {
          const health = (await (await fetch(`${url}/healthz`)).json()) as { detail: { pipelines: { written: number }[] } };
          return health.detail.pipelines[0]?.written === 50 || undefined;
        });
        const pid = server.process.pid!;
        // Every thread but two: the JavaScript one, and the write-ahead log's sync thread (the one that made the events durable).
        const threads = await until("every other thread to be lowered", async () => {
          await new Promise((resolve) => setTimeout(resolve, 100));
          const now = niceValues(pid);
          return [...now].filter(([tid, nice]) => tid !== pid && nice !== expected).length === (expected === 0 ? 0 : 1) ? now : undefined;
        });
        // The process has more threads than its JavaScript one (DuckDB's, libuv's, V8's), and that one stays at 0.
        expect(threads.size).toBeGreaterThan(4);
        expect(threads.get(pid)).toBe(0);
        const unlowered = [...threads].filter(([tid, nice]) => tid !== pid && nice === 0).map(([tid]) => tid);
        if (expected !== 0) expect(unlowered).toHaveLength(1);
      } finally {
        server.process.kill("SIGTERM");
        await server.exited;
        cleanup();
      }
    }, 60_000);
  }

  it("refuses a nice value it cannot set, naming it and the range", async () => {
    const { dir, cleanup } = tempDir("lakeswap-nice-");
    try {
      const result = await runCli(["serve", "-c", config(dir), "--port", "0", "--background-nice", "-5"]);
      expect(result.code).toBe(2);
      expect(result.stderr).toContain("--background-nice '-5' is not a nice value: use a whole number from 0");
    } finally {
      cleanup();
    }
  });
});
