import fs, { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { IngestPipelineConfig } from "../../src/config/ingest-config.js";
import type { Lake } from "../../src/lake/lake.js";
import { startIngestServer } from "../../src/ingest/http-server.js";
import { BackpressureError } from "../../src/ingest/http-errors.js";
import { Collector, type CollectorOptions } from "../../src/ingest/collector.js";
import { LANDING_YIELDS, landingYields, type LandingYield } from "../../src/ingest/landing-yield.js";
import { jsonArrayLines } from "../../src/ingest/request-body.js";
import { namespaceTable } from "../../src/ingest/segment-lander.js";
import { Metrics } from "../../src/ingest/metrics.js";
import { defineTable } from "../../src/model/table.js";
import { parsePartitionPath } from "../../src/model/partition.js";
import { resolveAwsTarget } from "../../src/config/aws-config.js";
import { AdaptiveLimit } from "../../src/shared/adaptive-limit.js";
import { openAwsLake } from "../../src/open/open-lake.js";
import { resolvePipelineConfig } from "../../src/config/pipeline-config.js";
import { Pipeline } from "../../src/pipeline/pipeline.js";
import { parse as parseYaml } from "yaml";
import { mkdirSync } from "node:fs";
import { spawnSync } from "node:child_process";
import { awsBackend, embeddedBackend, ownAwsBackend, type TestBackend } from "../support/lake-fixture.js";
import { registerIngested } from "../../src/lake/operations/register-segment.js";
import { compactTables } from "../../src/lake/operations/compact.js";
import { rollbackPartition } from "../../src/lake/operations/rollback.js";
import { ingestPipeline } from "../support/ingest-pipeline.js";

const PARTITION = [
  { key: "p_year", expression: "strftime(ts, '%Y')" },
  { key: "p_month", expression: "strftime(ts, '%m')" },
  { key: "p_day", expression: "strftime(ts, '%d')" },
];

function pipelineOf(walDir: string, overrides: Partial<IngestPipelineConfig["wal"]> = {}, unknownFields: "keep" | "deadletter" = "keep"): IngestPipelineConfig {
  const columns = [
    { name: "event_id", type: "VARCHAR", nullable: false },
    { name: "user_id", type: "VARCHAR", nullable: true },
    { name: "ms", type: "BIGINT", nullable: true },
    { name: "ts", type: "TIMESTAMPTZ", nullable: false },
  ];
  return ingestPipeline(walDir, columns, { partition: PARTITION, wal: overrides, unknownFields });
}

/** An event of day 30 or 1 (by `i`), unique by `i`. */
function event(i: number, extra: Record<string, unknown> = {}): Record<string, unknown> {
  const day = i % 2 === 0 ? "2026-11-30" : "2026-12-01";
  return { event_id: `e${i}`, user_id: `u${i % 7}`, ms: i * 3, ts: `${day}T${String(i % 24).padStart(2, "0")}:00:00Z`, ...extra };
}

function ndjson(events: readonly unknown[]): Buffer {
  return Buffer.from(events.map((e) => (typeof e === "string" ? e : JSON.stringify(e))).join("\n"));
}

/** A query's rows as objects by column name. */
async function rowsOf(lake: Lake, sql: string): Promise<Record<string, unknown>[]> {
  const result = await lake.query(sql);
  return result.rows.map((row) => Object.fromEntries(result.columns.map((column, i) => [column, row[i]])));
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function setup(backend: () => Promise<TestBackend>, pipeline?: (walDir: string) => IngestPipelineConfig, extra: Pick<CollectorOptions, "yieldToAppends"> = {}): Promise<{ lake: Lake; service: Collector; walDir: string; backend: TestBackend; metrics: Metrics; reopen: () => Promise<Collector> }> {
  const b = await backend();
  const walDir = await mkdtemp(path.join(os.tmpdir(), "lakeswap-wal-"));
  const lake = await b.open();
  const config = (pipeline ?? ((dir: string) => pipelineOf(dir)))(walDir);
  const metrics = new Metrics();
  let service = await Collector.open({ pipeline: config, lake, deadLetterLake: lake, metrics, log: () => undefined, ...extra });
  cleanups.push(async () => {
    await service.close().catch(() => undefined);
    await lake.close();
    await b.cleanup();
    await rm(walDir, { recursive: true, force: true });
  });
  const reopen = async () => {
    await service.close();
    service = await Collector.open({ pipeline: config, lake, deadLetterLake: lake, metrics: new Metrics(), log: () => undefined, ...extra });
    return service;
  };
  return { lake, service, walDir, backend: b, metrics, reopen };
}

/** A config whose dataset `views` builds the layer `daily` (views_daily) from the ingested table pageviews, its collector, and its sync. */
async function layersOverEvents(backend: () => Promise<TestBackend>): Promise<{ lake: Lake; service: Collector; sync: () => ReturnType<Pipeline["sync"]> }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "lakeswap-ingest-sync-"));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  mkdirSync(path.join(dir, "sql"));
  writeFileSync(path.join(dir, "sql", "daily.sql"), "SELECT user_id, count(*) AS views, sum(ms) AS ms FROM pageviews WHERE p_year = {{ p_year }} AND p_month = {{ p_month }} AND p_day = {{ p_day }} GROUP BY user_id\n");
  const file = path.join(dir, "lakeswap.yaml");
  const yaml = `
pipelines:
  events:
    namespaces:
      pageviews:
        columns: {event_id: {type: VARCHAR, nullable: false}, user_id: VARCHAR, ms: BIGINT, ts: {type: TIMESTAMPTZ, nullable: false}}
        time: {field: ts}
    wal: {dir: ./wal}
datasets:
  views:
    source: {ingest: events.pageviews}
    layers:
      - name: daily
        table: views_daily
        sql: sql/daily.sql
        columns: {user_id: VARCHAR, views: BIGINT, ms: BIGINT}
`;
  writeFileSync(file, yaml);
  const config = resolvePipelineConfig(parseYaml(yaml), file);
  const { lake, service } = await setup(backend, () => config.ingest[0]!);
  const sync = () => new Pipeline(lake, config).sync();
  return { lake, service, sync };
}

describe.each([
  ["embedded", embeddedBackend],
  ["aws", awsBackend],
] as const)("ingest on the %s lake", (_name, backend) => {
  it("lands acknowledged events once per partition file, dead-letters bad ones with their reason, and keeps each partition's signature equal to landing all its events at once", async () => {
    const { lake, service } = await setup(backend);
    const accepted: Record<string, unknown>[] = [];
    // Three segments: two requests, then one with bad events, then a JSON array.
    for (const [index, batch] of [[0, 40], [40, 90]].entries()) {
      const events = Array.from({ length: batch[1]! - batch[0]! }, (_, k) => event(batch[0]! + k, index === 1 && k === 0 ? { campaign: "x" } : {}));
      accepted.push(...events);
      expect((await service.accept({ pipeline: "events", namespace: "pageviews", body: ndjson(events), format: "ndjson" })).accepted).toBe(events.length);
    }
    await service.flush();
    const bad = ["not json", JSON.stringify({ event_id: "b1", ts: "yesterday" }), JSON.stringify({ user_id: "no id", ts: "2026-11-30T01:00:00Z" }), "[1,2]"];
    const good = [event(90), event(91)];
    accepted.push(...good);
    await service.accept({ pipeline: "events", namespace: "pageviews", body: ndjson([good[0], ...bad, good[1]]), format: "ndjson" });
    await service.flush();
    const array = [event(92), event(93)];
    accepted.push(...array);
    await service.accept({ pipeline: "events", namespace: "pageviews", body: Buffer.from(JSON.stringify(array)), format: "json" });
    const reports = await service.flush();
    expect(reports.map((r) => r.written)).toEqual([2]);
    expect(service.counts).toMatchObject({ accepted: accepted.length + bad.length, written: accepted.length, deadLettered: bad.length });

    const rows = (await rowsOf(lake, "SELECT event_id, extra, p_day FROM pageviews ORDER BY event_id")) as unknown as { event_id: string; extra: string | null; p_day: string }[];
    expect(rows.map((r) => r.event_id).sort()).toEqual(accepted.map((e) => e.event_id as string).sort());
    expect(rows.find((r) => r.event_id === "e40")?.extra).toBe('{"campaign":"x"}');
    expect(new Set(rows.map((r) => r.p_day))).toEqual(new Set(["30", "01"]));

    const dead = (await rowsOf(lake, "SELECT namespace, reason, raw FROM events ORDER BY line")) as unknown as { namespace: string; reason: string; raw: string }[];
    expect(dead.map((d) => d.raw)).toEqual(bad);
    expect(dead.map((d) => d.reason)).toEqual([
      "not valid JSON",
      expect.stringMatching(/column ts: 'yesterday' is not an ISO 8601 time such as 2025-03-04T10:15:00Z \(time.format: iso8601;/),
      expect.stringMatching(/column event_id is NULL/),
      "not a JSON object",
    ]);
    expect(dead.every((d) => d.namespace === "pageviews")).toBe(true);

    // The signature of each partition, added up segment by segment, is the signature of all its events landed at once.
    const allDir = await mkdtemp(path.join(os.tmpdir(), "lakeswap-all-"));
    cleanups.push(() => rm(allDir, { recursive: true, force: true }));
    const all = path.join(allDir, "all.jsonl");
    writeFileSync(all, `${accepted.map((e) => JSON.stringify(e)).join("\n")}\n`);
    const table = namespaceTable(pipelineOf("/unused").namespaces[0]!);
    const whole = await lake.landing.land({
      files: [all],
      format: "jsonl",
      header: false,
      delimiter: ",",
      columns: [...pipelineOf("/unused").namespaces[0]!.columns, { name: "extra", type: "VARCHAR", nullable: true }],
      partition: PARTITION,
      signatureColumns: table.columns.map((c) => c.name),
      unknownFields: { mode: "keep", column: "extra" },
    });
    try {
      expect(whole.partitions).toHaveLength(2);
      for (const partition of whole.partitions) {
        expect((await lake.pointer("pageviews", partition.partition))?.signature).toBe(partition.signature);
      }
    } finally {
      await lake.landing.releaseLanding(whole);
    }
  });

  it("lets a sync build derived layers from an ingested table, rebuilding only the days that received events", async () => {
    const { lake, service, sync } = await layersOverEvents(backend);
    await service.accept({ pipeline: "events", namespace: "pageviews", body: ndjson(Array.from({ length: 20 }, (_, i) => event(i))), format: "ndjson" });
    await service.flush();
    const first = await sync();
    expect(first.partitions.map((p) => `${p.partition} ${p.action}`).sort()).toEqual(["p_year=2026/p_month=11/p_day=30 build", "p_year=2026/p_month=12/p_day=01 build"]);
    expect((await sync()).partitions.every((p) => p.action === "skip")).toBe(true);
    // Events of one day only: that day is rebuilt, the other skipped.
    await service.accept({ pipeline: "events", namespace: "pageviews", body: ndjson([event(100), event(102)]), format: "ndjson" });
    await service.flush();
    const third = await sync();
    expect(third.partitions.map((p) => `${p.partition} ${p.action} ${p.reason}`).sort()).toEqual([
      "p_year=2026/p_month=11/p_day=30 build upstream changed",
      "p_year=2026/p_month=12/p_day=01 skip unchanged",
    ]);
    const total = await rowsOf(lake, "SELECT sum(views) AS v FROM views_daily");
    expect(Number(total[0]?.v)).toBe(22);
  });

  // Compaction x sync: a sync over days that compaction rewrote into one file builds nothing (the compacted run keeps
  // its day's signature), events landed after it rebuild exactly their day, and a derived day rolled back over a
  // compacted input is rebuilt once, with reason "rolled back", to the same rows.
  it("a sync over compacted days builds nothing; later events rebuild their day; a derived day rolled back over a compacted one is rebuilt to the same rows", async () => {
    const { lake, service, sync } = await layersOverEvents(backend);
    const actions = (report: Awaited<ReturnType<typeof sync>>) => report.partitions.map((p) => `${p.partition} ${p.action}${p.action === "build" ? ` ${p.reason}` : ""}`).sort();
    const daily = () => rowsOf(lake, "SELECT p_day, user_id, views, ms FROM views_daily ORDER BY p_day, user_id");
    // Three segments: three files in each of the two days.
    for (const from of [0, 20, 40]) {
      await service.accept({ pipeline: "events", namespace: "pageviews", body: ndjson(Array.from({ length: 20 }, (_, i) => event(from + i))), format: "ndjson" });
      await service.flush();
    }
    await sync();
    const before = await daily();
    const november = parsePartitionPath("p_year=2026/p_month=11/p_day=30", ["p_year", "p_month", "p_day"]);
    const smallFiles = (await lake.pointer("pageviews", november))!;

    const compacted = await compactTables(lake, "pageviews", { olderThanMs: 0 });
    expect(compacted.map((c) => c.status)).toEqual(["compacted", "compacted"]);
    expect((await lake.pointer("pageviews", november))?.signature).toBe(smallFiles.signature);
    expect(actions(await sync())).toEqual(["p_year=2026/p_month=11/p_day=30 skip", "p_year=2026/p_month=12/p_day=01 skip"]);
    expect(await daily()).toEqual(before);

    // Events of November 30 after the compaction: that day alone is rebuilt, from every row of it.
    await service.accept({ pipeline: "events", namespace: "pageviews", body: ndjson([event(1000), event(1002)]), format: "ndjson" });
    await service.flush();
    expect(actions(await sync())).toEqual(["p_year=2026/p_month=11/p_day=30 build upstream changed", "p_year=2026/p_month=12/p_day=01 skip"]);
    expect(Number((await rowsOf(lake, "SELECT sum(views) AS v FROM views_daily"))[0]?.v)).toBe(62);

    // The derived day rolled back (to its build before those events), over its compacted input: rebuilt once, with
    // every row of the day again, then skipped.
    const rebuilt = await daily();
    await rollbackPartition(lake, "views_daily", november);
    expect(Number((await rowsOf(lake, "SELECT sum(views) AS v FROM views_daily"))[0]?.v)).toBe(60);
    expect(actions(await sync())).toEqual(["p_year=2026/p_month=11/p_day=30 build rolled back", "p_year=2026/p_month=12/p_day=01 skip"]);
    expect(await daily()).toEqual(rebuilt);
    expect(actions(await sync())).toEqual(["p_year=2026/p_month=11/p_day=30 skip", "p_year=2026/p_month=12/p_day=01 skip"]);
  });

  // A JSON array body was parsed and each element written back with JSON.stringify: numbers past 2^53 were rounded
  // (9007199254740993 stored as ...992), a field given twice kept its last value, and an element nested 100,000
  // deep ran JSON.stringify out of stack (500 "retry the request", forever). Each element's own text is stored now.
  it("stores each element of a JSON array body as it was sent: every digit, a repeated field refused, any depth", async () => {
    const { lake, service } = await setup(backend);
    const body = [
      "[",
      `  {"event_id": "big", "ms": 9007199254740993, "ts": "2026-11-30T01:00:00Z",`,
      `   "user_id": "a, \\"quoted\\" ] } [ { \\\\"},`,
      `  {"event_id": "twice", "ms": 1, "ms": 2, "ts": "2026-11-30T02:00:00Z"} ,`,
      `  ${"[".repeat(100_000)}${"]".repeat(100_000)},`,
      `  "text", 7, null, [], {}`,
      "]",
    ].join("\r\n");
    expect(await service.accept({ pipeline: "events", namespace: "pageviews", body: Buffer.from(body), format: "json" })).toEqual({ accepted: 8 });
    const single = `{\n  "event_id": "one",\n  "ts": "2026-11-30T03:00:00Z"\n}\n`;
    expect(await service.accept({ pipeline: "events", namespace: "pageviews", body: Buffer.from(single), format: "json" })).toEqual({ accepted: 1 });
    expect(await service.accept({ pipeline: "events", namespace: "pageviews", body: Buffer.from(" [ ] "), format: "json" })).toEqual({ accepted: 0 });
    await service.flush();
    expect(service.counts).toMatchObject({ accepted: 9, written: 2, deadLettered: 7 });
    expect(await rowsOf(lake, "SELECT event_id, CAST(ms AS VARCHAR) AS ms, user_id FROM pageviews ORDER BY event_id")).toEqual([
      { event_id: "big", ms: "9007199254740993", user_id: 'a, "quoted" ] } [ { \\' },
      { event_id: "one", ms: null, user_id: null },
    ]);
    const dead = (await rowsOf(lake, "SELECT reason FROM events ORDER BY line")).map((row) => String(row.reason).split(" (")[0]);
    expect(dead).toEqual(["fields given more than once: ms", ...Array(5).fill("not a JSON object"), "column event_id is NULL but is declared not nullable"]);
  });

  it("dead-letters an event with an undeclared field when unknown_fields is deadletter", async () => {
    const { lake, service } = await setup(backend, (dir) => pipelineOf(dir, {}, "deadletter"));
    await service.accept({ pipeline: "events", namespace: "pageviews", body: ndjson([event(1), event(2, { campaign: "x", "odd\"key": 1 })]), format: "ndjson" });
    await service.flush();
    expect((await rowsOf(lake, "SELECT event_id FROM pageviews"))).toEqual([{ event_id: "e1" }]);
    const dead = (await rowsOf(lake, "SELECT reason FROM events")) as unknown as { reason: string }[];
    expect(dead[0]?.reason).toMatch(/fields not declared: campaign, odd"key/);
  });
});

describe("ingest on the AWS lake", () => {
  it("writes the sink's partition folders on S3, each with its run, and registers each new partition in Glue with BatchCreatePartition, its signature in the Parameters", async () => {
    // Services of its own: the test counts Glue's calls.
    const { lake, service, backend } = await setup(ownAwsBackend);
    const services = (backend as TestBackend & { services: Awaited<ReturnType<typeof ownAwsBackend>>["services"] }).services;
    await service.accept({ pipeline: "events", namespace: "pageviews", body: ndjson(Array.from({ length: 30 }, (_, i) => event(i))), format: "ndjson" });
    const [report] = await service.flush();
    expect(services.glue.callCount("BatchCreatePartition")).toBeGreaterThanOrEqual(1);
    const pointers = (await lake.snapshot({ tables: ["pageviews"] }))[0]?.partitions ?? [];
    expect(pointers.map((p) => p.files.length)).toEqual([1, 1]);
    for (const p of pointers) {
      expect(p.files[0]).toMatch(new RegExp(`^pageviews/p_year=2026/p_month=\\d\\d/p_day=\\d\\d/run=${p.runId}/${report!.segment}-[0-9a-f]{8}\\.parquet$`));
    }
    expect(Number(((await rowsOf(lake, "SELECT count(*) AS n FROM pageviews"))[0] as { n: unknown }).n)).toBe(30);
  });

  // A retry after a crash between upload and registration finds its files stored: S3 answers the conditional PutObject
  // 412, which lakeswap counts as done. The AWS SDK printed "An error was encountered in a non-retryable streaming
  // request." on the console for each such file (it does so for any failed call with a streamed body, unless the client
  // has a logger of its own): noise on a correct retry, seen against moto_server.
  it("lands a segment whose files were stored before a failed registration, without the SDK's console warnings", async () => {
    const { lake, service } = await setup(awsBackend);
    await service.accept({ pipeline: "events", namespace: "pageviews", body: ndjson(Array.from({ length: 30 }, (_, i) => event(i))), format: "ndjson" });
    const warn = vi.spyOn(console, "warn");
    try {
      process.env.LAKESWAP_FAULT = "ingest-after-upload:error";
      await expect(service.flush()).rejects.toThrow("fault injected at ingest-after-upload");
      delete process.env.LAKESWAP_FAULT;
      const [report] = await service.flush();
      expect(report).toMatchObject({ events: 30, written: 30, files: 2 });
      expect(warn.mock.calls.map((call) => String(call[0]))).toEqual([]);
    } finally {
      delete process.env.LAKESWAP_FAULT;
      warn.mockRestore();
    }
    expect(await rowsOf(lake, "SELECT count(*) AS n, count(DISTINCT event_id) AS ids FROM pageviews")).toEqual([{ n: 30, ids: 30 }]);
  });
});

// `lakeswap serve` answers a burst first: while appends keep the log's writer busy, its timed landing leaves sealed
// segments in the log (landing takes the CPU and the disk the answers wait for), within bounds; a flush lands all.
describe("a JSON array body cut into lines", () => {
  it("gives each element's own text on one line, for random arrays in any layout", () => {
    let seed = 7;
    const random = (n: number): number => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    const space = (): string => [" ", "\n", "\r\n", "\t", ""][random(5)]!;
    const pieces = ["a", ",", "]", "[", "}", "{", '"', "\\", "\n", "é", "\u2028", ":"];
    const text = (): string => Array.from({ length: random(6) }, () => pieces[random(pieces.length)]).join("");
    const value = (depth: number): unknown => {
      switch (depth > 3 ? random(4) : random(7)) {
        case 0: return text();
        case 1: return random(2) === 0 ? random(1000) - 500 : (random(10_000) - 5000) / 7;
        case 2: return [true, false, null][random(3)];
        case 3: return "";
        case 4: return Array.from({ length: random(4) }, () => value(depth + 1));
        default: return Object.fromEntries(Array.from({ length: random(4) }, (_, k) => [`${text()}${k}`, value(depth + 1)]));
      }
    };
    /** JSON text with white space (line ends included) at random between tokens. */
    const render = (v: unknown): string => {
      if (Array.isArray(v)) return `[${space()}${v.map((x) => `${render(x)}${space()}`).join(`,${space()}`)}]`;
      if (v !== null && typeof v === "object") return `{${space()}${Object.entries(v).map(([k, x]) => `${JSON.stringify(k)}${space()}:${space()}${render(x)}`).join(`,${space()}`)}${space()}}`;
      return JSON.stringify(v);
    };
    for (let round = 0; round < 300; round++) {
      const items = Array.from({ length: random(6) }, () => value(0));
      const { lines, events } = jsonArrayLines(Buffer.from(`${space()}${render(items)}${space()}`));
      expect(events).toBe(items.length);
      const joined = Buffer.concat(lines).toString("utf8");
      const got = joined === "" ? [] : joined.slice(0, -1).split("\n");
      expect(got.map((line) => JSON.parse(line) as unknown)).toEqual(items);
    }
  });
});

describe("the timed landing during a burst of appends", () => {
  /** Four appenders posting 10 events at a time, as fast as they are answered, until `done` says so; then waits for the log to be landed. */
  async function burst(policy: LandingYield, done: (service: Collector, sinceSeal: number) => boolean): Promise<{ landedDuringBurst: number; sealedAtEnd: number; service: Collector }> {
    // Segments sealed by age, the first after the appends have been going for a while (as a burst fills a segment).
    const { service: yielding } = await setup(embeddedBackend, (dir) => pipelineOf(dir, { segmentMaxAgeMs: 200 }), { yieldToAppends: policy });
    yielding.start(20);
    let next = 0;
    let firstSeal: number | undefined;
    const deadline = Date.now() + 20_000;
    const appender = async (): Promise<void> => {
      while (Date.now() < deadline) {
        const sealed = Number(yielding.health().detail.sealedSegments);
        if (sealed > 0) firstSeal ??= Date.now();
        if (done(yielding, firstSeal === undefined ? -1 : Date.now() - firstSeal)) return;
        const events = Array.from({ length: 10 }, () => event(next++));
        await yielding.accept({ pipeline: "events", namespace: "pageviews", body: ndjson(events), format: "ndjson" });
      }
    };
    await Promise.all([appender(), appender(), appender(), appender()]);
    const landedDuringBurst = yielding.counts.segments;
    const sealedAtEnd = Number(yielding.health().detail.sealedSegments);
    // Once the appends stop, the writer is idle and the timed landing takes every sealed segment.
    for (let waited = 0; Number(yielding.health().detail.sealedSegments) > 0 && waited < 20_000; waited += 20) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(yielding.health().detail.sealedSegments).toBe(0);
    await yielding.flush();
    expect(yielding.counts.written).toBe(yielding.counts.accepted);
    return { landedDuringBurst, sealedAtEnd, service: yielding };
  }

  it("leaves sealed segments in the log while appends keep waiting for it, and lands them as soon as the appends stop", async () => {
    const { landedDuringBurst, sealedAtEnd, service } = await burst({ demand: 0.5, maxSegments: 1000, maxMs: 60_000 }, (s, sinceSeal) => Number(s.health().detail.sealedSegments) >= 2 && sinceSeal >= 1000);
    expect(landedDuringBurst).toBe(0);
    expect(sealedAtEnd).toBeGreaterThanOrEqual(2);
    expect(service.counts.segments).toBeGreaterThanOrEqual(2);
  }, 60_000);

  it.each([
    ["more segments are sealed than it may leave", { demand: 0.5, maxSegments: 1, maxMs: 60_000 }, undefined],
    ["the oldest sealed segment has waited its longest", { demand: 0.5, maxSegments: 1000, maxMs: 100 }, undefined],
  ])("lands during the burst once %s", async (_when, policy) => {
    const { landedDuringBurst } = await burst(policy, (s) => s.counts.segments > 0);
    expect(landedDuringBurst).toBeGreaterThan(0);
  }, 60_000);

  it("decides by every bound: demand, sealed segments, the oldest one's wait, and half the log's size limit", () => {
    const busy = { demand: 0.9, sealed: 2, waitedMs: 1000, bytes: 100 * 2 ** 20, maxBytes: 2 ** 30 };
    expect(landingYields(LANDING_YIELDS, busy)).toBe(true);
    expect(landingYields(LANDING_YIELDS, { ...busy, demand: 0.49 })).toBe(false);
    expect(landingYields(LANDING_YIELDS, { ...busy, sealed: 4 })).toBe(false);
    expect(landingYields(LANDING_YIELDS, { ...busy, waitedMs: 10_000 })).toBe(false);
    // Backpressure starts at the limit: at half of it the landing goes on whatever the demand, so that a burst meets
    // the limit only when the landing cannot keep up (a log of 128 MiB holds two segments of 64 MiB and the active one).
    expect(landingYields(LANDING_YIELDS, { ...busy, maxBytes: 200 * 2 ** 20 })).toBe(false);
    expect(landingYields(LANDING_YIELDS, { ...busy, bytes: 2 ** 29 - 1 })).toBe(true);
  });
});

describe("the collector's write-ahead log", () => {
  it("answers 503 with Retry-After while the log is over its limit, and takes events again once it has been landed", async () => {
    const { service, metrics } = await setup(embeddedBackend, (dir) => pipelineOf(dir, { maxBytes: 4096 }));
    const server = await startIngestServer({ handler: service, metrics, port: 0, host: "127.0.0.1" });
    cleanups.push(() => server.close());
    const post = (events: unknown[]) => fetch(`${server.url}/v1/events/pageviews`, { method: "POST", headers: { "content-type": "application/x-ndjson" }, body: ndjson(events).toString("utf8") });
    const statuses: number[] = [];
    let retryAfter: string | null = null;
    for (let i = 0; i < 20; i++) {
      const response = await post(Array.from({ length: 10 }, (_, k) => event(i * 10 + k)));
      statuses.push(response.status);
      if (response.status === 503) retryAfter = response.headers.get("retry-after");
      await response.text();
    }
    expect(statuses).toContain(200);
    expect(statuses).toContain(503);
    expect(Number(retryAfter)).toBeGreaterThan(0);
    await expect(service.accept({ pipeline: "events", namespace: "pageviews", body: ndjson([event(999)]), format: "ndjson" })).rejects.toBeInstanceOf(BackpressureError);
    await service.flush();
    expect((await post([event(1000)])).status).toBe(200);
    expect(service.counts.accepted).toBe(statuses.filter((s) => s === 200).length * 10 + 1);
    // The same counts in Prometheus text at /metrics.
    const text = await (await fetch(`${server.url}/metrics`)).text();
    expect(text).toContain(`lakeswap_ingest_events_accepted_total{pipeline="events"} ${service.counts.accepted}`);
    expect(text).toContain(`lakeswap_ingest_events_written_total{pipeline="events"} ${service.counts.written}`);
    expect(text).toMatch(/# TYPE lakeswap_ingest_wal_bytes gauge/);
  });

  it("after a disk error stops the log, answers every request 503 with Retry-After and the cause, and /healthz 503; a restart lands what was acknowledged", async () => {
    const { lake, service, metrics, reopen } = await setup(embeddedBackend);
    const server = await startIngestServer({ handler: service, metrics, port: 0, host: "127.0.0.1" });
    cleanups.push(() => server.close());
    const post = (events: unknown[]) => fetch(`${server.url}/v1/events/pageviews`, { method: "POST", headers: { "content-type": "application/x-ndjson" }, body: ndjson(events).toString("utf8") });
    expect((await post(Array.from({ length: 10 }, (_, k) => event(k)))).status).toBe(200);
    // The disk fills up under the next write; the one after it finds the log stopped.
    vi.spyOn(fs, "writevSync").mockImplementationOnce(() => {
      throw Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC" });
    });
    for (const events of [[event(10)], [event(11)]]) {
      const response = await post(events);
      expect(response.status).toBe(503);
      expect(response.headers.get("retry-after")).toBe("30");
      const { error } = (await response.json()) as { error: string };
      expect(error).toContain("the collector takes no events: the write-ahead log in");
      expect(error).toContain("no space left on device");
      expect(error).toContain("free space in that folder, then restart the collector");
    }
    const health = await fetch(`${server.url}/healthz`);
    expect(health.status).toBe(503);
    expect(((await health.json()) as { detail: { walStopped?: string } }).detail.walStopped).toContain("ENOSPC");
    await server.close();

    const again = await reopen();
    await again.flush();
    const rows = await rowsOf(lake, "SELECT event_id FROM pageviews ORDER BY event_id");
    expect(rows.map((row) => String(row.event_id))).toEqual(Array.from({ length: 10 }, (_, k) => `e${k}`).sort());
  });

  it("recovers a segment with a corrupt record: the other records are landed, the corrupt one reported", async () => {
    const { lake, service, walDir, reopen } = await setup(embeddedBackend);
    for (let i = 0; i < 3; i++) {
      await service.accept({ pipeline: "events", namespace: "pageviews", body: ndjson(Array.from({ length: 5 }, (_, k) => event(i * 5 + k))), format: "ndjson" });
    }
    await service.close();
    // The middle record's payload: a byte flipped inside it.
    const [segment] = readdirSync(walDir).filter((f) => /^\d+\.(open|sealed)$/.test(f));
    const file = path.join(walDir, segment!);
    const bytes = readFileSync(file);
    const second = bytes.indexOf(Buffer.from('"e5"'));
    bytes[second + 1] = (bytes[second + 1] ?? 0) ^ 0xff;
    writeFileSync(file, bytes);
    const again = await reopen();
    await again.flush();
    const ids = ((await rowsOf(lake, "SELECT event_id FROM pageviews ORDER BY event_id")) as unknown as { event_id: string }[]).map((r) => r.event_id);
    expect(ids.sort()).toEqual(["e0", "e1", "e2", "e3", "e4", "e10", "e11", "e12", "e13", "e14"].sort());
    expect(again.counts.corruptRecords).toBeGreaterThanOrEqual(1);
    expect(existsSync(walDir)).toBe(true);
  });
});

describe("a body in the chunks it arrived in", () => {
  it("counts and lands the same events wherever the chunks are cut (inside a line, a blank line or a character), and refuses bytes that are not UTF-8 however they are cut", async () => {
    const { lake, service } = await setup(embeddedBackend);
    const text = `${JSON.stringify(event(1, { note: "caf\u00e9 \u6771\u4eac \u{1F600}" }))}\n  \t \n${JSON.stringify(event(2))}\n\n${JSON.stringify(event(3))}`;
    const body = Buffer.from(text);
    // Every cut into two chunks, and into three, of which some empty: always 3 events, never a bad body.
    for (let cut = 0; cut <= body.length; cut++) {
      const second = Math.min(body.length, cut + 7);
      for (const chunks of [[body.subarray(0, cut), body.subarray(cut)], [body.subarray(0, cut), Buffer.alloc(0), body.subarray(cut, second), body.subarray(second)]]) {
        expect((await service.accept({ pipeline: "events", namespace: "pageviews", body: chunks, format: "ndjson" })).accepted).toBe(3);
      }
    }
    const bad = Buffer.concat([body.subarray(0, 40), Buffer.from([0xc3, 0x28]), body.subarray(40)]);
    for (const cut of [40, 41, 42]) {
      await expect(service.accept({ pipeline: "events", namespace: "pageviews", body: [bad.subarray(0, cut), bad.subarray(cut)], format: "ndjson" })).rejects.toThrow("not UTF-8");
    }
    await service.flush();
    const accepted = service.counts.accepted;
    expect(accepted).toBe(3 * 2 * (body.length + 1));
    const rows = await rowsOf(lake, "SELECT event_id, count(*) AS n, count(DISTINCT extra) AS extras, min(extra) AS extra FROM pageviews GROUP BY event_id ORDER BY event_id");
    expect(rows.map((r) => [r.event_id, Number(r.n), Number(r.extras)])).toEqual([["e1", accepted / 3, 1], ["e2", accepted / 3, 0], ["e3", accepted / 3, 0]]);
    expect(JSON.parse(String(rows[0]!.extra))).toEqual({ note: "caf\u00e9 \u6771\u4eac \u{1F600}" });
  });
});

describe("the collector's scratch folders", () => {
  it("removes the folder a collector killed while landing left in TMPDIR (a copy of a segment's events), and leaves none of its own", async () => {
    const tmp = await mkdtemp(path.join(os.tmpdir(), "lakeswap-tmpdir-"));
    const previous = process.env.TMPDIR;
    process.env.TMPDIR = tmp;
    cleanups.push(async () => {
      if (previous === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = previous;
      await rm(tmp, { recursive: true, force: true });
    });
    const gone = spawnSync(process.execPath, ["-e", ""]).pid;
    const killed = path.join(tmp, `lakeswap-ingest-${gone}-x1y2z3`);
    mkdirSync(killed);
    writeFileSync(path.join(killed, "pageviews.jsonl"), `${JSON.stringify(event(1))}\n`);
    // A folder of a process that still runs (this one's parent) is its own business.
    const running = path.join(tmp, `lakeswap-ingest-${process.ppid}-a1b2c3`);
    mkdirSync(running);

    const { service } = await setup(embeddedBackend);
    await service.accept({ pipeline: "events", namespace: "pageviews", body: ndjson([event(1), event(2)]), format: "ndjson" });
    await service.flush();
    expect(service.counts.written).toBe(2);
    expect(readdirSync(tmp).filter((name) => name.startsWith("lakeswap-ingest-"))).toEqual([path.basename(running)]);
  });
});

describe("an ingested namespace's Glue table", () => {
  const columns = (extra: { name: string; type: string }[] = []) => [
    { name: "event_id", type: "VARCHAR" },
    { name: "ts", type: "TIMESTAMPTZ" },
    ...extra,
  ];

  it("gains a column declared later by UpdateTable, keeps its partitions, and refuses a changed type or other keys, naming the column", async () => {
    // Services of its own: the test reads Glue's state and counts its calls.
    const backend = await ownAwsBackend();
    const lake = await backend.open();
    try {
      const database = backend.services.glue.state.databases()[0]!.Name!;
      const keys = ["p_year", "p_month", "p_day"];
      await lake.createTable(defineTable({ name: "clicks", columns: columns(), partitionKeys: keys, ingest: true }));
      const updatesBefore = backend.services.glue.callCount("UpdateTable");
      await lake.createTable(defineTable({ name: "clicks", columns: columns([{ name: "country", type: "VARCHAR" }]), partitionKeys: keys, ingest: true }));
      expect(backend.services.glue.callCount("UpdateTable")).toBe(updatesBefore + 1);
      const live = backend.services.glue.state.table(database, "clicks");
      expect(live?.StorageDescriptor?.Columns?.map((c) => c.Name)).toEqual(["event_id", "ts", "country"]);
      // The same declaration again changes nothing.
      await lake.createTable(defineTable({ name: "clicks", columns: columns([{ name: "country", type: "VARCHAR" }]), partitionKeys: keys, ingest: true }));
      expect(backend.services.glue.callCount("UpdateTable")).toBe(updatesBefore + 1);
      await expect(lake.createTable(defineTable({ name: "clicks", columns: columns([{ name: "country", type: "BIGINT" }]), partitionKeys: keys, ingest: true }))).rejects.toThrow(
        /column 'country' of ingested table 'clicks' is VARCHAR, and the config now declares BIGINT/,
      );
      await expect(lake.createTable(defineTable({ name: "clicks", columns: [{ name: "event_id", type: "VARCHAR" }], partitionKeys: keys, ingest: true }))).rejects.toThrow(
        /has column 'ts' \(TIMESTAMPTZ\), which the config no longer declares/,
      );
      // Other partition keys: an empty table is rebuilt with them; one with partitions is refused.
      await lake.createTable(defineTable({ name: "clicks", columns: columns(), partitionKeys: ["date"], ingest: true }));
      expect(backend.services.glue.state.table(database, "clicks")?.PartitionKeys?.map((k) => k.Name)).toEqual(["date"]);
      await registerIngested(lake, "clicks", { collector: "c1", sequence: 1 }, [{ partition: parsePartitionPath("date=2026-11-30", ["date"]), rows: 1, upper: "1", lower: "2" }]);
      await expect(lake.createTable(defineTable({ name: "clicks", columns: columns(), partitionKeys: keys, ingest: true }))).rejects.toThrow(
        /partitioned by \(date\), not \(p_year, p_month, p_day\), and has partitions; lakeswap will not drop them/,
      );
    } finally {
      await lake.close();
      await backend.cleanup();
    }
  });
});

describe("the collector's auto-tuned limits on AWS", () => {
  it("grows the upload limit while uploads succeed, and halves it and the Glue limit when S3 and Glue throttle; every event lands", async () => {
    // Services of its own: S3 and Glue throttle this test.
    const backend = await ownAwsBackend();
    const env = { ...process.env, ...backend.cliEnv };
    const target = { ...resolveAwsTarget(undefined, env, "test"), glueEndpoint: backend.services.glue.endpoint, athenaEndpoint: backend.services.athena.endpoint };
    const moves: Record<"upload" | "glue", string[]> = { upload: [], glue: [] };
    const limits = {
      upload: new AdaptiveLimit({ name: "S3 uploads", initial: 1, max: 4, baseDelayMs: 1, onChange: (n, change) => moves.upload.push(`${change} ${n}`) }),
      glue: new AdaptiveLimit({ name: "Glue calls", initial: 2, max: 8, baseDelayMs: 1, onChange: (n, change) => moves.glue.push(`${change} ${n}`) }),
    };
    const lake = await openAwsLake(target, {}, limits);
    const walDir = await mkdtemp(path.join(os.tmpdir(), "lakeswap-wal-"));
    const service = await Collector.open({ pipeline: pipelineOf(walDir), lake, deadLetterLake: lake, metrics: new Metrics(), log: () => undefined, limits });
    try {
      // Events over 12 days: one file per day, uploaded together through the limit.
      const days = (offset: number) =>
        Array.from({ length: 120 }, (_, i) => ({ event_id: `e${offset + i}`, ts: `2026-10-${String(1 + (i % 12)).padStart(2, "0")}T10:00:00Z` }));
      await service.accept({ pipeline: "events", namespace: "pageviews", body: ndjson(days(0)), format: "ndjson" });
      await service.flush();
      expect(moves.upload.filter((m) => m.startsWith("grew")).length).toBeGreaterThan(0);
      const grown = limits.upload.current;
      expect(grown).toBeGreaterThan(1);
      // S3 answers SlowDown to two uploads, Glue throttles one registration: both limits halve, the calls are retried.
      backend.services.s3.failNext("PutObject", { status: 503, code: "SlowDown", key: "pageviews/", times: 2 });
      backend.services.glue.failNext("BatchCreatePartition", { error: "ThrottlingException" });
      await service.accept({ pipeline: "events", namespace: "pageviews", body: ndjson(days(1000).map((e) => ({ ...e, ts: e.ts.replace("2026-10", "2026-09") }))), format: "ndjson" });
      await service.flush();
      expect(moves.upload).toContain(`halved ${Math.max(1, Math.floor(grown / 2))}`);
      expect(moves.glue.filter((m) => m.startsWith("halved"))).toHaveLength(1);
      expect(service.health().detail).toMatchObject({ glueConcurrency: limits.glue.current, uploadConcurrency: limits.upload.current });
      expect(Number((await rowsOf(lake, "SELECT count(DISTINCT event_id) AS n FROM pageviews"))[0]?.n)).toBe(240);
    } finally {
      await service.close();
      await lake.close();
      await backend.cleanup();
      await rm(walDir, { recursive: true, force: true });
    }
  });
});

describe("event field names (issue 25, item 3)", () => {
  it("match the declared columns whatever their case; a field given in two cases is dead-lettered naming both; a field no event sends is NULL", async () => {
    const { lake, service } = await setup(embeddedBackend);
    const events = [
      { Event_ID: "a1", User_Id: "u1", TS: "2026-11-30T01:00:00Z" },
      { event_id: "a2", EVENT_ID: "a3", ts: "2026-11-30T02:00:00Z" },
    ];
    await service.accept({ pipeline: "events", namespace: "pageviews", body: ndjson(events), format: "ndjson" });
    await service.flush();
    expect(await rowsOf(lake, "SELECT event_id, user_id, ms, extra FROM pageviews")).toEqual([{ event_id: "a1", user_id: "u1", ms: null, extra: null }]);
    const dead = (await rowsOf(lake, "SELECT reason FROM events")).map((row) => String(row.reason).split(" (")[0]);
    expect(dead).toEqual(["fields given more than once: EVENT_ID, event_id"]);
  });
});

describe("event values (issue 25, item 8)", () => {
  it("dead-letters an event time outside years 0001-9999 (no partition p_year=infinity), NaN, and an object for a text field", async () => {
    const { lake, service } = await setup(embeddedBackend);
    const events = [
      event(0),
      event(1, { ts: "infinity" }),
      event(2, { ts: "10000-01-01T00:00:00Z" }),
      event(3, { ts: "0000-01-01T00:00:00Z" }),
      event(4, { user_id: { name: "x" } }),
      event(5, { ms: "0x1F" }),
    ];
    await service.accept({ pipeline: "events", namespace: "pageviews", body: ndjson(events), format: "ndjson" });
    await service.flush();
    expect(await rowsOf(lake, "SELECT event_id, p_year FROM pageviews")).toEqual([{ event_id: "e0", p_year: "2026" }]);
    const dead = (await rowsOf(lake, "SELECT reason FROM events ORDER BY line")).map((row) => String(row.reason).split(" (")[0]);
    expect(dead).toEqual([
      "column ts: 'infinity' is outside the years 0001 to 9999 that an event time may have",
      "column ts: '10000-01-01T00:00:00Z' is outside the years 0001 to 9999 that an event time may have",
      "column ts: '0000-01-01T00:00:00Z' is outside the years 0001 to 9999 that an event time may have",
      `column user_id: '{"name":"x"}' is a JSON object, not text: send it as a JSON string, or leave the field undeclared`,
      "column ms: '0x1F' is not written in decimal digits",
    ]);
  });
});

describe("an event time in epoch milliseconds (issue 25, item 15)", () => {
  it("lands with time.format: epoch_ms, and is dead-lettered with the expected format named without it", async () => {
    const quakes = (dir: string, format?: "epoch_ms") => {
      const config = pipelineOf(dir);
      const ns = config.namespaces[0]!;
      return { ...config, namespaces: [{ ...ns, time: { ...ns.time, ...(format ? { format } : {}) } }] };
    };
    const events = [{ event_id: "q1", ts: 1764464400000 }, { event_id: "q2", ts: "1764464400123" }];
    const withFormat = await setup(embeddedBackend, (dir) => quakes(dir, "epoch_ms"));
    await withFormat.service.accept({ pipeline: "events", namespace: "pageviews", body: ndjson(events), format: "ndjson" });
    await withFormat.service.flush();
    expect(await rowsOf(withFormat.lake, "SELECT event_id, CAST(ts AS VARCHAR) AS ts, p_day FROM pageviews ORDER BY event_id")).toEqual([
      { event_id: "q1", ts: "2025-11-30 01:00:00+00", p_day: "30" },
      { event_id: "q2", ts: "2025-11-30 01:00:00.123+00", p_day: "30" },
    ]);
    const without = await setup(embeddedBackend, (dir) => quakes(dir));
    await without.service.accept({ pipeline: "events", namespace: "pageviews", body: ndjson(events.slice(0, 1)), format: "ndjson" });
    await without.service.flush();
    expect((await rowsOf(without.lake, "SELECT reason FROM events")).map((row) => row.reason)).toEqual([
      "column ts: '1764464400000' is not an ISO 8601 time such as 2025-03-04T10:15:00Z (time.format: iso8601; a number of seconds or milliseconds since 1970 needs time.format: epoch_s or epoch_ms)",
    ]);
  });
});
