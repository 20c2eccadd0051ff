import { writeFileSync } from "node:fs";
import path from "node:path";
import { DuckDBInstance } from "@duckdb/node-api";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalCatalog } from "../../src/catalog/local-catalog.js";
import { loadPipelineConfig } from "../../src/config/pipeline-config.js";
import { Lake } from "../../src/lake/lake.js";
import { Pipeline } from "../../src/pipeline/pipeline.js";
import { quoteLiteral } from "../../src/model/sql.js";
import { DuckDbEngine } from "../../src/engine/duckdb-engine.js";
import { DuckDbLanding } from "../../src/landing/duckdb/duckdb-landing.js";
import { SharedDuckDb } from "../../src/duckdb/shared-duckdb.js";
import type { Landing } from "../../src/landing/landing.js";
import { LocalStore } from "../../src/store/local-store.js";
import { tempDir } from "../support/lake-fixture.js";
import { METADATA_FOLDERS } from "../../src/lake/layout.js";

// A Parquet delivery is read in place, more than once (validate, sign, write). A delivery file that changes between
// those reads (a producer rewriting it while the sync runs) must fail the load: never runs of the new bytes under the
// old bytes' signatures, never a landing summary that names other rows than were landed.

const CONFIG = `datasets:
  readings:
    source: {format: parquet, path: readings.parquet}
    columns:
      sensor: {type: VARCHAR, nullable: false}
      value: DOUBLE
      day: {type: DATE, nullable: false}
    partition:
      p_day: strftime(day, '%Y-%m-%d')
`;

let duck: DuckDBInstance;
beforeAll(async () => {
  duck = await DuckDBInstance.create(":memory:");
});
afterAll(() => duck.closeSync());

/** Writes `rows` readings a day over three days into a Parquet file, each value `value`. */
async function writeReadings(file: string, rows: number, value: number): Promise<void> {
  const connection = await duck.connect();
  try {
    await connection.run(
      `COPY (SELECT 's' || (i % 7) AS sensor, ${value}::DOUBLE AS value, DATE '2026-11-01' + (i % 3)::INTEGER AS day FROM range(${rows * 3}) t(i)) ` +
        `TO ${quoteLiteral(file)} (FORMAT parquet)`,
    );
  } finally {
    connection.closeSync();
  }
}

/** An embedded lake whose landing runs `afterLand` once, right after it landed a delivery (a producer rewriting the file then). */
async function lakeWithHook(dir: string, afterLand: () => Promise<void>): Promise<Lake> {
  const store = new LocalStore(path.join(dir, "lake"), { folders: METADATA_FOLDERS });
  const duckdb = new SharedDuckDb();
  const real = new DuckDbLanding(store, { duckdb });
  let fired = false;
  const landing: Landing = Object.assign(Object.create(real) as DuckDbLanding, {
    land: async (request: Parameters<Landing["land"]>[0]) => {
      const landed = await real.land(request);
      if (!fired) {
        fired = true;
        await afterLand();
      }
      return landed;
    },
  });
  return Lake.open({ store, catalog: new LocalCatalog(path.join(dir, "lake"), { folders: METADATA_FOLDERS }), engine: new DuckDbEngine(store, { duckdb }), landing });
}

describe("a delivery file that changes while it is loaded", () => {
  it("fails the load with a message naming the file; no pointer moves, and the next sync loads the new file whole", async () => {
    const { dir, cleanup } = tempDir("lakeswap-delivery-changes-");
    const file = path.join(dir, "readings.parquet");
    writeFileSync(path.join(dir, "lakeswap.yaml"), CONFIG);
    const config = loadPipelineConfig(path.join(dir, "lakeswap.yaml"));
    await writeReadings(file, 100, 1);
    // The producer rewrites the file after it was landed and signed, before its runs are written: as many rows, other
    // values, so that no row count can tell.
    const lake = await lakeWithHook(dir, () => writeReadings(file, 100, 2));
    try {
      const report = await new Pipeline(lake, config, { inputs: [file] }).sync();
      expect(report.totals.built).toBe(0);
      expect(report.totals.failed).toBe(3);
      for (const p of report.partitions) expect(p.error).toMatch(/readings\.parquet changed after it was landed/);
      for (const day of ["2026-11-01", "2026-11-02", "2026-11-03"]) expect(await lake.pointer("readings_raw", `p_day=${day}`)).toBeUndefined();

      // The file as it is now loads whole, with its own signatures: a rerun is not misled by anything the failed one kept.
      const rerun = await new Pipeline(lake, config, { inputs: [file] }).sync();
      expect(rerun.totals).toMatchObject({ built: 3, failed: 0, rows: 300 });
      const sums = await lake.query("SELECT p_day, count(*), sum(value) FROM readings_raw GROUP BY p_day ORDER BY p_day");
      expect(sums.rows.map((r) => r.map(Number).slice(1))).toEqual([
        [100, 200],
        [100, 200],
        [100, 200],
      ]);
      const again = await new Pipeline(lake, config, { inputs: [file] }).sync();
      expect(again.totals).toMatchObject({ built: 0, skipped: 3 });
    } finally {
      await lake.close();
      cleanup();
    }
  });

  it("names the delivery by the bytes it lands: a file rewritten after it was identified is hashed again", async () => {
    const { dir, cleanup } = tempDir("lakeswap-delivery-rename-");
    const file = path.join(dir, "readings.parquet");
    const engine = new DuckDbLanding(new LocalStore(path.join(dir, "lake"), { folders: METADATA_FOLDERS }));
    try {
      await writeReadings(file, 10, 1);
      const before = await engine.identify([file]);
      await writeReadings(file, 10, 3);
      const request = {
        files: [file],
        format: "parquet" as const,
        header: true,
        delimiter: ",",
        columns: [
          { name: "sensor", type: "VARCHAR", nullable: false },
          { name: "value", type: "DOUBLE", nullable: true },
          { name: "day", type: "DATE", nullable: false },
        ],
        partition: [{ key: "p_day", expression: "strftime(day, '%Y-%m-%d')" }],
        signatureColumns: ["sensor", "value", "day"],
      };
      const landed = await engine.land(request);
      const after = await engine.identify([file]);
      await engine.releaseLanding(landed);
      expect(after.id).not.toBe(before.id);
      expect(landed.id).toBe(after.id);
    } finally {
      await engine.close();
      cleanup();
    }
  });
});
