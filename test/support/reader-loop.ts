// Child reader of the concurrent-reader suite: queries one partition in a tight loop until its stdin closes,
// printing one JSON line per read: {"start","end","rows","tags","tag"} or {"start","end","error"}.
//
//   --mode duckdb    plain DuckDB (@duckdb/node-api) over <lake>/<table>/*/*.parquet with hive partitioning;
//                    no lakeswap code is loaded.
//   --mode lakeswap  the library: openEmbeddedLake + lake.query, what `lakeswap query` does.
//
// The lake is named as the CLI names it (--lake DIR, else env LAKESWAP_LAKE), so a test passes backend.cliArgs.
import path from "node:path";
import { parseArgs } from "node:util";
import { DuckDBInstance } from "@duckdb/node-api";
import { readUntilStdinEnds } from "./read-until-stdin-ends.js";

const { values } = parseArgs({
  options: {
    mode: { type: "string" },
    lake: { type: "string" },
    table: { type: "string" },
    column: { type: "string" },
    value: { type: "string" },
  },
  strict: true,
});
const { mode, table, column, value } = values;
if ((mode !== "duckdb" && mode !== "lakeswap") || !table || !column || !value) {
  throw new Error("usage: reader-loop --mode duckdb|lakeswap --table T --column C --value V [--lake DIR]");
}
for (const name of [table, column]) if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`'${name}' is not a plain identifier`);
const literal = (text: string) => `'${text.replace(/'/g, "''")}'`;
const lakeDir = path.resolve(values.lake ?? process.env.LAKESWAP_LAKE ?? "lake");

type Read = () => Promise<readonly unknown[]>;

// No top-level await: the test run bundles this script as CommonJS (test/support/build-bundles.ts).
void main(mode, table, column, value);

async function main(mode: "duckdb" | "lakeswap", table: string, column: string, value: string): Promise<void> {
  let read: Read;
  let close: () => Promise<void>;
  if (mode === "duckdb") {
    const instance = await DuckDBInstance.create(":memory:");
    const connection = await instance.connect();
    const sql =
      `SELECT count(*), count(DISTINCT tag), min(tag) FROM read_parquet(${literal(path.join(lakeDir, table, "*", "*.parquet"))}, hive_partitioning = true) ` +
      `WHERE ${column} = ${literal(value)}`;
    read = async () => (await connection.runAndReadAll(sql)).getRowsJS()[0] ?? [];
    close = async () => {
      connection.closeSync();
      instance.closeSync();
    };
  } else {
    const { openLakeForChild } = await import("./child-lake.js");
    const lake = await openLakeForChild(lakeDir);
    const sql = `SELECT count(*), count(DISTINCT tag), min(tag) FROM ${table} WHERE ${column} = ${literal(value)}`;
    read = async () => (await lake.query(sql)).rows[0] ?? [];
    close = () => lake.close();
  }

  await readUntilStdinEnds(async () => {
    const [rows, tags, tag] = await read();
    return { rows: Number(rows), tags: Number(tags), tag: tag ?? null };
  });
  await close();
}
