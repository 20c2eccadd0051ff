import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Lake } from "../../src/lake/lake.js";
import { collectGarbage } from "../../src/lake/operations/gc.js";
import { discardSync, publishSync } from "../../src/lake/operations/publish.js";
import { rollbackSync } from "../../src/lake/operations/rollback.js";
import { findSync } from "../../src/lake/operations/syncs.js";
import type { SyncReport } from "../../src/pipeline/sync-report.js";
import { BACKEND_FACTORIES, selectedBackends, type TestBackend } from "../support/lake-fixture.js";
import { runMain } from "../support/main-cli.js";
import { readCatalogFile } from "../support/plain-reader.js";
import { lakeDirOf } from "../support/crash-kit.js";
import { PipelineWorkspace, STAGE_SQL, orders, type OrderRow } from "../support/pipeline-fixture.js";

// Write-audit-publish across layers: a held sync builds every layer from the runs it staged above it and moves no
// pointer; publish moves them all at once (and rollback --sync undoes them); a partition moved since is refused;
// discard drops the sync; `publish: all_or_nothing` moves nothing when any partition of any layer fails.

const BASE = orders(3, 5);
const withAmount = (rows: readonly OrderRow[], day: number, amount: string): OrderRow[] =>
  rows.map((r) => (r.ts.startsWith(`2026-11-0${day}`) && r.status === "completed" ? { ...r, amount } : r));

// On AWS, Athena reads the staged runs through scratch Glue tables (src/lake/commit/staged-reads.ts), dropped once
// each layer is built: the last test checks none is left behind or listed.
for (const backendName of selectedBackends()) {
  describe(`held syncs (${backendName})`, () => {
    let backend: TestBackend;
    let lake: Lake;
    let ws: PipelineWorkspace;

    /** `table -> "day|amounts"` rows (amounts of the day, sorted), what a reader sees. */
    const state = async (): Promise<{ raw: string[]; stage: string[]; monthly: string[] }> => {
      const read = async (sql: string) => (await lake.query(sql)).rows.map((r) => r.map(String).join("|")).sort();
      return {
        raw: await read("SELECT day, string_agg(CAST(amount AS VARCHAR), ',' ORDER BY order_id) FROM orders_raw GROUP BY day"),
        stage: await read("SELECT day, string_agg(CAST(amount AS VARCHAR), ',' ORDER BY order_id) FROM orders_stage GROUP BY day"),
        monthly: await read("SELECT month, CAST(revenue AS VARCHAR) FROM orders_monthly"),
      };
    };
    const sync = async (rows: readonly OrderRow[], options: { hold?: boolean } = {}): Promise<SyncReport> => {
      ws.redeliver(rows);
      return ws.pipeline(lake, options).sync();
    };

    beforeAll(async () => {
      backend = await BACKEND_FACTORIES[backendName]!();
      lake = await backend.open();
      ws = new PipelineWorkspace();
      await sync(BASE);
    });
    afterAll(async () => {
      await lake?.close();
      ws?.cleanup();
      await backend?.cleanup();
    });

    it("--hold builds every layer from the runs staged above it and moves nothing; publish moves them all; rollback --sync undoes them", async () => {
      const before = await state();
      const held = await sync(withAmount(BASE, 2, "77.00"), { hold: true });
      expect(held.held).toMatchObject({ status: "held" });
      // Raw, stage and monthly: each built from the staged run above it, none moved.
      expect(held.partitions.filter((p) => p.staged).map((p) => `${p.table}/${p.partition}`)).toEqual(["orders_raw/day=2026-11-02", "orders_stage/day=2026-11-02", "orders_monthly/month=2026-11"]);
      expect(await state()).toEqual(before);
      // Plain readers of lake.duckdb too: the catalog file moves with the publication, not with the held sync.
      // (Embedded lakes have the catalog file.)
      const lakeDir = lakeDirOf(backend);
      const plainDay2 =
        lakeDir === undefined ? undefined : async () => (await readCatalogFile(lakeDir, "SELECT string_agg(CAST(amount AS VARCHAR), ',' ORDER BY order_id) FROM lake.orders_stage WHERE day = '2026-11-02'"))[0]?.[0];
      if (plainDay2) expect(await plainDay2()).not.toContain("77.00");
      const record = await findSync(lake, held.syncId);
      expect(record.held?.tables.map((t) => t.table)).toEqual(["orders_raw", "orders_stage", "orders_monthly"]);

      const published = await publishSync(lake, held.syncId);
      expect(published.refused).toEqual([]);
      expect(published.published.map((p) => p.table)).toEqual(["orders_raw", "orders_stage", "orders_monthly"]);
      const after = await state();
      expect(after.raw.find((r) => r.startsWith("2026-11-02"))).toMatch(/^2026-11-02\|77\.00,77\.00,77\.00,77\.00,[0-9.]+$/);
      expect(after.stage.find((r) => r.startsWith("2026-11-02"))).toBe("2026-11-02|77.00,77.00,77.00,77.00");
      expect(after.monthly).not.toEqual(before.monthly);
      if (plainDay2) expect(await plainDay2()).toBe("77.00,77.00,77.00,77.00");
      // The layers were built from the staged raw run: a sync now has nothing to do.
      const again = await sync(withAmount(BASE, 2, "77.00"));
      expect(again.totals).toMatchObject({ built: 0, failed: 0 });
      await expect(publishSync(lake, held.syncId)).rejects.toThrow(/was published already/);

      const rolled = await rollbackSync(lake, held.syncId);
      expect(rolled.partitions.filter((p) => p.action === "rolled back")).toHaveLength(3);
      expect(await state()).toEqual(before);
      // Back to the base delivery: the rolled-back day is rebuilt as it was.
      expect((await sync(BASE)).totals.failed).toBe(0);
    });

    it("publish refuses a partition another sync moved since it was staged, and publishes the rest", async () => {
      const held = await sync(withAmount(withAmount(BASE, 1, "11.00"), 3, "33.00"), { hold: true });
      // Day 3 moves on meanwhile (to other rows than the held ones).
      const meanwhile = await sync(withAmount(BASE, 3, "99.00"));
      expect(meanwhile.totals.failed).toBe(0);
      const published = await publishSync(lake, held.syncId);
      expect(published.refused.map((r) => `${r.table}/${r.partition}`).sort()).toEqual(["orders_monthly/month=2026-11", "orders_raw/day=2026-11-03", "orders_stage/day=2026-11-03"]);
      expect(published.refused.find((r) => r.table === "orders_raw")!.reason).toMatch(/moved since it was staged against run \S+: run \S+ is current now/);
      const after = await state();
      expect(after.raw.find((r) => r.startsWith("2026-11-01"))).toMatch(/^2026-11-01\|11\.00,11\.00,11\.00,11\.00,/);
      expect(after.raw.find((r) => r.startsWith("2026-11-03"))).toMatch(/^2026-11-03\|99\.00,99\.00,99\.00,99\.00,/);
    });

    it("discard drops a held sync: nothing moves, and it cannot be published after", async () => {
      const before = await state();
      const held = await sync(withAmount(BASE, 1, "5.00"), { hold: true });
      expect(await discardSync(lake, held.syncId)).toMatchObject({ runs: held.partitions.filter((p) => p.staged).length });
      await expect(publishSync(lake, held.syncId)).rejects.toThrow(/was discarded/);
      expect(await state()).toEqual(before);
    });

    it("'last' names the newest held sync for publish, and the newest sync that moved pointers for rollback --sync", async () => {
      const moved = await sync(withAmount(BASE, 1, "6.00"));
      const held = await sync(withAmount(BASE, 1, "7.00"), { hold: true });
      expect((await findSync(lake, "last")).syncId).toBe(moved.syncId);
      expect((await findSync(lake, "last", "held")).syncId).toBe(held.syncId);
      expect((await publishSync(lake, "last")).syncId).toBe(held.syncId);
      expect((await findSync(lake, "last")).syncId).toBe(held.syncId);
      await expect(publishSync(lake, "last")).rejects.toThrow(/no sync is held in this lake/);
      expect((await sync(BASE)).totals.failed).toBe(0);
    });

    it("publish: all_or_nothing moves no pointer of the dataset when a lower layer fails its audit, and all of them when none does", async () => {
      ws.editConfig((yaml) =>
        yaml
          .replace("    layers:\n", "    publish: all_or_nothing\n    layers:\n")
          .replace("        sql: sql/stage.sql\n", "        sql: sql/stage.sql\n        audits:\n          - range: {amount: {max: 500}}\n"),
      );
      const before = await state();
      // Day 1 is fine in every layer; day 2's stage fails its audit: nothing of the sync moves, raw's day 1 included.
      const failing = await sync(withAmount(withAmount(BASE, 1, "12.00"), 2, "900.00"));
      expect(failing.held?.reason).toMatch(/all_or_nothing: 1 partition\(s\) failed \(orders_stage\/day=2026-11-02\)/);
      expect(failing.totals.failed).toBe(1);
      expect(await state()).toEqual(before);
      const code = await runMain(["syncs", ...backend.cliArgs], backend.cliEnv);
      expect(code.stdout).toContain(`sync ${failing.syncId}: publish: all_or_nothing`);
      expect(code.stdout).toMatch(/FAIL audit range\(amount\) failed on orders_stage\/day=2026-11-02: 4 rows whose amount is not <= 500/);

      const clean = await sync(withAmount(withAmount(BASE, 1, "12.00"), 2, "400.00"));
      expect(clean.held).toBeUndefined();
      expect(clean.totals.failed).toBe(0);
      const after = await state();
      expect(after.raw.find((r) => r.startsWith("2026-11-01"))).toMatch(/^2026-11-01\|12\.00,12\.00,12\.00,12\.00,/);
      expect(after.stage.find((r) => r.startsWith("2026-11-02"))).toBe("2026-11-02|400.00,400.00,400.00,400.00");
      // Published as the sync's own moves: rollback --sync undoes them all.
      const rolled = await rollbackSync(lake, clean.syncId);
      expect(rolled.partitions.filter((p) => p.action === "rolled back").length).toBeGreaterThanOrEqual(5);
    });

    it("the CLI: sync --hold, syncs lists it held, publish SYNC_ID moves it", async () => {
      ws.redeliver(withAmount(BASE, 3, "3.00"));
      const args = ["--config", ws.configFile, ...backend.cliArgs];
      const held = await runMain(["sync", "--hold", "--json", ...args], backend.cliEnv);
      expect(held.code).toBe(0);
      const report = JSON.parse(held.stdout) as SyncReport;
      expect(report.held?.status).toBe("held");
      const listed = await runMain(["syncs", "--json", ...args], backend.cliEnv);
      expect((JSON.parse(listed.stdout) as { syncId: string; held?: { status: string } }[]).find((r) => r.syncId === report.syncId)?.held?.status).toBe("held");
      const published = await runMain(["publish", report.syncId, ...args], backend.cliEnv);
      expect(published.code).toBe(0);
      expect(published.stdout).toContain(`partition(s) published, 0 refused (undo with: lakeswap rollback --sync ${report.syncId})`);
      expect((await state()).raw.find((r) => r.startsWith("2026-11-03"))).toMatch(/^2026-11-03\|3\.00,/);
    });

    it("leaves no scratch table behind, after a held sync or a failed one; tables never lists one, and gc or the next held sync drops one a killed sync left", async () => {
      const catalogNames = async (): Promise<string[]> => (await lake.parts.catalog.listTables()).map((t) => t.name).sort();
      const userTables = ["orders_monthly", "orders_raw", "orders_stage"];
      expect(await catalogNames()).toEqual(userTables);
      // A held sync (the dataset publishes all_or_nothing since the test above) whose stage layer fails to build.
      ws.writeSql("stage.sql", STAGE_SQL.replace("status = 'completed'", "no_such_column = 'completed'"));
      const failed = await sync(withAmount(BASE, 1, "8.00"));
      expect(failed.held?.reason).toMatch(/all_or_nothing/);
      expect(failed.partitions.filter((p) => p.action === "failed").map((p) => p.table)).toContain("orders_stage");
      expect(await catalogNames()).toEqual(userTables);
      ws.writeSql("stage.sql", STAGE_SQL);
      const held = await sync(withAmount(BASE, 1, "8.00"), { hold: true });
      expect(held.totals.failed).toBe(0);
      expect([...new Set(held.partitions.filter((p) => p.staged).map((p) => p.table))]).toEqual(["orders_raw", "orders_stage", "orders_monthly"]);
      expect(await catalogNames()).toEqual(userTables);

      // What a sync killed while a layer built would leave: a scratch table over a staged table, and one over a table since dropped.
      const raw = (await lake.parts.catalog.getTable("orders_raw"))!;
      await lake.parts.catalog.createTable({ ...raw, name: "orders_raw__held_0a1b2c" });
      await lake.parts.catalog.createTable({ ...raw, name: "gone_table__held_abcdef" });
      expect((await lake.listTables()).map((t) => t.name)).toEqual(userTables);
      const listed = await runMain(["tables", ...backend.cliArgs], backend.cliEnv);
      expect(listed.code).toBe(0);
      expect(listed.stdout).not.toContain("__held_");
      await expect(lake.table("orders_raw__held_0a1b2c")).rejects.toThrow(/table 'orders_raw__held_0a1b2c' does not exist/);
      await expect(lake.createTable({ ...raw, name: "mine__held_123abc" })).rejects.toThrow(/table name 'mine__held_123abc' is reserved/);
      // The next held sync of the dataset drops the one over its table (on AWS, where it builds through scratch tables); gc drops both.
      await sync(withAmount(BASE, 1, "9.00"), { hold: true });
      if (!lake.parts.engine.capabilities.readsRunFiles) expect(await catalogNames()).toEqual(["gone_table__held_abcdef", ...userTables]);
      await collectGarbage(lake, undefined);
      expect(await catalogNames()).toEqual(userTables);
    });
  });
}
