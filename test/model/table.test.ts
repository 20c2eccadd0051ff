import { describe, expect, it } from "vitest";
import { defineTable, parseColumns } from "../../src/model/table.js";
import { parseDuration } from "../../src/model/duration.js";

describe("table definitions", () => {
  it("parses columns with nested commas and normalizes types", () => {
    expect(parseColumns("id BIGINT, amount decimal(10, 2), name text")).toEqual([
      { name: "id", type: "BIGINT" },
      { name: "amount", type: "DECIMAL(10,2)" },
      { name: "name", type: "VARCHAR" },
    ]);
  });

  it("refuses unsafe names and types with a message that names them", () => {
    expect(() => parseColumns("id BIGINT); DROP TABLE x; --")).toThrow(/column 'id' has type 'BIGINT\); DROP TABLE x; --'/);
    expect(() => parseColumns('"id" BIGINT')).toThrow(/column name '"id"' is not allowed/);
    expect(() => defineTable({ name: "../etc", columns: [{ name: "id", type: "BIGINT" }], partitionKeys: ["day"] })).toThrow(
      /table name '..\/etc' is not allowed/,
    );
    expect(() => defineTable({ name: "t", columns: [{ name: "day", type: "DATE" }], partitionKeys: ["day"] })).toThrow(
      /column 'day' of table 't' is a partition key/,
    );
    expect(() => defineTable({ name: "t", columns: [{ name: "id", type: "BIGINT" }], partitionKeys: ["day"], compression: "lz4" })).toThrow(
      /compression 'lz4' is not supported/,
    );
  });

  it("parses durations and refuses ambiguous ones", () => {
    expect(parseDuration("6h", "--grace")).toBe(6 * 3_600_000);
    expect(parseDuration("0", "--grace")).toBe(0);
    expect(parseDuration("90s", "--wait")).toBe(90_000);
    expect(() => parseDuration("10", "--grace")).toThrow(/--grace '10' is not a duration/);
  });
});
