import { promises as fs } from "node:fs";
import path from "node:path";
import { LocalCatalog } from "../src/catalog/local-catalog.js";
import { parsePartition, type Partition } from "../src/model/partition.js";
import { newRunId } from "../src/model/run-id.js";
import { openEmbeddedLake } from "../src/open/open-lake.js";
import { summarize, timeMs, type Timing } from "./stats.js";
import { BENCH_TABLE, generatingSelect } from "./workload.js";
import { METADATA_FOLDERS, runLocation } from "../src/lake/layout.js";
import { replacePartition } from "../src/lake/operations/replace.js";

/** Pointer-move timings for one partition size. */
interface SwapSize {
  readonly rows: number;
  /** Moves between two runs already on disk: the swap itself. */
  readonly move: Timing;
  /** First move onto a just-written run: the swap plus the fsync of that run's files. */
  readonly freshMove: Timing;
}

/** What the swap benchmark measured. */
export interface SwapFigures {
  readonly moves: number;
  readonly freshMoves: number;
  readonly small: SwapSize;
  readonly large: SwapSize;
  /** large / small median of the swap itself; close to 1 when the swap does not grow with size. */
  readonly ratio: number;
  /** large / small median of the first move onto a just-written run. */
  readonly freshRatio: number;
}

const WARM_UP_MOVES = 4;

/** A partition with two complete runs, whose pointer goes back and forth between them. */
class PreparedPartition {
  private current: string;

  constructor(
    private readonly catalog: LocalCatalog,
    private readonly lakeDir: string,
    readonly rows: number,
    readonly partition: Partition,
    private readonly runs: readonly [string, string],
  ) {
    this.current = runs[1];
  }

  /** Moves the pointer to the other of the two runs. */
  async alternate(): Promise<void> {
    const [first, second] = this.runs;
    await this.moveTo(this.current === first ? second : first);
  }

  /** Copies the current run into a new run folder (its pages not yet on disk) and returns its id. */
  async writeFreshRun(): Promise<string> {
    const runId = newRunId();
    await fs.cp(this.runDir(this.current), this.runDir(runId), { recursive: true });
    return runId;
  }

  /** Moves the pointer to `runId`. */
  async moveTo(runId: string): Promise<void> {
    const location = runLocation(this.catalog, BENCH_TABLE, this.partition, runId);
    await this.catalog.movePointers(BENCH_TABLE, [{ partition: this.partition, runId, location, previousRunId: this.current, kind: "swap" }]);
    this.current = runId;
  }

  private runDir(runId: string): string {
    return path.join(this.lakeDir, ...runLocation(this.catalog, BENCH_TABLE, this.partition, runId).split("/").filter(Boolean));
  }
}

/** Times the catalog pointer move in a partition of `smallRows` and one of `largeRows`, interleaved. */
export async function benchSwap(
  workDir: string,
  sizes: { readonly smallRows: number; readonly largeRows: number },
  counts: { readonly moves: number; readonly freshMoves: number },
  progress: (message: string) => void,
): Promise<SwapFigures> {
  const lakeDir = path.join(workDir, "swap-lake");
  const catalog = new LocalCatalog(lakeDir, { folders: METADATA_FOLDERS });
  const small = await preparePartition(catalog, lakeDir, "day=2026-11-01", sizes.smallRows, progress);
  const large = await preparePartition(catalog, lakeDir, "day=2026-11-02", sizes.largeRows, progress);

  progress(`swap: ${counts.moves} pointer moves per partition (after ${WARM_UP_MOVES} warm-up moves)`);
  const moves = await timeInterleaved([small, large], counts.moves, (p) => p.alternate());
  progress(`swap: ${counts.freshMoves} first moves onto just-written runs per partition`);
  const fresh = await timeFreshMoves([small, large], counts.freshMoves);

  const figures = (p: PreparedPartition, index: number): SwapSize => ({
    rows: p.rows,
    move: summarize(moves[index] ?? []),
    freshMove: summarize(fresh[index] ?? []),
  });
  const smallFigures = figures(small, 0);
  const largeFigures = figures(large, 1);
  return {
    moves: counts.moves,
    freshMoves: counts.freshMoves,
    small: smallFigures,
    large: largeFigures,
    ratio: largeFigures.move.medianMs / smallFigures.move.medianMs,
    freshRatio: largeFigures.freshMove.medianMs / smallFigures.freshMove.medianMs,
  };
}

/** Builds two runs of `rows` rows in one partition through lakeswap. */
async function preparePartition(
  catalog: LocalCatalog,
  lakeDir: string,
  spec: string,
  rows: number,
  progress: (message: string) => void,
): Promise<PreparedPartition> {
  progress(`swap: building two runs of ${rows.toLocaleString("en-US")} rows in ${spec}`);
  const lake = await openEmbeddedLake(lakeDir);
  try {
    await lake.createTable(BENCH_TABLE);
    const select = generatingSelect(rows);
    const first = await replacePartition(lake, BENCH_TABLE.name, spec, { select });
    const second = await replacePartition(lake, BENCH_TABLE.name, spec, { select });
    const partition = parsePartition(spec, BENCH_TABLE.partitionKeys);
    return new PreparedPartition(catalog, lakeDir, rows, partition, [first.runId, second.runId]);
  } finally {
    await lake.close();
  }
}

/** Times `move` `count` times on each partition, taking turns, after a few untimed warm-up moves. */
async function timeInterleaved(
  partitions: readonly PreparedPartition[],
  count: number,
  move: (p: PreparedPartition) => Promise<void>,
): Promise<number[][]> {
  for (let i = 0; i < WARM_UP_MOVES; i++) for (const p of partitions) await move(p);
  const samples = partitions.map((): number[] => []);
  for (let i = 0; i < count; i++) {
    for (const [index, p] of partitions.entries()) samples[index]?.push(await timeMs(() => move(p)));
  }
  return samples;
}

/** Times the first move onto a freshly copied run, `count` times per partition; only the move is timed. */
async function timeFreshMoves(partitions: readonly PreparedPartition[], count: number): Promise<number[][]> {
  const samples = partitions.map((): number[] => []);
  for (let i = 0; i < count; i++) {
    for (const [index, p] of partitions.entries()) {
      const runId = await p.writeFreshRun();
      samples[index]?.push(await timeMs(() => p.moveTo(runId)));
    }
  }
  return samples;
}
