import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { loadPipelineConfig } from "../../src/config/pipeline-config.js";
import type { Lake } from "../../src/lake/lake.js";
import { Pipeline, type SyncReport } from "../../src/pipeline/pipeline.js";
import { openEmbeddedLake } from "../../src/open/open-lake.js";
import { openSink } from "../../src/sinks/open-sink.js";
import { BACKEND_FACTORIES, tempDir } from "../support/lake-fixture.js";
import { postgresAvailable } from "../support/postgres.js";
import { usePostgres } from "../support/shared-services.js";

/*
 * An upsert target holds each key once. A lake table whose partitions share a key (nothing in the lake declares keys
 * unique across partitions) sent one row per partition for it: the target kept whichever went last (3 rows reported
 * sent, 2 held), and a later change to the other partition moved the key back, silently. Now the sink checks the
 * whole table first and fails the partitions to send that share a key, naming the key and the other partition.
 */

const postgres = usePostgres("shared_key");

function yaml(primaryKey: string, partition = "day: \"strftime(event_ts, '%Y-%m-%d')\""): string {
  return `datasets:
  events:
    source: {format: csv, path: "deliveries/*.csv"}
    columns:
      id: {type: BIGINT, nullable: false}
      amount: DECIMAL(10,2)
      event_ts: {type: TIMESTAMP, nullable: false}
    partition: {${partition}}
    sinks:
      postgres: {url: "\${DATABASE_URL}", table: ev, mode: upsert, primary_key: ${primaryKey}}
`;
}

/** A row: id, amount, day of November. */
type Row = readonly [id: number, amount: string, day: number];

async function workspace(primaryKey = "[id]", open?: () => Promise<Lake>, partition?: string) {
  const { url, query } = await postgres.database();
  process.env.DATABASE_URL = url;
  const { dir, cleanup } = tempDir("lakeswap-shared-key-");
  postgres.onCleanup(cleanup);
  mkdirSync(path.join(dir, "deliveries"));
  const configFile = path.join(dir, "lakeswap.yaml");
  writeFileSync(configFile, yaml(primaryKey, partition));
  const lake = open ? await open() : await openEmbeddedLake(path.join(dir, "lake"), { graceMs: 0, leaseWaitMs: 0 });
  postgres.onCleanup(() => lake.close());
  let counter = 0;
  return {
    lake,
    async sync(rows: readonly Row[]): Promise<SyncReport> {
      counter += 1;
      const file = path.join(dir, "deliveries", `d${counter}.csv`);
      writeFileSync(file, `id,amount,event_ts\n${rows.map(([id, amount, day]) => `${id},${amount},2026-11-${String(day).padStart(2, "0")} 10:00:00`).join("\n")}\n`);
      return new Pipeline(lake, loadPipelineConfig(configFile), { inputs: [file], openSink }).sync();
    },
    /** The target's live rows, `id amount day`, by id then day. */
    async target(): Promise<string[]> {
      const rows = await query<{ line: string }>("SELECT concat_ws(' ', id, amount, day) AS line FROM public.ev WHERE _lakeswap_deleted_at IS NULL ORDER BY id, day");
      return rows.map((row) => row.line);
    },
    async lakeRows(): Promise<string[]> {
      const result = await lake.query("SELECT id, CAST(amount AS VARCHAR), day FROM events_raw ORDER BY id, day");
      return result.rows.map((row) => row.map(String).join(" "));
    },
  };
}

/** `partition action reason`, and the error's gist where it failed, sorted. */
function sinkLines(report: SyncReport): string[] {
  return report.sinks
    .filter((s) => s.action !== "skipped")
    .map((s) => `${s.partition} ${s.action} ${s.reason}${s.error ? ` | ${/e\.g\. \(([^)]*)\), also in partition (\S+);/.exec(s.error)?.slice(1).join(" in ") ?? s.error}` : ""}`)
    .sort();
}

describe.skipIf(!postgresAvailable())("PostgreSQL upsert sink: a key held by two partitions of the lake", () => {
  it("fails every partition to send that shares a key, naming it and the other partition; sends the rest; sends all once the keys are unique", async () => {
    const ws = await workspace();
    // id 1 on days 1 and 2; days 3 and 4 share nothing.
    const first = await ws.sync([[1, "1.00", 1], [1, "2.00", 2], [2, "3.00", 2], [3, "4.00", 3], [4, "5.00", 4]]);
    expect(sinkLines(first)).toEqual([
      'day=2026-11-01 failed new | id = "1" in day=2026-11-02',
      'day=2026-11-02 failed new | id = "1" in day=2026-11-01',
      "day=2026-11-03 sent new",
      "day=2026-11-04 sent new",
    ]);
    const error = first.sinks.find((s) => s.partition === "day=2026-11-01")?.error ?? "";
    expect(error).toContain("lake table events_raw");
    expect(error).toContain("add day to the sink's primary_key");
    expect(error).toContain("nothing of this partition was sent");
    expect(await ws.target()).toEqual(["3 4.00 2026-11-03", "4 5.00 2026-11-04"]);

    // The next delivery re-states day 1 without id 1 (id 5 instead): both days go, and the target equals the lake.
    const fixed = await ws.sync([[5, "6.00", 1], [1, "2.50", 2], [2, "3.00", 2], [3, "4.00", 3], [4, "5.00", 4]]);
    expect(fixed.sinks.filter((s) => s.action === "failed")).toEqual([]);
    expect(await ws.target()).toEqual(await ws.lakeRows());
    expect(await ws.target()).toEqual(["1 2.50 2026-11-02", "2 3.00 2026-11-02", "3 4.00 2026-11-03", "4 5.00 2026-11-04", "5 6.00 2026-11-01"]);
  });

  it("a key sent with one partition and later delivered in another (the first unchanged) fails the newcomer; the target keeps the sent row", async () => {
    const ws = await workspace();
    await ws.sync([[1, "1.00", 1], [2, "2.00", 1]]);
    expect(await ws.target()).toEqual(["1 1.00 2026-11-01", "2 2.00 2026-11-01"]);
    // Day 1 is not in this delivery: unchanged, so the target's id 1 is what the lake holds; day 5 brings id 1 again.
    const report = await ws.sync([[1, "9.00", 5], [7, "7.00", 5]]);
    expect(sinkLines(report)).toEqual(['day=2026-11-05 failed new | id = "1" in day=2026-11-01']);
    expect(await ws.target()).toEqual(["1 1.00 2026-11-01", "2 2.00 2026-11-01"]);
    // Run again: still refused (nothing recorded), never sent by accident.
    const again = await ws.sync([[1, "9.00", 5], [7, "7.00", 5]]);
    expect(sinkLines(again)).toEqual(['day=2026-11-05 failed new | id = "1" in day=2026-11-01']);
    expect(await ws.target()).toEqual(["1 1.00 2026-11-01", "2 2.00 2026-11-01"]);
  });

  it("a primary key that holds the partition column lets one id live in two days", async () => {
    const ws = await workspace("[id, day]");
    const report = await ws.sync([[1, "1.00", 1], [1, "2.00", 2], [2, "3.00", 2]]);
    expect(report.sinks.filter((s) => s.action === "failed")).toEqual([]);
    expect(await ws.target()).toEqual(["1 1.00 2026-11-01", "1 2.00 2026-11-02", "2 3.00 2026-11-02"]);
  });

  it("with two partition keys, a key in two partitions of one day is found and named by its whole partition path", async () => {
    // The partition: the day, and the amount's sign; id 1 is on day 1 with a positive and a negative amount.
    const ws = await workspace("[id]", undefined, "day: \"strftime(event_ts, '%Y-%m-%d')\", sign: \"CASE WHEN amount < 0 THEN 'neg' ELSE 'pos' END\"");
    const report = await ws.sync([[1, "1.00", 1], [1, "-2.00", 1], [2, "3.00", 1]]);
    expect(sinkLines(report)).toEqual([
      'day=2026-11-01/sign=neg failed new | id = "1" in day=2026-11-01/sign=pos',
      'day=2026-11-01/sign=pos failed new | id = "1" in day=2026-11-01/sign=neg',
    ]);
    const fine = await workspace("[id, sign]", undefined, "day: \"strftime(event_ts, '%Y-%m-%d')\", sign: \"CASE WHEN amount < 0 THEN 'neg' ELSE 'pos' END\"");
    const sent = await fine.sync([[1, "1.00", 1], [1, "-2.00", 1], [2, "3.00", 1]]);
    // day is not in the key, but a key (id, sign) can still be in two days: checked, and none is.
    expect(sent.sinks.filter((s) => s.action === "failed")).toEqual([]);
  });

  it("an S3 lake checks through Athena (s3rver, the Glue and Athena emulators)", async () => {
    const backend = await BACKEND_FACTORIES.aws!();
    postgres.onCleanup(() => backend.cleanup());
    const ws = await workspace("[id]", () => backend.open());
    const report = await ws.sync([[1, "1.00", 1], [1, "2.00", 2], [2, "3.00", 2], [3, "4.00", 3]]);
    expect(sinkLines(report)).toEqual([
      'day=2026-11-01 failed new | id = "1" in day=2026-11-02',
      'day=2026-11-02 failed new | id = "1" in day=2026-11-01',
      "day=2026-11-03 sent new",
    ]);
    expect(await ws.target()).toEqual(["3 4.00 2026-11-03"]);
  }, 120_000);
});
