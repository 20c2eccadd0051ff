import { describe, expect, it } from "vitest";
import { InvalidInputError } from "../../src/core/errors.js";
import { parsePartition, parsePartitionPath, partitionPath, partitionSpec } from "../../src/core/partition.js";

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
  ])("refuses %j with a message naming key, value and what is allowed", (spec, quoted) => {
    const attempt = () => parsePartition(spec, ["day"]);
    expect(attempt).toThrow(InvalidInputError);
    expect(attempt).toThrow(/for key 'day'/);
    expect(attempt).toThrow(/use letters, digits, '-', '_', '\.'/);
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
