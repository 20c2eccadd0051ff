import { writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { loadPipelineConfig } from "../../src/config/pipeline-config.js";
import { collectGarbage } from "../../src/lake/operations/gc.js";
import { publishSync } from "../../src/lake/operations/publish.js";
import { findSync } from "../../src/lake/operations/syncs.js";
import { Pipeline } from "../../src/pipeline/pipeline.js";
import { embeddedBackend, tempDir } from "../support/lake-fixture.js";

// Two all_or_nothing datasets in one sync: each is published, or held, on its own. One held does not stop the other,
// and the other's publication does not publish the held one's runs; publish SYNC_ID later moves what stayed held.

const dataset = (name: string) => `  ${name}:
    source: {format: csv, path: ${name}.csv}
    columns: {id: BIGINT, amount: BIGINT, day: VARCHAR}
    partition: {d: day}
    publish: all_or_nothing
    audits:
      - range: {amount: {max: 100}}
`;

describe("held syncs x several datasets", () => {
  const { dir, cleanup } = tempDir("lakeswap-hold-datasets-");
  afterAll(() => cleanup());

  it("holds the dataset that failed and publishes the one that passed; publish moves the held one's runs later", async () => {
    writeFileSync(path.join(dir, "lakeswap.yaml"), `datasets:\n${dataset("alpha")}${dataset("beta")}`);
    const backend = await embeddedBackend();
    const lake = await backend.open();
    const deliver = (name: string, rows: string) => writeFileSync(path.join(dir, `${name}.csv`), `id,amount,day\n${rows}\n`);
    const sum = async (table: string) => Number((await lake.query(`SELECT coalesce(sum(amount), 0) FROM ${table}`)).rows[0]?.[0]);
    try {
      deliver("alpha", "1,10,a\n2,20,b");
      deliver("beta", "1,10,a");
      await new Pipeline(lake, loadPipelineConfig(path.join(dir, "lakeswap.yaml"))).sync();
      // alpha: day a changes fine, day b fails its audit; beta changes fine.
      deliver("alpha", "1,11,a\n2,900,b");
      deliver("beta", "1,12,a");
      const report = await new Pipeline(lake, loadPipelineConfig(path.join(dir, "lakeswap.yaml"))).sync();
      expect(report.held?.status).toBe("held");
      expect([await sum("alpha_raw"), await sum("beta_raw")]).toEqual([30, 12]);
      const record = await findSync(lake, report.syncId);
      expect(record.held?.tables.map((t) => t.table)).toEqual(["alpha_raw"]);
      expect(record.moves.filter((m) => !m.pending).map((m) => m.table)).toEqual(["beta_raw"]);
      // Publishing it later moves alpha's staged day a (day b failed: it has no staged run).
      const published = await publishSync(lake, report.syncId);
      expect(published.published.map((p) => `${p.table}/${p.partition}`)).toEqual(["alpha_raw/d=a"]);
      expect([await sum("alpha_raw"), await sum("beta_raw")]).toEqual([31, 12]);
    } finally {
      await lake.close();
      await backend.cleanup();
    }
  });

  it("publish refuses a partition whose staged run gc removed (after the grace window), naming why; upsert keys are audited across the table", async () => {
    writeFileSync(
      path.join(dir, "lakeswap.yaml"),
      `datasets:\n  gamma:\n    source: {format: csv, path: gamma.csv}\n    columns: {id: BIGINT, amount: BIGINT, day: VARCHAR}\n    partition: {d: day}\n` +
        `    write: upsert\n    primary_key: [id]\n    audits:\n      - unique: {columns: [id], scope: table}\n`,
    );
    const backend = await embeddedBackend();
    const lake = await backend.open();
    const deliver = (rows: string) => writeFileSync(path.join(dir, "gamma.csv"), `id,amount,day\n${rows}\n`);
    try {
      deliver("1,10,a\n2,20,b");
      expect((await new Pipeline(lake, loadPipelineConfig(path.join(dir, "lakeswap.yaml"))).sync()).totals.failed).toBe(0);
      // An upsert moves key 1 from day a to day b: the merge keeps one row per key across the table, so the audit passes.
      deliver("1,11,b");
      const moved = await new Pipeline(lake, loadPipelineConfig(path.join(dir, "lakeswap.yaml"))).sync();
      expect(moved.totals.failed).toBe(0);
      expect((await lake.query("SELECT d, id FROM gamma_raw ORDER BY id")).rows).toEqual([["b", 1], ["b", 2]]);

      deliver("2,21,b");
      const held = await new Pipeline(lake, loadPipelineConfig(path.join(dir, "lakeswap.yaml")), { hold: true }).sync();
      expect(held.held?.status).toBe("held");
      await collectGarbage(lake, "gamma_raw", { graceMs: 0 });
      const published = await publishSync(lake, held.syncId);
      expect(published.published).toEqual([]);
      expect(published.refused).toEqual([{ table: "gamma_raw", partition: "d=b", reason: expect.stringMatching(/its staged run \S+ is gone \(gc removes staged runs after the grace window\); rerun the sync/) }]);
      expect((await lake.query("SELECT amount FROM gamma_raw WHERE id = 2")).rows).toEqual([[20]]);
    } finally {
      await lake.close();
      await backend.cleanup();
    }
  });
});
