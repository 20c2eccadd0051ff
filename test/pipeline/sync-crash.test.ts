import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { Lake } from "../../src/lake/lake.js";
import { runCli, selectedBackends, type CliResult, type TestBackend } from "../support/lake-fixture.js";
import { PipelineWorkspace, orders, type OrderRow } from "../support/pipeline-fixture.js";
import { lakeDirOf } from "../support/crash-kit.js";
import { runMain, syncedOnce } from "../support/main-cli.js";

// Invariants 1, 2 and 6 for a sync that moves many pointers as one batch: killed at any point (inside a batch
// too), every partition of every layer is whole, the old delivery's or the new one's; the rerun converges to
// the new delivery and leaves nothing behind; a third sync does nothing.

const DAYS = 12;
const A = orders(DAYS, 4);
// Delivery B changes every day: other amounts and one more row a day.
const B = orders(DAYS, 5).map((r) => ({ ...r, amount: `${r.id}.50` }));

/** Kill points of a sync of three layers: `@N` is the Nth time the point is reached (raw's batch is the first, stage's the second). */
const POINTS: Record<string, readonly string[]> = {
  local: [
    "lease-acquired", "during-build", "after-build", "after-outbox", "before-swap-rename@5", "during-batch-swap@7", "after-swap", "after-manifest",
    "after-build@2", "after-outbox@2", "during-batch-swap@15", "after-swap@2",
    // Stage's manifests and acknowledgement, written while the analytics layer builds.
    "after-manifest@2",
  ],
  // Where the AWS adapters differ (uploads, Glue's batch calls): the first Glue call is raw's batch, the second stage's.
  // Each of these runs three syncs through Athena, so the points the core alone decides are left to the local run.
  aws: ["during-build", "after-outbox", "during-batch-swap", "after-manifest", "during-batch-swap@2"],
};

/** `day -> sorted "id:amount"` of the rows a table of orders holds, per day. */
type ByDay = Map<string, string[]>;

function byDay(rows: readonly OrderRow[], only: (r: OrderRow) => boolean = () => true): ByDay {
  const days: ByDay = new Map();
  for (const r of rows.filter(only)) {
    const day = r.ts.slice(0, 10);
    days.set(day, [...(days.get(day) ?? []), `${r.id}:${Number(r.amount).toFixed(2)}`]);
  }
  for (const list of days.values()) list.sort();
  return days;
}

async function tableByDay(lake: Lake, table: string): Promise<ByDay> {
  const result = await lake.query(`SELECT day, order_id, CAST(amount AS VARCHAR) FROM ${table}`);
  const days: ByDay = new Map();
  for (const [day, id, amount] of result.rows) {
    days.set(String(day), [...(days.get(String(day)) ?? []), `${Number(id)}:${Number(amount).toFixed(2)}`]);
  }
  for (const list of days.values()) list.sort();
  return days;
}

const completed = (r: OrderRow): boolean => r.status === "completed";

/** Every layer holds delivery B, and no pointer move is left pending. */
async function expectDeliveryB(backend: TestBackend): Promise<void> {
  const lake = await backend.open();
  try {
    expect(await tableByDay(lake, "orders_raw")).toEqual(byDay(B));
    expect(await tableByDay(lake, "orders_stage")).toEqual(byDay(B, completed));
    const monthly = await lake.query("SELECT sum(orders) FROM orders_monthly");
    expect(Number(monthly.rows[0]?.[0])).toBe(B.filter(completed).length);
    expect(await lake.pendingChanges(), "no pointer move is left pending").toEqual([]);
  } finally {
    await lake.close();
  }
}

describe.each(selectedBackends())("a sync killed mid-batch on the %s backend", (backendName) => {
  // Every kill point starts from the same lake, delivery A synced once: the sync is run once and each point takes a
  // copy of the lake it made (cloneBackend), with the one workspace (config and deliveries) it was synced from.
  const ws = new PipelineWorkspace({ concurrency: 3 });
  const [fileA, fileB] = [ws.delivery(A), ws.delivery(B)];
  const syncArgs = (backend: TestBackend, file: string): string[] => [...backend.cliArgs, "sync", "-c", ws.configFile, "--input", file, "--json"];
  /** A sync in a child process: the one a fault point kills, and its rerun (which must find what the dead one left in TMPDIR). */
  const sync = (backend: TestBackend, file: string, env: Record<string, string> = {}): Promise<CliResult> =>
    runCli(syncArgs(backend, file), { ...backend.cliEnv, ...env });
  /** A sync in this process (`main(argv)`). */
  const syncHere = (backend: TestBackend, file: string): Promise<CliResult> => runMain(syncArgs(backend, file), backend.cliEnv);
  const syncedA = syncedOnce(backendName, (backend) => syncArgs(backend, fileA));
  afterAll(async () => {
    await syncedA.cleanup();
    ws.cleanup();
  });

  it.concurrent.each(POINTS[backendName] ?? [])("killed at %s: each partition is whole, old or new; the rerun converges and a resend does nothing", async (point) => {
    const backend = await syncedA.clone();
    try {
      const [name, nth] = point.split("@");
      // The killed sync and its rerun get a temporary folder of their own: what the killed one leaves there (a landing's
      // spill folder; on S3, a stage or a run being uploaded) must be gone once the rerun is done.
      const tmp = mkdtempSync(path.join(tmpdir(), "lakeswap-crash-tmp-"));
      const killed = await sync(backend, fileB, { LAKESWAP_FAULT: `${name}:kill${nth ? `@${nth}` : ""}`, LAKESWAP_GRACE: "0", TMPDIR: tmp });
      expect(killed.signal, `the sync reached ${point}; stderr: ${killed.stderr}`).toBe("SIGKILL");
      // What readers see now, without finishing anything the dead writer left (read-only: no outbox replay).
      const reader = await backend.open({ readOnly: true });
      try {
        for (const [table, filter] of [["orders_raw", undefined], ["orders_stage", completed]] as const) {
          const seen = await tableByDay(reader, table);
          const [before, after] = [byDay(A, filter), byDay(B, filter)];
          expect([...seen.keys()].sort(), `${table}: every day is there`).toEqual([...before.keys()].sort());
          for (const [day, rows] of seen) {
            expect([before.get(day), after.get(day)], `${table}/day=${day} is one delivery's, whole`).toContainEqual(rows);
          }
        }
      } finally {
        await reader.close();
      }

      const rerun = await sync(backend, fileB, { LAKESWAP_GRACE: "0", TMPDIR: tmp });
      expect(rerun.code, rerun.stderr).toBe(0);
      expect(readdirSync(tmp).filter((entry) => entry.startsWith("lakeswap-")), "no scratch folder of the killed sync is left").toEqual([]);
      rmSync(tmp, { recursive: true, force: true });
      await expectDeliveryB(backend);
      const dir = lakeDirOf(backend);
      if (dir !== undefined) expect(readdirSync(path.join(dir, "_lakeswap", "tmp")), "no staged run, link or temporary file is left").toEqual([]);

      const resend = await syncHere(backend, fileB);
      expect(resend.code, resend.stderr).toBe(0);
      const report = JSON.parse(resend.stdout) as { totals: { built: number; failed: number; skipped: number } };
      expect(report.totals).toMatchObject({ built: 0, failed: 0, skipped: DAYS * 2 + 1 });
    } finally {
      await backend.cleanup();
    }
  }, 300_000);

  // The runs' manifests and the outbox acknowledgement come after the moves, while the next layer builds: a failure
  // there fails the sync and says that the moves stand; nothing is lost, and the rerun finishes what is left.
  it("a manifest write that fails after stage's moves fails the sync, saying the moves stand; the rerun converges", async () => {
    const backend = await syncedA.clone();
    try {
      const failed = await sync(backend, fileB, { LAKESWAP_FAULT: "after-manifest:error@2", LAKESWAP_GRACE: "0" });
      expect(failed.code, failed.stdout).not.toBe(0);
      expect(failed.stderr).toMatch(/the pointers of \d+ partition\(s\) of table orders_stage moved, but their runs' manifests could not be recorded \(fault injected at after-manifest\)/);
      const reader = await backend.open({ readOnly: true });
      try {
        expect(await tableByDay(reader, "orders_stage"), "stage's moves stand").toEqual(byDay(B, completed));
      } finally {
        await reader.close();
      }
      const rerun = await syncHere(backend, fileB);
      expect(rerun.code, rerun.stderr).toBe(0);
      const report = JSON.parse(rerun.stdout) as { totals: { built: number; failed: number } };
      // Nothing: the failed sync built the analytics layer too (it plans against the stage's states the writer keeps,
      // not against its manifests), and the rerun's replay of the stage's outbox entry recorded what was left.
      expect(report.totals).toMatchObject({ built: 0, failed: 0 });
      await expectDeliveryB(backend);
    } finally {
      await backend.cleanup();
    }
  }, 300_000);
});
