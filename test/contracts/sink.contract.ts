/**
 * The Sink port's contract (src/sinks/sink.ts), run against every adapter in both modes: a partition is sent whole
 * with the signature it records; a resent partition replaces its rows (a rerun of the same write changes nothing);
 * a partition the lake no longer has is emptied (upsert: its keys leave the live rows); what `prepare` returns
 * after a fresh open is what the writes recorded, so a rerun skips them; and a partition another source (lake or
 * lake table) sent is neither replaced nor removed by this one.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { DuckDBInstance, type DuckDBConnection } from "@duckdb/node-api";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { quoteLiteral } from "../../src/model/sql.js";
import { OtherSourceError, type Sink, type SinkLayout, type SinkMode, type SinkPartitionWrite } from "../../src/sinks/sink.js";
import { TEST_SOURCE } from "../support/sink-runs.js";
import { eachFixture, type Fixture, type FixtureFactory } from "./fixture.js";

/** A fresh, empty target of its own (a database), and sinks opened on it. */
export interface SinkFixture extends Fixture {
  /** Opens a sink on the target in `mode` with key `primaryKey` (upsert), hard deletes off: closed by the fixture's cleanup. */
  open(mode: SinkMode, primaryKey: readonly string[]): Sink;
  /** The target's live rows (upsert: those not marked deleted) as `id|amount|day` text, sorted. */
  rows(): Promise<string[]>;
}

const layoutOf = (mode: SinkMode): SinkLayout => ({
  lakeTable: "orders",
  source: TEST_SOURCE,
  columns: [
    { name: "id", type: "BIGINT", nullable: false },
    { name: "amount", type: "DECIMAL(38,2)", nullable: true },
    { name: "day", type: "VARCHAR", nullable: false },
  ],
  partitionKeys: ["day"],
  mode,
  primaryKey: mode === "upsert" ? ["id"] : [],
});

/** Registers the sink contract for the adapter `name`, in both modes. */
export function sinkContract(name: string, factory: FixtureFactory<SinkFixture>): void {
  describe.each(["partition_replace", "upsert"] as const)(`the sink contract: ${name}, %s`, (mode) => {
    const fixture = eachFixture(factory);
    const layout = layoutOf(mode);
    let dir = "";
    let duck: DuckDBInstance;
    let connection: DuckDBConnection;
    let runs = 0;
    beforeEach(async () => {
      dir = await mkdtemp(path.join(tmpdir(), "lakeswap-sink-contract-"));
      duck = await DuckDBInstance.create(":memory:");
      connection = await duck.connect();
    });
    afterEach(async () => {
      connection.closeSync();
      duck.closeSync();
      await rm(dir, { recursive: true, force: true });
    });
    const open = (): Sink => fixture().open(mode, layout.primaryKey);

    /** One partition's run: a Parquet file of `rows` (`id:amount`; the amount may be NULL). */
    const run = async (day: string, rows: readonly string[]): Promise<SinkPartitionWrite> => {
      runs += 1;
      const file = path.join(dir, `run-${runs}.parquet`);
      const values = rows.map((row) => `(${row.split(":")[0]}, ${row.split(":")[1]})`).join(", ");
      await connection.run(
        `COPY (SELECT CAST(id AS BIGINT) AS id, CAST(amount AS DECIMAL(38,2)) AS amount FROM (VALUES ${values}) v(id, amount)) TO ${quoteLiteral(file)} (FORMAT parquet)`,
      );
      return { partition: { keys: ["day"], values: [day] }, path: `day=${day}`, runId: `run-${runs}`, signature: `sig-${day}-${runs}`, files: [file] };
    };
    const BIG = "123456789012345678901234567890123456.78";

    it("sends partitions whole, values exact, and records each one's signature for the next prepare", async () => {
      const sink = open();
      expect(await sink.prepare(layout)).toEqual({ recorded: new Map(), others: new Map() });
      const day1 = await run("2026-11-01", ["1:10.50", `2:${BIG}`, "3:NULL"]);
      const day2 = await run("2026-11-02", ["4:1.00"]);
      expect(await sink.write(layout, day1)).toEqual({ rows: 3 });
      expect(await sink.write(layout, day2)).toEqual({ rows: 1 });
      expect(await fixture().rows()).toEqual(["1|10.50|2026-11-01", `2|${BIG}|2026-11-01`, "3|null|2026-11-01", "4|1.00|2026-11-02"]);
      await sink.close();
      expect((await open().prepare(layout)).recorded).toEqual(new Map([["day=2026-11-01", day1.signature], ["day=2026-11-02", day2.signature]]));
    });

    it("resends a partition: its rows become the new run's, the other partitions untouched; the same write again changes nothing", async () => {
      const sink = open();
      await sink.prepare(layout);
      await sink.write(layout, await run("2026-11-01", ["1:10.50", "2:2.00"]));
      await sink.write(layout, await run("2026-11-02", ["4:1.00"]));
      const again = await run("2026-11-01", ["1:11.00", "3:3.00"]);
      await sink.write(layout, again);
      // Upsert merges by key, and a key of the partition that its new run lacks leaves the live rows, as in a swap.
      const expected = ["1|11.00|2026-11-01", "3|3.00|2026-11-01", "4|1.00|2026-11-02"];
      expect(await fixture().rows()).toEqual(expected);
      await sink.write(layout, again);
      expect(await fixture().rows(), "an idempotent resend").toEqual(expected);
      expect((await open().prepare(layout)).recorded.get("day=2026-11-01")).toBe(again.signature);
    });

    it("empties a partition the lake no longer has, and forgets its signature; removing it again removes nothing", async () => {
      const sink = open();
      await sink.prepare(layout);
      await sink.write(layout, await run("2026-11-01", ["1:10.50", "2:2.00"]));
      const kept = await run("2026-11-02", ["4:1.00"]);
      await sink.write(layout, kept);
      expect(await sink.remove(layout, { keys: ["day"], values: ["2026-11-01"] }, "day=2026-11-01")).toEqual({ rows: 2 });
      expect(await fixture().rows()).toEqual(["4|1.00|2026-11-02"]);
      expect(await sink.remove(layout, { keys: ["day"], values: ["2026-11-01"] }, "day=2026-11-01")).toEqual({ rows: 0 });
      expect((await open().prepare(layout)).recorded).toEqual(new Map([["day=2026-11-02", kept.signature]]));
    });

    it("keeps the partitions of two sources (two lakes, or two tables of one lake) apart: each sends and removes only its own", async () => {
      const other: SinkLayout = { ...layout, source: { lakeId: "00000000-0000-4000-8000-000000000002", location: "/lakes/other" } };
      const renamed: SinkLayout = { ...layout, lakeTable: "orders_v2" };
      const sink = open();
      await sink.prepare(layout);
      const ours = await run("2026-11-01", ["1:10.50"]);
      await sink.write(layout, ours);
      // Another lake: the day is not its own, and its prepare says whose it is.
      const theirs = open();
      const seen = await theirs.prepare(other);
      expect(seen.recorded).toEqual(new Map());
      expect([...seen.others.keys()]).toEqual(["day=2026-11-01"]);
      expect(seen.others.get("day=2026-11-01")?.source).toMatch(/lake table orders of \/lakes\/test \(lake id 00000000-0000-4000-8000-000000000001\)/);
      expect(seen.others.get("day=2026-11-01")?.refusal).toMatch(/was sent by lake table orders of \/lakes\/test .*Give this sink a table of its own, or, to hand the partition over/);
      // Its write or removal of that day is refused whole: the first lake's rows and state stay.
      const day = { keys: ["day"], values: ["2026-11-01"] };
      await expect(theirs.write(other, await run("2026-11-01", ["1:99.00", "2:99.00"]))).rejects.toThrow(OtherSourceError);
      await expect(theirs.remove(other, day, "day=2026-11-01")).rejects.toThrow(OtherSourceError);
      await expect(open().write(renamed, await run("2026-11-01", ["7:7.00"]))).rejects.toThrow(/was sent by lake table orders of/);
      expect(await fixture().rows()).toEqual(["1|10.50|2026-11-01"]);
      // Its own day goes in beside it, and each prepare sees its own.
      const second = await run("2026-11-02", ["4:1.00"]);
      await theirs.write(other, second);
      expect(await fixture().rows()).toEqual(["1|10.50|2026-11-01", "4|1.00|2026-11-02"]);
      expect((await open().prepare(layout)).recorded).toEqual(new Map([["day=2026-11-01", ours.signature]]));
      expect((await open().prepare(other)).recorded).toEqual(new Map([["day=2026-11-02", second.signature]]));
    });
  });
}
