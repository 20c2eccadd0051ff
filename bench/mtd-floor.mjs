// The floor of an incremental month-to-date sync (issue 27, item 4), as its own process so that it is measured like
// `lakeswap sync`: `node bench/mtd-floor.mjs DELIVERY.csv OUTDIR DAY` opens an in-memory DuckDB (defaults), reads the
// cumulative delivery once with the pipeline's declared column types, and writes only what the new day changes: the
// day's raw partition, its stage partition (completed orders) and the month's analytics partition (orders and revenue
// per day), each one Parquet file made durable (fsync of the file and of its folder) as lakeswap makes a run durable.
// Prints {"rows", "openMs", "workMs"} as JSON. Plain JavaScript and DuckDB: no lakeswap code.
import { DuckDBInstance } from "@duckdb/node-api";
import { mkdirSync, openSync, fsyncSync, closeSync } from "node:fs";
import path from "node:path";
import { performance } from "node:perf_hooks";

const [delivery, outDir, day] = process.argv.slice(2);
if (!delivery || !outDir || !/^\d{4}-\d{2}-\d{2}$/.test(day ?? "")) {
  process.stderr.write("usage: node bench/mtd-floor.mjs DELIVERY.csv OUTDIR YYYY-MM-DD\n");
  process.exit(2);
}
const literal = (text) => `'${text.replaceAll("'", "''")}'`;
const month = day.slice(0, 7);

const started = performance.now();
const instance = await DuckDBInstance.create(":memory:");
const connection = await instance.connect();
const opened = performance.now();

const columns = "{'order_id': 'BIGINT', 'customer_id': 'BIGINT', 'amount': 'DECIMAL(10,2)', 'status': 'VARCHAR', 'order_ts': 'TIMESTAMP', 'updated_at': 'TIMESTAMP'}";
await connection.run(
  `CREATE TABLE delivery AS SELECT *, strftime(order_ts, '%Y-%m-%d') AS day FROM read_csv(${literal(delivery)}, header = true, columns = ${columns})`,
);
const rows = Number((await connection.runAndReadAll("SELECT count(*) FROM delivery")).getRows()[0]?.[0] ?? 0);

/** COPY one query to a fresh Parquet file in `folder`, then fsync the file and the folder. */
async function write(folder, query) {
  mkdirSync(folder, { recursive: true });
  const file = path.join(folder, "part-0.parquet");
  await connection.run(`COPY (${query}) TO ${literal(file)} (FORMAT parquet)`);
  for (const target of [file, folder]) {
    const fd = openSync(target, "r");
    fsyncSync(fd);
    closeSync(fd);
  }
}
await write(path.join(outDir, "raw", `day=${day}`), `SELECT order_id, customer_id, amount, status, order_ts, updated_at FROM delivery WHERE day = ${literal(day)}`);
await write(path.join(outDir, "stage", `day=${day}`), `SELECT order_id, customer_id, amount, order_ts FROM delivery WHERE day = ${literal(day)} AND status = 'completed'`);
await write(
  path.join(outDir, "analytics", `month=${month}`),
  `SELECT day AS order_day, count(*) AS orders, CAST(sum(amount) AS DECIMAL(18,2)) AS revenue FROM delivery ` +
    `WHERE substr(day, 1, 7) = ${literal(month)} AND status = 'completed' GROUP BY day`,
);
const done = performance.now();
connection.closeSync();
instance.closeSync();
process.stdout.write(`${JSON.stringify({ rows, openMs: opened - started, workMs: done - opened })}\n`);
