import { DuckDBInstance } from "@duckdb/node-api";
import { TrinoSQL } from "./trino-grammar.js";
import { describe, expect, it } from "vitest";
import { rowsSelect } from "./rows-sql.js";

describe("rowsSelect", () => {
  it("gives count rows numbered from 0 in SQL that DuckDB runs and Trino's grammar accepts", async () => {
    const instance = await DuckDBInstance.create(":memory:");
    const connection = await instance.connect();
    try {
      for (const count of [0, 1, 7, 10, 120, 1000]) {
        const sql = `SELECT count(*), min(id), max(id), count(DISTINCT id) FROM (${rowsSelect(count, ", 'a' AS tag")}) AS q`;
        expect(new TrinoSQL().validate(sql)).toEqual([]);
        const [rows, min, max, distinct] = (await connection.runAndReadAll(sql)).getRowsJS()[0] ?? [];
        expect([Number(rows), Number(distinct)]).toEqual([count, count]);
        if (count > 0) expect([min, max]).toEqual([0, count - 1]);
      }
    } finally {
      connection.closeSync();
      instance.closeSync();
    }
  });
});
