import { promises as fs } from "node:fs";
import path from "node:path";
import { quoteIdentifier, quoteLiteral } from "../src/model/sql.js";
import { BenchDuck } from "./duck.js";
import { FLIGHT_COLUMNS, FLIGHTS_DAYS, FLIGHTS_ROWS, flightsSelect, type FlightColumn } from "./flights.js";
import { lakeswapSync, REPO_ROOT, succeeded, tail, type SyncRun } from "./lakeswap-cli.js";
import { runMeasured, type MeasuredRun } from "./measured-process.js";
import { settleDisk, summarize, type Timing } from "./stats.js";
import { ratioAtMost, verdictWord, type Verdict } from "./targets.js";

/*
 * Issue 27, item 1: lakeswap against the floor, per delivery shape (Parquet, CSV).
 *
 * The delivery: the 3,000,000 flights over 182 days, with the departure as text
 * (`dep_ts`, declared TIMESTAMP; the day partition is computed from it) and an
 * `exported_at` text timestamp that the signature ignores, as most exports carry.
 * The resend holds the same rows shuffled, with a new `exported_at`: other bytes,
 * the same content, so nothing is to be built.
 *
 * - first load: `lakeswap sync` on a fresh lake against a durable partitioned
 *   COPY (plain DuckDB in a process of its own, bench/raw-copy.mjs: every column
 *   cast to its declared type, the day computed, COPY ... PARTITION_BY (day),
 *   then fsync of every file and folder it wrote);
 * - resend in new bytes: `lakeswap sync` of the shuffled delivery on that lake
 *   against the floor: one plain-DuckDB query in a process of its own that reads
 *   the file, casts every column to its declared type counting the values that
 *   fail (TRY_CAST; CSV read as text), computes the day, and sums DuckDB's hash()
 *   of the signed columns per day (hash(), not lakeswap's extension: the floor
 *   holds no lakeswap code, and hash() is the cheaper of the two);
 * - resend in the same bytes: the shuffled delivery again (lakeswap knows the
 *   file by its digest): context, no floor.
 */

/** Issue 27's targets: lakeswap / floor. */
const FLOOR_TARGETS = {
  /** lakeswap first load / durable partitioned COPY. */
  firstLoadRatio: 1.5,
  /** lakeswap resend in new bytes / the one-query floor. */
  resendRatio: 1.5,
} as const;

const SHAPES = ["parquet", "csv"] as const;
type Shape = (typeof SHAPES)[number];

interface DeclaredColumn {
  readonly name: string;
  readonly type: FlightColumn["type"] | "TIMESTAMP";
  readonly nullable: boolean;
}

/** The declared columns, in file order: the flights, the departure as a text timestamp, and the volatile export time. */
const COLUMNS: readonly DeclaredColumn[] = [
  { name: "dep_ts", type: "TIMESTAMP", nullable: false },
  ...FLIGHT_COLUMNS.filter((c) => c.name !== "flight_date"),
  { name: "exported_at", type: "TIMESTAMP", nullable: false },
];

/** The column the signature ignores. */
const VOLATILE = "exported_at";

const DAY_EXPRESSION = "strftime(dep_ts, '%Y-%m-%d')";

/** One delivery shape's files and config. */
interface ShapeWorkspace {
  readonly shape: Shape;
  readonly dir: string;
  readonly config: string;
  readonly first: string;
  readonly resend: string;
  readonly fileBytes: number;
}

/** Figures of one delivery shape. */
interface ShapeFloorFigures {
  readonly shape: Shape;
  readonly fileBytes: number;
  readonly firstLoad: { readonly lakeswap: Timing; readonly lakeswapCpu: Timing; readonly copy: Timing; readonly copyCpu: Timing; readonly ratio: number };
  readonly resend: { readonly lakeswap: Timing; readonly lakeswapCpu: Timing; readonly floor: Timing; readonly floorCpu: Timing; readonly ratio: number };
  readonly sameBytes: { readonly lakeswap: Timing; readonly lakeswapCpu: Timing };
  readonly peakRssBytes: { readonly lakeswapFirst: number; readonly copy: number; readonly lakeswapResend: number; readonly floor: number };
  /** Every resend built nothing and skipped every day; the floor found no failed cast and every row. */
  readonly checks: { readonly resendBuiltNothing: boolean; readonly floorRows: number; readonly floorFailures: number };
}

/** What the floor benchmark measured. */
export interface FloorFigures {
  readonly rows: number;
  readonly partitions: number;
  readonly rounds: number;
  readonly shapes: readonly ShapeFloorFigures[];
}

/** Generates the deliveries of each shape, then times lakeswap and its floors, rounds interleaved. */
export async function benchFloors(workDir: string, rounds: number, progress: (message: string) => void): Promise<FloorFigures> {
  const spaces = await prepareShapes(path.join(workDir, "floor"), progress);
  const shapes: ShapeFloorFigures[] = [];
  for (const space of spaces) shapes.push(await benchShape(space, rounds, progress));
  return { rows: FLIGHTS_ROWS, partitions: FLIGHTS_DAYS, rounds, shapes };
}

async function prepareShapes(dir: string, progress: (message: string) => void): Promise<ShapeWorkspace[]> {
  progress(`floor: generating ${FLIGHTS_ROWS.toLocaleString("en-US")} flights with text timestamps, as Parquet and CSV, first and shuffled`);
  const duck = await BenchDuck.open();
  try {
    const departure = "flight_date + to_hours((crs_dep_time // 100)::BIGINT) + to_minutes((crs_dep_time % 100)::BIGINT)";
    await duck.run(
      `CREATE TABLE base AS SELECT strftime(${departure}, '%Y-%m-%d %H:%M:%S') AS dep_ts, * EXCLUDE (flight_date) ` +
        `FROM (${flightsSelect(FLIGHTS_ROWS, FLIGHTS_DAYS)})`,
    );
    const spaces: ShapeWorkspace[] = [];
    for (const shape of SHAPES) {
      const shapeDir = path.join(dir, shape);
      await fs.mkdir(path.join(shapeDir, "deliveries"), { recursive: true });
      const first = path.join(shapeDir, "deliveries", `first.${shape}`);
      const resend = path.join(shapeDir, "deliveries", `resend.${shape}`);
      const options = shape === "parquet" ? "FORMAT PARQUET, COMPRESSION snappy" : "FORMAT CSV, HEADER";
      await duck.run(`COPY (SELECT *, '2026-12-01 06:00:00' AS exported_at FROM base) TO ${quoteLiteral(first)} (${options})`);
      // Shuffled: another order of the same rows, in other bytes (and a new export time).
      await duck.run(
        `COPY (SELECT *, '2026-12-02 06:30:00' AS exported_at FROM base ORDER BY hash(dep_ts, carrier, flight_number, tail_number, origin, dep_delay)) ` +
          `TO ${quoteLiteral(resend)} (${options})`,
      );
      const config = path.join(shapeDir, "lakeswap.yaml");
      await fs.writeFile(config, pipelineYaml(shape));
      spaces.push({ shape, dir: shapeDir, config, first, resend, fileBytes: (await fs.stat(first)).size });
    }
    return spaces;
  } finally {
    duck.close();
  }
}

function pipelineYaml(shape: Shape): string {
  return [
    "datasets:",
    "  flights:",
    "    source:",
    `      format: ${shape}`,
    `      path: deliveries/*.${shape}`,
    "    columns:",
    ...COLUMNS.map((c) => `      ${c.name}: {type: ${c.type}, nullable: ${c.nullable}}`),
    "    partition:",
    `      day: "${DAY_EXPRESSION}"`,
    "    signature:",
    `      ignore: [${VOLATILE}]`,
    "    dead_letter: flights_dead_letter",
    "",
  ].join("\n");
}

async function benchShape(space: ShapeWorkspace, rounds: number, progress: (message: string) => void): Promise<ShapeFloorFigures> {
  const firsts: SyncRun[] = [];
  const copies: MeasuredRun[] = [];
  const resends: SyncRun[] = [];
  const floors: MeasuredRun[] = [];
  const sames: SyncRun[] = [];
  let floorRow: string[] = [];
  for (let round = 1; round <= rounds; round++) {
    const lakeDir = path.join(space.dir, "lake");
    const copyDir = path.join(space.dir, "copy");
    await fs.rm(lakeDir, { recursive: true, force: true });
    const say = (what: string): void => progress(`floor: ${space.shape}, round ${round}/${rounds}: ${what}`);
    // Alternating which goes first, so a warm page cache or a drifting machine favours neither.
    const lakeswapFirst = round % 2 === 1;
    for (const side of lakeswapFirst ? ["lakeswap", "floor"] : ["floor", "lakeswap"]) {
      settleDisk();
      if (side === "lakeswap") {
        say("first load, lakeswap sync");
        firsts.push(sync(await lakeswapSync({ config: space.config, input: space.first, lakeDir }), "first load"));
      } else {
        say("first load, durable partitioned COPY");
        await fs.rm(copyDir, { recursive: true, force: true });
        copies.push(await plainDuckDb(durableCopy(space), copyDir));
        await fs.rm(copyDir, { recursive: true, force: true });
      }
    }
    for (const side of lakeswapFirst ? ["lakeswap", "floor"] : ["floor", "lakeswap"]) {
      settleDisk();
      if (side === "lakeswap") {
        say("resend in new bytes, lakeswap sync");
        resends.push(sync(await lakeswapSync({ config: space.config, input: space.resend, lakeDir }), "resend"));
      } else {
        say("resend in new bytes, the one-query floor");
        const floor = await plainDuckDb(floorQuery(space));
        floors.push(floor);
        floorRow = (JSON.parse(floor.stdout) as { row: string[] }).row;
      }
    }
    say("resend in the same bytes, lakeswap sync");
    sames.push(sync(await lakeswapSync({ config: space.config, input: space.resend, lakeDir }), "resend of the same bytes"));
    await fs.rm(lakeDir, { recursive: true, force: true });
  }
  const wall = (runs: readonly MeasuredRun[]): Timing => summarize(runs.map((r) => r.wallMs));
  const cpu = (runs: readonly MeasuredRun[]): Timing => summarize(runs.map((r) => r.cpuMs));
  const firstLoad = { lakeswap: wall(firsts.map((r) => r.process)), lakeswapCpu: cpu(firsts.map((r) => r.process)), copy: wall(copies), copyCpu: cpu(copies) };
  const resend = { lakeswap: wall(resends.map((r) => r.process)), lakeswapCpu: cpu(resends.map((r) => r.process)), floor: wall(floors), floorCpu: cpu(floors) };
  const built = firsts.every((r) => r.report?.totals.built === FLIGHTS_DAYS && r.report.totals.rows === FLIGHTS_ROWS);
  if (!built) throw new Error(`a ${space.shape} first load did not build ${FLIGHTS_DAYS} partitions of ${FLIGHTS_ROWS} rows`);
  const resendBuiltNothing = [...resends, ...sames].every((r) => r.report?.totals.built === 0 && r.report.totals.skipped === FLIGHTS_DAYS);
  const peak = (runs: readonly MeasuredRun[]): number => Math.max(...runs.map((r) => r.peakRssBytes));
  return {
    shape: space.shape,
    fileBytes: space.fileBytes,
    firstLoad: { ...firstLoad, ratio: firstLoad.lakeswap.medianMs / firstLoad.copy.medianMs },
    resend: { ...resend, ratio: resend.lakeswap.medianMs / resend.floor.medianMs },
    sameBytes: { lakeswap: wall(sames.map((r) => r.process)), lakeswapCpu: cpu(sames.map((r) => r.process)) },
    peakRssBytes: { lakeswapFirst: peak(firsts.map((r) => r.process)), copy: peak(copies), lakeswapResend: peak(resends.map((r) => r.process)), floor: peak(floors) },
    checks: { resendBuiltNothing, floorRows: Number(floorRow[0]), floorFailures: Number(floorRow[1]) },
  };
}

function sync(run: SyncRun, what: string): SyncRun {
  try {
    succeeded(run);
  } catch (error) {
    throw new Error(`the ${what} failed: ${error instanceof Error ? error.message : String(error)}`);
  }
  return run;
}

/** Runs one statement in a plain-DuckDB process of its own (bench/raw-copy.mjs), then fsyncs `durableDir` if given. */
async function plainDuckDb(statement: string, durableDir?: string): Promise<MeasuredRun> {
  const args = [path.join(REPO_ROOT, "bench", "raw-copy.mjs"), statement, ...(durableDir ? [durableDir] : [])];
  const run = await runMeasured(process.execPath, args, { cwd: REPO_ROOT });
  if (run.code !== 0) throw new Error(`plain DuckDB failed (exit ${run.code ?? run.signal}):\n${tail(run.stderr, 20)}`);
  return run;
}

/** The delivery as text columns (CSV) or as stored (Parquet). */
function source(space: ShapeWorkspace, file: string): string {
  return space.shape === "parquet" ? `read_parquet(${quoteLiteral(file)})` : `read_csv(${quoteLiteral(file)}, header = true, all_varchar = true)`;
}

/** The first load's floor: every column cast to its declared type, the day, a partitioned COPY (fsynced by the process). */
function durableCopy(space: ShapeWorkspace): string {
  const casts = COLUMNS.map((c) => `CAST(${quoteIdentifier(c.name)} AS ${c.type}) AS ${quoteIdentifier(c.name)}`).join(", ");
  return (
    `COPY (SELECT *, ${DAY_EXPRESSION} AS day FROM (SELECT ${casts} FROM ${source(space, space.first)})) ` +
    `TO ${quoteLiteral(path.join(space.dir, "copy"))} (FORMAT parquet, PARTITION_BY (day), COMPRESSION snappy)`
  );
}

/** The resend's floor: cast every column counting failures, the day, a hash() sum of the signed columns per day, in one query. */
function floorQuery(space: ShapeWorkspace): string {
  const casts = COLUMNS.map((c) => `TRY_CAST(${quoteIdentifier(c.name)} AS ${c.type}) AS ${quoteIdentifier(c.name)}`);
  const failed = COLUMNS.map((c) => `(TRY_CAST(${quoteIdentifier(c.name)} AS ${c.type}) IS NULL AND ${quoteIdentifier(c.name)} IS NOT NULL)::INTEGER`);
  const signed = COLUMNS.filter((c) => c.name !== VOLATILE).map((c) => quoteIdentifier(c.name));
  const perDay =
    `SELECT ${DAY_EXPRESSION} AS day, count(*) AS n, sum(__failed) AS failed, sum(hash(${signed.join(", ")})::HUGEINT) AS signature ` +
    `FROM (SELECT ${casts.join(", ")}, ${failed.join(" + ")} AS __failed FROM ${source(space, space.resend)}) GROUP BY day`;
  // Every column of every day is used, so no optimiser drops a part of the work.
  return `SELECT sum(n)::BIGINT, sum(failed)::BIGINT, count(*)::BIGINT, bit_xor(hash(day, signature))::VARCHAR FROM (${perDay})`;
}

/** The verdicts of issue 27's floors. */
export function floorVerdicts(figures: FloorFigures): Verdict[] {
  return figures.shapes.flatMap((s) => [
    ratioAtMost(`floor · ${s.shape} first load · lakeswap sync / durable partitioned COPY (process wall times)`, s.firstLoad.ratio, FLOOR_TARGETS.firstLoadRatio),
    ratioAtMost(`floor · ${s.shape} resend in new bytes · lakeswap sync / one-query floor (process wall times)`, s.resend.ratio, FLOOR_TARGETS.resendRatio),
  ]);
}

/** The floor figures as text. */
export function renderFloors(figures: FloorFigures, format: { duration: (ms: number) => string; mb: (bytes: number) => string; gb: (bytes: number) => string }): string {
  const { duration, mb, gb } = format;
  const lines = [
    `lakeswap against its floor · ${figures.rows.toLocaleString("en-US")} flights over ${figures.partitions} days, departure as text (day computed from it), ` +
      `exported_at ignored by the signature · ${figures.rounds} round(s), lakeswap and floor interleaved · each a process of its own`,
    `floors: plain DuckDB (node bench/raw-copy.mjs, no lakeswap code): first load = CAST of every column, day, COPY … PARTITION_BY (day), then fsync; ` +
      `resend = one query: TRY_CAST of every column counting failures (CSV read all_varchar), day, per-day sum of DuckDB's hash() of the signed columns ` +
      `(hash(), not lakeswap's signature extension)`,
    "",
  ];
  const cell = (wall: Timing, cpu: Timing): string => `${duration(wall.medianMs)} (${duration(wall.minMs)}-${duration(wall.maxMs)}), cpu ${duration(cpu.medianMs)}`;
  for (const s of figures.shapes) {
    lines.push(
      `${s.shape} (${mb(s.fileBytes)}):`,
      `  first load           lakeswap ${cell(s.firstLoad.lakeswap, s.firstLoad.lakeswapCpu)}, peak ${gb(s.peakRssBytes.lakeswapFirst)} · ` +
        `durable COPY ${cell(s.firstLoad.copy, s.firstLoad.copyCpu)}, peak ${gb(s.peakRssBytes.copy)} · ` +
        `ratio ${s.firstLoad.ratio.toFixed(2)}×, of cpu ${(s.firstLoad.lakeswapCpu.medianMs / s.firstLoad.copyCpu.medianMs).toFixed(2)}× (target ≤ ${FLOOR_TARGETS.firstLoadRatio.toFixed(2)}×: ${verdictWord(s.firstLoad.ratio <= FLOOR_TARGETS.firstLoadRatio)})`,
      `  resend, new bytes    lakeswap ${cell(s.resend.lakeswap, s.resend.lakeswapCpu)}, peak ${gb(s.peakRssBytes.lakeswapResend)} · ` +
        `floor ${cell(s.resend.floor, s.resend.floorCpu)}, peak ${gb(s.peakRssBytes.floor)} · ` +
        `ratio ${s.resend.ratio.toFixed(2)}×, of cpu ${(s.resend.lakeswapCpu.medianMs / s.resend.floorCpu.medianMs).toFixed(2)}× (target ≤ ${FLOOR_TARGETS.resendRatio.toFixed(2)}×: ${verdictWord(s.resend.ratio <= FLOOR_TARGETS.resendRatio)})`,
      `  resend, same bytes   lakeswap ${cell(s.sameBytes.lakeswap, s.sameBytes.lakeswapCpu)} (the file known by its digest; no floor)`,
      `  checks: every resend built nothing: ${s.checks.resendBuiltNothing ? "yes" : "NO"}; the floor read ${s.checks.floorRows.toLocaleString("en-US")} rows, ${s.checks.floorFailures} failed casts`,
    );
  }
  return lines.join("\n");
}
