import { readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { gzipSync } from "node:zlib";
import { DuckDBInstance } from "@duckdb/node-api";
import { afterAll, describe, expect, it } from "vitest";
import { queryEmbeddedLake, tempDir } from "../support/lake-fixture.js";
import { runMain } from "../support/main-cli.js";

// A delivery file compressed with gzip (`orders.csv.gz`, as exports and object stores commonly hold them) is read as
// the file it decompresses to: the same rows, signed the same, bad rows named by the file as delivered with their line
// and text; a damaged file is refused before anything lands, and nothing decompressed stays behind.

const cleanups: (() => void)[] = [];
afterAll(() => cleanups.forEach((cleanup) => cleanup()));

/** 40 orders over 4 days; every 10th has a note with a quoted line break (a CSV record over two lines). */
const ROWS = Array.from({ length: 40 }, (_, i) => ({ id: i + 1, day: `2026-11-0${(i % 4) + 1}`, amount: `${i}.50`, note: i % 10 === 0 ? 'two\n"lines"' : `n${i}` }));
const BAD_CSV = "999,2026-11-01,not-a-number,bad\n";
const BAD_JSONL = `${JSON.stringify({ order_id: 999, order_date: "2026-11-01", amount: "not-a-number", note: "bad" })}\n`;

const csvField = (value: string): string => (/[",\n]/.test(value) ? `"${value.replaceAll('"', '""')}"` : value);
const csvText = (header: boolean, bad = ""): string =>
  `${header ? "order_id,order_date,amount,note\n" : ""}${ROWS.map((r) => [String(r.id), r.day, r.amount, r.note].map(csvField).join(",")).join("\n")}\n${bad}`;
const jsonlText = (bad = ""): string => `${ROWS.map((r) => JSON.stringify({ order_id: r.id, order_date: r.day, amount: Number(r.amount), note: r.note })).join("\n")}\n${bad}`;

/** The decompressed files' folders this process has left in the temporary folder. */
const leftovers = (): string[] => readdirSync(tmpdir()).filter((name) => name.startsWith(`lakeswap-gunzip-${process.pid}-`));

function workspace(format: string, options: { header?: boolean; write?: string } = {}) {
  const { dir, cleanup } = tempDir("lakeswap-gzip-");
  cleanups.push(cleanup);
  const config = path.join(dir, "lakeswap.yaml");
  writeFileSync(
    config,
    `lake: ./lake\ndatasets:\n  orders:\n    source:\n      format: ${format}\n      path: none\n${options.header === false ? "      header: false\n" : ""}` +
      `${options.write ? `    write: ${options.write}\n    primary_key: [order_id]\n` : ""}` +
      `    columns:\n      order_id: {type: BIGINT, nullable: false}\n      order_date: DATE\n      amount: DECIMAL(10,2)\n      note: VARCHAR\n` +
      `    partition:\n      day: strftime(order_date, '%Y-%m-%d')\n    dead_letter: orders_rejected\n`,
  );
  return {
    dir,
    file(name: string, bytes: string | Buffer): string {
      const file = path.join(dir, name);
      writeFileSync(file, bytes);
      return file;
    },
    async sync(file: string) {
      const result = await runMain(["sync", "-c", config, "--input", file, "--json"]);
      const report = result.code === 0 ? (JSON.parse(result.stdout) as { totals: { built: number; skipped: number }; loads: { rowsDeadLettered: number }[] }) : undefined;
      return { code: result.code, stderr: result.stderr, report };
    },
    query: (sql: string): Promise<readonly (readonly unknown[])[]> => queryEmbeddedLake(path.join(dir, "lake"), sql),
  };
}

const SELECT_ROWS = "SELECT order_id, CAST(order_date AS VARCHAR), CAST(amount AS VARCHAR), note FROM orders_raw ORDER BY order_id";
const EXPECTED = ROWS.map((r) => [r.id, r.day, Number(r.amount).toFixed(2), r.note]);

async function parquetBytes(dir: string): Promise<Buffer> {
  const file = path.join(dir, "plain.parquet");
  const instance = await DuckDBInstance.create(":memory:");
  const connection = await instance.connect();
  const values = ROWS.map((r) => `(${r.id}, DATE '${r.day}', ${r.amount}, '${r.note.replaceAll("'", "''")}')`).join(", ");
  await connection.run(`COPY (SELECT * FROM (VALUES ${values}) AS t(order_id, order_date, amount, note)) TO '${file}' (FORMAT PARQUET)`);
  connection.closeSync();
  instance.closeSync();
  const { readFileSync } = await import("node:fs");
  return readFileSync(file);
}

describe("gzip-compressed deliveries", () => {
  it.each([
    ["csv", {}, "orders.csv"],
    ["csv", { header: false }, "orders.csv"],
    ["jsonl", {}, "orders.jsonl"],
    ["parquet", {}, "orders.parquet"],
  ] as [string, { header?: boolean }, string][])("%s %j: lands the rows the file decompresses to, signed as the same rows delivered plain", async (format, options, name) => {
    const ws = workspace(format, options);
    const plain = format === "csv" ? Buffer.from(csvText(options.header !== false)) : format === "jsonl" ? Buffer.from(jsonlText()) : await parquetBytes(ws.dir);
    const first = await ws.sync(ws.file(`${name}.gz`, gzipSync(plain)));
    expect(first.code, first.stderr).toBe(0);
    expect(first.report!.totals.built).toBe(4);
    expect(await ws.query(SELECT_ROWS)).toEqual(EXPECTED);
    // The same rows, uncompressed: nothing changed, nothing is built.
    const again = await ws.sync(ws.file(name, plain));
    expect(again.code, again.stderr).toBe(0);
    expect(again.report!.totals).toMatchObject({ built: 0, skipped: 4 });
    expect(leftovers()).toEqual([]);
  });

  it.each(["csv", "jsonl"])("%s: a bad row is dead-lettered under the file as delivered, with its line and text; the good rows land", async (format) => {
    const ws = workspace(format);
    const text = format === "csv" ? csvText(true, BAD_CSV) : jsonlText(BAD_JSONL);
    const file = ws.file(`orders.${format}.gz`, gzipSync(text));
    const result = await ws.sync(file);
    expect(result.code, result.stderr).toBe(0);
    expect(result.report!.loads[0]!.rowsDeadLettered).toBe(1);
    expect(await ws.query(SELECT_ROWS)).toEqual(EXPECTED);
    const lines = text.split("\n");
    const badLine = lines.findIndex((line) => line.includes("999")) + 1;
    const rejected = await ws.query("SELECT file, line, raw FROM orders_rejected");
    expect(rejected.map(([f, line, raw]) => [f, Number(line), raw])).toEqual([[file, badLine, lines[badLine - 1]]]);
    expect(leftovers()).toEqual([]);
  });

  it("a file of several gzip members (cat a.gz b.gz) is read whole, and a name without .gz is read by its bytes", async () => {
    const ws = workspace("csv");
    const [head, ...lines] = csvText(true).trimEnd().split(/\n(?=\d+,)/);
    const half = Math.floor(lines.length / 2);
    const members = Buffer.concat([gzipSync(`${head}\n${lines.slice(0, half).join("\n")}\n`), gzipSync(`${lines.slice(half).join("\n")}\n`)]);
    const result = await ws.sync(ws.file("orders-export", members));
    expect(result.code, result.stderr).toBe(0);
    expect(await ws.query(SELECT_ROWS)).toEqual(EXPECTED);
  });

  it("write: upsert merges a compressed delivery by key as a plain one", async () => {
    const ws = workspace("csv", { write: "upsert" });
    expect((await ws.sync(ws.file("orders.csv.gz", gzipSync(csvText(true))))).code).toBe(0);
    // Order 1 changes its amount; the others are resent unchanged.
    const changed = csvText(true).replace("\n1,2026-11-01,0.50,", "\n1,2026-11-01,7.25,");
    const second = await ws.sync(ws.file("orders-2.csv.gz", gzipSync(changed)));
    expect(second.code, second.stderr).toBe(0);
    expect(second.report!.totals).toMatchObject({ built: 1, skipped: 3 });
    expect(await ws.query("SELECT CAST(amount AS VARCHAR) FROM orders_raw WHERE order_id = 1")).toEqual([["7.25"]]);
    expect(await ws.query("SELECT CAST(count(*) AS INTEGER) FROM orders_raw")).toEqual([[40]]);
    expect(leftovers()).toEqual([]);
  });

  it("a truncated or doubly compressed file is refused, naming it and the fix; nothing lands", async () => {
    const ws = workspace("csv");
    const whole = gzipSync(csvText(true));
    const truncated = ws.file("cut.csv.gz", whole.subarray(0, whole.length - 20));
    const cut = await ws.sync(truncated);
    expect(cut.code).toBe(2);
    expect(cut.stderr).toContain(`${truncated} is not a whole gzip file`);
    expect(cut.stderr).toContain(`gzip -t '${truncated}'`);
    const twice = ws.file("twice.csv.gz", gzipSync(whole));
    const double = await ws.sync(twice);
    expect(double.code).toBe(2);
    expect(double.stderr).toContain(`${twice} is gzip-compressed twice`);
    expect(await ws.query("SELECT count(*) FROM information_schema.tables WHERE table_name = 'orders_raw'")).toEqual([[0]]);
    expect(leftovers()).toEqual([]);
  });
});
