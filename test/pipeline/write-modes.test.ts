import { mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { gzipSync } from "node:zlib";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { loadPipelineConfig } from "../../src/config/pipeline-config.js";
import type { Lake } from "../../src/lake/lake.js";
import { Pipeline, type PipelineOptions, type SyncReport } from "../../src/pipeline/pipeline.js";
import { APPEND_MAX_FILES } from "../../src/lake/commit/append-carry.js";
import { BACKEND_FACTORIES, selectedBackends, tempDir } from "../support/lake-fixture.js";
import { rollbackPartition, rollbackSync } from "../../src/lake/operations/rollback.js";
import { publishSync } from "../../src/lake/operations/publish.js";
import { listSyncs } from "../../src/lake/operations/syncs.js";
import { readHistory } from "../../src/lake/operations/history.js";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** Events appended by day, with a daily count layer built from them. */
const APPEND_YAML = `datasets:
  events:
    source: {format: csv, path: deliveries/*.csv}
    write: append
    columns: {event_id: BIGINT, kind: VARCHAR, ts: TIMESTAMP}
    partition: {day: "strftime(ts, '%Y-%m-%d')"}
    layers:
      - name: daily
        sql: sql/daily.sql
        columns: {events: BIGINT}
`;

/** Customers merged by id, partitioned by area (so a customer can move), with a delete flag. */
function upsertYaml(orderBy = true): string {
  return `datasets:
  customers:
    source: {format: csv, path: deliveries/*.csv}
    write: upsert
    primary_key: [id]
${orderBy ? "    order_by: [updated_at]\n" : ""}    delete_flag: deleted
    columns:
      id: {type: BIGINT, nullable: false}
      name: VARCHAR
      region: VARCHAR
      updated_at: TIMESTAMP
      deleted: BOOLEAN
    partition: {area: lower(region)}
`;
}

/** Countries replaced whole by each delivery, a whole-table summary of them, and a per-day layer that looks them up. */
const REPLACE_YAML = `datasets:
  countries:
    source: {format: csv, path: deliveries/countries-*.csv}
    write: replace
    columns: {code: VARCHAR, name: VARCHAR, population: BIGINT}
    layers:
      - name: summary
        sql: sql/summary.sql
        write: replace
        columns: {countries: BIGINT, population: BIGINT}
`;

/** A workspace on one backend: its lake, its config, and deliveries written as CSV files. */
async function workspace(backendName: string, yaml: string) {
  const backend = await BACKEND_FACTORIES[backendName]!();
  cleanups.push(() => backend.cleanup());
  const lake = await backend.open({ graceMs: 0, leaseWaitMs: 0 });
  cleanups.push(() => lake.close());
  const { dir, cleanup } = tempDir("lakeswap-modes-");
  cleanups.push(cleanup);
  mkdirSync(path.join(dir, "deliveries"));
  mkdirSync(path.join(dir, "sql"));
  writeFileSync(path.join(dir, "sql", "daily.sql"), "SELECT count(*) AS events FROM events_raw WHERE day = {{ day }}\n");
  writeFileSync(path.join(dir, "sql", "summary.sql"), "SELECT count(*) AS countries, sum(population) AS population FROM countries_raw\n");
  const configFile = path.join(dir, "lakeswap.yaml");
  writeFileSync(configFile, yaml);
  let counter = 0;
  return {
    lake,
    dir,
    deliver(header: string, rows: readonly string[], name = "delivery"): string {
      const file = path.join(dir, "deliveries", `${name}-${counter++}.csv`);
      writeFileSync(file, `${header}\n${rows.join("\n")}\n`);
      return file;
    },
    sync(file: string, options: PipelineOptions = {}, lakeToUse: Lake = lake): Promise<SyncReport> {
      return new Pipeline(lakeToUse, loadPipelineConfig(configFile), { inputs: [file], ...options }).sync();
    },
    rows: async (sql: string) => (await lake.query(sql)).rows.map((row) => row.map((v) => (v === null ? "null" : String(v))).join(" ")),
  };
}

/** `layer partition action reason` of a report, sorted. */
function actions(report: SyncReport): string[] {
  return report.partitions.map((p) => `${p.layer} ${p.partition} ${p.action} ${p.reason}`).sort();
}

const EVENTS = "event_id,kind,ts";

for (const backendName of selectedBackends()) {
  describe(`write: append (${backendName})`, () => {
    it("adds each delivery's rows once; the same delivery again adds nothing; rollback undoes one append", async () => {
      const ws = await workspace(backendName, APPEND_YAML);
      const first = ws.deliver(EVENTS, ["1,click,2026-11-01 10:00:00", "2,view,2026-11-01 11:00:00", "3,click,2026-11-02 09:00:00"]);
      expect(actions(await ws.sync(first))).toEqual([
        "daily day=2026-11-01 build new", "daily day=2026-11-02 build new",
        "raw day=2026-11-01 build new", "raw day=2026-11-02 build new",
      ]);
      const again = await ws.sync(first);
      expect(actions(again)).toEqual([
        "daily day=2026-11-01 skip unchanged", "daily day=2026-11-02 skip unchanged",
        "raw day=2026-11-01 skip already appended", "raw day=2026-11-02 skip already appended",
      ]);
      // A second delivery: more events of day 2, the first of day 3; day 1 is not touched.
      const second = ws.deliver(EVENTS, ["4,view,2026-11-02 12:00:00", "5,view,2026-11-02 13:00:00", "6,click,2026-11-03 08:00:00"]);
      const appended = await ws.sync(second);
      expect(actions(appended)).toEqual([
        "daily day=2026-11-01 skip unchanged", "daily day=2026-11-02 build upstream changed", "daily day=2026-11-03 build new",
        "raw day=2026-11-02 build appended", "raw day=2026-11-03 build new",
      ]);
      expect(appended.partitions.find((p) => p.layer === "raw" && p.partition === "day=2026-11-02")?.rows).toBe(3);
      expect(await ws.rows("SELECT day, count(*), string_agg(CAST(event_id AS VARCHAR), ',' ORDER BY event_id) FROM events_raw GROUP BY day ORDER BY day")).toEqual([
        "2026-11-01 2 1,2", "2026-11-02 3 3,4,5", "2026-11-03 1 6",
      ]);
      expect(await ws.rows("SELECT day, events FROM events_daily ORDER BY day")).toEqual(["2026-11-01 2", "2026-11-02 3", "2026-11-03 1"]);
      // Both deliveries again, in one sync each: nothing is added.
      expect((await ws.sync(second)).partitions.filter((p) => p.layer === "raw").map((p) => p.reason)).toEqual(["already appended", "already appended"]);
      expect((await ws.sync(first)).totals.built).toBe(0);

      // The append made a new run; the one before it is intact, so rollback undoes exactly that append.
      const day2 = await ws.lake.pointer("events_raw", "day=2026-11-02");
      expect(day2?.previousRunId).toBeDefined();
      await rollbackPartition(ws.lake, "events_raw", "day=2026-11-02");
      expect(await ws.rows("SELECT count(*) FROM events_raw WHERE day = '2026-11-02'")).toEqual(["1"]);
      // The next sync of the second delivery appends it again, onto the rolled-back run.
      const redo = await ws.sync(second);
      expect(redo.partitions.find((p) => p.layer === "raw" && p.partition === "day=2026-11-02")).toMatchObject({ action: "build", reason: "appended", rows: 3 });
      expect(await ws.rows("SELECT count(*) FROM events_raw WHERE day = '2026-11-02'")).toEqual(["3"]);

      // Duplicates only when asked for.
      const forced = await ws.sync(second, { allowDuplicates: true });
      expect(forced.partitions.filter((p) => p.layer === "raw").map((p) => `${p.partition} ${p.reason} ${p.rows}`)).toEqual([
        "day=2026-11-02 appended 5", "day=2026-11-03 appended 2",
      ]);
      expect(await ws.rows("SELECT event_id, count(*) FROM events_raw WHERE event_id IN (4, 6) GROUP BY event_id ORDER BY event_id")).toEqual(["4 2", "6 2"]);
    }, 120_000);

    it("a glob that matches files appended before and new ones appends only the new files' rows", async () => {
      const ws = await workspace(backendName, APPEND_YAML);
      const glob = path.join(ws.dir, "deliveries", "*");
      const ids = () => ws.rows("SELECT day, string_agg(CAST(event_id AS VARCHAR), ',' ORDER BY event_id) FROM events_raw GROUP BY day ORDER BY day");
      ws.deliver(EVENTS, ["1,click,2026-11-01 10:00:00", "2,view,2026-11-01 11:00:00", "3,click,2026-11-02 09:00:00"]);
      await ws.sync(glob);
      // A second file beside the first: day 1 is held whole, day 2 gets the new file's rows only, day 3 is new.
      ws.deliver(EVENTS, ["4,view,2026-11-02 12:00:00", "5,view,2026-11-03 13:00:00"]);
      const grown = await ws.sync(glob);
      expect(actions(grown).filter((a) => a.startsWith("raw"))).toEqual([
        "raw day=2026-11-01 skip already appended", "raw day=2026-11-02 build appended", "raw day=2026-11-03 build new",
      ]);
      expect(grown.partitions.find((p) => p.layer === "raw" && p.partition === "day=2026-11-02")?.rows).toBe(2);
      // The load reads all 5 rows of the glob, and says that 2 of them were appended (the others were held already).
      expect(grown.loads[0]).toMatchObject({ rowsRead: 5, rowsLoaded: 5, rowsAppended: 2 });
      expect(await ids()).toEqual(["2026-11-01 1,2", "2026-11-02 3,4", "2026-11-03 5"]);
      expect(await ws.rows("SELECT day, events FROM events_daily ORDER BY day")).toEqual(["2026-11-01 2", "2026-11-02 2", "2026-11-03 1"]);
      // A third, compressed, with a row for every day; then the glob again adds nothing.
      const third = ws.deliver(EVENTS, ["6,click,2026-11-01 12:00:00", "7,click,2026-11-02 13:00:00", "8,click,2026-11-03 14:00:00"]);
      writeFileSync(`${third}.gz`, gzipSync(readFileSync(third)));
      rmSync(third);
      const third_ = await ws.sync(glob);
      expect(third_.partitions.filter((p) => p.layer === "raw").map((p) => `${p.partition} ${p.reason} ${p.rows}`)).toEqual([
        "day=2026-11-01 appended 3", "day=2026-11-02 appended 3", "day=2026-11-03 appended 2",
      ]);
      expect(await ids()).toEqual(["2026-11-01 1,2,6", "2026-11-02 3,4,7", "2026-11-03 5,8"]);
      expect((await ws.sync(glob)).partitions.filter((p) => p.layer === "raw").map((p) => p.reason)).toEqual(["already appended", "already appended", "already appended"]);

      // Rollback of day 2 undoes the last append (file 3's row); the glob then appends that row again, and only it.
      await rollbackPartition(ws.lake, "events_raw", "day=2026-11-02");
      expect(await ids()).toEqual(["2026-11-01 1,2,6", "2026-11-02 3,4", "2026-11-03 5,8"]);
      const redo = await ws.sync(glob);
      expect(redo.partitions.filter((p) => p.layer === "raw" && p.action === "build").map((p) => `${p.partition} ${p.rows}`)).toEqual(["day=2026-11-02 3"]);
      expect(redo.loads[0]).toMatchObject({ rowsRead: 8, rowsAppended: 1 });
      expect(await ids()).toEqual(["2026-11-01 1,2,6", "2026-11-02 3,4,7", "2026-11-03 5,8"]);
      // Two copies of one new file in one sync: taken once, as they would be one sync apart.
      ws.deliver(EVENTS, ["9,view,2026-11-03 15:00:00"], "copy");
      ws.deliver(EVENTS, ["9,view,2026-11-03 15:00:00"], "copy");
      expect((await ws.sync(glob)).partitions.filter((p) => p.layer === "raw" && p.action === "build").map((p) => `${p.partition} ${p.rows}`)).toEqual(["day=2026-11-03 3"]);
      expect(await ids()).toEqual(["2026-11-01 1,2,6", "2026-11-02 3,4,7", "2026-11-03 5,8,9"]);
      // --allow-duplicates appends every file's rows again, as asked.
      await ws.sync(glob, { allowDuplicates: true });
      expect(await ws.rows("SELECT count(*), count(DISTINCT event_id) FROM events_raw")).toEqual(["19 9"]);
    }, 120_000);
    it("a glob with dead_letter keeps each file's bad rows once, in a partition of the file's own, through held syncs and rollback", async () => {
      const ws = await workspace(backendName, APPEND_YAML.replace("    layers:", "    dead_letter: events_rejected\n    layers:"));
      const glob = path.join(ws.dir, "deliveries", "*");
      const rejected = () => ws.rows("SELECT delivery, file, line, raw FROM events_rejected ORDER BY delivery, file, line");
      const a = ws.deliver(EVENTS, ["1,click,2026-11-01 10:00:00", "bad-a,click,2026-11-01 11:00:00"]);
      const first = await ws.sync(glob);
      const partitionA = `delivery=${first.loads[0]!.delivery}`;
      const keptA = `${partitionA.slice("delivery=".length)} ${a} 3 bad-a,click,2026-11-01 11:00:00`;
      expect(await rejected()).toEqual([keptA]);
      // A good file beside it: a's bad row is read again, and left where it is (it was kept again under each sync's delivery id).
      ws.deliver(EVENTS, ["2,view,2026-11-01 12:00:00"]);
      const second = await ws.sync(glob);
      expect(await rejected()).toEqual([keptA]);
      expect((await listSyncs(ws.lake)).find((r) => r.syncId === second.syncId)!.moves.map((m) => m.table)).not.toContain("events_rejected");
      // A file alone is named as a delivery of it alone would be.
      expect(first.loads[0]).toMatchObject({ rowsDeadLettered: 1, rowsDeadLetteredBefore: 0, deadLetterPartitions: [{ partition: partitionA, files: [a], rows: 1, written: true }] });
      expect(second.loads[0]).toMatchObject({ rowsRead: 3, rowsDeadLettered: 1, rowsDeadLetteredBefore: 1, deadLetterPartitions: [{ partition: partitionA, files: [a], rows: 1, written: false }] });
      // A file with a bad row of its own, held: staged beside the raw runs, a's left alone; published, it is there once.
      const c = ws.deliver(EVENTS, ["3,click,2026-11-02 10:00:00", "bad-c,click,2026-11-02 11:00:00"]);
      const held = await ws.sync(glob, { hold: true });
      expect(held.held?.status).toBe("held");
      const partitionC = held.loads[0]!.deadLetterPartitions!.find((p) => p.files[0] === c)!.partition;
      expect(held.loads[0]).toMatchObject({ rowsDeadLettered: 2, rowsDeadLetteredBefore: 1 });
      expect(held.loads[0]!.deadLetterPartitions!.map((p) => `${p.partition} ${p.rows} ${p.written}`).sort()).toEqual([`${partitionA} 1 false`, `${partitionC} 1 true`].sort());
      expect(await rejected()).toEqual([keptA]);
      await publishSync(ws.lake, held.syncId);
      const keptC = `${partitionC.slice("delivery=".length)} ${c} 3 bad-c,click,2026-11-02 11:00:00`;
      expect((await rejected()).sort()).toEqual([keptA, keptC].sort());
      // Rollback of that sync takes c's dead letters away with its rows; the next sync keeps them again, a's still once.
      await rollbackSync(ws.lake, held.syncId);
      expect(await rejected()).toEqual([keptA]);
      const redo = await ws.sync(glob);
      expect(redo.loads[0]).toMatchObject({ rowsDeadLettered: 2, rowsDeadLetteredBefore: 1 });
      expect((await rejected()).sort()).toEqual([keptA, keptC].sort());
      // The same files again: nothing is written anywhere.
      const again = await ws.sync(glob);
      expect(again.totals.built).toBe(0);
      expect(again.loads[0]).toMatchObject({ rowsDeadLettered: 2, rowsDeadLetteredBefore: 2 });
      expect((await rejected()).sort()).toEqual([keptA, keptC].sort());
    }, 120_000);

    it("a file whose last line went to the dead-letter table, fixed in place and grown, appends the fixed line and the new ones only", async () => {
      const yaml = APPEND_YAML.replace("{format: csv, path: deliveries/*.csv}", "{format: jsonl, path: deliveries/*.jsonl}").replace("    layers:", "    dead_letter: events_bad\n    layers:");
      const ws = await workspace(backendName, yaml);
      const file = path.join(ws.dir, "deliveries", "log.jsonl");
      const line = (id: number | string) => `{"event_id":${JSON.stringify(id)},"kind":"k","ts":"2026-11-01 10:00:00"}`;
      writeFileSync(file, `${line(1)}\n${line("two")}\n`);
      const first = await ws.sync(file);
      expect(first.partitions.filter((p) => p.layer === "raw").map((p) => `${p.reason} ${p.rows}`)).toEqual(["new 1"]);
      expect(await ws.rows("SELECT count(*) FROM events_bad")).toEqual(["1"]);
      writeFileSync(file, `${line(1)}\n${line(2)}\n${line(3)}\n`);
      const fixed = await ws.sync(file);
      expect(fixed.partitions.filter((p) => p.layer === "raw").map((p) => `${p.reason} ${p.rows}`)).toEqual(["appended 3"]);
      expect(await ws.rows("SELECT string_agg(CAST(event_id AS VARCHAR), ',' ORDER BY event_id) FROM events_raw")).toEqual(["1,2,3"]);
    }, 120_000);

    it("a file whose bad rows before its last line are fixed in place appends the fixed rows only, grown or not, in every partition they land in", async () => {
      const ws = await workspace(backendName, APPEND_YAML.replace("    layers:", "    dead_letter: events_bad\n    layers:"));
      const file = path.join(ws.dir, "deliveries", "log.csv");
      const write = (lines: readonly string[]) => writeFileSync(file, `${EVENTS}\n${lines.join("\n")}\n`);
      const ids = () => ws.rows("SELECT day, string_agg(CAST(event_id AS VARCHAR), ',' ORDER BY event_id) FROM events_raw GROUP BY day ORDER BY day");
      const built = (report: SyncReport) => report.partitions.filter((p) => p.layer === "raw" && p.action === "build").map((p) => `${p.partition} ${p.reason} ${p.rows}`);
      // Lines 3 and 5 are bad (an id that is no number, a time that is none); both sit before day 1's last line.
      const lines = ["1,k,2026-11-01 10:00:00", "x2,k,2026-11-01 10:00:00", "3,k,2026-11-01 10:00:00", "4,k,not a time", "5,k,2026-11-01 10:00:00", "6,k,2026-11-02 10:00:00"];
      write(lines);
      expect(built(await ws.sync(file))).toEqual(["day=2026-11-01 new 3", "day=2026-11-02 new 1"]);
      expect(await ws.rows("SELECT count(*) FROM events_bad")).toEqual(["2"]);
      // Line 3 fixed in place, nothing added: day 1 takes that row only.
      lines[1] = "2,k,2026-11-01 10:00:00";
      write(lines);
      expect(built(await ws.sync(file))).toEqual(["day=2026-11-01 appended 4"]);
      expect(await ids()).toEqual(["2026-11-01 1,2,3,5", "2026-11-02 6"]);
      // Rolled back, day 1 is at its first run again (line 3 a dead letter then): the next sync takes the fixed row once more.
      await rollbackPartition(ws.lake, "events_raw", "day=2026-11-01");
      expect(await ids()).toEqual(["2026-11-01 1,3,5", "2026-11-02 6"]);
      expect(built(await ws.sync(file))).toEqual(["day=2026-11-01 appended 4"]);
      expect(await ids()).toEqual(["2026-11-01 1,2,3,5", "2026-11-02 6"]);
      // Line 5 fixed into day 2 and a line added: day 2 takes both, day 1 nothing.
      lines[3] = "4,k,2026-11-02 09:00:00";
      write([...lines, "7,k,2026-11-02 11:00:00"]);
      expect(built(await ws.sync(file))).toEqual(["day=2026-11-02 appended 3"]);
      expect(await ids()).toEqual(["2026-11-01 1,2,3,5", "2026-11-02 4,6,7"]);
      expect(built(await ws.sync(file))).toEqual([]);
    }, 120_000);

    it("a file whose bad or blank lines are removed or added among the rows appended, then grown, appends its new rows only; a quoted span of lines fixed, its rows once", async () => {
      const ws = await workspace(backendName, APPEND_YAML.replace("    layers:", "    dead_letter: events_bad\n    layers:"));
      const file = path.join(ws.dir, "deliveries", "log.csv");
      const write = (lines: readonly string[]) => writeFileSync(file, `${EVENTS}\n${lines.join("\n")}\n`);
      const ids = () => ws.rows("SELECT string_agg(CAST(event_id AS VARCHAR), ',' ORDER BY event_id) FROM events_raw");
      const row = (id: number) => `${id},k,2026-11-01 10:00:00`;
      write([row(1), "2,k,BAD", row(3)]);
      await ws.sync(file);
      expect(await ids()).toEqual(["1,3"]);
      // The bad line deleted (the rows after it move up a line), a blank line added, then a row: only row 4 is new.
      write([row(1), "", row(3)]);
      expect((await ws.sync(file)).partitions.filter((p) => p.layer === "raw").map((p) => p.reason)).toEqual(["already appended"]);
      write([row(1), "", row(3), row(4)]);
      await ws.sync(file);
      expect(await ids()).toEqual(["1,3,4"]);
      // Deleted and grown in one sync: the blank line gone, row 5 added.
      write([row(1), row(3), row(4), row(5)]);
      await ws.sync(file);
      expect(await ids()).toEqual(["1,3,4,5"]);
      // A stray quote opens a field that runs on over the next lines, up to the next quote: one bad row of four lines.
      const quoted = path.join(ws.dir, "deliveries", "quoted.csv");
      const spanned = [row(10), '11,a"b,2026-11-01 10:00:00', row(12), row(13), '14,a"b,2026-11-01 10:00:00', row(15), row(16)];
      writeFileSync(quoted, `${EVENTS}\n${spanned.join("\n")}\n`);
      await ws.sync(quoted);
      expect(await ids()).toEqual(["1,3,4,5,10,15,16"]);
      // Fixed in place: the four rows of the span are new, the others held.
      writeFileSync(quoted, `${EVENTS}\n${spanned.map((line) => line.replace('a"b', "ab")).join("\n")}\n`);
      await ws.sync(quoted);
      expect(await ids()).toEqual(["1,3,4,5,10,11,12,13,14,15,16"]);
    }, 120_000);

    it("a file renamed inside the glob, or rotated (renamed, compressed, a new file under its name), appends only its rows added since", async () => {
      const ws = await workspace(backendName, APPEND_YAML);
      const folder = path.join(ws.dir, "deliveries");
      const glob = path.join(folder, "*");
      const ids = () => ws.rows("SELECT string_agg(CAST(event_id AS VARCHAR), ',' ORDER BY event_id) FROM events_raw");
      const rows = (...list: number[]) => `${EVENTS}\n${list.map((id) => `${id},k,2026-11-01 10:00:00`).join("\n")}\n`;
      writeFileSync(path.join(folder, "a.csv"), rows(1, 2));
      await ws.sync(glob);
      // Renamed: the same rows under a new name are held; grown under it, only the new row is appended.
      renameSync(path.join(folder, "a.csv"), path.join(folder, "b.csv"));
      await ws.sync(glob);
      writeFileSync(path.join(folder, "b.csv"), rows(1, 2, 3));
      await ws.sync(glob);
      expect(await ids()).toEqual(["1,2,3"]);
      // Rotated: b.csv grew by row 4, then was renamed and compressed, and a new b.csv began with row 5.
      writeFileSync(path.join(folder, "b.csv.1.gz"), gzipSync(rows(1, 2, 3, 4)));
      writeFileSync(path.join(folder, "b.csv"), rows(5));
      await ws.sync(glob);
      expect(await ids()).toEqual(["1,2,3,4,5"]);
      expect((await ws.sync(glob)).partitions.filter((p) => p.layer === "raw").map((p) => p.reason)).toEqual(["already appended"]);
      // b.csv grows to rows 5, 6; then it grows by row 7 and is rotated to b.csv.2.gz, and the new b.csv has more lines
      // already (rows 8-11) than the one recorded: the rotated file continues the recorded b.csv, the new one is new.
      writeFileSync(path.join(folder, "b.csv"), rows(5, 6));
      await ws.sync(glob);
      writeFileSync(path.join(folder, "b.csv.2.gz"), gzipSync(rows(5, 6, 7)));
      writeFileSync(path.join(folder, "b.csv"), rows(8, 9, 10, 11));
      await ws.sync(glob);
      expect(await ids()).toEqual(["1,2,3,4,5,6,7,8,9,10,11"]);
    }, 120_000);

    it("a file whose good rows were edited in place, then grown, appends only the rows its partition does not hold (by difference); the same bytes again build nothing", async () => {
      const ws = await workspace(backendName, APPEND_YAML);
      const file = path.join(ws.dir, "deliveries", "log.csv");
      const row = (id: number, kind = "k") => `${id},${kind},2026-11-01 10:00:00`;
      const write = (lines: readonly string[]) => writeFileSync(file, `${EVENTS}\n${lines.join("\n")}\n`);
      const held = () => ws.rows("SELECT event_id, kind, count(*) FROM events_raw GROUP BY event_id, kind ORDER BY event_id, kind");
      // Row 3 twice on purpose: identical rows of one file are rows of their own, kept as many times as the file has them.
      write([row(1), row(2), row(3), row(3)]);
      await ws.sync(file);
      // Row 2's kind corrected in place, and rows 4 and 5 added (row 5 twice).
      write([row(1), row(2, "fixed"), row(3), row(3), row(4), row(5), row(5)]);
      const edited = await ws.sync(file);
      const raw = edited.partitions.filter((p) => p.layer === "raw");
      expect(raw.map((p) => `${p.partition} ${p.reason} ${p.rows}`)).toEqual(["day=2026-11-01 appended by difference 8"]);
      expect(raw[0]?.byDifference).toEqual([file]);
      expect(edited.loads[0]?.rowsAppended).toBe(4);
      // Append never deletes: row 2's old version stays beside its new one; nothing is there twice that was once in the file.
      expect(await held()).toEqual(["1 k 1", "2 fixed 1", "2 k 1", "3 k 2", "4 k 1", "5 k 2"]);
      // The same bytes again build nothing; grown once more, the file splits at its recorded line as before.
      expect((await ws.sync(file)).partitions.filter((p) => p.layer === "raw").map((p) => p.reason)).toEqual(["already appended"]);
      write([row(1), row(2, "fixed"), row(3), row(3), row(4), row(5), row(5), row(6)]);
      expect((await ws.sync(file)).partitions.filter((p) => p.layer === "raw").map((p) => `${p.reason} ${p.rows}`)).toEqual(["appended 9"]);
      // Edited again without growing, rolled back, synced again: the edited row is appended once each time it is new to the run.
      write([row(1), row(2, "fixed"), row(3, "again"), row(3), row(4), row(5), row(5), row(6)]);
      await ws.sync(file);
      expect(await held()).toEqual(["1 k 1", "2 fixed 1", "2 k 1", "3 again 1", "3 k 2", "4 k 1", "5 k 2", "6 k 1"]);
      await rollbackPartition(ws.lake, "events_raw", "day=2026-11-01");
      expect((await ws.sync(file)).partitions.filter((p) => p.layer === "raw").map((p) => `${p.reason} ${p.rows}`)).toEqual(["appended by difference 10"]);
      expect(await held()).toEqual(["1 k 1", "2 fixed 1", "2 k 1", "3 again 1", "3 k 2", "4 k 1", "5 k 2", "6 k 1"]);
      expect((await ws.sync(file)).partitions.filter((p) => p.layer === "raw").map((p) => p.reason)).toEqual(["already appended"]);
    }, 120_000);

    it("a file whose rows were only reordered or taken out is recorded as it is now: renamed and grown later, only its new rows are appended", async () => {
      const ws = await workspace(backendName, APPEND_YAML);
      const folder = path.join(ws.dir, "deliveries");
      const glob = path.join(folder, "*");
      const ids = () => ws.rows("SELECT string_agg(CAST(event_id AS VARCHAR), ',' ORDER BY event_id) FROM events_raw");
      const rows = (...list: number[]) => `${EVENTS}\n${list.map((id) => `${id},k,2026-11-01 10:00:00`).join("\n")}\n`;
      writeFileSync(path.join(folder, "a.csv"), rows(1, 2, 3));
      await ws.sync(glob);
      // Reordered, and row 1 taken out: nothing is new, and the run records the file as it is now.
      writeFileSync(path.join(folder, "a.csv"), rows(3, 2));
      const reordered = await ws.sync(glob);
      expect(reordered.partitions.filter((p) => p.layer === "raw").map((p) => `${p.reason} ${p.rows}`)).toEqual(["appended by difference 3"]);
      expect(reordered.loads[0]?.rowsAppended).toBe(0);
      expect((await ws.sync(glob)).partitions.filter((p) => p.layer === "raw").map((p) => p.reason)).toEqual(["already appended"]);
      // Renamed and grown: the file under its new name continues the record of it as it was last.
      renameSync(path.join(folder, "a.csv"), path.join(folder, "b.csv"));
      writeFileSync(path.join(folder, "b.csv"), rows(3, 2, 4));
      await ws.sync(glob);
      expect(await ids()).toEqual(["1,2,3,4"]);
    }, 120_000);

    it("a cumulative export re-sorted with new rows among the old appends the new rows only, in every partition, however many lines they are", async () => {
      const ws = await workspace(backendName, APPEND_YAML);
      const file = path.join(ws.dir, "deliveries", "export.csv");
      const row = (id: number) => `${id},k,2026-11-0${1 + (id % 3)} 10:00:00`;
      const old = Array.from({ length: 3000 }, (_, i) => 2 * i);
      writeFileSync(file, `${EVENTS}\n${old.map(row).join("\n")}\n`);
      await ws.sync(file);
      // Every old row again, 3,000 new ones between them (each a line at or before the last old row of its day).
      const all = Array.from({ length: 6000 }, (_, i) => i);
      writeFileSync(file, `${EVENTS}\n${all.map(row).join("\n")}\n`);
      const report = await ws.sync(file);
      expect(report.partitions.filter((p) => p.layer === "raw").map((p) => p.reason)).toEqual(Array(3).fill("appended by difference"));
      expect(report.loads[0]?.rowsAppended).toBe(3000);
      expect(await ws.rows("SELECT count(*), count(DISTINCT event_id), min(event_id), max(event_id) FROM events_raw")).toEqual(["6000 6000 0 5999"]);
    }, 120_000);

    it("more than 16 files renamed inside the glob at once, then grown, append only their new rows", async () => {
      const ws = await workspace(backendName, APPEND_YAML);
      const folder = path.join(ws.dir, "deliveries");
      const glob = path.join(folder, "*");
      const rows = (...list: number[]) => `${EVENTS}\n${list.map((id) => `${id},k,2026-11-01 10:00:00`).join("\n")}\n`;
      const files = Array.from({ length: 18 }, (_, i) => i);
      for (const i of files) writeFileSync(path.join(folder, `a${i}.csv`), rows(100 * i + 1, 100 * i + 2));
      await ws.sync(glob);
      // Each file renamed (a0.csv to b0.csv, ...) and grown by one row: 18 new files beside 18 gone ones, 324 pairs.
      for (const i of files) {
        rmSync(path.join(folder, `a${i}.csv`));
        writeFileSync(path.join(folder, `b${i}.csv`), rows(100 * i + 1, 100 * i + 2, 100 * i + 3));
      }
      const report = await ws.sync(glob);
      expect(report.loads[0]?.rowsAppended).toBe(18);
      expect(await ws.rows("SELECT count(*), count(DISTINCT event_id) FROM events_raw")).toEqual(["54 54"]);
      expect((await ws.sync(glob)).partitions.filter((p) => p.layer === "raw").map((p) => p.reason)).toEqual(["already appended"]);
    }, 180_000);

    it("a file with more than 1,000 bad lines, one of them fixed in place, then grown, appends the fixed row and the new one only", async () => {
      const ws = await workspace(backendName, APPEND_YAML.replace("    layers:", "    dead_letter: events_bad\n    layers:"));
      const file = path.join(ws.dir, "deliveries", "log.csv");
      const row = (id: number) => `${id},k,2026-11-01 10:00:00`;
      const bad = Array.from({ length: 1002 }, (_, i) => `${10_000 + i},k,not a time`);
      const write = (lines: readonly string[]) => writeFileSync(file, `${EVENTS}\n${lines.join("\n")}\n`);
      write([row(1), ...bad, row(2)]);
      await ws.sync(file);
      expect(await ws.rows("SELECT count(*) FROM events_bad")).toEqual(["1002"]);
      bad[500] = row(10_500);
      write([row(1), ...bad, row(2), row(3)]);
      const report = await ws.sync(file);
      expect(report.loads[0]?.rowsAppended).toBe(2);
      expect(await ws.rows("SELECT string_agg(CAST(event_id AS VARCHAR), ',' ORDER BY event_id) FROM events_raw")).toEqual(["1,2,3,10500"]);
    }, 180_000);

    it("a file whose content is wholly replaced under its name appends all its new rows (none is lost)", async () => {
      const ws = await workspace(backendName, APPEND_YAML);
      const file = path.join(ws.dir, "deliveries", "log.csv");
      const write = (...list: number[]) => writeFileSync(file, `${EVENTS}\n${list.map((id) => `${id},k,2026-11-01 10:00:00`).join("\n")}\n`);
      const ids = () => ws.rows("SELECT string_agg(CAST(event_id AS VARCHAR), ',' ORDER BY event_id) FROM events_raw");
      write(1, 2, 3);
      await ws.sync(file);
      // Shorter, then longer, each with a row of its own twice: every row of the new content lands, as often as it is there.
      write(10, 11, 11);
      await ws.sync(file);
      expect(await ids()).toEqual(["1,2,3,10,11,11"]);
      write(20, 21, 22, 23, 23, 24);
      const report = await ws.sync(file);
      expect(report.loads[0]?.rowsAppended).toBe(6);
      expect(await ids()).toEqual(["1,2,3,10,11,11,20,21,22,23,23,24"]);
    }, 120_000);

    for (const format of ["csv", "jsonl", "jsonl.gz"] as const) {
      it(`a ${format} file that grows at its end appends only its new lines; one rewritten under its name, its rows not held (by difference); one rotated, its rows`, async () => {
        const jsonl = format !== "csv";
        const ws = await workspace(backendName, jsonl ? APPEND_YAML.replace("{format: csv, path: deliveries/*.csv}", "{format: jsonl, path: deliveries/*.jsonl*}") : APPEND_YAML);
        const file = path.join(ws.dir, "deliveries", `log.${format}`);
        const line = (id: number, day: number) =>
          jsonl ? `{"event_id":${id},"kind":"k","ts":"2026-11-0${day} 10:00:00"}` : `${id},k,2026-11-0${day} 10:00:00`;
        let lines: string[] = [];
        const write = (rows: readonly (readonly [number, number])[], grow = true) => {
          lines = [...(grow ? lines : []), ...rows.map(([id, day]) => line(id, day))];
          const text = `${jsonl ? "" : `${EVENTS}\n`}${lines.join("\n")}\n`;
          writeFileSync(file, format === "jsonl.gz" ? gzipSync(text) : text);
        };
        const ids = () => ws.rows("SELECT day, string_agg(CAST(event_id AS VARCHAR), ',' ORDER BY event_id) FROM events_raw GROUP BY day ORDER BY day");
        const built = async (report: SyncReport) => report.partitions.filter((p) => p.layer === "raw" && p.action === "build").map((p) => `${p.partition} ${p.reason} ${p.rows}`);
        write([[1, 1], [2, 1]]);
        expect(await built(await ws.sync(file))).toEqual(["day=2026-11-01 new 2"]);
        // Grown: a row for the old day and one for a new day; each partition takes only the new lines.
        write([[3, 1], [4, 2]]);
        expect(await built(await ws.sync(file))).toEqual(["day=2026-11-01 appended 3", "day=2026-11-02 new 1"]);
        write([[5, 1], [6, 2]]);
        expect(await built(await ws.sync(file))).toEqual(["day=2026-11-01 appended 4", "day=2026-11-02 appended 2"]);
        expect(await ids()).toEqual(["2026-11-01 1,2,3,5", "2026-11-02 4,6"]);
        expect(await built(await ws.sync(file))).toEqual([]);
        // Rollback of day 1 undoes its last append (row 5): the next sync appends exactly that row again.
        await rollbackPartition(ws.lake, "events_raw", "day=2026-11-01");
        expect(await ids()).toEqual(["2026-11-01 1,2,3", "2026-11-02 4,6"]);
        expect(await built(await ws.sync(file))).toEqual(["day=2026-11-01 appended 4"]);
        expect(await ids()).toEqual(["2026-11-01 1,2,3,5", "2026-11-02 4,6"]);
        // Rewritten in place, longer than before (a day 1 line changed): day 1's rows did not only grow, and only those it
        // does not hold are appended (the changed line's), by difference; day 2's rows did, and only its new line is appended.
        lines[0] = line(7, 1);
        write([[8, 2]]);
        expect(await built(await ws.sync(file))).toEqual(["day=2026-11-01 appended by difference 5", "day=2026-11-02 appended 3"]);
        expect(await ids()).toEqual(["2026-11-01 1,2,3,5,7", "2026-11-02 4,6,8"]);
        // Rotated: a new file under the same name, shorter (none of its rows held), then grown: all its rows, then its new lines only.
        write([[9, 1]], false);
        expect(await built(await ws.sync(file))).toEqual(["day=2026-11-01 appended 6"]);
        write([[10, 1]]);
        expect(await built(await ws.sync(file))).toEqual(["day=2026-11-01 appended 7"]);
        expect(await ids()).toEqual(["2026-11-01 1,2,3,5,7,9,10", "2026-11-02 4,6,8"]);
        expect(await ws.rows("SELECT day, events FROM events_daily ORDER BY day")).toEqual(["2026-11-01 7", "2026-11-02 3"]);
      }, 120_000);
    }
  });

  describe(`write: upsert (${backendName})`, () => {
    const CUSTOMERS = "id,name,region,updated_at,deleted";

    it("merges by key: updates, inserts, moves between partitions, deletes, and the greatest order_by wins", async () => {
      const ws = await workspace(backendName, upsertYaml());
      const first = ws.deliver(CUSTOMERS, [
        "1,Ada,North,2026-11-01 00:00:00,false",
        "2,Bo,North,2026-11-01 00:00:00,false",
        "3,Cy,South,2026-11-01 00:00:00,false",
        "4,Di,South,2026-11-01 00:00:00,false",
        "5,Ed,West,2026-11-01 00:00:00,false",
      ]);
      expect(actions(await ws.sync(first))).toEqual(["raw area=north build new", "raw area=south build new", "raw area=west build new"]);

      const second = ws.deliver(CUSTOMERS, [
        // 2 renamed in place; 3 moves from south to north; 4 is deleted; 6 is new in east.
        "2,Bob,North,2026-11-02 00:00:00,false",
        "3,Cy,North,2026-11-02 00:00:00,false",
        "4,Di,South,2026-11-02 00:00:00,true",
        "6,Flo,East,2026-11-02 00:00:00,false",
      ]);
      const merged = await ws.sync(second);
      // West is not touched: it holds none of the delivery's keys.
      expect(actions(merged)).toEqual(["raw area=east build new", "raw area=north build content changed", "raw area=south build content changed"]);
      expect(merged.partitions.find((p) => p.partition === "area=south")?.rows).toBe(0);
      expect(await ws.rows("SELECT id, name, area FROM customers_raw ORDER BY id")).toEqual([
        "1 Ada north", "2 Bob north", "3 Cy north", "5 Ed west", "6 Flo east",
      ]);

      // The same delivery again changes nothing: each touched partition's merge equals what it holds.
      const again = await ws.sync(second);
      expect(again.totals.built).toBe(0);
      expect(actions(again)).toEqual(["raw area=east skip unchanged", "raw area=north skip unchanged", "raw area=south skip unchanged"]);

      // Several rows of one key in one delivery: the greatest updated_at wins, wherever it sits in the file.
      const third = ws.deliver(CUSTOMERS, [
        "5,Eddie,West,2026-11-04 00:00:00,false",
        "5,Ed (old),West,2026-11-03 00:00:00,false",
        "1,Ada,North,2026-11-03 00:00:00,true",
        "1,Ada,North,2026-11-05 00:00:00,false",
      ]);
      await ws.sync(third);
      expect(await ws.rows("SELECT id, name, area FROM customers_raw ORDER BY id")).toEqual([
        "1 Ada north", "2 Bob north", "3 Cy north", "5 Eddie west", "6 Flo east",
      ]);
      expect(await ws.rows("SELECT CAST(updated_at AS VARCHAR) FROM customers_raw WHERE id = 1")).toEqual(["2026-11-05 00:00:00"]);
    }, 120_000);

    it("refuses a key the delivery holds twice without order_by, and a key without a value, loading nothing", async () => {
      const ws = await workspace(backendName, upsertYaml(false));
      await ws.sync(ws.deliver(CUSTOMERS, ["1,Ada,North,2026-11-01 00:00:00,false"]));
      const twice = ws.deliver(CUSTOMERS, ["1,Ada,North,2026-11-02 00:00:00,false", "1,Ann,North,2026-11-03 00:00:00,false"]);
      await expect(ws.sync(twice)).rejects.toThrow(/holds 2 different rows for the key id=1; declare order_by: \[column\]/);
      // A key without a value is a bad row (the key is declared not nullable): nothing is loaded.
      const noKey = ws.deliver(CUSTOMERS, [",Nobody,North,2026-11-02 00:00:00,false", "3,Cy,North,2026-11-02 00:00:00,false"]);
      await expect(ws.sync(noKey)).rejects.toThrow(/column id is NULL but is declared not nullable.*nothing was loaded/);
      // The same row twice is one row, not a conflict.
      const same = ws.deliver(CUSTOMERS, ["2,Bo,North,2026-11-02 00:00:00,false", "2,Bo,North,2026-11-02 00:00:00,false"]);
      await ws.sync(same);
      expect(await ws.rows("SELECT id, name FROM customers_raw ORDER BY id")).toEqual(["1 Ada", "2 Bo"]);
    }, 120_000);
  });
}

for (const backendName of selectedBackends()) {
  describe(`write: replace (${backendName})`, () => {
    const COUNTRIES = "code,name,population";

    it("replaces a table without partitions as one unit: skip when unchanged, rollback, history", async () => {
      const ws = await workspace(backendName, REPLACE_YAML);
      const first = ws.deliver(COUNTRIES, ["fr,France,68", "de,Germany,84"], "countries");
      expect(actions(await ws.sync(first))).toEqual(["raw  build new", "summary  build new"]);
      expect(await ws.rows("SELECT code, population FROM countries_raw ORDER BY code")).toEqual(["de 84", "fr 68"]);
      expect(await ws.rows("SELECT countries, population FROM countries_summary")).toEqual(["2 152"]);
      expect(actions(await ws.sync(first))).toEqual(["raw  skip unchanged", "summary  skip unchanged"]);

      // A new delivery is the whole table: a row it lacks is gone.
      const second = ws.deliver(COUNTRIES, ["fr,France,69", "it,Italy,59"], "countries");
      const replaced = await ws.sync(second);
      expect(actions(replaced)).toEqual(["raw  build content changed", "summary  build upstream changed"]);
      expect(await ws.rows("SELECT code, population FROM countries_raw ORDER BY code")).toEqual(["fr 69", "it 59"]);
      expect(await ws.rows("SELECT countries, population FROM countries_summary")).toEqual(["2 128"]);

      // The table's pointer keeps the run before: rollback is one move, and the next sync redoes it.
      const pointer = await ws.lake.pointer("countries_raw", "");
      expect(pointer?.previousRunId).toBeDefined();
      await rollbackPartition(ws.lake, "countries_raw", "");
      expect(await ws.rows("SELECT code FROM countries_raw ORDER BY code")).toEqual(["de", "fr"]);
      const history = await readHistory(ws.lake, "countries_raw");
      expect(history).toHaveLength(1);
      expect(history[0]!.runs.map((r) => r.state)).toEqual(["previous", "current"]);
      const redo = await ws.sync(second);
      expect(actions(redo)).toEqual(["raw  build rolled back", "summary  skip unchanged"]);
      expect(await ws.rows("SELECT code FROM countries_raw ORDER BY code")).toEqual(["fr", "it"]);
    }, 120_000);
  });
}

describe("write: upsert by day", () => {
  it("reads the current runs' rows, not partition values DuckDB would guess from their folder names (day=2026-11-01 as a DATE)", async () => {
    const yaml = upsertYaml().replace("    partition: {area: lower(region)}\n", "    partition: {day: \"strftime(updated_at, '%Y-%m-%d')\"}\n");
    const ws = await workspace("local", yaml);
    const header = "id,name,region,updated_at,deleted";
    await ws.sync(ws.deliver(header, ["1,Ada,North,2026-11-01 10:00:00,false", "2,Bo,South,2026-11-01 11:00:00,false"]));
    const moved = await ws.sync(ws.deliver(header, ["2,Bob,South,2026-11-02 09:00:00,false"]));
    expect(actions(moved)).toEqual(["raw day=2026-11-01 build content changed", "raw day=2026-11-02 build new"]);
    expect(await ws.rows("SELECT id, name, day FROM customers_raw ORDER BY id")).toEqual(["1 Ada 2026-11-01", "2 Bob 2026-11-02"]);
  }, 60_000);
});

describe("write: upsert signs the merged partition's keys", () => {
  // Issue 25 item 23: a merge that left the key columns out of the partition's signature skipped this change.
  it("rebuilds a partition where one key is deleted and another added with the same other values", async () => {
    const ws = await workspace("local", upsertYaml());
    const header = "id,name,region,updated_at,deleted";
    await ws.sync(ws.deliver(header, ["1,Ada,North,2026-11-01 00:00:00,false", "2,Bo,North,2026-11-01 00:00:00,false"]));
    const swapped = await ws.sync(ws.deliver(header, ["1,Ada,North,2026-11-02 00:00:00,true", "3,Ada,North,2026-11-01 00:00:00,false"]));
    expect(actions(swapped)).toEqual(["raw area=north build content changed"]);
    expect(await ws.rows("SELECT id, name FROM customers_raw ORDER BY id")).toEqual(["2 Bo", "3 Ada"]);
  }, 60_000);
});

describe("write: upsert of a table without partition keys", () => {
  it("merges into the whole table, one unit", async () => {
    const yaml = upsertYaml().replace("    partition: {area: lower(region)}\n", "");
    const ws = await workspace("local", yaml);
    const header = "id,name,region,updated_at,deleted";
    expect(actions(await ws.sync(ws.deliver(header, ["1,Ada,North,2026-11-01 00:00:00,false", "2,Bo,South,2026-11-01 00:00:00,false"])))).toEqual(["raw  build new"]);
    const second = ws.deliver(header, ["2,Bob,South,2026-11-02 00:00:00,false", "1,Ada,North,2026-11-02 00:00:00,true", "3,Cy,East,2026-11-02 00:00:00,false"]);
    expect(actions(await ws.sync(second))).toEqual(["raw  build content changed"]);
    expect(await ws.rows("SELECT id, name FROM customers_raw ORDER BY id")).toEqual(["2 Bob", "3 Cy"]);
    expect(actions(await ws.sync(second))).toEqual(["raw  skip unchanged"]);
  }, 60_000);
});

describe("write: append (embedded lake files)", () => {
  it("a new run links the previous run's files (no copy of their bytes), and the previous run stays whole", async () => {
    const ws = await workspace("local", APPEND_YAML);
    await ws.sync(ws.deliver(EVENTS, ["1,click,2026-11-01 10:00:00"]));
    const before = (await ws.lake.snapshot({ tables: ["events_raw"] }))[0]?.partitions ?? [];
    const report = await ws.sync(ws.deliver(EVENTS, ["2,click,2026-11-01 11:00:00"]));
    expect(report.partitions.find((p) => p.layer === "raw")).toMatchObject({ reason: "appended", rows: 2 });
    const after = (await ws.lake.snapshot({ tables: ["events_raw"] }))[0]?.partitions ?? [];
    const [oldFile] = before[0]!.files;
    const carried = after[0]!.files.find((key) => path.basename(key) === path.basename(oldFile!));
    expect(after[0]!.files).toHaveLength(2);
    const lakeDir = (ws.lake as unknown as { store: { localPath(key: string): string } }).store.localPath.bind((ws.lake as unknown as { store: object }).store);
    expect(statSync(lakeDir(carried!)).ino).toBe(statSync(lakeDir(oldFile!)).ino);
  }, 60_000);

  it(`compacts a run grown to ${APPEND_MAX_FILES} files into one, rows unchanged`, async () => {
    const ws = await workspace("local", APPEND_YAML);
    for (let i = 1; i <= APPEND_MAX_FILES + 1; i += 1) {
      const report = await ws.sync(ws.deliver(EVENTS, [`${i},click,2026-11-01 10:00:${String(i).padStart(2, "0")}`]));
      expect(report.partitions.find((p) => p.layer === "raw")?.rows).toBe(i);
      const [run] = (await ws.lake.snapshot({ tables: ["events_raw"] }))[0]?.partitions ?? [];
      expect(run!.files).toHaveLength(i <= APPEND_MAX_FILES ? i : 1);
    }
    expect(await ws.rows("SELECT count(*), count(DISTINCT event_id), min(event_id), max(event_id) FROM events_raw")).toEqual([`${APPEND_MAX_FILES + 1} ${APPEND_MAX_FILES + 1} 1 ${APPEND_MAX_FILES + 1}`]);
    // The compacted run still knows what it holds: the last delivery again adds nothing.
    const last = path.join(ws.dir, "deliveries", `delivery-${APPEND_MAX_FILES}.csv`);
    expect((await ws.sync(last)).partitions.find((p) => p.layer === "raw")?.reason).toBe("already appended");
  }, 120_000);
});
