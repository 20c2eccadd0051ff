/**
 * The Engine port's contract (src/engine/engine.ts), run against every adapter: a build writes one partition's run
 * into its fresh prefix and refuses rows of another partition; a query over the current runs answers exact values
 * (38-digit decimals digit for digit); the count of a run's rows; and a query that reads files instead of lake
 * tables is refused. SQL here is what both DuckDB and Trino (Athena) accept.
 */
import { describe, expect, it } from "vitest";
import type { Catalog } from "../../src/catalog/catalog.js";
import type { Engine, PartitionSnapshot, TableSnapshot } from "../../src/engine/engine.js";
import { runLocation } from "../../src/lake/layout.js";
import { makePartition, type Partition } from "../../src/model/partition.js";
import { defineTable, type TableDefinition } from "../../src/model/table.js";
import type { ObjectStore } from "../../src/store/object-store.js";
import { eachFixture, type Fixture, type FixtureFactory } from "./fixture.js";

/** A fresh engine over a lake of its own: its store, and the catalog a query through the catalog (Athena) reads. */
export interface EngineFixture extends Fixture {
  readonly engine: Engine;
  readonly store: ObjectStore;
  readonly catalog: Catalog;
  /** How a query would name the store's object `key` as a file: a local path, an s3:// URI. */
  fileName(key: string): string;
}

const TABLE = defineTable({
  name: "amounts",
  columns: [{ name: "id", type: "BIGINT" }, { name: "amount", type: "DECIMAL(38,2)" }, { name: "label", type: "VARCHAR" }],
  partitionKeys: ["day"],
});
const DAY = makePartition([["day", "2026-11-01"]]);
const RUN = "20261101T000000Z-aaaaaa";
/** 36 digits before the point: more than a double (or a 64-bit integer) holds. */
const BIG = "123456789012345678901234567890123456.78";
const SELECT =
  `SELECT id, CAST(amount AS DECIMAL(38,2)) AS amount, label FROM (VALUES (1, '${BIG}', 'one'), (2, '-0.01', 'two'), (3, '99999999999999999999999999999999999.99', NULL)) AS v(id, amount, label)`;

/** Registers the engine contract for the adapter `name`. */
export function engineContract(name: string, factory: FixtureFactory<EngineFixture>): void {
  describe(`the engine contract: ${name}`, () => {
    const fixture = eachFixture(factory);
    const engine = (): Engine => fixture().engine;

    /** Builds `select` into a fresh run of `partition`, and makes it the partition's current run. */
    const buildAndPublish = async (table: TableDefinition, partition: Partition, select: string): Promise<TableSnapshot> => {
      const { catalog } = fixture();
      const runPrefix = runLocation(catalog, table, partition, RUN);
      const result = await engine().build({ table, partition, select, runId: RUN, runPrefix, sources: [] });
      expect(result.files.length).toBeGreaterThan(0);
      for (const file of result.files) expect(file.key.startsWith(runPrefix), file.key).toBe(true);
      await catalog.createTable(table);
      await catalog.movePointers(table, [{ partition, runId: RUN, location: runPrefix, kind: "swap" }]);
      const run: PartitionSnapshot = { partition, runId: RUN, files: result.files.map((f) => f.key) };
      return { table, partitions: [run] };
    };

    it("builds a partition's run into its prefix, every file in the store, and counts its rows", async () => {
      const snapshot = await buildAndPublish(TABLE, DAY, SELECT);
      const listed = await fixture().store.list(runLocation(fixture().catalog, TABLE, DAY, RUN));
      expect(listed.map((o) => o.key).sort()).toEqual([...snapshot.partitions[0]!.files].sort());
      expect(await engine().countRows(TABLE, snapshot.partitions[0]!)).toBe(3);
    });

    it("answers a query over the current runs with exact values: 38-digit decimals digit for digit, NULL as null", async () => {
      const snapshot = await buildAndPublish(TABLE, DAY, SELECT);
      const result = await engine().query("SELECT id, amount, label, day FROM amounts ORDER BY id", [snapshot]);
      expect(result.columns).toEqual(["id", "amount", "label", "day"]);
      expect(result.rows.map((row) => row.map(String))).toEqual([
        ["1", BIG, "one", "2026-11-01"],
        ["2", "-0.01", "two", "2026-11-01"],
        ["3", "99999999999999999999999999999999999.99", "null", "2026-11-01"],
      ]);
      const sum = await engine().query("SELECT CAST(SUM(amount) AS DECIMAL(38,2)) AS total, COUNT(*) AS n FROM amounts", [snapshot]);
      expect(sum.rows.map((row) => row.map(String))).toEqual([["223456789012345678901234567890123456.76", "3"]]);
    });

    it("refuses a build whose SELECT returns rows of another partition", async () => {
      const other = `SELECT id, CAST('1.00' AS DECIMAL(38,2)) AS amount, 'x' AS label, '2026-11-02' AS day FROM (VALUES (1)) AS v(id)`;
      const runPrefix = runLocation(fixture().catalog, TABLE, DAY, RUN);
      await expect(engine().build({ table: TABLE, partition: DAY, select: other, runId: RUN, runPrefix, sources: [] })).rejects.toThrow(/2026-11-02/);
    });

    it("refuses a query that reads files rather than lake tables: the lake's metadata, a run's file by path", async () => {
      const snapshot = await buildAndPublish(TABLE, DAY, SELECT);
      const file = snapshot.partitions[0]!.files[0]!;
      const where = fixture().fileName(file);
      await expect(engine().query("SELECT * FROM read_text('_lakeswap/tables/amounts.json')", [snapshot])).rejects.toMatchObject({ code: "INVALID_INPUT" });
      await expect(engine().query(`SELECT * FROM '${where}'`, [snapshot])).rejects.toMatchObject({ code: "INVALID_INPUT" });
      await expect(engine().query("SELECT COUNT(*) AS n FROM amounts", [snapshot])).resolves.toMatchObject({ rows: [[3]] });
    });

    it("reads each partition of a table with its own key values, also a table with a column named like a folder of the runs' paths", async () => {
      // On the embedded lake a run's files sit in `…/day=…/run=<id>/`: a column `run` keeps the values its files hold.
      const named = defineTable({ name: "named", columns: [{ name: "id", type: "BIGINT" }, { name: "run", type: "VARCHAR" }], partitionKeys: ["day"] });
      for (const table of [TABLE, named]) {
        const days = ["2026-11-01", "2026-11-02", "2026-11-03"];
        const snapshots: TableSnapshot[] = [];
        for (const [index, day] of days.entries()) {
          const columns = table === named ? `'file ${index + 1}' AS run` : `CAST('1.00' AS DECIMAL(38,2)) AS amount, 'x' AS label`;
          snapshots.push(await buildAndPublish(table, makePartition([["day", day]]), `SELECT id, ${columns} FROM (VALUES (${index + 1}), (${index + 11})) AS v(id)`));
        }
        const snapshot: TableSnapshot = { table, partitions: snapshots.flatMap((s) => s.partitions) };
        const result = await engine().query(`SELECT id, ${table === named ? "run, " : ""}day FROM ${table.name} ORDER BY id`, [snapshot]);
        expect(result.rows.map((row) => row.map(String)), table.name).toEqual(
          [1, 2, 3, 11, 12, 13].map((id) => [String(id), ...(table === named ? [`file ${id % 10}`] : []), days[(id % 10) - 1]]),
        );
      }
    });
  });
}
