import { mkdirSync, readdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { loadPipelineConfig } from "../../src/config/pipeline-config.js";
import type { Lake } from "../../src/lake/lake.js";
import { Pipeline } from "../../src/pipeline/pipeline.js";
import { BACKEND_FACTORIES, runCli, selectedBackends, tempDir, type TestBackend } from "../support/lake-fixture.js";
import { lakeDirOf, readerLoop } from "../support/crash-kit.js";
import { runMain } from "../support/main-cli.js";

// Invariants 1, 2, 3 and 6 for the raw write modes append and upsert: a sync of a second delivery killed at a
// fault point leaves every partition whole (what the first delivery made of it, or what the second makes of it,
// as readers see it meanwhile and right after the kill); the same sync rerun by another process (this one) converges
// (each appended row once, none lost; the upserted table equals the merge), and a third sync builds nothing.

type Mode = "append" | "upsert" | "grown";

/**
 * Kill points of a sync of one raw table, by backend and mode. A sync moves its pointers as one batch, so each
 * point is reached once, but during-batch-swap after each pointer move (`@1`: after the first). A child sync costs
 * a second or more (several on AWS), so the points are shared out: together the modes cover every step of a
 * sync's batch, and each mode gets the steps where it differs from a replace.
 * Not here: lease-acquired (nothing written yet), before-swap-rename (the first rename of during-batch-swap@1),
 * during-gc (a sync reaches it only when a run is old enough to remove), before-release (single replaces only).
 */
const POINTS: Record<string, Record<Mode, readonly string[]>> = {
  local: {
    // The landing's staged files; the carried files (hard links) and the new ones in runs never pointed to; the
    // first pointer moved and not the others; every pointer moved and no manifest (which holds what was appended) yet.
    append: ["during-build", "after-build", "during-batch-swap@1", "after-swap"],
    // The merged runs never pointed to; the moves decided and none made; a key's new partition moved and its old
    // one not (or the reverse); everything done but the sync's record.
    upsert: ["after-build", "after-outbox", "during-batch-swap@1", "after-manifest"],
    // An append of the same file grown at its end: its new lines only, the line it was taken through kept in the manifest.
    grown: ["during-build", "after-swap"],
  },
  aws: {
    // Glue's pointers moved and no manifest in S3: the rerun must learn from the outbox what was appended.
    append: ["after-swap"],
    // Glue's first batch call (the new partition's create) made, the updates not.
    upsert: ["during-batch-swap"],
    // The line a grown file was taken through is in the manifest the outbox holds.
    grown: ["after-swap"],
  },
};

/** A mode's pipeline, its two deliveries, and what each partition holds after the first one and after both. */
interface Scenario {
  readonly yaml: string;
  readonly table: string;
  readonly partitionKey: string;
  /** The columns a reader's row is shown by: `key:value`. */
  readonly key: string;
  readonly value: string;
  readonly first: string;
  readonly second: string;
  /** A reader's rows as `partition -> sorted "id:name"`, before the second delivery and after it. */
  readonly before: ByPartition;
  readonly after: ByPartition;
}

type ByPartition = Map<string, string[]>;

function byPartition(rows: readonly (readonly [string, string])[]): ByPartition {
  const partitions: ByPartition = new Map();
  for (const [partition, row] of rows) partitions.set(partition, [...(partitions.get(partition) ?? []), row]);
  for (const list of partitions.values()) list.sort();
  return partitions;
}

/** Events appended by day: the second delivery adds rows to days 2 and 3 and makes day 4. */
const APPEND: Scenario = (() => {
  const first = [1, 2, 3].flatMap((day) => [1, 2, 3].map((i) => ({ id: day * 10 + i, kind: `a${i}`, day })));
  const second = [2, 3, 4].flatMap((day) => [4, 5, 6].map((i) => ({ id: day * 10 + i, kind: `b${i}`, day })));
  const csv = (rows: typeof first) => `event_id,kind,ts\n${rows.map((r) => `${r.id},${r.kind},2026-11-0${r.day} 1${r.id % 10}:00:00`).join("\n")}\n`;
  const view = (rows: typeof first) => byPartition(rows.map((r) => [`day=2026-11-0${r.day}`, `${r.id}:${r.kind}`]));
  return {
    yaml: `datasets:
  events:
    source: {format: csv, path: deliveries/*.csv}
    write: append
    columns: {event_id: {type: BIGINT, nullable: false}, kind: VARCHAR, ts: TIMESTAMP}
    partition: {day: "strftime(ts, '%Y-%m-%d')"}
`,
    table: "events_raw",
    partitionKey: "day",
    key: "event_id",
    value: "kind",
    first: csv(first),
    second: csv(second),
    before: view(first),
    after: view([...first, ...second]),
  };
})();

/** Customers merged by id, partitioned by area: an update, a key that moves, a delete, a key twice, new keys. */
const UPSERT: Scenario = {
  yaml: `datasets:
  customers:
    source: {format: csv, path: deliveries/*.csv}
    write: upsert
    primary_key: [id]
    order_by: [updated_at]
    delete_flag: deleted
    columns:
      id: {type: BIGINT, nullable: false}
      name: VARCHAR
      region: VARCHAR
      updated_at: TIMESTAMP
      deleted: BOOLEAN
    partition: {area: lower(region)}
`,
  table: "customers_raw",
  partitionKey: "area",
  key: "id",
  value: "name",
  first: `id,name,region,updated_at,deleted
1,Ada,North,2026-11-01 00:00:00,false
2,Bo,North,2026-11-01 00:00:00,false
3,Cy,South,2026-11-01 00:00:00,false
4,Di,South,2026-11-01 00:00:00,false
5,Ed,South,2026-11-01 00:00:00,false
6,Fay,West,2026-11-01 00:00:00,false
7,Gil,West,2026-11-01 00:00:00,false
`,
  second: `id,name,region,updated_at,deleted
2,Bob,North,2026-11-02 00:00:00,false
3,Cy,North,2026-11-02 00:00:00,false
4,Di,South,2026-11-02 00:00:00,true
6,Faye,West,2026-11-04 00:00:00,false
6,Fay (old),West,2026-11-03 00:00:00,false
8,Hal,East,2026-11-02 00:00:00,false
9,Ivy,North,2026-11-02 00:00:00,false
`,
  before: byPartition([
    ["area=north", "1:Ada"], ["area=north", "2:Bo"], ["area=south", "3:Cy"], ["area=south", "4:Di"], ["area=south", "5:Ed"],
    ["area=west", "6:Fay"], ["area=west", "7:Gil"],
  ]),
  after: byPartition([
    ["area=north", "1:Ada"], ["area=north", "2:Bob"], ["area=north", "3:Cy"], ["area=north", "9:Ivy"], ["area=south", "5:Ed"],
    ["area=west", "6:Faye"], ["area=west", "7:Gil"], ["area=east", "8:Hal"],
  ]),
};

/** The append's second delivery as the first one's file grown at its end (a log file): the same file, more lines. */
const GROWN: Scenario = { ...APPEND, second: `${APPEND.first}${APPEND.second.slice(APPEND.second.indexOf("\n") + 1)}` };

const SCENARIOS: Record<Mode, Scenario> = { append: APPEND, upsert: UPSERT, grown: GROWN };

/** What a reader of the lake sees of the scenario's table, by partition. */
async function seen(lake: Lake, scenario: Scenario): Promise<ByPartition> {
  const result = await lake.query(`SELECT ${scenario.partitionKey}, CAST(${scenario.key} AS VARCHAR), ${scenario.value} FROM ${scenario.table}`);
  return byPartition(result.rows.map(([partition, key, value]) => [`${scenario.partitionKey}=${String(partition)}`, `${String(key)}:${String(value)}`]));
}

/** Each partition a reader saw is the first delivery's or the second's, whole; a partition the second makes may be missing. */
function expectWhole(view: ByPartition, scenario: Scenario, when: string): void {
  for (const partition of scenario.before.keys()) expect(view.has(partition), `${when}: ${partition} is there`).toBe(true);
  for (const [partition, rows] of view) {
    const choices = [scenario.before.get(partition), scenario.after.get(partition)].filter((c) => c !== undefined);
    expect(choices, `${when}: ${partition} is one delivery's, whole`).toContainEqual(rows);
  }
}

/** Reads the table over and over until stopped, and fails the test if some read saw a partition mixed or missing. */
function readers(backend: TestBackend, scenario: Scenario, pauseMs: number): { stop: () => Promise<number> } {
  return readerLoop(backend, async (lake, n) => expectWhole(await seen(lake, scenario), scenario, `read ${n} while the syncs ran`), pauseMs);
}

// One list of cases over every backend, so that the cases of both backends share the workers.
const CASES = selectedBackends().flatMap((backendName) =>
  (["append", "upsert", "grown"] as const).flatMap((mode) => (POINTS[backendName]?.[mode] ?? []).map((point) => [mode, point, backendName] as const)),
);

describe("write modes: a sync killed at a fault point, then rerun", () => {
  it.concurrent.each(CASES)("write: %s, killed at %s on the %s backend: partitions stay whole; the rerun converges and a third sync builds nothing", async (mode, point, backendName) => {
    const scenario = SCENARIOS[mode];
    const backend = await BACKEND_FACTORIES[backendName]!();
    const { dir, cleanup } = tempDir("lakeswap-modes-crash-");
    try {
      mkdirSync(path.join(dir, "deliveries"));
      const configFile = path.join(dir, "lakeswap.yaml");
      writeFileSync(configFile, scenario.yaml);
      // A grown file is one file: the first delivery's, then (after the first sync) the second's.
      const names = mode === "grown" ? ["log", "log"] : ["first", "second"];
      const [firstFile, secondFile] = [[names[0], scenario.first], [names[1], scenario.second]].map(([name, csv], i) => {
        const file = path.join(dir, "deliveries", `${name}.csv`);
        if (i === 0 || mode !== "grown") writeFileSync(file, csv!);
        return file;
      }) as [string, string];
      const syncHere = async (file: string) => {
        const lake = await backend.open();
        try {
          return await new Pipeline(lake, loadPipelineConfig(configFile), { inputs: [file] }).sync();
        } finally {
          await lake.close();
        }
      };
      const secondSync = [...backend.cliArgs, "sync", "-c", configFile, "--input", secondFile, "--json"];

      expect((await syncHere(firstFile)).totals.failed).toBe(0);
      if (mode === "grown") writeFileSync(secondFile, scenario.second);
      const reading = readers(backend, scenario, backendName === "aws" ? 200 : 100);
      let rerunReport: string;
      try {
        const [name, nth] = point.split("@");
        const killed = await runCli(secondSync, { ...backend.cliEnv, LAKESWAP_FAULT: `${name}:kill${nth ? `@${nth}` : ""}` });
        expect(killed.signal, `the sync reached ${point}; stderr: ${killed.stderr}`).toBe("SIGKILL");

        // What readers see now, before anyone finishes what the dead writer left (read-only: no outbox replay).
        const reader = await backend.open({ readOnly: true });
        try {
          expectWhole(await seen(reader, scenario), scenario, `right after the kill at ${point}`);
        } finally {
          await reader.close();
        }

        // The rerun nothing kills: in this process (`main(argv)`).
        const rerun = await runMain(secondSync, backend.cliEnv);
        expect(rerun.code, rerun.stderr).toBe(0);
        rerunReport = rerun.stdout;
      } catch (error) {
        await reading.stop().catch(() => undefined);
        throw error;
      }
      expect(await reading.stop(), "the reader read at least once").toBeGreaterThan(0);
      expect((JSON.parse(rerunReport) as { totals: { failed: number } }).totals.failed).toBe(0);

      const lake = await backend.open();
      try {
        expect(await seen(lake, scenario), "after the rerun every partition holds the second delivery's result").toEqual(scenario.after);
        if (mode !== "upsert") {
          const repeated = await lake.query("SELECT event_id, count(*) FROM events_raw GROUP BY event_id HAVING count(*) > 1");
          expect(repeated.rows, "no event is there twice").toEqual([]);
        }
        expect(await lake.pendingChanges(), "no pointer move is left pending").toEqual([]);
      } finally {
        await lake.close();
      }
      const lakeDir = lakeDirOf(backend);
      if (lakeDir !== undefined) expect(readdirSync(path.join(lakeDir, "_lakeswap", "tmp")), "no staged run, link or temporary file is left").toEqual([]);

      const third = await syncHere(secondFile);
      expect(third.totals, `a third sync builds nothing: ${third.partitions.map((p) => `${p.partition} ${p.action} ${p.reason}`).join(", ")}`).toMatchObject({ built: 0, failed: 0 });
      expect(third.partitions.map((p) => p.reason)).toEqual(third.partitions.map(() => (mode === "upsert" ? "unchanged" : "already appended")));
    } finally {
      cleanup();
      await backend.cleanup();
    }
  }, 180_000);
});
