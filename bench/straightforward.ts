import { createHash } from "node:crypto";
import { promises as fs } from "node:fs";
import path from "node:path";
import { quoteIdentifier, quoteLiteral } from "../src/model/sql.js";
import type { BenchDuck } from "./duck.js";
import { FLIGHT_COLUMNS, FLIGHTS_DAY_EXPRESSION, type FlightColumn } from "./flights.js";

/*
 * The straightforward content signature that issue 10 measures lakeswap's
 * resend against, the seed's method: for each partition, sort its rows by all
 * columns, render them as CSV, sha256 the text. Two faithful implementations,
 * both over rows already read (reading is not charged to them):
 *
 * - in Node, as the seed did it in pandas: the whole delivery in memory
 *   (columns in typed arrays, NULL doubles as NaN, like a DataFrame), rows
 *   grouped by day, each day's rows sorted by all columns (NULLs last), CSV
 *   lines built, sha256 with node:crypto;
 * - with DuckDB's sort and CSV writer: the rows in a DuckDB table (clustered
 *   by day), one `COPY (SELECT … WHERE day = … ORDER BY <all columns>) TO
 *   day.csv` per day, sha256 of each file in Node.
 *
 * Both write the same CSV text (header, `,`, RFC 4180 quoting of text, NULL as
 * an empty field, doubles as DuckDB prints them, booleans as true/false), which
 * the benchmark checks by comparing their signatures.
 */

/** Signature (sha256 hex) per partition value (`2025-01-01`). */
export type PartitionHashes = Map<string, string>;

type Column = Int32Array | Float64Array | Uint8Array | (string | null)[];

/** The delivery held in memory, column by column, with each row's day. */
export interface FlightsInMemory {
  readonly rows: number;
  readonly columns: readonly Column[];
  readonly days: readonly string[];
}

/** Reads the delivery into memory (untimed: the straightforward method is timed without its reading). */
export async function readFlightsIntoMemory(duck: BenchDuck, file: string): Promise<FlightsInMemory> {
  const texts = FLIGHT_COLUMNS.map((c) => (c.type === "DATE" ? `CAST(${quoteIdentifier(c.name)} AS VARCHAR)` : quoteIdentifier(c.name)));
  const reader = await duck.connection.runAndReadAll(
    `SELECT ${texts.join(", ")}, ${FLIGHTS_DAY_EXPRESSION} AS day FROM read_parquet(${quoteLiteral(file)})`,
  );
  const raw = reader.getColumns();
  const rows = reader.currentRowCount;
  const columns = FLIGHT_COLUMNS.map((column, index) => toColumn(column, raw[index] ?? [], rows));
  const days = (raw[FLIGHT_COLUMNS.length] ?? []) as string[];
  return { rows, columns, days };
}

function toColumn(column: FlightColumn, values: readonly unknown[], rows: number): Column {
  switch (column.type) {
    case "INTEGER": {
      if (!column.nullable) return Int32Array.from(values as number[]);
      throw new Error(`nullable INTEGER column ${column.name} has no in-memory form here`);
    }
    case "DOUBLE": {
      const out = new Float64Array(rows);
      for (let i = 0; i < rows; i++) out[i] = values[i] === null ? Number.NaN : (values[i] as number);
      return out;
    }
    case "BOOLEAN": {
      const out = new Uint8Array(rows);
      for (let i = 0; i < rows; i++) out[i] = values[i] ? 1 : 0;
      return out;
    }
    default:
      return values as (string | null)[];
  }
}

/**
 * The straightforward method in Node over rows in memory: group by day, sort
 * each day's rows by all columns, CSV, sha256. Written to be fast, so the
 * target is not judged against a slow baseline: text columns are first coded
 * by their sorted distinct values (as a DataFrame's categoricals), so the sort
 * compares numbers only; NULLs sort last (an extra code, or +Infinity).
 */
export function straightforwardInNode(data: FlightsInMemory): PartitionHashes {
  const byDay = new Map<string, number[]>();
  for (let i = 0; i < data.rows; i++) {
    const day = data.days[i] as string;
    let rows = byDay.get(day);
    if (rows === undefined) byDay.set(day, (rows = []));
    rows.push(i);
  }
  const keys = data.columns.map((column) => sortKey(column, data.rows));
  const compare = (a: number, b: number): number => {
    for (let c = 0; c < keys.length; c++) {
      const key = keys[c] as Float64Array;
      const order = (key[a] as number) - (key[b] as number);
      if (order !== 0) return order;
    }
    return 0;
  };
  const render = data.columns.map(cellRenderer);
  const header = FLIGHT_COLUMNS.map((c) => c.name).join(",");
  const hashes: PartitionHashes = new Map();
  for (const day of [...byDay.keys()].sort()) {
    const rows = byDay.get(day) as number[];
    rows.sort(compare);
    const lines = new Array<string>(rows.length + 2);
    lines[0] = header;
    for (let r = 0; r < rows.length; r++) {
      const row = rows[r] as number;
      let line = (render[0] as CellRenderer)(row);
      for (let c = 1; c < render.length; c++) line += `,${(render[c] as CellRenderer)(row)}`;
      lines[r + 1] = line;
    }
    lines[rows.length + 1] = "";
    hashes.set(day, createHash("sha256").update(lines.join("\n")).digest("hex"));
  }
  return hashes;
}

/** A column as numbers that sort as its values do, NULLs last: text as the rank of its value among the distinct values. */
function sortKey(values: Column, rows: number): Float64Array {
  const key = new Float64Array(rows);
  if (values instanceof Float64Array) {
    for (let i = 0; i < rows; i++) key[i] = Number.isNaN(values[i]) ? Number.POSITIVE_INFINITY : (values[i] as number);
    return key;
  }
  if (values instanceof Int32Array || values instanceof Uint8Array) {
    key.set(values);
    return key;
  }
  const distinct = [...new Set(values.filter((v): v is string => v !== null))].sort((x, y) => (x < y ? -1 : x > y ? 1 : 0));
  const rank = new Map(distinct.map((value, index) => [value, index]));
  for (let i = 0; i < rows; i++) {
    const value = values[i] ?? null;
    key[i] = value === null ? distinct.length : (rank.get(value) as number);
  }
  return key;
}

type CellRenderer = (row: number) => string;

/** Renders one column's value as CSV text, as DuckDB writes it (doubles `5.0`, booleans `true`). */
function cellRenderer(values: Column): CellRenderer {
  if (values instanceof Float64Array) return (row) => doubleText(values[row] as number);
  if (values instanceof Int32Array) return (row) => String(values[row]);
  if (values instanceof Uint8Array) return (row) => (values[row] ? "true" : "false");
  return (row) => csvText(values[row] ?? null);
}

/** A double as DuckDB prints it: NaN (NULL) empty, whole numbers with `.0`. */
function doubleText(value: number): string {
  if (Number.isNaN(value)) return "";
  return Number.isInteger(value) ? `${value}.0` : String(value);
}

/** Loads the delivery into a DuckDB table clustered by day, for the DuckDB variant (untimed). */
export async function loadFlightsTable(duck: BenchDuck, file: string, table: string): Promise<void> {
  const columns = FLIGHT_COLUMNS.map((c) => quoteIdentifier(c.name)).join(", ");
  await duck.run(`CREATE OR REPLACE TABLE ${table} AS SELECT ${columns}, ${FLIGHTS_DAY_EXPRESSION} AS day FROM read_parquet(${quoteLiteral(file)}) ORDER BY day`);
}

/**
 * The straightforward method with DuckDB's sort and CSV writer: per day,
 * `COPY (SELECT … WHERE day = '…' ORDER BY <all columns>) TO day.csv (HEADER)`,
 * then sha256 of the file with node:crypto; the files are removed afterwards.
 */
export async function straightforwardWithDuckDbCopy(duck: BenchDuck, table: string, dir: string): Promise<PartitionHashes> {
  await fs.mkdir(dir, { recursive: true });
  try {
    const days = (await duck.rows(`SELECT DISTINCT day FROM ${table} ORDER BY day`)).map((row) => String(row[0]));
    const columns = FLIGHT_COLUMNS.map((c) => quoteIdentifier(c.name)).join(", ");
    const hashes: PartitionHashes = new Map();
    for (const day of days) {
      const file = path.join(dir, `${day}.csv`);
      await duck.run(`COPY (SELECT ${columns} FROM ${table} WHERE day = ${quoteLiteral(day)} ORDER BY ${columns}) TO ${quoteLiteral(file)} (FORMAT CSV, HEADER true)`);
      hashes.set(day, createHash("sha256").update(await fs.readFile(file)).digest("hex"));
    }
    return hashes;
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}

/** A text field of CSV: empty for NULL, quoted when it holds a comma, quote or line break. */
function csvText(value: string | null): string {
  if (value === null) return "";
  return /[",\r\n]/.test(value) ? `"${value.replace(/"/g, '""')}"` : value;
}

/** True when both give the same signature for the same partitions. */
export function sameHashes(a: PartitionHashes, b: PartitionHashes): boolean {
  return a.size === b.size && [...a].every(([key, value]) => b.get(key) === value);
}
