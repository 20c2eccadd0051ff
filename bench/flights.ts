import { promises as fs } from "node:fs";
import path from "node:path";
import { quoteLiteral } from "../src/model/sql.js";
import type { BenchDuck } from "./duck.js";

/*
 * The delivery of issue 10's first-load and resend benchmarks: a flights-like
 * table (as the public on-time performance data: one row per flight), 3,000,000
 * rows over 182 days in ONE Parquet file, rows of all days interleaved as in a
 * file that was not written sorted. Deterministic: the same bytes every run.
 */

/** Rows of the delivery. */
export const FLIGHTS_ROWS = 3_000_000;

/** Days (partitions) the flights spread over, from FLIGHTS_FIRST_DAY: 2025-01-01 to 2025-07-01. */
export const FLIGHTS_DAYS = 182;

const FLIGHTS_FIRST_DAY = "2025-01-01";

/** A declared column of the delivery, as lakeswap.yaml declares it. */
export interface FlightColumn {
  readonly name: string;
  readonly type: "DATE" | "VARCHAR" | "INTEGER" | "DOUBLE" | "BOOLEAN";
  readonly nullable: boolean;
}

/** The columns, in file order (the straightforward signature sorts by all of them, in this order). */
export const FLIGHT_COLUMNS: readonly FlightColumn[] = [
  { name: "flight_date", type: "DATE", nullable: false },
  { name: "carrier", type: "VARCHAR", nullable: false },
  { name: "flight_number", type: "INTEGER", nullable: false },
  { name: "tail_number", type: "VARCHAR", nullable: true },
  { name: "origin", type: "VARCHAR", nullable: false },
  { name: "dest", type: "VARCHAR", nullable: false },
  { name: "crs_dep_time", type: "INTEGER", nullable: false },
  { name: "dep_delay", type: "DOUBLE", nullable: true },
  { name: "arr_delay", type: "DOUBLE", nullable: true },
  { name: "cancelled", type: "BOOLEAN", nullable: false },
  { name: "distance", type: "DOUBLE", nullable: false },
];

/** The partition key, computed the same way by lakeswap (lakeswap.yaml) and by the raw COPY. */
export const FLIGHTS_DAY_EXPRESSION = "strftime(flight_date, '%Y-%m-%d')";

const CARRIERS = ["AA", "DL", "UA", "WN", "B6", "AS", "NK", "F9", "G4", "HA", "OO", "YX", "MQ", "9E", "OH"];
const AIRPORTS = [
  "ATL", "DFW", "DEN", "ORD", "LAX", "JFK", "LAS", "MCO", "MIA", "CLT", "SEA", "PHX", "EWR", "SFO", "IAH", "BOS", "FLL", "MSP", "LGA", "DTW",
  "PHL", "SLC", "BWI", "DCA", "SAN", "IAD", "TPA", "BNA", "AUS", "MDW", "HNL", "DAL", "PDX", "STL", "RDU", "HOU", "SMF", "MSY", "SJC", "SNA",
];

/** A SELECT that generates `rows` flights over `days` days; 7919 is prime to `days`, so every day gets rows/days rows, interleaved. */
export function flightsSelect(rows: number, days: number): string {
  const list = (values: readonly string[]): string => `[${values.map(quoteLiteral).join(", ")}]`;
  const h = (salt: number): string => `hash(range, ${salt})`;
  return [
    "SELECT flight_date, carrier, flight_number, tail_number, origin, dest, crs_dep_time,",
    "  CASE WHEN cancelled THEN NULL ELSE dep_delay END AS dep_delay,",
    "  CASE WHEN cancelled OR diverted THEN NULL ELSE dep_delay + arr_offset END AS arr_delay,",
    "  cancelled, distance",
    "FROM (",
    `  SELECT (DATE ${quoteLiteral(FLIGHTS_FIRST_DAY)} + ((range * 7919) % ${days})::INTEGER) AS flight_date,`,
    `    ${list(CARRIERS)}[1 + (${h(1)} % ${CARRIERS.length})::INTEGER] AS carrier,`,
    `    (1 + ${h(2)} % 7000)::INTEGER AS flight_number,`,
    `    CASE WHEN ${h(3)} % 40 = 0 THEN NULL ELSE 'N' || (100 + ${h(3)} % 900)::VARCHAR || chr((65 + ${h(4)} % 26)::INTEGER) || chr((65 + ${h(5)} % 26)::INTEGER) END AS tail_number,`,
    `    ${list(AIRPORTS)}[1 + (${h(6)} % ${AIRPORTS.length})::INTEGER] AS origin,`,
    `    ${list(AIRPORTS)}[(1 + ((${h(6)} % ${AIRPORTS.length}) + 1 + ${h(7)} % ${AIRPORTS.length - 1}) % ${AIRPORTS.length})::INTEGER] AS dest,`,
    `    ((5 + ${h(8)} % 18) * 100 + (${h(9)} % 12) * 5)::INTEGER AS crs_dep_time,`,
    // Delays in whole minutes, mostly small, a long tail; as in the public data, stored as DOUBLE.
    `    (CASE WHEN ${h(10)} % 10 < 7 THEN (${h(11)} % 20)::INTEGER - 10 ELSE (${h(11)} % 300)::INTEGER - 20 END)::DOUBLE AS dep_delay,`,
    `    ((${h(12)} % 41)::INTEGER - 20)::DOUBLE AS arr_offset,`,
    `    ${h(13)} % 50 = 0 AS cancelled,`,
    `    ${h(13)} % 400 = 1 AS diverted,`,
    `    (100 + ${h(14)} % 2600)::DOUBLE AS distance`,
    `  FROM range(${rows})`,
    ")",
  ].join("\n");
}

/** Writes the delivery (one Parquet file, snappy) and returns its size in bytes. */
export async function writeFlights(duck: BenchDuck, file: string, rows = FLIGHTS_ROWS, days = FLIGHTS_DAYS): Promise<number> {
  await fs.mkdir(path.dirname(file), { recursive: true });
  await duck.run(`COPY (${flightsSelect(rows, days)}) TO ${quoteLiteral(file)} (FORMAT PARQUET, COMPRESSION snappy)`);
  return (await fs.stat(file)).size;
}

/** lakeswap.yaml of one dataset, `flights`, landed from a Parquet file into its raw layer (table flights_raw) by day; no derived layers. */
export function flightsPipelineYaml(): string {
  const columns = FLIGHT_COLUMNS.map((c) => `      ${c.name}: {type: ${c.type}, nullable: ${c.nullable}}`).join("\n");
  return [
    "datasets:",
    "  flights:",
    "    source:",
    "      format: parquet",
    "      path: deliveries/*.parquet",
    "    columns:",
    columns,
    "    partition:",
    `      day: "${FLIGHTS_DAY_EXPRESSION}"`,
    "",
  ].join("\n");
}

/** The raw table lakeswap lands the flights into. */
export const FLIGHTS_TABLE = "flights_raw";
