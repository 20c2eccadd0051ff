import { appendFileSync, copyFileSync, mkdirSync, utimesSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { loadPipelineConfig } from "../../src/config/pipeline-config.js";
import { publishSync } from "../../src/lake/operations/publish.js";
import { rollbackSync } from "../../src/lake/operations/rollback.js";
import { Pipeline, type SyncReport } from "../../src/pipeline/pipeline.js";
import { BACKEND_FACTORIES, selectedBackends, tempDir } from "../support/lake-fixture.js";

/**
 * `write: append` of files a writer is still writing: a sync that finds a file halfway through its last line (no line
 * end yet) holds that line back, as a tailing reader does, and appends its row once the line is finished: never the
 * half row, and never the half as a bad row. A file that simply lacks its last line end gives that row once it has been
 * unchanged for a minute.
 */
const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** An append of CSV or JSONL logs; `more` columns beside the event's id, amount and time. */
const yamlOf = (format: "csv" | "jsonl", more = "") => `datasets:
  events:
    source: {format: ${format}, path: deliveries/*.${format}}
    write: append
    dead_letter: events_bad
    columns: {event_id: BIGINT, amount: BIGINT, ts: TIMESTAMP${more}}
    partition: {day: "strftime(ts, '%Y-%m-%d')"}
`;
const CSV = yamlOf("csv");
const JSONL = yamlOf("jsonl");

async function workspace(backendName: string, yaml: string) {
  const backend = await BACKEND_FACTORIES[backendName]!();
  cleanups.push(() => backend.cleanup());
  const lake = await backend.open({ graceMs: 0, leaseWaitMs: 0 });
  cleanups.push(() => lake.close());
  const { dir, cleanup } = tempDir("lakeswap-unterminated-");
  cleanups.push(cleanup);
  const folder = path.join(dir, "deliveries");
  mkdirSync(folder);
  const configFile = path.join(dir, "lakeswap.yaml");
  writeFileSync(configFile, yaml);
  const glob = path.join(folder, yaml.includes("format: csv") ? "*.csv" : "*.jsonl");
  return {
    lake,
    file: (name: string) => path.join(folder, name),
    sync: (options: { readonly hold?: boolean } = {}): Promise<SyncReport> => new Pipeline(lake, loadPipelineConfig(configFile), { inputs: [glob], ...options }).sync(),
    /** Each event as `id=amount`, with its count where above 1, in id order. */
    held: async () =>
      (await lake.query("SELECT event_id, amount, count(*) FROM events_raw GROUP BY event_id, amount ORDER BY event_id, amount")).rows.map(
        ([id, amount, n]) => `${id}=${amount}${Number(n) > 1 ? `x${n}` : ""}`,
      ),
    badRows: async () => (await lake.listTables()).some((t) => t.name === "events_bad") ? Number((await lake.query("SELECT count(*) FROM events_bad")).rows[0]?.[0]) : 0,
  };
}

/** A CSV row, and the same as a JSONL line (without their line ends). */
const csvRow = (id: number, amount: number) => `${id},${amount},2026-11-01 10:00:${String(id).padStart(2, "0")}`;
const jsonRow = (id: number, amount: number) => JSON.stringify({ event_id: id, amount, ts: `2026-11-01 10:00:${String(id).padStart(2, "0")}` });

/** Sets a file's modification time a few minutes back: it has been quiet for longer than an append waits for its last line. */
function quiet(file: string): void {
  const past = new Date(Date.now() - 5 * 60_000);
  utimesSync(file, past, past);
}

for (const backendName of selectedBackends()) {
  describe(`write: append of files being written (${backendName})`, () => {
    it("a line cut anywhere by a sync is held back until its writer finishes it: each row lands once, whole, and nothing is dead-lettered", async () => {
      for (const [yaml, row, name, header] of [
        [CSV, csvRow, "log.csv", "event_id,amount,ts\n"],
        [JSONL, jsonRow, "log.jsonl", ""],
      ] as const) {
        const ws = await workspace(backendName, yaml);
        writeFileSync(ws.file(name), header);
        const written: string[] = [];
        // Rows 1..6, each cut at another place by a sync before its writer finishes it: inside its amount (a half that
        // would parse as a row with another amount), inside its time, right after its last character.
        for (let id = 1; id <= 6; id += 1) {
          const text = `${row(id, id * 111)}\n`;
          const cut = [text.indexOf(",") + 2, text.length - 5, text.length - 1, text.indexOf(",") + 2, 3, text.length - 1][id - 1]!;
          appendFileSync(ws.file(name), text.slice(0, cut));
          const halfway = await ws.sync();
          expect(await ws.held()).toEqual(written);
          expect(await ws.badRows()).toBe(0);
          expect(halfway.loads[0]?.unterminated).toEqual([ws.file(name)]);
          appendFileSync(ws.file(name), text.slice(cut));
          written.push(`${id}=${id * 111}`);
          const finished = await ws.sync();
          expect(finished.loads[0]?.unterminated).toBeUndefined();
          expect(await ws.held()).toEqual(written);
        }
        expect(await ws.badRows()).toBe(0);
      }
    }, 240_000);

    it("a file that lacks only its last line end gives that row once quiet; the same bytes again after a sync held it are read again, not skipped as known", async () => {
      const ws = await workspace(backendName, CSV);
      writeFileSync(ws.file("export.csv"), `event_id,amount,ts\n${csvRow(1, 10)}\n${csvRow(2, 20)}`);
      const fresh = await ws.sync();
      expect(await ws.held()).toEqual(["1=10"]);
      expect(fresh.loads[0]?.unterminated).toEqual([ws.file("export.csv")]);
      // Unchanged bytes, quiet now: the delivery was not kept as known, its last row lands (once).
      quiet(ws.file("export.csv"));
      const later = await ws.sync();
      expect(later.loads[0]?.unterminated).toBeUndefined();
      expect(later.loads[0]?.rowsAppended).toBe(1);
      expect(await ws.held()).toEqual(["1=10", "2=20"]);
      expect((await ws.sync()).partitions.map((p) => p.reason)).toEqual(["already appended"]);
      // Beside it, a file written whole but lacking its last line end, quiet already: read whole at once.
      writeFileSync(ws.file("other.csv"), `event_id,amount,ts\n${csvRow(3, 30)}`);
      quiet(ws.file("other.csv"));
      expect((await ws.sync()).loads[0]?.unterminated).toBeUndefined();
      expect(await ws.held()).toEqual(["1=10", "2=20", "3=30"]);
    }, 180_000);

    it("a file copied while its last line is half written: both hold it, and the finished line lands once", async () => {
      const ws = await workspace(backendName, CSV);
      writeFileSync(ws.file("a.csv"), `event_id,amount,ts\n${csvRow(1, 10)}\n${csvRow(2, 20)}\n${csvRow(3, 30).slice(0, 4)}`);
      await ws.sync();
      copyFileSync(ws.file("a.csv"), ws.file("b.csv"));
      const copied = await ws.sync();
      expect(await ws.held()).toEqual(["1=10", "2=20"]);
      expect(await ws.badRows()).toBe(0);
      expect(copied.loads[0]?.unterminated).toEqual([ws.file("a.csv"), ws.file("b.csv")]);
      for (const name of ["a.csv", "b.csv"]) appendFileSync(ws.file(name), `${csvRow(3, 30).slice(4)}\n`);
      await ws.sync();
      expect(await ws.held()).toEqual(["1=10", "2=20", "3=30"]);
      expect(await ws.badRows()).toBe(0);
    }, 180_000);

    it("a sync that held a line back, rolled back (--sync) and held (--hold, then published) with others: each row lands once", async () => {
      const ws = await workspace(backendName, CSV);
      writeFileSync(ws.file("log.csv"), `event_id,amount,ts\n${csvRow(1, 10)}\n${csvRow(2, 20).slice(0, 5)}`);
      const first = await ws.sync();
      expect(first.loads[0]?.unterminated).toEqual([ws.file("log.csv")]);
      // Undone: the partition is as before the sync (no run); the file, still halfway, gives row 1 again, and only it.
      await rollbackSync(ws.lake, first.syncId);
      expect(await ws.held()).toEqual([]);
      await ws.sync();
      expect(await ws.held()).toEqual(["1=10"]);
      // The line finished and a row more: a held sync stages them; published, they land once, nothing else again.
      appendFileSync(ws.file("log.csv"), `${csvRow(2, 20).slice(5)}\n${csvRow(3, 30)}\n`);
      const held = await ws.sync({ hold: true });
      expect(await ws.held()).toEqual(["1=10"]);
      await publishSync(ws.lake, held.syncId);
      expect(await ws.held()).toEqual(["1=10", "2=20", "3=30"]);
      expect((await ws.sync()).partitions.map((p) => p.reason)).toEqual(["already appended"]);
      expect(await ws.badRows()).toBe(0);
    }, 120_000);

    it("a quoted field across lines, a header, or blanks a writer is halfway through are held back too, and land whole once written", async () => {
      const ws = await workspace(backendName, yamlOf("csv", ", note: VARCHAR"));
      const header = "event_id,amount,ts,note\n";
      const row = (id: number, note: string) => `${id},${id * 10},2026-11-01 10:00:0${id},${note}\n`;
      // a.csv: the file ends in a line end, inside a quoted field of two lines; b.csv: its header half written; c.csv:
      // a row begun with blanks (a CSV reader makes a bad row of a line of blanks).
      writeFileSync(ws.file("a.csv"), `${header}${row(1, "x")}2,20,2026-11-01 10:00:02,"first line\n`);
      writeFileSync(ws.file("b.csv"), "event_id,amo");
      writeFileSync(ws.file("c.csv"), `${header}${row(3, "y")}  `);
      const halfway = await ws.sync();
      expect(await ws.held()).toEqual(["1=10", "3=30"]);
      expect(await ws.badRows()).toBe(0);
      expect(halfway.loads[0]?.unterminated).toEqual(["a.csv", "b.csv", "c.csv"].map((name) => ws.file(name)));
      appendFileSync(ws.file("a.csv"), 'second line"\n');
      appendFileSync(ws.file("b.csv"), `unt,ts,note\n${row(4, "z")}`);
      appendFileSync(ws.file("c.csv"), row(5, "w").trimStart());
      const written = await ws.sync();
      expect(written.loads[0]?.unterminated).toBeUndefined();
      expect(await ws.held()).toEqual(["1=10", "2=20", "3=30", "4=40", "5=50"]);
      expect((await ws.lake.query("SELECT note FROM events_raw WHERE event_id = 2")).rows).toEqual([["first line\nsecond line"]]);
      expect(await ws.badRows()).toBe(0);
    }, 120_000);

    it("a last line cut inside a character (a writer halfway through UTF-8) is held back too, not refused as not UTF-8", async () => {
      const ws = await workspace(backendName, yamlOf("jsonl", ", note: VARCHAR"));
      const line = `${JSON.stringify({ event_id: 1, amount: 5, ts: "2026-11-01 10:00:00", note: "café" })}\n`;
      const bytes = Buffer.from(line);
      const cut = bytes.indexOf(0xc3) + 1;
      writeFileSync(ws.file("log.jsonl"), bytes.subarray(0, cut));
      const halfway = await ws.sync();
      expect(halfway.loads[0]?.unterminated).toEqual([ws.file("log.jsonl")]);
      appendFileSync(ws.file("log.jsonl"), bytes.subarray(cut));
      await ws.sync();
      expect((await ws.lake.query("SELECT event_id, note FROM events_raw")).rows).toEqual([[1, "café"]]);
      expect(await ws.badRows()).toBe(0);
    }, 120_000);
  });
}
