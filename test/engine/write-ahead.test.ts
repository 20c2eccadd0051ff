import { existsSync, readdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { DuckDBInstance } from "@duckdb/node-api";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { TEMP_PREFIX, METADATA_FOLDERS } from "../../src/lake/layout.js";
import { partitionPath } from "../../src/model/partition.js";
import { newRunId } from "../../src/model/run-id.js";
import { defineTable } from "../../src/model/table.js";
import { DuckDbLanding } from "../../src/landing/duckdb/duckdb-landing.js";
import type { LandRequest, LandedDelivery } from "../../src/landing/landing.js";
import { LocalStore } from "../../src/store/local-store.js";
import { tempDir } from "../support/lake-fixture.js";

// A first load's runs are written while the delivery is signed (LandRequest.writeAhead): the runs placed from that
// stage hold exactly what writing them afterwards would, whichever partitions the plan builds, and nothing of the
// stage is left behind.

const DAYS = 120;
const ROWS_PER_DAY = 40;
const COLUMNS = [
  { name: "event_date", type: "DATE", nullable: false },
  { name: "id", type: "BIGINT", nullable: false },
  { name: "amount", type: "DOUBLE", nullable: true },
];
const table = defineTable({ name: "events_raw", columns: COLUMNS, partitionKeys: ["day"] });

let workspace: ReturnType<typeof tempDir>;
let csv: string;

beforeAll(() => {
  workspace = tempDir("lakeswap-write-ahead-");
  csv = path.join(workspace.dir, "events.csv");
  const lines = ["event_date,id,amount"];
  // Rows of each day spread over the whole file, so that every partition's file is open from start to end.
  for (let i = 0; i < DAYS * ROWS_PER_DAY; i += 1) {
    const day = new Date(Date.UTC(2026, 0, 1) + (i % DAYS) * 86_400_000).toISOString().slice(0, 10);
    lines.push(`${day},${i},${i % 7 === 0 ? "" : (i * 1.25).toFixed(2)}`);
  }
  writeFileSync(csv, `${lines.join("\n")}\n`);
});
afterAll(() => {
  workspace.cleanup();
});

const request = (writeAhead?: typeof table): LandRequest => ({
  files: [csv],
  format: "csv",
  header: true,
  delimiter: ",",
  columns: COLUMNS,
  partition: [{ key: "day", expression: "strftime(event_date, '%Y-%m-%d')" }],
  signatureColumns: COLUMNS.map((c) => c.name),
  writeAhead,
});

const engines: DuckDbLanding[] = [];
afterEach(async () => {
  await Promise.all(engines.splice(0).map((engine) => engine.close()));
});

function open(name: string): { engine: DuckDbLanding; lake: string; stages: () => string[] } {
  const lake = path.join(workspace.dir, name);
  const engine = new DuckDbLanding(new LocalStore(lake, { folders: METADATA_FOLDERS }), { stagingPrefix: TEMP_PREFIX });
  engines.push(engine);
  const tmp = path.join(lake, TEMP_PREFIX);
  return { engine, lake, stages: () => (existsSync(tmp) ? readdirSync(tmp).filter((entry) => entry.includes("-stage-")) : []) };
}

/** Writes the runs of the chosen partitions and reads each run's rows back (day, id, amount; by id) from its files. */
async function writeAndRead(lake: string, engine: DuckDbLanding, delivery: LandedDelivery, chosen: (index: number) => boolean, compression?: "zstd") {
  const partitions = delivery.partitions.map((p) => p.partition).filter((_, index) => chosen(index));
  const runs = partitions.map((partition, index) => {
    const runId = `${newRunId()}${index}`;
    return { partition, runId, runPrefix: `${table.name}/_runs/${partitionPath(partition)}/run=${runId}/` };
  });
  const results = await engine.writeLandedRuns({ table: compression ? { ...table, compression } : table, delivery, runs });
  const reader = await (await DuckDBInstance.create(":memory:")).connect();
  const contents: string[][] = [];
  let files = 0;
  for (const [index, result] of results.entries()) {
    const run = runs[index]!;
    expect(result.files.length).toBeGreaterThan(0);
    expect(result.files.every((file) => file.key.startsWith(run.runPrefix))).toBe(true);
    files += result.files.length;
    const list = result.files.map((file) => `'${path.join(lake, file.key)}'`).join(", ");
    const rows = await reader.runAndReadAll(`SELECT strftime(event_date, '%Y-%m-%d'), id, amount FROM read_parquet([${list}]) ORDER BY id`);
    const text = rows.getRowsJS().map((row) => row.map(String).join(","));
    expect(text.every((row) => row.startsWith(`${partitionPath(run.partition).slice("day=".length)},`))).toBe(true);
    contents.push(text);
  }
  reader.closeSync();
  return { runs, contents, files };
}

describe("runs written ahead, while a delivery is signed", () => {
  it("places the same rows as runs written afterwards, for any subset of partitions, and leaves no stage", async () => {
    const ahead = open("ahead");
    const after = open("after");
    const landedAhead = await ahead.engine.land(request(table));
    const landedAfter = await after.engine.land(request());
    expect(landedAhead.partitions).toEqual(landedAfter.partitions);
    expect(landedAhead.partitions).toHaveLength(DAYS);
    expect(ahead.stages()).toHaveLength(1);
    expect(after.stages()).toHaveLength(0);

    // The plan builds every third partition (the others were unchanged): only those are placed.
    const chosen = (index: number) => index % 3 === 0;
    const a = await writeAndRead(ahead.lake, ahead.engine, landedAhead, chosen);
    const b = await writeAndRead(after.lake, after.engine, landedAfter, chosen);
    expect(a.runs.map((r) => partitionPath(r.partition))).toEqual(b.runs.map((r) => partitionPath(r.partition)));
    expect(a.runs).toHaveLength(DAYS / 3);
    expect(a.contents).toEqual(b.contents);
    expect(a.contents.every((rows) => rows.length === ROWS_PER_DAY)).toBe(true);
    expect(a.files).toBeGreaterThanOrEqual(a.runs.length);
    expect(ahead.stages()).toEqual([]);
    await ahead.engine.releaseLanding(landedAhead);
    await after.engine.releaseLanding(landedAfter);
  });

  it("drops a stage no run took, and writes anew for a table of another shape", async () => {
    const unused = open("unused");
    const landed = await unused.engine.land(request(table));
    expect(unused.stages()).toHaveLength(1);
    await unused.engine.releaseLanding(landed);
    expect(unused.stages()).toEqual([]);

    // Written ahead with snappy, built with zstd (the table changed since): the runs are written anew, in zstd.
    const reshaped = open("reshaped");
    const delivery = await reshaped.engine.land(request(table));
    const { runs, contents } = await writeAndRead(reshaped.lake, reshaped.engine, delivery, (index) => index < 5, "zstd");
    expect(contents.map((rows) => rows.length)).toEqual([ROWS_PER_DAY, ROWS_PER_DAY, ROWS_PER_DAY, ROWS_PER_DAY, ROWS_PER_DAY]);
    const reader = await (await DuckDBInstance.create(":memory:")).connect();
    const first = path.join(reshaped.lake, runs[0]!.runPrefix);
    const codecs = await reader.runAndReadAll(`SELECT DISTINCT compression FROM parquet_metadata('${first}*.parquet')`);
    expect(codecs.getRowsJS().map((row) => String(row[0]))).toEqual(["ZSTD"]);
    reader.closeSync();
    expect(reshaped.stages()).toEqual([]);
    await reshaped.engine.releaseLanding(delivery);
  });

  it("writes nothing ahead for a delivery with bad rows", async () => {
    const bad = path.join(workspace.dir, "bad.csv");
    writeFileSync(bad, "event_date,id,amount\n2026-01-01,1,2.5\nnot a date,2,3.5\n");
    const lake = open("bad");
    const delivery = await lake.engine.land({ ...request(table), files: [bad] });
    expect(delivery.rowsRejected).toBe(1);
    expect(lake.stages()).toEqual([]);
    await lake.engine.releaseLanding(delivery);
  });
});
