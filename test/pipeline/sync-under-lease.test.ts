import { writeFileSync, mkdirSync } from "node:fs";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { openEmbeddedLake } from "../../src/open/open-lake.js";
import { processStopped } from "../support/crash-kit.js";
import { spawnCli } from "../support/lake-fixture.js";
import { runMain } from "../support/main-cli.js";
import { PipelineWorkspace, orders, type OrderRow } from "../support/pipeline-fixture.js";

// Two writers of one pipeline, and a sync killed half-way: what the lake and the sync records say afterwards.

let workspace: PipelineWorkspace | undefined;
/** Children a test stopped: killed after it, should it fail before it let them go on. */
const stopped: ReturnType<typeof spawnCli>[] = [];
afterEach(() => {
  for (const child of stopped.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  workspace?.cleanup();
  workspace = undefined;
});

/** Order ids of a delivery, the way the raw table must hold them if it holds exactly that delivery. */
function ids(rows: readonly OrderRow[]): number[] {
  return rows.map((r) => r.id).sort((a, b) => a - b);
}

async function rawIds(lakeDir: string): Promise<number[]> {
  const lake = await openEmbeddedLake(lakeDir);
  try {
    return (await lake.query("SELECT order_id FROM orders_raw ORDER BY order_id")).rows.map((r) => Number(r[0]));
  } finally {
    await lake.close();
  }
}

function exited(child: ReturnType<typeof spawnCli>): Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string; stdout: string }> {
  let stderr = "";
  let stdout = "";
  child.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  child.stdout?.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
  return new Promise((resolve) => child.on("close", (code, signal) => resolve({ code, signal, stderr, stdout })));
}

/** Waits until the child says on stderr that it stopped itself at fault point `point` (LAKESWAP_FAULT=<point>:stop). */
async function untilStopped(child: ReturnType<typeof spawnCli>, point: string): Promise<void> {
  stopped.push(child);
  await untilOutput(child, new RegExp(`fault point ${point} reached: stopping \\(pid ${child.pid}\\)`));
  // Its word comes just before its SIGSTOP: a SIGCONT sent before that takes effect would be lost.
  await processStopped(child.pid!);
}

/** Waits until the child's stderr matches `pattern`; fails if the child ends first. */
function untilOutput(child: ReturnType<typeof spawnCli>, pattern: RegExp): Promise<void> {
  let stderr = "";
  return new Promise((resolve, reject) => {
    const check = (chunk: Buffer) => {
      stderr += chunk.toString();
      if (pattern.test(stderr)) {
        child.stderr?.off("data", check);
        child.off("close", ended);
        resolve();
      }
    };
    const ended = () => reject(new Error(`the sync ended before its stderr matched ${pattern}: ${stderr}`));
    child.stderr?.on("data", check);
    child.once("close", ended);
  });
}

describe("a sync decides under the leases of the tables it writes", () => {
  it("a sync that waited for another one plans against what that one left: the lake ends as exactly one delivery", async () => {
    workspace = new PipelineWorkspace({ concurrency: 4 });
    const a = orders(8, 4);
    // Delivery B: the same days, five rows a day, other amounts.
    const b = orders(8, 5).map((r) => ({ ...r, amount: `${r.id}.50` }));
    const [fileA, fileB] = [workspace.delivery(a), workspace.delivery(b)];
    const sync = (file: string, env: Record<string, string> = {}, extra: string[] = []) =>
      spawnCli(["--lake", workspace!.lakeDir, "sync", "-c", workspace!.configFile, "--input", file, "--json", ...extra], env);

    const first = await runMain(["--lake", workspace.lakeDir, "sync", "-c", workspace.configFile, "--input", fileA, "--json"]);
    expect(first.code, first.stderr).toBe(0);
    expect(await rawIds(workspace.lakeDir)).toEqual(ids(a));

    // B stops (SIGSTOP) at its first layer's after-build, holding the tables, so A starts (and must wait) while B has them;
    // B goes on once A is seen waiting.
    const childB = sync(fileB, { LAKESWAP_FAULT: "after-build:stop@1" });
    const slowB = exited(childB);
    await untilStopped(childB, "after-build");
    const childA = sync(fileA, { LAKESWAP_WAIT: "2m" });
    const againA = exited(childA);
    await untilOutput(childA, /waiting for table/);
    childB.kill("SIGCONT");
    const [resultB, resultA] = [await slowB, await againA];
    expect(resultB.code, resultB.stderr).toBe(0);
    expect(resultA.code, resultA.stderr).toBe(0);
    expect(resultA.stderr).toMatch(/waiting for table/);
    // A decided after B had finished, so it rebuilt every day: the lake holds A, all of it, and nothing of B.
    const reportA = JSON.parse(resultA.stdout) as { partitions: { layer: string; action: string; reason: string }[] };
    expect(reportA.partitions.filter((p) => p.layer === "raw").map((p) => `${p.action} ${p.reason}`)).toEqual(Array(8).fill("build content changed"));
    expect(await rawIds(workspace.lakeDir)).toEqual(ids(a));
  });

  it("with --no-wait the second sync exits 4 (lease) and changes nothing", async () => {
    workspace = new PipelineWorkspace({ concurrency: 2 });
    const a = orders(4, 3);
    const b = orders(4, 4);
    const [fileA, fileB] = [workspace.delivery(a), workspace.delivery(b)];
    // The first sync stops (SIGSTOP) after its first build, holding the tables, until the second has been refused.
    const child = spawnCli(["--lake", workspace.lakeDir, "sync", "-c", workspace.configFile, "--input", fileA], { LAKESWAP_FAULT: "after-build:stop@1" });
    const slow = exited(child);
    await untilStopped(child, "after-build");
    const second = await runMain(["--lake", workspace.lakeDir, "sync", "--no-wait", "-c", workspace.configFile, "--input", fileB]);
    child.kill("SIGCONT");
    const first = await slow;
    expect(first.code, first.stderr).toBe(0);
    expect(second.code, second.stderr).toBe(4);
    expect(second.stderr).toMatch(/orders_/);
    expect(await rawIds(workspace.lakeDir)).toEqual(ids(a));
  });
});

describe("a layer of another pipeline that reads a table whole (inputs.tables)", () => {
  /** Pipeline B: three reference rows, each with what the stats layer reads of pipeline A's orders_raw, whole. */
  function pipelineB(ws: PipelineWorkspace): string {
    mkdirSync(path.join(ws.dir, "ref"));
    writeFileSync(path.join(ws.dir, "ref", "ref.csv"), "p,k\ng1,1\ng2,2\ng3,3\n");
    ws.writeSql("stats.sql", "SELECT r.k, (SELECT count(*) FROM orders_raw) AS n, (SELECT CAST(sum(order_id) AS BIGINT) FROM orders_raw) AS ids FROM ref_raw r WHERE grp = {{ grp }}\n");
    const file = path.join(ws.dir, "b.yaml");
    writeFileSync(
      file,
      `datasets:
  ref:
    source: {format: csv, path: ref/*.csv}
    columns: {p: VARCHAR, k: BIGINT}
    partition: {grp: "p"}
    layers:
      - name: stats
        sql: sql/stats.sql
        columns: {k: BIGINT, n: BIGINT, ids: BIGINT}
        inputs:
          tables: [orders_raw]
`,
    );
    return file;
  }

  async function stats(lakeDir: string): Promise<string[]> {
    const lake = await openEmbeddedLake(lakeDir);
    try {
      return (await lake.query("SELECT grp, n, ids FROM ref_stats ORDER BY grp")).rows.map((r) => r.map(String).join(" "));
    } finally {
      await lake.close();
    }
  }

  it("is built from a state of it some finished batch left, never from one half-way through its writer's moves", async () => {
    workspace = new PipelineWorkspace({ concurrency: 2 });
    const ws = workspace;
    const configB = pipelineB(ws);
    const a = orders(30, 2);
    const b = orders(30, 3);
    const syncA = (file: string, env: Record<string, string> = {}) => spawnCli(["--lake", ws.lakeDir, "sync", "-c", ws.configFile, "--input", file, "--json"], env);
    const syncB = () => spawnCli(["--lake", ws.lakeDir, "sync", "-c", configB, "--json"]);
    const first = await exited(syncA(ws.delivery(a)));
    expect(first.code, first.stderr).toBe(0);
    const firstB = await exited(syncB());
    expect(firstB.code, firstB.stderr).toBe(0);
    const whole = (rows: readonly OrderRow[]) => ["g1", "g2", "g3"].map((g) => `${g} ${rows.length} ${rows.reduce((sum, r) => sum + r.id, 0)}`);
    expect(await stats(ws.lakeDir)).toEqual(whole(a));

    // A's next delivery changes every day of orders_raw; A stops (SIGSTOP) after some 12 of its raw batch's 30 moves.
    const childA = syncA(ws.delivery(b), { LAKESWAP_FAULT: "during-batch-swap:stop@12" });
    const slowA = exited(childA);
    await untilStopped(childA, "during-batch-swap");
    const childB = syncB();
    const resultB = exited(childB);
    // B waits for A's batch of moves (not for A's whole sync): A goes on once B ended (it read orders_raw as it was) or
    // has had the time to (it is waiting).
    await Promise.race([resultB, new Promise((resolve) => setTimeout(resolve, 6000))]);
    childA.kill("SIGCONT");
    const [doneA, doneB] = [await slowA, await resultB];
    expect(doneA.code, doneA.stderr).toBe(0);
    expect(doneB.code, doneB.stderr).toBe(0);
    // B's stats are orders_raw as delivery a or delivery b left it, whole: never some days of one and the rest of the other.
    expect([whole(a), whole(b)]).toContainEqual(await stats(ws.lakeDir));
    // And they are what B signed: the next sync of B finds nothing to do, as orders_raw is now delivery b.
    const again = await exited(syncB());
    expect(again.code, again.stderr).toBe(0);
    expect(await stats(ws.lakeDir)).toEqual(whole(b));
  });
});

describe("a sync killed half-way", () => {
  it("is recorded before its first pointer moves, listed as unfinished, and rolled back by rollback --sync last", async () => {
    workspace = new PipelineWorkspace({ concurrency: 1 });
    const a = orders(6, 3);
    const b = orders(6, 3).map((r) => ({ ...r, amount: `${r.id}.25` }));
    const first = await runMain(["--lake", workspace.lakeDir, "sync", "-c", workspace.configFile, "--input", workspace.delivery(a), "--json"]);
    expect(first.code, first.stderr).toBe(0);
    const firstId = (JSON.parse(first.stdout) as { syncId: string }).syncId;

    // Killed inside raw's batch, right after its fourth pointer rename (raw days 1-4 moved, 5 and 6 not).
    const killed = await exited(
      spawnCli(["--lake", workspace.lakeDir, "sync", "-c", workspace.configFile, "--input", workspace.delivery(b)], { LAKESWAP_FAULT: "during-batch-swap:kill@4" }),
    );
    expect(killed.signal).toBe("SIGKILL");
    const listed = await runMain(["--lake", workspace.lakeDir, "syncs", "--json"]);
    const records = JSON.parse(listed.stdout) as { syncId: string; finishedAt?: string; moves: { partition: string; pending?: boolean }[] }[];
    expect(records).toHaveLength(2);
    const [newest] = records;
    expect(newest!.syncId).not.toBe(firstId);
    expect(newest!.finishedAt).toBeUndefined();
    // The whole batch was recorded as intended before its first pointer moved.
    expect(newest!.moves.map((m) => [m.partition, m.pending])).toEqual(
      ["day=2026-11-01", "day=2026-11-02", "day=2026-11-03", "day=2026-11-04", "day=2026-11-05", "day=2026-11-06"].map((p) => [p, true]),
    );
    const text = await runMain(["--lake", workspace.lakeDir, "syncs"]);
    expect(text.stdout).toMatch(/did not finish/);

    // Days 1-4 hold B now, 5-6 still A. The rollback (a writing command) first finishes the batch the dead sync
    // recorded in the outbox, then rolls back every pointer of the last sync: A everywhere, the first sync left alone.
    const rolled = await runMain(["--lake", workspace.lakeDir, "rollback", "--sync", "last", "--json"]);
    expect(rolled.code, rolled.stderr).toBe(0);
    const result = JSON.parse(rolled.stdout) as { syncId: string; partitions: { partition: string; action: string }[] };
    expect(result.syncId).toBe(newest!.syncId);
    expect(result.partitions.filter((p) => p.action === "rolled back")).toHaveLength(6);
    const lake = await openEmbeddedLake(workspace.lakeDir);
    try {
      const amounts = (await lake.query("SELECT order_id, CAST(amount AS VARCHAR) FROM orders_raw ORDER BY order_id")).rows;
      expect(amounts).toEqual(a.map((r) => [r.id, r.amount]));
    } finally {
      await lake.close();
    }
  });
});
