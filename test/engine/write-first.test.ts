import { existsSync, readdirSync } from "node:fs";
import path from "node:path";
import type { DuckDBConnection } from "@duckdb/node-api";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openDuckDb } from "../../src/duckdb/duckdb-open.js";
import { fileAccessFor } from "../../src/engine/duckdb-file-access.js";
import { METADATA_FOLDERS } from "../../src/lake/layout.js";
import { landDelivery, type LandedInPass } from "../../src/landing/duckdb/land-delivery.js";
import { dropLanding } from "../../src/landing/duckdb/landing-relations.js";
import { signatureQuery } from "../../src/landing/duckdb/signature-sql.js";
import { writeStage } from "../../src/landing/duckdb/stage.js";
import type { LandRequest } from "../../src/landing/landing.js";
import { signatureColumnOrder } from "../../src/model/signature.js";
import { quoteIdentifier } from "../../src/model/sql.js";
import { defineTable } from "../../src/model/table.js";
import { LocalStore } from "../../src/store/local-store.js";
import { EVERY_TYPE as SHARED_EVERY_TYPE } from "../support/every-type.js";
import { inputFile, tempDir } from "../support/lake-fixture.js";

// Issue 27, items 1 and 2: a first load (every partition built, whatever its signature) reads its delivery once, CSV
// or Parquet: its runs are written as it is read, and each partition is signed from the files written. The signatures
// must be those of the rows as the delivery holds them, and a delivery with any bad row must land exactly as it does
// without the write.

let workspace: ReturnType<typeof tempDir>;
let opened: Awaited<ReturnType<typeof openDuckDb>>;
const staging = ".staging";
beforeAll(async () => {
  workspace = tempDir("lakeswap-write-first-");
  opened = await openDuckDb();
});
afterAll(() => {
  opened.instance.closeSync();
  workspace.cleanup();
});

let counter = 0;
const csv = (text: string): string => inputFile(workspace.dir, text);

/**
 * Every declared type (../support/every-type.ts), but HUGEINT within the 38 digits lakeswap stores it in, and more
 * DOUBLE edges (-0, infinity, the smallest subnormal) and text that needs quoting (a delimiter, a line end).
 */
const EVERY_TYPE = [
  ...SHARED_EVERY_TYPE.filter((c) => !["h", "ratio", "note"].includes(c.name)),
  { name: "h", type: "HUGEINT", sql: "(range::HUGEINT * 99999999999999999 - 99999999999999999999999999999999999999::HUGEINT)" },
  { name: "ratio", type: "DOUBLE", sql: "CASE range % 9 WHEN 0 THEN NULL WHEN 1 THEN -0.0 WHEN 2 THEN 'inf'::DOUBLE WHEN 3 THEN 5e-324 ELSE range / 7.0 - 100 END" },
  { name: "note", type: "VARCHAR", sql: "CASE range % 4 WHEN 0 THEN NULL WHEN 1 THEN 'héllo, wörld|' || range WHEN 2 THEN 'two' || chr(10) || 'lines' ELSE repeat('x', (range % 130)::INTEGER) END" },
];
const columns = EVERY_TYPE.map(({ name, type, nullable }) => ({ name, type, nullable: nullable ?? true }));

/**
 * A file of `rows` rows of every type, its partition `p` (range % parts): CSV as DuckDB writes one (quoted where
 * needed), or Parquet with each column of its own type (HUGEINT as text: DuckDB writes it as a DOUBLE).
 */
async function everyTypeFile(connection: DuckDBConnection, format: "csv" | "parquet", rows: number, parts: number): Promise<string> {
  const file = path.join(workspace.dir, `every-${counter++}.${format}`);
  const select = `SELECT 'p' || (range % ${parts}) AS p, ${EVERY_TYPE.map((c) => `${c.sql} AS ${c.name}`).join(", ")} FROM range(${rows}) ORDER BY hash(range)`;
  await connection.run(
    format === "csv"
      ? `COPY (${select}) TO '${file}' (HEADER, DELIMITER ',')`
      : `COPY (SELECT * REPLACE (CAST(h AS VARCHAR) AS h) FROM (${select})) TO '${file}' (FORMAT PARQUET)`,
  );
  return file;
}

const byP = [{ key: "part", expression: "p" }];

interface Landed {
  readonly inPass: LandedInPass | undefined;
  /** The good rows, every value as text, sorted. */
  readonly good: unknown[][];
  readonly bad: unknown[][];
  /** The signatures of the pass (keys, n, upper, lower), good rows only, sorted. */
  readonly signatures: unknown[][] | undefined;
  /** The rows of the stage's files (the runs written first), as text, sorted; undefined without a stage. */
  readonly staged: unknown[][] | undefined;
  /** Files left in the staging folder once the stage was removed. */
  readonly leftOver: number;
}

/** Lands a delivery (streamed, read in place), with its runs written first or not. */
async function land(request: LandRequest, writeFirst: boolean): Promise<Landed> {
  const connection = await opened.instance.connect();
  await connection.run(`SET TimeZone = 'UTC'`);
  const tables = { landed: `landed_${counter}`, rejected: `rejected_${counter++}` };
  const store = new LocalStore(path.join(workspace.dir, "lake"), { folders: METADATA_FOLDERS });
  const files = fileAccessFor(store, { stagingPrefix: staging });
  const table = defineTable({ name: "events", columns: request.columns, partitionKeys: request.partition.map((p) => p.key), compression: "snappy" });
  const signed = signatureColumnOrder(request.columns.filter((c) => request.signatureColumns.includes(c.name)));
  const keys = request.partition.map((p) => p.key);
  try {
    const inPass = await landDelivery(connection, request, tables, (relation, groupKeys) => signatureQuery(relation, groupKeys, signed, opened.signing.form), {
      materializeMaxBytes: 0,
      writeFirst: writeFirst ? (relation) => writeStage(connection, files, table, relation, "all", 0) : undefined,
    });
    const text = request.columns.map((c) => `CAST(${quoteIdentifier(c.name)} AS VARCHAR)`).join(", ");
    const good = (await connection.runAndReadAll(`SELECT ${text} FROM ${tables.landed} ORDER BY ALL`)).getRowsJS();
    const bad = (await connection.runAndReadAll(`SELECT file, line::INTEGER, reason, raw FROM ${tables.rejected} ORDER BY file, line`)).getRowsJS();
    const signatures = inPass
      ? (await connection.runAndReadAll(`SELECT * EXCLUDE (__good) FROM ${inPass.signatures} WHERE __good ORDER BY ALL`)).getRowsJS()
      : undefined;
    let staged: unknown[][] | undefined;
    if (inPass?.stage) {
      const cast = request.columns.map((c) => `CAST(CAST(${quoteIdentifier(c.name)} AS ${c.type}) AS VARCHAR)`).join(", ");
      staged = (await connection.runAndReadAll(`SELECT ${cast} FROM read_parquet('${inPass.stage.files}', hive_partitioning = ${keys.length > 0}) ORDER BY ALL`)).getRowsJS();
      await inPass.stage.remove();
    }
    const stagingDir = store.localPath(staging);
    const leftOver = existsSync(stagingDir) ? readdirSync(stagingDir, { recursive: true }).length : 0;
    return { inPass, good, bad, signatures, staged, leftOver };
  } finally {
    await dropLanding(connection, tables);
    connection.closeSync();
  }
}

/** Lands a delivery both ways: the same rows, bad rows and signatures must come of each. */
async function landBothWays(request: LandRequest): Promise<{ first: Landed; usual: Landed }> {
  const [first, usual] = [await land(request, true), await land(request, false)];
  expect(first.good).toEqual(usual.good);
  expect(first.bad).toEqual(usual.bad);
  expect(first.signatures).toEqual(usual.signatures);
  expect(first.leftOver).toBe(0);
  return { first, usual };
}

describe.each(["csv", "parquet"] as const)("a first load's %s delivery is read once, its runs written as it is read", (format) => {
  it("signs every partition from the runs written exactly as from the delivery itself: every type, 5,000 rows in 13 partitions", async () => {
    const connection = await opened.instance.connect();
    const file = await everyTypeFile(connection, format, 5000, 13).finally(() => connection.closeSync());
    const request: LandRequest = {
      files: [file],
      format,
      header: true,
      delimiter: ",",
      columns: [{ name: "p", type: "VARCHAR", nullable: false }, ...columns],
      partition: byP,
      signatureColumns: columns.map((c) => c.name),
    };
    const { first } = await landBothWays(request);
    expect(first.bad).toEqual([]);
    expect(first.inPass?.stage).toBeDefined();
    expect(first.signatures).toHaveLength(13);
    // The runs hold the landed rows, each value as declared.
    expect(first.staged).toEqual(first.good);
    expect(first.good).toHaveLength(5000);
  });

  /** A delivery of this CSV text in the format: the text itself, or its rows (every field text) as Parquet. */
  const delivery = async (text: string): Promise<string> => {
    const file = csv(text);
    if (format === "csv") return file;
    const connection = await opened.instance.connect();
    try {
      await connection.run(`COPY (SELECT * FROM read_csv('${file}', header = true, all_varchar = true)) TO '${file}.parquet' (FORMAT PARQUET)`);
    } finally {
      connection.closeSync();
    }
    return `${file}.parquet`;
  };

  it("a table without partition keys: one run", async () => {
    const request: LandRequest = {
      files: [await delivery("id,note\n1,a\n2,\n3,c\n")],
      format,
      header: true,
      delimiter: ",",
      columns: [{ name: "id", type: "BIGINT", nullable: false }, { name: "note", type: "VARCHAR", nullable: true }],
      partition: [],
      signatureColumns: ["id", "note"],
    };
    const { first } = await landBothWays(request);
    expect(first.inPass?.stage).toBeDefined();
    expect(first.staged).toEqual([["1", "a"], ["2", null], ["3", "c"]]);
  });

  const small = async (text: string): Promise<LandRequest> => ({
    files: [await delivery(text)],
    format,
    header: true,
    delimiter: ",",
    columns: [{ name: "id", type: "BIGINT", nullable: false }, { name: "day", type: "VARCHAR", nullable: true }],
    partition: [{ key: "d", expression: "day" }],
    signatureColumns: ["id"],
  });

  it("a delivery with any bad row, anywhere, lands the usual way, its write given up: the same good rows, bad rows and signatures", async () => {
    const good = Array.from({ length: 200 }, (_, i) => `${i},d${i % 7}`);
    const bad = [
      ["oops,d1", "column id: 'oops' is not an integer"],
      [",d2", "column id is NULL but is declared not nullable (an empty field is NULL)"],
      ["5,../up", "partition key d has the unsafe value '../up'"],
      ["6,", "partition key d is NULL"],
      ["7,d3,extra", "the line has 3 fields, but the header of this file has 2"],
      // Values that readers read back as NULL: refused as a NULL value is, whichever way the delivery is landed.
      ["8,__HIVE_DEFAULT_PARTITION__", "partition key d has the value '__HIVE_DEFAULT_PARTITION__', which readers read as a NULL partition value"],
      ["9,null", "partition key d has the value 'null', which readers read as a NULL partition value"],
      ["10,NULL", "partition key d has the value 'NULL', which readers read as a NULL partition value"],
    ] as const;
    for (const [line, reason] of bad) {
      // A Parquet row has no field too many.
      if (format === "parquet" && line.endsWith("extra")) continue;
      for (const at of [0, 100, 200]) {
        const lines = [...good.slice(0, at), line, ...good.slice(at)];
        const { first } = await landBothWays(await small(`id,day\n${lines.join("\n")}\n`));
        expect(first.inPass?.stage, line).toBeUndefined();
        // A Parquet row is numbered from 1 (its text, the values that converted, is the usual way's: compared above).
        expect(first.bad.map(([, at, why, raw]) => [at, why, format === "csv" ? raw : line]), line).toEqual([[format === "csv" ? at + 2 : at + 1, expect.stringContaining(reason), line]]);
      }
    }
  });

  it("an empty delivery lands the usual way: no partition, no run", async () => {
    const { first } = await landBothWays(await small("id,day\n"));
    expect(first.inPass?.stage).toBeUndefined();
    expect(first.good).toEqual([]);
  });
});
