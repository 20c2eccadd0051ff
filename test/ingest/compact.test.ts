import { writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { IngestPipelineConfig } from "../../src/config/ingest-config.js";
import { Collector } from "../../src/ingest/collector.js";
import { Metrics } from "../../src/ingest/metrics.js";
import type { Lake } from "../../src/lake/lake.js";
import { compactTables } from "../../src/lake/operations/compact.js";
import { collectGarbage } from "../../src/lake/operations/gc.js";
import { listRunFiles } from "../../src/lake/runs.js";
import { runLocation } from "../../src/lake/layout.js";
import { parsePartitionPath, partitionPath } from "../../src/model/partition.js";
import { ingestPipeline } from "../support/ingest-pipeline.js";
import { awsBackend, embeddedBackend, ownAwsBackend, runCli, spawnCli, tempDir, type TestBackend } from "../support/lake-fixture.js";
import { openEmbeddedLake } from "../../src/open/open-lake.js";
import { readCatalogFile, readGlob } from "../support/plain-reader.js";
import { Child, spawnScript, until } from "../support/crash-kit.js";
import { namespaceTable } from "../../src/ingest/segment-lander.js";
import { runFileName } from "../../src/engine/duckdb-file-access.js";
import { runMain } from "../support/main-cli.js";

const DAYS = ["2026-11-29", "2026-11-30"];

function pipelineOf(walDir: string): IngestPipelineConfig {
  return ingestPipeline(walDir, [
    { name: "event_id", type: "VARCHAR", nullable: false },
    { name: "amount", type: "DECIMAL(10,2)", nullable: true },
    { name: "ts", type: "TIMESTAMPTZ", nullable: false },
    { name: "marker", type: "INTEGER", nullable: true },
  ]);
}

/** `count` events of the given days (in turn), ids from `from`. */
function events(from: number, count: number, days: readonly string[] = DAYS): Buffer {
  const lines = Array.from({ length: count }, (_, k) => {
    const i = from + k;
    return JSON.stringify({ event_id: `e${i}`, marker: 1, amount: (i % 1000) / 4, ts: `${days[i % days.length]}T${String(i % 24).padStart(2, "0")}:${String(i % 60).padStart(2, "0")}:00Z` });
  });
  return Buffer.from(lines.join("\n"));
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface Setup {
  readonly backend: TestBackend;
  readonly lake: Lake;
  /** Posts events and lands them as one segment of their own (one more file in each day they touch). */
  land(from: number, count: number, days?: readonly string[]): Promise<void>;
  count(of?: Lake): Promise<number>;
  /** Each day's current run, signature and number of files. */
  days(of?: Lake): Promise<{ day: string; runId: string; signature: string | undefined; files: number }[]>;
}

async function setup(backend: () => Promise<TestBackend>, segments: number): Promise<Setup> {
  const b = await backend();
  const walDir = await mkdtemp(path.join(os.tmpdir(), "lakeswap-wal-"));
  const lake = await b.open();
  const collector = await Collector.open({ pipeline: pipelineOf(walDir), lake, deadLetterLake: lake, metrics: new Metrics(), log: () => undefined });
  cleanups.push(async () => {
    await collector.close().catch(() => undefined);
    await lake.close();
    await b.cleanup();
    await rm(walDir, { recursive: true, force: true });
  });
  const land = async (from: number, count: number, days?: readonly string[]) => {
    await collector.accept({ pipeline: "events", namespace: "pageviews", body: events(from, count, days), format: "ndjson" });
    await collector.flush();
  };
  const count = async (of: Lake = lake) => Number((await of.query("SELECT count(*) FROM pageviews")).rows[0]?.[0]);
  const days = async (of: Lake = lake) => {
    const table = await of.table("pageviews");
    const pointers = await of.parts.catalog.listPointers(table);
    return Promise.all(
      pointers.map(async (p) => ({
        day: partitionPath(p.partition),
        runId: p.runId,
        signature: p.signature,
        files: (await listRunFiles(of.parts.store, runLocation(of.parts.catalog, table, p.partition, p.runId))).length,
      })),
    );
  };
  for (let segment = 0; segment < segments; segment += 1) await land(segment * 50, 50);
  return { backend: b, lake, land, count, days };
}

describe.each([
  ["embedded", embeddedBackend],
  ["aws", awsBackend],
] as const)("compaction on the %s lake", (_name, backend) => {
  it("rewrites each closed day of many segment files into one run with the same rows and signature, and readers see the same count throughout", async () => {
    const s = await setup(backend, 12);
    const before = await s.days();
    expect(before.map((d) => d.files)).toEqual([12, 12]);
    const reader = await s.backend.open({ readOnly: true });
    cleanups.push(() => reader.close());
    const seen: number[] = [];
    let reading = true;
    const loop = (async () => {
      while (reading) seen.push(await s.count(reader));
    })();
    const reports = await compactTables(s.lake, "pageviews", { olderThanMs: 0 });
    reading = false;
    await loop;
    expect(reports.map((r) => [r.partition, r.status, r.files, r.filesAfter, r.rows])).toEqual([
      ["day=2026-11-29", "compacted", 12, 1, 300],
      ["day=2026-11-30", "compacted", 12, 1, 300],
    ]);
    expect(seen.length).toBeGreaterThan(0);
    expect(new Set(seen)).toEqual(new Set([600]));
    const after = await s.days();
    expect(after.map((d) => d.files)).toEqual([1, 1]);
    // The same content: the signature did not move, and a new reader counts the same.
    expect(after.map((d) => d.signature)).toEqual(before.map((d) => d.signature));
    expect(after.map((d) => d.runId)).toEqual(reports.map((r) => r.runId));
    expect(await s.count(reader)).toBe(600);

    // Compacted already, and open (events just added): both left as they are.
    expect((await compactTables(s.lake, "pageviews", { olderThanMs: 0 })).map((r) => r.reason)).toEqual(["compact already: one file", "compact already: one file"]);
    await s.land(600, 10, ["2026-11-30"]);
    const open = await compactTables(s.lake, "pageviews", { olderThanMs: 3_600_000 });
    expect(open.map((r) => r.status)).toEqual(["skipped", "skipped"]);
    expect(open[1]?.reason).toMatch(/^open: events were added 0 min ago/);

    // The late events landed beside the compacted file, in the new run, and count once; the day's signature is that of all its rows.
    const late = await s.days();
    expect(late.map((d) => [d.runId, d.files])).toEqual([
      [after[0]!.runId, 1],
      [after[1]!.runId, 2],
    ]);
    expect(await s.count()).toBe(610);
    expect(late[1]!.signature).not.toBe(after[1]!.signature);
    const again = await compactTables(s.lake, "pageviews", { olderThanMs: 0 });
    expect(again.map((r) => r.status)).toEqual(["skipped", "compacted"]);
    expect((await s.days())[1]!.signature).toBe(late[1]!.signature);
    expect(await s.count()).toBe(610);
  });

  it("starts a day over under a new run id when another writer took the id it issued (that writer's file left as it was)", async () => {
    const s = await setup(backend, 4);
    const before = await s.days();
    const taken: string[] = [];
    const landing = s.lake.parts.landing;
    // Another compaction of the day, which read the same run and issued the same id, placed its file first.
    const racing = Object.create(landing, {
      compactRun: {
        value: async (request: Parameters<typeof landing.compactRun>[0]) => {
          const staged = await landing.compactRun(request);
          if (taken.length === 0) {
            taken.push(`${request.runPrefix}${runFileName(request.runId)}`);
            await s.lake.parts.store.put(taken[0]!, "another writer's file");
          }
          return staged;
        },
      },
    }) as typeof landing;
    const reports = await compactTables({ parts: { ...s.lake.parts, landing: racing } }, "pageviews", { olderThanMs: 0 });
    expect(reports.map((r) => [r.partition, r.status, r.filesAfter])).toEqual([
      ["day=2026-11-29", "compacted", 1],
      ["day=2026-11-30", "compacted", 1],
    ]);
    expect(taken[0]!.includes(reports[0]!.runId!)).toBe(false);
    expect(new TextDecoder().decode((await s.lake.parts.store.get(taken[0]!))?.body)).toBe("another writer's file");
    expect((await s.days()).map((d) => [d.files, d.signature])).toEqual(before.map((d) => [1, d.signature]));
    expect(await s.count()).toBe(200);
  });

  it("leaves the replaced runs to GC, which removes them once the grace window has passed, and never the current run", async () => {
    const s = await setup(backend, 5);
    const [report] = await compactTables(s.lake, "pageviews", { olderThanMs: 0, partitions: ["day=2026-11-29"] });
    expect(report).toMatchObject({ status: "compacted", files: 5, filesAfter: 1 });
    const within = await collectGarbage(s.lake, "pageviews", {});
    expect(within.flatMap((r) => r.removed)).toEqual([]);
    const kept = within.find((r) => r.partition === "day=2026-11-29")?.kept ?? [];
    expect(kept.find((k) => k.runId === report!.runId)?.reason).toBe("current");
    // Made seconds ago and replaced just now: kept on both counts.
    expect(kept.find((k) => k.runId === report!.previousRunId)?.reason).toMatch(/^(within grace window|replaced within grace window)$/);
    const past = await collectGarbage(s.lake, "pageviews", { graceMs: 0 });
    expect(past.flatMap((r) => r.removed.map((run) => [r.partition, run.runId]))).toEqual([["day=2026-11-29", report!.previousRunId]]);
    const table = await s.lake.table("pageviews");
    const everything = await s.lake.parts.store.list("pageviews/");
    expect(everything.filter((o) => o.key.endsWith(".parquet")).length).toBe(1 + 5);
    expect(await listRunFiles(s.lake.parts.store, runLocation(s.lake.parts.catalog, table, parsePartitionPath("day=2026-11-29", ["day"]), report!.previousRunId!))).toEqual([]);
    expect(await s.count()).toBe(250);
  });

  it("refuses a day whose files do not carry its signature (a file stored but never counted), and changes nothing of it", async () => {
    const s = await setup(backend, 4);
    const table = await s.lake.table("pageviews");
    const [day] = await s.days();
    const prefix = runLocation(s.lake.parts.catalog, table, parsePartitionPath(day!.day, ["day"]), day!.runId);
    const [first] = await listRunFiles(s.lake.parts.store, prefix);
    // What a landing killed between storing its file and counting it leaves behind.
    await s.lake.parts.store.copy(first!.key, `${prefix}uncounted.parquet`, first!.size);
    const reports = await compactTables(s.lake, "pageviews", { olderThanMs: 0 });
    expect(reports[0]).toMatchObject({ status: "refused", files: 5 });
    expect(reports[0]?.reason).toMatch(/its 5 files hold 125 rows with signature .*, and its tally counts 100 rows with signature .*: a landing may have been interrupted/);
    expect(reports[1]).toMatchObject({ status: "compacted" });
    expect((await s.days())[0]).toEqual({ ...day, files: 5 });
  });
});

describe("compaction racing the collector", () => {
  it("starts a day over when a segment lands in it while it is rewritten, and loses or doubles nothing", async () => {
    const s = await setup(embeddedBackend, 6);
    const landing = s.lake.parts.landing;
    const compactRun = landing.compactRun.bind(landing);
    let raced = false;
    landing.compactRun = async (request) => {
      const staged = await compactRun(request);
      if (!raced) {
        raced = true;
        await s.land(1000, 20, ["2026-11-29"]);
      }
      return staged;
    };
    const reports = await compactTables(s.lake, "pageviews", { olderThanMs: 0, partitions: ["day=2026-11-29"] });
    expect(reports).toMatchObject([{ status: "compacted", files: 7, filesAfter: 1, rows: 170 }]);
    expect(await s.count()).toBe(320);
    const rows = await s.lake.query("SELECT count(DISTINCT event_id) FROM pageviews");
    expect(Number(rows.rows[0]?.[0])).toBe(320);
  });
});

describe.each([
  ["embedded", embeddedBackend],
  ["aws", awsBackend],
] as const)("lakeswap compact on the %s lake, killed", (_name, backend) => {
  for (const point of ["compact-after-place", "compact-after-tally", "compact-after-move"]) {
    it(`at ${point}: readers keep every row once, and the next compact, landing and GC finish it`, async () => {
      const s = await setup(backend, 4);
      const before = await s.days();
      const killed = await runCli(["compact", "pageviews", "--older-than", "0", ...s.backend.cliArgs], { ...s.backend.cliEnv, LAKESWAP_FAULT: `${point}:kill` });
      expect(killed.signal, killed.stderr).toBe("SIGKILL");
      const reader = await s.backend.open({ readOnly: true });
      cleanups.push(() => reader.close());
      expect(await s.count(reader)).toBe(200);
      const rerun = await runMain(["compact", "pageviews", "--older-than", "0", "--json", ...s.backend.cliArgs], s.backend.cliEnv);
      expect(rerun.code, rerun.stderr).toBe(0);
      const after = await s.days();
      expect(after.map((d) => d.files)).toEqual([1, 1]);
      expect(after.map((d) => d.signature)).toEqual(before.map((d) => d.signature));
      await s.land(5000, 30);
      await collectGarbage(s.lake, "pageviews", { graceMs: 0 });
      expect(await s.count()).toBe(230);
      expect((await s.days()).map((d) => d.files)).toEqual([2, 2]);
      const objects = (await s.lake.parts.store.list("pageviews/")).filter((o) => o.key.endsWith(".parquet"));
      expect(objects.length).toBe(4);
    });
  }
});

describe("compaction and plain readers of the embedded lake", () => {
  it("moves the catalog file's view and the documented glob to the new run, and GC leaves both reading every row once", async () => {
    const s = await setup(embeddedBackend, 6);
    const { lakeDir } = s.backend as TestBackend & { lakeDir: string };
    const plain = async () => ({
      catalog: Number((await readCatalogFile(lakeDir, "SELECT count(*) FROM lake.pageviews"))[0]?.[0]),
      glob: Number((await readGlob(lakeDir, "pageviews", 1, "SELECT count(*) FROM {table}"))[0]?.[0]),
    });
    expect(await plain()).toEqual({ catalog: 300, glob: 300 });
    await compactTables(s.lake, "pageviews", { olderThanMs: 0 });
    expect(await plain()).toEqual({ catalog: 300, glob: 300 });
    await collectGarbage(s.lake, "pageviews", { graceMs: 0 });
    expect(await plain()).toEqual({ catalog: 300, glob: 300 });
  });

  // A registration keeps its run (a segment adds a file to it) and changes only the signature: the view's fingerprint
  // once named runs alone, so a view left stale by a writer killed after its move was never rewritten by the next one.
  it("rewrites a view left stale by a writer killed between a registration's move and the view's rewrite", async () => {
    const s = await setup(embeddedBackend, 1);
    const { lakeDir } = s.backend as TestBackend & { lakeDir: string };
    const table = await s.lake.table("pageviews");
    const [pointer] = await s.lake.parts.catalog.listPointers(table);
    const prefix = runLocation(s.lake.parts.catalog, table, pointer!.partition, pointer!.runId);
    const [file] = await listRunFiles(s.lake.parts.store, prefix);
    // What such a writer leaves: a file added to the run and the pointer's move, without the view's rewrite.
    await s.lake.parts.store.copy(file!.key, `${prefix}late.parquet`, file!.size);
    await s.lake.parts.catalog.movePointers(table, [{ partition: pointer!.partition, runId: pointer!.runId, location: prefix, previousRunId: pointer!.previousRunId, signature: "v3:0", kind: "swap" }]);
    expect(Number((await readCatalogFile(lakeDir, "SELECT count(*) FROM lake.pageviews"))[0]?.[0])).toBe(50);
    // The next command that holds the table's lease (here GC, which moves nothing) brings the view up to date.
    await collectGarbage(s.lake, "pageviews", {});
    expect(Number((await readCatalogFile(lakeDir, "SELECT count(*) FROM lake.pageviews"))[0]?.[0])).toBe(75);
  });
});

describe("compaction read by plain DuckDB processes", () => {
  let readers: Child[] = [];
  afterEach(async () => {
    for (const reader of readers) reader.kill("SIGKILL");
    await Promise.all(readers.map((reader) => reader.exited));
    readers = [];
  });

  it("of 30 days of 6 files each: every read of lake.duckdb from another process sees every row once, and so does every glob read that does not need a retry", async () => {
    const days = Array.from({ length: 30 }, (_, i) => `2026-10-${String(i + 1).padStart(2, "0")}`);
    const s = await setup(embeddedBackend, 0);
    for (let segment = 0; segment < 6; segment += 1) await s.land(segment * 60, 60, days);
    const { lakeDir } = s.backend as TestBackend & { lakeDir: string };
    const start = (mode: string): Child => spawnScript("catalog-reader-loop.ts", ["--mode", mode, "--lake", lakeDir, "--tables", "pageviews"]);
    readers = [start("catalog"), start("glob")];
    for (const reader of readers) await reader.until("the reader's first read", () => reader.lines.length > 0, 60_000);
    const from = Date.now();
    const reports = await compactTables(s.lake, "pageviews", { olderThanMs: 0 });
    const to = Date.now();
    expect(reports.map((r) => `${r.status} ${r.files}>${r.filesAfter}`)).toEqual(days.map(() => "compacted 6>1"));
    for (const reader of readers) {
      await reader.until("a read after the compaction", () => (JSON.parse(reader.lines.at(-1)!) as { start: number }).start > to, 60_000);
      reader.process.stdin?.end();
      expect(await reader.exited).toEqual({ code: 0, signal: null });
    }
    for (const [name, reader] of [["lake.duckdb", readers[0]!], ["the glob", readers[1]!]] as const) {
      const reads = reader.json<{ start: number; end: number; rows?: number; error?: string }>();
      // The glob lists a day's files through its link and opens them after: one that overlaps the link's move may fail
      // with "Cannot open file" (documented: retry it); a read that succeeds sees every row once, as every read of lake.duckdb does.
      const failed = reads.filter((r) => r.error !== undefined);
      if (name === "lake.duckdb") expect(failed, `failed reads of ${name}`).toEqual([]);
      else for (const read of failed) expect(read.error).toMatch(/Cannot open file/);
      expect(reads.filter((r) => r.error === undefined && r.rows !== 360), `reads of ${name} that did not see the 360 rows`).toEqual([]);
      expect(reads.filter((r) => r.error === undefined && r.end >= from && r.start <= to).length, `reads of ${name} during the compaction`).toBeGreaterThan(0);
    }
    expect((await s.days()).map((d) => d.files)).toEqual(days.map(() => 1));
  });
});

describe("compaction on Glue", () => {
  it("moves each day's partition Location to its compacted run with BatchUpdatePartition, keeping its signature in the Parameters", async () => {
    const s = await setup(ownAwsBackend, 3);
    const services = (s.backend as TestBackend & { services: Awaited<ReturnType<typeof ownAwsBackend>>["services"] }).services;
    const { database, prefix } = (s.backend as TestBackend & { target: { database: string; prefix: string } }).target;
    const before = services.glue.state.partition(database, "pageviews", ["2026-11-29"]);
    const updates = services.glue.callCount("BatchUpdatePartition");
    const [report] = await compactTables(s.lake, "pageviews", { olderThanMs: 0, partitions: ["day=2026-11-29"] });
    expect(services.glue.callCount("BatchUpdatePartition")).toBe(updates + 1);
    const after = services.glue.state.partition(database, "pageviews", ["2026-11-29"]);
    expect(after?.StorageDescriptor?.Location).toBe(`s3://lake/${prefix}/pageviews/day=2026-11-29/run=${report!.runId}/`);
    expect(before?.StorageDescriptor?.Location).toMatch(new RegExp(`/run=${report!.previousRunId}/$`));
    expect(after?.Parameters?.["lakeswap.signature"]).toBe(before?.Parameters?.["lakeswap.signature"]);
    expect(await s.count()).toBe(150);
  });
});

describe("an ingested table from before runs", () => {
  it("keeps writing into its days' folders when a collector of this version opens it, and compact names it and says why", async () => {
    const b = await embeddedBackend();
    cleanups.push(() => b.cleanup());
    const lake = await b.open();
    cleanups.push(() => lake.close());
    const legacy = namespaceTable(pipelineOf("/unused").namespaces[0]!);
    const { ingestRuns: _runs, ...old } = legacy;
    await lake.parts.catalog.createTable(old);
    const walDir = await mkdtemp(path.join(os.tmpdir(), "lakeswap-wal-"));
    cleanups.push(() => rm(walDir, { recursive: true, force: true }));
    const collector = await Collector.open({ pipeline: pipelineOf(walDir), lake, deadLetterLake: lake, metrics: new Metrics(), log: () => undefined });
    cleanups.push(() => collector.close());
    await collector.accept({ pipeline: "events", namespace: "pageviews", body: events(0, 20), format: "ndjson" });
    await collector.flush();
    expect((await lake.table("pageviews")).ingestRuns).toBeUndefined();
    const objects = (await lake.parts.store.list("pageviews/")).map((o) => o.key).filter((k) => k.endsWith(".parquet"));
    expect(objects).toHaveLength(2);
    for (const key of objects) expect(key).toMatch(/^pageviews\/day=2026-11-(29|30)\/[^/]+\.parquet$/);
    expect(Number((await lake.query("SELECT count(*) FROM pageviews")).rows[0]?.[0])).toBe(20);
    await expect(compactTables(lake, "pageviews", { olderThanMs: 0 })).rejects.toThrow(/table 'pageviews' was ingested by a lakeswap from before ingested tables kept runs/);
    const all = await compactTables(lake, undefined, { olderThanMs: 0 });
    expect(all.find((r) => r.table === "pageviews")).toMatchObject({ status: "skipped", reason: expect.stringMatching(/^the table was ingested by a lakeswap from before/) });
  });
});

describe("lakeswap compact (CLI)", () => {
  it("reports each day in --json and in text, says what it would do with --dry-run, and exits 7 naming a refused day", async () => {
    const s = await setup(embeddedBackend, 3);
    const args = ["compact", "pageviews", "--older-than", "0", ...s.backend.cliArgs];
    const dry = await runMain([...args, "--dry-run", "--json"]);
    expect(dry.code, dry.stderr).toBe(0);
    expect(JSON.parse(dry.stdout)).toMatchObject({ dryRun: true, compacted: 2, partitions: [{ partition: "day=2026-11-29", status: "would compact", files: 3 }, { status: "would compact" }] });
    expect((await s.days()).map((d) => d.files)).toEqual([3, 3]);
    const table = await s.lake.table("pageviews");
    const [day] = await s.days();
    const prefix = runLocation(s.lake.parts.catalog, table, parsePartitionPath(day!.day, ["day"]), day!.runId);
    const [first] = await listRunFiles(s.lake.parts.store, prefix);
    await s.lake.parts.store.copy(first!.key, `${prefix}uncounted.parquet`, first!.size);
    const text = await runMain(args);
    expect(text.code).toBe(7);
    expect(text.stdout).toMatch(/^compact: compacted 1 of 2 partition\(s\), 3 files into 1; refused 1/);
    expect(text.stdout).toMatch(/day=2026-11-30\s+compacted\s+3\s+1\s+75/);
    expect(text.stderr).toMatch(/1 partition\(s\) were not compacted, their files left as they are: pageviews\/day=2026-11-29: its 4 files hold 100 rows/);
    const bad = await runMain([...args, "--target-size", "huge"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--target-size: 'huge' is not a size/);
    const noTable = await runMain(["compact", "--partition", "day=2026-11-29", ...s.backend.cliArgs]);
    expect(noTable.code).toBe(2);
    expect(noTable.stderr).toMatch(/--partition names partitions of one table: name the table too/);
  });
});

describe("the collector's own compaction (compact: {after, target_size})", () => {
  it("compacts the closed days of its namespaces' and dead-letter tables between landings, on its timer, and logs what it did", async () => {
    const b = await embeddedBackend();
    const walDir = await mkdtemp(path.join(os.tmpdir(), "lakeswap-wal-"));
    const lake = await b.open();
    const logged: string[] = [];
    const pipeline = { ...pipelineOf(walDir), compact: { afterMs: 1, fileBytes: 64 * 1024 * 1024 } };
    const collector = await Collector.open({ pipeline, lake, deadLetterLake: lake, metrics: new Metrics(), log: (line) => logged.push(line) });
    cleanups.push(async () => {
      await collector.close().catch(() => undefined);
      await lake.close();
      await b.cleanup();
      await rm(walDir, { recursive: true, force: true });
    });
    for (let segment = 0; segment < 4; segment += 1) {
      await collector.accept({ pipeline: "events", namespace: "pageviews", body: Buffer.concat([events(segment * 10, 10), Buffer.from("\nnot json")]), format: "ndjson" });
      await collector.flush();
    }
    const files = async (table: string) => {
      const definition = await lake.table(table);
      const pointers = await lake.parts.catalog.listPointers(definition);
      return Promise.all(pointers.map(async (p) => (await listRunFiles(lake.parts.store, runLocation(lake.parts.catalog, definition, p.partition, p.runId))).length));
    };
    expect(await files("pageviews")).toEqual([4, 4]);
    expect((await files("events")).reduce((a, b) => a + b, 0)).toBe(4);
    // On its timer: the landing finds nothing to land, and the compaction that is due runs in its turn.
    collector.start(10);
    await until("the collector's compaction", () => logged.filter((line) => line.startsWith("compacted ")).length === 3, 30_000);
    expect([...(await files("pageviews")), ...(await files("events"))]).toEqual([1, 1, 1]);
    expect(logged.filter((line) => line.startsWith("compacted ")).sort()).toEqual([
      expect.stringMatching(/^compacted events\/p_year=\d+\/p_month=\d+\/p_day=\d+: 4 files into 1$/),
      "compacted pageviews/day=2026-11-29: 4 files into 1",
      "compacted pageviews/day=2026-11-30: 4 files into 1",
    ]);
    expect(Number((await lake.query("SELECT count(*) FROM pageviews")).rows[0]?.[0])).toBe(40);
    expect(Number((await lake.query("SELECT count(*) FROM events")).rows[0]?.[0])).toBe(4);
    // Asked for directly: nothing left to do.
    expect((await collector.compact()).map((r) => r.status)).toEqual(["skipped", "skipped", "skipped"]);
  });
});

describe("two lakeswap compact processes at once", () => {
  it("compact each of 10 days once between them, every row kept once, and GC leaves one run per day", async () => {
    const days = Array.from({ length: 10 }, (_, i) => `2026-10-${String(i + 1).padStart(2, "0")}`);
    const s = await setup(embeddedBackend, 0);
    for (let segment = 0; segment < 5; segment += 1) await s.land(segment * 40, 40, days);
    const args = ["compact", "pageviews", "--older-than", "0", "--json", ...s.backend.cliArgs];
    const [a, b] = await Promise.all([runCli(args, s.backend.cliEnv), runCli(args, s.backend.cliEnv)]);
    expect([a.code, b.code], `${a.stderr}\n${b.stderr}`).toEqual([0, 0]);
    const reports = [a, b].flatMap((r) => (JSON.parse(r.stdout) as { partitions: { partition: string; status: string }[] }).partitions);
    // Each day compacted by one of them; the other found it compact already, or saw it change under it and found it so the next time.
    for (const day of days) expect(reports.filter((r) => r.partition === `day=${day}` && r.status === "compacted"), day).toHaveLength(1);
    expect((await s.days()).map((d) => d.files)).toEqual(days.map(() => 1));
    expect(await s.count()).toBe(200);
    await collectGarbage(s.lake, "pageviews", { graceMs: 0 });
    const objects = (await s.lake.parts.store.list("pageviews/")).filter((o) => o.key.endsWith(".parquet"));
    expect(objects).toHaveLength(10);
    expect(await s.count()).toBe(200);
  });
});

describe("lakeswap compact beside a running lakeswap serve", () => {
  let server: Child | undefined;
  afterEach(async () => {
    server?.process.kill("SIGKILL");
    await server?.exited;
    server = undefined;
  });

  it("while clients post to the days it compacts: every acknowledged event is in the table once", async () => {
    const { dir, cleanup } = tempDir("lakeswap-compact-serve-");
    cleanups.push(async () => cleanup());
    const config = path.join(dir, "lakeswap.yaml");
    writeFileSync(config, ["pipelines:", "  events:", "    namespaces:", "      clicks:", "        columns: {event_id: {type: VARCHAR, nullable: false}, ts: {type: TIMESTAMPTZ, nullable: false}}", "        time: {field: ts}", "    wal: {dir: ./wal, segment_max_age: 300ms}", "lake: ./lake", ""].join("\n"));
    // Its landing at the requests' priority (--background-nice 0): the suite's other workers would starve a lowered one.
    server = new Child(spawnCli(["serve", "-c", config, "--port", "0", "--host", "127.0.0.1", "--flush-interval", "20", "--background-nice", "0"], {}, { cwd: dir }));
    const url = await until("the collector to listen", () => /collecting .* on (http:\/\/\S+)/.exec(server!.stderr)?.[1], 60_000);
    // Each day's events share one time (10:00 UTC); what the lake holds per day, read as any reader would.
    const landed = async (): Promise<Map<string, { files: number; rows: number }>> => {
      const lake = await openEmbeddedLake(path.join(dir, "lake"), { readOnly: true });
      try {
        if (!(await lake.parts.catalog.listTables()).some((t) => t.name === "clicks")) return new Map();
        const table = await lake.table("clicks");
        const found = new Map<string, { files: number; rows: number }>();
        for (const pointer of await lake.parts.catalog.listPointers(table)) {
          const files = await listRunFiles(lake.parts.store, runLocation(lake.parts.catalog, table, pointer.partition, pointer.runId));
          found.set(pointer.partition.values[pointer.partition.keys.indexOf("p_day")]!.padStart(2, "0"), { files: files.length, rows: 0 });
        }
        for (const [ts, rows] of (await lake.query("SELECT strftime(ts AT TIME ZONE 'UTC', '%d'), count(*) FROM clicks GROUP BY ALL")).rows) {
          found.set(String(ts), { files: found.get(String(ts))?.files ?? 0, rows: Number(rows) });
        }
        return found;
      } finally {
        await lake.close();
      }
    };
    let accepted = 0;
    const acceptedOn = new Map<string, number>();
    let posting = true;
    // A request every 50 ms: days 01-03 until days 02 and 03 have landed over several segments each; then days 01 and
    // 04 only: 02 and 03 are closed. The rounds of compaction wait for landings, not for answers: a loaded collector
    // answers (its log is durable) well ahead of what it has landed.
    let closed = false;
    let batchesSinceClosed = 0;
    const clients = (async () => {
      for (let batch = 0; posting; batch += 1) {
        const days = closed ? ["01", "04"] : ["01", "02", "03"];
        await new Promise((resolve) => setTimeout(resolve, 50));
        const lines = Array.from({ length: 20 }, (_, k) => JSON.stringify({ event_id: `b${batch}-${k}`, ts: `2026-11-${days[k % days.length]}T10:00:00Z` }));
        const answer = await fetch(`${url}/v1/events/clicks`, { method: "POST", headers: { "content-type": "application/x-ndjson" }, body: lines.join("\n") });
        expect(answer.status).toBe(200);
        expect(((await answer.json()) as { accepted: number }).accepted).toBe(lines.length);
        accepted += lines.length;
        for (let k = 0; k < lines.length; k += 1) acceptedOn.set(days[k % days.length]!, (acceptedOn.get(days[k % days.length]!) ?? 0) + 1);
        if (closed) batchesSinceClosed += 1;
      }
    })();
    cleanups.push(() => clients.catch(() => undefined));
    await until("days 02 and 03 to land in several files", async () => {
      const now = await landed();
      return ["02", "03"].every((day) => (now.get(day)?.files ?? 0) >= 3);
    }, 60_000, 250);
    closed = true;
    await until("every event of days 02 and 03 to land", async () => {
      if (batchesSinceClosed === 0) return false;
      const now = await landed();
      return ["02", "03"].every((day) => now.get(day)?.rows === acceptedOn.get(day));
    }, 60_000, 250);
    const rounds: { compacted: number; partitions: { partition: string; status: string; reason?: string }[] }[] = [];
    for (let round = 0; round < 3; round += 1) {
      const from = accepted;
      await until("more events to be accepted", () => accepted >= from + 100, 60_000);
      const run = await runCli(["compact", "--older-than", "0", "--json", "-c", config], {}, { cwd: dir });
      expect(run.code, run.stderr).toBe(0);
      rounds.push(JSON.parse(run.stdout) as (typeof rounds)[number]);
    }
    posting = false;
    await clients;
    server.process.kill("SIGTERM");
    expect(await server.exited).toEqual({ code: 0, signal: null });
    server = undefined;
    // The closed days were compacted in the first round (the open ones when they were not changing under it), and
    // stay one file; every acknowledged event is in the table once.
    const statusOf = (round: (typeof rounds)[number], day: string) => round.partitions.find((p) => p.partition.endsWith(`p_day=${day}`));
    for (const day of ["02", "03"]) expect(statusOf(rounds[0]!, day), JSON.stringify(rounds)).toMatchObject({ status: "compacted" });
    const after = await landed();
    expect(["02", "03"].map((day) => after.get(day))).toEqual(["02", "03"].map((day) => ({ files: 1, rows: acceptedOn.get(day) })));
    expect(["01", "04"].map((day) => after.get(day)?.rows)).toEqual(["01", "04"].map((day) => acceptedOn.get(day)));
    const lake = await openEmbeddedLake(path.join(dir, "lake"));
    try {
      const [count, distinct] = (await lake.query("SELECT count(*), count(DISTINCT event_id) FROM clicks")).rows[0]!.map(Number);
      expect({ count, distinct }).toEqual({ count: accepted, distinct: accepted });
    } finally {
      await lake.close();
    }
  });
});

describe("compaction beside a landing in flight", () => {
  // A landing stores its file, then counts it, both under the table's lease; compaction lists a day's files outside
  // it. It once refused a day whose file it listed between the two ("a landing may have been interrupted"), exit 7.
  it("starts the day over once the landing has counted its file, and compacts it with every row", async () => {
    const { dir, cleanup } = tempDir("lakeswap-compact-inflight-");
    cleanups.push(async () => cleanup());
    const config = path.join(dir, "lakeswap.yaml");
    writeFileSync(config, ["pipelines:", "  events:", "    namespaces:", "      clicks:", "        columns: {event_id: {type: VARCHAR, nullable: false}, ts: {type: TIMESTAMPTZ, nullable: false}}", "        time: {field: ts}", "    wal: {dir: ./wal}", "lake: ./lake", ""].join("\n"));
    const file = (n: number) => {
      const name = path.join(dir, `batch-${n}.ndjson`);
      writeFileSync(name, Array.from({ length: 10 }, (_, k) => JSON.stringify({ event_id: `${n}-${k}`, ts: "2026-11-30T10:00:00Z" })).join("\n"));
      return name;
    };
    for (let n = 0; n < 3; n += 1) expect((await runMain(["ingest", "events", file(n), "-c", config], {}, { cwd: dir })).code).toBe(0);
    // The fourth landing stops between storing its file and counting it, holding the lease.
    const landing = new Child(spawnCli(["ingest", "events", file(3), "-c", config], { LAKESWAP_FAULT: "ingest-after-upload:stop" }, { cwd: dir }));
    cleanups.push(async () => {
      landing.process.kill("SIGKILL");
      await landing.exited;
    });
    await landing.untilStopped("ingest-after-upload");
    const lake = await openEmbeddedLake(path.join(dir, "lake"));
    cleanups.push(() => lake.close());
    const compactRun = lake.parts.landing.compactRun.bind(lake.parts.landing);
    let rewrites = 0;
    lake.parts.landing.compactRun = async (request) => {
      rewrites += 1;
      // The day's four files were listed with three counted: the landing goes on now.
      if (rewrites === 1) landing.process.kill("SIGCONT");
      return compactRun(request);
    };
    const reports = await compactTables(lake, "clicks", { olderThanMs: 0 });
    expect(await landing.exited).toEqual({ code: 0, signal: null });
    expect(rewrites).toBe(2);
    expect(reports).toMatchObject([{ status: "compacted", files: 4, filesAfter: 1, rows: 40 }]);
    expect(Number((await lake.query("SELECT count(DISTINCT event_id) FROM clicks")).rows[0]?.[0])).toBe(40);
  });
});
