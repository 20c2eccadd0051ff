import { describe, expect, it } from "vitest";
import { defineTable, isLayoutOf, layoutName, parseColumns } from "../../src/model/table.js";
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

  it("names a table's layouts after it, never after another table, and reserves their names", () => {
    const columns = [{ name: "id", type: "BIGINT" }];
    expect(layoutName("orders", "1a2b3c")).toBe("orders__layout_1a2b3c");
    expect(isLayoutOf("orders__layout_1a2b3c", "orders")).toBe(true);
    expect(isLayoutOf("orders__layout_1a2b3c", "orders_x")).toBe(false);
    expect(isLayoutOf("orders_x__layout_1a2b3c", "orders")).toBe(false);
    // Two long names alike in their first 113 characters: each has layouts of its own, of at most 128 characters.
    const [a, b] = [`${"x".repeat(120)}_a`, `${"x".repeat(120)}_b`];
    expect(layoutName(a, "1a2b3c")).toHaveLength(128);
    expect(isLayoutOf(layoutName(a, "1a2b3c"), a)).toBe(true);
    expect(isLayoutOf(layoutName(a, "1a2b3c"), b)).toBe(false);
    expect(defineTable({ name: a, columns, partitionKeys: [], layout: layoutName(a, "000000") }).layout).toBe(layoutName(a, "000000"));
    expect(() => defineTable({ name: "orders__layout_1a2b3c", columns, partitionKeys: [] })).toThrow(/table name 'orders__layout_1a2b3c' is reserved/);
    expect(() => defineTable({ name: "orders", columns, partitionKeys: [], layout: "other__layout_1a2b3c" })).toThrow(/has layout 'other__layout_1a2b3c', which is not a layout of it/);
    expect(() => defineTable({ name: "orders", columns, partitionKeys: [], layout: "../orders__layout_1a2b3c" })).toThrow(/which is not a layout of it/);
  });

  it("parses durations and refuses ambiguous ones", () => {
    expect(parseDuration("6h", "--grace")).toBe(6 * 3_600_000);
    expect(parseDuration("0", "--grace")).toBe(0);
    expect(parseDuration("90s", "--wait")).toBe(90_000);
    expect(() => parseDuration("10", "--grace")).toThrow(/--grace '10' is not a duration/);
  });
});
