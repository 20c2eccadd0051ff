import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { DuckDBInstance } from "@duckdb/node-api";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadPipelineConfig } from "../../src/config/pipeline-config.js";
import type { Lake } from "../../src/lake/lake.js";
import { readSchemaHistory } from "../../src/lake/operations/history.js";
import { rollbackSync } from "../../src/lake/operations/rollback.js";
import { listSyncs } from "../../src/lake/operations/syncs.js";
import { partitionPath } from "../../src/model/partition.js";
import { Pipeline } from "../../src/pipeline/pipeline.js";
import { embeddedBackend, tempDir } from "../support/lake-fixture.js";

// Issue 31 item 3, as a property over random tables and random changes: whatever columns a table has and however
// `sync --rebuild-schema` changes them (each column kept, dropped, renamed, or retyped to any of the types below),
// the rebuild either is refused before anything moves (a value the new type cannot hold exactly) and the table reads
// as before, or every value reads as DuckDB's own CAST of it, a renamed column carrying its values; rollback --sync
// then gives back exactly the rows before. The expected rows come from plain DuckDB over the delivery itself.

const TYPES = ["TINYINT", "SMALLINT", "INTEGER", "BIGINT", "DOUBLE", "DECIMAL(10,2)", "DECIMAL(12,4)", "VARCHAR"] as const;
type Type = (typeof TYPES)[number];
type Fate = { readonly kind: "keep" } | { readonly kind: "drop" } | { readonly kind: "rename" } | { readonly kind: "retype"; readonly to: Type };

/** A value the column's type holds (landing must take every row): small integers, 2 or 4 decimals, or text. */
function valueOf(type: Type): fc.Arbitrary<string> {
  const int = fc.integer({ min: -120, max: 120 });
  if (type === "DOUBLE") return fc.tuple(int, fc.integer({ min: 0, max: 999 })).map(([a, b]) => `${a}.${String(b).padStart(3, "0")}`);
  if (type === "DECIMAL(10,2)") return fc.tuple(int, fc.integer({ min: 0, max: 99 })).map(([a, b]) => `${a}.${String(b).padStart(2, "0")}`);
  if (type === "DECIMAL(12,4)") return fc.tuple(int, fc.constantFrom("0000", "5000", "2500", "0125")).map(([a, b]) => `${a}.${b}`);
  if (type === "VARCHAR") return fc.oneof(int.map(String), fc.constantFrom("x", "7a", ""));
  return int.map(String);
}

const caseArbitrary = fc
  .array(fc.constantFrom(...TYPES), { minLength: 1, maxLength: 3 })
  .chain((types) =>
    fc.record({
      types: fc.constant(types),
      fates: fc.tuple(
        ...types.map((): fc.Arbitrary<Fate> => fc.oneof(fc.constant({ kind: "keep" } as const), fc.constant({ kind: "drop" } as const), fc.constant({ kind: "rename" } as const), fc.constantFrom(...TYPES).map((to) => ({ kind: "retype", to }) as const))),
      ),
      rows: fc.array(fc.tuple(fc.integer({ min: 1, max: 3 }), fc.tuple(...types.map((t) => fc.option(valueOf(t), { nil: undefined })))), { minLength: 1, maxLength: 12 }),
    }),
  )
  // At least one column changes as only a rebuild can change it.
  .filter(({ types, fates }) => fates.some((f, i) => f.kind === "drop" || f.kind === "rename" || (f.kind === "retype" && f.to !== types[i])));

describe("a rebuild by swap over random columns and changes (embedded)", () => {
  let duck: DuckDBInstance;
  beforeAll(async () => {
    duck = await DuckDBInstance.create(":memory:");
  });
  afterAll(() => duck.closeSync());

  it("reads every value as DuckDB casts it, or refuses and changes nothing; rollback --sync gives back the rows before", async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(caseArbitrary, async ({ types, fates, rows }) => {
        run += 1;
        const backend = await embeddedBackend();
        const { dir, cleanup } = tempDir("lakeswap-rebuild-property-");
        const lake = await backend.open({ graceMs: 0, leaseWaitMs: 0 });
        try {
          mkdirSync(path.join(dir, "deliveries"));
          const names = types.map((_, i) => `c${i}`);
          const after: { name: string; type: string; from?: string }[] = fates.flatMap((fate: Fate, i) => {
            const type = types[i]!;
            if (fate.kind === "drop") return [];
            if (fate.kind === "rename") return [{ name: `r${i}`, type, from: names[i]! }];
            return [{ name: names[i]!, type: fate.kind === "retype" ? fate.to : type }];
          });
          const yaml = (columns: string) => `datasets:\n  t:\n    source: {format: csv, path: deliveries/*.csv}\n    columns: {id: {type: BIGINT, nullable: false}, ${columns}d: DATE}\n    partition: {day: "strftime(d, '%Y-%m-%d')"}\n`;
          const before = yaml(types.map((t, i) => `${names[i]}: '${t}', `).join(""));
          const changed = yaml(after.map((c) => (c.from !== undefined ? `${c.name}: {type: '${c.type}', renamed_from: ${c.from}}, ` : `${c.name}: '${c.type}', `)).join(""));
          const csvText = `id,${names.join(",")},d\n${rows.map(([day, values], id) => [id, ...values.map((v) => (v === undefined ? "" : v === "" ? '""' : v)), `2026-11-0${day}`].join(",")).join("\n")}\n`;
          const delivery = path.join(dir, "deliveries", "a.csv");
          writeFileSync(delivery, csvText);
          const configFile = path.join(dir, "lakeswap.yaml");
          // The rebuild's sync delivers one row of a day of its own, NULL in every changed column (it lands under any types).
          const other = path.join(dir, "deliveries", "b.csv");
          writeFileSync(other, `id,${after.map((c) => c.name).join(",")}${after.length > 0 ? "," : ""}d\n999,${after.map(() => ",").join("")}2026-11-09\n`);
          const sync = (config: string, rebuildSchema: boolean, file: string) => {
            writeFileSync(configFile, config);
            return new Pipeline(lake, loadPipelineConfig(configFile), { inputs: [file], rebuildSchema }).sync();
          };
          await sync(before, false, delivery);
          const lakeRows = (columns: readonly string[]) => read(lake, `SELECT ${["id", ...columns].map((c) => `CAST(${c} AS VARCHAR)`).join(", ")} FROM t_raw WHERE id <> 999 ORDER BY id`);
          const original = await lakeRows(names);

          // What plain DuckDB makes of the delivery: the source as its declared types, then each column's new value.
          const connection = await duck.connect();
          const table = `src_${run}`;
          await connection.run(`CREATE TABLE ${table} AS SELECT * FROM read_csv('${delivery}', header = true, columns = {'id': 'BIGINT', ${names.map((n, i) => `'${n}': '${types[i]}'`).join(", ")}, 'd': 'DATE'})`);
          const numeric = (t: string) => t !== "VARCHAR";
          const checks = after.map((c) => {
            const source = c.from ?? c.name;
            const was = String(types[names.indexOf(source)]);
            const exact = numeric(was) && numeric(c.type) && was !== c.type ? ` OR TRY_CAST(${source} AS ${c.type}) <> ${source}` : "";
            return `count(*) FILTER (WHERE ${source} IS NOT NULL AND (TRY_CAST(${source} AS ${c.type}) IS NULL${exact}))`;
          });
          const unfit = checks.length === 0 ? 0 : Number((await connection.runAndReadAll(`SELECT ${checks.join(" + ")} FROM ${table}`)).getRowsJS()[0]?.[0]);
          const projection = ["CAST(id AS VARCHAR)", ...after.map((c) => `CAST(TRY_CAST(${c.from ?? c.name} AS ${c.type}) AS VARCHAR)`)].join(", ");
          const cast = (await connection.runAndReadAll(`SELECT ${projection} FROM ${table} ORDER BY id`)).getRowsJS().map((row) => row.map((v) => (v === null ? "null" : String(v))).join("|"));
          connection.closeSync();

          if (unfit > 0) {
            const refused = await sync(changed, true, other).then(() => "", (error: unknown) => String(error));
            expect(refused).toMatch(/cannot hold exactly/);
            expect(await lakeRows(names)).toEqual(original);
            expect((await lake.table("t_raw")).columns.map((c) => c.name)).toEqual(["id", ...names, "d"]);
            // The refusal names the run it could not rewrite: its partition's current one.
            const [, partition, runId] = /partition t_raw\/(day=[\d-]+): its run (\S+) cannot be rewritten/.exec(refused) ?? [];
            const current = (await lake.snapshot({ tables: ["t_raw"] }))[0]?.partitions.find((p) => partitionPath(p.partition) === partition);
            expect([runId, partition]).toEqual([current?.runId, expect.any(String)]);
            // Nothing was made, so nothing is listed as made: no sync records the change, the schema's history has none.
            expect((await listSyncs(lake)).flatMap((r) => r.schemaChanges ?? [])).toEqual([]);
            expect((await readSchemaHistory(lake, "t_raw")).changes).toEqual([]);
            return;
          }
          const report = await sync(changed, true, other);
          // Rebuilt (every day rewritten), or, where each change was a widening, changed in place.
          const entry = report.schemaChanges?.[0];
          expect(entry?.rebuilt ?? new Set(rows.map(([day]) => day)).size).toBe(new Set(rows.map(([day]) => day)).size);
          expect((await lake.table("t_raw")).columns.map((c) => `${c.name} ${c.type}`)).toEqual(["id BIGINT", ...after.map((c) => `${c.name} ${c.type}`), "d DATE"]);
          expect(await lakeRows(after.map((c) => c.name))).toEqual(cast);
          await rollbackSync(lake, report.syncId);
          expect(await lakeRows(names)).toEqual(original);
        } finally {
          await lake.close();
          await backend.cleanup();
          cleanup();
        }
      }),
      { numRuns: Number(process.env.REBUILD_RUNS ?? 15), seed: process.env.MODEL_SEED === undefined ? undefined : Number(process.env.MODEL_SEED) },
    );
  }, 300_000);
});

async function read(lake: Lake, sql: string): Promise<string[]> {
  return (await lake.query(sql)).rows.map((row) => row.map((v) => (v === null ? "null" : String(v))).join("|"));
}
