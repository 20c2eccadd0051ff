// Child reader of the catalog file suite (test/lake/catalog-file-readers.test.ts): reads every row of two tables in
// one query, in a tight loop until its stdin closes, printing one JSON line per read:
// {"start","end","rows","markers","marker"} or {"start","end","error"}. Plain DuckDB (@duckdb/node-api); no lakeswap code.
//
//   --mode catalog   ATTACH '<lake>/lake.duckdb' (READ_ONLY) for each read, as a dashboard that opens the file would.
//   --mode glob      read_parquet('<lake>/<table>/*/*.parquet', hive_partitioning = true), what the README showed first;
//                    with --by-name also union_by_name = true, as docs/lake.md says for a table whose schema changed in place.
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { DuckDBInstance } from "@duckdb/node-api";
import { readUntilStdinEnds } from "./read-until-stdin-ends.js";

const { values } = parseArgs({ options: { mode: { type: "string" }, lake: { type: "string" }, tables: { type: "string" }, "by-name": { type: "boolean" } }, strict: true });
const { mode, lake, tables } = values;
const byName = values["by-name"] === true ? ", union_by_name = true" : "";
if ((mode !== "catalog" && mode !== "glob") || !lake || !tables) throw new Error("usage: catalog-reader-loop --mode catalog|glob --lake DIR --tables T1,T2");
const names = tables.split(",");
for (const name of names) if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`'${name}' is not a plain identifier`);
const literal = (text: string) => `'${text.replace(/'/g, "''")}'`;
const lakeDir = path.resolve(lake);

// Reads fill the CPU the writer leaves: the test's 100 syncs run at their own pace, not slowed by two readers in tight loops.
os.setPriority(19);

// No top-level await: the test run bundles this script as CommonJS (test/support/build-bundles.ts).
void main(mode);

async function main(mode: "catalog" | "glob"): Promise<void> {
  const instance = await DuckDBInstance.create(":memory:");
  const connection = await instance.connect();
  const from = (name: string) => (mode === "catalog" ? `lake.${name}` : `read_parquet(${literal(path.join(lakeDir, name, "*", "*.parquet"))}, hive_partitioning = true${byName})`);
  const sql = `SELECT count(*), count(DISTINCT marker), min(marker) FROM (${names.map((name) => `SELECT marker FROM ${from(name)}`).join(" UNION ALL ")})`;
  const read = async (): Promise<unknown[]> => {
    if (mode === "glob") return (await connection.runAndReadAll(sql)).getRowsJS()[0] ?? [];
    await connection.run(`ATTACH ${literal(path.join(lakeDir, "lake.duckdb"))} AS lake (READ_ONLY)`);
    try {
      return (await connection.runAndReadAll(sql)).getRowsJS()[0] ?? [];
    } finally {
      await connection.run("DETACH lake");
    }
  };

  await readUntilStdinEnds(async () => {
    const [rows, markers, marker] = await read();
    return { rows: Number(rows), markers: Number(markers), marker: marker === null ? null : Number(marker) };
  });
  connection.closeSync();
  instance.closeSync();
}
