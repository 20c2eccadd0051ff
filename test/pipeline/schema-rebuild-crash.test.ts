import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { GetPartitionsCommand, GetTableCommand, GlueClient, type Column } from "@aws-sdk/client-glue";
import { afterAll, describe, expect, it } from "vitest";
import type { Lake } from "../../src/lake/lake.js";
import { icebirdRows } from "../support/iceberg-kit.js";
import { embeddedBackend, runCli, selectedBackends, tempDir, type awsBackend, type CliResult, type TestBackend } from "../support/lake-fixture.js";
import { expectSyncBuildsNothing, syncedOnce } from "../support/main-cli.js";

// Issue 31 item 3: `sync --rebuild-schema` (n narrowed from BIGINT to INTEGER, note dropped, and embedded amount
// renamed to total) killed at every point of the rebuild and of the build after it: a reader then reads every day
// whole under either definition, never an error; the rerun converges (embedded, a plain sync finishes a rebuild that
// moved its definition); a resend builds nothing; on Glue every partition's columns are the table's.

const DAYS = 6;
const config = (after: boolean, renamed: boolean, iceberg = false): string => {
  const amount = after && renamed ? "total: {type: 'DECIMAL(10,2)', renamed_from: amount}" : "amount: 'DECIMAL(10,2)'";
  return `datasets:
  orders:
    source: {format: csv, path: deliveries/*.csv}
${iceberg ? "    iceberg: true\n" : ""}    columns: {id: {type: BIGINT, nullable: false}, n: ${after ? "INTEGER" : "BIGINT"}, ${amount}, ${after ? "" : "note: VARCHAR, "}ts: TIMESTAMP}
    partition: {day: "strftime(ts, '%Y-%m-%d')"}
    layers:
      - name: stage
        sql: sql/stage.sql
        columns: {id: BIGINT, n: ${after ? "INTEGER" : "BIGINT"}}
`;
};

/** `id,n,amount[,note],ts` rows: the same values before and after (note only before). */
function csv(after: boolean, amountName: string): string {
  const lines: string[] = [];
  for (let day = 1; day <= DAYS; day++) {
    for (let i = 0; i < 3; i++) {
      const id = day * 10 + i;
      lines.push([id, id * 3, `${id}.5${i}`, ...(after ? [] : [`note ${id}`]), `2026-11-0${day} 1${i}:00:00`].join(","));
    }
  }
  return `${after ? `id,n,${amountName},ts` : "id,n,amount,note,ts"}\n${lines.join("\n")}\n`;
}

/** `day -> sorted "id:n:amount"` of the raw table, the amount under whichever name the definition has. */
async function rawByDay(lake: Lake): Promise<Map<string, string[]>> {
  const table = await lake.table("orders_raw");
  const amount = table.columns.some((c) => c.name === "total") ? "total" : "amount";
  const result = await lake.query(`SELECT day, id, n, ${amount} FROM orders_raw`);
  const days = new Map<string, string[]>();
  for (const [day, id, n, value] of result.rows) days.set(String(day), [...(days.get(String(day)) ?? []), `${String(id)}:${String(n)}:${String(value)}`].sort());
  return days;
}

function expected(): Map<string, string[]> {
  const days = new Map<string, string[]>();
  for (let day = 1; day <= DAYS; day++) {
    const rows = [0, 1, 2].map((i) => day * 10 + i).map((id, i) => `${id}:${id * 3}:${id}.5${i}`);
    days.set(`2026-11-0${day}`, rows.sort());
  }
  return days;
}

/** Every Glue partition's columns, as `name type`, and the table's. */
async function glueColumns(backend: TestBackend, table: string): Promise<{ table: string[]; partitions: string[][] }> {
  const aws = backend as Awaited<ReturnType<typeof awsBackend>>;
  const glue = new GlueClient(aws.services.glue.clientConfig);
  try {
    const shown = (columns: Column[] | undefined) => (columns ?? []).map((c) => `${c.Name} ${c.Type}`);
    const live = await glue.send(new GetTableCommand({ DatabaseName: aws.target.database, Name: table }));
    const partitions: string[][] = [];
    let token: string | undefined;
    do {
      const page = await glue.send(new GetPartitionsCommand({ DatabaseName: aws.target.database, TableName: table, NextToken: token }));
      partitions.push(...(page.Partitions ?? []).map((p) => shown(p.StorageDescriptor?.Columns)));
      token = page.NextToken;
    } while (token);
    return { table: shown(live.Table?.StorageDescriptor?.Columns), partitions };
  } finally {
    glue.destroy();
  }
}

/** Kill points: recorded, rewritten and placed, definition moved, a batch of pointers moved, all done, the layer's swap after. */
const POINTS = ["schema-after-record", "rebuild-after-place", "rebuild-after-definition", "rebuild-after-move", "schema-after-change", "after-swap"];

describe.each(selectedBackends())("a schema rebuild by swap, killed (%s)", (backendName) => {
  // Glue's readers match columns by name: a rename is not rebuilt by swap there.
  const renamed = backendName === "local";
  const { dir, cleanup } = tempDir("lakeswap-rebuild-crash-");
  mkdirSync(path.join(dir, "deliveries"));
  mkdirSync(path.join(dir, "sql"));
  writeFileSync(path.join(dir, "sql", "stage.sql"), "SELECT id, n FROM orders_raw WHERE day = {{ day }}\n");
  const [before, after] = [path.join(dir, "before.yaml"), path.join(dir, "after.yaml")];
  writeFileSync(before, config(false, renamed));
  writeFileSync(after, config(true, renamed));
  const [fileA, fileB] = [path.join(dir, "deliveries", "a.csv"), path.join(dir, "deliveries", "b.csv")];
  writeFileSync(fileA, csv(false, "amount"));
  writeFileSync(fileB, csv(true, renamed ? "total" : "amount"));
  const args = (backend: TestBackend, configFile: string, file: string, rebuild = true): string[] => [
    ...backend.cliArgs, "sync", "-c", configFile, "--input", file, "--json", ...(rebuild ? ["--rebuild-schema"] : []),
  ];
  const syncedA = syncedOnce(backendName, (backend) => args(backend, before, fileA, false));
  afterAll(async () => {
    await syncedA.cleanup();
    cleanup();
  });

  it.concurrent.each(POINTS)("at %s: every day whole under either definition; the rerun converges, a resend builds nothing", async (point) => {
    const backend = await syncedA.clone();
    try {
      const killed: CliResult = await runCli(args(backend, after, fileB), { ...backend.cliEnv, LAKESWAP_FAULT: `${point}:kill`, LAKESWAP_GRACE: "0" });
      expect(killed.signal, `the sync reached ${point}; stderr: ${killed.stderr}`).toBe("SIGKILL");
      const reader = await backend.open({ readOnly: true });
      let rebuilding = false;
      try {
        rebuilding = (await reader.table("orders_raw")).rebuilding !== undefined;
        expect(await rawByDay(reader)).toEqual(expected());
      } finally {
        await reader.close();
      }
      // The same command again. (Embedded, a rebuild that moved its definition is finished by it, as by any sync that
      // declares the table: there, the raw table's.)
      expect(rebuilding).toBe(renamed && ["rebuild-after-definition", "rebuild-after-move"].includes(point));
      const rerun = await runCli(args(backend, after, fileB), { ...backend.cliEnv, LAKESWAP_GRACE: "0" });
      expect(rerun.code, rerun.stderr).toBe(0);
      const lake = await backend.open();
      try {
        const table = await lake.table("orders_raw");
        expect(table.columns.map((c) => `${c.name} ${c.type}`)).toEqual(["id BIGINT", "n INTEGER", `${renamed ? "total" : "amount"} DECIMAL(10,2)`, "ts TIMESTAMP"]);
        expect(table.rebuilding).toBeUndefined();
        expect(await rawByDay(lake)).toEqual(expected());
        // Every current run was rewritten: none is from before the change.
        const runs = (await lake.snapshot({ tables: ["orders_raw"] }))[0]?.partitions.map((p) => p.runId) ?? [];
        expect(runs.filter((run) => run < (table.schemaChangedAt ?? ""))).toEqual([]);
        expect((await lake.query("SELECT count(*), sum(n) FROM orders_stage")).rows[0]?.map(String)).toEqual([String(DAYS * 3), String([...expected().values()].flat().reduce((sum, row) => sum + Number(row.split(":")[1]), 0))]);
        expect(await lake.pendingChanges()).toEqual([]);
      } finally {
        await lake.close();
      }
      if (backendName === "aws") {
        const { table, partitions } = await glueColumns(backend, "orders_raw");
        expect(table).toEqual(["id bigint", "n int", "amount decimal(10,2)", "ts timestamp"]);
        expect(partitions).toEqual(Array(DAYS).fill(table));
      }
      await expectSyncBuildsNothing(args(backend, after, fileB), backend.cliEnv);
    } finally {
      await backend.cleanup();
    }
  }, 300_000);
});

/** One icebird read at a time: each sends fetch to a server of its own lake folder while it reads (iceberg-kit.ts). */
let icebirdTurn: Promise<unknown> = Promise.resolve();

/** The current Iceberg snapshot's rows as sorted `id:n:amount` (the amount under either name), and the current schema's `name type` fields. */
async function icebergView(lakeDir: string): Promise<{ rows: string[]; fields: string[] }> {
  const read = icebirdTurn.then(() => icebirdRows(lakeDir, "orders_raw", ["id", "n", "amount", "total"]));
  icebirdTurn = read.catch(() => undefined);
  // icebird reads a decimal as a JavaScript number: shown with the column's scale.
  const rows = (await read).map((row) => row.split("|")).map(([id, n, amount, total]) => `${id}:${n}:${Number(amount === "undefined" ? total : amount).toFixed(2)}`);
  const folder = path.join(lakeDir, "orders_raw", "metadata");
  const metadata = JSON.parse(readFileSync(path.join(folder, `v${readFileSync(path.join(folder, "version-hint.text"), "utf8").trim()}.metadata.json`), "utf8")) as {
    schemas: { "schema-id": number; fields: { name: string; type: string }[] }[];
    "current-schema-id": number;
  };
  const current = metadata.schemas.find((s) => s["schema-id"] === metadata["current-schema-id"]);
  return { rows: rows.sort(), fields: (current?.fields ?? []).map((f) => `${f.name} ${f.type}`) };
}

// The same kill matrix on an `iceberg: true` raw table (embedded): a rebuild killed after its definition moved used to
// wedge the table, every command refusing to commit the Iceberg view of a half-rebuilt table. The Iceberg view keeps
// its last snapshot (the table before the rebuild) until the rerun finishes the rebuild and commits the new schema.
describe("a schema rebuild by swap of an iceberg: true table, killed (local)", () => {
  const { dir, cleanup } = tempDir("lakeswap-rebuild-crash-iceberg-");
  mkdirSync(path.join(dir, "deliveries"));
  mkdirSync(path.join(dir, "sql"));
  writeFileSync(path.join(dir, "sql", "stage.sql"), "SELECT id, n FROM orders_raw WHERE day = {{ day }}\n");
  const [before, after] = [path.join(dir, "before.yaml"), path.join(dir, "after.yaml")];
  writeFileSync(before, config(false, true, true));
  writeFileSync(after, config(true, true, true));
  const [fileA, fileB] = [path.join(dir, "deliveries", "a.csv"), path.join(dir, "deliveries", "b.csv")];
  writeFileSync(fileA, csv(false, "amount"));
  writeFileSync(fileB, csv(true, "total"));
  const args = (backend: TestBackend, configFile: string, file: string, rebuild = true): string[] => [
    ...backend.cliArgs, "sync", "-c", configFile, "--input", file, "--json", ...(rebuild ? ["--rebuild-schema"] : []),
  ];
  afterAll(cleanup);

  it.concurrent.each(POINTS)("at %s: the Hive and Iceberg views read every day whole; the rerun finishes the rebuild and commits the new schema", async (point) => {
    // Not a clone of one loaded lake: the Iceberg metadata names its files by absolute location.
    const backend = await embeddedBackend();
    try {
      const first = await runCli(args(backend, before, fileA, false), backend.cliEnv);
      expect(first.code, first.stderr).toBe(0);
      const oldFields = (await icebergView(backend.lakeDir)).fields;
      const killed = await runCli(args(backend, after, fileB), { ...backend.cliEnv, LAKESWAP_FAULT: `${point}:kill`, LAKESWAP_GRACE: "0" });
      expect(killed.signal, `the sync reached ${point}; stderr: ${killed.stderr}`).toBe("SIGKILL");
      const reader = await backend.open({ readOnly: true });
      try {
        expect(await rawByDay(reader)).toEqual(expected());
      } finally {
        await reader.close();
      }
      // The Iceberg view is still the table before the rebuild: every row, under the old schema.
      expect(await icebergView(backend.lakeDir)).toEqual({ rows: [...expected().values()].flat().sort(), fields: oldFields });
      // The same command again (it finishes a rebuild that moved its definition).
      const rerun = await runCli(args(backend, after, fileB), { ...backend.cliEnv, LAKESWAP_GRACE: "0" });
      expect(rerun.code, rerun.stderr).toBe(0);
      const lake = await backend.open();
      try {
        const table = await lake.table("orders_raw");
        expect([table.columns.map((c) => `${c.name} ${c.type}`), table.rebuilding]).toEqual([["id BIGINT", "n INTEGER", "total DECIMAL(10,2)", "ts TIMESTAMP"], undefined]);
        expect(await rawByDay(lake)).toEqual(expected());
        expect(await lake.pendingChanges()).toEqual([]);
      } finally {
        await lake.close();
      }
      expect(await icebergView(backend.lakeDir)).toEqual({ rows: [...expected().values()].flat().sort(), fields: ["id long", "n int", "total decimal(10, 2)", "ts timestamp", "day string"] });
      await expectSyncBuildsNothing(args(backend, after, fileB), backend.cliEnv);
    } finally {
      await backend.cleanup();
    }
  }, 300_000);
});
