import path from "node:path";
import { describe, expect, it } from "vitest";
import { PostgresSink } from "../../src/sinks/postgres/postgres-sink.js";
import type { SinkColumn, SinkLayout, SinkMode, SinkPartitionWrite } from "../../src/sinks/sink.js";
import { tempDir } from "../support/lake-fixture.js";
import { postgresAvailable } from "../support/postgres.js";
import { usePostgres } from "../support/shared-services.js";
import { sinkRuns, TEST_SOURCE } from "../support/sink-runs.js";

/*
 * Issue #31: a layer's schema changes in place (a column added anywhere, an integer and a DECIMAL widened), and the
 * sink's existing target follows it before the next partition goes in: the new column added (NULL in the rows sent
 * before, and in the rows of runs written before the change), the types widened, the partitions already there kept
 * (their state too). Never narrowed: a layer narrowed back (a rollback of its widening) is sent into the wide columns as
 * they are; another type change is refused, naming the column, both types and the fix.
 */

const postgres = usePostgres("schema_change");

const DAY = { name: "day", type: "VARCHAR", nullable: false } as const;
const BEFORE: readonly SinkColumn[] = [
  { name: "id", type: "BIGINT", nullable: false },
  { name: "n", type: "INTEGER", nullable: true },
  { name: "amount", type: "DECIMAL(10,2)", nullable: true },
  DAY,
];
const AFTER: readonly SinkColumn[] = [
  { name: "id", type: "BIGINT", nullable: false },
  { name: "coupon", type: "VARCHAR", nullable: true },
  { name: "n", type: "BIGINT", nullable: true },
  { name: "amount", type: "DECIMAL(12,2)", nullable: true },
  DAY,
];

type Target = "plain" | "partitioned" | "upsert";

function layoutOf(target: Target, columns: readonly SinkColumn[]): SinkLayout {
  const mode: SinkMode = target === "upsert" ? "upsert" : "partition_replace";
  return { lakeTable: "orders", source: TEST_SOURCE, columns, partitionKeys: ["day"], mode, primaryKey: target === "upsert" ? ["id"] : [] };
}

async function workspace(target: Target) {
  const { url, query } = await postgres.database();
  const { dir, cleanup } = tempDir("lakeswap-schema-change-");
  postgres.onCleanup(cleanup);
  const write = await sinkRuns(path.join(dir), (done) => postgres.onCleanup(done));
  /** A sink as one sync opens it (each sync opens its own). */
  const open = (): PostgresSink => {
    const sink = new PostgresSink({
      kind: "postgres",
      url,
      maskedUrl: url,
      schema: "public",
      table: "orders",
      mode: target === "upsert" ? "upsert" : "partition_replace",
      primaryKey: target === "upsert" ? ["id"] : [],
      hardDelete: false,
      partitioning: target === "plain" ? "index" : "native",
    });
    postgres.onCleanup(() => sink.close());
    return sink;
  };
  return {
    open,
    db: query,
    /** A run of one day, its file holding the SELECT's columns (as a run written with them). */
    run: (day: string, select: string): Promise<SinkPartitionWrite> => write({ keys: ["day"], values: [day] }, select),
    /** Every live row as `day id coupon n amount` (NULL as `null`). */
    async rows(): Promise<string[]> {
      const live = target === "upsert" ? "WHERE _lakeswap_deleted_at IS NULL" : "";
      const found = await query<{ line: string }>(
        `SELECT concat_ws(' ', day, id, coalesce(quote_literal(coupon), 'null'), n, amount) AS line FROM orders ${live} ORDER BY day, id`,
      );
      return found.map((row) => row.line);
    },
    /** The type of each column of the layer in the table and in each of its partitions, as `relation column type`. */
    async types(): Promise<string[]> {
      const found = await query<{ line: string }>(
        "SELECT concat_ws(' ', CASE WHEN c.oid = 'orders'::regclass THEN 'orders' ELSE 'leaf' END, a.attname, format_type(a.atttypid, a.atttypmod)) AS line " +
          "FROM (SELECT 'orders'::regclass AS relid UNION SELECT relid FROM pg_partition_tree('orders')) t JOIN pg_class c ON c.oid = t.relid " +
          "JOIN pg_attribute a ON a.attrelid = c.oid WHERE a.attname IN ('id', 'coupon', 'n', 'amount') AND NOT a.attisdropped",
      );
      return [...new Set(found.map((row) => row.line))].sort();
    },
  };
}

async function send(sink: PostgresSink, layout: SinkLayout, ...writes: SinkPartitionWrite[]): Promise<Map<string, string>> {
  const { recorded } = await sink.prepare(layout);
  for (const write of writes) await sink.write(layout, write);
  await sink.close();
  return recorded;
}

const V1_DAY1 = "SELECT 1::BIGINT AS id, 10::INTEGER AS n, 1.50::DECIMAL(10,2) AS amount UNION ALL SELECT 2, 20, 2.25";
const V1_DAY2 = "SELECT 3::BIGINT AS id, 30::INTEGER AS n, 3.00::DECIMAL(10,2) AS amount";
// Written after the change: the new column, a value beyond INTEGER and one beyond DECIMAL(10,2).
const V2_DAY3 = "SELECT 4::BIGINT AS id, 'SPRING' AS coupon, 3000000000::BIGINT AS n, 1234567890.12::DECIMAL(12,2) AS amount UNION ALL SELECT 5, '', 5, 0.01";

describe.skipIf(!postgresAvailable())("PostgreSQL sink: the target follows its layer's schema changes in place", () => {
  it.each<Target>(["plain", "partitioned", "upsert"])("%s target: a column added, an integer and a DECIMAL widened; old rows NULL, nothing lost or sent again", async (target) => {
    const ws = await workspace(target);
    const [day1, day2] = [await ws.run("2026-11-01", V1_DAY1), await ws.run("2026-11-02", V1_DAY2)];
    await send(ws.open(), layoutOf(target, BEFORE), day1, day2);
    if (target === "partitioned") expect(await ws.db("SELECT 1 FROM pg_class WHERE relname = 'orders' AND relkind = 'p'")).toHaveLength(1);

    const after = layoutOf(target, AFTER);
    const day3 = await ws.run("2026-11-03", V2_DAY3);
    // Day 1 sent again from a run written before the change (its file has no coupon), with one value changed.
    const day1Again = await ws.run("2026-11-01", V1_DAY1.replace("1.50::", "1.55::"));
    // A run that mixes files from before and after the change (an append): each read by column name.
    const [mixedOld, mixedNew] = [await ws.run("2026-11-04", "SELECT 6::BIGINT AS id, 60::INTEGER AS n, 6.00::DECIMAL(10,2) AS amount"), await ws.run("2026-11-04", V2_DAY3.replace("4::BIGINT", "7::BIGINT").replace(" 5,", " 8,"))];
    const mixed: SinkPartitionWrite = { ...mixedNew, files: [...mixedOld.files, ...mixedNew.files] };
    const recorded = await send(ws.open(), after, day3, day1Again, mixed);
    // The partitions sent before the change are still recorded: the table's rewrite (integer to bigint) kept them.
    expect([...recorded]).toEqual([
      ["day=2026-11-01", "sig-1"],
      ["day=2026-11-02", "sig-2"],
    ]);
    const types = ["id bigint", "coupon text", "n bigint", "amount numeric(12,2)"];
    expect(await ws.types()).toEqual([...types.map((t) => `orders ${t}`), ...(target === "partitioned" ? types.map((t) => `leaf ${t}`) : [])].sort());
    expect(await ws.rows()).toEqual([
      "2026-11-01 1 null 10 1.55",
      "2026-11-01 2 null 20 2.25",
      "2026-11-02 3 null 30 3.00",
      "2026-11-03 4 'SPRING' 3000000000 1234567890.12",
      "2026-11-03 5 '' 5 0.01",
      "2026-11-04 6 null 60 6.00",
      "2026-11-04 7 'SPRING' 3000000000 1234567890.12",
      "2026-11-04 8 '' 5 0.01",
    ]);

    // A rerun changes nothing, and finds every partition recorded.
    const again = await send(ws.open(), after);
    expect([...again.keys()].sort()).toEqual(["day=2026-11-01", "day=2026-11-02", "day=2026-11-03", "day=2026-11-04"]);
    expect(await ws.rows()).toHaveLength(8);
  });

  it.each<Target>(["plain", "partitioned", "upsert"])("%s target: a layer narrowed back (a rollback of its widening) is sent into the wider columns as they are; another type change is refused, naming both types and the fix", async (target) => {
    const ws = await workspace(target);
    await send(ws.open(), layoutOf(target, AFTER), await ws.run("2026-11-03", V2_DAY3));
    const before = await ws.types();
    // The layer as it was before the widening (and without coupon): its rows go into the wide columns, which stay wide.
    // (prepare found day 3 recorded, and took the layer as it is.)
    expect([...(await send(ws.open(), layoutOf(target, BEFORE), await ws.run("2026-11-02", V1_DAY2))).keys()]).toEqual(["day=2026-11-03"]);
    expect(await ws.types()).toEqual(before);
    expect(await ws.rows()).toEqual(["2026-11-02 3 null 30 3.00", "2026-11-03 4 'SPRING' 3000000000 1234567890.12", "2026-11-03 5 '' 5 0.01"]);
    // A scale change is no widening: refused, and nothing changes.
    const scale = AFTER.map((c) => (c.name === "amount" ? { ...c, type: "DECIMAL(14,4)" } : c));
    await expect(ws.open().prepare(layoutOf(target, scale))).rejects.toThrow(/column 'amount' is numeric\(12,2\) in the existing table, but lake table orders sends numeric\(14,4\); alter or drop public\.orders/);
    expect(await ws.types()).toEqual(before);
  });

  it("a column the layer no longer declares stays, with its values; one dropped by hand after partitions were sent with it is refused, not added back empty", async () => {
    const ws = await workspace("plain");
    await send(ws.open(), layoutOf("plain", AFTER), await ws.run("2026-11-03", V2_DAY3));
    // The layer without coupon (the lake refuses that change; a sink spec may still differ): the column is left alone.
    const withoutCoupon = AFTER.filter((c) => c.name !== "coupon");
    await send(ws.open(), layoutOf("plain", withoutCoupon), await ws.run("2026-11-02", V1_DAY2.replace("::INTEGER", "::BIGINT")));
    expect(await ws.rows()).toEqual(["2026-11-02 3 null 30 3.00", "2026-11-03 4 'SPRING' 3000000000 1234567890.12", "2026-11-03 5 '' 5 0.01"]);

    await ws.db("ALTER TABLE orders DROP COLUMN coupon");
    await expect(ws.open().prepare(layoutOf("plain", AFTER))).rejects.toThrow(
      /the existing table has no column 'coupon' \(text expected, from lake table orders\), though partitions were sent with it \(day=2026-11-03\): it was dropped by hand.*ALTER TABLE public\.orders ADD COLUMN coupon text; DELETE FROM public\.lakeswap_state WHERE table_name = 'orders'/,
    );
    expect(await ws.db("SELECT 1 FROM pg_attribute WHERE attrelid = 'orders'::regclass AND attname = 'coupon' AND NOT attisdropped")).toHaveLength(0);
  });

  it("state rows of an older lakeswap (their columns unknown) are dropped when a column is added: those partitions are sent again in full", async () => {
    const ws = await workspace("partitioned");
    await send(ws.open(), layoutOf("partitioned", BEFORE), await ws.run("2026-11-01", V1_DAY1), await ws.run("2026-11-02", V1_DAY2));
    await ws.db("UPDATE lakeswap_state SET columns = NULL WHERE partition = 'day=2026-11-01'");
    const recorded = await send(ws.open(), layoutOf("partitioned", AFTER));
    expect([...recorded.keys()]).toEqual(["day=2026-11-02"]);
  });
});
