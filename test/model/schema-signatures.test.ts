import { describe, expect, it } from "vitest";
import { canonicalValue, rawSignature, signatureColumnOrder, type SignedColumn } from "../../src/model/signature.js";
import { signatureOfRow, signatureQuery, type SignatureColumn } from "../../src/landing/duckdb/signature-sql.js";
import { openDuckDb } from "../../src/duckdb/duckdb-open.js";
import { planSchemaChange } from "../../src/model/schema-change.js";
import { defineTable } from "../../src/model/table.js";

/** Signs `relation` per partition `p` by every form this machine has; the forms must agree, and each partition's signature is returned. */
async function signedByEveryForm(setup: string[], relation: string, signed: readonly SignatureColumn[]): Promise<Map<string, string>> {
  const opened = await openDuckDb();
  const connection = await opened.instance.connect();
  try {
    for (const sql of setup) await connection.run(sql);
    const forms = opened.signing.form === "native" ? (["sql", "native"] as const) : (["sql"] as const);
    const results = [];
    for (const form of forms) results.push((await connection.runAndReadAll(signatureQuery(relation, ["p"], signatureColumnOrder(signed), form))).getRowsJS());
    for (const other of results.slice(1)) expect(other).toEqual(results[0]);
    return new Map(results[0]!.map((row) => [String(row[0]), signatureOfRow(signatureColumnOrder(signed), row, 1).signature]));
  } finally {
    connection.closeSync();
    opened.instance.closeSync();
  }
}

/**
 * The same values (`v`, beside an id) stored as table `from` of one type, then as table `to` of another (a schema
 * change), each signed by every form under its columns; `setup` makes both tables.
 */
async function signedBothWays(
  values: readonly (string | null)[],
  from: { readonly name: string; readonly type: string; readonly columns: readonly SignatureColumn[] },
  to: { readonly name: string; readonly type: string; readonly columns: readonly SignatureColumn[] },
): Promise<{ setup: string[]; before: Map<string, string>; after: Map<string, string> }> {
  const rows = values.map((v, i) => `(${i}, ${v === null ? "NULL" : `'${v}'`})`).join(", ");
  const setup = [
    `CREATE TABLE ${from.name} AS SELECT 'x' AS p, id::BIGINT AS id, CAST(v AS ${from.type}) AS v FROM (VALUES ${rows}) t(id, v)`,
    `CREATE TABLE ${to.name} AS SELECT p, id, CAST(v AS ${to.type}) AS v FROM ${from.name}`,
  ];
  return { setup, before: await signedByEveryForm(setup, from.name, from.columns), after: await signedByEveryForm(setup, to.name, to.columns) };
}

/** Each widening lakeswap applies in place, with values at the narrow type's edges (and NULL). */
const WIDENINGS: readonly { from: string; to: string; values: readonly (string | null)[] }[] = [
  { from: "TINYINT", to: "SMALLINT", values: ["-128", "127", "0", "-1", null] },
  { from: "SMALLINT", to: "INTEGER", values: ["-32768", "32767", "7", null] },
  { from: "INTEGER", to: "BIGINT", values: ["-2147483648", "2147483647", "42", null] },
  { from: "TINYINT", to: "BIGINT", values: ["-128", "127", null] },
  { from: "UTINYINT", to: "SMALLINT", values: ["0", "255", null] },
  { from: "USMALLINT", to: "UINTEGER", values: ["0", "65535", null] },
  { from: "UINTEGER", to: "BIGINT", values: ["0", "4294967295", "1", null] },
  { from: "FLOAT", to: "DOUBLE", values: ["256.666656494140625", "-0.0", "1e-45", "3.4028234663852886e38", "inf", "-inf", "nan", null] },
  { from: "DECIMAL(10,2)", to: "DECIMAL(12,2)", values: ["-99999999.99", "99999999.99", "0.50", "-0.01", null] },
  { from: "DECIMAL(4,0)", to: "DECIMAL(18,0)", values: ["-9999", "9999", "0", null] },
  { from: "DECIMAL(20,3)", to: "DECIMAL(38,3)", values: ["-99999999999999999.999", "12345678901234567.891", "0.000", null] },
];

describe("schema changes in place keep signatures honest (docs/signatures.md, \"Schema changes\")", () => {
  it.each(WIDENINGS.map((w) => [`${w.from} -> ${w.to}`, w] as const))("widening %s signs every value as before, in both forms and the reference", async (_name, widening) => {
    const narrow: SignedColumn[] = [{ name: "id", type: "BIGINT" }, { name: "v", type: widening.from }];
    const change = planSchemaChange(defineTable({ name: "t", columns: narrow, partitionKeys: ["p"] }), defineTable({ name: "t", columns: [{ name: "id", type: "BIGINT" }, { name: "v", type: widening.to }], partitionKeys: ["p"] }));
    expect(change?.changes).toEqual([`column v widened from ${widening.from} to ${widening.to}`]);
    const wide = change!.table.columns;
    expect(wide.find((c) => c.name === "v")).toEqual({ name: "v", type: widening.to, signedAs: widening.from });
    // The same values, stored as the narrow type (runs written before the change) and as the wide one (after it).
    const { setup, before, after } = await signedBothWays(widening.values, { name: "narrow", type: widening.from, columns: narrow }, { name: "wide", type: widening.to, columns: wide });
    expect(after.get("x")).toBe(before.get("x"));
    // The reference implementation agrees, from the values' canonical text under either type.
    const rows = widening.values.map((v, i) => [String(i), v === null || v === "nan" ? null : canonicalValue(widening.to, v.endsWith("inf") ? (v.startsWith("-") ? -Infinity : Infinity) : widening.to === "DOUBLE" ? Math.fround(Number(v)) : v)]);
    expect(rawSignature(wide, rows)).toBe(after.get("x"));
    // A value only the wide type holds signs apart: the signature still tells every change.
    const bigger = await signedByEveryForm([...setup, `INSERT INTO wide VALUES ('x', 99, CAST('1' AS ${widening.to}))`], "wide", wide);
    expect(bigger.get("x")).not.toBe(after.get("x"));
  });

  /** Each integer narrowing a rebuild by swap makes, with values the narrow type holds at its edges. */
  const NARROWINGS: readonly { from: string; to: string; values: readonly (string | null)[] }[] = [
    { from: "BIGINT", to: "INTEGER", values: ["-2147483648", "2147483647", "0", null] },
    { from: "BIGINT", to: "TINYINT", values: ["-128", "127", null] },
    { from: "INTEGER", to: "SMALLINT", values: ["-32768", "32767", "5", null] },
    { from: "BIGINT", to: "UTINYINT", values: ["0", "255", null] },
  ];
  it.each(NARROWINGS.map((n) => [`${n.from} -> ${n.to}`, n] as const))("a rebuild narrowing %s signs every value as before (its header keeps the type it was signed as)", async (_name, narrowing) => {
    const wide: SignedColumn[] = [{ name: "id", type: "BIGINT" }, { name: "v", type: narrowing.from }];
    const change = planSchemaChange(
      defineTable({ name: "t", columns: wide, partitionKeys: ["p"] }),
      defineTable({ name: "t", columns: [{ name: "id", type: "BIGINT" }, { name: "v", type: narrowing.to }], partitionKeys: ["p"] }),
      { rebuild: true },
    );
    expect(change?.rebuild).toBeDefined();
    const narrow = change!.table.columns;
    expect(narrow.find((c) => c.name === "v")).toEqual({ name: "v", type: narrowing.to, signedAs: narrowing.from });
    const { before, after } = await signedBothWays(narrowing.values, { name: "wide", type: narrowing.from, columns: wide }, { name: "narrow", type: narrowing.to, columns: narrow });
    expect(after.get("x")).toBe(before.get("x"));
    expect(rawSignature(narrow, narrowing.values.map((v, i) => [String(i), v === null ? null : canonicalValue(narrowing.to, v)]))).toBe(after.get("x"));
  });

  it("a column added in place changes no signature where it holds no value, and signs exactly the partitions where it does", async () => {
    const base: SignedColumn[] = [{ name: "id", type: "BIGINT" }, { name: "name", type: "VARCHAR" }];
    const change = planSchemaChange(
      defineTable({ name: "t", columns: base, partitionKeys: ["p"] }),
      defineTable({ name: "t", columns: [{ name: "id", type: "BIGINT" }, { name: "coupon", type: "VARCHAR" }, { name: "name", type: "VARCHAR" }, { name: "score", type: "DOUBLE" }], partitionKeys: ["p"] }),
    );
    expect(change?.changes).toEqual(["column coupon VARCHAR added", "column score DOUBLE added"]);
    const evolved = change!.table.columns;
    const rows = "SELECT (range % 4)::VARCHAR AS p, range::BIGINT AS id, 'n' || range AS name FROM range(400)";
    const setup = [
      `CREATE TABLE old AS ${rows}`,
      // The same rows under the new schema: NULL everywhere but coupon in partition 1 and score in partition 2 (a NaN in partition 3 is NULL).
      `CREATE TABLE new AS SELECT p, id, CASE WHEN p = '1' AND id % 3 = 0 THEN 'c' || id END AS coupon, name, CASE WHEN p = '2' THEN id / 7.0 WHEN p = '3' THEN 'nan'::DOUBLE END AS score FROM old`,
      `CREATE TABLE moved AS SELECT p, id, CASE WHEN p = '1' AND id % 3 = 0 THEN 'c' || (id + 4) END AS coupon, name, CASE WHEN p = '2' THEN id / 7.0 END AS score FROM old`,
    ];
    const before = await signedByEveryForm(setup, "old", base);
    const after = await signedByEveryForm(setup, "new", evolved);
    expect([...after.keys()]).toEqual(["0", "1", "2", "3"]);
    expect(after.get("0")).toBe(before.get("0"));
    expect(after.get("3")).toBe(before.get("3"));
    expect(after.get("1")).not.toBe(before.get("1"));
    expect(after.get("2")).not.toBe(before.get("2"));
    // Coupons moved to other rows of the same partition: a change the signature tells.
    const moved = await signedByEveryForm(setup, "moved", evolved);
    expect(moved.get("1")).not.toBe(after.get("1"));
    expect(moved.get("2")).toBe(after.get("2"));
    // The reference implementation agrees on partition 1 and 0.
    const reference = (p: number, coupon: (id: number) => string | null) =>
      rawSignature(
        evolved,
        Array.from({ length: 100 }, (_, k) => 4 * k + p).map((id) => [String(id), coupon(id), `n${id}`, null]),
      );
    expect(reference(0, () => null)).toBe(after.get("0"));
    expect(reference(1, (id) => (id % 3 === 0 ? `c${id}` : null))).toBe(after.get("1"));
  });
});
