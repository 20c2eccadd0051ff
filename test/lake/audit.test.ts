import { promises as fs } from "node:fs";
import { describe, expect, it } from "vitest";
import { LocalCatalog } from "../../src/catalog/local-catalog.js";
import { Lake } from "../../src/lake/lake.js";
import { defineTable } from "../../src/model/table.js";
import { DuckDbEngine } from "../../src/engine/duckdb-engine.js";
import { DuckDbLanding } from "../../src/landing/duckdb/duckdb-landing.js";
import { SharedDuckDb } from "../../src/duckdb/shared-duckdb.js";
import type { BuildRequest, BuildResult, Engine } from "../../src/engine/engine.js";
import { LocalStore } from "../../src/store/local-store.js";
import { ownAwsBackend } from "../support/lake-fixture.js";
import { tempLakes } from "../support/temp-lake.js";
import { METADATA_FOLDERS } from "../../src/lake/layout.js";
import { replacePartition } from "../../src/lake/operations/replace.js";
import { readHistory } from "../../src/lake/operations/history.js";
import { countPartition } from "../../src/lake/operations/partition-states.js";

// The audit before a swap reads the new run's own files; an engine's word that it succeeded is never enough.

type Fault = "no files" | "unreadable footer" | "wrong count" | "count too low" | undefined;

/** The real DuckDB engine, whose builds can be damaged after they succeed (as a faulty engine or store would). */
function damagedEngine(real: DuckDbEngine, store: LocalStore, fault: () => Fault): Engine {
  return new Proxy(real, {
    get(target, property, receiver) {
      if (property !== "build") return Reflect.get(target, property, receiver) as unknown;
      return async (request: BuildRequest): Promise<BuildResult> => {
        const result = await target.build(request);
        const file = store.localPath(result.files[0]!.key);
        switch (fault()) {
          case "no files":
            await fs.rm(file);
            return result;
          case "unreadable footer":
            await fs.writeFile(file, "PAR1 this is not a Parquet file PAR1");
            return result;
          case "wrong count":
            return { ...result, rows: (result.rows ?? 0) + 1 };
          case "count too low":
            // The files hold more rows than the engine says it wrote (a stray or duplicated file): refused as well.
            return { ...result, rows: (result.rows ?? 0) - 1 };
          default:
            return result;
        }
      };
    },
  });
}

const openLake = tempLakes();

async function openDamaged(): Promise<{ lake: Lake; setFault: (f: Fault) => void; lakeDir: string }> {
  let fault: Fault;
  const { lake, lakeDir } = await openLake((dir) => {
    const store = new LocalStore(dir, { folders: METADATA_FOLDERS });
    const duckdb = new SharedDuckDb();
    const engine = damagedEngine(new DuckDbEngine(store, { duckdb }), store, () => fault);
    return Lake.open({ store, catalog: new LocalCatalog(dir, { folders: METADATA_FOLDERS }), engine, landing: new DuckDbLanding(store, { duckdb }) }, { graceMs: 0 });
  });
  await lake.createTable(defineTable({ name: "t", columns: [{ name: "v", type: "BIGINT" }], partitionKeys: ["day"] }));
  return { lake, setFault: (f) => (fault = f), lakeDir };
}

describe("the audit of a new run", () => {
  it.each([
    ["no files", /wrote no data files/],
    ["unreadable footer", /is not readable Parquet/],
    ["wrong count", /reported 4 rows, but its files hold 3/],
    ["count too low", /reported 2 rows, but its files hold 3/],
  ] as const)("refuses a build with %s and leaves the pointer and the rows where they were", async (fault, message) => {
    const { lake, setFault } = await openDamaged();
    const first = await replacePartition(lake, "t", "day=2026-11-01", { select: "SELECT range AS v FROM range(2)" });
    setFault(fault);
    await expect(replacePartition(lake, "t", "day=2026-11-01", { select: "SELECT range AS v FROM range(3)" })).rejects.toThrow(message);
    expect((await lake.pointer("t", "day=2026-11-01"))?.runId).toBe(first.runId);
    expect((await lake.query("SELECT count(*) FROM t")).rows).toEqual([[2]]);
    // The refused run is gone, and history lists only the first.
    const [history] = await readHistory(lake, "t", "day=2026-11-01");
    expect(history!.runs.map((r) => r.runId)).toEqual([first.runId]);
  });

  it("records the rows counted from the files' footers in the manifest and the history", async () => {
    const { lake } = await openDamaged();
    const result = await replacePartition(lake, "t", "day=2026-11-01", { select: "SELECT range AS v FROM range(1234)" });
    expect(result.rows).toBe(1234);
    const [history] = await readHistory(lake, "t", "day=2026-11-01");
    expect(history!.runs[0]).toMatchObject({ runId: result.runId, rows: 1234, state: "current" });
  });

  it("refuses a new partition built empty unless allowEmpty", async () => {
    const { lake } = await openDamaged();
    await expect(replacePartition(lake, "t", "day=2026-11-02", { select: "SELECT 1 AS v WHERE false" })).rejects.toThrow(/a new partition, produced 0 rows.*--allow-empty/);
    expect(await lake.pointer("t", "day=2026-11-02")).toBeUndefined();
    const allowed = await replacePartition(lake, "t", "day=2026-11-02", { select: "SELECT 1 AS v WHERE false", allowEmpty: true });
    expect(allowed.rows).toBe(0);
    expect((await lake.pointer("t", "day=2026-11-02"))?.runId).toBe(allowed.runId);
  });
});

describe("the audit of a run Athena built", () => {
  it("refuses an UNLOAD that reported success but wrote no object, and counts rows from the files, not from Athena", async () => {
    // Services of its own: its Athena loses an UNLOAD's output.
    const backend = await ownAwsBackend();
    const aws = await backend.open({ graceMs: 0 });
    try {
      await aws.createTable(defineTable({ name: "t", columns: [{ name: "v", type: "BIGINT" }], partitionKeys: ["day"] }));
      const values = (n: number) => `SELECT v FROM (VALUES ${Array.from({ length: n }, (_, i) => `(CAST(${i} AS BIGINT))`).join(", ")}) AS r (v)`;
      const first = await replacePartition(aws, "t", "day=2026-11-01", { select: values(3) });
      expect(first.rows).toBe(3);
      const [history] = await readHistory(aws, "t", "day=2026-11-01");
      expect(history!.runs[0]).toMatchObject({ runId: first.runId, rows: 3, state: "current" });

      backend.services.athena.loseUnloadOutputNext({ match: "UNLOAD" });
      await expect(replacePartition(aws, "t", "day=2026-11-01", { select: values(5) })).rejects.toThrow(/wrote no data files/);
      expect((await aws.pointer("t", "day=2026-11-01"))?.runId).toBe(first.runId);
      expect(await countPartition(aws, "t", "day=2026-11-01")).toBe(3);
    } finally {
      await aws.close();
      await backend.cleanup();
    }
  });
});

describe("a new run's durability", () => {
  it("is made durable (its files, its folder) before the outbox entry that names it", async () => {
    const { recordFsyncs } = await import("../support/fsync-spy.js");
    const { lake, lakeDir } = await openDamaged();
    const fsyncs = recordFsyncs();
    let result;
    try {
      result = await replacePartition(lake, "t", "day=2026-11-03", { select: "SELECT range AS v FROM range(5)" });
    } finally {
      fsyncs.restore();
    }
    const runDir = `${lakeDir}/t/_runs/day=2026-11-03/run=${result.runId}`;
    const first = (match: (p: string) => boolean): number => fsyncs.paths.findIndex(match);
    const runFile = first((p) => p.startsWith(`${runDir}/`) && p.endsWith(".parquet"));
    const outbox = first((p) => p === `${lakeDir}/_lakeswap/outbox/t`);
    expect(runFile, "the run file is fsynced").toBeGreaterThanOrEqual(0);
    expect(first((p) => p === runDir), "the run folder is fsynced").toBeGreaterThanOrEqual(0);
    expect(outbox, "the outbox entry's folder is fsynced").toBeGreaterThanOrEqual(0);
    // A move replayed from the outbox after a power loss must find the run whole: the run was durable first.
    expect(runFile).toBeLessThan(outbox);
    expect(first((p) => p === runDir)).toBeLessThan(outbox);
  });
});
