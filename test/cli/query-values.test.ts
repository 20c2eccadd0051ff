// Issue 25, item 9: `lakeswap query` prints the exact values DuckDB holds, never a double's approximation.
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tempDir } from "../support/lake-fixture.js";
import { runMain } from "../support/main-cli.js";

let dir: string;
let cleanup: () => void;
const cli = (...args: string[]) => runMain(["--lake", path.join(dir, "lake"), ...args]);

beforeAll(async () => {
  ({ dir, cleanup } = tempDir("lakeswap-query-values-"));
  expect((await cli("create-table", "wide", "--partition-keys", "day", "--columns", "u UBIGINT, h HUGEINT, d DECIMAL(18,2), small UBIGINT")).code).toBe(0);
  const load = await cli(
    "replace", "wide", "--partition", "day=2026-11-01", "--sql",
    "SELECT 9007199254740993::UBIGINT AS u, 99999999999999999999999999999999999999::HUGEINT AS h, 9999999999999999.99::DECIMAL(18,2) AS d, 5::UBIGINT AS small",
  );
  expect(load.code, load.stderr).toBe(0);
});
afterAll(() => cleanup());

describe("lakeswap query prints exact numbers (issue 25, item 9)", () => {
  it("prints DECIMAL, UBIGINT and 38-digit HUGEINT columns of a lake table digit for digit, in text", async () => {
    const result = await cli("query", "SELECT u, h, d, small FROM wide");
    expect(result.code, result.stderr).toBe(0);
    const row = result.stdout.trim().split("\n")[2]?.split(/\s+/);
    expect(row).toEqual(["9007199254740993", "99999999999999999999999999999999999999", "9999999999999999.99", "5"]);
  });

  it("gives them as strings in --json (integers that a double holds exactly stay numbers)", async () => {
    const result = await cli("query", "SELECT u, h, d, small FROM wide", "--json");
    expect(result.code, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual([{ u: "9007199254740993", h: "99999999999999999999999999999999999999", d: "9999999999999999.99", small: 5 }]);
  });

  it("keeps a DECIMAL's scale and a timestamp's microseconds, and gives non-finite doubles as valid JSON", async () => {
    const sql = "SELECT 1.5::DECIMAL(4,2) AS price, [0.1::DECIMAL(3,1)] AS list, TIMESTAMP '2026-01-01 12:00:00.123456' AS ts, " +
      "TIME '01:02:03.5' AS t, 'nan'::DOUBLE AS nan, 'inf'::DOUBLE AS inf, '-inf'::FLOAT AS ninf, 0.1::DOUBLE AS tenth, count(*) AS n";
    const result = await cli("query", sql, "--json");
    expect(result.code, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual([
      { price: "1.50", list: ["0.1"], ts: "2026-01-01 12:00:00.123456", t: "01:02:03.5", nan: "NaN", inf: "Infinity", ninf: "-Infinity", tenth: 0.1, n: 1 },
    ]);
  });
});
