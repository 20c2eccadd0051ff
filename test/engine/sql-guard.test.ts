// Issue 9, item 7: exactly one SELECT, exactly one expression, checked by DuckDB's parser.
import { describe, expect, it } from "vitest";
import { InvalidInputError } from "../../src/model/errors.js";
import { assertOneExpression, assertOneSelect, checkAhead } from "../../src/engine/sql-guard.js";

describe("assertOneSelect", () => {
  it("gives a text parsed ahead (checkAhead) the same verdict as its own, every time: accepted or refused, under the name it is checked with", async () => {
    checkAhead("SELECT 7 AS ahead;");
    checkAhead("COPY (SELECT 42) TO '/tmp/ahead.csv'");
    checkAhead("SELECT 1; SELECT 2");
    await expect(assertOneSelect("SELECT 7 AS ahead;", "the SQL")).resolves.toBe("SELECT 7 AS ahead\n");
    await expect(assertOneSelect("SELECT 7 AS ahead;", "the SQL")).resolves.toBe("SELECT 7 AS ahead\n");
    const refused = await assertOneSelect("COPY (SELECT 42) TO '/tmp/ahead.csv'", "the SQL").catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(InvalidInputError);
    expect((refused as Error).message).toMatch(/^the SQL is not a SELECT/);
    await expect(assertOneSelect("SELECT 1; SELECT 2", "the SQL")).rejects.toThrow(/^the SQL is 2 statements/);
    // More texts parsed ahead than the cache keeps: the oldest are dropped; each call still gets its verdict.
    for (let i = 0; i < 300; i++) checkAhead(`SELECT ${i} AS n`);
    await expect(assertOneSelect("SELECT 0 AS n", "the SQL")).resolves.toBe("SELECT 0 AS n\n");
    await expect(assertOneSelect("SELECT 299 AS n", "the SQL")).resolves.toBe("SELECT 299 AS n\n");
  });

  it.each([
    ["SELECT 1 AS id", "SELECT 1 AS id\n"],
    ["SELECT 1 AS id;\n", "SELECT 1 AS id\n"],
    ["SELECT 1 AS id; -- done\n/* end */", "SELECT 1 AS id\n"],
    ["WITH a AS (SELECT 1 AS id) SELECT * FROM a -- trailing comment", "WITH a AS (SELECT 1 AS id) SELECT * FROM a -- trailing comment\n"],
    ["SELECT 1 AS id UNION ALL SELECT 2", "SELECT 1 AS id UNION ALL SELECT 2\n"],
    ["SELECT ';' AS semicolon", "SELECT ';' AS semicolon\n"],
  ])("accepts %j", async (sql, expected) => {
    await expect(assertOneSelect(sql, "the SQL")).resolves.toBe(expected);
  });

  it.each([
    // The attack: on its own it does not even parse (it only made sense spliced into lakeswap's wrapper).
    ["SELECT 1 AS id FROM range(1)) AS q LIMIT 0; COPY (SELECT 42) TO '/tmp/lakeswap-evil.csv'; SELECT * FROM (SELECT 1", /does not parse: .*syntax error at or near "\)"; nothing was run/],
    ["SELECT 1; SELECT 2", /is 2 statements/],
    ["COPY (SELECT 42) TO '/tmp/x.csv'", /is not a SELECT \('COPY \(SELECT 42\) TO '\/tmp\/x.csv''\)/],
    ["ATTACH '/tmp/x.db' AS x", /is not a SELECT/],
    ["INSTALL httpfs", /is not a SELECT/],
    ["  -- nothing\n", /is empty: give one SELECT/],
  ])("refuses %j with exit 2", async (sql, message) => {
    const error = await assertOneSelect(sql, "the SQL").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidInputError);
    expect((error as InvalidInputError).exitCode).toBe(2);
    expect((error as Error).message).toMatch(message);
  });

  it("refuses SQL that does not parse with DuckDB's message", async () => {
    const error = await assertOneSelect("SELEC 1", "the SQL").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidInputError);
    expect((error as Error).message).toMatch(/the SQL does not parse: syntax error at or near "SELEC"/);
  });
});

describe("assertOneSelect refuses file reads (issue 25, item 10)", () => {
  it.each([
    ["SELECT * FROM orders_stage s JOIN read_parquet('/lake/customers_raw/current/*.parquet') c USING (customer_id)", "read_parquet('/lake/customers_raw/current/*.parquet')"],
    ["SELECT * FROM read_csv('x.csv')", "read_csv('x.csv')"],
    ["SELECT * FROM read_csv_auto('x.csv')", "read_csv_auto('x.csv')"],
    ["SELECT * FROM read_json_auto('x.json')", "read_json_auto('x.json')"],
    ["SELECT * FROM read_json('x.json')", "read_json('x.json')"],
    ["SELECT content FROM read_text('.tmp/secret.txt')", "read_text('.tmp/secret.txt')"],
    ["SELECT content FROM read_blob('/etc/passwd')", "read_blob('/etc/passwd')"],
    ["SELECT * FROM parquet_scan(['a.parquet'])", "parquet_scan(…)"],
    ["SELECT (SELECT count(*) FROM glob('*')) AS n", "glob('*')"],
    ["WITH c AS (SELECT * FROM query_table('x.parquet')) SELECT * FROM c", "query_table('x.parquet')"],
    ["SELECT * FROM orders WHERE id IN (SELECT id FROM read_parquet('x.parquet'))", "read_parquet('x.parquet')"],
  ])("refuses %j naming %s, with exit 2 and the fix", async (sql, call) => {
    const error = await assertOneSelect(sql, "the SQL").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidInputError);
    expect((error as InvalidInputError).exitCode).toBe(2);
    expect((error as Error).message).toBe(
      `the SQL calls the table function ${call}, which reads files or the engine's state: lakeswap's SQL names lake tables, never files: read the table by its name ` +
        "(every lake table is visible by name; in a pipeline, declare it in inputs.tables so that its changes rebuild this layer); nothing was run",
    );
  });

  it.each(["SELECT * FROM 'customers.parquet'", "SELECT * FROM orders JOIN \"/lake/customers/*.parquet\" USING (id)"])("refuses a file path used as a table: %j", async (sql) => {
    await expect(assertOneSelect(sql, "the SQL")).rejects.toThrow(/^the SQL reads the file '.*' as a table \(FROM '…'\): lakeswap's SQL names lake tables, never files/);
  });

  it.each([
    "SELECT range AS id FROM range(10)",
    "SELECT * FROM generate_series(1, 3)",
    "SELECT * FROM unnest([1, 2])",
    "WITH \"a.b\" AS (SELECT 1 AS id) SELECT * FROM \"a.b\"",
    "SELECT 'read_parquet(''x'')' AS text FROM orders",
  ])("accepts %j (no file is read)", async (sql) => {
    await expect(assertOneSelect(sql, "the SQL")).resolves.toBe(`${sql}\n`);
  });
});

describe("assertOneExpression", () => {
  it.each([
    ["strftime(order_ts, '%Y-%m-%d')", "strftime(order_ts, '%Y-%m-%d')"],
    ["substr(day, 1, 7)", 'substr("day", 1, 7)'],
    ["x::VARCHAR -- comment", "CAST(x AS VARCHAR)"],
  ])("accepts %j as DuckDB prints it back", async (expression, canonical) => {
    await expect(assertOneExpression(expression, "partition expression")).resolves.toBe(canonical);
  });

  it.each([
    ["strftime(order_ts, '%Y') AS day FROM t; COPY (SELECT 42) TO '/tmp/evil.csv'; SELECT 1", /it makes 3 statements/],
    ["content FROM read_text('/etc/passwd')", /it reaches beyond one expression/],
    ["(SELECT content FROM read_text('/etc/passwd'))", /it contains a subquery/],
    ["1, 2", /it is more than one expression/],
    ["1 /* unterminated", /it does not parse/],
    ["", /it does not parse|it is empty/],
  ])("refuses %j", async (expression, message) => {
    const error = await assertOneExpression(expression, "datasets.orders.partition.day").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidInputError);
    expect((error as Error).message).toMatch(/^datasets\.orders\.partition\.day '.*' is not allowed: /);
    expect((error as Error).message).toMatch(message);
  });
});
