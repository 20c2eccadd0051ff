import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { loadPipelineConfig } from "../../src/config/pipeline-config.js";
import { Pipeline } from "../../src/pipeline/pipeline.js";
import { openEmbeddedLake } from "../../src/open/open-lake.js";
import { openSink } from "../../src/sinks/open-sink.js";
import { spawnCli, tempDir } from "../support/lake-fixture.js";
import { runMain } from "../support/main-cli.js";
import { postgresAvailable } from "../support/postgres.js";
import { usePostgres } from "../support/shared-services.js";

/** Events by day, sent whole to PostgreSQL from the raw layer with partition_replace. */
const YAML = `datasets:
  events:
    source: {format: csv, path: deliveries/*.csv}
    columns:
      id: {type: BIGINT, nullable: false}
      note: VARCHAR
      event_ts: TIMESTAMP
    partition:
      day: strftime(event_ts, '%Y-%m-%d')
    sinks:
      postgres: {url: "\${DATABASE_URL}", table: events, mode: partition_replace}
`;

const postgres = usePostgres("cli");

async function workspace() {
  const { url: databaseUrl, query } = await postgres.database();
  const { dir, cleanup } = tempDir("lakeswap-sink-cli-");
  postgres.onCleanup(cleanup);
  mkdirSync(path.join(dir, "deliveries"));
  const config = path.join(dir, "lakeswap.yaml");
  writeFileSync(config, YAML);
  const lakeDir = path.join(dir, "lake");
  let counter = 0;
  const db = <Row extends pg.QueryResultRow>(sql: string): Promise<Row[]> => query<Row>(sql);
  return {
    dir, config, lakeDir, databaseUrl, db,
    /** `rows` events on 2026-11-01 and 2026-11-02, each with a note that needs CSV quoting. */
    deliver(rows: number, note: string): string {
      const file = path.join(dir, "deliveries", `d${counter++}.csv`);
      const lines = ["id,note,event_ts"];
      for (let i = 0; i < rows; i += 1) lines.push(`${i},"${note} ""${i}"", line\nbreak",2026-11-0${1 + (i % 2)} 10:00:00`);
      lines.push(`${rows},,2026-11-01 11:00:00`);
      writeFileSync(file, `${lines.join("\n")}\n`);
      return file;
    },
  };
}

describe.skipIf(!postgresAvailable())("lakeswap sync with a PostgreSQL sink", () => {
  it("reports the sink writes with --json, sends quoted text and NULL exactly, and exits 7 when the database refuses", async () => {
    const ws = await workspace();
    const env = { DATABASE_URL: ws.databaseUrl };
    const first = await runMain(["sync", "-c", ws.config, "--lake", ws.lakeDir, "--input", ws.deliver(10, "a"), "--json"], env);
    expect(first.code).toBe(0);
    const report = JSON.parse(first.stdout);
    expect(report.sinks.map((s: any) => `${s.table} ${s.partition} ${s.action} ${s.reason} ${s.rows}`)).toEqual([
      "public.events day=2026-11-01 sent new 6",
      "public.events day=2026-11-02 sent new 5",
    ]);
    const rows = await ws.db<{ id: string; note: string | null }>("SELECT id::text, note FROM events ORDER BY events.id");
    expect(rows[3]).toEqual({ id: "3", note: 'a "3", line\nbreak' });
    expect(rows[10]).toEqual({ id: "10", note: null });

    // A text rerun: nothing sent, and the report says so.
    const again = await runMain(["sync", "-c", ws.config, "--lake", ws.lakeDir, "--input", ws.deliver(10, "a")], env);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain("sinks: 0 partition(s) sent, 2 skipped (unchanged), 0 failed");

    await ws.db("ALTER TABLE events ADD CONSTRAINT short_notes CHECK (length(note) < 20)");
    const refused = await runMain(["sync", "-c", ws.config, "--lake", ws.lakeDir, "--input", ws.deliver(10, "a much longer note"), "--json"], env);
    expect(refused.code).toBe(7);
    const failed = JSON.parse(refused.stdout);
    expect(failed.error.code).toBe("PARTIAL_FAILURE");
    expect(failed.sinks.filter((s: any) => s.action === "failed")).toHaveLength(2);
    expect(failed.sinks[0].error).toMatch(/violates check constraint "short_notes"/);
    expect((await ws.db<{ n: number }>("SELECT count(*)::int AS n FROM events WHERE note LIKE 'a much%'"))[0]!.n).toBe(0);
  });

  it("a sync killed (kill -9) in the middle of a sink write leaves the partition as it was; the next sync sends it", async () => {
    const ws = await workspace();
    const env = { DATABASE_URL: ws.databaseUrl };
    expect((await runMain(["sync", "-c", ws.config, "--lake", ws.lakeDir, "--input", ws.deliver(10, "old")], env)).code).toBe(0);
    const before = await ws.db("SELECT * FROM events ORDER BY id");

    // A killed sync cannot remove its CSVs (the one being sent, the one read ahead): they land in the workspace, removed with it.
    const tmp = path.join(ws.dir, "tmp");
    mkdirSync(tmp);
    const child = spawnCli(["sync", "-c", ws.config, "--lake", ws.lakeDir, "--input", ws.deliver(400_000, "new")], { ...env, TMPDIR: tmp });
    const exited = new Promise<void>((resolve) => child.on("close", () => resolve()));
    const watcher = new pg.Client({ connectionString: ws.databaseUrl });
    await watcher.connect();
    let sawWrite = false;
    try {
      for (let i = 0; i < 3000 && child.exitCode === null; i += 1) {
        const active = await watcher.query("SELECT query FROM pg_stat_activity WHERE application_name = 'lakeswap' AND state <> 'idle' AND query LIKE 'COPY%'");
        if (active.rows.length > 0) {
          sawWrite = true;
          child.kill("SIGKILL");
          break;
        }
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      await exited;
      expect(sawWrite).toBe(true);
      // PostgreSQL notices the dropped connection and rolls its transaction back: the old rows, whole.
      for (let i = 0; i < 100; i += 1) {
        const left = await watcher.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'lakeswap'");
        if (left.rows[0].n === 0) break;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    } finally {
      await watcher.end();
    }
    expect(await ws.db("SELECT * FROM events ORDER BY id")).toEqual(before);

    const lake = await openEmbeddedLake(ws.lakeDir, { graceMs: 0, leaseWaitMs: 5_000 });
    try {
      process.env.DATABASE_URL = ws.databaseUrl;
      const report = await new Pipeline(lake, loadPipelineConfig(ws.config), { inputs: [path.join(ws.dir, "deliveries", "d1.csv")], openSink }).sync();
      expect(report.sinks.map((s) => s.action)).toEqual(["sent", "sent"]);
    } finally {
      await lake.close();
    }
    expect((await ws.db<{ n: number }>("SELECT count(*)::int AS n FROM events"))[0]!.n).toBe(400_001);
  });
});
