import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { DuckDBInstance } from "@duckdb/node-api";
import { afterAll, describe, expect, it } from "vitest";
import { openEmbeddedLake } from "../../src/open/open-lake.js";
import { queryEmbeddedLake, tempDir } from "../support/lake-fixture.js";
import { runMain } from "../support/main-cli.js";

// `source.fields`: a delivery whose files name the columns otherwise (a header `Order ID`, a JSON field `Amount ($)`,
// as real exports do) is read into the declared columns. What is read does not depend on how the files spell the
// names: the same rows sign the same, bad rows keep their line and text, and a changed mapping reads the same bytes anew.

const cleanups: (() => void)[] = [];
afterAll(() => cleanups.forEach((cleanup) => cleanup()));

interface Row {
  readonly id: number;
  readonly day: string;
  readonly amount: string;
  readonly note: string;
}

const ROWS: Row[] = Array.from({ length: 30 }, (_, i) => ({ id: i + 1, day: `2026-11-0${(i % 3) + 1}`, amount: `${i * 3}.25`, note: i % 4 === 0 ? 'say "hi"\nthen go' : `n${i}` }));

/** A CSV field, quoted where it must be. */
const csvField = (value: string): string => (/[",\n]/.test(value) ? `"${value.replaceAll('"', '""')}"` : value);

function workspace() {
  const { dir, cleanup } = tempDir("lakeswap-source-fields-");
  cleanups.push(cleanup);
  const config = path.join(dir, "lakeswap.yaml");
  let n = 0;
  const write = (name: string, text: string): string => {
    const file = path.join(dir, `${n++}-${name}`);
    writeFileSync(file, text);
    return file;
  };
  return {
    dir,
    configure(format: string, fields?: string, extraColumns = ""): void {
      writeFileSync(
        config,
        `lake: ./lake\ndatasets:\n  orders:\n    source:\n      format: ${format}\n      path: none\n${fields ? `      fields: ${fields}\n` : ""}` +
          `    columns:\n      order_id: {type: BIGINT, nullable: false}\n      order_date: DATE\n      amount: DECIMAL(10,2)\n      note: VARCHAR\n${extraColumns}` +
          `    partition:\n      day: strftime(order_date, '%Y-%m-%d')\n    dead_letter: orders_rejected\n`,
      );
    },
    /** The rows as CSV under `header` (the four columns' names in the file, in this order: id, day, amount, note). */
    csv(rows: readonly Row[], header: readonly string[], extra = ""): string {
      const lines = rows.map((r) => [String(r.id), r.day, r.amount, r.note].map(csvField).join(","));
      return write("orders.csv", `${header.map(csvField).join(",")}\n${lines.join("\n")}\n${extra}`);
    },
    jsonl(rows: readonly Row[], names: readonly string[], extra = ""): string {
      const objects = rows.map((r) => JSON.stringify(Object.fromEntries([Number(r.id), r.day, Number(r.amount), r.note].map((v, i) => [names[i], v]))));
      return write("orders.jsonl", `${objects.join("\n")}\n${extra}`);
    },
    async parquet(rows: readonly Row[], names: readonly string[]): Promise<string> {
      const file = path.join(dir, `${n++}-orders.parquet`);
      const values = rows.map((r) => `(${r.id}, DATE '${r.day}', ${r.amount}, '${r.note.replaceAll("'", "''")}')`).join(", ");
      const quoted = names.map((name) => `"${name.replaceAll('"', '""')}"`).join(", ");
      const instance = await DuckDBInstance.create(":memory:");
      const connection = await instance.connect();
      await connection.run(`COPY (SELECT * FROM (VALUES ${values}) AS t(${quoted})) TO '${file}' (FORMAT PARQUET)`);
      connection.closeSync();
      instance.closeSync();
      return file;
    },
    async sync(file: string): Promise<{ code: number | null; stderr: string; report?: SyncReport }> {
      const result = await runMain(["sync", "-c", config, "--input", file, "--json"]);
      return { code: result.code, stderr: result.stderr, report: result.code === 0 ? (JSON.parse(result.stdout) as SyncReport) : undefined };
    },
    query: (sql: string): Promise<readonly (readonly unknown[])[]> => queryEmbeddedLake(path.join(dir, "lake"), sql),
  };
}

interface SyncReport {
  readonly totals: { readonly built: number; readonly skipped: number };
  readonly partitions: readonly { readonly partition: string; readonly action: string; readonly reason: string }[];
}

const SELECT_ROWS = "SELECT order_id, CAST(order_date AS VARCHAR), CAST(amount AS VARCHAR), note FROM orders_raw ORDER BY order_id";
const expected = (rows: readonly Row[]) => rows.map((r) => [r.id, r.day, Number(r.amount).toFixed(2), r.note]);
const OTHER_NAMES = ["Order ID", "Order Date", "Amount ($)", "Note"];
const FIELDS = `{order_id: "Order ID", order_date: "order date", amount: "Amount ($)", note: NOTE}`;
const DECLARED = ["order_id", "order_date", "amount", "note"];

describe("source.fields: columns read from names the files give them", () => {
  it.each(["csv", "jsonl", "parquet"])("%s: lands the rows under the declared columns, signed as the same rows under the declared names", async (format) => {
    const ws = workspace();
    const deliver = (names: readonly string[]): Promise<string> | string => (format === "csv" ? ws.csv(ROWS, names) : format === "jsonl" ? ws.jsonl(ROWS, names) : ws.parquet(ROWS, names));
    ws.configure(format, FIELDS);
    const first = await ws.sync(await deliver(OTHER_NAMES));
    expect(first.code, first.stderr).toBe(0);
    expect(first.report!.totals.built).toBe(3);
    expect(await ws.query(SELECT_ROWS)).toEqual(expected(ROWS));

    // The same rows from files that name the columns as declared, read without source.fields: the same content.
    ws.configure(format);
    const again = await ws.sync(await deliver(DECLARED));
    expect(again.code, again.stderr).toBe(0);
    expect(again.report!.totals).toMatchObject({ built: 0, skipped: 3 });
    expect(again.report!.partitions.every((p) => p.reason === "unchanged")).toBe(true);
  });

  it("a changed mapping reads the same bytes anew: the partitions whose values it changed are rebuilt", async () => {
    const ws = workspace();
    // Two amount columns; day 2026-11-02's rows are the only ones where they differ.
    const header = "order_id,order_date,Amount,Amount EUR,note\n";
    const lines = ROWS.map((r) => `${r.id},${r.day},${r.amount},${r.day === "2026-11-02" ? "1.00" : r.amount},n${r.id}`).join("\n");
    const file = path.join(ws.dir, "two-amounts.csv");
    writeFileSync(file, `${header}${lines}\n`);
    ws.configure("csv", "{amount: Amount}");
    expect((await ws.sync(file)).report!.totals.built).toBe(3);
    ws.configure("csv", '{amount: "Amount EUR"}');
    const remapped = await ws.sync(file);
    expect(remapped.code, remapped.stderr).toBe(0);
    expect(remapped.report!.partitions.filter((p) => p.action === "build").map((p) => p.partition)).toEqual(["day=2026-11-02"]);
    expect(await ws.query("SELECT DISTINCT CAST(amount AS VARCHAR) FROM orders_raw WHERE day = '2026-11-02'")).toEqual([["1.00"]]);
  });

  it.each(["csv", "jsonl"])("%s: a bad row keeps its file, line and text; the header's order is the file's", async (format) => {
    const ws = workspace();
    ws.configure(format, FIELDS);
    // The columns in another order than declared, and a line whose amount is not a DECIMAL(10,2).
    const order = [2, 0, 3, 1];
    const names = order.map((i) => OTHER_NAMES[i]!);
    const reordered = (r: Row): string[] => order.map((i) => [String(r.id), r.day, r.amount, r.note][i]!);
    const bad = format === "csv" ? "1.005,99,x,2026-11-01\n" : `${JSON.stringify({ "Amount ($)": 1.005, "Order ID": 99, Note: "x", "Order Date": "2026-11-01" })}\n`;
    const file =
      format === "csv"
        ? path.join(ws.dir, "reordered.csv")
        : path.join(ws.dir, "reordered.jsonl");
    const body =
      format === "csv"
        ? `${names.map(csvField).join(",")}\n${ROWS.map((r) => reordered(r).map(csvField).join(",")).join("\n")}\n${bad}`
        : `${ROWS.map((r) => JSON.stringify(Object.fromEntries(order.map((i) => [OTHER_NAMES[i], [Number(r.id), r.day, Number(r.amount), r.note][i]])))).join("\n")}\n${bad}`;
    writeFileSync(file, body);
    const result = await ws.sync(file);
    expect(result.code, result.stderr).toBe(0);
    expect(await ws.query(SELECT_ROWS)).toEqual(expected(ROWS));
    // Each note of four spans two lines of the CSV: the bad record's line is counted in the file's lines.
    const line = format === "csv" ? 1 + ROWS.length + ROWS.filter((r) => r.note.includes("\n")).length + 1 : ROWS.length + 1;
    const rejected = await ws.query("SELECT file, line, reason, raw FROM orders_rejected");
    expect(rejected).toHaveLength(1);
    expect([rejected[0]![0], Number(rejected[0]![1])]).toEqual([file, line]);
    expect(String(rejected[0]![2])).toMatch(/column amount: '1\.005'/);
    expect(rejected[0]![3]).toBe(bad.trimEnd());
  });

  it("a file that lacks a mapped name is refused naming it and its column; an unmapped one is shown the mapping that reads it", async () => {
    const ws = workspace();
    ws.configure("csv", FIELDS);
    const lacking = await ws.sync(ws.csv(ROWS, ["Order ID", "Order Date", "Amount", "Note"]));
    expect(lacking.code).toBe(2);
    expect(lacking.stderr).toContain("the header has no column 'Amount ($)' (column amount)");
    ws.configure("jsonl");
    const unmapped = await ws.sync(ws.jsonl(ROWS, OTHER_NAMES));
    expect(unmapped.code).toBe(2);
    // Note is found as note (case does not matter); the others would be read with these.
    expect(unmapped.stderr).toContain('source.fields: {order_id: "Order ID", order_date: "Order Date", amount: "Amount ($)"}');
  });

  it("a column added in place with a mapping reads its field, and deliveries exported before it still land", async () => {
    const ws = workspace();
    ws.configure("csv", FIELDS);
    const before = ws.csv(ROWS, OTHER_NAMES);
    expect((await ws.sync(before)).report!.totals.built).toBe(3);
    ws.configure("csv", FIELDS.replace("}", ', channel: "Sales Channel"}'), "      channel: VARCHAR\n");
    // The delivery before the column: nothing changed, nothing built.
    const resent = await ws.sync(before);
    expect(resent.code, resent.stderr).toBe(0);
    expect(resent.report!.totals.built).toBe(0);
    const header = [...OTHER_NAMES, "Sales Channel"].join(",");
    const lines = ROWS.map((r) => [String(r.id), r.day, r.amount, r.note, r.day === "2026-11-03" ? "web" : ""].map(csvField).join(","));
    const file = path.join(ws.dir, "with-channel.csv");
    writeFileSync(file, `${header}\n${lines.join("\n")}\n`);
    const after = await ws.sync(file);
    expect(after.code, after.stderr).toBe(0);
    expect(after.report!.partitions.filter((p) => p.action === "build").map((p) => p.partition)).toEqual(["day=2026-11-03"]);
    expect(await ws.query("SELECT day, CAST(count(channel) AS INTEGER) FROM orders_raw GROUP BY day ORDER BY day")).toEqual([
      ["2026-11-01", 0],
      ["2026-11-02", 0],
      ["2026-11-03", 10],
    ]);
  });
});

// A `jsonl` delivery may be one JSON array of objects, as most JSON exports and API dumps are written: its elements
// are its rows (a dead letter's line is the element's number), read as JSON Lines are read.
describe("JSON array files", () => {
  const objects = (rows: readonly Row[], names = DECLARED): Record<string, unknown>[] =>
    rows.map((r) => Object.fromEntries([Number(r.id), r.day, Number(r.amount), r.note].map((v, i) => [names[i], v])));
  const write = (dir: string, name: string, text: string): string => {
    const file = path.join(dir, name);
    writeFileSync(file, text);
    return file;
  };

  it("pretty-printed, minified or an element a line: the same rows, signed as the same rows in JSON Lines", async () => {
    const ws = workspace();
    ws.configure("jsonl");
    const first = await ws.sync(write(ws.dir, "pretty.json", `${JSON.stringify(objects(ROWS), null, 2)}\n`));
    expect(first.code, first.stderr).toBe(0);
    expect(first.report!.totals.built).toBe(3);
    expect(await ws.query(SELECT_ROWS)).toEqual(expected(ROWS));
    const shuffled = [...ROWS].reverse();
    const shapes = [
      JSON.stringify(objects(shuffled)),
      `\ufeff[${objects(shuffled).map((o) => JSON.stringify(o)).join(",\n")}]\n\n`,
      `  [\r\n${objects(shuffled).map((o) => `  ${JSON.stringify(o)}`).join(",\r\n")}\r\n]`,
    ];
    for (const [i, text] of shapes.entries()) {
      const again = await ws.sync(write(ws.dir, `shape-${i}.json`, text));
      expect(again.code, again.stderr).toBe(0);
      expect(again.report!.totals, `shape ${i}`).toMatchObject({ built: 0, skipped: 3 });
    }
    const lines = await ws.sync(ws.jsonl(shuffled, DECLARED));
    expect(lines.report!.totals).toMatchObject({ built: 0, skipped: 3 });
  });

  it("lands within a small LAKESWAP_MEMORY_LIMIT, as JSON Lines do", async () => {
    const ws = workspace();
    ws.configure("jsonl");
    const config = path.join(ws.dir, "lakeswap.yaml");
    const file = write(ws.dir, "small-memory.json", JSON.stringify(objects(ROWS), null, 2));
    const result = await runMain(["sync", "-c", config, "--input", file, "--json"], { LAKESWAP_MEMORY_LIMIT: "64MB" });
    expect(result.code, result.stderr).toBe(0);
    expect(await ws.query(SELECT_ROWS)).toEqual(expected(ROWS));
  });

  it("a bad element is a bad row numbered by its place in the array, with its text; the others land", async () => {
    const ws = workspace();
    ws.configure("jsonl", '{order_id: "Order ID", amount: "Amount ($)"}');
    const elements: unknown[] = objects(ROWS, ["Order ID", "order_date", "Amount ($)", "note"]);
    elements.splice(3, 0, 42);
    elements.splice(7, 0, { "Order ID": 99, order_date: "2026-11-01", "Amount ($)": "12.345", note: "x" });
    const file = write(ws.dir, "with-bad.json", JSON.stringify(elements, null, 1));
    const result = await ws.sync(file);
    expect(result.code, result.stderr).toBe(0);
    expect(await ws.query(SELECT_ROWS)).toEqual(expected(ROWS));
    const rejected = (await ws.query("SELECT line, reason, raw FROM orders_rejected ORDER BY line")).map(([line, reason, raw]) => [Number(line), reason, JSON.parse(String(raw)) as unknown]);
    expect(rejected).toEqual([
      [4, "not a JSON object", 42],
      [8, expect.stringMatching(/^column amount: '12\.345'/), elements[7]],
    ]);
  });

  it("is read as UTF-8 across its whole length (a text of 3 MB without one ASCII character); other bytes are refused", async () => {
    const ws = workspace();
    ws.configure("jsonl");
    const long = "語".repeat(1_000_003);
    const rows = ROWS.map((r, i) => (i === 5 ? { ...r, note: long } : r));
    const result = await ws.sync(write(ws.dir, "long.json", JSON.stringify(objects(rows))));
    expect(result.code, result.stderr).toBe(0);
    expect(await ws.query("SELECT note = repeat('語', 1000003) FROM orders_raw WHERE order_id = 6")).toEqual([[true]]);
    const latin1 = path.join(ws.dir, "latin1.json");
    writeFileSync(latin1, Buffer.concat([Buffer.from('[{"order_id": 1, "order_date": "2026-11-01", "note": "caf'), Buffer.from([0xe9]), Buffer.from('"}]')]));
    const refused = await ws.sync(latin1);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain("latin1.json is not UTF-8 text: lakeswap reads jsonl files as UTF-8");
  });

  it("JSON Lines whose first line is an array stay JSON Lines (that line a bad row); an array that does not parse is refused", async () => {
    const ws = workspace();
    ws.configure("jsonl");
    const lines = await ws.sync(write(ws.dir, "first-array.jsonl", `[1, 2]\n${objects(ROWS).map((o) => JSON.stringify(o)).join("\n")}\n`));
    expect(lines.code, lines.stderr).toBe(0);
    expect(await ws.query(SELECT_ROWS)).toEqual(expected(ROWS));
    expect((await ws.query("SELECT line, reason FROM orders_rejected")).map(([line, reason]) => [Number(line), reason])).toEqual([[1, "not a JSON object"]]);
    // A lone line that is an array of other values is a JSON Lines bad row too; `[]` is an array of no objects.
    const lone = await ws.sync(write(ws.dir, "lone.jsonl", "[1, 2]\n"));
    expect(lone.code, lone.stderr).toBe(0);
    expect((await ws.query("SELECT file, line, reason FROM orders_rejected WHERE file LIKE '%lone.jsonl'")).map(([, line, reason]) => [Number(line), reason])).toEqual([[1, "not a JSON object"]]);
    const empty = await ws.sync(write(ws.dir, "empty.json", "[]\n"));
    expect(empty.code, empty.stderr).toBe(0);
    expect(await ws.query("SELECT CAST(count(*) AS INTEGER) FROM orders_rejected WHERE file LIKE '%empty.json'")).toEqual([[0]]);
    const broken = await ws.sync(write(ws.dir, "broken.json", `[\n${JSON.stringify(objects(ROWS)[0])},\n{"order_id": 2,\n`));
    expect(broken.code).toBe(2);
    expect(broken.stderr).toMatch(/broken\.json starts as a JSON array \('\['\), but is not one JSON array of values: .*Send one array of objects/);
  });
});

describe("compressed deliveries", () => {
  it("a zip archive is named as one", async () => {
    const ws = workspace();
    const file = path.join(ws.dir, "orders.zip");
    writeFileSync(file, Buffer.concat([Buffer.from([0x50, 0x4b, 0x03, 0x04]), Buffer.alloc(60, 1)]));
    ws.configure("csv");
    const result = await ws.sync(file);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(`${file} is zip-compressed`);
  });
});

describe("dates and numbers written in a local format", () => {
  it.each([
    ["a date", { day: "Nov 1 2026", amount: "1.00" }, "column order_date: 'Nov 1 2026' is not a date (YYYY-MM-DD)", "If the files write order_date in another format, declare it VARCHAR and read it with strptime(order_date, '<format>')"],
    ["a decimal comma", { day: "2026-11-01", amount: "1.234,50" }, "column amount: '1.234,50' is not a number", "If the files write amount with a decimal comma, declare it VARCHAR and read it with CAST(replace(replace(amount, '.', ''), ',', '.') AS DECIMAL(p,s))"],
  ])("%s stops the load with the way to read it", async (_name, values, reason, hint) => {
    const ws = workspace();
    ws.configure("csv");
    const config = path.join(ws.dir, "lakeswap.yaml");
    writeFileSync(config, readFileSync(config, "utf8").replace("    dead_letter: orders_rejected\n", ""));
    const result = await ws.sync(ws.csv([{ id: 1, note: "a", ...values }], DECLARED));
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(reason);
    expect(result.stderr).toContain(hint);
  });
});

describe("JSON numbers", () => {
  // DuckDB's JSON reader keeps a number with a fraction or an exponent as a double. Each is read as written instead,
  // as the same text in a CSV field is: exactly into its column, or a bad row.
  it("are read as written: every digit into DECIMAL and integer columns, the text as sent into VARCHAR, or a bad row", async () => {
    const ws = workspace();
    const config = path.join(ws.dir, "lakeswap.yaml");
    writeFileSync(
      config,
      `lake: ./lake\ndatasets:\n  amounts:\n    source: {format: jsonl, path: none}\n` +
        `    columns: {id: BIGINT, amount: "DECIMAL(38,18)", n: BIGINT, h: HUGEINT, t: VARCHAR}\n    partition: {p: "'all'"}\n    dead_letter: amounts_rejected\n`,
    );
    const lines = [
      `{"id": 1, "amount": 1.234567890123456789}`,
      `{"id": 2, "amount": "1.234567890123456789"}`,
      `{"id": 3, "amount": 123456789012345.6}`,
      `{"id": 4, "amount": 0.1}`,
      `{"id": 5, "AMOUNT": 98765432109876543.21}`,
      `{"id": 6, "amount": 12345678901234567890}`,
      `{"id": 7, "Amount": 1.000000000000000001}`,
      // A number of the same name in a nested object is not the field's.
      `{"id": 8, "meta": {"amount": 1.00000000000000000001}, "amount": 2.5}`,
      `{"id": 9, "amount": 0.100000000000000000000, "meta": {"amount": 7.0}, "n": 9007199254740993.0}`,
      `{"id": 10, "h": 123456789012345678901234567890.0, "t": 1.10}`,
      `{"id": 11, "t": 1e2, "n": 1.2345678901234567e18}`,
      `{"id": 12,"t":12345678901234567.89}`,
      // Not an integer as written, whatever its double: a bad row, as in a CSV field.
      `{"id": 13, "n": 1.0000000000000001}`,
      // Below the smallest double (read as 0.0): not 0 as written.
      `{"id": 14, "amount": 1e-400}`,
    ];
    const file = path.join(ws.dir, "amounts.jsonl");
    writeFileSync(file, `${lines.join("\n")}\n`);
    const result = await runMain(["sync", "-c", config, "--input", file, "--json"]);
    expect(result.code, result.stderr).toBe(0);
    const lake = await openEmbeddedLake(path.join(ws.dir, "lake"));
    try {
      const rows = await lake.query("SELECT id, CAST(amount AS VARCHAR), CAST(n AS VARCHAR), CAST(h AS VARCHAR), t FROM amounts_raw ORDER BY id");
      expect(rows.rows.map(([id, ...values]) => [Number(id), ...values])).toEqual([
        [1, "1.234567890123456789", null, null, null],
        [2, "1.234567890123456789", null, null, null],
        [3, "123456789012345.600000000000000000", null, null, null],
        [4, "0.100000000000000000", null, null, null],
        [5, "98765432109876543.210000000000000000", null, null, null],
        [6, "12345678901234567890.000000000000000000", null, null, null],
        [7, "1.000000000000000001", null, null, null],
        [8, "2.500000000000000000", null, null, null],
        [9, "0.100000000000000000", "9007199254740993", null, null],
        [10, null, null, "123456789012345678901234567890", "1.10"],
        [11, null, "1234567890123456700", null, "1e2"],
        [12, null, null, null, "12345678901234567.89"],
      ]);
      const rejected = (await lake.query("SELECT line, reason FROM amounts_rejected ORDER BY line")).rows.map(([line, reason]) => [Number(line), reason]);
      expect(rejected).toEqual([
        [13, expect.stringMatching(/^column n: '1\.0000000000000001' is not an integer/)],
        [14, expect.stringMatching(/^column amount: '1e-400' /)],
      ]);
    } finally {
      await lake.close();
    }
  });
});

describe("numbers written with an exponent", () => {
  it("convert exactly or are bad rows, their decimal places counted on their digits, never through a double", async () => {
    const ws = workspace();
    const config = path.join(ws.dir, "lakeswap.yaml");
    writeFileSync(config, `lake: ./lake\ndatasets:\n  nums:\n    source: {format: csv, path: none}\n    columns: {id: BIGINT, n: BIGINT, amount: "DECIMAL(38,18)"}\n    partition: {p: "'all'"}\n    dead_letter: nums_rejected\n`);
    const lines = ["id,n,amount", "1,9007199254740993e0,", "2,1.0000000000000001e0,", "3,,1e-400", "4,,1.000000000000000001e0", "5,12345678901234567e1,", "6,100e-2,1.5e-18", "7,,-2.50E+1", "8,0e-999,0.000e5"];
    const file = path.join(ws.dir, "nums.csv");
    writeFileSync(file, `${lines.join("\n")}\n`);
    const result = await runMain(["sync", "-c", config, "--input", file, "--json"]);
    expect(result.code, result.stderr).toBe(0);
    const lake = await openEmbeddedLake(path.join(ws.dir, "lake"));
    try {
      const rows = (await lake.query("SELECT id, CAST(n AS VARCHAR), CAST(amount AS VARCHAR) FROM nums_raw ORDER BY id")).rows;
      expect(rows.map(([id, ...values]) => [Number(id), ...values])).toEqual([
        [1, "9007199254740993", null],
        [4, null, "1.000000000000000001"],
        [5, "123456789012345670", null],
        [7, null, "-25.000000000000000000"],
        [8, "0", "0.000000000000000000"],
      ]);
      const rejected = (await lake.query("SELECT line, reason FROM nums_rejected ORDER BY line")).rows.map(([line, reason]) => [Number(line), reason]);
      expect(rejected).toEqual([
        [3, "column n: '1.0000000000000001e0' is not an integer"],
        [4, "column amount: '1e-400' has more than 18 decimal places (DECIMAL(38,18))"],
        [7, "column amount: '1.5e-18' has more than 18 decimal places (DECIMAL(38,18))"],
      ]);
    } finally {
      await lake.close();
    }
  });
});

describe("a time of day and a Parquet float", () => {
  it("land as sent or are bad rows: no date or offset dropped from a TIME, no last digits from a FLOAT's DECIMAL", async () => {
    const ws = workspace();
    const config = path.join(ws.dir, "lakeswap.yaml");
    writeFileSync(config, `lake: ./lake\ndatasets:\n  t:\n    source: {format: csv, path: none}\n    columns: {id: BIGINT, t: TIME}\n    partition: {p: "'all'"}\n    dead_letter: t_rejected\n`);
    const times = ["10:30:00", "2026-11-01 10:30:00", "10:30:00+02", "10:30", "10:30:00Z", "10:30:00+00", "10:30:00-05:30"];
    const file = path.join(ws.dir, "times.csv");
    writeFileSync(file, `id,t\n${times.map((t, i) => `${i + 1},${t}`).join("\n")}\n`);
    const result = await runMain(["sync", "-c", config, "--input", file]);
    expect(result.code, result.stderr).toBe(0);
    const lake = await openEmbeddedLake(path.join(ws.dir, "lake"));
    try {
      expect((await lake.query("SELECT id, CAST(t AS VARCHAR) FROM t_raw ORDER BY id")).rows.map(([id, t]) => [Number(id), t])).toEqual([
        [1, "10:30:00"],
        [4, "10:30:00"],
        [5, "10:30:00"],
        [6, "10:30:00"],
      ]);
      expect((await lake.query("SELECT line, reason FROM t_rejected ORDER BY line")).rows.map(([line, reason]) => [Number(line), reason])).toEqual([
        [3, expect.stringMatching(/^column t: '2026-11-01 10:30:00' is not a time of day alone: it has a date/)],
        [4, expect.stringMatching(/^column t: '10:30:00\+02' has a UTC offset, which TIME cannot keep/)],
        [8, expect.stringMatching(/^column t: '10:30:00-05:30' has a UTC offset, which TIME cannot keep/)],
      ]);
    } finally {
      await lake.close();
    }

    const floats = path.join(ws.dir, "floats.parquet");
    const instance = await DuckDBInstance.create(":memory:");
    const connection = await instance.connect();
    await connection.run(`COPY (SELECT * FROM (VALUES (1, -2.5::FLOAT, 0.1::DOUBLE), (2, 1234.5::FLOAT, 1e-7::DOUBLE)) AS v(id, f, d)) TO '${floats}' (FORMAT PARQUET)`);
    connection.closeSync();
    instance.closeSync();
    writeFileSync(config, `lake: ./lake\ndatasets:\n  n:\n    source: {format: parquet, path: none}\n    columns: {id: BIGINT, f: "DECIMAL(38,10)", d: "DECIMAL(38,10)"}\n    partition: {p: "'all'"}\n`);
    const parquet = await runMain(["sync", "-c", config, "--input", floats]);
    expect(parquet.code, parquet.stderr).toBe(0);
    const lake2 = await openEmbeddedLake(path.join(ws.dir, "lake"));
    try {
      expect((await lake2.query("SELECT id, CAST(f AS VARCHAR), CAST(d AS VARCHAR) FROM n_raw ORDER BY id")).rows.map(([id, ...v]) => [Number(id), ...v])).toEqual([
        [1, "-2.5000000000", "0.1000000000"],
        [2, "1234.5000000000", "0.0000001000"],
      ]);
    } finally {
      await lake2.close();
    }
  });
});
