import { execFile } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { promisify } from "node:util";
import { DuckDBInstance } from "@duckdb/node-api";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DuckDbLanding } from "../../src/landing/duckdb/duckdb-landing.js";
import { landDelivery } from "../../src/landing/duckdb/land-delivery.js";
import { dropLanding } from "../../src/landing/duckdb/landing-relations.js";
import type { LandRequest } from "../../src/landing/landing.js";
import { LocalStore } from "../../src/store/local-store.js";
import { METADATA_FOLDERS } from "../../src/lake/layout.js";
import { REPO_ROOT, tempDir } from "../support/lake-fixture.js";

// How landing reads what users actually deliver (issue 9, items 4, 8, 9, 19, 21): exact conversions, CSV headers in
// any case or none, awkward column names, byte order marks, and bad rows that keep their line and text.

let workspace: ReturnType<typeof tempDir>;
let engine: DuckDbLanding;
/** A DuckDB instance of the tests' own, to land into and read the landed rows back (the engine's queries see only the lake). */
let duck: DuckDBInstance;
beforeAll(async () => {
  workspace = tempDir("lakeswap-landing-input-");
  engine = new DuckDbLanding(new LocalStore(path.join(workspace.dir, "lake"), { folders: METADATA_FOLDERS }));
  duck = await DuckDBInstance.create(":memory:");
});
afterAll(async () => {
  await engine.close();
  duck.closeSync();
  workspace.cleanup();
});

let counter = 0;
function file(extension: string, text: string | Buffer): string {
  const name = path.join(workspace.dir, `in-${counter++}.${extension}`);
  writeFileSync(name, text);
  return name;
}

async function parquet(select: string): Promise<string> {
  const name = path.join(workspace.dir, `in-${counter++}.parquet`);
  const instance = await DuckDBInstance.create(":memory:");
  const connection = await instance.connect();
  await connection.run(`COPY (${select}) TO '${name}' (FORMAT PARQUET)`);
  connection.closeSync();
  instance.closeSync();
  return name;
}

type Column = LandRequest["columns"][number];
const col = (name: string, type: string, nullable = true): Column => ({ name, type, nullable });

/**
 * Lands files as the engine does, and returns the good rows (declared columns as text, sorted), the bad ones (line,
 * reason, raw) and, from the engine's own landing of the same files, the partitions' signatures.
 */
async function land(request: Partial<LandRequest> & Pick<LandRequest, "files" | "format" | "columns">) {
  const full: LandRequest = {
    header: true,
    delimiter: ",",
    partition: [{ key: "p", expression: "'all'" }],
    signatureColumns: request.columns.map((c) => c.name),
    ...request,
  };
  const connection = await duck.connect();
  const tables = { landed: `landed_${counter}`, rejected: `rejected_${counter++}` };
  try {
    await landDelivery(connection, full, tables);
    const names = request.columns.map((c) => `CAST("${c.name}" AS VARCHAR)`).join(", ");
    const good = (await connection.runAndReadAll(`SELECT ${names} FROM ${tables.landed} ORDER BY ALL`)).getRowsJS();
    const bad = (await connection.runAndReadAll(`SELECT line, reason, raw FROM ${tables.rejected} ORDER BY line`)).getRowsJS().map(([line, reason, raw]) => [
      line === null ? null : Number(line),
      reason,
      raw,
    ]);
    const delivery = await engine.land(full);
    await engine.releaseLanding(delivery);
    const landedColumns = (await connection.runAndReadAll(`SELECT column_name FROM (DESCRIBE ${tables.landed})`)).getRowsJS().map(([name]) => name);
    return { delivery, good, bad, landedColumns, signatures: delivery.partitions.map((p) => p.signature) };
  } finally {
    await dropLanding(connection, tables);
    connection.closeSync();
  }
}

describe("a value that does not convert exactly is a bad row, never rounded (item 4)", () => {
  const columns = [col("id", "BIGINT"), col("amount", "DECIMAL(10,2)"), col("day", "DATE")];
  const expected = {
    good: [["1", "1.50", "2026-11-01"], ["2", "2.00", "2026-11-02"], ["3", "1000.00", "2026-11-03"]],
    reasons: [
      "column id: '1.7' is not an integer",
      "column amount: '1.005' has more than 2 decimal places (DECIMAL(10,2))",
      "column day: '2026-11-04 12:00:00' is not a date: it has a time of day",
      "column id: '9223372036854775808' is out of range for BIGINT",
    ],
  };

  it("CSV", async () => {
    const csv = file(
      "csv",
      "id,amount,day\n1,1.50,2026-11-01\n2.0,2,2026-11-02\n3,1e3,2026-11-03\n1.7,1.00,2026-11-01\n4,1.005,2026-11-01\n5,1.00,2026-11-04 12:00:00\n9223372036854775808,1,2026-11-01\n",
    );
    const { good, bad } = await land({ files: [csv], format: "csv", columns });
    expect(good).toEqual(expected.good);
    expect(bad.map(([line, reason]) => [line, reason])).toEqual(expected.reasons.map((reason, i) => [i + 5, reason]));
  });

  it("JSONL, numbers and strings alike", async () => {
    const jsonl = file(
      "jsonl",
      [
        `{"id": 1, "amount": 1.5, "day": "2026-11-01"}`,
        `{"id": 2.0, "amount": "2", "day": "2026-11-02"}`,
        `{"id": "3", "amount": 1e3, "day": "2026-11-03"}`,
        `{"id": 1.7, "amount": 1, "day": "2026-11-01"}`,
        `{"id": 4, "amount": 1.005, "day": "2026-11-01"}`,
        `{"id": 5, "amount": 1, "day": "2026-11-04 12:00:00"}`,
        `{"id": 9223372036854775808, "amount": 1, "day": "2026-11-01"}`,
      ].join("\n"),
    );
    const { good, bad } = await land({ files: [jsonl], format: "jsonl", columns });
    expect(good).toEqual(expected.good);
    expect(bad.map(([line, reason]) => [line, reason])).toEqual(expected.reasons.map((reason, i) => [i + 4, reason]));
  });

  it("Parquet with wider types (DOUBLE, TIMESTAMP, DECIMAL(20,0))", async () => {
    const source = await parquet(
      `SELECT id::DECIMAL(20,0) AS id, amount::DOUBLE AS amount, day::TIMESTAMP AS day FROM (VALUES (1, 1.5::DOUBLE, TIMESTAMP '2026-11-01 00:00:00'), (2, 2.0, TIMESTAMP '2026-11-02'), (3, 1000, TIMESTAMP '2026-11-03'), ` +
        `(17, 1.7, TIMESTAMP '2026-11-01'), (4, 1.005, TIMESTAMP '2026-11-01'), (5, 1, TIMESTAMP '2026-11-04 12:00:00'), (9223372036854775808, 1, TIMESTAMP '2026-11-01')) t(id, amount, day)`,
    );
    const { good, bad } = await land({ files: [source], format: "parquet", columns: [col("id", "BIGINT"), col("amount", "DECIMAL(10,2)"), col("day", "DATE")] });
    // A DOUBLE 1.7 into a BIGINT, through the amount column here: 1.7 fits DECIMAL(10,2) exactly.
    expect(good).toEqual([expected.good[0], ["17", "1.70", "2026-11-01"], ...expected.good.slice(1)]);
    expect(bad.map(([line, reason]) => [line, reason])).toEqual([
      [5, "column amount: '1.005' has more than 2 decimal places (DECIMAL(10,2))"],
      [6, "column day: '2026-11-04 12:00:00' is not a date: it has a time of day"],
      [7, "column id: '9223372036854775808' (DECIMAL(20,0)) does not convert to BIGINT"],
    ]);
    const doubles = await parquet(`SELECT * FROM (VALUES (1.0::DOUBLE), (1.7), (-2.5)) t(id)`);
    const ids = await land({ files: [doubles], format: "parquet", columns: [col("id", "BIGINT")] });
    expect(ids.good).toEqual([["1"]]);
    expect(ids.bad.map(([, reason]) => reason)).toEqual(["column id: '1.7' is not an integer", "column id: '-2.5' is not an integer"]);
  });

  it("FLOAT and DOUBLE round to the nearest value but never overflow to infinity (item 19: JSON 1e300 into a FLOAT)", async () => {
    const jsonl = file("jsonl", [`{"f": 0.1, "d": 1e300}`, `{"f": 1e300, "d": 1}`, `{"f": 1, "d": 1e400}`, `{"f": "-inf", "d": "inf"}`].join("\n"));
    const { good, bad } = await land({ files: [jsonl], format: "jsonl", columns: [col("f", "FLOAT"), col("d", "DOUBLE")] });
    expect(good).toEqual([["-inf", "inf"], ["0.1", "1e+300"]]);
    expect(bad.map(([line, reason]) => [line, reason])).toEqual([
      [2, "column f: '1e300' is out of range for FLOAT"],
      [3, "column d: '1e400' is out of range for DOUBLE"],
    ]);
    const wide = await parquet(`SELECT * FROM (VALUES (1e300::DOUBLE), (0.5)) t(f)`);
    expect((await land({ files: [wide], format: "parquet", columns: [col("f", "FLOAT")] })).bad.map(([line, reason]) => [line, reason])).toEqual([
      [1, "column f: '1e+300' is out of range for FLOAT"],
    ]);
  });
});

describe("times do not depend on the machine's zone (item 19)", () => {
  const columns = [col("id", "BIGINT"), col("ts", "TIMESTAMPTZ"), col("local", "TIMESTAMP")];
  const lines = [
    "id,ts,local",
    "1,2026-11-01 23:30:00,2026-11-01 23:30:00",
    "2,2026-11-01 23:30:00+02,2026-11-01 12:00:00",
    "3,2026-11-01T12:00:00Z,2026-11-01 12:00:00+02",
    "4,2026-11-01 12:00:00,2026-11-01T12:00:00Z",
    "5,2026-11-01 12:00:00,2026-11-01 12:00:00 America/New_York",
  ];

  it("reads zone-less TIMESTAMPTZ text as UTC and refuses a TIMESTAMP text with an offset", async () => {
    const csv = file("csv", `${lines.join("\n")}\n`);
    const { good, bad } = await land({ files: [csv], format: "csv", columns, partition: [{ key: "day", expression: "strftime(ts, '%Y-%m-%d')" }] });
    // A zero offset (Z) changes nothing, so it is kept; +02 and a zone name would be lost.
    expect(good).toEqual([
      ["1", "2026-11-01 23:30:00+00", "2026-11-01 23:30:00"],
      ["2", "2026-11-01 21:30:00+00", "2026-11-01 12:00:00"],
      ["4", "2026-11-01 12:00:00+00", "2026-11-01 12:00:00"],
    ]);
    expect(bad).toEqual([
      [4, expect.stringMatching(/^column local: '2026-11-01 12:00:00\+02' has a UTC offset or time zone, .* declare it TIMESTAMPTZ, or drop the offset$/), lines[3]],
      [6, expect.stringMatching(/^column local: '2026-11-01 12:00:00 America\/New_York' has a UTC offset or time zone/), lines[5]],
    ]);
  });

  it("refuses a TIMESTAMPTZ text whose offset no clock has (DuckDB's cast would shift it by a day or more), and keeps every real one", async () => {
    const impossible = ["+24:00", "+25", "-99:00", "+2500", "+05:75", "-0575", "+12:34:60"];
    const real = ["+23:59", "-12:00", "+14", "+0530", "-03:30:15", "Z"];
    const all = [...impossible, ...real];
    const csv = file("csv", `id,ts,local\n${all.map((offset, i) => `${i + 1},2026-11-02 10:00:00${offset},2026-11-02 10:00:00`).join("\n")}\n`);
    const { good, bad } = await land({ files: [csv], format: "csv", columns, partition: [{ key: "day", expression: "strftime(ts, '%Y-%m-%d')" }] });
    expect(bad.map((row) => row[1])).toEqual(impossible.map((offset) => `column ts: '2026-11-02 10:00:00${offset}' has a UTC offset no clock has (hours 00-23, minutes and seconds 00-59): send the offset the time was written with`));
    expect(good.map((row) => row[1]).sort()).toEqual([
      "2026-11-01 10:01:00+00", "2026-11-01 20:00:00+00", "2026-11-02 04:30:00+00", "2026-11-02 10:00:00+00", "2026-11-02 13:30:15+00", "2026-11-02 22:00:00+00",
    ]);
  });

  it("gives the same instants, partitions and signatures under TZ=UTC, America/New_York and Asia/Kolkata", async () => {
    const csv = file("csv", `${lines.slice(0, 3).join("\n")}\n`);
    const jsonl = file("jsonl", `{"id": 1, "ts": "2026-11-01 23:30:00", "local": "2026-11-01 23:30:00"}\n`);
    const script = file(
      "mts",
      `import { DuckDBInstance } from ${JSON.stringify(createRequire(import.meta.url).resolve("@duckdb/node-api"))};
import { DuckDbLanding } from ${JSON.stringify(path.join(REPO_ROOT, "src/landing/duckdb/duckdb-landing.js"))};
import { landDelivery } from ${JSON.stringify(path.join(REPO_ROOT, "src/landing/duckdb/land-delivery.js"))};
import { dropLanding } from ${JSON.stringify(path.join(REPO_ROOT, "src/landing/duckdb/landing-relations.js"))};
import { LocalStore } from ${JSON.stringify(path.join(REPO_ROOT, "src/store/local-store.js"))};
const engine = new DuckDbLanding(new LocalStore(${JSON.stringify(path.join(workspace.dir, "tz-lake"))}, { folders: ${JSON.stringify(METADATA_FOLDERS)} }));
const duck = await DuckDBInstance.create(":memory:");
const connection = await duck.connect();
const out = [];
for (const [files, format] of [[[${JSON.stringify(csv)}], "csv"], [[${JSON.stringify(jsonl)}], "jsonl"]]) {
  const request = { files, format, header: true, delimiter: ",", columns: ${JSON.stringify(columns)},
    partition: [{ key: "day", expression: "strftime(ts, '%Y-%m-%d')" }], signatureColumns: ["id", "ts", "local"] };
  await landDelivery(connection, request, { landed: "landed", rejected: "rejected" });
  const rows = (await connection.runAndReadAll("SELECT id, epoch_us(ts), CAST(local AS VARCHAR), day FROM landed ORDER BY id")).getRowsJS();
  const delivery = await engine.land(request);
  out.push({ rows: rows.map((r) => r.map(String)), signatures: delivery.partitions.map((p) => p.signature), rejected: delivery.rowsRejected });
  await engine.releaseLanding(delivery);
  await dropLanding(connection, { landed: "landed", rejected: "rejected" });
}
connection.closeSync();
duck.closeSync();
await engine.close();
console.log(JSON.stringify(out));
`,
    );
    const run = promisify(execFile);
    const tsx = path.join(REPO_ROOT, "node_modules", ".bin", "tsx");
    const results = await Promise.all(
      ["UTC", "America/New_York", "Asia/Kolkata"].map(async (zone) => JSON.parse((await run(tsx, [script], { env: { ...process.env, TZ: zone } })).stdout) as unknown),
    );
    expect(results[1]).toEqual(results[0]);
    expect(results[2]).toEqual(results[0]);
    // 23:30 without a zone is 23:30 UTC: day 2026-11-01 (in New York it would have been 2026-11-02 03:30 UTC).
    expect(results[0]).toEqual([
      {
        rows: [["1", "1793575800000000", "2026-11-01 23:30:00", "2026-11-01"], ["2", "1793568600000000", "2026-11-01 12:00:00", "2026-11-01"]],
        signatures: [expect.stringMatching(/^v3:/)],
        rejected: 0,
      },
      { rows: [["1", "1793575800000000", "2026-11-01 23:30:00", "2026-11-01"]], signatures: [expect.stringMatching(/^v3:/)], rejected: 0 },
    ]);
  }, 60_000);
});

describe("CSV headers, column names and byte order marks (item 8)", () => {
  const columns = [col("id", "BIGINT", false), col("amount", "DECIMAL(10,2)")];

  it("matches header names case-insensitively, in any order, ignoring extra columns", async () => {
    const upper = await land({ files: [file("csv", "Amount,Extra,ID\n1.50,x,1\n2,y,2\n")], format: "csv", columns });
    expect(upper.good).toEqual([["1", "1.50"], ["2", "2.00"]]);
    expect(upper.bad).toEqual([]);
    // The landed columns are the declared ones, spelled as declared, with their declared types.
    expect(upper.landedColumns).toEqual(["id", "amount", "p"]);
    const plain = await land({ files: [file("csv", "id,amount\n1,1.5\n2,2.00\n")], format: "csv", columns });
    expect(upper.signatures).toEqual(plain.signatures);
  });

  it("reads each file of a delivery by its own header", async () => {
    const files = [file("csv", "id,amount\n1,1.5\n"), file("csv", "AMOUNT,ID\n2,2\n\"3.5\",3\n")];
    const { good, bad } = await land({ files, format: "csv", columns });
    expect(good).toEqual([["1", "1.50"], ["2", "2.00"], ["3", "3.50"]]);
    expect(bad).toEqual([]);
  });

  it("maps columns by position with header: false", async () => {
    const { good, bad } = await land({ files: [file("csv", "1,1.50\n2,2\n3\n")], format: "csv", columns, header: false });
    expect(good).toEqual([["1", "1.50"], ["2", "2.00"]]);
    expect(bad).toEqual([[3, "the line has 1 fields, but 2 columns are declared (header: false maps fields to the declared columns by position)", "3"]]);
  });

  it("lands source columns named filename and file_row_number, from CSV, JSONL and Parquet", async () => {
    const named = [col("filename", "VARCHAR"), col("file_row_number", "BIGINT")];
    const csv = await land({ files: [file("csv", "filename,file_row_number\na.txt,7\n")], format: "csv", columns: named });
    const jsonl = await land({ files: [file("jsonl", `{"filename": "a.txt", "file_row_number": 7}\n`)], format: "jsonl", columns: named });
    const pq = await land({ files: [await parquet(`SELECT 'a.txt' AS filename, 7 AS file_row_number UNION ALL SELECT 'b.txt', 'x'`)], format: "parquet", columns: named });
    for (const landed of [csv, jsonl]) expect(landed.good).toEqual([["a.txt", "7"]]);
    expect(pq.good).toEqual([["a.txt", "7"]]);
    expect(pq.bad).toEqual([[2, "column file_row_number: 'x' is not an integer", null]]);
    const onlyFilename = await land({ files: [await parquet(`SELECT 'a.txt' AS filename, 7 AS n UNION ALL SELECT 'b.txt', NULL`)], format: "parquet", columns: [col("filename", "VARCHAR"), col("n", "BIGINT", false)] });
    expect(onlyFilename.bad).toEqual([[2, "column n is NULL but is declared not nullable (an empty field is NULL)", "b.txt,"]]);
  });

  it("strips a UTF-8 byte order mark from JSONL and CSV, so the first row lands like the others", async () => {
    const bom = "\uFEFF";
    const jsonl = await land({ files: [file("jsonl", `${bom}{"id": 1, "amount": 1}\r\n{"id": 2, "amount": 2}\r\n`)], format: "jsonl", columns });
    const csv = await land({ files: [file("csv", `${bom}id,amount\r\n1,1\r\n2,2\r\n`)], format: "csv", columns });
    const plain = await land({ files: [file("csv", "id,amount\n1,1\n2,2\n")], format: "csv", columns });
    for (const landed of [jsonl, csv]) {
      expect(landed.good).toEqual([["1", "1.00"], ["2", "2.00"]]);
      expect(landed.bad).toEqual([]);
      expect(landed.signatures).toEqual(plain.signatures);
    }
  });
});

describe("bad rows keep their file, line and original text; file problems are named in one message (items 9, 21)", () => {
  const columns = [col("id", "BIGINT", false), col("note", "VARCHAR"), col("day", "VARCHAR")];
  const byDay = [{ key: "p", expression: "day" }];

  it("keeps a CSV row's original text (quotes and all) and the line it starts on, also across lines", async () => {
    const lines = ["id,note,day", `1,"a ""quoted"" note",x`, `2,"two`, `lines",x`, `oops,"say ""hi""",x`, `4,,`, `5,"a,b",x,extra`, `6,c,x`];
    const { delivery, good, bad } = await land({ files: [file("csv", `${lines.join("\n")}\n`)], format: "csv", columns, partition: byDay });
    expect(good).toEqual([["1", 'a "quoted" note', "x"], ["2", "two\nlines", "x"], ["6", "c", "x"]]);
    expect(bad).toEqual([
      [5, "column id: 'oops' is not an integer", `oops,"say ""hi""",x`],
      [6, "partition key p is NULL: its expression day gives NULL for this row", "4,,"],
      [7, "the line has 4 fields, but the header of this file has 3", `5,"a,b",x,extra`],
    ]);
    expect(delivery).toMatchObject({ rowsRead: 6, rowsLoaded: 3, rowsRejected: 3 });
    expect(delivery.firstRejects[0]).toMatchObject({ file: expect.stringMatching(/\.csv$/), line: 5 });
  });

  it("reports an unterminated quote and malformed quoting at their line, and loads the rest", async () => {
    const lines = ["id,note,day", "1,a,x", `2,b"c"d,x`, "3,d,x", `4,"never closed,x`, "5,e,x"];
    const { good, bad } = await land({ files: [file("csv", `${lines.join("\n")}\n`)], format: "csv", columns, partition: byDay });
    expect(good).toEqual([["1", "a", "x"], ["3", "d", "x"]]);
    expect(bad).toEqual([
      [3, expect.stringMatching(/^malformed quoting: a quote inside an unquoted field/), `2,b"c"d,x`],
      [5, 'unterminated quote: a field opened with " on this line is never closed, so the 1 line(s) after it were read into it (a quote inside a quoted field is written twice: "")', `4,"never closed,x\n5,e,x`],
    ]);
  });

  it("lands an empty file, or one with only a header, as no rows", async () => {
    for (const text of ["", "id,note,day\n", "\n\n"]) {
      const { delivery } = await land({ files: [file("csv", text)], format: "csv", columns, partition: byDay });
      expect(delivery).toMatchObject({ rowsRead: 0, rowsLoaded: 0, rowsRejected: 0, partitions: [] });
    }
    const { delivery } = await land({ files: [file("jsonl", "")], format: "jsonl", columns, partition: byDay });
    expect(delivery).toMatchObject({ rowsRead: 0, partitions: [] });
  });

  it("names the file, the missing column and the fix; suggests the delimiter when the header is one field", async () => {
    const missing = file("csv", "id,notes,day\n1,a,x\n");
    await expect(engine.land({ files: [missing], format: "csv", header: true, delimiter: ",", columns, partition: byDay, signatureColumns: ["id"] })).rejects.toThrow(
      `${missing}:1: the header has no column note (the header is 'id,notes,day'). Name the columns in the header as declared (case does not matter), map them with source.fields, or set header: false to take them by position.`,
    );
    const semicolons = file("csv", "id;note;day\n1;a;x\n");
    await expect(engine.land({ files: [semicolons], format: "csv", header: true, delimiter: ",", columns, partition: byDay, signatureColumns: ["id"] })).rejects.toThrow(
      `${semicolons}:1: the header has no column id, note, day (the header is 'id;note;day'). The line is one field, and holds ';': is that the delimiter? Set source.delimiter: ';'.`,
    );
    const noHeader = file("csv", "1;a;x\n");
    await expect(engine.land({ files: [noHeader], format: "csv", header: false, delimiter: ",", columns, partition: byDay, signatureColumns: ["id"] })).rejects.toThrow(
      `${noHeader}:1: the line has 1 field, but 3 columns are declared (header: false). The line is one field, and holds ';': is that the delimiter? Set source.delimiter: ';'.`,
    );
    const latin1 = file("csv", Buffer.from("id,note,day\n1,caf\xe9,x\n", "latin1"));
    await expect(engine.land({ files: [latin1], format: "csv", header: true, delimiter: ",", columns, partition: byDay, signatureColumns: ["id"] })).rejects.toThrow(
      `${latin1} is not UTF-8 text: lakeswap reads csv files as UTF-8; convert it (e.g. iconv -f latin1 -t utf-8)`,
    );
    const twice = file("csv", "id,ID,note,day\n1,1,a,x\n");
    await expect(engine.land({ files: [twice], format: "csv", header: true, delimiter: ",", columns, partition: byDay, signatureColumns: ["id"] })).rejects.toThrow(
      /:1: the header names column id more than once/,
    );
  });

  it("a 20 MB line is one bad row with a short reason; the other rows still land", async () => {
    const huge = "9".repeat(20 * 1024 * 1024);
    const csv = file("csv", `id,note,day\n1,a,x\n${huge},b,x\n3,c,x\n`);
    const { delivery, good, bad } = await land({ files: [csv], format: "csv", columns, partition: byDay });
    expect(good).toEqual([["1", "a", "x"], ["3", "c", "x"]]);
    expect(bad).toHaveLength(1);
    expect(bad[0]![0]).toBe(3);
    expect(bad[0]![1]).toBe(`column id: '${"9".repeat(57)}...' is out of range for BIGINT`);
    expect(bad[0]![2]).toBe(`${huge},b,x`);
    expect(delivery.rowsLoaded).toBe(2);
  }, 60_000);
});

describe("text files are read in chunks of whole lines, never as one string (issue 10, item 7)", () => {
  const columns = [col("id", "BIGINT", false), col("note", "VARCHAR"), col("day", "VARCHAR")];
  const byDay = [{ key: "p", expression: "day" }];

  it("keeps every line's number across reads: a bad row past the first 8 MB is named at its line", async () => {
    const rows = Array.from({ length: 250_000 }, (_, i) => `${i},${"n".repeat(30)},d${i % 3}`);
    rows[240_000] = `oops,x,d0`;
    const { delivery, bad } = await land({ files: [file("csv", `id,note,day\n${rows.join("\n")}\n`)], format: "csv", columns, partition: byDay });
    expect(delivery).toMatchObject({ rowsRead: 250_000, rowsLoaded: 249_999, rowsRejected: 1 });
    expect(bad).toEqual([[240_002, "column id: 'oops' is not an integer", "oops,x,d0"]]);
    expect(delivery.partitions.map((p) => p.rows)).toEqual([83_333, 83_333, 83_333]);
  });

  it("drops blank lines at the end of a file and CRs of CRLF line ends; blank lines inside keep the numbering", async () => {
    const csv = await land({ files: [file("csv", "id,note,day\r\n1,a,x\r\n\r\nz,b,x\r\n\r\n\r\n")], format: "csv", columns, partition: byDay });
    expect(csv.good).toEqual([["1", "a", "x"]]);
    expect(csv.bad).toEqual([[4, "column id: 'z' is not an integer", "z,b,x"]]);
    const jsonl = await land({ files: [file("jsonl", `{"id": 1, "day": "x"}\n\n  \n{"id": "z", "day": "x"}\n\n`)], format: "jsonl", columns, partition: byDay, absentFields: "null" });
    expect(jsonl.good).toEqual([["1", null, "x"]]);
    expect(jsonl.bad).toEqual([[4, "column id: 'z' is not an integer", `{"id": "z", "day": "x"}`]]);
  });

  it("a JSONL line longer than DuckDB's line reader takes, a CR inside a line and a raw control character (0x01) leave every line as it is, at its number", async () => {
    // Each in a file of its own: DuckDB's reader refuses the first file midway, and is not given the others.
    const long = "n".repeat(5 * 1024 * 1024);
    const longLines = [`{"id": 1, "note": "${long}", "day": "x"}`, `{"id": "z", "day": "x"}`];
    const longLanded = await land({ files: [file("jsonl", `${longLines.join("\n")}\n`)], format: "jsonl", columns, partition: byDay });
    expect(longLanded.good).toEqual([["1", long, "x"]]);
    expect(longLanded.bad).toEqual([[2, "column id: 'z' is not an integer", longLines[1]]]);
    for (const odd of [`{"id": 3,\r"day": "x"}`, `{"id": 3, "day": "x", "note": "a\u0001b"}`]) {
      const { good, bad } = await land({ files: [file("jsonl", `${odd}\n{"id": "z", "day": "x"}\n`)], format: "jsonl", columns, partition: byDay, absentFields: "null" });
      expect([good, bad]).toEqual(odd.includes("\r") ? [[["3", null, "x"]], [[2, "column id: 'z' is not an integer", `{"id": "z", "day": "x"}`]]] : [[], [[1, "not valid JSON", odd], [2, "column id: 'z' is not an integer", `{"id": "z", "day": "x"}`]]]);
    }
  }, 60_000);

  it("a JSONL line that is not JSON, or not an object, is a bad row; the lines around it land", async () => {
    const lines = [`{"id": 1, "day": "x"}`, `{not json`, `[1, 2]`, `"text"`, `{"id": 2, "note": "a\\"b", "day": "x"}`];
    const { good, bad } = await land({ files: [file("jsonl", `${lines.join("\n")}\n`)], format: "jsonl", columns, partition: byDay });
    expect(good).toEqual([["1", null, "x"], ["2", 'a"b', "x"]]);
    expect(bad).toEqual([
      [2, "not valid JSON", "{not json"],
      [3, "not a JSON object", "[1, 2]"],
      [4, "not a JSON object", `"text"`],
    ]);
  });

  it("names the file of a bad row in a delivery of several files (CSV, JSONL, Parquet)", async () => {
    const csvFiles = [file("csv", "id,note,day\n1,a,x\n"), file("csv", "id,note,day\n2,b,x\nz,c,x\n")];
    const jsonlFiles = [file("jsonl", `{"id": 1, "day": "x"}\n`), file("jsonl", `{"id": 2, "day": "x"}\n{"id": "z", "day": "x"}\n`)];
    const parquetFiles = [await parquet(`SELECT '1' AS id, 'a' AS note, 'x' AS day`), await parquet(`SELECT * FROM (VALUES ('2', 'b', 'x'), ('z', 'c', 'x')) t(id, note, day)`)];
    for (const [files, format] of [[csvFiles, "csv"], [jsonlFiles, "jsonl"], [parquetFiles, "parquet"]] as const) {
      const { delivery } = await land({ files: [...files], format, columns, partition: byDay, absentFields: "null" });
      expect(delivery).toMatchObject({ rowsLoaded: 2, rowsRejected: 1 });
      expect(delivery.firstRejects).toEqual([
        { file: files[1], line: format === "csv" ? 3 : 2, reason: "column id: 'z' is not an integer", raw: format === "csv" ? "z,c,x" : format === "jsonl" ? `{"id": "z", "day": "x"}` : null },
      ]);
    }
  });
});

describe("JSONL fields the columns do not declare (ingest's unknown_fields)", () => {
  const columns = [col("id", "INTEGER"), col("day", "VARCHAR"), col("extra", "VARCHAR")];
  // Keys escaped, in any order; nested values and nulls: what is left of the object is exactly the undeclared keys,
  // and an object of declared keys only keeps nothing. A key written twice (lines 2 and 5, and escaped on line 7) is
  // ambiguous: DuckDB would read the first value, JavaScript's and Python's JSON readers the last; until 2026-12-02
  // such an event landed with the first. It is a bad row naming the field; so is a field given twice in two cases
  // (line 6: day and Day name the same column since issue 25). An object with as many keys as there are
  // declared fields is checked all the same (line 8: one given twice, one missing); one that gives them all in another
  // order, or only some, needs no merge (lines 9, 10).
  const lines = [
    `{"id": 1, "day": "x"}`,
    `{"day": "x", "id": 2, "id": 3}`,
    `{"i\\u0064": 4, "day": "x"}`,
    `{"id": 5, "day": "x", "campaign": {"name": "spring", "tags": [1, 2]}}`,
    `{"id": 6, "day": "x", "id": 7, "ref": null}`,
    `{"id": 8, "day": "x", "Day": "y"}`,
    `{"id": 9, "day": "x", "i\\u0064": 10}`,
    `{"id": 11, "id": 12}`,
    `{"day": "x", "id": 13}`,
    `{"id": 14}`,
  ];
  const repeated = (line: number): [number, string] => [line, "fields given more than once: id"];
  const inTwoCases = (line: number): [number, string] => [line, "fields given more than once: Day, day"];

  it("keep: undeclared fields are kept as one JSON object in the extra column, NULL when there are none", async () => {
    const { good, bad } = await land({
      files: [file("jsonl", `${lines.join("\n")}\n`)],
      format: "jsonl",
      columns,
      unknownFields: { mode: "keep", column: "extra" },
    });
    expect(bad.map(([line, reason]) => [line, String(reason).split(" (")[0]])).toEqual([repeated(2), repeated(5), inTwoCases(6), repeated(7), repeated(8)]);
    const extra = new Map(good.map(([id, , rest]) => [Number(id), rest === null ? null : JSON.parse(String(rest))]));
    expect(Object.fromEntries(extra)).toEqual({ 1: null, 4: null, 5: { campaign: { name: "spring", tags: [1, 2] } }, 13: null, 14: null });
  });

  it("deadletter: an event with an undeclared field is a bad row naming the fields; the others land", async () => {
    const { good, bad } = await land({
      files: [file("jsonl", `${lines.join("\n")}\n`)],
      format: "jsonl",
      columns: columns.slice(0, 2),
      unknownFields: { mode: "deadletter" },
    });
    expect(good.map(([id]) => Number(id)).sort((a, b) => a - b)).toEqual([1, 4, 13, 14]);
    expect(bad.map(([line, reason]) => [line, String(reason).split(" (")[0]])).toEqual([
      repeated(2),
      [4, "fields not declared: campaign"],
      repeated(5),
      inTwoCases(6),
      repeated(7),
      repeated(8),
    ]);
  });

  it("a JSONL dataset (no unknown_fields): a field given twice is a bad row too, with the fix in its reason", async () => {
    const { good, bad } = await land({ files: [file("jsonl", `${lines.join("\n")}\n`)], format: "jsonl", columns: columns.slice(0, 2) });
    expect(good.map(([id]) => Number(id)).sort((a, b) => a - b)).toEqual([1, 4, 5, 13, 14]);
    expect(bad.map(([line]) => line)).toEqual([2, 5, 6, 7, 8]);
    expect(String(bad[0]![1])).toBe(
      "fields given more than once: id (field names match the columns whatever their case, and JSON readers disagree on which value counts; send each field once)",
    );
  });
});

describe("JSONL field names match the columns as CSV headers do (issue 25, item 3)", () => {
  const columns = [col("id", "BIGINT"), col("title", "VARCHAR"), col("distributor", "VARCHAR")];

  it("reads fields spelled in another case (movies.json's Title, Distributor; {\"ID\": 5})", async () => {
    const lines = [`{"Title": "Alien", "Distributor": "Fox", "ID": 5}`, `{"TITLE": "Heat", "distributor": "WB", "id": 6}`, `{"title": "Up", "distributor": null, "iD": 7}`];
    const { good, bad, signatures } = await land({ files: [file("jsonl", `${lines.join("\n")}\n`)], format: "jsonl", columns });
    expect(bad).toEqual([]);
    expect(good).toEqual([["5", "Alien", "Fox"], ["6", "Heat", "WB"], ["7", "Up", null]]);
    const csv = await land({ files: [file("csv", "ID,Title,Distributor\n5,Alien,Fox\n6,Heat,WB\n7,Up,\n")], format: "csv", columns });
    expect(signatures).toEqual(csv.signatures);
  });

  it("two fields whose names differ only in case are a bad row naming both", async () => {
    const lines = [`{"id": 1, "title": "a", "distributor": "x"}`, `{"id": 2, "Title": "b", "title": "c", "distributor": "x"}`, `{"ID": 3, "Id": 4, "title": "d", "distributor": "x"}`];
    const { good, bad } = await land({ files: [file("jsonl", `${lines.join("\n")}\n`)], format: "jsonl", columns });
    expect(good).toEqual([["1", "a", "x"]]);
    expect(bad.map(([line, reason]) => [line, String(reason).split(" (")[0]])).toEqual([
      [2, "fields given more than once: Title, title"],
      [3, "fields given more than once: ID, Id"],
    ]);
  });

  it("keeps undeclared fields apart from a declared field spelled in another case (unknown_fields: keep)", async () => {
    const { good, bad } = await land({
      files: [file("jsonl", `{"ID": 1, "Title": "a", "distributor": "x", "Rating": 7}\n`)],
      format: "jsonl",
      columns: [...columns, col("extra", "VARCHAR")],
      unknownFields: { mode: "keep", column: "extra" },
    });
    expect(bad).toEqual([]);
    expect(good).toEqual([["1", "a", "x", `{"Rating":7}`]]);
  });

  it("refuses a file whose lines never give a declared field, naming the file and the field; a field given as null is given", async () => {
    const given = file("jsonl", `{"id": 1, "title": "a", "distributor": "x"}\n`);
    const absent = file("jsonl", `{"id": 2, "Title": "b"}\n{"id": 3, "title": "c", "rating": 1}\n`);
    const request = { files: [given, absent], format: "jsonl" as const, header: true, delimiter: ",", columns, partition: [{ key: "p", expression: "'all'" }], signatureColumns: ["id"] };
    await expect(engine.land(request)).rejects.toThrow(
      `${absent}: no line has a field distributor (the lines' fields are Title, id, rating, title). ` +
        "Name the fields as the columns are declared (case does not matter), map them with source.fields, or remove the column from the dataset's columns",
    );
    const nulls = await land({ files: [file("jsonl", `{"id": 4, "title": "d", "distributor": null}\n`)], format: "jsonl", columns });
    expect(nulls.good).toEqual([["4", "d", null]]);
    // Ingest's events stand alone: there a field no event gives is NULL.
    const events = await land({ files: [absent], format: "jsonl", columns, absentFields: "null" });
    expect(events.good).toEqual([["2", "b", null], ["3", "c", null]]);
  });

  it("refuses a Parquet source with two columns whose names differ only in case, as a CSV header naming one twice", async () => {
    // DuckDB writes a second "ID" as ID_1; other writers (pandas, Spark) keep it: the column q9 is renamed ID in the footer.
    const written = await parquet(`SELECT 1 AS id, 2 AS q9, 'a' AS title, {'id': 3} AS distributor`);
    const bytes = readFileSync(written);
    const source = file("parquet", Buffer.from(bytes.toString("latin1").replaceAll("q9", "ID"), "latin1"));
    await expect(
      engine.land({ files: [source], format: "parquet", header: true, delimiter: ",", columns, partition: [{ key: "p", expression: "'all'" }], signatureColumns: ["id"] }),
    ).rejects.toThrow(`${source}: the Parquet file has columns id and ID, which name the same column (case does not matter): rename or remove one`);
    // A nested field of the same name is no twin.
    const nested = await parquet(`SELECT 1 AS id, 'a' AS title, {'ID': 3} AS distributor`);
    await expect(
      engine.land({ files: [nested], format: "parquet", header: true, delimiter: ",", columns: columns.slice(0, 2), partition: [{ key: "p", expression: "'all'" }], signatureColumns: ["id"] }),
    ).resolves.toMatchObject({ rowsLoaded: 1 });
  });
});

describe("a value is stored as sent or refused with its reason, never cut or reinterpreted (issue 25, item 8)", () => {
  const notation = "is not written in decimal digits (hexadecimal, binary and '_' digit separators are not read as numbers)";
  const nan = "is NaN, which lakeswap does not store (DuckDB and Athena compare NaN differently): send null, or an empty field, for a missing value";
  const finer = (type: string) => `has a fraction of a second finer than microseconds, which ${type} does not keep: round it to 6 digits`;
  const hugeRange = "is out of range for HUGEINT as lakeswap stores it (DECIMAL(38,0): at most 38 digits)";
  const columns = [col("n", "BIGINT"), col("d", "DOUBLE"), col("t", "TIMESTAMP"), col("tz", "TIMESTAMPTZ"), col("h", "HUGEINT"), col("m", "DECIMAL(10,2)")];
  const good = ["1", "0.5", "2026-01-01 12:00:00.999999", "2026-01-01 12:00:00.1230000", "99999999999999999999999999999999999999", "1.50"];
  const bad: [number, string, string][] = [
    [0, "0x1F", `column n: '0x1F' ${notation}`],
    [0, "1_000_000", `column n: '1_000_000' ${notation}`],
    [0, "0b101", `column n: '0b101' ${notation}`],
    [1, "NaN", `column d: 'NaN' ${nan}`],
    [1, "1_0.5", `column d: '1_0.5' ${notation}`],
    [2, "2026-01-01 12:00:00.9999999", `column t: '2026-01-01 12:00:00.9999999' ${finer("TIMESTAMP")}`],
    [3, "2026-01-01 12:00:00.999999999+02", `column tz: '2026-01-01 12:00:00.999999999+02' ${finer("TIMESTAMPTZ")}`],
    [4, "100000000000000000000000000000000000000", `column h: '100000000000000000000000000000000000000' ${hugeRange}`],
    [5, "1_0", `column m: '1_0' ${notation}`],
  ];
  const rowsWith = (variant: [number, string, string] | undefined): string[] => good.map((value, i) => (variant && variant[0] === i ? variant[1] : value));

  it("CSV and JSONL: hexadecimal, digit separators, NaN, a cut fraction and a 39-digit HUGEINT are bad rows with their reason", async () => {
    const csv = [columns.map((c) => c.name).join(","), ...[undefined, ...bad].map((variant) => rowsWith(variant).join(","))].join("\n");
    const jsonl = [undefined, ...bad].map((variant) => JSON.stringify(Object.fromEntries(columns.map((c, i) => [c.name, rowsWith(variant)[i]])))).join("\n");
    for (const [format, text] of [["csv", csv], ["jsonl", jsonl]] as const) {
      const landed = await land({ files: [file(format, `${text}\n`)], format, columns });
      expect(landed.good).toEqual([["1", "0.5", "2026-01-01 12:00:00.999999", "2026-01-01 12:00:00.123+00", "99999999999999999999999999999999999999", "1.50"]]);
      expect(landed.bad.map(([line, reason]) => [line, reason])).toEqual(bad.map(([, , reason], i) => [i + (format === "csv" ? 3 : 2), reason]));
    }
  });

  it("JSONL: a JSON number NaN is refused, and a JSON object or array for a VARCHAR field is a bad row, not its JSON text", async () => {
    const lines = [`{"n": 1, "note": "{not an object}"}`, `{"n": 2, "note": {"a": 1}}`, `{"N": 3, "Note": [1, 2]}`, `{"n": 4, "d": NaN}`];
    const { good: rows, bad: rejected } = await land({ files: [file("jsonl", `${lines.join("\n")}\n`)], format: "jsonl", columns: [col("n", "BIGINT"), col("note", "VARCHAR"), col("d", "DOUBLE")] });
    expect(rows).toEqual([["1", "{not an object}", null]]);
    const fix = ", not text: send it as a JSON string, or leave the field undeclared (ingest keeps it in the extra column)";
    expect(rejected.map(([line, reason]) => [line, reason])).toEqual([
      [2, `column note: '{"a":1}' is a JSON object${fix}`],
      [3, `column note: '[1,2]' is a JSON array${fix}`],
      [4, `column d: 'NaN' ${nan}`],
    ]);
  });

  it("Parquet: NaN, nanoseconds, a HUGEINT wider than 38 digits and a nested value for a VARCHAR column are bad rows", async () => {
    // DuckDB writes a HUGEINT to Parquet as a DOUBLE: 1.5e38 is a 39-digit integer, exact in a double.
    const source = await parquet(
      `SELECT * FROM (VALUES (1, 0.5::DOUBLE, TIMESTAMP_NS '2026-01-01 12:00:00.123456000', 1::DOUBLE, {'a': 1}::STRUCT(a INTEGER), 'x'), ` +
        `(2, 'NaN'::DOUBLE, TIMESTAMP_NS '2026-01-01 12:00:00.123456789', 1.5e38::DOUBLE, NULL, 'y')) t(n, d, t, h, s, v)`,
    );
    const typed = await land({
      files: [source],
      format: "parquet",
      columns: [col("n", "BIGINT"), col("d", "DOUBLE"), col("t", "TIMESTAMP"), col("h", "HUGEINT"), col("v", "VARCHAR")],
    });
    expect(typed.good).toEqual([["1", "0.5", "2026-01-01 12:00:00.123456", "1", "x"]]);
    expect(typed.bad.map(([line, reason]) => [line, reason])).toEqual([[2, `column d: 'nan' ${nan}`]]);
    const widths = await land({ files: [source], format: "parquet", columns: [col("n", "BIGINT"), col("t", "TIMESTAMPTZ"), col("h", "HUGEINT")] });
    expect(widths.bad.map(([line, reason]) => [line, reason])).toEqual([[2, "column t: '2026-01-01 12:00:00.123456789' has nanoseconds, which TIMESTAMPTZ does not keep (it keeps microseconds)"]]);
    const huge = await land({ files: [source], format: "parquet", columns: [col("n", "BIGINT"), col("h", "HUGEINT")] });
    expect(huge.bad.map(([line, reason]) => [line, reason])).toEqual([[2, `column h: '1.5e+38' ${hugeRange}`]]);
    const nested = await land({ files: [source], format: "parquet", columns: [col("n", "BIGINT"), col("s", "VARCHAR")] });
    expect(nested.bad.map(([line, reason]) => [line, reason])).toEqual([
      [1, "column s: '{'a': 1}' (STRUCT(a INTEGER)) is a nested value, not text: declare the column from its fields, or store it as text in the file"],
    ]);
  });

  it("Parquet: strings written as bytes without the UTF8 annotation (Impala, Hive, pyarrow binary) land as their text; bytes that are not UTF-8 are a bad row", async () => {
    // Two files, two partitions: the same texts written as annotated strings sign the same as written as bytes.
    const texts = ["café 日本", "plain", "a\nb", "", null];
    const rows = (bytes: boolean, from: number) =>
      texts.map((t, i) => `(${from + i}, ${i % 2}, ${t === null ? "NULL" : bytes ? `encode('${t}')` : `'${t}'`}, '\\x00\\xFF'::BLOB)`).join(", ");
    const binary = [await parquet(`SELECT * FROM (VALUES ${rows(true, 1)}) t(n, g, s, b)`), await parquet(`SELECT * FROM (VALUES ${rows(true, 10)}, (20, 1, '\\xFF\\xFEok'::BLOB, NULL)) t(n, g, s, b)`)];
    const utf8 = [await parquet(`SELECT * FROM (VALUES ${rows(false, 1)}) t(n, g, s, b)`), await parquet(`SELECT * FROM (VALUES ${rows(false, 10)}) t(n, g, s, b)`)];
    const columns = [col("n", "BIGINT"), col("s", "VARCHAR"), col("b", "BLOB")];
    const partition = [{ key: "p", expression: "CAST(n % 2 AS VARCHAR)" }];
    const asBytes = await land({ files: binary, format: "parquet", columns, partition });
    const asText = await land({ files: utf8, format: "parquet", columns, partition });
    // An empty text is NULL, whichever way it is written (landing-pass).
    const expected = [1, 10].flatMap((from) => texts.map((t, i) => [String(from + i), t || null, "\\x00\\xFF"]));
    expect(asBytes.good).toEqual(expected.sort((a, z) => String(a[0]).localeCompare(String(z[0]))));
    expect(asText.good).toEqual(asBytes.good);
    expect(asBytes.bad.map(([line, reason]) => [line, reason])).toEqual([
      [6, "column s: '\\xFF\\xFEok' (BLOB) is not valid UTF-8 text: send the text encoded as UTF-8, or declare the column BLOB"],
    ]);
    expect(asBytes.signatures).toHaveLength(2);
    expect(asBytes.signatures).toEqual(asText.signatures);
  });

  it("an event time (ingest's time field) outside years 0001-9999 is a bad row: no partition p_year=infinity or 10000", async () => {
    const times = ["2026-11-30T01:00:00Z", "infinity", "-infinity", "10000-01-01T00:00:00Z", "0000-06-01T00:00:00Z", "294247-01-01T00:00:00Z", "9999-12-31T23:59:59.999999Z", "0001-01-01T00:00:00Z"];
    const { good: rows, bad: rejected, delivery } = await land({
      files: [file("jsonl", `${times.map((ts, i) => JSON.stringify({ id: i, ts })).join("\n")}\n`)],
      format: "jsonl",
      columns: [col("id", "BIGINT"), { name: "ts", type: "TIMESTAMPTZ", nullable: false, eventTime: "iso8601" }],
      partition: [{ key: "p_year", expression: "strftime(timezone('UTC', ts), '%Y')" }],
    });
    expect(rows.map(([id]) => id)).toEqual(["0", "6", "7"]);
    const range = "is outside the years 0001 to 9999 that an event time may have (it names the event's partition)";
    expect(rejected.map(([line, reason]) => [line, String(reason).replace(/^column ts: '[^']*' /, "")])).toEqual([2, 3, 4, 5, 6].map((line) => [line, range]));
    expect(rejected[0]![1]).toBe(`column ts: 'infinity' ${range}`);
    expect(delivery.partitions.map((p) => p.partition.values)).toEqual([["0001"], ["2026"], ["9999"]]);
  });
});

describe("an event time in the format its namespace declares (issue 25, item 15: time.format)", () => {
  const timed = (format: "iso8601" | "epoch_ms" | "epoch_s") => [col("id", "BIGINT"), { name: "time", type: "TIMESTAMPTZ", nullable: false, eventTime: format }];
  const landTimes = async (format: "iso8601" | "epoch_ms" | "epoch_s", times: unknown[]) =>
    land({ files: [file("jsonl", `${times.map((time, i) => JSON.stringify({ id: i, time })).join("\n")}\n`)], format: "jsonl", columns: timed(format) });

  it("epoch_ms: the earthquakes' milliseconds since 1970, as numbers or digits, exact to the microsecond", async () => {
    const { good, bad } = await landTimes("epoch_ms", [1700000000000, "1700000000000", 1700000000000.5, -1000, 0, "1700000000000.0001", "soon", 1e20, "0x1F", "2023-11-14T22:13:20Z"]);
    expect(good).toEqual([
      ["0", "2023-11-14 22:13:20+00"],
      ["1", "2023-11-14 22:13:20+00"],
      ["2", "2023-11-14 22:13:20.0005+00"],
      ["3", "1969-12-31 23:59:59+00"],
      ["4", "1970-01-01 00:00:00+00"],
    ]);
    const expected = "is not a number of milliseconds since 1970-01-01T00:00:00Z (time.format: epoch_ms; ISO 8601 text such as 2025-03-04T10:15:00Z needs time.format: iso8601)";
    expect(bad.map(([line, reason]) => [line, reason])).toEqual([
      [6, "column time: '1700000000000.0001' has a fraction finer than a microsecond (time.format: epoch_ms)"],
      [7, `column time: 'soon' ${expected}`],
      [8, "column time: '100000000000000000000' is outside the years 0001 to 9999 that an event time may have (it names the event's partition)"],
      [9, `column time: '0x1F' ${expected}`],
      [10, `column time: '2023-11-14T22:13:20Z' ${expected}`],
    ]);
  });

  it("epoch_s: seconds, with a fraction down to the microsecond; iso8601 names the epoch formats when it meets a number", async () => {
    const seconds = await landTimes("epoch_s", [1700000000, 1700000000.123456, "1700000000.1234567"]);
    expect(seconds.good).toEqual([["0", "2023-11-14 22:13:20+00"], ["1", "2023-11-14 22:13:20.123456+00"]]);
    expect(seconds.bad.map(([line, reason]) => [line, reason])).toEqual([[3, "column time: '1700000000.1234567' has a fraction finer than a microsecond (time.format: epoch_s)"]]);
    // A JSON number is read as written, not as the double it rounds to (1700006400.0: another day).
    const written = ["1700006399.9999999", "1700006399.999999", "1.7e9"].map((time, i) => `{"id": ${i}, "time": ${time}}`);
    const numbers = await land({ files: [file("jsonl", `${written.join("\n")}\n`)], format: "jsonl", columns: timed("epoch_s") });
    expect(numbers.good).toEqual([["1", "2023-11-14 23:59:59.999999+00"], ["2", "2023-11-14 22:13:20+00"]]);
    expect(numbers.bad.map(([line, reason]) => [line, reason])).toEqual([[1, "column time: '1700006399.9999999' has a fraction finer than a microsecond (time.format: epoch_s)"]]);
    const iso = await landTimes("iso8601", [1700000000000, "2023-11-14T22:13:20Z"]);
    expect(iso.good).toEqual([["1", "2023-11-14 22:13:20+00"]]);
    expect(iso.bad.map(([line, reason]) => [line, reason])).toEqual([
      [1, "column time: '1700000000000' is not an ISO 8601 time such as 2025-03-04T10:15:00Z (time.format: iso8601; a number of seconds or milliseconds since 1970 needs time.format: epoch_s or epoch_ms)"],
    ]);
  });
});
