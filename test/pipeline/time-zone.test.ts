// Times do not depend on the machine: lakeswap's DuckDB sessions run in UTC and the Gregorian calendar, as Athena's do.
// Before, a derived layer's SQL, an `inputs.map` expression, a query and the audits took the machine's zone (TZ): the
// same delivery and SQL built other rows in Tokyo than in UTC, and a later sync elsewhere skipped them as unchanged. And
// under a Thai locale ICU's calendar is the Buddhist one: the landing read the text '2026-11-02 00:45:00' of a
// TIMESTAMPTZ column as a time in 1483 and `year(ts)` of 2026 as 2569.
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { awsBackend, runCli, tempDir } from "../support/lake-fixture.js";
import { PAGEVIEWS_YAML } from "../support/ingest-pipeline.js";

const folder = tempDir("lakeswap-time-zone-");
afterAll(() => folder.cleanup());

const CONFIG = `datasets:
  events:
    source: {format: csv, path: deliveries/*.csv}
    columns:
      id: {type: BIGINT, nullable: false}
      ts: TIMESTAMPTZ
    partition:
      day: strftime(ts, '%Y-%m-%d')
    audits:
      - range: {ts: {min: '2026-11-01 12:00:00', max: '2026-11-02 00:45:00'}}
    layers:
      - name: stage
        sql: sql/stage.sql
        columns: {id: BIGINT, ts_date: DATE, ts_hour: BIGINT, ts_year: BIGINT, ts_text: VARCHAR}
      - name: monthly
        sql: sql/monthly.sql
        columns: {events: BIGINT}
        inputs:
          map: {month: "strftime(timezone('UTC', CAST(day AS TIMESTAMP)), '%Y-%m')"}
`;
const STAGE = "SELECT id, CAST(ts AS DATE) AS ts_date, hour(ts) AS ts_hour, year(ts) AS ts_year, CAST(ts AS VARCHAR) AS ts_text FROM events_raw WHERE day = {{ day }}\n";
const MONTHLY = "SELECT count(*) AS events FROM events_stage WHERE strftime(timezone('UTC', CAST(day AS TIMESTAMP)), '%Y-%m') = {{ month }}\n";
// Two instants late on 1 November UTC (already 2 November in Tokyo), one early on 2 November UTC (still 1 November in
// Los Angeles), and a zone-less time, which lakeswap reads as UTC.
const DELIVERY = "id,ts\n1,2026-11-01T23:30:00Z\n2,2026-11-01T12:00:00+00:00\n3,2026-11-02T06:15:00+09:00\n4,2026-11-02 00:45:00\n";

/** The pipeline's folder for `name`, with its config, SQL and delivery. */
function pipelineFolder(name: string, monthly = MONTHLY): string {
  const dir = path.join(folder.dir, name.replace(/[^A-Za-z0-9]/g, "-"));
  mkdirSync(path.join(dir, "sql"), { recursive: true });
  mkdirSync(path.join(dir, "deliveries"), { recursive: true });
  writeFileSync(path.join(dir, "lakeswap.yaml"), CONFIG);
  writeFileSync(path.join(dir, "sql", "stage.sql"), STAGE);
  writeFileSync(path.join(dir, "sql", "monthly.sql"), monthly);
  writeFileSync(path.join(dir, "deliveries", "events.csv"), DELIVERY);
  return dir;
}

/** A pipeline folder of its own, synced into an embedded lake by a CLI process with `env` (a zone, a locale) in its environment. */
async function syncedIn(env: Record<string, string>): Promise<{ lake: string; env: Record<string, string> }> {
  const dir = pipelineFolder(Object.values(env)[0]!);
  const lake = path.join(dir, "lake");
  const synced = await runCli(["sync", "-c", path.join(dir, "lakeswap.yaml"), "--lake", lake, "--json"], env, { cwd: dir });
  expect(synced.code, synced.stderr).toBe(0);
  return { lake, env };
}

/** `lakeswap query --json` of the lake at `lake` (or, with none, the AWS lake `env` names). */
async function query(lake: string | undefined, env: Record<string, string>, sql: string): Promise<unknown[]> {
  const result = await runCli(["query", sql, ...(lake === undefined ? [] : ["--lake", lake]), "--json"], env);
  expect(result.code, result.stderr).toBe(0);
  return JSON.parse(result.stdout) as unknown[];
}

const MACHINES: readonly Record<string, string>[] = [{ TZ: "Asia/Tokyo" }, { TZ: "America/Los_Angeles" }, { LANG: "th_TH.UTF-8", LC_ALL: "th_TH.UTF-8" }, { TZ: "UTC" }];

describe("times do not depend on the machine's zone or locale", () => {
  it.each(MACHINES)("%o: landed times, partitions, derived rows, mapped partitions, audits and queries are those of UTC", async (machine) => {
    const { lake, env } = await syncedIn(machine);
    expect(await query(lake, env, "SELECT day, id, epoch(ts) AS seconds FROM events_raw ORDER BY id")).toEqual([
      { day: "2026-11-01", id: 1, seconds: Date.UTC(2026, 10, 1, 23, 30) / 1000 },
      { day: "2026-11-01", id: 2, seconds: Date.UTC(2026, 10, 1, 12) / 1000 },
      { day: "2026-11-01", id: 3, seconds: Date.UTC(2026, 10, 1, 21, 15) / 1000 },
      { day: "2026-11-02", id: 4, seconds: Date.UTC(2026, 10, 2, 0, 45) / 1000 },
    ]);
    expect(await query(lake, env, "SELECT day, id, CAST(ts_date AS VARCHAR) AS ts_date, ts_hour, ts_year, ts_text FROM events_stage ORDER BY id")).toEqual([
      { day: "2026-11-01", id: 1, ts_date: "2026-11-01", ts_hour: 23, ts_year: 2026, ts_text: "2026-11-01 23:30:00+00" },
      { day: "2026-11-01", id: 2, ts_date: "2026-11-01", ts_hour: 12, ts_year: 2026, ts_text: "2026-11-01 12:00:00+00" },
      { day: "2026-11-01", id: 3, ts_date: "2026-11-01", ts_hour: 21, ts_year: 2026, ts_text: "2026-11-01 21:15:00+00" },
      { day: "2026-11-02", id: 4, ts_date: "2026-11-02", ts_hour: 0, ts_year: 2026, ts_text: "2026-11-02 00:45:00+00" },
    ]);
    // Both days map to one month in UTC (in Los Angeles, 1 November's midnight UTC is still October).
    expect(await query(lake, env, "SELECT month, events FROM events_monthly ORDER BY month")).toEqual([{ month: "2026-11", events: 4 }]);
    // A query's own zone-dependent expressions are UTC too, as on Athena.
    expect(await query(lake, env, "SELECT CAST(min(ts) AS DATE) AS first_day, hour(max(ts)) AS last_hour FROM events_raw")).toEqual([{ first_day: "2026-11-01", last_hour: 0 }]);
  });
});

describe("on AWS, where Athena builds the layers, the audits and inputs.map that run locally are UTC's too", () => {
  it.each(MACHINES.slice(1, 3))("%o: the same rows and month as in UTC", async (machine) => {
    const backend = await awsBackend();
    try {
      // Athena's SQL: the month's rows by the text of their day (strftime is DuckDB's, not Trino's).
      const dir = pipelineFolder(`aws-${Object.values(machine)[0]!}`, "SELECT count(*) AS events FROM events_stage WHERE substr(day, 1, 7) = {{ month }}\n");
      const env = { ...backend.cliEnv, ...machine };
      const synced = await runCli(["sync", "-c", path.join(dir, "lakeswap.yaml"), "--json"], env, { cwd: dir });
      expect(synced.code, synced.stderr).toBe(0);
      expect(await query(undefined, env, "SELECT day, id, CAST(ts_date AS VARCHAR) AS ts_date, ts_hour, ts_year FROM events_stage ORDER BY id")).toEqual([
        { day: "2026-11-01", id: 1, ts_date: "2026-11-01", ts_hour: 23, ts_year: 2026 },
        { day: "2026-11-01", id: 2, ts_date: "2026-11-01", ts_hour: 12, ts_year: 2026 },
        { day: "2026-11-01", id: 3, ts_date: "2026-11-01", ts_hour: 21, ts_year: 2026 },
        { day: "2026-11-02", id: 4, ts_date: "2026-11-02", ts_hour: 0, ts_year: 2026 },
      ]);
      expect(await query(undefined, env, "SELECT month, events FROM events_monthly ORDER BY month")).toEqual([{ month: "2026-11", events: 4 }]);
    } finally {
      await backend.cleanup();
    }
  });
});

describe("ingested events are bucketed by their UTC time, whatever the machine's zone or locale", () => {
  // Under a Thai locale the collector put p_year '-2568' on every event, and dead-lettered them all as unsafe values.
  it.each(MACHINES)("%o: p_year/p_month/p_day and the stored instant are those of UTC", async (machine) => {
    const dir = path.join(folder.dir, `ingest-${Object.values(machine)[0]!.replace(/[^A-Za-z0-9]/g, "-")}`);
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, "lakeswap.yaml"), PAGEVIEWS_YAML);
    writeFileSync(path.join(dir, "events.ndjson"), '{"event_id":"a1","ts":"2026-12-31T23:30:00Z"}\n{"event_id":"a2","ts":"2027-01-01 00:15:00"}\n');
    const lake = path.join(dir, "lake");
    const ingested = await runCli(["ingest", "events", "events.ndjson", "--lake", lake, "--json"], machine, { cwd: dir });
    expect(ingested.code, ingested.stderr).toBe(0);
    expect(JSON.parse(ingested.stdout)).toMatchObject({ events: 2, written: 2, deadLettered: 0 });
    expect(await query(lake, machine, "SELECT p_year, p_month, p_day, event_id, epoch(ts) AS seconds FROM pageviews ORDER BY event_id")).toEqual([
      { p_year: "2026", p_month: "12", p_day: "31", event_id: "a1", seconds: Date.UTC(2026, 11, 31, 23, 30) / 1000 },
      { p_year: "2027", p_month: "01", p_day: "01", event_id: "a2", seconds: Date.UTC(2027, 0, 1, 0, 15) / 1000 },
    ]);
  });
});
