import { rmSync, writeFileSync } from "node:fs";
import { DeleteObjectCommand, ListObjectsV2Command, S3Client } from "@aws-sdk/client-s3";
import path from "node:path";
import { describe, expect, it } from "vitest";
import type { AwsTarget } from "../../src/config/aws-config.js";
import { loadPipelineConfig } from "../../src/config/pipeline-config.js";
import type { Lake } from "../../src/lake/lake.js";
import { collectGarbage } from "../../src/lake/operations/gc.js";
import { readHistory } from "../../src/lake/operations/history.js";
import { rollbackPartition } from "../../src/lake/operations/rollback.js";
import { Pipeline } from "../../src/pipeline/pipeline.js";
import { lakeDirOf } from "./crash-kit.js";
import { BACKEND_FACTORIES, cloneBackend, selectedBackends, tempDir, type AwsEndpoints, type TestBackend } from "./lake-fixture.js";

// The crash suites run their shared setup once and give each kill point a clone of the lake it made (cloneBackend): a
// clone must read, sync, roll back and collect garbage exactly as its source does, also once its source's files are gone.

/** One dataset of events by day (one table: each step on AWS is a few emulated Athena queries), and its deliveries. */
class Workspace {
  private readonly temp = tempDir("lakeswap-clone-");
  readonly configFile = path.join(this.temp.dir, "lakeswap.yaml");
  private count = 0;

  constructor() {
    writeFileSync(
      this.configFile,
      `datasets:
  events:
    source: {format: csv, path: "*.csv"}
    columns: {event_id: {type: BIGINT, nullable: false}, kind: VARCHAR, ts: TIMESTAMP}
    partition: {day: "strftime(ts, '%Y-%m-%d')"}
`,
    );
  }

  /** A delivery of `perDay` events on each of `days` days. */
  delivery(days: number, perDay: number): string {
    const file = path.join(this.temp.dir, `delivery-${(this.count += 1)}.csv`);
    const rows = Array.from({ length: days * perDay }, (_, i) => `${i},k${this.count},2026-11-0${1 + (i % days)} 10:00:00`);
    writeFileSync(file, `event_id,kind,ts\n${rows.join("\n")}\n`);
    return file;
  }

  pipeline(lake: Lake, file: string): Pipeline {
    return new Pipeline(lake, loadPipelineConfig(this.configFile), { inputs: [file] });
  }

  cleanup(): void {
    this.temp.cleanup();
  }
}

/** What a user sees of a lake: each table's rows per partition, and each partition's runs (run ids made after `known` numbered). */
async function observe(lake: Lake, known: ReadonlySet<string>): Promise<unknown> {
  const fresh = new Map<string, string>();
  const name = (runId: string | undefined): string | undefined =>
    runId === undefined || known.has(runId) ? runId : (fresh.get(runId) ?? fresh.set(runId, `new-${fresh.size + 1}`).get(runId));
  const seen: Record<string, unknown> = {};
  for (const table of (await lake.listTables()).map((t) => t.name).sort()) {
    const rows = await lake.query(`SELECT * FROM ${table}`);
    seen[table] = {
      rows: rows.rows.map((row) => JSON.stringify(row)).sort(),
      history: (await readHistory(lake, table)).map((p) => ({
        partition: p.partition,
        current: name(p.currentRunId),
        runs: p.runs.map((r) => ({ run: name(r.runId), state: r.state, rows: r.rows })),
      })),
    };
  }
  seen.pending = await lake.pendingChanges();
  return seen;
}

/** A sync of a third delivery, a rollback of one partition and a gc, each followed by what the lake shows. */
async function exercise(backend: TestBackend, ws: Workspace, delivery: string, known: ReadonlySet<string>): Promise<unknown[]> {
  const lake = await backend.open({ graceMs: 0 });
  try {
    const steps: unknown[] = [await observe(lake, known)];
    const report = await ws.pipeline(lake, delivery).sync();
    steps.push({ ...report.totals, seconds: undefined }, await observe(lake, known));
    const [first] = await readHistory(lake, "events_raw");
    const rolledBack = await rollbackPartition(lake, "events_raw", first!.partition);
    steps.push(known.has(rolledBack.toRunId), rolledBack.rows, await observe(lake, known));
    const gc = await collectGarbage(lake, undefined, { graceMs: 0 });
    steps.push(gc.map((p) => [p.table, p.partition, p.kept.length, p.removed.length]), await observe(lake, known));
    return steps;
  } finally {
    await lake.close();
  }
}

/** Removes every file of a lake: its folder, or its S3 prefix's objects. */
async function removeFiles(backend: TestBackend): Promise<void> {
  const dir = lakeDirOf(backend);
  if (dir !== undefined) return rmSync(dir, { recursive: true, force: true });
  const { services, target } = backend as TestBackend & { services: AwsEndpoints; target: AwsTarget };
  const s3 = new S3Client(services.s3.clientConfig);
  try {
    const listed = await s3.send(new ListObjectsV2Command({ Bucket: target.bucket, Prefix: `${target.prefix}/` }));
    for (const { Key } of listed.Contents ?? []) await s3.send(new DeleteObjectCommand({ Bucket: target.bucket, Key }));
    expect(listed.IsTruncated).toBeFalsy();
  } finally {
    s3.destroy();
  }
}

describe.each(selectedBackends())("a clone of a %s lake", (backendName) => {
  it("reads, syncs, rolls back and collects garbage exactly as its source, and needs nothing of it", async () => {
    const source = await BACKEND_FACTORIES[backendName]!();
    const ws = new Workspace();
    const clones: TestBackend[] = [];
    try {
      const [a, b, c] = [ws.delivery(3, 2), ws.delivery(3, 3), ws.delivery(4, 2)];
      const known = new Set<string>();
      const lake = await source.open();
      try {
        for (const delivery of [a, b]) await ws.pipeline(lake, delivery).sync();
        for (const table of await lake.listTables()) for (const p of await readHistory(lake, table.name)) for (const r of p.runs) known.add(r.runId);
      } finally {
        await lake.close();
      }
      expect(known.size).toBeGreaterThan(0);

      clones.push(await cloneBackend(source));
      const original = await exercise(source, ws, c, known);
      expect(original[3], "the rollback went back to a run the clone copied").toBe(true);
      // The clone needs nothing of its source: its files are its own, and its catalog points to them.
      await removeFiles(source);
      expect(await exercise(clones[0]!, ws, c, known)).toEqual(original);
    } finally {
      ws.cleanup();
      for (const clone of clones) await clone.cleanup();
      await source.cleanup();
    }
  }, 300_000);
});
