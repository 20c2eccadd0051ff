import { mkdirSync, renameSync, writeFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { loadPipelineConfig } from "../../src/config/pipeline-config.js";
import type { Lake } from "../../src/lake/lake.js";
import { Pipeline, type SyncReport } from "../../src/pipeline/pipeline.js";
import { openEmbeddedLake } from "../../src/open/open-lake.js";
import { openSink } from "../../src/sinks/open-sink.js";
import { tempDir, type CliResult } from "../support/lake-fixture.js";
import { runMain } from "../support/main-cli.js";
import { postgresAvailable } from "../support/postgres.js";
import { usePostgres } from "../support/shared-services.js";

/*
 * One PostgreSQL table fed by two lakes (a lake per region, each sending its own partitions). The sink mirrors the
 * lake: a partition its state table records that the lake does not have is removed from the target ("gone from the
 * lake"). It recorded no source, so the second lake's first sync removed every partition the first had sent, and
 * the two then deleted each other's rows on every sync. Now each state row records its source (the lake's id, kept
 * in the lake, and the lake table): a source writes and removes only its own partitions, and one that another
 * source sent is refused, with the way to hand it over.
 */

const postgres = usePostgres("two_lakes");

function yaml(mode: string, dataset = "events"): string {
  const key = mode === "upsert" ? `, primary_key: ${process.env.LAKESWAP_TEST_PK ?? "[id, reg]"}` : "";
  return `datasets:
  ${dataset}:
    source: {format: csv, path: "deliveries/*.csv"}
    columns:
      id: {type: BIGINT, nullable: false}
      region: {type: VARCHAR, nullable: false}
      amount: DECIMAL(10,2)
    partition: {reg: region}
    sinks:
      postgres: {url: "\${DATABASE_URL}", table: ev, mode: ${mode}${key}}
`;
}

/** A lake of its own with a config that sends to the shared target; `sync` lands a delivery of `id:amount` rows per region. */
async function lakeFeeding(database: Awaited<ReturnType<typeof postgres.database>>, mode: string, name: string, dataset?: string) {
  process.env.DATABASE_URL = database.url;
  const ws = tempDir(`lakeswap-two-lakes-${name}-`);
  postgres.onCleanup(ws.cleanup);
  mkdirSync(path.join(ws.dir, "deliveries"));
  const configFile = path.join(ws.dir, "lakeswap.yaml");
  writeFileSync(configFile, yaml(mode, dataset));
  let lakeDir = path.join(ws.dir, "lake");
  let counter = 0;
  /** Writes a delivery of `id:amount` rows per region; returns its path. */
  const deliver = (rows: Record<string, readonly string[]>): string => {
    counter += 1;
    const file = path.join(ws.dir, "deliveries", `d${counter}.csv`);
    const lines = Object.entries(rows).flatMap(([region, list]) => list.map((row) => `${row.split(":")[0]},${region},${row.split(":")[1]}`));
    writeFileSync(file, `id,region,amount\n${lines.join("\n")}\n`);
    return file;
  };
  return {
    /** Moves the lake to another folder, as a user renames it. */
    move(): void {
      const moved = path.join(ws.dir, "lake-moved");
      renameSync(lakeDir, moved);
      lakeDir = moved;
    },
    /** The same, as `lakeswap sync` (in process): its exit code and what it printed. */
    async cliSync(rows: Record<string, readonly string[]>): Promise<CliResult> {
      return runMain(["--lake", lakeDir, "sync", "-c", configFile, "--input", deliver(rows)], { DATABASE_URL: database.url });
    },
    async sync(rows: Record<string, readonly string[]>): Promise<SyncReport> {
      const file = deliver(rows);
      const lake: Lake = await openEmbeddedLake(lakeDir, { graceMs: 0, leaseWaitMs: 0 });
      try {
        return await new Pipeline(lake, loadPipelineConfig(configFile), { inputs: [file], openSink }).sync();
      } finally {
        await lake.close();
      }
    },
  };
}

/** `partition action reason`, and the gist of an error, sorted. */
function sinkLines(report: SyncReport): string[] {
  return report.sinks.map((s) => `${s.partition} ${s.action} ${s.reason}${s.error ? ` | ${/was sent by lake table (\S+)|lacks the partition column/.exec(s.error)?.[0] ?? s.error}` : ""}`).sort();
}

describe.skipIf(!postgresAvailable())("a PostgreSQL target fed by two lakes", () => {
  for (const mode of ["partition_replace", "upsert"] as const) {
    it(`${mode}: each lake sends and removes only its own partitions; one the other lake sent is refused until handed over`, async () => {
      const database = await postgres.database();
      const target = async (): Promise<string[]> =>
        (await database.query<{ line: string }>(`SELECT concat_ws(' ', reg, id, amount) AS line FROM public.ev${mode === "upsert" ? " WHERE _lakeswap_deleted_at IS NULL" : ""} ORDER BY reg, id`)).map((r) => r.line);
      const eu = await lakeFeeding(database, mode, "eu");
      const us = await lakeFeeding(database, mode, "us");

      expect(sinkLines(await eu.sync({ eu: ["1:1.00", "2:2.00"] }))).toEqual(["reg=eu sent new"]);
      // The second lake does not have reg=eu: that is not a partition gone from its lake, but the first lake's.
      expect(sinkLines(await us.sync({ us: ["1:5.00"] }))).toEqual(["reg=us sent new"]);
      expect(await target()).toEqual(["eu 1 1.00", "eu 2 2.00", "us 1 5.00"]);
      expect(sinkLines(await eu.sync({ eu: ["1:1.50", "3:3.00"] }))).toEqual(["reg=eu sent changed"]);
      expect(await target()).toEqual(["eu 1 1.50", "eu 3 3.00", "us 1 5.00"]);

      // The first lake now also has reg=us: refused (the second lake's rows stay), its own partition still in sync.
      const crossed = await eu.sync({ eu: ["1:1.50", "3:3.00"], us: ["9:9.00"] });
      expect(sinkLines(crossed)).toEqual(["reg=eu skipped unchanged", "reg=us failed another source's | was sent by lake table events_raw"]);
      expect(crossed.sinks.find((s) => s.partition === "reg=us")?.error).toMatch(
        /partition reg=us of public\.ev was sent by lake table events_raw of .*lake \(lake id [0-9a-f-]{36}\), not by lake table events_raw of .*lake \(lake id [0-9a-f-]{36}\).*DELETE FROM public\.lakeswap_state WHERE table_name = 'ev' AND partition = 'reg=us'/,
      );
      expect(await target()).toEqual(["eu 1 1.50", "eu 3 3.00", "us 1 5.00"]);
      // The second lake's own partition changes: sent as ever.
      expect(sinkLines(await us.sync({ us: ["1:5.00", "2:6.00"] }))).toEqual(["reg=us sent changed"]);

      // Handed over: its state row deleted, the partition is the first lake's from its next sync.
      await database.query("DELETE FROM public.lakeswap_state WHERE table_name = 'ev' AND partition = 'reg=us'");
      expect(sinkLines(await eu.sync({ eu: ["1:1.50", "3:3.00"], us: ["9:9.00"] }))).toEqual(["reg=eu skipped unchanged", "reg=us sent new"]);
      expect(await target()).toEqual(["eu 1 1.50", "eu 3 3.00", "us 9 9.00"]);
      // The CLI exits 7, and says the partition is another source's rather than to rerun.
      const refused = await us.cliSync({ us: ["1:5.00", "2:7.00"] });
      expect(refused.code).toBe(7);
      expect(refused.stdout).toMatch(/reg=us\s+failed\s+another source's/);
      expect(refused.stderr).toMatch(/1 sink partition\(s\) not sent: another source \(lake or lake table\) sent them, and each error says how to hand one over\n/);
      expect(refused.stderr).not.toMatch(/rerun/);
      expect(await target()).toEqual(["eu 1 1.50", "eu 3 3.00", "us 9 9.00"]);
    });
  }

  it("a lake moved to another folder keeps its partitions; a state row of a lakeswap that recorded no source is adopted", async () => {
    const database = await postgres.database();
    const lake = await lakeFeeding(database, "partition_replace", "moved");
    expect(sinkLines(await lake.sync({ eu: ["1:1.00"], us: ["2:2.00"] }))).toEqual(["reg=eu sent new", "reg=us sent new"]);
    lake.move();
    expect(sinkLines(await lake.sync({ eu: ["1:1.25"], us: ["2:2.00"] }))).toEqual(["reg=eu sent changed", "reg=us skipped unchanged"]);
    const sources = async () => database.query<{ p: string; where: string }>("SELECT partition AS p, source_location AS where FROM public.lakeswap_state ORDER BY partition");
    expect((await sources()).map((r) => [r.p, path.basename(r.where)])).toEqual([["reg=eu", "lake-moved"], ["reg=us", "lake"]]);
    // Rows an older lakeswap wrote: the first source to read them takes them all, so no other lake removes or replaces them.
    await database.query("UPDATE public.lakeswap_state SET source_lake = NULL, source_table = NULL, source_location = NULL");
    expect(sinkLines(await lake.sync({ eu: ["1:1.25"], us: ["2:2.00"] }))).toEqual(["reg=eu skipped unchanged", "reg=us skipped unchanged"]);
    expect((await sources()).map((r) => [r.p, path.basename(r.where)])).toEqual([["reg=eu", "lake-moved"], ["reg=us", "lake-moved"]]);
    const other = await lakeFeeding(database, "partition_replace", "other");
    expect(sinkLines(await other.sync({ us: ["5:5.00"] }))).toEqual(["reg=us failed another source's | was sent by lake table events_raw"]);
    expect((await database.query<{ line: string }>("SELECT concat_ws(' ', reg, id, amount) AS line FROM public.ev ORDER BY reg")).map((r) => r.line)).toEqual(["eu 1 1.25", "us 2 2.00"]);
  });

  it("two tables of one lake are two sources; an upsert target whose key lacks a partition column takes no second source", async () => {
    const database = await postgres.database();
    const orders = await lakeFeeding(database, "partition_replace", "tables", "orders");
    expect(sinkLines(await orders.sync({ eu: ["1:1.00"] }))).toEqual(["reg=eu sent new"]);
    const refunds = await lakeFeeding(database, "partition_replace", "tables-2", "refunds");
    expect(sinkLines(await refunds.sync({ eu: ["1:2.00"], us: ["2:2.00"] }))).toEqual(["reg=eu failed another source's | was sent by lake table orders_raw", "reg=us sent new"]);

    process.env.LAKESWAP_TEST_PK = "[id]";
    try {
      const upsertDb = await postgres.database();
      const first = await lakeFeeding(upsertDb, "upsert", "pk-1");
      expect(sinkLines(await first.sync({ eu: ["1:1.00"] }))).toEqual(["reg=eu sent new"]);
      const second = await lakeFeeding(upsertDb, "upsert", "pk-2");
      const refused = await second.sync({ us: ["1:9.00"] });
      expect(sinkLines(refused)).toEqual(["* failed target failed | lacks the partition column"]);
      expect(refused.sinks[0]?.error).toMatch(/key \(id\) lacks the partition column\(s\) reg: a key of lake table events_raw could overwrite that source's row of the same key\. Add reg to the sink's primary_key/);
      expect((await upsertDb.query<{ line: string }>("SELECT concat_ws(' ', reg, id, amount) AS line FROM public.ev")).map((r) => r.line)).toEqual(["eu 1 1.00"]);
    } finally {
      delete process.env.LAKESWAP_TEST_PK;
    }
  });
});
