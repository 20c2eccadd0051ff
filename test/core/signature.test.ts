import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { DuckDBInstance } from "@duckdb/node-api";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { canonicalRow, canonicalValue, chainSignature, formatG17, rawSignature, signatureColumnOrder, transformFingerprint } from "../../src/core/signature.js";
import { DuckDbEngine } from "../../src/engine/duckdb-engine.js";
import type { LandRequest } from "../../src/engine/engine.js";
import { LocalStore } from "../../src/store/local-store.js";
import { REPO_ROOT, tempDir } from "../support/lake-fixture.js";

interface Vector {
  name: string;
  columns: { name: string; type: string; nullable: boolean }[];
  rows: (string | null)[][];
  canonical: string[];
  signature: string;
}

/** The test vectors published in docs/signatures.md: the tests hold code and spec together. */
function publishedVectors(): Vector[] {
  const doc = readFileSync(path.join(REPO_ROOT, "docs", "signatures.md"), "utf8");
  const blocks = [...doc.matchAll(/```json\n([\s\S]*?)```/g)];
  return JSON.parse(blocks.at(-1)![1]!) as Vector[];
}

let workspace: ReturnType<typeof tempDir>;
let engine: DuckDbEngine;
beforeAll(() => {
  workspace = tempDir("lakeswap-signature-");
  engine = new DuckDbEngine(new LocalStore(path.join(workspace.dir, "lake")));
});
afterAll(async () => {
  await engine.close();
  workspace.cleanup();
});

let fileCounter = 0;
function writeSource(extension: string, text: string): string {
  const file = path.join(workspace.dir, `source-${fileCounter++}.${extension}`);
  writeFileSync(file, text);
  return file;
}

/** Lands a file and returns each partition's signature. */
async function signaturesOf(request: Omit<LandRequest, "header" | "delimiter"> & { header?: boolean }): Promise<Record<string, string>> {
  const landed = await engine.land({ header: true, delimiter: ",", ...request });
  try {
    return Object.fromEntries(landed.partitions.map((p) => [p.partition.values.join("/"), p.signature]));
  } finally {
    await engine.releaseLanding(landed);
  }
}

describe("v1 signatures: the published test vectors", () => {
  const vectors = publishedVectors();

  it.each(vectors.map((v) => [v.name, v] as const))("reference implementation: %s", (_name, vector) => {
    const canonical = vector.rows.map((row) => row.map((value, i) => canonicalValue(vector.columns[i]!.type, value)));
    const order = signatureColumnOrder(vector.columns.map((c, index) => ({ ...c, index })));
    expect(canonical.map((row) => canonicalRow(order.map((c) => row[c.index] ?? null)))).toEqual(vector.canonical);
    expect(rawSignature(vector.columns, canonical)).toBe(vector.signature);
  });

  it.each(vectors.filter((v) => v.rows.length > 0).map((v) => [v.name, v] as const))("DuckDB engine: %s", async (_name, vector) => {
    const lines = vector.rows.map((row) => JSON.stringify(Object.fromEntries(vector.columns.map((c, i) => [c.name, row[i]]))));
    const file = writeSource("jsonl", `${lines.join("\n")}\n`);
    const signatures = await signaturesOf({
      files: [file],
      format: "jsonl",
      columns: vector.columns,
      partition: [{ key: "p", expression: "'all'" }],
      signatureColumns: vector.columns.map((c) => c.name),
    });
    expect(signatures).toEqual({ all: vector.signature });
  });

  it("formats doubles exactly as C's %.17g (DuckDB printf agrees)", async () => {
    const values = [1, 0.1, 1e20, 1e-5, 123456.789, -2.5e-7, 1 / 3, 5e-324, 1.7976931348623157e308, 100, 1e16, 1e17];
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
    const inputs = ["orders_raw/day=2026-11-02=v1:bb", "orders_raw/day=2026-11-01=v1:aa"];
    expect(chainSignature(inputs, fingerprint, "month=2026-11")).toBe("v1:a40ace6cca09bfb3c76caeeb7f5be3be1abe79196a3891d7199138c2fa6c587f");
    expect(chainSignature(inputs, transformFingerprint("SELECT 2\n"), "month=2026-11")).not.toBe(chainSignature(inputs, fingerprint, "month=2026-11"));
  });
});

describe("v1 signatures: the same rows give the same signature", () => {
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
      { order_id: 1, amount: 1.5, ratio: 1, note: "first", order_ts: "2026-11-01 10:00:00" },
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
