import { readFileSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { IngestNamespaceConfig, IngestPipelineConfig } from "../../src/config/ingest-config.js";
import type { Lake } from "../../src/lake/lake.js";
import { partitionPath } from "../../src/model/partition.js";
import { ingestTallyKey } from "../../src/lake/layout.js";
import { Collector } from "../../src/ingest/collector.js";
import { EVENT_DEAD_LETTER_COLUMNS } from "../../src/ingest/dead-letters.js";
import { namespaceTable } from "../../src/ingest/segment-lander.js";
import { segmentFileId } from "../../src/ingest/segment-keys.js";
import { Metrics } from "../../src/ingest/metrics.js";
import { awsBackend, embeddedBackend, type TestBackend } from "../support/lake-fixture.js";
import { registerIngested, type SegmentId } from "../../src/lake/operations/register-segment.js";
import type { LandedDelivery, LandedFile } from "../../src/landing/landing.js";

const PARTITION = ["%Y", "%m", "%d"].map((format, i) => ({ key: ["p_year", "p_month", "p_day"][i]!, expression: `strftime(ts, '${format}')` }));
const DEAD_LETTER_PARTITION = ["%Y", "%m", "%d"].map((format, i) => ({ key: ["p_year", "p_month", "p_day"][i]!, expression: `strftime(received_at, '${format}')` }));

function namespace(name: string): IngestNamespaceConfig {
  return {
    name,
    columns: [
      { name: "id", type: "BIGINT", nullable: false },
      { name: "ts", type: "TIMESTAMPTZ", nullable: false },
    ],
    unknownFields: "keep",
    extraColumn: "extra",
    time: { field: "ts", partition: PARTITION },
  };
}

function pipelineOf(walDir: string, names: readonly string[] = ["a", "b"]): IngestPipelineConfig {
  const local = { kind: "local" as const, name: "lake", path: "/unused" };
  return {
    name: "events",
    dataSink: local,
    deadletterSink: local,
    namespaces: names.map(namespace),
    wal: { dir: walDir, segmentMaxBytes: 64 * 1024 * 1024, segmentMaxAgeMs: 60_000, maxBytes: 1024 * 1024 * 1024 },
  };
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface Setup {
  readonly lake: Lake;
  readonly service: Collector;
  readonly walDir: string;
  readonly logged: string[];
  readonly metrics: Metrics;
}

async function setup(backend: () => Promise<TestBackend> = embeddedBackend): Promise<Setup> {
  const b = await backend();
  const walDir = await mkdtemp(path.join(os.tmpdir(), "lakeswap-wal-"));
  const lake = await b.open();
  const logged: string[] = [];
  const metrics = new Metrics();
  const service = await Collector.open({ pipeline: pipelineOf(walDir), lake, deadLetterLake: lake, metrics, log: (line) => logged.push(line) });
  cleanups.push(async () => {
    await service.close().catch(() => undefined);
    await lake.close();
    await b.cleanup();
    await rm(walDir, { recursive: true, force: true });
  });
  return { lake, service, walDir, logged, metrics };
}

async function post(service: Collector, ns: string, lines: readonly string[]): Promise<void> {
  await service.accept({ pipeline: "events", namespace: ns, body: Buffer.from(`${lines.join("\n")}\n`), format: "ndjson" });
}

async function rowsOf(lake: Lake, sql: string): Promise<Record<string, unknown>[]> {
  const result = await lake.query(sql);
  return result.rows.map((row) => Object.fromEntries(result.columns.map((column, i) => [column, row[i]])));
}

/** The signature of the dead-letter table's partition, against the one of landing the rows it holds at once. */
/** Registers a landed delivery's files in `table` as segment `segment` of `id.collector` would: each at its segment file id. */
async function registerLanded(lake: Lake, table: string, id: SegmentId, segment: string, delivery: LandedDelivery, files: readonly LandedFile[]): Promise<void> {
  const fileOf = new Map(files.map((f) => [partitionPath(f.partition), f.file]));
  const contributions = delivery.partitions.map((p) => ({
    partition: p.partition,
    rows: p.rows,
    upper: p.lanes!.upper,
    lower: p.lanes!.lower,
    file: { fileId: segmentFileId(segment, table, partitionPath(p.partition)), path: fileOf.get(partitionPath(p.partition))! },
  }));
  await registerIngested(lake, table, id, contributions);
}

async function expectSignatureOfItsRows(lake: Lake): Promise<void> {
  const rows = await rowsOf(lake, "SELECT namespace, strftime(received_at AT TIME ZONE 'UTC', '%Y-%m-%dT%H:%M:%S.%gZ') AS received_at, reason, raw, segment, line FROM events");
  const dir = await mkdtemp(path.join(os.tmpdir(), "lakeswap-dl-"));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  const file = path.join(dir, "all.jsonl");
  writeFileSync(file, `${rows.map((r) => JSON.stringify({ ...r, line: Number(r.line) })).join("\n")}\n`);
  const whole = await lake.landing.land({
    files: [file],
    format: "jsonl",
    header: false,
    delimiter: ",",
    columns: [...EVENT_DEAD_LETTER_COLUMNS],
    partition: DEAD_LETTER_PARTITION,
    signatureColumns: EVENT_DEAD_LETTER_COLUMNS.map((c) => c.name),
  });
  try {
    expect(whole.rowsRejected).toBe(0);
    for (const partition of whole.partitions) expect((await lake.pointer("events", partition.partition))?.signature).toBe(partition.signature);
  } finally {
    await lake.landing.releaseLanding(whole);
  }
}

describe.each([
  ["embedded", embeddedBackend],
  ["aws", awsBackend],
] as const)("dead letters of several namespaces in one segment (%s)", (_name, backend) => {
  // Every namespace's dead letters of a segment were stored at segmentFileId(segment, <pipeline>, partition): with equal
  // counts the second namespace's were taken for a retry of the first's and lost; with unequal counts the segment
  // failed on every retry and nothing after it landed.
  it("keeps each namespace's dead letters, equal counts or not, and lands the segments after them", async () => {
    const { lake, service } = await setup(backend);
    await post(service, "a", ["not json", '{"id": 1, "ts": "2026-11-30T01:00:00Z"}']);
    await post(service, "b", ["[1]"]);
    await post(service, "b", ['{"id": "x", "ts": "2026-11-30T01:00:00Z"}']);
    const [first] = await service.flush();
    expect(first).toMatchObject({ written: 1, deadLettered: 3 });
    // Equal counts: one each.
    await post(service, "a", ["nope"]);
    await post(service, "b", ["nope either"]);
    const [second] = await service.flush();
    expect(second).toMatchObject({ written: 0, deadLettered: 2 });
    expect(service.counts).toMatchObject({ deadLettered: 5, quarantinedSegments: 0 });
    expect(await rowsOf(lake, "SELECT namespace, raw FROM events ORDER BY segment, namespace, line")).toEqual([
      { namespace: "a", raw: "not json" },
      { namespace: "b", raw: "[1]" },
      { namespace: "b", raw: '{"id": "x", "ts": "2026-11-30T01:00:00Z"}' },
      { namespace: "a", raw: "nope" },
      { namespace: "b", raw: "nope either" },
    ]);
    await expectSignatureOfItsRows(lake);
  });
});

describe("a segment landed in part by a lakeswap that keyed every namespace's dead letters alike", () => {
  // The state that older lakeswap left, retrying forever: namespace a's dead letters stored at the segment's dead-letter
  // key and counted in the tally; b's refused ("already exists with 2 rows, not the 1"). After the upgrade the segment
  // lands b's, and a's neither twice nor again in the tally.
  it("lands the rest of it, nothing twice", async () => {
    const { lake, service, walDir } = await setup();
    await post(service, "a", ["bad 1", "bad 2"]);
    await post(service, "b", ["bad 3"]);
    const walId = readFileSync(path.join(walDir, "id"), "utf8").trim();
    const segment = `${walId}-000000000001`;
    // What the older lakeswap stored and counted for a: its two dead letters, at the key of (segment, pipeline, partition).
    const received = new Date().toISOString();
    const dir = await mkdtemp(path.join(os.tmpdir(), "lakeswap-old-"));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const file = path.join(dir, "a.jsonl");
    writeFileSync(file, ["bad 1", "bad 2"].map((raw, i) => JSON.stringify({ namespace: "a", received_at: received, reason: "not valid JSON", raw, segment, line: i + 1 })).join("\n"));
    const delivery = await lake.landing.land({ files: [file], format: "jsonl", header: false, delimiter: ",", columns: [...EVENT_DEAD_LETTER_COLUMNS], partition: DEAD_LETTER_PARTITION, signatureColumns: EVENT_DEAD_LETTER_COLUMNS.map((c) => c.name) });
    try {
      const table = await lake.table("events");
      const files = await lake.landing.writeLandedFiles({ table, delivery, dir });
      await registerLanded(lake, "events", { collector: walId, sequence: 1 }, segment, delivery, files);
    } finally {
      await lake.landing.releaseLanding(delivery);
    }
    const [report] = await service.flush();
    expect(report).toMatchObject({ segment, deadLettered: 3 });
    expect(await rowsOf(lake, "SELECT namespace, raw FROM events ORDER BY namespace, line")).toEqual([
      { namespace: "a", raw: "bad 1" },
      { namespace: "a", raw: "bad 2" },
      { namespace: "b", raw: "bad 3" },
    ]);
    await expectSignatureOfItsRows(lake);
  });
});

describe("a segment whose file's key holds other rows", () => {
  // An "already exists with other rows" failed the segment on every retry, and since segments land in order nothing
  // after it ever landed: the log filled and every request got 503. It is reported as the defect it is now, and the
  // collector goes on.
  it("is moved out of the log to its quarantine folder, reported in the log, /healthz and /metrics, and the segments after it land", async () => {
    const { lake, service, walDir, logged, metrics } = await setup();
    await post(service, "a", ['{"id": 1, "ts": "2026-11-30T01:00:00Z"}', '{"id": 2, "ts": "2026-11-30T02:00:00Z"}']);
    const walId = readFileSync(path.join(walDir, "id"), "utf8").trim();
    const segment = `${walId}-000000000001`;
    // Another collector's file (one row) where this segment's file of a's partition goes.
    const dir = await mkdtemp(path.join(os.tmpdir(), "lakeswap-other-"));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const file = path.join(dir, "other.jsonl");
    writeFileSync(file, '{"id": 9, "ts": "2026-11-30T03:00:00Z"}\n');
    const table = namespaceTable(namespace("a"));
    const delivery = await lake.landing.land({ files: [file], format: "jsonl", header: false, delimiter: ",", columns: [...namespace("a").columns, { name: "extra", type: "VARCHAR", nullable: true }], partition: PARTITION, signatureColumns: table.columns.map((c) => c.name), absentFields: "null" });
    try {
      const files = await lake.landing.writeLandedFiles({ table: await lake.table("a"), delivery, dir });
      // Registered by another collector, at the key in the partition's run where this segment's file goes.
      await registerLanded(lake, "a", { collector: "another", sequence: 1 }, segment, delivery, files);
    } finally {
      await lake.landing.releaseLanding(delivery);
    }
    const [report] = await service.flush();
    expect(report).toMatchObject({ segment, quarantined: path.join(walDir, "quarantine", `${segment}.sealed`) });
    expect(readFileSync(report!.quarantined!).length).toBeGreaterThan(0);
    expect(logged.join("\n")).toMatch(new RegExp(`DEFECT: segment ${segment} cannot land: .*already exists with 1 rows, not the 2 this segment holds`));
    // The next segment lands.
    await post(service, "b", ['{"id": 3, "ts": "2026-11-30T01:00:00Z"}']);
    const [next] = await service.flush();
    expect(next).toMatchObject({ written: 1 });
    expect(await rowsOf(lake, "SELECT CAST(id AS VARCHAR) AS id FROM b")).toEqual([{ id: "3" }]);
    const health = service.health();
    expect(health.detail).toMatchObject({ quarantinedSegments: 1, quarantined: [{ segment, file: report!.quarantined, reason: expect.stringContaining("already exists with 1 rows") }] });
    expect(await metrics.render()).toMatch(/lakeswap_ingest_segments_quarantined_total\{pipeline="events"\} 1/);
  });
});

describe("a segment landed again after a failure between its registration and its removal from the log", () => {
  // A tally that counted a retried segment twice kept the event count of the files right (each file is stored once) and
  // doubled the partition's rows and lane sums: its signature then matched no content, and a sync built on it.
  it("leaves each partition's tally and signature those of landing its events once, dead letters of every namespace included", async () => {
    const b = await embeddedBackend();
    const walDir = await mkdtemp(path.join(os.tmpdir(), "lakeswap-wal-"));
    const lake = await b.open();
    const service = await Collector.open({ pipeline: pipelineOf(walDir), lake, deadLetterLake: lake, metrics: new Metrics(), log: () => undefined });
    cleanups.push(async () => {
      delete process.env.LAKESWAP_FAULT;
      await service.close().catch(() => undefined);
      await lake.close();
      await b.cleanup();
      await rm(walDir, { recursive: true, force: true });
    });
    const good = ['{"id": 1, "ts": "2026-11-30T01:00:00Z"}', '{"id": 2, "ts": "2026-11-30T02:00:00Z"}', '{"id": 3, "ts": "2026-12-01T02:00:00Z"}'];
    await post(service, "a", [...good, "bad a"]);
    await post(service, "b", ["bad b1", "bad b2"]);
    process.env.LAKESWAP_FAULT = "ingest-after-register:error";
    await expect(service.flush()).rejects.toThrow("fault injected at ingest-after-register");
    delete process.env.LAKESWAP_FAULT;
    const [again] = await service.flush();
    expect(again).toMatchObject({ written: 3, deadLettered: 3 });

    // Namespace a: its partitions against its events landed once.
    const dir = await mkdtemp(path.join(os.tmpdir(), "lakeswap-once-"));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const file = path.join(dir, "a.jsonl");
    writeFileSync(file, `${good.join("\n")}\n`);
    const table = namespaceTable(namespace("a"));
    const once = await lake.landing.land({ files: [file], format: "jsonl", header: false, delimiter: ",", columns: [...namespace("a").columns, { name: "extra", type: "VARCHAR", nullable: true }], partition: PARTITION, signatureColumns: table.columns.map((c) => c.name), absentFields: "null" });
    try {
      expect(once.partitions).toHaveLength(2);
      for (const partition of once.partitions) {
        expect((await lake.pointer("a", partition.partition))?.signature).toBe(partition.signature);
        const tally = JSON.parse(readFileSync(path.join(b.lakeDir, ingestTallyKey("a", partition.partition)), "utf8")) as { rows: number; upper: string; lower: string };
        expect({ rows: tally.rows, upper: tally.upper, lower: tally.lower }).toEqual({ rows: partition.rows, upper: partition.lanes!.upper, lower: partition.lanes!.lower });
      }
    } finally {
      await lake.landing.releaseLanding(once);
    }
    expect(await rowsOf(lake, "SELECT count(*)::INTEGER AS n FROM a")).toEqual([{ n: 3 }]);
    // The dead-letter table: three rows, and a signature that is theirs.
    expect(await rowsOf(lake, "SELECT count(*)::INTEGER AS n FROM events")).toEqual([{ n: 3 }]);
    await expectSignatureOfItsRows(lake);
  });
});
