import { writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { loadPipelineConfig } from "../../src/config/pipeline-config.js";
import { publishSync } from "../../src/lake/operations/publish.js";
import { Pipeline } from "../../src/pipeline/pipeline.js";
import { embeddedBackend, tempDir } from "../support/lake-fixture.js";

// Found by the model test (test/model/held.ts): a held sync whose raw batch has one partition failing an error audit
// did not build the layers below from the batch's other, staged, raw runs. The writer's cached partition states
// (HeldStates.afterBatch, src/lake/operations/partition-states.ts) are dropped when any outcome of a batch failed,
// and read again from the catalog, where a held sync's staged runs are not: the layer then plans against the current
// raw runs, skips a changed day as `unchanged` and never sees a new one. Publishing then moved raw without its stage.

const CONFIG = `datasets:
  items:
    source: {format: csv, path: items.csv}
    columns: {k: BIGINT, v: BIGINT, day: VARCHAR}
    partition: {d: day}
    audits:
      - range: {v: {max: 100}}
    layers:
      - name: stage
        sql: stage.sql
        columns: {k: BIGINT, v10: BIGINT}
`;

describe("held syncs x an error audit on raw", () => {
  const { dir, cleanup } = tempDir("lakeswap-hold-audit-");
  afterAll(() => cleanup());

  it("the layers below are built from the staged raw runs that passed, while another partition of the batch failed", async () => {
    writeFileSync(path.join(dir, "lakeswap.yaml"), CONFIG);
    writeFileSync(path.join(dir, "stage.sql"), "SELECT k, v * 10 AS v10 FROM items_raw WHERE d = {{ d }}\n");
    const deliver = (rows: string) => writeFileSync(path.join(dir, "items.csv"), `k,v,day\n${rows}\n`);
    const backend = await embeddedBackend();
    const lake = await backend.open();
    const sync = (options: { hold?: boolean } = {}) => new Pipeline(lake, loadPipelineConfig(path.join(dir, "lakeswap.yaml")), options).sync();
    const stage = async () => (await lake.query("SELECT d, k, v10 FROM items_stage ORDER BY d, k")).rows;
    try {
      deliver("1,1,a\n2,2,b");
      expect((await sync()).totals.failed).toBe(0);
      // Day a changes, day b fails its audit, day c is new.
      deliver("1,5,a\n2,999,b\n3,3,c");
      const held = await sync({ hold: true });
      expect(held.partitions.filter((p) => p.action === "failed").map((p) => `${p.table}/${p.partition}`)).toEqual(["items_raw/d=b"]);
      expect(held.partitions.filter((p) => p.staged).map((p) => `${p.table}/${p.partition}`)).toEqual(["items_raw/d=a", "items_raw/d=c", "items_stage/d=a", "items_stage/d=c"]);
      await publishSync(lake, held.syncId);
      expect(await stage()).toEqual([["a", 1, 50], ["b", 2, 20], ["c", 3, 30]]);
    } finally {
      await lake.close();
      await backend.cleanup();
    }
  });
});
