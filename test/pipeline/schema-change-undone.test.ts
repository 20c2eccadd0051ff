import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { loadPipelineConfig } from "../../src/config/pipeline-config.js";
import { rollbackSync } from "../../src/lake/operations/rollback.js";
import { Pipeline, type SyncReport } from "../../src/pipeline/pipeline.js";
import { icebirdRows } from "../support/iceberg-kit.js";
import { BACKEND_FACTORIES, selectedBackends, tempDir } from "../support/lake-fixture.js";
import { runMain } from "../support/main-cli.js";
import { readCatalogFile } from "../support/plain-reader.js";

// A run written under a schema change that `rollback --sync` undid holds that change's columns (coupon VARCHAR). No
// pointer may move back to it (a partition rollback, plain or --to): a column added again later (coupon INTEGER) would
// read its values, of another column and type, in every reader. Runs written before the column was added read NULL.

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const DAYS = ["d1", "d2", "d3", "d4"];

function yaml(coupon?: string): string {
  return `datasets:
  t:
    source: {format: csv, path: deliveries/*.csv}
    iceberg: true
    columns: {id: BIGINT, amount: "DECIMAL(10,2)", ${coupon ? `coupon: ${coupon}, ` : ""}day: VARCHAR}
    partition: {p: "day"}
`;
}

/** Three rows a day; `coupon(id)` fills the coupon column where given, `cents` varies the amounts. */
function delivery(options: { coupon?: (id: number) => string; cents?: number; days?: readonly string[] } = {}): string {
  const lines = [`id,amount,${options.coupon ? "coupon," : ""}day`];
  (options.days ?? DAYS).forEach((day) => {
    for (let i = 0; i < 3; i++) {
      const id = Number(day.slice(1)) * 10 + i;
      lines.push(`${id},${id}.${String(options.cents ?? 0).padStart(2, "0")},${options.coupon ? `${options.coupon(id)},` : ""}${day}`);
    }
  });
  return `${lines.join("\n")}\n`;
}

async function workspace(backendName: string) {
  const backend = await BACKEND_FACTORIES[backendName]!();
  cleanups.push(() => backend.cleanup());
  // GC keeps every run: each one the test tries to roll back to is still there.
  const lake = await backend.open({ graceMs: 3_600_000, leaseWaitMs: 0 });
  cleanups.push(() => lake.close());
  const { dir, cleanup } = tempDir("lakeswap-undone-");
  cleanups.push(cleanup);
  mkdirSync(path.join(dir, "deliveries"));
  const configFile = path.join(dir, "lakeswap.yaml");
  let counter = 0;
  return {
    lake,
    lakeDir: "lakeDir" in backend ? (backend.lakeDir as string) : undefined,
    sync(config: string, text: string): Promise<SyncReport> {
      writeFileSync(configFile, config);
      const file = path.join(dir, "deliveries", `delivery-${counter++}.csv`);
      writeFileSync(file, text);
      return new Pipeline(lake, loadPipelineConfig(configFile), { inputs: [file] }).sync();
    },
    cli: (args: readonly string[]) => runMain([...backend.cliArgs, ...args], backend.cliEnv),
    rows: async (sql: string) => (await lake.query(sql)).rows.map((row) => row.map((v) => (v === null ? "null" : String(v))).join(" ")),
  };
}

/** The run a sync made current in each partition of the raw table. */
function runsOf(report: SyncReport): Record<string, string> {
  return Object.fromEntries(report.partitions.filter((p) => p.layer === "raw" && p.run !== undefined).map((p) => [p.partition, p.run as string]));
}

for (const backendName of selectedBackends()) {
  describe(`runs written under an undone schema change (${backendName})`, () => {
    it("are never made current again, by a partition rollback plain or --to; a column added again reads NULL in them, in every reader", async () => {
      const ws = await workspace(backendName);
      const first = runsOf(await ws.sync(yaml(), delivery()));
      const filled = await ws.sync(yaml("VARCHAR"), delivery({ coupon: (id) => `C${id}` }));
      const undone = runsOf(filled);
      expect(Object.keys(undone).sort()).toEqual(DAYS.map((d) => `p=${d}`));
      const rolled = await rollbackSync(ws.lake, filled.syncId);
      expect(rolled.schemas?.map((s) => s.action)).toEqual(["restored"]);
      // d1..d3 get a run under the restored definition; d4 stays at its first run.
      const resynced = runsOf(await ws.sync(yaml(), delivery({ cents: 5, days: ["d1", "d2", "d3"] })));
      expect(Object.keys(resynced).sort()).toEqual(["p=d1", "p=d2", "p=d3"]);

      // A plain rollback would land on the run holding coupon VARCHAR: refused, naming the run it may go to instead.
      const plain = await ws.cli(["rollback", "t_raw", "--partition", "p=d1"]);
      expect(plain.code, plain.stderr).toBe(9);
      expect(plain.stderr).toContain(`run ${undone["p=d1"]} of t_raw/p=d1 was written under the schema of t_raw that sync ${filled.syncId} set and rollback --sync undid since`);
      expect(plain.stderr).toContain(`--to ${first["p=d1"]}`);
      // --to that run too, from a partition that moved since and from one that did not.
      for (const day of ["p=d2", "p=d4"]) {
        const to = await ws.cli(["rollback", "t_raw", "--partition", day, "--to", undone[day]!]);
        expect(to.code, `${day}: ${to.stderr}`).toBe(9);
        expect(to.stderr).toMatch(/rollback --sync undid since/);
      }
      // A run written under the table's schema is still a target.
      const back = await ws.cli(["rollback", "t_raw", "--partition", "p=d3", "--to", first["p=d3"]!]);
      expect(back.code, back.stderr).toBe(0);
      expect(await ws.rows("SELECT p, sum(amount) FROM t_raw GROUP BY p ORDER BY p")).toEqual(["d1 33.15", "d2 63.15", "d3 93.00", "d4 123.00"]);

      // coupon comes back in place as another column (INTEGER), filled on d2 only; the runs of the VARCHAR one stay out of reach.
      await ws.sync(yaml("INTEGER"), delivery({ cents: 5, days: ["d2"], coupon: (id) => String(id * 100) }));
      for (const day of DAYS.map((d) => `p=${d}`)) {
        const again = await ws.cli(["rollback", "t_raw", "--partition", day, "--to", undone[day]!]);
        expect(again.code, `${day}: ${again.stderr}`).toBe(9);
      }
      const expected = ["d1 0 null", "d2 3 6300", "d3 0 null", "d4 0 null"];
      expect(await ws.rows("SELECT p, count(coupon), sum(coupon) FROM t_raw GROUP BY p ORDER BY p")).toEqual(expected);
      expect((await ws.rows("SELECT DISTINCT typeof(coupon) FROM t_raw")).map((t) => t.toLowerCase())).toEqual(["integer"]);
      if (ws.lakeDir === undefined) return;
      // The catalog file for plain readers and an Iceberg reader see the same.
      const catalog = await readCatalogFile(ws.lakeDir, "SELECT p, count(coupon), sum(coupon), typeof(max(coupon)) FROM lake.t_raw GROUP BY p ORDER BY p");
      expect(catalog.map((r) => r.map((v) => (v === null ? "null" : String(v))).join(" "))).toEqual(expected.map((line) => `${line} INTEGER`));
      const iceberg = await icebirdRows(ws.lakeDir, "t_raw", ["id", "coupon"]);
      expect(iceberg.filter((line) => !line.endsWith("|null") && !line.endsWith("|undefined"))).toEqual(["20|2000", "21|2100", "22|2200"]);
    }, 180_000);
  });
}
