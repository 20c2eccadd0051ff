// The raw baseline of the first-load benchmark, run as its own process so its wall time and peak RSS
// are measured like lakeswap's: `node bench/raw-copy.mjs '<COPY statement>'` opens an in-memory DuckDB
// (defaults: one thread per cpu), runs the statement, and prints {"rows", "openMs", "copyMs"} as JSON.
// Plain JavaScript, so no TypeScript loader's start-up is charged to the baseline.
import { DuckDBInstance } from "@duckdb/node-api";
import { performance } from "node:perf_hooks";

const statement = process.argv[2];
if (!statement) {
  process.stderr.write("usage: node bench/raw-copy.mjs '<COPY statement>'\n");
  process.exit(2);
}
const started = performance.now();
const instance = await DuckDBInstance.create(":memory:");
const connection = await instance.connect();
const opened = performance.now();
const reader = await connection.runAndReadAll(statement);
const copied = performance.now();
const rows = Number(reader.getRows()[0]?.[0] ?? 0);
connection.closeSync();
instance.closeSync();
process.stdout.write(`${JSON.stringify({ rows, openMs: opened - started, copyMs: copied - opened })}\n`);
