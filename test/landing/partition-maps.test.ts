import { DuckDBInstance } from "@duckdb/node-api";
import { describe, expect, it } from "vitest";
import { PartitionMaps } from "../../src/landing/duckdb/partition-maps.js";

// A layer's inputs.map is run over every upstream partition each time a sync plans the layer; a process remembers
// the values of a map only where they cannot change: upstream keys, constants and functions DuckDB declares
// CONSISTENT. A map with now(), random(), current_date or a column that is not an upstream key is run every time.

async function mapsOf(expressions: readonly string[], rounds: readonly (readonly string[][])[]): Promise<{ results: string[][][]; ran: string[][][] }> {
  const instance = await DuckDBInstance.create(":memory:");
  const connection = await instance.connect();
  const maps = new PartitionMaps();
  const ran: string[][][] = [];
  const results: string[][][] = [];
  try {
    for (const values of rounds) {
      const run = async (rows: readonly (readonly string[])[]): Promise<string[][]> => {
        ran.push(rows.map((row) => [...row]));
        // A stand-in for the query: the first value, marked, so that a remembered value shows where it came from.
        return rows.map((row) => expressions.map(() => `${row[0]}#${ran.length}`));
      };
      results.push(await maps.map(["day"], expressions, values, run, (read) => read(connection)));
    }
  } finally {
    connection.closeSync();
    instance.closeSync();
  }
  return { results, ran };
}

describe("inputs.map values remembered by the process", () => {
  it("maps only the upstream values a deterministic map has not seen, once it was asked for twice, and gives each row its own values", async () => {
    const day = (d: number): string[] => [`2026-11-0${d}`];
    const { results, ran } = await mapsOf(["CAST((substr(day, 1, 7)) AS VARCHAR) AS \"month\""], [[day(1)], [day(1), day(2)], [day(2), day(3), day(1)]]);
    // Asked for once, it is only run (a command's one sync does not pay for the check); then remembered.
    expect(ran).toEqual([[day(1)], [day(1), day(2)], [day(3)]]);
    expect(results[2]).toEqual([["2026-11-02#2"], ["2026-11-03#3"], ["2026-11-01#2"]]);
  });

  it.each([
    ["now()", "CAST((strftime(now(), '%Y-%m')) AS VARCHAR) AS \"month\""],
    ["random()", "CAST((day || CAST(random() AS VARCHAR)) AS VARCHAR) AS \"month\""],
    ["current_date", "CAST((strftime(current_date, '%Y-%m')) AS VARCHAR) AS \"month\""],
    ["a column that is not an upstream key", "CAST((substr(other, 1, 7)) AS VARCHAR) AS \"month\""],
  ])("runs a map with %s every time", async (_what, expression) => {
    const { ran } = await mapsOf([expression], [[["2026-11-01"]], [["2026-11-01"]], [["2026-11-01"]]]);
    expect(ran).toEqual([[["2026-11-01"]], [["2026-11-01"]], [["2026-11-01"]]]);
  });
});
