import path from "node:path";
import { DuckDBInstance } from "@duckdb/node-api";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { landDelivery, type LandingOptions } from "../../src/landing/duckdb/land-delivery.js";
import { dropLanding } from "../../src/landing/duckdb/landing-relations.js";
import type { LandRequest } from "../../src/landing/landing.js";
import { quoteIdentifier } from "../../src/model/sql.js";
import { inputFile, tempDir } from "../support/lake-fixture.js";

/** What a dead letter of an unsafe partition value says after the value: the rule, and the fix. */
const UNSAFE_RULE = " (a partition value names a folder: use letters, digits, '_', '-' and '.' (a '-' or '.' not first, no '..'), at most 128 characters, not null or __HIVE_DEFAULT_PARTITION__ in any case (readers read those as NULL); make the partition expression give such values, or leave the row out)";

// Issue 27, item 3: CSV is read by DuckDB's streaming read_csv, quoted or not, and a delivery with bad rows keeps
// each one's file, line and text exactly as the exact reader (which reads the files line by line) keeps them.

let workspace: ReturnType<typeof tempDir>;
let duck: DuckDBInstance;
beforeAll(async () => {
  workspace = tempDir("lakeswap-csv-streaming-");
  duck = await DuckDBInstance.create(":memory:");
});
afterAll(() => {
  duck.closeSync();
  workspace.cleanup();
});

let counter = 0;
const csv = (text: string): string => inputFile(workspace.dir, text);

type Column = LandRequest["columns"][number];
const col = (name: string, type: string, nullable = true): Column => ({ name, type, nullable });
const columns = [col("id", "BIGINT", false), col("note", "VARCHAR"), col("day", "VARCHAR")];
const byDay = [{ key: "p", expression: "day" }];

/** Per-partition row counts, as the pass that reads a delivery gives them to landing (the signature itself is another file's). */
const countPerPartition = (relation: string, keys: readonly string[]): string =>
  `SELECT ${keys.map((k) => `${quoteIdentifier(k)}, `).join("")}count(*) AS n, 0 AS upper, 0 AS lower FROM ${relation} GROUP BY ALL`;

/** One landing: the good rows (as text, sorted), the bad ones (file, line, reason, raw), and whether it was read in one pass (streamed). */
async function landOnce(request: LandRequest, stream: boolean, options: LandingOptions = {}) {
  const connection = await duck.connect();
  const tables = { landed: `landed_${counter}`, rejected: `rejected_${counter++}` };
  try {
    const inPass = await landDelivery(connection, request, tables, stream ? countPerPartition : undefined, options);
    const names = request.columns.map((c) => `CAST(${quoteIdentifier(c.name)} AS VARCHAR)`).join(", ");
    const good = (await connection.runAndReadAll(`SELECT ${names} FROM ${tables.landed} ORDER BY ALL`)).getRowsJS();
    const bad = (await connection.runAndReadAll(`SELECT file, line, reason, raw FROM ${tables.rejected} ORDER BY file, line`))
      .getRowsJS()
      .map(([file, line, reason, raw]) => [path.basename(String(file)), line === null ? null : Number(line), reason, raw]);
    const partitions = inPass ? (await connection.runAndReadAll(`SELECT p, n FROM ${inPass.signatures} WHERE __good ORDER BY p`)).getRowsJS() : undefined;
    return { good, bad, streamed: inPass !== undefined, partitions };
  } finally {
    await dropLanding(connection, tables);
    connection.closeSync();
  }
}

/** Lands files with the streaming reader and with the exact one: the same rows must land, and the same bad rows be kept. */
async function landBothWays(files: string[], extra: Partial<LandRequest> = {}) {
  const request: LandRequest = { files, format: "csv", header: true, delimiter: ",", columns, partition: byDay, signatureColumns: ["id"], ...extra };
  // Streamed twice: parsed once into a table (a small delivery), and read in place by every pass (a large one).
  const [streamed, inPlace, exact] = [await landOnce(request, true), await landOnce(request, true, { materializeMaxBytes: 0 }), await landOnce(request, false)];
  for (const landed of [streamed, inPlace]) {
    expect(landed.good).toEqual(exact.good);
    expect(landed.bad).toEqual(exact.bad);
  }
  expect(inPlace.partitions).toEqual(streamed.partitions);
  return streamed;
}

describe("quoted CSV is streamed (RFC 4180) and lands as the exact reader reads it", () => {
  it("embedded delimiters, line ends inside quotes (LF and CRLF), quoted empty fields, a quoted header and a byte order mark", async () => {
    const lf = csv(`"id","note","day"\n1,"a,b",x\n2,"two\nlines",x\n3,"",y\n"4",plain,"y"\n`);
    const crlf = csv(`\ufeffid,note,day\r\n5,"cr\r\nlf",x\r\n6,"k;l, m",y\r\n`);
    const landed = await landBothWays([lf, crlf]);
    expect(landed).toMatchObject({ streamed: true, bad: [] });
    expect(landed.good).toEqual([
      ["1", "a,b", "x"],
      ["2", "two\nlines", "x"],
      ["3", null, "y"],
      ["4", "plain", "y"],
      ["5", "cr\r\nlf", "x"],
      ["6", "k;l, m", "y"],
    ]);
    expect(landed.partitions).toEqual([["x", 3n], ["y", 3n]]);
  });

  it("a delivery DuckDB's reader would read otherwise than the exact reader is read exactly: a space beside a quote, a stray quote", async () => {
    for (const line of [`2, "spaced",x`, `2,"spaced" ,x`, `2,a"b,x`]) {
      const landed = await landBothWays([csv(`id,note,day\n1,a,x\n${line}\n3,c,x\n`)]);
      expect(landed.streamed).toBe(false);
      expect(landed.bad).toEqual([[expect.any(String), 3, expect.stringMatching(/^malformed quoting|^unterminated quote/), expect.stringContaining(line)]]);
    }
  });
});

describe("a CR before a line end inside a quoted field is the field's, kept as DuckDB's reader keeps it", () => {
  it("lands the quoted field's bytes as they are (CRLF, CR CR LF, a blank line, a lone CR), streamed or not; bad rows keep their lines and text", async () => {
    const notes = [`"a\r\nb"`, `"a\r\r\nb"`, `"a\nb"`, `"a\r\n\r\nb"`, `"a\rb"`, `"end\r\n"`];
    const records = notes.map((note, i) => `${i + 1},${note},${i % 2 === 0 ? "x" : "y"}`);
    // A record refused for a field too many, and a value that does not convert, after records spanning lines.
    const first = csv(`id,note,day\r\n${records.join("\r\n")}\r\n7,"c\r\nd",x,extra\r\noops,e,x\r\n8,"f\r\ng",y\r\n`);
    const second = csv(`id,note,day\n${records.map((r) => r.replace(/^(\d)/, "1$1")).join("\n")}\n`);
    const landed = await landBothWays([first, second]);
    expect(landed.streamed).toBe(true);
    // As plain DuckDB reads the delivery.
    const connection = await duck.connect();
    const plain = (await connection.runAndReadAll(`SELECT id, note, day FROM read_csv(['${first}', '${second}'], header = true, auto_detect = false, columns = {'id': 'VARCHAR', 'note': 'VARCHAR', 'day': 'VARCHAR'}, ignore_errors = true) WHERE id <> 'oops' ORDER BY ALL`)).getRowsJS();
    connection.closeSync();
    const values = notes.map((note) => note.slice(1, -1));
    expect(landed.good).toEqual([
      ...values.flatMap((note, i) => [[`${i + 1}`, note, i % 2 === 0 ? "x" : "y"], [`1${i + 1}`, note, i % 2 === 0 ? "x" : "y"]]),
      ["8", "f\r\ng", "y"],
    ].sort((a, b) => a.join().localeCompare(b.join())));
    expect(landed.good).toEqual(plain);
    // Line numbers count every line end (CRLF or LF); a record's text keeps the CRs inside its quotes, not its own line end's.
    expect(landed.bad).toEqual([
      [path.basename(first), 14, "the line has 4 fields, but the header of this file has 3", `7,"c\r\nd",x,extra`],
      [path.basename(first), 16, "column id: 'oops' is not an integer", "oops,e,x"],
    ]);
    expect(landed.partitions).toEqual([["x", 6n], ["y", 7n]]);
  });
});

describe("columns read from other header names (source.fields)", () => {
  it("are found in each file's header in any order and case, streamed as the exact reader reads them", async () => {
    // Files of one layout are streamed (files of different layouts are read by the exact reader).
    const mapped = [{ ...columns[0]!, field: "Order ID" }, { ...columns[1]!, field: "Note ($)" }, columns[2]!];
    const first = csv(`"Note ($)",DAY,order id\n"a,b",x,1\n"two\nlines",x,2\nc,y,oops\n`);
    const second = csv(`NOTE ($),Day,ORDER ID\nd,y,4\n`);
    const landed = await landBothWays([first, second], { columns: mapped });
    expect(landed.streamed).toBe(true);
    expect(landed.good).toEqual([["1", "a,b", "x"], ["2", "two\nlines", "x"], ["4", "d", "y"]]);
    expect(landed.bad).toEqual([[path.basename(first), 5, "column id: 'oops' is not an integer", "c,y,oops"]]);
  });
});

describe("a streamed delivery's bad rows keep their file, line and text", () => {
  it("an empty field past the last column, which DuckDB's reader drops, is one field too many, as the exact reader counts it", async () => {
    for (const [line, eol] of ["2,b,x,", `2,b,x,""`, `"2","b","x",`].flatMap((line) => [[line, "\n"], [line, "\r\n"]])) {
      const landed = await landBothWays([csv(`id,note,day${eol}1,a,x${eol}${line}${eol}3,c,`)]);
      expect(landed.bad).toEqual([
        [expect.any(String), 3, "the line has 4 fields, but the header of this file has 3", line],
        [expect.any(String), 4, "partition key p is NULL: its expression day gives NULL for this row", "3,c,"],
      ]);
    }
  });

  it("values that do not convert and NULL partition values, after blank lines, CRLF line ends and records spanning lines", async () => {
    const first = csv(`id,note,day\r\n1,"multi\r\nline\r\nnote",x\r\n\r\noops,"a,b",x\r\n3,c,\r\n`);
    const second = csv(`id,note,day\n4,d,y\n\n\n5,"e\n\nf",y\n9999999999999999999999,g,y\n6,h,y`);
    const landed = await landBothWays([first, second]);
    expect(landed.streamed).toBe(true);
    expect(landed.bad).toEqual([
      [path.basename(first), 6, "column id: 'oops' is not an integer", `oops,"a,b",x`],
      [path.basename(first), 7, "partition key p is NULL: its expression day gives NULL for this row", "3,c,"],
      [path.basename(second), 8, "column id: '9999999999999999999999' is out of range for BIGINT", "9999999999999999999999,g,y"],
    ]);
    expect(landed.good).toEqual([["1", "multi\r\nline\r\nnote", "x"], ["4", "d", "y"], ["5", "e\n\nf", "y"], ["6", "h", "y"]]);
    // The signatures of the pass leave out the bad rows, and the partition of a bad value.
    expect(landed.partitions).toEqual([["x", 1n], ["y", 3n]]);
  });

  it("an unsafe partition value makes every row of it a bad row; the others land", async () => {
    const landed = await landBothWays([csv(`id,note,day\n1,a,x\n2,b,../up\n3,c,../up\n4,d,y\n`)]);
    expect(landed.streamed).toBe(true);
    expect(landed.bad.map(([, line, reason]) => [line, reason])).toEqual([
      [3, `partition key p has the unsafe value '../up'${UNSAFE_RULE}`],
      [4, `partition key p has the unsafe value '../up'${UNSAFE_RULE}`],
    ]);
    expect(landed.partitions).toEqual([["x", 1n], ["y", 1n]]);
  });

  it("records with too many or too few fields are taken from the reader's rejects, named as the exact reader names them", async () => {
    const first = csv(`id,note,day\r\n1,"a\r\nb",x\r\n\r\n2,b,x,extra\r\n3,"c,d",x\r\n4\r\n`);
    const second = csv(`id,note,day\n5,e,x\n6,"f\n\ng",x,"h\ni"\nq,r,x\n`);
    const landed = await landBothWays([first, second]);
    expect(landed.streamed).toBe(true);
    expect(landed.bad).toEqual([
      [path.basename(first), 5, "the line has 4 fields, but the header of this file has 3", "2,b,x,extra"],
      [path.basename(first), 7, "the line has 1 fields, but the header of this file has 3", "4"],
      [path.basename(second), 3, "the line has 4 fields, but the header of this file has 3", `6,"f\n\ng",x,"h\ni"`],
      [path.basename(second), 7, "column id: 'q' is not an integer", "q,r,x"],
    ]);
    expect(landed.partitions).toEqual([["x", 3n]]);
  });

  it("a record the exact reader reads otherwise (an unterminated quote, malformed quoting) sends the delivery to it", async () => {
    for (const [line, reason] of [
      [`2,"open,x`, expect.stringMatching(/^unterminated quote/)],
      [`2,"a"b,x,y`, expect.stringMatching(/^malformed quoting/)],
    ] as const) {
      const landed = await landBothWays([csv(`id,note,day\n1,a,x\n${line}\n`)]);
      expect(landed.streamed).toBe(false);
      expect(landed.bad).toEqual([[expect.any(String), 3, reason, line]]);
    }
  });

  it("a quote doubled inside a quoted field lands; the exact reader reads such a delivery", async () => {
    const landed = await landBothWays([csv(`id,note,day\n1,"say ""hi""",x\nz,b,x\n`)]);
    expect(landed.good).toEqual([["1", 'say "hi"', "x"]]);
    expect(landed.bad).toEqual([[expect.any(String), 3, "column id: 'z' is not an integer", "z,b,x"]]);
  });

  it("header: false numbers the lines from the first", async () => {
    const landed = await landBothWays([csv(`1,a,x\nz,"b\nc",x\nq,d,x\n`)], { header: false });
    expect(landed.streamed).toBe(true);
    expect(landed.bad.map(([, line, , raw]) => [line, raw])).toEqual([
      [2, `z,"b\nc",x`],
      [4, "q,d,x"],
    ]);
  });
});

describe("the streaming reader never lands what the exact reader refuses, and keeps the same bad rows (random files)", () => {
  /** A field: plain text, empty, a number, quoted (with the delimiter, a doubled quote, a line end inside), or awkward (a stray quote, spaces beside quotes). */
  const field = fc.oneof(
    { weight: 12, arbitrary: fc.constantFrom("a", "b c", "", "7", "-3", "x1", "1.5") },
    { weight: 6, arbitrary: fc.constantFrom(`"q"`, `""`, `"a,b"`, `"two\nlines"`, `"cr\r\nlf"`, `"say ""hi"""`, `"12"`) },
    { weight: 1, arbitrary: fc.constantFrom(`a"b`, ` "s"`, `"t" `, `"open`, `"a"b`) },
  );
  const record = fc.array(field, { minLength: 1, maxLength: 4 }).map((fields) => fields.join(","));
  const file = fc.record({
    records: fc.array(fc.oneof({ weight: 8, arbitrary: record }, { weight: 1, arbitrary: fc.constant("") }), { maxLength: 6 }),
    crlf: fc.boolean(),
    bom: fc.boolean(),
    lastLineEnd: fc.boolean(),
  });

  it("lands the same rows and bad rows as the exact reader", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(file, { minLength: 1, maxLength: 2 }), async (files) => {
        const paths = files.map(({ records, crlf, bom, lastLineEnd }) => {
          const end = crlf ? "\r\n" : "\n";
          const lines = ["id,note,day", ...records];
          return csv(`${bom ? "\ufeff" : ""}${lines.join(end)}${lastLineEnd ? end : ""}`);
        });
        await landBothWays(paths, { columns: [col("id", "BIGINT"), col("note", "VARCHAR"), col("day", "VARCHAR")] });
      }),
      { numRuns: 80, seed: 27 },
    );
  }, 120_000);
});

describe("an append's delivery (fileParts) keeps each row's file and line", () => {
  it("a CSV of any size is read by the exact reader: its rows' lines in their files (a record by its first line)", async () => {
    const request: LandRequest = {
      files: [csv(`id,note,day\n1,a,x\n2,"two\nlines",y\n3,c,x\n`), csv(`id,note,day\n4,d,y\n`)],
      format: "csv", header: true, delimiter: ",", columns, partition: byDay, signatureColumns: ["id"], fileParts: true,
    };
    const lines = async (options: LandingOptions) => {
      const connection = await duck.connect();
      const tables = { landed: `landed_${counter}`, rejected: `rejected_${counter++}` };
      try {
        const inPass = await landDelivery(connection, request, tables, countPerPartition, options);
        const rows = (await connection.runAndReadAll(`SELECT id, __file, __line FROM ${tables.landed} ORDER BY id`)).getRowsJS();
        return { streamed: inPass !== undefined, rows: rows.map((row) => row.map((v) => (v === null ? null : Number(v)))) };
      } finally {
        await dropLanding(connection, tables);
        connection.closeSync();
      }
    };
    expect(await lines({})).toEqual({ streamed: false, rows: [[1, 1, 2], [2, 1, 3], [3, 1, 5], [4, 2, 2]] });
    // One past the size kept in memory too: a row without its line would be appended whole again once its file grew.
    expect(await lines({ materializeMaxBytes: 0 })).toEqual({ streamed: false, rows: [[1, 1, 2], [2, 1, 3], [3, 1, 5], [4, 2, 2]] });
  });
});
