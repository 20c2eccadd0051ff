import { hostname } from "node:os";
import { GetObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Lake, PartitionHistory, ReplaceResult } from "../../src/lake/lake.js";
import type { LeaseRecord } from "../../src/lake/lease.js";
import { defineTable } from "../../src/model/table.js";
import { advanceClock, resetClock } from "../../src/shared/clock.js";
import {
  Child, lakeDirOf, leaseHolder, readManifest, runFolders, spawnScript, until, type PartitionView,
} from "../support/crash-kit.js";
import { BACKEND_FACTORIES, OWN_BACKEND_FACTORIES, type AwsServices, runCli, selectedBackends, spawnCli, type CliResult, type TestBackend } from "../support/lake-fixture.js";
import { runMain } from "../support/main-cli.js";
import { rowsSelect } from "../support/rows-sql.js";
import { replacePartition } from "../../src/lake/operations/replace.js";
import { readHistory } from "../../src/lake/operations/history.js";
import { rollbackPartition } from "../../src/lake/operations/rollback.js";

// Invariant 7: one writer per table at a time. A second writer waits or fails with a clear message, never
// interleaves; a lease whose holder died or stopped renewing it is taken over, and a writer that lost its
// lease never moves a pointer.

const TABLE = "orders";
const DAY = "2026-11-01";
const PARTITION = `day=${DAY}`;
const content = (tag: string, rows: number) => ({ tag, rows, select: rowsSelect(rows, `, '${tag}' AS tag`) });
const OLD = content("a", 100);
const NEW = content("b", 120);
const NEXT = content("c", 130);
/** A build that takes a few seconds (about 100 MB of Parquet). */
const LARGE = { rows: 3_000_000, select: rowsSelect(3_000_000, ", md5(CAST(id AS VARCHAR)) AS tag") };
/** Writer 1's build where the engine holds its query until the test lets it go (the Athena emulator): 30,000 rows. */
const LONG_HELD = { rows: 30_000, select: rowsSelect(30_000, ", md5(CAST(id AS VARCHAR)) AS tag") };

interface CliError {
  readonly error: { readonly code: string; readonly message: string };
}
type WriterAnswer = { ok: true; result: ReplaceResult } | { ok: false; code: string; message: string };

describe.each(selectedBackends())("the writer lease on the %s backend", (backendName) => {
  let backend: TestBackend;
  let lake: Lake;
  let old: string;
  const children: Child[] = [];

  /** A command in this process (main(argv)); `spawned` runs it in a child, for one that is killed or must print warnings as a process does. */
  const cli = (args: readonly string[], env: Record<string, string> = {}): Promise<CliResult> =>
    runMain([...backend.cliArgs, ...args], { ...backend.cliEnv, ...env });
  const spawned = (args: readonly string[], env: Record<string, string> = {}): Promise<CliResult> =>
    runCli([...backend.cliArgs, ...args], { ...backend.cliEnv, ...env });
  const replaceArgs = (select: string, ...flags: string[]) => ["replace", TABLE, "--partition", PARTITION, "--sql", select, "--json", ...flags];

  async function view(): Promise<PartitionView> {
    const [rows, tags, tag] = (await lake.query(`SELECT count(*), count(DISTINCT tag), min(tag) FROM ${TABLE} WHERE day = '${DAY}'`)).rows[0] ?? [];
    return { rows: Number(rows), tags: Number(tags), tag: (tag as string | null) ?? null };
  }

  /** Waits until the process `pid` holds the table's lease (it has started writing). */
  async function leaseTakenBy(pid: number): Promise<LeaseRecord | undefined> {
    const dir = lakeDirOf(backend);
    if (dir === undefined) {
      // On S3: read the lease object itself (a run's files appear only once its build is done), every 50 ms: each read is
      // a request to the emulated S3, and the child takes seconds to start.
      const s3 = new S3Client((backend as unknown as { services: AwsServices }).services.s3.clientConfig);
      const key = `${backend.cliEnv.DATA_OUTPUT_S3_PREFIX}/_lakeswap/leases/${TABLE}.json`;
      return until(`pid ${pid} to take the lease`, async () => {
        try {
          const object = await s3.send(new GetObjectCommand({ Bucket: backend.cliEnv.DATA_OUTPUT_S3_BUCKET, Key: key }));
          const holder = JSON.parse(await object.Body!.transformToString()) as LeaseRecord;
          return holder.pid === pid ? holder : undefined;
        } catch {
          return undefined;
        }
      }, 30_000, 50);
    }
    return until(`pid ${pid} to take the lease`, async () => {
      const holder = await leaseHolder(dir, TABLE);
      return holder?.pid === pid ? holder : undefined;
    });
  }

  /** The one test that steers the AWS services (it delays Athena's UNLOADs): it gets services of its own, the others share the run's. */
  const DELAYS_ATHENA = "while a writer holds the lease, --no-wait fails at once naming it, --wait waits and then succeeds; the runs never interleave";

  beforeEach(async ({ task }) => {
    backend = await (task.name === DELAYS_ATHENA ? OWN_BACKEND_FACTORIES : BACKEND_FACTORIES)[backendName]!();
    lake = await backend.open();
    await lake.createTable(
      defineTable({ name: TABLE, columns: [{ name: "id", type: "BIGINT" }, { name: "tag", type: "VARCHAR" }], partitionKeys: ["day"] }),
    );
    old = (await replacePartition(lake, TABLE, PARTITION, { select: OLD.select })).runId;
  });

  afterEach(async () => {
    for (const child of children.splice(0)) {
      child.kill("SIGCONT");
      child.kill("SIGKILL");
      await child.exited;
    }
    await lake.close();
    await backend.cleanup();
  });

  it(DELAYS_ATHENA, async () => {
    // On the emulated AWS services the build is an UNLOAD that would finish at once: it keeps running until writer 2
    // is seen waiting (then it ends at once; the minute is only a bound).
    const athena = "services" in backend ? (backend as unknown as { services: AwsServices }).services.athena : undefined;
    athena?.delayNext(60_000, { match: /UNLOAD/ });
    // A build that takes seconds where nothing else keeps it running (DuckDB); the held UNLOAD needs no such size.
    const large = athena ? LONG_HELD : LARGE;
    const writer1 = new Child(spawnCli([...backend.cliArgs, ...replaceArgs(large.select)], backend.cliEnv));
    children.push(writer1);
    const holder = await leaseTakenBy(writer1.pid);
    // Keep writer 1 in the middle of its replace, holding the lease, until writer 2 is seen waiting.
    writer1.kill("SIGSTOP");

    const started = Date.now();
    const refused = await cli(replaceArgs(NEW.select, "--no-wait"));
    const refusedAfterMs = Date.now() - started;
    expect(refused.code, refused.stderr).toBe(4);
    expect((JSON.parse(refused.stdout) as CliError).error.code).toBe("LEASE_HELD");
    expect(refused.stderr).toContain(`pid ${writer1.pid} on ${hostname()} (replace ${TABLE}/${PARTITION})`);
    expect(refused.stderr).toMatch(/ since \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/);
    if (holder) expect(refused.stderr).toContain(`since ${holder.acquiredAt}`);
    // At once: no waiting (the default wait is 2 minutes); the time is the CLI's own start-up, slow on a loaded machine.
    expect(refusedAfterMs).toBeLessThan(60_000);
    expect(await lake.pointer(TABLE, PARTITION)).toMatchObject({ runId: old });

    // Writer 2 waits long enough for writer 1 to finish even on a loaded machine (its waiting is what is tested).
    const writer2 = new Child(spawnCli([...backend.cliArgs, ...replaceArgs(NEXT.select, "--wait", "90s")], backend.cliEnv));
    children.push(writer2);
    await writer2.until("writer 2 to wait for writer 1", () => writer2.stderr.includes(`waiting for table '${TABLE}': pid ${writer1.pid} on ${hostname()}`));
    const dir = lakeDirOf(backend);
    const foldersWhileWaiting = dir !== undefined ? await runFolders(dir, TABLE, PARTITION) : [];
    expect(await lake.pointer(TABLE, PARTITION)).toMatchObject({ runId: old });

    writer1.kill("SIGCONT");
    athena?.endDelays();
    expect(await writer1.exited, writer1.stderr).toEqual({ code: 0, signal: null });
    expect(await writer2.exited, writer2.stderr).toEqual({ code: 0, signal: null });
    const first = JSON.parse(writer1.lines.join("\n")) as ReplaceResult;
    const second = JSON.parse(writer2.lines.join("\n")) as ReplaceResult;

    // Both swaps happened, one after the other: writer 2 built on top of writer 1's run.
    expect(first).toMatchObject({ previousRunId: old, rows: large.rows });
    expect(second).toMatchObject({ previousRunId: first.runId, previousRows: large.rows, rows: NEXT.rows });
    expect(await view()).toEqual({ rows: NEXT.rows, tags: 1, tag: NEXT.tag });
    const history = (JSON.parse((await cli(["history", TABLE, "--partition", PARTITION, "--json"])).stdout) as PartitionHistory[])[0]!;
    expect(history.runs.map((r) => [r.runId, r.state, r.rows])).toEqual([
      [second.runId, "current", NEXT.rows],
      [first.runId, "previous", large.rows],
      [old, "completed", OLD.rows],
    ]);
    if (dir !== undefined) {
      // Writer 2 had not even created its run folder while it waited, and started its run only after writer 1's swap.
      expect(foldersWhileWaiting.filter((id) => id !== old && id !== first.runId)).toEqual([]);
      const m1 = (await readManifest(dir, TABLE, PARTITION, first.runId))!;
      const m2 = (await readManifest(dir, TABLE, PARTITION, second.runId))!;
      expect(Date.parse(m2.builtAt)).toBeGreaterThanOrEqual(Date.parse(m1.swappedAt));
    }
  }, 240_000);

  /**
   * A writer frozen (SIGSTOP, at a fault point) while it holds the lease, for longer than the lease's TTL: on the embedded
   * lake it keeps the table (its kernel lock lives as long as its process), so the next writer is refused and the frozen one
   * swaps once it goes on; on S3 + Glue its lease is taken over, and the fence before its catalog call refuses its move.
   * `after-build` stops it before the swap's own lease check; the second point, after that check (before the rename on
   * the embedded lake; after the outbox entry, before the Glue call's fence, on AWS).
   */
  const frozenPoints = backendName === "local" ? ["after-build", "before-swap-rename"] : ["after-build", "after-outbox"];
  it.each(frozenPoints)("a writer frozen at %s past its lease's expiry never moves a pointer over a newer writer's", async (point) => {
    const stalled = spawnScript("crash-writer.ts", [...backend.cliArgs, "--lease-ttl-ms", "1500"], { ...backend.cliEnv, LAKESWAP_FAULT: `${point}:stop` });
    children.push(stalled);
    await stalled.nextJson(0);
    stalled.send({ table: TABLE, partition: PARTITION, select: NEXT.select });
    await stalled.untilStopped(point);
    const holder = await leaseTakenBy(stalled.pid);
    // Frozen: nothing renews its lease any more, which expires within one TTL. The taker (this process) runs on a clock
    // moved past that expiry (src/shared/clock.ts) instead of the test waiting for it.
    const expiry = Math.max(0, Date.parse(holder!.expiresAt) + 100 - Date.now());
    advanceClock(expiry);
    const taker = await cli(replaceArgs(NEW.select, "--no-wait")).finally(() => resetClock());
    stalled.kill("SIGCONT");
    const answer = await stalled.nextJson<WriterAnswer>(1);
    if (backendName === "local") {
      // The frozen writer is alive: its kernel lock keeps the table its own, whatever its lease file says.
      expect(taker.code, taker.stderr).toBe(4);
      expect(taker.stderr).toContain(`table '${TABLE}' is being written by pid ${stalled.pid} on ${hostname()} (replace ${TABLE}/${PARTITION})`);
      expect(taker.stderr).toContain("that process is alive and holds the table's lock until it ends");
      expect(answer, JSON.stringify(answer)).toMatchObject({ ok: true, result: { previousRunId: old, rows: NEXT.rows } });
      expect(await view()).toEqual({ rows: NEXT.rows, tags: 1, tag: NEXT.tag });
    } else {
      // Taken over once expired; the frozen writer's fence then fails: its move never lands, nor stays pending.
      expect(taker.code, taker.stderr).toBe(0);
      const taken = JSON.parse(taker.stdout) as ReplaceResult;
      // Stopped after its outbox entry, the frozen writer had decided a move: the taker finished it under its own lease
      // (as a dead writer's, only because the pointer was still where that writer found it), then replaced on top of it.
      expect(taken).toMatchObject(point === "after-outbox" ? { previousRows: NEXT.rows, rows: NEW.rows } : { previousRunId: old, rows: NEW.rows });
      expect(answer).toMatchObject({ ok: false, code: "LEASE_LOST" });
      expect((answer as { message: string }).message).toMatch(new RegExp(`the writer lease of table '${TABLE}' was taken over.*moved no pointer after losing it`));
      expect(await lake.pointer(TABLE, PARTITION)).toMatchObject({ runId: taken.runId, previousRunId: taken.previousRunId });
      expect(await view()).toEqual({ rows: NEW.rows, tags: 1, tag: NEW.tag });
      const reopened = await backend.open({ readOnly: true });
      expect(await reopened.pendingChanges()).toEqual([]);
      await reopened.close();
    }
    stalled.process.stdin?.end();
    expect(await stalled.exited).toEqual({ code: 0, signal: null });
  });

  if (backendName === "local") {
    it("a frozen writer's table is free the moment its process is killed (kill -9): its kernel lock dies with it", async () => {
      const frozen = new Child(spawnCli([...backend.cliArgs, ...replaceArgs(NEXT.select)], { ...backend.cliEnv, LAKESWAP_FAULT: "before-swap-rename:stop" }));
      children.push(frozen);
      await frozen.untilStopped("before-swap-rename");
      const refused = await cli(replaceArgs(NEW.select, "--no-wait"));
      expect(refused.code, refused.stderr).toBe(4);
      frozen.kill("SIGKILL");
      expect(await frozen.exited).toEqual({ code: null, signal: "SIGKILL" });
      const next = await cli(replaceArgs(NEW.select, "--no-wait"));
      expect(next.code, next.stderr).toBe(0);
      // The killed writer's move was in the outbox: the next writer finished it first (invariant 6), then replaced.
      expect(JSON.parse(next.stdout) as ReplaceResult).toMatchObject({ previousRows: NEXT.rows, rows: NEW.rows });
      expect(await view()).toEqual({ rows: NEW.rows, tags: 1, tag: NEW.tag });
    });
  }

  if (backendName === "local") {
    it("a writer that waited for a writer killed after its outbox entry finishes that writer's move before its own", async () => {
      const frozen = new Child(spawnCli([...backend.cliArgs, ...replaceArgs(NEXT.select)], { ...backend.cliEnv, LAKESWAP_FAULT: "before-swap-rename:stop" }));
      children.push(frozen);
      await frozen.untilStopped("before-swap-rename");
      // Opened while the frozen writer lives: its outbox entry is not this writer's to replay yet, so it waits for the table.
      const waiting = new Child(spawnCli([...backend.cliArgs, ...replaceArgs(NEW.select, "--wait", "90s")], backend.cliEnv));
      children.push(waiting);
      await waiting.until("the writer to wait for the frozen one", () => waiting.stderr.includes(`waiting for table '${TABLE}': pid ${frozen.pid}`));
      frozen.kill("SIGKILL");
      expect(await frozen.exited).toEqual({ code: null, signal: "SIGKILL" });
      expect(await waiting.exited, waiting.stderr).toEqual({ code: 0, signal: null });
      // The dead writer's decided move landed first (invariant 6), then the waiting writer's replace on top of it.
      expect(JSON.parse(waiting.lines.join("\n")) as ReplaceResult).toMatchObject({ previousRows: NEXT.rows, rows: NEW.rows });
      expect(await view()).toEqual({ rows: NEW.rows, tags: 1, tag: NEW.tag });
      const reopened = await backend.open({ readOnly: true });
      expect(await reopened.pendingChanges()).toEqual([]);
      await reopened.close();
    });
  }

  if (backendName === "local") {
    it("without the native extension nor flock(1) a writer says so and falls back to the lease file alone (the weaker guarantee the README names)", async () => {
      // No extension (LAKESWAP_NATIVE=off) and no PATH: flock(1) cannot be found (node runs by its own path); warnings
      // shown, as outside the test harness.
      const replaced = await spawned(replaceArgs(NEW.select), { LAKESWAP_NATIVE: "off", PATH: "/nonexistent", NODE_NO_WARNINGS: "0" });
      expect(replaced.code, replaced.stderr).toBe(0);
      expect(replaced.stderr).toContain("flock(1) (util-linux) is not installed: the writer lease of this lake falls back to its lease file alone");
      expect(JSON.parse(replaced.stdout) as ReplaceResult).toMatchObject({ previousRunId: old, rows: NEW.rows });
      expect(await leaseHolder(lakeDirOf(backend)!, TABLE), "released").toBeUndefined();
    });
  }

  it("a lease held by a dead process of this host is taken over at once, long before it expires", async () => {
    const killed = await spawned(replaceArgs(NEW.select), { LAKESWAP_FAULT: "lease-acquired:kill" });
    expect(killed.signal).toBe("SIGKILL");
    const dir = lakeDirOf(backend);
    let expiresAt: number | undefined;
    if (dir !== undefined) {
      const holder = await leaseHolder(dir, TABLE);
      expect(holder).toMatchObject({ host: hostname(), command: `replace ${TABLE}/${PARTITION}` });
      expiresAt = Date.parse(holder!.expiresAt);
      expect(expiresAt - Date.now(), "the dead writer's lease has not expired").toBeGreaterThan(30_000);
    }
    const started = Date.now();
    const next = await cli(replaceArgs(NEXT.select, "--no-wait"));
    expect(next.code, next.stderr).toBe(0);
    // Taken over before the dead writer's lease would have expired (where its expiry is readable), not by waiting: the
    // time is the CLI's own, slow on a loaded machine (the default wait is 2 minutes).
    expect(Date.now()).toBeLessThan(expiresAt ?? started + 60_000);
    expect(JSON.parse(next.stdout) as ReplaceResult).toMatchObject({ previousRunId: old, rows: NEXT.rows });
    expect(await view()).toEqual({ rows: NEXT.rows, tags: 1, tag: NEXT.tag });
    if (dir !== undefined) expect(await leaseHolder(dir, TABLE), "released").toBeUndefined();
  });

  it("history and rollback follow the order in which writers swapped, also for two processes within one second", async () => {
    // Writer A is another process, writer B this one; they take turns, each replace right after the other.
    const writerA = spawnScript("crash-writer.ts", [...backend.cliArgs], backend.cliEnv);
    children.push(writerA);
    await writerA.nextJson(0);
    let sameSecond = 0;
    // At least 10 rounds, and more (up to 45, within the test timeout) until three had both runs within one second: on a slow
    // backend (each round's builds are Athena queries on AWS) fewer rounds land in one second.
    for (let i = 0; i < 45 && (i < 10 || sameSecond < 3); i += 1) {
      writerA.send({ table: TABLE, partition: PARTITION, select: content("a", 100 + i).select });
      const answer = await writerA.nextJson<WriterAnswer>(i + 1);
      if (!answer.ok) throw new Error(`writer A failed: ${answer.message}`);
      const a = answer.result.runId;
      const b = (await replacePartition(lake, TABLE, PARTITION, { select: content("b", 200 + i).select })).runId;
      if (a.slice(0, 16) === b.slice(0, 16)) sameSecond += 1;

      // B swapped last: it is the newest run, and one rollback undoes B's replace, back to A's run.
      const history = (await readHistory(lake, TABLE, PARTITION))[0]!;
      expect(history.runs.slice(0, 2).map((r) => [r.runId, r.state]), `round ${i}: A=${a} then B=${b}`).toEqual([
        [b, "current"],
        [a, "previous"],
      ]);
      expect((await rollbackPartition(lake, TABLE, PARTITION)).toRunId, `round ${i}: A=${a} then B=${b}`).toBe(a);
      expect(await view()).toEqual({ rows: 100 + i, tags: 1, tag: "a" });
    }
    // The rounds did exercise runs of two processes within one second: usually more than five, but on a loaded machine a
    // round on AWS (two Athena builds) may take longer than a second, and fewer land in one.
    expect(sameSecond).toBeGreaterThan(0);
    writerA.process.stdin?.end();
    expect(await writerA.exited).toEqual({ code: 0, signal: null });
  }, 240_000);
});
