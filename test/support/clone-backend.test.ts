import { describe, expect, it } from "vitest";
import type { Lake } from "../../src/lake/lake.js";
import { collectGarbage } from "../../src/lake/operations/gc.js";
import { readHistory } from "../../src/lake/operations/history.js";
import { rollbackPartition } from "../../src/lake/operations/rollback.js";
import { BACKEND_FACTORIES, cloneBackend, selectedBackends, type TestBackend } from "./lake-fixture.js";
import { PipelineWorkspace, orders } from "./pipeline-fixture.js";

// The crash suites run their shared setup once and give each kill point a clone of the lake it made (cloneBackend): a
// clone must read, sync, roll back and collect garbage exactly as its source does, and leave the source as it was.

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
async function exercise(backend: TestBackend, ws: PipelineWorkspace, delivery: string, known: ReadonlySet<string>): Promise<unknown[]> {
  const lake = await backend.open({ graceMs: 0 });
  try {
    const steps: unknown[] = [await observe(lake, known)];
    const report = await ws.pipeline(lake, { inputs: [delivery] }).sync();
    steps.push({ ...report.totals, seconds: undefined }, await observe(lake, known));
    const [first] = await readHistory(lake, "orders_raw");
    const rolledBack = await rollbackPartition(lake, "orders_raw", first!.partition);
    steps.push(known.has(rolledBack.toRunId), rolledBack.rows, await observe(lake, known));
    const gc = await collectGarbage(lake, undefined, { graceMs: 0 });
    steps.push(gc.map((p) => [p.table, p.partition, p.kept.length, p.removed.length]), await observe(lake, known));
    return steps;
  } finally {
    await lake.close();
  }
}

describe.each(selectedBackends())("a clone of a %s lake", (backendName) => {
  it("reads, syncs, rolls back and collects garbage exactly as its source, and leaves the source as it was", async () => {
    const source = await BACKEND_FACTORIES[backendName]!();
    const ws = new PipelineWorkspace();
    const clones: TestBackend[] = [];
    try {
      const [a, b, c] = [ws.delivery(orders(3, 2)), ws.delivery(orders(3, 3)), ws.delivery(orders(4, 2))];
      const known = new Set<string>();
      const lake = await source.open();
      try {
        for (const delivery of [a, b]) await ws.pipeline(lake, { inputs: [delivery] }).sync();
        for (const table of await lake.listTables()) for (const p of await readHistory(lake, table.name)) for (const r of p.runs) known.add(r.runId);
      } finally {
        await lake.close();
      }
      expect(known.size).toBeGreaterThan(0);

      clones.push(await cloneBackend(source));
      // The clone first, so that the source's own steps show the clone changed nothing of it.
      const cloned = await exercise(clones[0]!, ws, c, known);
      const original = await exercise(source, ws, c, known);
      expect(original[3], "the rollback went back to a run the clone copied").toBe(true);
      expect(cloned).toEqual(original);
    } finally {
      ws.cleanup();
      for (const clone of clones) await clone.cleanup();
      await source.cleanup();
    }
  }, 300_000);
});
