import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadPipelineConfig } from "../../src/config/pipeline-config.js";
import type { Lake } from "../../src/lake/lake.js";
import { Pipeline, type PipelineOptions, type SyncReport } from "../../src/pipeline/pipeline.js";
import { fetchSource } from "../../src/sources/fetch-source.js";
import { BACKEND_FACTORIES, selectedBackends, tempDir, type TestBackend } from "../support/lake-fixture.js";
import { runMain } from "../support/main-cli.js";
import { startReportApi, type ReportApi } from "../support/report-api.js";

// Issue 13: a partitioned API source (a GA4-style daily report) with replace_partition and lookback_days. Each
// sync fetches today (--as-of here) and the days before it; a day is swapped in as a new run only when its
// signature changed, a day that cannot be fetched keeps its run and fails alone, and a day the API now returns
// empty keeps its rows unless allow_empty says otherwise.

const TOKEN = "s3cret-token-4f1d";
const DAILY_SQL = "SELECT sum(sessions) AS sessions, count(*) AS pages FROM ga4_raw WHERE date = {{ date }}\n";
const PAGES_SQL = "SELECT page, sessions FROM ga4_raw WHERE date = {{ date }}\n";

function configYaml(api: ReportApi, extra: { allowEmpty?: boolean; lookback?: number } = {}): string {
  return `datasets:
  ga4:
    source:
      http:
        url: ${api.url}/report?date={{ date }}
        headers: {Authorization: "Bearer \${GA4_TOKEN}"}
        rows: rows
        pagination: {cursor: next_cursor, param: cursor}
        max_attempts: 3
        timeout: 5s
      replace_partition: true
      lookback_days: ${extra.lookback ?? 3}
${extra.allowEmpty ? "      allow_empty: true\n" : ""}    columns:
      page: {type: VARCHAR, nullable: false}
      sessions: BIGINT
    layers:
      - name: daily
        sql: sql/daily.sql
        columns: {sessions: BIGINT, pages: BIGINT}
      - name: pages
        inputs: {from: raw}
        sql: sql/pages.sql
        columns: {page: VARCHAR, sessions: BIGINT}
`;
}

/** `count` rows for a day; `version` changes the sessions (a restatement). */
function dayRows(day: string, count: number, version = 1): object[] {
  const n = Number(day.slice(-2));
  return Array.from({ length: count }, (_, i) => ({ page: `/p${i}`, sessions: n * 100 + i * version, extra: "ignored" }));
}

/** What the lake holds, day -> sorted "page:sessions". */
async function lakeDays(lake: Lake): Promise<Map<string, string[]>> {
  const result = await lake.query("SELECT date, page, CAST(sessions AS VARCHAR) FROM ga4_raw ORDER BY ALL");
  const days = new Map<string, string[]>();
  for (const [day, page, sessions] of result.rows) days.set(String(day), [...(days.get(String(day)) ?? []), `${String(page)}:${String(sessions)}`]);
  return days;
}

function apiDay(rows: readonly object[]): string[] {
  return rows.map((r) => `${(r as { page: string }).page}:${(r as { sessions: number }).sessions}`).sort();
}

function reasons(report: SyncReport, layer: string): Record<string, string> {
  return Object.fromEntries(report.partitions.filter((p) => p.layer === layer).map((p) => [p.partition, `${p.action}: ${p.reason}`]));
}

describe.each(selectedBackends())("http source with lookback_days (%s backend)", (backendName) => {
  let api: ReportApi;
  let backend: TestBackend;
  let work: { dir: string; cleanup: () => void };
  let configFile: string;

  beforeAll(async () => {
    api = await startReportApi({ pageSize: 2, token: TOKEN });
    backend = await BACKEND_FACTORIES[backendName]!();
    work = tempDir("lakeswap-http-");
    mkdirSync(path.join(work.dir, "sql"));
    writeFileSync(path.join(work.dir, "sql", "daily.sql"), DAILY_SQL);
    writeFileSync(path.join(work.dir, "sql", "pages.sql"), PAGES_SQL);
    configFile = path.join(work.dir, "lakeswap.yaml");
    process.env.GA4_TOKEN = TOKEN;
  });
  afterAll(async () => {
    await api.close();
    await backend.cleanup();
    work.cleanup();
  });

  async function sync(options: Omit<PipelineOptions, "fetchSource"> = {}): Promise<SyncReport> {
    const lake = await backend.open();
    try {
      return await new Pipeline(lake, loadPipelineConfig(configFile), { fetchSource: (request) => fetchSource(request), ...options }).sync();
    } finally {
      await lake.close();
    }
  }

  async function holds(): Promise<Map<string, string[]>> {
    const lake = await backend.open({ readOnly: true });
    try {
      return await lakeDays(lake);
    } finally {
      await lake.close();
    }
  }

  it("fetches the window, follows pages, rebuilds only restated days, fails an unreachable day alone and keeps a day that came back empty", async () => {
    writeFileSync(configFile, configYaml(api));
    for (let d = 20; d <= 30; d += 1) api.setDay(`2026-11-${d}`, dayRows(`2026-11-${d}`, 5));

    // First sync on 2026-11-30: the window is 11-27..11-30 (lookback_days: 3), every page of each day.
    const first = await sync({ asOf: "2026-11-30" });
    expect(first.totals.failed).toBe(0);
    expect(reasons(first, "raw")).toEqual(Object.fromEntries([27, 28, 29, 30].map((d) => [`date=2026-11-${d}`, "build: new"])));
    let lake = await holds();
    expect([...lake.keys()]).toEqual(["2026-11-27", "2026-11-28", "2026-11-29", "2026-11-30"]);
    for (const [day, rows] of lake) expect(rows, day).toEqual(apiDay(dayRows(day, 5)));
    const requested = api.requests.filter((r) => r.status === 200).map((r) => r.date);
    expect(new Set(requested)).toEqual(new Set(["2026-11-27", "2026-11-28", "2026-11-29", "2026-11-30"]));
    expect(requested.length, "5 rows a day in pages of 2: 3 requests a day").toBe(12);

    // The API restates 11-28; the next day's sync takes 11-28..12-01: 11-28 rebuilt, 12-01 new, 11-29 and 11-30 unchanged.
    api.setDay("2026-11-28", dayRows("2026-11-28", 6, 2));
    api.setDay("2026-12-01", dayRows("2026-12-01", 3));
    const second = await sync({ asOf: "2026-12-01" });
    expect(reasons(second, "raw")).toEqual({
      "date=2026-11-28": "build: content changed",
      "date=2026-11-29": "skip: unchanged",
      "date=2026-11-30": "skip: unchanged",
      "date=2026-12-01": "build: new",
    });
    expect(reasons(second, "daily")).toMatchObject({ "date=2026-11-28": "build: upstream changed", "date=2026-11-29": "skip: unchanged", "date=2026-12-01": "build: new" });
    lake = await holds();
    expect(lake.get("2026-11-28")).toEqual(apiDay(dayRows("2026-11-28", 6, 2)));
    expect(lake.get("2026-11-27"), "a day that left the window is kept as it was").toEqual(apiDay(dayRows("2026-11-27", 5)));

    // 11-30 cannot be fetched (500 on every attempt), 11-29 comes back empty, 11-28 is throttled once (429 + Retry-After)
    // and restated again: 11-30 fails alone and keeps its rows, 11-29 keeps its rows and is reported, 11-28 is rebuilt.
    api.failDay("2026-11-30", 500);
    api.clearDay("2026-11-29");
    api.setDay("2026-11-28", dayRows("2026-11-28", 4, 3));
    api.throttleNext(1, 1);
    const third = await sync({ asOf: "2026-12-01" });
    api.failDay("2026-11-30", undefined);
    expect(reasons(third, "raw")).toEqual({
      "date=2026-11-28": "build: content changed",
      "date=2026-11-29": "skip: empty in source",
      "date=2026-11-30": "failed: fetch failed",
      "date=2026-12-01": "skip: unchanged",
    });
    const failed = third.partitions.find((p) => p.action === "failed")!;
    expect(failed.error).toContain("500");
    expect(failed.error).toContain(`${api.url}/report?date=2026-11-30`);
    expect(failed.error).not.toContain(TOKEN);
    expect(third.totals.failed).toBe(1);
    expect(api.requests.some((r) => r.status === 429), "the API throttled a request").toBe(true);
    lake = await holds();
    expect(lake.get("2026-11-28")).toEqual(apiDay(dayRows("2026-11-28", 4, 3)));
    expect(lake.get("2026-11-29"), "an empty answer does not empty the day").toEqual(apiDay(dayRows("2026-11-29", 5)));
    expect(lake.get("2026-11-30"), "a failed fetch leaves the day's run in place").toEqual(apiDay(dayRows("2026-11-30", 5)));

    // With allow_empty the empty day is swapped to empty (a run without rows), and so are the layers below that
    // then hold no rows for it; the rerun fetches 11-30 again.
    writeFileSync(configFile, configYaml(api, { allowEmpty: true }));
    const fourth = await sync({ asOf: "2026-12-01" });
    expect(reasons(fourth, "raw")).toMatchObject({ "date=2026-11-29": "build: content changed", "date=2026-11-30": "skip: unchanged" });
    expect(reasons(fourth, "pages")).toMatchObject({ "date=2026-11-29": "build: upstream changed" });
    expect(fourth.totals.failed, JSON.stringify(fourth.partitions.filter((p) => p.action === "failed"))).toBe(0);
    lake = await holds();
    expect(lake.has("2026-11-29")).toBe(false);
    const emptied = fourth.partitions.find((p) => p.layer === "raw" && p.partition === "date=2026-11-29")!;
    expect(emptied.rows).toBe(0);

    // --partition names a day before the window: it is fetched too (and only added to the window).
    api.setDay("2026-11-21", dayRows("2026-11-21", 2, 7));
    const fifth = await sync({ asOf: "2026-12-01", partitions: ["date=2026-11-21"] });
    expect(reasons(fifth, "raw")).toMatchObject({ "date=2026-11-21": "build: new", "date=2026-11-28": "skip: unchanged", "date=2026-12-01": "skip: unchanged" });
    expect((await holds()).get("2026-11-21")).toEqual(apiDay(dayRows("2026-11-21", 2, 7)));

    // Nothing changed: a sync builds nothing.
    const sixth = await sync({ asOf: "2026-12-01" });
    expect(sixth.totals).toMatchObject({ built: 0, failed: 0 });
  }, 120_000);
});

describe("http source from the CLI", () => {
  it("exits 7 when a day cannot be fetched, says which and why without the token, and the rerun fetches it", async () => {
    const api = await startReportApi({ pageSize: 2, token: TOKEN });
    const backend = await BACKEND_FACTORIES.local!();
    const work = tempDir("lakeswap-http-cli-");
    try {
      mkdirSync(path.join(work.dir, "sql"));
      writeFileSync(path.join(work.dir, "sql", "daily.sql"), DAILY_SQL);
      writeFileSync(path.join(work.dir, "sql", "pages.sql"), PAGES_SQL);
      const config = path.join(work.dir, "lakeswap.yaml");
      writeFileSync(config, configYaml(api, { lookback: 1 }));
      api.setDay("2026-11-29", dayRows("2026-11-29", 3));
      api.setDay("2026-11-30", dayRows("2026-11-30", 3));
      api.failDay("2026-11-30", 503);
      const env = { ...backend.cliEnv, GA4_TOKEN: TOKEN };
      const failing = await runMain([...backend.cliArgs, "sync", "-c", config, "--as-of", "2026-11-30"], env);
      expect(failing.code, failing.stderr).toBe(7);
      expect(failing.stdout).toContain("date=2026-11-30");
      expect(failing.stdout).toContain("503");
      expect(failing.stdout + failing.stderr).not.toContain(TOKEN);

      api.failDay("2026-11-30", undefined);
      const rerun = await runMain([...backend.cliArgs, "sync", "-c", config, "--as-of", "2026-11-30", "--json"], env);
      expect(rerun.code, rerun.stderr).toBe(0);
      const report = JSON.parse(rerun.stdout) as SyncReport;
      expect(reasons(report, "raw")).toEqual({ "date=2026-11-29": "skip: unchanged", "date=2026-11-30": "build: new" });

      // plan fetches the window too, and changes nothing: the API restated 11-29, so a sync would rebuild it.
      api.setDay("2026-11-29", dayRows("2026-11-29", 2, 5));
      const plan = await runMain([...backend.cliArgs, "plan", "-c", config, "--as-of", "2026-11-30", "--json"], env);
      expect(plan.code, plan.stderr).toBe(0);
      const planned = (JSON.parse(plan.stdout) as { partitions: { layer: string; partition: string; action: string; reason: string }[] }).partitions;
      expect(planned.filter((p) => p.layer === "raw").map((p) => `${p.partition} ${p.action}: ${p.reason}`)).toEqual([
        "date=2026-11-29 build: content changed",
        "date=2026-11-30 skip: unchanged",
      ]);
      expect(planned.find((p) => p.layer === "daily" && p.partition === "date=2026-11-29")).toMatchObject({ action: "build", reason: "upstream changed" });
      api.failDay("2026-11-30", 500);
      const unreachable = await runMain([...backend.cliArgs, "plan", "-c", config, "--as-of", "2026-11-30"], env);
      api.failDay("2026-11-30", undefined);
      expect(unreachable.code, unreachable.stderr).toBe(0);
      expect(unreachable.stdout).toMatch(/date=2026-11-30 +skip +fetch failed +GET .*HTTP 500/);

      // A row the declared columns do not take stops the load, naming the day and the row; nothing changes.
      api.setDay("2026-11-29", [{ page: "/a", sessions: 1 }, { page: "/b", sessions: "many" }]);
      const bad = await runMain([...backend.cliArgs, "sync", "-c", config, "--as-of", "2026-11-30"], env);
      expect(bad.code, bad.stderr).toBe(2);
      expect(bad.stderr).toContain("datasets.ga4: the http source's answer for date=2026-11-29, row 2: column sessions: 'many' is not an integer");
      expect(bad.stderr).toContain("Declare the columns as the API sends them, or set dead_letter: <table>");

      const missing = await runMain([...backend.cliArgs, "sync", "-c", config, "--as-of", "2026-11-30"], { ...backend.cliEnv, GA4_TOKEN: "" });
      expect(missing.code).toBe(2);
      expect(missing.stderr).toContain("GA4_TOKEN");

      const badDay = await runMain([...backend.cliArgs, "sync", "-c", config, "--as-of", "2026-11-31"], env);
      expect(badDay.code).toBe(2);
      expect(badDay.stderr).toContain("'2026-11-31' is not a day");
    } finally {
      await api.close();
      await backend.cleanup();
      work.cleanup();
    }
  }, 120_000);
});

describe.each(selectedBackends())("file source with lookback_days (%s backend)", (backendName) => {
  it("rewrites only the delivery's days inside the window; earlier days it still holds are settled unless new or named with --partition", async () => {
    const backend = await BACKEND_FACTORIES[backendName]!();
    const work = tempDir("lakeswap-lookback-file-");
    try {
      const config = path.join(work.dir, "lakeswap.yaml");
      writeFileSync(
        config,
        `datasets:
  orders:
    source: {format: csv, path: orders.csv, replace_partition: true, lookback_days: 2}
    columns: {order_id: BIGINT, amount: BIGINT, order_ts: TIMESTAMP}
    partition: {day: "strftime(order_ts, '%Y-%m-%d')"}
`,
      );
      const delivery = path.join(work.dir, "orders.csv");
      const write = (days: readonly number[], amountOf: (day: number) => number) =>
        writeFileSync(delivery, `order_id,amount,order_ts\n${days.map((d) => `${d},${amountOf(d)},2026-11-${d} 12:00:00`).join("\n")}\n`);
      const sync = async (options: Omit<PipelineOptions, "fetchSource"> = {}) => {
        const lake = await backend.open();
        try {
          return await new Pipeline(lake, loadPipelineConfig(config), { asOf: "2026-11-30", ...options }).sync();
        } finally {
          await lake.close();
        }
      };
      const amounts = async () => {
        const lake = await backend.open({ readOnly: true });
        try {
          return Object.fromEntries((await lake.query("SELECT day, CAST(amount AS INTEGER) FROM orders_raw ORDER BY day")).rows.map(([day, amount]) => [String(day), Number(amount)]));
        } finally {
          await lake.close();
        }
      };
      const days = [20, 22, 24, 26, 28, 29, 30];
      write(days, (d) => d);
      const first = await sync();
      expect(first.totals).toMatchObject({ built: days.length, failed: 0 });

      // The next delivery restates 11-22 (settled) and 11-29 (in the window) and brings 11-21 (new).
      write([21, ...days], (d) => (d === 22 || d === 29 ? d + 1000 : d));
      const second = await sync();
      expect(reasons(second, "raw")).toMatchObject({
        "day=2026-11-21": "build: new",
        "day=2026-11-22": "skip: outside lookback",
        "day=2026-11-28": "skip: unchanged",
        "day=2026-11-29": "build: content changed",
      });
      expect(await amounts()).toMatchObject({ "2026-11-21": 21, "2026-11-22": 22, "2026-11-29": 1029 });

      // --partition names a settled day: it is rewritten too.
      const third = await sync({ partitions: ["day=2026-11-22"] });
      expect(reasons(third, "raw")).toMatchObject({ "day=2026-11-22": "build: content changed", "day=2026-11-29": "skip: unchanged" });
      expect((await amounts())["2026-11-22"]).toBe(1022);
    } finally {
      await backend.cleanup();
      work.cleanup();
    }
  }, 120_000);
});
