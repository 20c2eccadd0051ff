import { copyFileSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { loadPipelineConfig } from "../../src/config/pipeline-config.js";
import { rollbackPartition } from "../../src/lake/operations/rollback.js";
import { Pipeline, type SyncReport } from "../../src/pipeline/pipeline.js";
import { BACKEND_FACTORIES, embeddedBackend, selectedBackends, tempDir } from "../support/lake-fixture.js";

/**
 * `write: append` of a glob of log files that are copied, renamed, edited and cut short under other names: a file
 * under a new name continues the record of the file whose first row it has, so only its rows added since land.
 */
const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const YAML = `datasets:
  events:
    source: {format: csv, path: deliveries/*.csv}
    write: append
    dead_letter: events_bad
    columns: {event_id: BIGINT, kind: VARCHAR, ts: TIMESTAMP}
    partition: {day: "strftime(ts, '%Y-%m-%d')"}
`;

async function workspace(backendName: string, opened?: Awaited<ReturnType<typeof embeddedBackend>>) {
  const backend = opened ?? (await BACKEND_FACTORIES[backendName]!());
  cleanups.push(() => backend.cleanup());
  const lake = await backend.open({ graceMs: 0, leaseWaitMs: 0 });
  cleanups.push(() => lake.close());
  const { dir, cleanup } = tempDir("lakeswap-copies-");
  cleanups.push(cleanup);
  const folder = path.join(dir, "deliveries");
  mkdirSync(folder);
  const configFile = path.join(dir, "lakeswap.yaml");
  writeFileSync(configFile, YAML);
  const file = (name: string) => path.join(folder, name);
  return {
    lake,
    file,
    /** Writes `name` with a row per id (ids below 100 on 1 November, the others on 2 November), `kind` "k" unless edited. */
    write(name: string, ids: readonly number[], edited: ReadonlySet<number> = new Set(), bad: ReadonlySet<number> = new Set()): void {
      const rows = ids.map((id) => `${id},${edited.has(id) ? "edited" : "k"},${bad.has(id) ? "not a time" : `2026-11-0${id < 100 ? 1 : 2} 10:00:00`}`);
      writeFileSync(file(name), `event_id,kind,ts\n${rows.join("\n")}\n`);
    },
    sync: (): Promise<SyncReport> => new Pipeline(lake, loadPipelineConfig(configFile), { inputs: [path.join(folder, "*.csv")] }).sync(),
    /** Each (id, kind) held with its count where above 1, sorted. */
    held: async () => (await lake.query("SELECT event_id, kind, count(*) FROM events_raw GROUP BY event_id, kind ORDER BY event_id, kind")).rows.map(([id, kind, n]) => `${id}${kind === "k" ? "" : `:${kind}`}${Number(n) > 1 ? `x${n}` : ""}`),
  };
}

for (const backendName of selectedBackends()) {
  describe(`write: append of files copied and renamed (${backendName})`, () => {
    it("a copy of an appended file, and a file renamed and then edited or cut short, append only their rows added since", async () => {
      const ws = await workspace(backendName);
      ws.write("a.csv", [1, 2, 3, 101, 102]);
      ws.write("b.csv", [10, 11, 12, 110]);
      await ws.sync();
      // A copy of a.csv: the same rows under another name are held. Grown, only its new rows land (before: all of them twice).
      copyFileSync(ws.file("a.csv"), ws.file("c.csv"));
      expect((await ws.sync()).partitions.map((p) => p.reason)).toEqual(["already appended", "already appended"]);
      ws.write("c.csv", [1, 2, 3, 101, 102, 4, 103]);
      const grown = await ws.sync();
      expect(grown.loads[0]?.rowsAppended).toBe(2);
      // b.csv renamed to d.csv; a sync later, d.csv's row 11 is edited in place and it grows by row 13.
      renameSync(ws.file("b.csv"), ws.file("d.csv"));
      await ws.sync();
      ws.write("d.csv", [10, 11, 12, 110, 13], new Set([11]));
      expect((await ws.sync()).loads[0]?.rowsAppended).toBe(2);
      // a.csv renamed to e.csv and cut short to its first rows of each day in one sync, then grown.
      renameSync(ws.file("a.csv"), ws.file("e.csv"));
      ws.write("e.csv", [1, 2, 101, 5, 104]);
      expect((await ws.sync()).loads[0]?.rowsAppended).toBe(2);
      expect(await ws.held()).toEqual(["1", "2", "3", "4", "5", "10", "11:edited", "11", "12", "13", "101", "102", "103", "104", "110"]);
      // Nothing changed since: nothing is built.
      expect((await ws.sync()).partitions.map((p) => p.reason)).toEqual(["already appended", "already appended"]);
    }, 180_000);

    it("a file copied after it grew, then grown again, appends each row added since once (the copy's share of them too)", async () => {
      const ws = await workspace(backendName);
      ws.write("a.csv", [1, 101]);
      await ws.sync();
      ws.write("a.csv", [1, 101, 2, 102]);
      copyFileSync(ws.file("a.csv"), ws.file("b.csv"));
      ws.write("a.csv", [1, 101, 2, 102, 3]);
      // The copy also grew, by a row of its own.
      ws.write("b.csv", [1, 101, 2, 102, 4]);
      const report = await ws.sync();
      expect(report.loads[0]?.rowsAppended).toBe(4);
      expect(await ws.held()).toEqual(["1", "2", "3", "4", "101", "102"]);
      expect((await ws.sync()).partitions.map((p) => p.reason)).toEqual(["already appended", "already appended"]);
    }, 180_000);

    it("a file renamed or copied, grown under its new name, then edited or cut short, appends only its rows added since", async () => {
      const ws = await workspace(backendName);
      const ids = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);
      ws.write("a.csv", ids(1, 10));
      ws.write("b.csv", ids(31, 40));
      await ws.sync();
      renameSync(ws.file("a.csv"), ws.file("r.csv"));
      copyFileSync(ws.file("b.csv"), ws.file("c.csv"));
      await ws.sync();
      ws.write("r.csv", ids(1, 15));
      ws.write("c.csv", ids(31, 45));
      await ws.sync();
      ws.write("r.csv", ids(1, 20));
      ws.write("c.csv", ids(31, 50));
      await ws.sync();
      // r.csv's row 12 edited (before: its rows after the first record of its first row, 11-20, again); c.csv cut short.
      ws.write("r.csv", ids(1, 20), new Set([12]));
      ws.write("c.csv", ids(31, 47));
      expect((await ws.sync()).loads[0]?.rowsAppended).toBe(1);
      ws.write("c.csv", [...ids(31, 47), 51, 52]);
      expect((await ws.sync()).loads[0]?.rowsAppended).toBe(2);
      const held = await ws.held();
      expect(held.filter((h) => h.includes("x"))).toEqual([]);
      expect(held.length).toBe(20 + 1 + 22);
    }, 180_000);

    it("a new file and its copy, both grown, in one sync; a bad row fixed in a file and in its copy: each row once", async () => {
      const ws = await workspace(backendName);
      ws.write("z.csv", [90]);
      await ws.sync();
      ws.write("a.csv", [1, 2, 3, 4, 5]);
      copyFileSync(ws.file("a.csv"), ws.file("b.csv"));
      ws.write("a.csv", [1, 2, 3, 4, 5, 6, 7]);
      ws.write("b.csv", [1, 2, 3, 4, 5, 8]);
      // And a partition new to the table (day 2), the same way.
      ws.write("c.csv", [101, 102, 103]);
      ws.write("d.csv", [101, 102, 103, 104]);
      expect((await ws.sync()).loads[0]?.rowsAppended).toBe(12);
      expect(await ws.held()).toEqual(["1", "2", "3", "4", "5", "6", "7", "8", "90", "101", "102", "103", "104"]);
      // A file with a bad row, copied, the copy grown; then the row fixed in the file, and in the copy as it grows again.
      ws.write("e.csv", [20, 21, 22, 23], new Set(), new Set([22]));
      await ws.sync();
      copyFileSync(ws.file("e.csv"), ws.file("f.csv"));
      ws.write("f.csv", [20, 21, 22, 23, 24], new Set(), new Set([22]));
      await ws.sync();
      ws.write("e.csv", [20, 21, 22, 23]);
      await ws.sync();
      ws.write("f.csv", [20, 21, 22, 23, 24, 25]);
      await ws.sync();
      const held = await ws.held();
      expect(held.filter((h) => h.includes("x"))).toEqual([]);
      expect(held.filter((h) => Number(h) >= 20 && Number(h) < 30)).toEqual(["20", "21", "22", "23", "24", "25"]);
    }, 180_000);

    it("a copy of a copy, each grown, then the last one grown alone, appends each row once", async () => {
      const ws = await workspace(backendName);
      ws.write("a.csv", [1, 2, 3, 4]);
      await ws.sync();
      copyFileSync(ws.file("a.csv"), ws.file("c.csv"));
      // a.csv grows on 2 November only: its record of 1 November stays as it was first taken.
      ws.write("a.csv", [1, 2, 3, 4, 105]);
      ws.write("c.csv", [1, 2, 3, 4, 6]);
      await ws.sync();
      copyFileSync(ws.file("c.csv"), ws.file("d.csv"));
      ws.write("c.csv", [1, 2, 3, 4, 6, 7]);
      ws.write("d.csv", [1, 2, 3, 4, 6, 108]);
      await ws.sync();
      // d.csv's rows of 1 November held since the last sync (c.csv's), grown: before, 6 again (the split against a.csv's record).
      ws.write("d.csv", [1, 2, 3, 4, 6, 108, 9]);
      expect((await ws.sync()).loads[0]?.rowsAppended).toBe(1);
      expect(await ws.held()).toEqual(["1", "2", "3", "4", "6", "7", "9", "105", "108"]);
    }, 180_000);

    it("a new file whose first row is alike to an appended file's is taken by difference: a row alike to a held one counts as held", async () => {
      const ws = await workspace(backendName);
      ws.write("a.csv", [1, 2, 3, 4]);
      await ws.sync();
      // Another file that starts as a.csv does, with rows of its own after: as a copy of it would be (docs/write-modes.md).
      ws.write("b.csv", [1, 20, 21, 22]);
      const report = await ws.sync();
      expect(report.loads[0]?.rowsAppended).toBe(3);
      expect(report.partitions.map((p) => p.reason)).toEqual(["appended by difference"]);
      expect(await ws.held()).toEqual(["1", "2", "3", "4", "20", "21", "22"]);
    }, 180_000);

    it("a renamed or copied file whose rows after its first were mostly edited, synced after a rollback too, and a rotated file written late: each row once", async () => {
      const ws = await workspace(backendName);
      ws.write("a.csv", [1, 2, 3, 101]);
      ws.write("b.csv", [10, 11, 12]);
      ws.write("log.csv", [40, 41]);
      await ws.sync();
      renameSync(ws.file("a.csv"), ws.file("r.csv"));
      ws.write("r.csv", [1, 2, 3, 101], new Set([2, 3]));
      copyFileSync(ws.file("b.csv"), ws.file("c.csv"));
      ws.write("c.csv", [10, 11, 12, 13, 14]);
      // Rotated: log.csv renamed, a new log.csv begun with a row of the same day.
      renameSync(ws.file("log.csv"), ws.file("log.1.csv"));
      ws.write("log.csv", [42]);
      await ws.sync();
      // c.csv's rows edited; the day rolled back (c.csv's growth undone) and synced again; log.1.csv written late.
      ws.write("c.csv", [10, 11, 12, 13, 14], new Set([11, 12]));
      await rollbackPartition(ws.lake, "events_raw", "day=2026-11-01");
      ws.write("log.1.csv", [40, 41, 43]);
      await ws.sync();
      const held = await ws.held();
      expect(held.filter((h) => h.includes("x"))).toEqual([]);
      expect(held).toEqual(["1", "2:edited", "2", "3:edited", "3", "10", "11:edited", "11", "12:edited", "12", "13", "14", "40", "41", "42", "43", "101"]);
    }, 180_000);
  });
}

describe("write: append of files renamed, recorded before first rows were kept", () => {
  it("more than 16 files renamed and grown at once append only their new rows; a new file beside files moved out lands whole", async () => {
    const backend = await embeddedBackend();
    const ws = await workspace("local", backend);
    const files = Array.from({ length: 18 }, (_, i) => i);
    for (const i of files) ws.write(`a${i}.csv`, [4 * i + 1, 4 * i + 2]);
    await ws.sync();
    // The runs as a lakeswap before 7 December 2026 wrote them: no file's first row recorded.
    const manifests = path.join(backend.lakeDir, "_lakeswap", "manifests", "events_raw", "day=2026-11-01");
    const runs = readdirSync(manifests);
    expect(runs.length).toBe(1);
    const manifest = path.join(manifests, runs[0]!);
    const stored = JSON.parse(readFileSync(manifest, "utf8")) as { appendedFiles: { head?: string }[] };
    expect(stored.appendedFiles.every((f) => f.head !== undefined)).toBe(true);
    for (const f of stored.appendedFiles) delete f.head;
    writeFileSync(manifest, JSON.stringify(stored));
    // Each file renamed (a0.csv to b0.csv, ...) and grown by a row: 18 new files beside 18 gone ones, too many to pair.
    for (const i of files) {
      rmSync(ws.file(`a${i}.csv`));
      ws.write(`b${i}.csv`, [4 * i + 1, 4 * i + 2, 4 * i + 3]);
    }
    const renamed = await ws.sync();
    expect(renamed.loads[0]?.rowsAppended).toBe(18);
    expect(renamed.partitions.map((p) => p.reason)).toEqual(["appended by difference"]);
    // Moved out once synced; a new file lands whole and reads no current rows (its first row is known, and another).
    for (const i of files) rmSync(ws.file(`b${i}.csv`));
    ws.write("c.csv", [90, 91]);
    const added = await ws.sync();
    expect(added.partitions.map((p) => `${p.reason} ${p.byDifference?.length ?? 0}`)).toEqual(["appended 0"]);
    expect((await ws.held()).length).toBe(56);
  }, 180_000);
});
