import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { DuckDBInstance, type DuckDBConnection } from "@duckdb/node-api";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { landDelivery } from "../../src/landing/duckdb/land-delivery.js";
import { dropLanding } from "../../src/landing/duckdb/landing-relations.js";
import type { LandRequest } from "../../src/landing/landing.js";
import { quoteIdentifier } from "../../src/model/sql.js";
import { tempDir } from "../support/lake-fixture.js";

// Issue 27, item 3: a JSONL delivery with bad rows is streamed once; its bad rows' lines and texts are then found again
// in their files by a hash of each line, rather than by loading every line of the delivery into a table (which took a
// 2,000,000-line delivery with 20 bad rows from 8 s to 24 s). What lands and what is kept as bad must be exactly what
// the exact path gives, which numbers every line as it loads it: here, the same lines with CRLF line ends, which the
// streamed reader does not take.

let workspace: ReturnType<typeof tempDir>;
let duck: DuckDBInstance;
beforeAll(async () => {
  workspace = tempDir("lakeswap-jsonl-bad-lines-");
  duck = await DuckDBInstance.create(":memory:");
});
afterAll(() => {
  duck.closeSync();
  workspace.cleanup();
});

type Column = LandRequest["columns"][number];
const columns: Column[] = [
  { name: "id", type: "BIGINT", nullable: false },
  { name: "note", type: "VARCHAR", nullable: true },
  { name: "day", type: "VARCHAR", nullable: true },
];
const byDay = [{ key: "p", expression: "day" }];

let counter = 0;

/** Writes each file's lines into a folder of its own, with `end` after each line (and a byte order mark first, if asked). */
function write(files: readonly { readonly lines: readonly string[]; readonly bom: boolean }[], end: "\n" | "\r\n"): string[] {
  const dir = path.join(workspace.dir, `delivery-${counter++}`);
  mkdirSync(dir);
  return files.map((file, i) => {
    const name = path.join(dir, `events-${i}.jsonl`);
    writeFileSync(name, `${file.bom ? "\ufeff" : ""}${file.lines.map((line) => `${line}${end}`).join("")}`);
    return name;
  });
}

/** One landing: the good rows (as text, sorted), the bad ones (file name, line, reason, raw), and the SQL it ran. */
async function land(files: string[]) {
  const connection = await duck.connect();
  const statements: string[] = [];
  const recording = new Proxy(connection, {
    get(target, key, receiver) {
      const value = Reflect.get(target, key, receiver) as unknown;
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        if (typeof args[0] === "string") statements.push(args[0]);
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  }) as DuckDBConnection;
  const tables = { landed: `landed_${counter}`, rejected: `rejected_${counter++}` };
  const request: LandRequest = { files, format: "jsonl", header: true, delimiter: ",", columns, partition: byDay, signatureColumns: ["id"], absentFields: "null" };
  try {
    await landDelivery(recording, request, tables);
    const names = columns.map((c) => `CAST(${quoteIdentifier(c.name)} AS VARCHAR)`).join(", ");
    const good = (await connection.runAndReadAll(`SELECT ${names}, p FROM ${tables.landed} ORDER BY ALL`)).getRowsJS();
    const bad = (await connection.runAndReadAll(`SELECT file, line, reason, raw FROM ${tables.rejected} ORDER BY file, line`))
      .getRowsJS()
      .map(([file, line, reason, raw]) => [path.basename(String(file)), Number(line), reason, raw]);
    return { good, bad, statements };
  } finally {
    await dropLanding(connection, tables);
    connection.closeSync();
  }
}

/** Whether a landing loaded every line of the delivery into a table (the exact path's first step). */
const loadedEveryLine = (statements: readonly string[]): boolean => statements.some((sql) => /^CREATE TABLE \S+_lines AS SELECT \*/.test(sql));

/** Lines of a delivery: good events, bad values, lines that are no JSON, blank lines, unsafe partition values, repeats. */
const line = fc.oneof(
  fc.record({ id: fc.integer({ min: 0, max: 50 }), day: fc.constantFrom("a", "b") }).map(({ id, day }) => JSON.stringify({ id, note: `n${id}`, day })),
  fc.constantFrom(
    `{"id": "x1", "day": "a"}`,
    `{"id": 2, "note": {"nested": true}, "day": "b"}`,
    `{"id": null, "day": "a"}`,
    `{"id": 3, "day": "../up"}`,
    `{"id": 4, "day": "a", "ID": 5}`,
    `not json`,
    `[1, 2]`,
    "",
    "   ",
    `{"id": 6, "day": "a"}`,
  ),
);
const deliveryFiles = fc.array(fc.record({ lines: fc.array(line, { minLength: 1, maxLength: 30 }), bom: fc.boolean() }), { minLength: 1, maxLength: 3 });

describe("a streamed JSONL delivery keeps each bad row's file, line and text, as the exact path does", () => {
  it("the same bad line twice in a file, in two files, after blank lines and a byte order mark", async () => {
    const bad = `{"id": "x9", "note": "twice", "day": "a"}`;
    const files = [
      { lines: [`{"id": 1, "day": "a"}`, bad, "", `{"id": 2, "day": "b"}`, bad], bom: true },
      { lines: ["", bad, `{"id": 3, "day": "../x"}`], bom: false },
    ];
    const streamed = await land(write(files, "\n"));
    const exact = await land(write(files, "\r\n"));
    expect(loadedEveryLine(streamed.statements)).toBe(false);
    expect(loadedEveryLine(exact.statements)).toBe(true);
    expect(streamed.bad).toEqual(exact.bad);
    expect(streamed.good).toEqual(exact.good);
    expect(streamed.bad).toEqual([
      ["events-0.jsonl", 2, "column id: 'x9' is not an integer", bad],
      ["events-0.jsonl", 5, "column id: 'x9' is not an integer", bad],
      ["events-1.jsonl", 2, "column id: 'x9' is not an integer", bad],
      ["events-1.jsonl", 3, expect.stringMatching(/^partition key p has the unsafe value/), `{"id": 3, "day": "../x"}`],
    ]);
    expect(streamed.good).toEqual([
      ["1", null, "a", "a"],
      ["2", null, "b", "b"],
    ]);
  });

  it("any mix of good and bad lines over several files lands as the exact path lands it, without loading every line", async () => {
    await fc.assert(
      fc.asyncProperty(deliveryFiles, async (files) => {
        const streamed = await land(write(files, "\n"));
        const exact = await land(write(files, "\r\n"));
        expect(streamed.bad).toEqual(exact.bad);
        expect(streamed.good).toEqual(exact.good);
        expect(loadedEveryLine(streamed.statements)).toBe(false);
      }),
      { numRuns: 40 },
    );
  });
});
