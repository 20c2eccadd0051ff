import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { DuckDBInstance } from "@duckdb/node-api";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  canonicalValue,
  chainSignature,
  finishRawSignature,
  formatG17,
  rawSignature,
  rowItems,
  rowLanes,
  signatureColumnOrder,
  splitmix64,
  transformFingerprint,
} from "../../src/model/signature.js";
import { signatureQuery } from "../../src/landing/duckdb/signature-sql.js";
import { SharedDuckDb } from "../../src/duckdb/shared-duckdb.js";
import { DuckDbLanding } from "../../src/landing/duckdb/duckdb-landing.js";
import { openDuckDb } from "../../src/duckdb/duckdb-open.js";
import type { LandRequest } from "../../src/landing/landing.js";
import { LocalStore } from "../../src/store/local-store.js";
import { EVERY_TYPE } from "../support/every-type.js";
import { REPO_ROOT, tempDir } from "../support/lake-fixture.js";
import { METADATA_FOLDERS } from "../../src/lake/layout.js";

interface Vector {
  name: string;
  columns: { name: string; type: string; nullable: boolean }[];
  rows: (string | null)[][];
  canonical: (string | null)[][];
  words: string[][];
  lanes: string[][];
  signature: string;
}

/** The test vectors published in docs/signatures.md: the tests hold code and spec together. */
function publishedVectors(): Vector[] {
  const doc = readFileSync(path.join(REPO_ROOT, "docs", "signatures.md"), "utf8");
  const blocks = [...doc.matchAll(/```json\n([\s\S]*?)```/g)];
  return JSON.parse(blocks.at(-1)![1]!) as Vector[];
}

let workspace: ReturnType<typeof tempDir>;
let engine: DuckDbLanding;
/** The same engine with signatures in the SQL form (the default form is native where the extension is built). */
let sqlEngine: DuckDbLanding;
beforeAll(() => {
  workspace = tempDir("lakeswap-signature-");
  engine = new DuckDbLanding(new LocalStore(path.join(workspace.dir, "lake"), { folders: METADATA_FOLDERS }));
  sqlEngine = new DuckDbLanding(new LocalStore(path.join(workspace.dir, "lake"), { folders: METADATA_FOLDERS }), { duckdb: new SharedDuckDb({ nativeSignatures: false }) });
});
afterAll(async () => {
  await engine.close();
  await sqlEngine.close();
  workspace.cleanup();
});

let fileCounter = 0;
function writeSource(extension: string, text: string): string {
  const file = path.join(workspace.dir, `source-${fileCounter++}.${extension}`);
  writeFileSync(file, text);
  return file;
}

/** Lands a file and returns each partition's signature (with the SQL-form engine when asked). */
async function signaturesOf(request: Omit<LandRequest, "header" | "delimiter"> & { header?: boolean }, using = engine): Promise<Record<string, string>> {
  const landed = await using.land({ header: true, delimiter: ",", ...request });
  try {
    return Object.fromEntries(landed.partitions.map((p) => [p.partition.values.join("/"), p.signature]));
  } finally {
    await using.releaseLanding(landed);
  }
}

/** A vector's rows typed as declared (text cast as landing casts it) and signed by every form the engine has. */
async function typedSignatures(vector: Vector): Promise<string[]> {
  const opened = await openDuckDb();
  const connection = await opened.instance.connect();
  try {
    await connection.run(`SET TimeZone = 'UTC'`);
    const literal = (value: string | null): string => (value === null ? "NULL" : `'${value.replaceAll("'", "''")}'`);
    const rows = vector.rows.map((row) => `(${row.map(literal).join(", ")})`).join(", ");
    const names = vector.columns.map((c) => c.name);
    await connection.run(
      `CREATE TABLE v AS SELECT 'all' AS p, ${vector.columns.map((c) => `CAST("${c.name}" AS ${c.type}) AS "${c.name}"`).join(", ")} FROM (VALUES ${rows}) t(${names.map((n) => `"${n}"`).join(", ")})`,
    );
    const signed = signatureColumnOrder(vector.columns);
    const forms = opened.signing.form === "native" ? (["sql", "native"] as const) : (["sql"] as const);
    const signatures = new Set<string>();
    for (const form of forms) {
      const [, n, upper, lower] = (await connection.runAndReadAll(signatureQuery("v", ["p"], signed, form))).getRowsJS()[0]!;
      signatures.add(finishRawSignature(signed, Number(n), BigInt(String(upper)), BigInt(String(lower))));
    }
    return [...signatures];
  } finally {
    connection.closeSync();
    opened.instance.closeSync();
  }
}

describe("v3 signatures: the published test vectors", () => {
  const vectors = publishedVectors();

  it.each(vectors.map((v) => [v.name, v] as const))("reference implementation: %s", (_name, vector) => {
    const canonical = vector.rows.map((row) => row.map((value, i) => canonicalValue(vector.columns[i]!.type, value)));
    const order = signatureColumnOrder(vector.columns.map((c, index) => ({ ...c, index })));
    const ordered = canonical.map((row) => order.map((c) => row[c.index] ?? null));
    expect(ordered).toEqual(vector.canonical);
    const items = ordered.map((row) => rowItems(order, row));
    expect(items.map((item) => [...item.words, ...item.flags].map(String))).toEqual(vector.words);
    expect(items.map((item) => rowLanes(item).map((lane) => lane.toString(16).padStart(16, "0")))).toEqual(vector.lanes);
    expect(rawSignature(vector.columns, canonical)).toBe(vector.signature);
  });

  it.each(vectors.filter((v) => v.rows.length > 0).map((v) => [v.name, v] as const))("DuckDB engine, both forms: %s", async (_name, vector) => {
    const lines = vector.rows.map((row) => JSON.stringify(Object.fromEntries(vector.columns.map((c, i) => [c.name, row[i]]))));
    const file = writeSource("jsonl", `${lines.join("\n")}\n`);
    const request = {
      files: [file],
      format: "jsonl" as const,
      columns: vector.columns,
      partition: [{ key: "p", expression: "'all'" }],
      signatureColumns: vector.columns.map((c) => c.name),
    };
    // Landing refuses a NaN and a HUGEINT wider than 38 digits (issue 25, item 8): the vectors that hold one are
    // signed from a typed table by both forms instead, and their rows are checked to be refused with the reason.
    const landed = await engine.land({ header: true, delimiter: ",", ...request });
    const refused = landed.firstRejects.map((r) => r.reason);
    await engine.releaseLanding(landed);
    if (refused.length === 0) {
      expect(await signaturesOf(request)).toEqual({ all: vector.signature });
      expect(await signaturesOf(request, sqlEngine)).toEqual({ all: vector.signature });
      expect((await sqlEngine.signing()).form).toBe("sql");
    } else {
      for (const reason of refused) expect(reason).toMatch(/ is NaN, which lakeswap does not store | is out of range for HUGEINT as lakeswap stores it /);
    }
    expect(await typedSignatures(vector)).toEqual([vector.signature]);
  });

  it("formats doubles exactly as C's %.17g (DuckDB printf agrees)", async () => {
    // 256.666656494140625 (a FLOAT) is an exact tie at 17 digits: C rounds it to even.
    const values = [1, 0.1, 1e20, 1e-5, 123456.789, -2.5e-7, 1 / 3, 5e-324, 1.7976931348623157e308, 100, 1e16, 1e17, 256.666656494140625, 0.1 + 0.2];
    const instance = await DuckDBInstance.create(":memory:");
    const connection = await instance.connect();
    const list = values.map((v) => `${v.toExponential(17)}::DOUBLE`).join(", ");
    const duck = (await connection.runAndReadAll(`SELECT printf('%.17g', v) FROM unnest([${list}]) AS t(v)`)).getRowsJS().map((r) => r[0]);
    connection.closeSync();
    instance.closeSync();
    expect(values.map(formatG17)).toEqual(duck);
  });

  it("chains derived signatures as documented", () => {
    const fingerprint = transformFingerprint("SELECT 1\n");
    expect(fingerprint).toBe("sha256:a0a22c9dfa428cdce6fb3e58a40d4052335e17e5fbe42efc2f17f9ca813be62c");
    const inputs = ["orders_raw/day=2026-11-02=v3:bb", "orders_raw/day=2026-11-01=v3:aa"];
    expect(chainSignature(inputs, fingerprint, "month=2026-11")).toBe("v3:971a27e5603210ea49a7d4c771b60a83a9ac0a1acb3e139c27356fc5de711efc");
    expect(chainSignature(inputs, transformFingerprint("SELECT 2\n"), "month=2026-11")).not.toBe(chainSignature(inputs, fingerprint, "month=2026-11"));
  });
});

describe("v3 signatures: both forms (native extension, plain SQL) and the reference implementation agree", () => {
  const columns = EVERY_TYPE;

  it("on 3,000 rows of every type in 7 partitions", async () => {
    const opened = await openDuckDb();
    const connection = await opened.instance.connect();
    try {
      await connection.run(`SET TimeZone = 'UTC'`);
      await connection.run(`CREATE TABLE t AS SELECT (range % 7)::VARCHAR AS p, ${columns.map((c) => `${c.sql} AS ${c.name}`).join(", ")} FROM range(3000)`);
      const signed = signatureColumnOrder(columns.map(({ name, type, nullable }) => ({ name, type, nullable: nullable ?? true })));
      const forms = opened.signing.form === "native" ? (["sql", "native"] as const) : (["sql"] as const);
      const results = [];
      for (const form of forms) results.push((await connection.runAndReadAll(signatureQuery("t", ["p"], signed, form))).getRowsJS());
      const rows = results[0]!;
      expect(rows).toHaveLength(7);
      for (const other of results.slice(1)) expect(other).toEqual(rows);
      for (const [p, n, upper, lower] of rows) {
        const texts = columns.map((c) => (c.type === "DOUBLE" || c.type === "FLOAT" ? c.name : `CAST(${c.name} AS VARCHAR)`)).join(", ");
        const values = (await connection.runAndReadAll(`SELECT ${texts} FROM t WHERE p = '${String(p)}'`)).getRowsJS();
        const canonical = values.map((row) => row.map((value, i) => canonicalValue(columns[i]!.type, value === null ? null : (value as number | string))));
        expect(finishRawSignature(signed, Number(n), BigInt(String(upper)), BigInt(String(lower)))).toBe(rawSignature(columns, canonical));
      }
    } finally {
      connection.closeSync();
      opened.instance.closeSync();
    }
  });

  it("on rows wider than the extension's direct arguments and than one flag word (70 columns)", async () => {
    const wide = Array.from({ length: 70 }, (_, i) => ({
      name: `c${String(i).padStart(2, "0")}`,
      type: i % 3 === 0 ? "VARCHAR" : i % 3 === 1 ? "BIGINT" : "DATE",
      sql:
        i % 3 === 0
          ? `CASE WHEN (range + ${i}) % 5 = 0 THEN NULL ELSE 'v' || ((range * ${i + 1}) % 7) END`
          : i % 3 === 1
            ? `CASE WHEN (range + ${i}) % 4 = 0 THEN NULL ELSE range * ${i + 1} - 500 END::BIGINT`
            : `CASE WHEN (range + ${i}) % 6 = 0 THEN NULL ELSE DATE '1969-12-25' + (range * ${i})::INTEGER END`,
    }));
    const opened = await openDuckDb();
    const connection = await opened.instance.connect();
    try {
      await connection.run(`CREATE TABLE w AS SELECT (range % 3)::VARCHAR AS p, ${wide.map((c) => `${c.sql} AS ${c.name}`).join(", ")} FROM range(300)`);
      const signed = signatureColumnOrder(wide.map(({ name, type }) => ({ name, type, nullable: true })));
      const sql = (await connection.runAndReadAll(signatureQuery("w", ["p"], signed, "sql"))).getRowsJS();
      if (opened.signing.form === "native") expect((await connection.runAndReadAll(signatureQuery("w", ["p"], signed, "native"))).getRowsJS()).toEqual(sql);
      for (const [p, n, upper, lower] of sql) {
        const values = (await connection.runAndReadAll(`SELECT ${wide.map((c) => `CAST(${c.name} AS VARCHAR)`).join(", ")} FROM w WHERE p = '${String(p)}'`)).getRowsJS();
        const canonical = values.map((row) => row.map((value, i) => canonicalValue(wide[i]!.type, value === null ? null : String(value))));
        expect(finishRawSignature(signed, Number(n), BigInt(String(upper)), BigInt(String(lower)))).toBe(rawSignature(wide, canonical));
      }
    } finally {
      connection.closeSync();
      opened.instance.closeSync();
    }
  });

  it("on ±infinity DATE, TIMESTAMP and TIMESTAMPTZ, nullable or not: signed apart from the epoch, and alike in both forms", async () => {
    const opened = await openDuckDb();
    const connection = await opened.instance.connect();
    try {
      // One partition per case; each holds the same id with another d/t/z, so equal signatures would mean a missed change.
      const cases = [
        ["epoch", "DATE '1970-01-01'", "TIMESTAMP '1970-01-01'", "TIMESTAMPTZ '1970-01-01 00:00:00+00'"],
        ["inf", "DATE 'infinity'", "TIMESTAMP 'infinity'", "TIMESTAMPTZ 'infinity'"],
        ["neg", "DATE '-infinity'", "TIMESTAMP '-infinity'", "TIMESTAMPTZ '-infinity'"],
        ["null", "NULL::DATE", "NULL::TIMESTAMP", "NULL::TIMESTAMPTZ"],
      ];
      const rows = cases.map(([p, d, t, z]) => `SELECT '${p}' AS p, 1::BIGINT AS id, ${d} AS d, ${t} AS t, ${z} AS z`).join(" UNION ALL ");
      await connection.run(`CREATE TABLE inf AS ${rows}`);
      for (const nullable of [true, false]) {
        const signed = signatureColumnOrder(["d", "id", "t", "z"].map((name) => ({ name, type: name === "id" ? "BIGINT" : name === "d" ? "DATE" : name === "t" ? "TIMESTAMP" : "TIMESTAMPTZ", nullable })));
        const relation = nullable ? "inf" : "inf_not_null";
        if (!nullable) await connection.run(`CREATE TABLE inf_not_null AS SELECT * FROM inf WHERE p <> 'null'`);
        const sql = (await connection.runAndReadAll(signatureQuery(relation, ["p"], signed, "sql"))).getRowsJS();
        if (opened.signing.form === "native") expect((await connection.runAndReadAll(signatureQuery(relation, ["p"], signed, "native"))).getRowsJS()).toEqual(sql);
        const signatures = Object.fromEntries(sql.map(([p, n, upper, lower]) => [String(p), finishRawSignature(signed, Number(n), BigInt(String(upper)), BigInt(String(lower)))]));
        const reference = (d: string | null, t: string | null, z: string | null) => rawSignature(signed, [[d, "1", t, z]]);
        expect(signatures.inf).toBe(reference("infinity", "infinity", "infinity"));
        expect(signatures.neg).toBe(reference("-infinity", "-infinity", "-infinity"));
        expect(signatures.epoch).toBe(reference("1970-01-01", "1970-01-01T00:00:00.000000", "1970-01-01T00:00:00.000000Z"));
        expect(new Set(Object.values(signatures)).size).toBe(nullable ? 4 : 3);
      }
    } finally {
      connection.closeSync();
      opened.instance.closeSync();
    }
  });

  it("on DOUBLE and FLOAT, row by row: edge values, thousands of random bit patterns, results of arithmetic, NaN and NULL", async () => {
    const view = new DataView(new ArrayBuffer(8));
    const double = (bits: bigint): number => (view.setBigUint64(0, bits), view.getFloat64(0));
    const float = (bits: bigint): number => (view.setUint32(0, Number(bits & 0xffffffffn)), view.getFloat32(0));
    const edgeDoubles = [
      0, -0, 5e-324, -5e-324, 2.2250738585072009e-308, -2.2250738585072014e-308, 1.7976931348623157e308, -1.7976931348623157e308,
      Infinity, -Infinity, 1, -1, 0.1, 0.10000000000000002, 0.5, 2 ** 52, 2 ** 53 + 2, 1 - 2 ** -53, 1.5 * 2 ** -1022, 2 ** 1023, -2.5, 1 / 3, NaN, null,
    ];
    const edgeFloats = [
      0, -0, Math.fround(1e-45), -Math.fround(1e-45), Math.fround(2 ** -126 - 2 ** -149), 2 ** -126, Math.fround(3.4028234663852886e38),
      -Math.fround(3.4028234663852886e38), Infinity, -Infinity, 256.666656494140625, Math.fround(0.1), -Math.fround(1 / 3), NaN, null,
    ];
    // Random bit patterns (a seeded splitmix64, so the test is the same every run), NaNs left out: they are NULL.
    const randomDoubles = splitmix64(0x64_6f75_626c_65n, 3500).map(double).filter((x) => !Number.isNaN(x)).slice(0, 3000);
    const randomFloats = splitmix64(0x66_6c6f_6174n, 3500).map(float).filter((x) => !Number.isNaN(x)).slice(0, 3000);
    const pairs: [number | null, number | null][] = [
      ...edgeDoubles.map((d, i): [number | null, number | null] => [d, edgeFloats[i % edgeFloats.length]!]),
      ...edgeFloats.map((f, i): [number | null, number | null] => [edgeDoubles[(i * 7) % edgeDoubles.length]!, f]),
      ...randomDoubles.map((d, i): [number | null, number | null] => [d, randomFloats[i]!]),
    ];
    expect(pairs.length).toBeGreaterThan(3000);

    const opened = await openDuckDb();
    const connection = await opened.instance.connect();
    try {
      await connection.run("CREATE TABLE fl (p INTEGER, d DOUBLE, f FLOAT)");
      const appender = await connection.createAppender("fl");
      pairs.forEach(([d, f], i) => {
        appender.appendInteger(i);
        if (d === null) appender.appendNull();
        else appender.appendDouble(d);
        if (f === null) appender.appendNull();
        else appender.appendFloat(f);
        appender.endRow();
      });
      appender.closeSync();
      // Doubles and floats as DuckDB's own arithmetic makes them.
      await connection.run(
        `INSERT INTO fl SELECT 100000 + range, CASE range % 5 WHEN 0 THEN range / 7.0 - 100 WHEN 1 THEN sqrt(range) * 1e-300 WHEN 2 THEN exp(range / 10.0) ` +
          `WHEN 3 THEN 1.0 / (range - 1000.5) ELSE 0.1 * range END, CASE range % 3 WHEN 0 THEN (range * 0.37 - 300)::FLOAT ` +
          `WHEN 1 THEN (1.0 / (range + 0.5))::FLOAT ELSE (range::FLOAT / 3::FLOAT) * 1e-40::FLOAT END FROM range(2000)`,
      );
      const values = (await connection.runAndReadAll("SELECT p, d, f FROM fl ORDER BY p")).getRowsJS();
      expect(values.filter(([, d]) => typeof d === "number" && Number.isNaN(d))).not.toHaveLength(0);
      const forms = opened.signing.form === "native" ? (["sql", "native"] as const) : (["sql"] as const);
      // Nullable, then declared not nullable (NULLs left out, NaNs kept: a NaN still signs as NULL, in both forms).
      for (const nullable of [true, false]) {
        const signed = [{ name: "d", type: "DOUBLE", nullable }, { name: "f", type: "FLOAT", nullable }];
        const relation = nullable ? "fl" : "fl_not_null";
        if (!nullable) await connection.run("CREATE TABLE fl_not_null AS SELECT * FROM fl WHERE d IS NOT NULL AND f IS NOT NULL");
        const results = [];
        for (const form of forms) results.push((await connection.runAndReadAll(signatureQuery(relation, ["p"], signed, form))).getRowsJS());
        for (const other of results.slice(1)) expect(other).toEqual(results[0]);
        const got = Object.fromEntries(results[0]!.map(([p, n, upper, lower]) => [Number(p), finishRawSignature(signed, Number(n), BigInt(String(upper)), BigInt(String(lower)))]));
        const kept = values.filter(([, d, f]) => nullable || (d !== null && f !== null));
        expect(Object.keys(got)).toHaveLength(kept.length);
        const expected = Object.fromEntries(
          kept.map(([p, d, f]) => [Number(p), rawSignature(signed, [[canonicalValue("DOUBLE", d as number | null), canonicalValue("FLOAT", f as number | null)]])]),
        );
        expect(got).toEqual(expected);
      }
    } finally {
      connection.closeSync();
      opened.instance.closeSync();
    }
  });

  it("signs -0 as 0 and NaN as NULL, and 0.1 apart from 0.10000000000000002, in both forms", async () => {
    const opened = await openDuckDb();
    const connection = await opened.instance.connect();
    try {
      const cases = [
        ["zero", "0.0::DOUBLE"],
        ["negative zero", "-(0.0::DOUBLE)"],
        ["nan", "'nan'::DOUBLE"],
        ["null", "NULL::DOUBLE"],
        ["a tenth", "0.1::DOUBLE"],
        ["next after a tenth", "0.10000000000000002::DOUBLE"],
      ];
      await connection.run(`CREATE TABLE z AS ${cases.map(([p, d]) => `SELECT '${p}' AS p, 1::BIGINT AS id, ${d} AS d, (${d})::FLOAT AS f`).join(" UNION ALL ")}`);
      // The table really holds a negative zero and a NaN.
      expect((await connection.runAndReadAll("SELECT signbit(d), isnan(d) FROM z WHERE p IN ('negative zero', 'nan') ORDER BY p")).getRowsJS()).toEqual([[false, true], [true, false]]);
      const signed = signatureColumnOrder([{ name: "d", type: "DOUBLE" }, { name: "f", type: "FLOAT" }, { name: "id", type: "BIGINT" }]);
      const forms = opened.signing.form === "native" ? (["sql", "native"] as const) : (["sql"] as const);
      for (const form of forms) {
        const rows = (await connection.runAndReadAll(signatureQuery("z", ["p"], signed, form))).getRowsJS();
        const s = Object.fromEntries(rows.map(([p, n, upper, lower]) => [String(p), finishRawSignature(signed, Number(n), BigInt(String(upper)), BigInt(String(lower)))]));
        expect(s["negative zero"]).toBe(s.zero);
        expect(s.nan).toBe(s.null);
        expect(s["next after a tenth"]).not.toBe(s["a tenth"]);
        expect(s.zero).not.toBe(s.null);
        expect(new Set(Object.values(s)).size).toBe(4);
        expect(s.zero).toBe(rawSignature(signed, [["0", "0", "1"]]));
        expect(s.null).toBe(rawSignature(signed, [[null, null, "1"]]));
        expect(s["a tenth"]).toBe(rawSignature(signed, [[canonicalValue("DOUBLE", 0.1), canonicalValue("FLOAT", 0.1), "1"]]));
      }
    } finally {
      connection.closeSync();
      opened.instance.closeSync();
    }
  });

  it("tells apart what a weaker row hash would mix up", () => {
    const columns = [
      { name: "a", type: "BIGINT" },
      { name: "b", type: "BIGINT" },
      { name: "s", type: "VARCHAR" },
    ];
    const sign = (rows: (string | null)[][]): string => rawSignature(columns, rows);
    const base = sign([["1", "2", "x"], ["3", "4", "y"]]);
    // Values swapped between two rows, in one column or in the text column.
    expect(sign([["1", "4", "x"], ["3", "2", "y"]])).not.toBe(base);
    expect(sign([["1", "2", "y"], ["3", "4", "x"]])).not.toBe(base);
    // Values swapped between two columns of a row.
    expect(sign([["2", "1", "x"], ["3", "4", "y"]])).not.toBe(base);
    // Both columns moved by one, or by complementary amounts.
    expect(sign([["2", "3", "x"], ["3", "4", "y"]])).not.toBe(base);
    expect(sign([["2", "1", "x"], ["2", "5", "y"]])).not.toBe(base);
    // Zero against NULL, 0 against -1, -1 against 2^32 - 1, and a value against its negation.
    expect(sign([["0", "2", "x"], ["3", "4", "y"]])).not.toBe(sign([[null, "2", "x"], ["3", "4", "y"]]));
    expect(sign([["0", "0", "x"]])).not.toBe(sign([["-1", "-1", "x"]]));
    expect(sign([["-1", "0", "x"]])).not.toBe(sign([["4294967295", "0", "x"]]));
    expect(sign([["5", "0", "x"]])).not.toBe(sign([["-5", "0", "x"]]));
    // An empty text is not NULL (in a non-nullable column, where landing keeps it).
    expect(sign([["1", "2", ""]])).not.toBe(sign([["1", "2", null]]));
    // DOUBLE and FLOAT: -0 is 0, NaN is NULL, and the next double after 0.1 is another value.
    const floats = [{ name: "d", type: "DOUBLE" }, { name: "f", type: "FLOAT" }];
    const signFloats = (d: number | null, f: number | null): string => rawSignature(floats, [[canonicalValue("DOUBLE", d), canonicalValue("FLOAT", f)]]);
    expect(signFloats(-0, -0)).toBe(signFloats(0, 0));
    expect(signFloats(NaN, NaN)).toBe(signFloats(null, null));
    expect(signFloats(0, 0)).not.toBe(signFloats(null, null));
    expect(signFloats(0.1, 1)).not.toBe(signFloats(0.10000000000000002, 1));
    expect(signFloats(1, 1)).not.toBe(signFloats(-1, 1));
    expect(signFloats(Infinity, 1)).not.toBe(signFloats(-Infinity, 1));
    expect(signFloats(1, 2)).not.toBe(signFloats(2, 1));
    // A duplicate counts; the order does not.
    expect(sign([["1", "2", "x"], ["3", "4", "y"], ["3", "4", "y"]])).not.toBe(base);
    expect(sign([["3", "4", "y"], ["1", "2", "x"]])).toBe(base);
  });
});

describe("v3 signatures: the same rows give the same signature", () => {
  const columns = [
    { name: "order_id", type: "BIGINT", nullable: false },
    { name: "amount", type: "DECIMAL(10,2)", nullable: true },
    { name: "ratio", type: "DOUBLE", nullable: true },
    { name: "note", type: "VARCHAR", nullable: true },
    { name: "order_ts", type: "TIMESTAMP", nullable: false },
    { name: "updated_at", type: "TIMESTAMP", nullable: true },
  ];
  const base = {
    format: "csv" as const,
    columns,
    partition: [{ key: "day", expression: "strftime(order_ts, '%Y-%m-%d')" }],
    signatureColumns: ["order_id", "amount", "ratio", "note", "order_ts"],
  };
  const csv = (lines: string[]) => writeSource("csv", `order_id,amount,ratio,note,order_ts,updated_at\n${lines.join("\n")}\n`);
  const rows = [
    "1,1.50,1.0,first,2026-11-01 10:00:00,2026-11-05 06:00:00",
    "2,2.00,0.25,,2026-11-01 11:00:00,2026-11-05 06:00:00",
    "3,3.10,2,third,2026-11-02 09:30:00,2026-11-05 06:00:00",
  ];

  it("whatever the source format, order, number spelling or null spelling", async () => {
    const reference = await signaturesOf({ ...base, files: [csv(rows)] });
    expect(Object.keys(reference)).toEqual(["2026-11-01", "2026-11-02"]);

    const respelled = await signaturesOf({
      ...base,
      files: [csv([
        "3,3.1,2.0,third,2026-11-02 09:30:00.000,2026-11-06 06:00:00",
        "2,2,0.25,,2026-11-01 11:00:00,2026-11-06 06:00:00",
        "1,1.5,1,first,2026-11-01T10:00:00,2026-11-06 06:00:00",
      ])],
    });
    expect(respelled).toEqual(reference);

    const jsonl = writeSource("jsonl", [
      { order_id: 2, amount: 2, ratio: 0.25, note: null, order_ts: "2026-11-01 11:00:00", updated_at: null },
      { order_id: 3, amount: "3.10", ratio: 2, note: "third", order_ts: "2026-11-02 09:30:00" },
      { order_id: 1, amount: 1.5, ratio: 1.0, note: "first", order_ts: "2026-11-01 10:00:00", updated_at: "2026-11-07 00:00:00" },
    ].map((r) => JSON.stringify(r)).join("\n"));
    expect(await signaturesOf({ ...base, format: "jsonl", files: [jsonl] })).toEqual(reference);

    const jsonlEmpty = writeSource("jsonl", [
      // A declared field that no line gives stops the load (issue 25): updated_at is given, as null, once.
      { order_id: 1, amount: 1.5, ratio: 1, note: "first", order_ts: "2026-11-01 10:00:00", updated_at: null },
      { order_id: 2, amount: 2, ratio: 0.25, note: "", order_ts: "2026-11-01 11:00:00" },
      { order_id: 3, amount: 3.1, ratio: 2, note: "third", order_ts: "2026-11-02 09:30:00" },
    ].map((r) => JSON.stringify(r)).join("\n"));
    expect(await signaturesOf({ ...base, format: "jsonl", files: [jsonlEmpty] })).toEqual(reference);

    const parquet = path.join(workspace.dir, "same.parquet");
    const instance = await DuckDBInstance.create(":memory:");
    const connection = await instance.connect();
    // Parquet with other physical types: amounts as DOUBLE, ids as INTEGER, rows in another order.
    await connection.run(
      `COPY (SELECT order_id::INTEGER AS order_id, amount::DOUBLE AS amount, ratio::FLOAT AS ratio_unused, ratio, note, order_ts, updated_at ` +
        `FROM read_csv('${csv(rows)}', header = true, types = {'amount': 'DOUBLE', 'ratio': 'DOUBLE', 'note': 'VARCHAR', 'order_ts': 'TIMESTAMP', 'updated_at': 'TIMESTAMP'}) ORDER BY order_id DESC) TO '${parquet}' (FORMAT PARQUET)`,
    );
    connection.closeSync();
    instance.closeSync();
    expect(await signaturesOf({ ...base, format: "parquet", files: [parquet] })).toEqual(reference);
  });

  it("changes with a duplicate row, a changed business value, or a changed type; not with an ignored column", async () => {
    const reference = await signaturesOf({ ...base, files: [csv(rows)] });
    const duplicated = await signaturesOf({ ...base, files: [csv([...rows, rows[0]!])] });
    expect(duplicated["2026-11-01"]).not.toBe(reference["2026-11-01"]);
    expect(duplicated["2026-11-02"]).toBe(reference["2026-11-02"]);

    const changed = await signaturesOf({ ...base, files: [csv([rows[0]!.replace("1.50", "1.51"), rows[1]!, rows[2]!])] });
    expect(changed["2026-11-01"]).not.toBe(reference["2026-11-01"]);

    const onlyUpdatedAt = await signaturesOf({ ...base, files: [csv(rows.map((r) => r.replace("2026-11-05 06:00:00", "2026-12-31 23:59:59")))] });
    expect(onlyUpdatedAt).toEqual(reference);

    const retyped = await signaturesOf({ ...base, columns: columns.map((c) => (c.name === "amount" ? { ...c, type: "DECIMAL(10,3)" } : c)), files: [csv(rows)] });
    expect(retyped["2026-11-01"]).not.toBe(reference["2026-11-01"]);

    const swapped = await signaturesOf({ ...base, files: [csv([rows[0]!.replace("first", "x"), rows[1]!.replace(",,", ",first,"), rows[2]!])] });
    expect(swapped["2026-11-01"]).not.toBe(reference["2026-11-01"]);
  });
});
