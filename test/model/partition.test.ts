import { describe, expect, it } from "vitest";
import { InvalidInputError } from "../../src/model/errors.js";
import { parsePartition, parsePartitionPath, partitionOfValues, partitionPath, partitionSpec } from "../../src/model/partition.js";

describe("partition specs", () => {
  it("parses one key and several keys, in the table's declared order", () => {
    expect(partitionPath(parsePartition("day=2026-11-01", ["day"]))).toBe("day=2026-11-01");
    const p = parsePartition("p_day=04,p_year=2025,p_month=03", ["p_year", "p_month", "p_day"]);
    expect(partitionPath(p)).toBe("p_year=2025/p_month=03/p_day=04");
    expect(partitionSpec(p)).toBe("p_year=2025,p_month=03,p_day=04");
    expect(partitionPath(parsePartitionPath("p_year=2025/p_month=03/p_day=04", ["p_year", "p_month", "p_day"]))).toBe(
      "p_year=2025/p_month=03/p_day=04",
    );
  });

  it.each([
    ["day=../x", "'../x'"],
    ["day=..", "'..'"],
    ["day=a/b", "'a/b'"],
    ["day=a\\b", "'a\\b'"],
    ["day=x'; DROP TABLE t; --", "DROP TABLE"],
    ['day=x"y', `'x"y'`],
    ["day=a\u0000b", "\\x00"],
    ["day=a\nb", "\\x0a"],
    ["day=.hidden", "'.hidden'"],
    [`day=${"9".repeat(129)}`, "129 characters"],
    ["day=-1", "'-1'"],
    ["day=-", "'-'"],
    ["day=null", "read as a NULL partition value"],
    ["day=NULL", "'NULL'"],
    ["day=Null", "'Null'"],
    ["day=__HIVE_DEFAULT_PARTITION__", "'__HIVE_DEFAULT_PARTITION__'"],
  ])("refuses %j with a message naming key, value and what is allowed", (spec, quoted) => {
    const attempt = () => parsePartition(spec, ["day"]);
    expect(attempt).toThrow(InvalidInputError);
    expect(attempt).toThrow(/for key 'day'/);
    expect(attempt).toThrow(/use letters, digits, '_', '-' and '\.' \(a '-' or '\.' not first, no '\.\.'\)/);
    try {
      attempt();
    } catch (error) {
      expect((error as Error).message).toContain(quoted);
    }
  });

  it("refuses keys that are not identifiers, and keys the table does not have", () => {
    expect(() => parsePartition("Day=1", ["day"])).toThrow(/partition key 'Day' is not allowed/);
    expect(() => parsePartition("d-ay=1", ["day"])).toThrow(/partition key 'd-ay'/);
    expect(() => parsePartition("month=11", ["day"])).toThrow(/unknown key 'month'; missing key 'day'/);
    expect(() => parsePartition("p_year=2025", ["p_year", "p_month"])).toThrow(/missing key 'p_month'/);
    expect(() => parsePartition("day=1,day=2", ["day"])).toThrow(/given twice/);
    expect(() => parsePartition("2026-11-01", ["day"])).toThrow(/key=value/);
  });
});

describe("partition keys and values fit in a path component", () => {
  it("refuses at create time a key that, with a 128-character value, makes a file name over 255 bytes", async () => {
    const { defineTable } = await import("../../src/model/table.js");
    const { MAX_PARTITION_KEY_LENGTH, MAX_PARTITION_VALUE_LENGTH } = await import("../../src/model/partition.js");
    const longest = `k${"x".repeat(MAX_PARTITION_KEY_LENGTH - 1)}`;
    const table = defineTable({ name: "t", columns: [{ name: "id", type: "BIGINT" }], partitionKeys: [longest] });
    // The longest key with the longest value still makes a pointer state file name of at most 255 bytes.
    const state = `${partitionPath(parsePartition(`${longest}=${"v".repeat(MAX_PARTITION_VALUE_LENGTH)}`, table.partitionKeys))}.json`;
    expect(Buffer.byteLength(state)).toBe(255);
    const tooLong = `${longest}x`;
    expect(() => defineTable({ name: "t", columns: [{ name: "id", type: "BIGINT" }], partitionKeys: [tooLong] })).toThrow(
      /partition key 'k.*' is 122 characters long: use at most 121, so that '<key>=<value>' with a value of up to 128 characters fits in one 255-byte file name/,
    );
  });

  it("reads a partition the lake already holds whose value readers read as NULL (written before they were refused), and refuses it as a new value", () => {
    for (const value of ["null", "NULL", "__HIVE_DEFAULT_PARTITION__"]) {
      expect(partitionPath(parsePartitionPath(`p_year=2026/p=${value}`, ["p_year", "p"]))).toBe(`p_year=2026/p=${value}`);
      expect(() => parsePartition(`p_year=2026,p=${value}`, ["p_year", "p"])).toThrow(`partition value '${value}' for key 'p' is not allowed, which readers read as a NULL partition value`);
      expect(() => partitionOfValues(["p"], [value])).toThrow(InvalidInputError);
    }
    // Only the spellings of NULL: a stored path is checked as any other otherwise.
    expect(() => parsePartitionPath("p=a..b", ["p"])).toThrow("partition value 'a..b' for key 'p' is not allowed");
    expect(partitionPath(parsePartition("p=nullable,q=a-null", ["p", "q"]))).toBe("p=nullable/q=a-null");
  });

  it("refuses a value with '..' inside", () => {
    expect(() => parsePartition("day=a..b", ["day"])).toThrow(/partition value 'a..b' for key 'day' is not allowed/);
  });
});

describe("table names", () => {
  it.each(["../../../evil/victim", "t/../x", "orders;drop", "Orders", "", "a".repeat(129)])("refuses %j with exit code 2", async (name) => {
    const { assertTableName } = await import("../../src/model/sql.js");
    let caught: unknown;
    try {
      assertTableName(name);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(InvalidInputError);
    expect((caught as InvalidInputError).exitCode).toBe(2);
    expect((caught as Error).message).toMatch(/^table name '.*' is not allowed: use a lowercase letter first/);
  });
});
