import type { ReplaceFigures } from "./replace-bench.js";
import type { Timing } from "./stats.js";
import type { SwapFigures } from "./swap-bench.js";

/** Where the benchmark ran. */
export interface Machine {
  readonly cpus: number;
  readonly cpuModel: string;
  readonly platform: string;
  readonly node: string;
  readonly duckdb: string;
  readonly tmpdir: string;
}

/** Everything one run of the benchmark measured. */
export interface BenchReport {
  readonly machine: Machine;
  readonly replace: ReplaceFigures;
  readonly swap: SwapFigures;
  readonly verdict: { readonly swapGrowsWithSize: boolean; readonly maxFlatRatio: number; readonly message: string };
}

/** Above this 1M/1k ratio of swap medians, the swap is taken to grow with partition size. */
export const MAX_FLAT_RATIO = 1.25;

/** Puts the figures together with the verdict on whether the swap grows with partition size. */
export function buildReport(machine: Machine, replace: ReplaceFigures, swap: SwapFigures): BenchReport {
  const grows = swap.ratio > MAX_FLAT_RATIO;
  const message = grows
    ? `swap time GROWS with partition size: ratio ${swap.ratio.toFixed(2)} (above ${MAX_FLAT_RATIO})`
    : `swap time does not grow with partition size: ratio ${swap.ratio.toFixed(2)}`;
  return { machine, replace, swap, verdict: { swapGrowsWithSize: grows, maxFlatRatio: MAX_FLAT_RATIO, message } };
}

/** The report as one JSON document, times rounded to the microsecond. */
export function renderJson(report: BenchReport): string {
  const round = (_key: string, value: unknown): unknown =>
    typeof value === "number" && !Number.isInteger(value) ? Math.round(value * 1000) / 1000 : value;
  return `${JSON.stringify(report, round, 2)}\n`;
}

/** The report as readable tables: machine, timings, ratios, verdict. */
export function renderText(report: BenchReport): string {
  const { machine, replace, swap } = report;
  const rows = count(replace.rows);
  const small = `${count(swap.small.rows)}-row partition`;
  const large = `${count(swap.large.rows)}-row partition`;
  const timings = renderTable(
    ["measure", "median", "min", "max", "n"],
    [
      timingRow(`replace ${rows} rows · lakeswap replacePartition`, replace.lakeswap),
      timingRow(`replace ${rows} rows · direct DuckDB COPY`, replace.direct),
      timingRow(`swap (pointer move) · ${small}`, swap.small.move),
      timingRow(`swap (pointer move) · ${large}`, swap.large.move),
      timingRow(`first move onto a just-written run · ${small}`, swap.small.freshMove),
      timingRow(`first move onto a just-written run · ${large}`, swap.large.freshMove),
    ],
  );
  const ratios = renderTable(
    ["ratio", "value"],
    [
      ["replace overhead · lakeswap / direct", times(replace.ratio)],
      [`swap · ${count(swap.large.rows)} rows / ${count(swap.small.rows)} rows`, times(swap.ratio)],
      [`first move onto a just-written run · ${count(swap.large.rows)} / ${count(swap.small.rows)}`, times(swap.freshRatio)],
    ],
  );
  const header =
    `lakeswap bench · ${machine.cpus} cpus (${machine.cpuModel}) · ${machine.platform} · ` +
    `node ${machine.node} · duckdb ${machine.duckdb} · temp dir ${machine.tmpdir}`;
  const note =
    `medians: replace of ${replace.repeat} rounds after 1 warm-up; swap of ${swap.moves} alternating moves; ` +
    `first move of ${swap.freshMoves} just-written runs (includes the fsync of the run's files)`;
  return [header, note, "", timings, "", ratios, "", report.verdict.message, ""].join("\n");
}

function timingRow(label: string, timing: Timing): string[] {
  return [label, ms(timing.medianMs), ms(timing.minMs), ms(timing.maxMs), String(timing.samplesMs.length)];
}

/** A table with a left-aligned first column and right-aligned others. */
function renderTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const all = [header, ...rows];
  const widths = header.map((_, column) => Math.max(...all.map((row) => (row[column] ?? "").length)));
  const line = (row: readonly string[]): string =>
    row
      .map((cell, column) => (column === 0 ? cell.padEnd(widths[column] ?? 0) : cell.padStart(widths[column] ?? 0)))
      .join("   ")
      .trimEnd();
  const rule = widths.map((width) => "-".repeat(width)).join("   ");
  return [line(header), rule, ...rows.map(line)].join("\n");
}

function ms(value: number): string {
  return `${value.toFixed(value < 100 ? 2 : 1)} ms`;
}

function times(ratio: number): string {
  return `${ratio.toFixed(2)}×`;
}

function count(value: number): string {
  return value.toLocaleString("en-US");
}
