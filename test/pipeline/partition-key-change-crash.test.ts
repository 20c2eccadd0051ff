import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { Lake } from "../../src/lake/lake.js";
import { runCli, selectedBackends, tempDir, type CliResult, type TestBackend } from "../support/lake-fixture.js";
import { expectSyncBuildsNothing, syncedOnce } from "../support/main-cli.js";

// Issue 31 item 3: `sync --rebuild-schema` that changes the partition keys of a raw table and its stage layer (day to
// month), killed at every point of it: a reader then reads every row once, under the old keys or the new, never an
// error; the rerun converges on the new layout; a resend builds nothing.

const DAYS = ["2026-10-30", "2026-10-31", "2026-11-01", "2026-11-02"];
const config = (key: "day" | "month"): string => `datasets:
  orders:
    source: {format: csv, path: deliveries/*.csv}
    columns: {id: {type: BIGINT, nullable: false}, n: BIGINT, ts: TIMESTAMP}
    partition: {${key}: "strftime(ts, '${key === "day" ? "%Y-%m-%d" : "%Y-%m"}')"}
    layers:
      - name: stage
        sql: sql/stage-${key}.sql
        columns: {id: BIGINT, n: BIGINT}
`;

function csv(): string {
  const lines = DAYS.flatMap((day, d) => [0, 1, 2].map((i) => `${(d + 1) * 10 + i},${((d + 1) * 10 + i) * 3},${day} 1${i}:00:00`));
  return `id,n,ts\n${lines.join("\n")}\n`;
}

/** `<key> id:n` of every row of a table, sorted, and the key it is partitioned by. */
async function rowsOf(lake: Lake, table: string): Promise<{ key: string; rows: string[] }> {
  const key = (await lake.table(table)).partitionKeys[0]!;
  const result = await lake.query(`SELECT ${key}, id, n FROM ${table}`);
  return { key, rows: result.rows.map(([value, id, n]) => `${String(value)} ${String(id)}:${String(n)}`).sort() };
}

function expected(key: string): string[] {
  return DAYS.flatMap((day, d) => [0, 1, 2].map((i) => `${key === "day" ? day : day.slice(0, 7)} ${(d + 1) * 10 + i}:${((d + 1) * 10 + i) * 3}`)).sort();
}

/**
 * Recorded; the old rows' first run written under the new keys; all of them written; the change made (the layouts not
 * built); every layout built, none switched; the raw table switched, its stage not yet.
 */
const POINTS = ["schema-after-record", "after-swap", "relayout-after-build", "schema-after-change", "relayout-before-switch", "relayout-after-switch"];

/**
 * A kill matrix of `sync --rebuild-schema` from the declaration `before` to `after` (of the orders and their stage): the
 * sync killed at each of `points` on a copy of a lake synced under `before`; then `killed` checks what a reader reads,
 * the rerun must end with exit 0 and `converged` check the lake, and a resend must build nothing.
 */
function killMatrix(
  title: string,
  backendName: string,
  declarations: { readonly before: string; readonly after: string },
  points: readonly string[],
  checks: { readonly killed: (reader: Lake, point: string) => Promise<void>; readonly converged: (lake: Lake) => Promise<void> },
): void {
  describe(title, () => {
    const { dir, cleanup } = tempDir("lakeswap-relayout-crash-");
    mkdirSync(path.join(dir, "deliveries"));
    mkdirSync(path.join(dir, "sql"));
    writeFileSync(path.join(dir, "sql", "stage-day.sql"), "SELECT id, n FROM orders_raw WHERE day = {{ day }}\n");
    writeFileSync(path.join(dir, "sql", "stage-month.sql"), "SELECT id, n FROM orders_raw WHERE month = {{ month }}\n");
    const [before, after] = [path.join(dir, "before.yaml"), path.join(dir, "after.yaml")];
    writeFileSync(before, declarations.before);
    writeFileSync(after, declarations.after);
    const file = path.join(dir, "deliveries", "a.csv");
    writeFileSync(file, csv());
    const args = (backend: TestBackend, configFile: string, rebuild = true): string[] => [...backend.cliArgs, "sync", "-c", configFile, "--input", file, "--json", ...(rebuild ? ["--rebuild-schema"] : [])];
    const syncedBefore = syncedOnce(backendName, (backend) => args(backend, before, false));
    afterAll(async () => {
      await syncedBefore.cleanup();
      cleanup();
    });

    it.concurrent.each(points)("at %s: every row once, as before or as after; the rerun converges, a resend builds nothing", async (point) => {
      const backend = await syncedBefore.clone();
      try {
        const killed: CliResult = await runCli(args(backend, after), { ...backend.cliEnv, LAKESWAP_FAULT: `${point}:kill`, LAKESWAP_GRACE: "0" });
        expect(killed.signal, `the sync reached ${point}; stderr: ${killed.stderr}`).toBe("SIGKILL");
        const reader = await backend.open({ readOnly: true });
        try {
          await checks.killed(reader, point);
        } finally {
          await reader.close();
        }
        const rerun = await runCli(args(backend, after), { ...backend.cliEnv, LAKESWAP_GRACE: "0" });
        expect(rerun.code, rerun.stderr).toBe(0);
        const lake = await backend.open();
        try {
          await checks.converged(lake);
          expect(await lake.pendingChanges()).toEqual([]);
        } finally {
          await lake.close();
        }
        await expectSyncBuildsNothing(args(backend, after), backend.cliEnv);
      } finally {
        await backend.cleanup();
      }
    }, 300_000);
  });
}

for (const backendName of selectedBackends()) {
  killMatrix(`a change of partition keys, killed (${backendName})`, backendName, { before: config("day"), after: config("month") }, POINTS, {
    killed: async (reader, point) => {
      for (const table of ["orders_raw", "orders_stage"]) {
        const { key, rows } = await rowsOf(reader, table);
        // Only the last point comes after a switch (the raw table's; its stage is switched next).
        expect(key).toBe(point === "relayout-after-switch" && table === "orders_raw" ? "month" : "day");
        expect(rows).toEqual(expected(key));
      }
    },
    converged: async (lake) => {
      for (const table of ["orders_raw", "orders_stage"]) expect(await rowsOf(lake, table)).toEqual({ key: "month", rows: expected("month") });
    },
  });
}

// On AWS, a rebuild Athena could not read while pointers move (a DECIMAL's scale changed) is built aside in a new layout
// of the same keys (lake/operations/rebuild-schema.ts rebuildReadably), killed at every point of it: a reader reads every
// row once under the old columns or the new, never an error; the rerun converges; a resend builds nothing.
if (selectedBackends().includes("aws")) {
  const scaled = (n: string) => config("day").replace("n: BIGINT, ts", `n: '${n}', ts`);
  /** `id:n` of every row, n with the scale the table has now. */
  const rowsNow = async (lake: Lake): Promise<{ type: string; rows: string[] }> => {
    const type = (await lake.table("orders_raw")).columns.find((c) => c.name === "n")!.type;
    const result = await lake.query("SELECT id, CAST(n AS VARCHAR) FROM orders_raw");
    return { type, rows: result.rows.map(([id, n]) => `${String(id)}:${String(n)}`).sort() };
  };
  const expectedAs = (type: string) => expected("day").map((row) => row.split(" ")[1]!).map((idN) => `${idN}${type === "DECIMAL(12,4)" ? ".0000" : ".00"}`).sort();
  const points = ["schema-after-record", "rebuild-after-place", "rebuild-after-move", "relayout-before-switch", "relayout-after-switch"];
  killMatrix("a rebuild built aside on AWS, killed", "aws", { before: scaled("DECIMAL(10,2)"), after: scaled("DECIMAL(12,4)") }, points, {
    killed: async (reader, point) => {
      const { type, rows } = await rowsNow(reader);
      // Only the last point comes after a switch (the raw table's).
      expect(type).toBe(point === "relayout-after-switch" ? "DECIMAL(12,4)" : "DECIMAL(10,2)");
      expect(rows).toEqual(expectedAs(type));
    },
    converged: async (lake) => expect(await rowsNow(lake)).toEqual({ type: "DECIMAL(12,4)", rows: expectedAs("DECIMAL(12,4)") }),
  });
}
