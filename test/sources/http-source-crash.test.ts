import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { loadPipelineConfig } from "../../src/config/pipeline-config.js";
import type { Lake } from "../../src/lake/lake.js";
import { Pipeline, type SyncReport } from "../../src/pipeline/pipeline.js";
import { fetchSource } from "../../src/sources/fetch-source.js";
import { readerLoop } from "../support/crash-kit.js";
import { BACKEND_FACTORIES, runCli, selectedBackends, tempDir } from "../support/lake-fixture.js";
import { runMain } from "../support/main-cli.js";
import { startReportApi, type ReportApi } from "../support/report-api.js";

// Issue 13: an http source's sync replaces restated days by swapping new runs in, never delete-then-write. While
// syncs run (and after one is killed with SIGKILL at any step of its batch), a reader sees every day of the window
// whole: the API's earlier answer or its latest, never missing or empty. The rerun converges to the API's latest
// answer for every day, and a sync after it builds nothing.

const DAYS = ["2026-11-25", "2026-11-26", "2026-11-27", "2026-11-28", "2026-11-29", "2026-11-30"];
const RESTATED = ["2026-11-26", "2026-11-28", "2026-11-30"];
const AS_OF = "2026-11-30";

/** Kill points by backend: together they cover the batch (built, moved in part, moved, manifests written). */
const POINTS: Record<string, readonly string[]> = {
  local: ["during-build", "after-build", "after-outbox", "during-batch-swap@2", "after-swap", "after-manifest"],
  aws: ["during-batch-swap", "after-swap"],
};

function rowsOf(day: string, version: number): { page: string; sessions: number }[] {
  const n = Number(day.slice(-2));
  return Array.from({ length: 4 + version }, (_, i) => ({ page: `/p${i}`, sessions: n * 1000 + version * 10 + i }));
}

const show = (rows: readonly { page: string; sessions: number }[]) => rows.map((r) => `${r.page}:${r.sessions}`).sort();

function configYaml(api: ReportApi): string {
  return `datasets:
  ga4:
    source:
      http:
        url: ${api.url}/v2/report?date={{ date }}
        rows: data.items
        pagination: {next_url: next}
      replace_partition: true
      lookback_days: 5
    columns: {page: {type: VARCHAR, nullable: false}, sessions: BIGINT}
`;
}

async function lakeDays(lake: Lake): Promise<Map<string, string[]>> {
  const result = await lake.query("SELECT date, page, CAST(sessions AS VARCHAR) FROM ga4_raw ORDER BY ALL");
  const days = new Map<string, string[]>();
  for (const [day, page, sessions] of result.rows) days.set(String(day), [...(days.get(String(day)) ?? []), `${String(page)}:${String(sessions)}`]);
  return days;
}

/** Every day is there, and holds one of the API's answers for it, whole. */
function expectWhole(view: Map<string, string[]>, when: string): void {
  for (const day of DAYS) {
    const choices = [show(rowsOf(day, 1)), ...(RESTATED.includes(day) ? [show(rowsOf(day, 2))] : [])];
    expect(choices, `${when}: ${day} is one answer of the API, whole`).toContainEqual(view.get(day));
  }
}

const CASES = selectedBackends().flatMap((backendName) => (POINTS[backendName] ?? []).map((point) => [point, backendName] as const));

describe("http source: a sync killed at a fault point, then rerun", () => {
  // One case at a time: each runs a lake, an API, a reader and CLI children, and the other test worker's timing-bound
  // suites (leases on AWS) share the machine.
  it.each(CASES)("killed at %s on the %s backend: readers never see a day missing or mixed; the rerun converges", async (point, backendName) => {
    const api = await startReportApi({ pageSize: 2 });
    const backend = await BACKEND_FACTORIES[backendName]!();
    const work = tempDir("lakeswap-http-crash-");
    try {
      const config = path.join(work.dir, "lakeswap.yaml");
      mkdirSync(work.dir, { recursive: true });
      writeFileSync(config, configYaml(api));
      for (const day of DAYS) api.setDay(day, rowsOf(day, 1));
      const lake = await backend.open();
      try {
        const first = await new Pipeline(lake, loadPipelineConfig(config), { fetchSource: (r) => fetchSource(r), asOf: AS_OF }).sync();
        expect(first.totals).toMatchObject({ built: DAYS.length, failed: 0 });
      } finally {
        await lake.close();
      }

      for (const day of RESTATED) api.setDay(day, rowsOf(day, 2));
      const readers = readerLoop(backend, async (lake, n) => expectWhole(await lakeDays(lake), `read ${n} while the syncs ran`), backendName === "aws" ? 150 : 50);
      let rerun: SyncReport;
      try {
        const [name, nth] = point.split("@");
        const syncArgs = [...backend.cliArgs, "sync", "-c", config, "--as-of", AS_OF, "--json"];
        const killed = await runCli(syncArgs, { ...backend.cliEnv, LAKESWAP_FAULT: `${name}:kill${nth ? `@${nth}` : ""}` });
        expect(killed.signal, `the sync reached ${point}; stderr: ${killed.stderr}`).toBe("SIGKILL");
        const reader = await backend.open({ readOnly: true });
        try {
          expectWhole(await lakeDays(reader), `right after the kill at ${point}`);
        } finally {
          await reader.close();
        }
        // The rerun nothing kills: in this process (`main(argv)`).
        const again = await runMain(syncArgs, backend.cliEnv);
        expect(again.code, again.stderr).toBe(0);
        rerun = JSON.parse(again.stdout) as SyncReport;
      } catch (error) {
        await readers.stop().catch(() => undefined);
        throw error;
      }
      expect(await readers.stop(), "the reader read at least once").toBeGreaterThan(0);
      expect(rerun.totals.failed).toBe(0);

      const after = await backend.open();
      try {
        const days = await lakeDays(after);
        for (const day of DAYS) expect(days.get(day), `${day} is the API's latest answer`).toEqual(show(rowsOf(day, RESTATED.includes(day) ? 2 : 1)));
        expect(await after.pendingChanges(), "no pointer move is left pending").toEqual([]);
        const third = await new Pipeline(after, loadPipelineConfig(config), { fetchSource: (r) => fetchSource(r), asOf: AS_OF }).sync();
        expect(third.totals, "a sync after the rerun builds nothing").toMatchObject({ built: 0, failed: 0 });
      } finally {
        await after.close();
      }
    } finally {
      await api.close();
      await backend.cleanup();
      work.cleanup();
    }
  }, 180_000);
});
