import { writeFileSync } from "node:fs";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Lake } from "../../src/lake/lake.js";
import { OWN_BACKEND_FACTORIES, selectedBackends, type AwsServices, type TestBackend } from "../support/lake-fixture.js";
import { PipelineWorkspace, orders, pipelineYaml, type OrderRow } from "../support/pipeline-fixture.js";
import { rollbackSync } from "../../src/lake/operations/rollback.js";

// Issue 25 item 23: a sync or a sync rollback of more partitions than one Glue batch call carries (100), and a Glue
// batch whose entries keep failing: every partition must end where the report says, on the catalog itself.

/** The orders pipeline with its raw layer only (no derived layers: no Athena builds, only landing and Glue batches). */
function rawOnlyYaml(): string {
  const yaml = pipelineYaml({ concurrency: 4 });
  return yaml.slice(0, yaml.indexOf("    layers:"));
}

/** `day -> "id:amount,..."` of what orders_raw holds. */
async function rawByDay(lake: Lake): Promise<Map<string, string>> {
  const rows = (await lake.query("SELECT day, string_agg(CAST(order_id AS VARCHAR) || ':' || CAST(amount AS VARCHAR), ',' ORDER BY order_id) FROM orders_raw GROUP BY day")).rows;
  return new Map(rows.map(([day, list]) => [String(day), String(list)]));
}

function deliveryByDay(rows: readonly OrderRow[]): Map<string, string> {
  const days = new Map<string, OrderRow[]>();
  for (const r of rows) days.set(r.ts.slice(0, 10), [...(days.get(r.ts.slice(0, 10)) ?? []), r]);
  return new Map([...days].map(([day, list]) => [day, list.sort((a, b) => a.id - b.id).map((r) => `${r.id}:${Number(r.amount).toFixed(2)}`).join(",")]));
}

/** `days` days from 2026-11-01 on (more than a month's worth wrap into the next months), `perDay` orders each. */
function manyDays(days: number, perDay: number, amount: (id: number) => string): OrderRow[] {
  const start = Date.UTC(2026, 10, 1);
  return Array.from({ length: days }, (_, d) => new Date(start + d * 86_400_000).toISOString().slice(0, 10)).flatMap((day, d) =>
    Array.from({ length: perDay }, (_, i) => {
      const id = (d + 1) * 100 + i;
      return { id, customer: i, amount: amount(id), status: "completed", ts: `${day} 10:00:00`, updatedAt: "2026-11-10 06:00:00" };
    }),
  );
}

describe.runIf(selectedBackends().includes("aws"))("Glue batches of a sync and of its rollback", () => {
  let backend: TestBackend & { services: AwsServices };
  let workspace: PipelineWorkspace;
  let lake: Lake;
  beforeEach(async () => {
    // Services of its own: the test counts Glue's batch calls and makes some fail.
    backend = (await OWN_BACKEND_FACTORIES.aws!()) as TestBackend & { services: AwsServices };
    workspace = new PipelineWorkspace();
    writeFileSync(workspace.configFile, rawOnlyYaml());
    lake = await backend.open({ graceMs: 0, leaseWaitMs: 0 });
  });
  afterEach(async () => {
    await lake.close();
    await backend.cleanup();
    workspace.cleanup();
  });

  it("rollback --sync of a sync that moved 150 partitions of one table moves all 150 back (two batch calls)", async () => {
    const a = manyDays(150, 2, (id) => `${id % 97}.10`);
    const b = manyDays(150, 2, (id) => `${id % 89}.90`);
    await workspace.pipeline(lake, { inputs: [workspace.delivery(a)] }).sync();
    const second = await workspace.pipeline(lake, { inputs: [workspace.delivery(b)] }).sync();
    expect(second.partitions.filter((p) => p.action === "build")).toHaveLength(150);
    expect(await rawByDay(lake)).toEqual(deliveryByDay(b));

    const updates = () => backend.services.glue.calls.filter((c) => c.operation === "BatchUpdatePartition").length;
    const before = updates();
    const rolled = await rollbackSync(lake, "last");
    expect(rolled.partitions.filter((p) => p.action === "rolled back")).toHaveLength(150);
    expect(updates() - before, "two batch calls at least (100 + 50)").toBeGreaterThanOrEqual(2);
    // Every partition, the ones past the first batch of 100 too, holds delivery A again.
    expect(await rawByDay(lake)).toEqual(deliveryByDay(a));
  }, 180_000);

  it("a sync whose Glue batch entries keep failing reports exactly those partitions failed, and the others moved, as the catalog holds them", async () => {
    const a = orders(10, 3);
    const b = orders(10, 3).map((r) => ({ ...r, amount: `${r.id}.75` }));
    await workspace.pipeline(lake, { inputs: [workspace.delivery(a)] }).sync();
    // Entries 3 and 7 of the batch fail (days 04 and 08); each retry round sends only them, and they fail again.
    backend.services.glue.failNext("BatchUpdatePartition", { entries: [3, 7], error: "InternalServiceException" });
    backend.services.glue.failNext("BatchUpdatePartition", { entries: [0, 1], error: "InternalServiceException", times: 10 });
    const report = await workspace.pipeline(lake, { inputs: [workspace.delivery(b)] }).sync();

    const failed = report.partitions.filter((p) => p.action === "failed").map((p) => p.partition);
    const moved = report.partitions.filter((p) => p.action === "build").map((p) => p.partition);
    expect(failed).toEqual(["day=2026-11-04", "day=2026-11-08"]);
    expect(moved).toHaveLength(8);
    expect(report.partitions.find((p) => p.action === "failed")?.error).toMatch(/did not move/);
    // The catalog agrees with the report: the failed days still hold A, the moved ones B.
    const [before, after, now] = [deliveryByDay(a), deliveryByDay(b), await rawByDay(lake)];
    for (const [day, rows] of now) expect(rows, day).toBe(failed.includes(`day=${day}`) ? before.get(day) : after.get(day));
    for (const partition of moved) expect((await lake.pointer("orders_raw", partition))?.runId).toBe(report.partitions.find((p) => p.partition === partition)?.run);
  }, 180_000);
});
