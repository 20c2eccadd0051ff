import { afterAll, describe, expect, it } from "vitest";
import { publishSync } from "../../src/lake/operations/publish.js";
import { embeddedBackend } from "../support/lake-fixture.js";
import { icebirdRows, validateTable } from "../support/iceberg-kit.js";
import { PipelineWorkspace, orders } from "../support/pipeline-fixture.js";

// A held sync commits no Iceberg snapshot (nothing of it is published); its publication commits exactly one per
// `iceberg: true` table, tagged with the held sync's id, which an independent reader (icebird) reads.

describe("Iceberg tables x held syncs", () => {
  const ws = new PipelineWorkspace();
  ws.editConfig((yaml) => yaml.replace("    layers:\n", "    iceberg: true\n    layers:\n"));
  let cleanup: (() => Promise<void>) | undefined;
  afterAll(async () => {
    await cleanup?.();
    ws.cleanup();
  });

  it("sync --hold commits no snapshot; publish commits one, tagged with the sync's id", async () => {
    const backend = await embeddedBackend();
    cleanup = () => backend.cleanup();
    const lake = await backend.open();
    try {
      ws.redeliver(orders(2, 3));
      await ws.pipeline(lake).sync();
      const before = await validateTable(backend.lakeDir, "orders_raw");
      const rowsBefore = await icebirdRows(backend.lakeDir, "orders_raw", ["order_id", "amount"]);

      ws.redeliver(orders(2, 3).map((r) => ({ ...r, amount: "9.00" })));
      const held = await ws.pipeline(lake, { hold: true }).sync();
      expect(held.snapshots).toBeUndefined();
      expect((await validateTable(backend.lakeDir, "orders_raw")).snapshots).toHaveLength(before.snapshots.length);
      expect(await icebirdRows(backend.lakeDir, "orders_raw", ["order_id", "amount"])).toEqual(rowsBefore);

      await publishSync(lake, held.syncId);
      const after = await validateTable(backend.lakeDir, "orders_raw");
      expect(after.snapshots).toHaveLength(before.snapshots.length + 1);
      expect(after.snapshots.at(-1)!.summary["lakeswap.sync-id"]).toBe(held.syncId);
      expect(await icebirdRows(backend.lakeDir, "orders_raw", ["order_id", "amount"])).toEqual(rowsBefore.map((r) => `${r.split("|")[0]}|9`));
    } finally {
      await lake.close();
    }
  });
});
