import { execFile, spawnSync } from "node:child_process";
import { mkdirSync, readdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { DuckDBInstance } from "@duckdb/node-api";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { METADATA_FOLDERS } from "../../src/lake/layout.js";
import { REPO_ROOT, tempDir } from "../support/lake-fixture.js";

// Issue 10, item 7: landing never holds the whole delivery in memory. The landing instance has a memory limit
// (LAKESWAP_MEMORY_LIMIT) and spills the rest to a folder of its own, so a delivery several times larger than the limit
// lands whole, and the process stays small. Each landing runs in a child process of its own, whose peak memory
// (VmHWM) is its own.

const LIMIT = "64MB";
/** Rows of each delivery: landed, they take 4-6 times the limit in DuckDB's memory. */
const ROWS = 2_000_000;
const DAYS = 40;
/**
 * The child's peak resident memory may not pass this: Node, tsx and DuckDB themselves, the limit, and what DuckDB
 * allocates outside its buffer manager. Landing the same rows without a limit peaks at 600-900 MB.
 */
const PEAK_MB = 340;

/** The quoted CSV delivery's bad rows: the ids i with i % BAD_EVERY = 7 are sent as 'x' and i (all in day 7). */
const BAD_EVERY = 100_000;

/** The deliveries: Parquet, CSV as DuckDB writes it and JSONL, and both text formats again with a few bad rows (CSV with every field quoted; issue 27, item 3). */
type Delivery = "parquet" | "csv" | "quoted csv with bad rows" | "jsonl" | "jsonl with bad rows";
const FORMATS: Record<Delivery, "parquet" | "csv" | "jsonl"> = { parquet: "parquet", csv: "csv", "quoted csv with bad rows": "csv", jsonl: "jsonl", "jsonl with bad rows": "jsonl" };

/** Where each delivery's first record is (a header line before it, or none), and how a bad row's text starts. */
const FIRST_LINE: Record<Delivery, number> = { parquet: 1, csv: 2, "quoted csv with bad rows": 2, jsonl: 1, "jsonl with bad rows": 1 };
const BAD_TEXT: Partial<Record<Delivery, (id: number) => RegExp>> = {
  "quoted csv with bad rows": (id) => new RegExp(`^"x${id}","2026-01-08",`),
  "jsonl with bad rows": (id) => new RegExp(`^\\{"id":"x${id}","flight_date":"2026-01-08",`),
};

let workspace: ReturnType<typeof tempDir>;
let temp: string;
const files: Record<Delivery, string> = { parquet: "", csv: "", "quoted csv with bad rows": "", jsonl: "", "jsonl with bad rows": "" };

beforeAll(async () => {
  workspace = tempDir("lakeswap-landing-memory-");
  temp = path.join(workspace.dir, "tmp");
  mkdirSync(temp);
  const instance = await DuckDBInstance.create(":memory:");
  const connection = await instance.connect();
  // Rows of a flights-like delivery: day i % DAYS, carriers and airports as short texts, delays as doubles.
  const rows =
    `SELECT i AS id, DATE '2026-01-01' + CAST(i % ${DAYS} AS INTEGER) AS flight_date, ['AA', 'DL', 'UA', 'WN', 'B6'][1 + (hash(i) % 5)::INTEGER] AS carrier, ` +
    `'A' || (hash(i + 1) % 300) AS origin, 'A' || (hash(i + 2) % 300) AS dest, CAST(hash(i + 3) % 240 AS DOUBLE) - 20 AS dep_delay, ` +
    `CAST(hash(i + 4) % 2500 AS INTEGER) + 100 AS distance FROM range(${ROWS}) t(i)`;
  files.parquet = path.join(workspace.dir, "flights.parquet");
  files.csv = path.join(workspace.dir, "flights.csv");
  await connection.run(`COPY (${rows}) TO '${files.parquet}' (FORMAT PARQUET)`);
  await connection.run(`COPY (${rows}) TO '${files.csv}' (FORMAT CSV, HEADER)`);
  files["quoted csv with bad rows"] = path.join(workspace.dir, "flights-quoted.csv");
  const bad = `SELECT * REPLACE (CASE WHEN id % ${BAD_EVERY} = 7 THEN 'x' || id ELSE id::VARCHAR END AS id) FROM (${rows})`;
  await connection.run(`COPY (${bad}) TO '${files["quoted csv with bad rows"]}' (FORMAT CSV, HEADER, FORCE_QUOTE *)`);
  // One JSON object a line, as DuckDB writes it: streamed, or (with bad rows) read line by line, the bad rows keeping their line and text.
  files.jsonl = path.join(workspace.dir, "flights.jsonl");
  await connection.run(`COPY (${rows}) TO '${files.jsonl}' (FORMAT JSON)`);
  files["jsonl with bad rows"] = path.join(workspace.dir, "flights-bad.jsonl");
  await connection.run(`COPY (${bad}) TO '${files["jsonl with bad rows"]}' (FORMAT JSON)`);
  connection.closeSync();
  instance.closeSync();
});
afterAll(() => workspace.cleanup());

const COLUMNS = [
  { name: "id", type: "BIGINT", nullable: false },
  { name: "flight_date", type: "DATE", nullable: true },
  { name: "carrier", type: "VARCHAR", nullable: true },
  { name: "origin", type: "VARCHAR", nullable: true },
  { name: "dest", type: "VARCHAR", nullable: true },
  { name: "dep_delay", type: "DOUBLE", nullable: true },
  { name: "distance", type: "INTEGER", nullable: true },
];

interface ChildReport {
  rowsRead: number;
  rowsLoaded: number;
  rowsRejected: number;
  partitions: [string, number][];
  firstRejects: { line: number; reason: string; raw: string }[];
  peakMb: number;
  spillFoldersOpen: string[];
}

/** Lands one delivery with the engine in a child process under `LAKESWAP_MEMORY_LIMIT`; its report, and the folders left in its TMPDIR. */
async function landInChild(delivery: Delivery): Promise<{ report: ChildReport; left: string[] }> {
  const format = FORMATS[delivery];
  const script = path.join(workspace.dir, `land-${delivery.replaceAll(" ", "-")}.mts`);
  writeFileSync(
    script,
    `import { readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { DuckDbLanding } from ${JSON.stringify(path.join(REPO_ROOT, "src/landing/duckdb/duckdb-landing.js"))};
import { LocalStore } from ${JSON.stringify(path.join(REPO_ROOT, "src/store/local-store.js"))};
const engine = new DuckDbLanding(new LocalStore(${JSON.stringify(path.join(workspace.dir, "lake"))}, { folders: ${JSON.stringify(METADATA_FOLDERS)} }));
const delivery = await engine.land({ files: [${JSON.stringify(files[delivery])}], format: ${JSON.stringify(format)}, header: true, delimiter: ",",
  columns: ${JSON.stringify(COLUMNS)}, partition: [{ key: "day", expression: "strftime(flight_date, '%Y-%m-%d')" }], signatureColumns: ["id", "carrier", "dep_delay"] });
const spillFoldersOpen = readdirSync(tmpdir()).filter((name) => name.startsWith("lakeswap-landing-"));
await engine.releaseLanding(delivery);
await engine.close();
const peakMb = Number(/VmHWM:\\s+(\\d+)/.exec(readFileSync("/proc/self/status", "utf8"))[1]) / 1024;
console.log(JSON.stringify({ rowsRead: delivery.rowsRead, rowsLoaded: delivery.rowsLoaded, rowsRejected: delivery.rowsRejected,
  partitions: delivery.partitions.map((p) => [p.partition.keys.map((k, i) => k + "=" + p.partition.values[i]).join("/"), p.rows]),
  firstRejects: delivery.firstRejects.map((r) => ({ line: r.line, reason: r.reason, raw: r.raw })), peakMb, spillFoldersOpen }));
`,
  );
  const tsx = path.join(REPO_ROOT, "node_modules", ".bin", "tsx");
  const { stdout } = await promisify(execFile)(tsx, [script], {
    env: { ...process.env, LAKESWAP_MEMORY_LIMIT: LIMIT, TMPDIR: temp },
    maxBuffer: 16 * 1024 * 1024,
  });
  return { report: JSON.parse(stdout.trim().split("\n").at(-1)!) as ChildReport, left: readdirSync(temp).filter((name) => name.startsWith("lakeswap-landing-")) };
}

/** The rows of each day: day d (0-based) holds the ids i with i % DAYS = d; `bad` of day 7 are bad rows. */
function expectedPartitions(bad = 0): [string, number][] {
  return Array.from({ length: DAYS }, (_, d) => {
    const day = new Date(Date.UTC(2026, 0, 1 + d)).toISOString().slice(0, 10);
    return [`day=${day}`, Math.floor(ROWS / DAYS) + (d < ROWS % DAYS ? 1 : 0) - (d === 7 ? bad : 0)] as [string, number];
  });
}

describe(`a delivery several times larger than the landing's memory limit (LAKESWAP_MEMORY_LIMIT=${LIMIT}) lands whole (issue 10, item 7)`, () => {
  for (const delivery of Object.keys(FORMATS) as Delivery[]) {
    it(`${delivery}: every row lands in its partition, the process stays under ${PEAK_MB} MB, and the spill folder is removed`, async () => {
      // A folder left by a killed landing (its process is gone) is cleared by the next one, and stands in nobody's way.
      const gone = spawnSync(process.execPath, ["-e", ""]).pid;
      mkdirSync(path.join(temp, `lakeswap-landing-${gone}-killed`, "duckdb"), { recursive: true });
      writeFileSync(path.join(temp, `lakeswap-landing-${gone}-killed`, "duckdb", "duckdb_temp_storage_DEFAULT-0.tmp"), "left by a killed landing");

      const { report, left } = await landInChild(delivery);
      const badText = BAD_TEXT[delivery];
      const bad = badText ? ROWS / BAD_EVERY : 0;
      expect(report).toMatchObject({ rowsRead: ROWS, rowsLoaded: ROWS - bad, rowsRejected: bad });
      expect(report.partitions).toEqual(expectedPartitions(bad));
      // A bad row keeps its line (a CSV header is line 1) and its text, quotes and all.
      expect(report.firstRejects.slice(0, 2)).toEqual(
        badText === undefined
          ? []
          : [7, BAD_EVERY + 7].map((id) => ({ line: id + FIRST_LINE[delivery], reason: `column id: 'x${id}' is not an integer`, raw: expect.stringMatching(badText(id)) })),
      );
      expect(report.peakMb).toBeLessThan(PEAK_MB);
      // While it landed, the process had its own spill folder (and only that one); once closed, nothing is left.
      expect(report.spillFoldersOpen).toHaveLength(1);
      expect(report.spillFoldersOpen[0]).toMatch(/^lakeswap-landing-\d+-/);
      expect(left).toEqual([]);
    }, 120_000);
  }
});
