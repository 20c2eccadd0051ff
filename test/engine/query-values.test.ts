import * as duckdbModule from "@duckdb/node-api";
import { DuckDBInstance, DuckDBTimestampTZValue } from "@duckdb/node-api";
import { afterAll, describe, expect, it } from "vitest";
import { exactValueConverter } from "../../src/duckdb/duckdb-values.js";

// What `lakeswap query` prints is what DuckDB holds: found by QA, a TIMESTAMPTZ was written in the machine's zone (its
// date then another than the UTC day its partition names) and DATE or TIMESTAMP infinity as a date in year 5881580.

const instance = await DuckDBInstance.create(":memory:");
const connection = await instance.connect();
afterAll(() => {
  connection.closeSync();
  instance.closeSync();
});

async function printed(sql: string): Promise<unknown[]> {
  const reader = await connection.runAndReadAll(sql);
  return reader.convertRows(exactValueConverter(duckdbModule))[0] ?? [];
}

describe("query values", () => {
  it("a TIMESTAMPTZ is written in UTC on a machine in another zone", async () => {
    // As the module finds it on a machine at UTC+7 (it reads the zone once, when it loads).
    DuckDBTimestampTZValue.timezoneOffsetInMinutes = 7 * 60;
    expect(await printed("SET TimeZone = 'UTC'; SELECT TIMESTAMPTZ '2026-11-01 23:30:00+00', strftime(TIMESTAMPTZ '2026-11-01 23:30:00+00', '%Y-%m-%d')")).toEqual([
      "2026-11-01 23:30:00+00",
      "2026-11-01",
    ]);
  });

  it("infinity and -infinity of every time type are written as such; finite values as DuckDB writes them", async () => {
    const types = ["DATE", "TIMESTAMP", "TIMESTAMPTZ", "TIMESTAMP_S", "TIMESTAMP_MS", "TIMESTAMP_NS"];
    const infinite = types.flatMap((type) => [`'infinity'::${type}`, `'-infinity'::${type}`]).join(", ");
    expect(await printed(`SELECT ${infinite}`)).toEqual(types.flatMap(() => ["infinity", "-infinity"]));
    expect(await printed("SELECT DATE '2026-01-02', TIMESTAMP '2026-01-02 03:04:05.123456', TIMESTAMP_NS '2026-01-01 00:00:00.123456789', DATE '0044-03-15 (BC)'")).toEqual([
      "2026-01-02",
      "2026-01-02 03:04:05.123456",
      "2026-01-01 00:00:00.123456789",
      "0044-03-15 (BC)",
    ]);
  });
});
