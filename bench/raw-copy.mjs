// The plain-DuckDB baselines of the delivery benchmarks, run as their own process so their wall time, CPU time and
// peak RSS are measured like lakeswap's: `node bench/raw-copy.mjs '<statement>' [DIR]` opens an in-memory DuckDB
// (defaults: one thread per cpu), runs the statement, then (with DIR) fsyncs every file and folder under DIR, as a
// durable write must, and prints {"rows", "openMs", "copyMs", "fsyncMs", "row"} as JSON (`row`: the statement's first
// row as text, `rows`: its first value as a number). Plain JavaScript and no lakeswap code, so no TypeScript loader's
// start-up and nothing of lakeswap's is charged to the baseline.
import { DuckDBInstance } from "@duckdb/node-api";
import { promises as fs } from "node:fs";
import path from "node:path";
import { performance } from "node:perf_hooks";

const [statement, durableDir] = process.argv.slice(2);
if (!statement) {
  process.stderr.write("usage: node bench/raw-copy.mjs '<statement>' [DIR to fsync]\n");
  process.exit(2);
}

/** fsync of every file under `dir`, then of every folder (children before parents). */
async function fsyncTree(dir) {
  const entries = await fs.readdir(dir, { recursive: true, withFileTypes: true });
  const folders = [dir];
  for (const entry of entries) {
    const full = path.join(entry.parentPath, entry.name);
    if (entry.isDirectory()) folders.push(full);
    else if (entry.isFile()) await syncPath(full, "r");
  }
  for (const folder of folders.reverse()) await syncPath(folder, "r");
  await syncPath(path.dirname(dir), "r");
}

async function syncPath(file, flags) {
  const handle = await fs.open(file, flags);
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

const started = performance.now();
const instance = await DuckDBInstance.create(":memory:");
const connection = await instance.connect();
const opened = performance.now();
const reader = await connection.runAndReadAll(statement);
const copied = performance.now();
if (durableDir) await fsyncTree(durableDir);
const synced = performance.now();
const first = reader.getRows()[0] ?? [];
connection.closeSync();
instance.closeSync();
process.stdout.write(
  `${JSON.stringify({ rows: Number(first[0] ?? 0), openMs: opened - started, copyMs: copied - opened, fsyncMs: synced - copied, row: first.map(String) })}\n`,
);
