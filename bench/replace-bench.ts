import { promises as fs } from "node:fs";
import path from "node:path";
import type { Lake } from "../src/lake/lake.js";
import { openEmbeddedLake } from "../src/open/open-lake.js";
import { DirectCopy } from "./direct-copy.js";
import { summarize, timeMs, type Timing } from "./stats.js";
import { BENCH_TABLE, generatingSelect } from "./workload.js";
import { replacePartition } from "../src/lake/operations/replace.js";

/** What the replace benchmark measured. */
export interface ReplaceFigures {
  readonly rows: number;
  readonly repeat: number;
  readonly lakeswap: Timing;
  readonly direct: Timing;
  /** lakeswap median / direct median: the overhead of a zero-downtime replace. */
  readonly ratio: number;
}

const PARTITION = "day=2026-11-01";

/** Times lake.replacePartition against the same COPY run directly in DuckDB, one warm-up then `repeat` rounds. */
export async function benchReplace(
  workDir: string,
  rows: number,
  repeat: number,
  progress: (message: string) => void,
): Promise<ReplaceFigures> {
  const select = generatingSelect(rows);
  const directDir = path.join(workDir, "direct");
  await fs.mkdir(directDir, { recursive: true });
  const lake = await openEmbeddedLake(path.join(workDir, "replace-lake"));
  const direct = await DirectCopy.open();
  try {
    await lake.createTable(BENCH_TABLE);
    const replace = (): Promise<void> => replaceOnce(lake, select, rows);
    let copies = 0;
    const copy = (): Promise<void> => copyOnce(direct, select, path.join(directDir, `copy-${copies++}.parquet`), rows);

    progress(`replace: warm-up (${rows.toLocaleString("en-US")} rows, lakeswap and direct)`);
    await replace();
    await copy();
    const lakeswapMs: number[] = [];
    const directMs: number[] = [];
    // Interleaved, so drift of the machine weighs on both sides alike.
    for (let round = 1; round <= repeat; round++) {
      progress(`replace: round ${round}/${repeat}`);
      lakeswapMs.push(await timeMs(replace));
      directMs.push(await timeMs(copy));
    }
    const lakeswap = summarize(lakeswapMs);
    const directTiming = summarize(directMs);
    return { rows, repeat, lakeswap, direct: directTiming, ratio: lakeswap.medianMs / directTiming.medianMs };
  } finally {
    direct.close();
    await lake.close();
  }
}

async function replaceOnce(lake: Lake, select: string, rows: number): Promise<void> {
  const result = await replacePartition(lake, BENCH_TABLE.name, PARTITION, { select });
  if (result.rows !== rows) throw new Error(`lakeswap wrote ${result.rows} rows, expected ${rows}`);
}

async function copyOnce(direct: DirectCopy, select: string, file: string, rows: number): Promise<void> {
  const written = await direct.copy(select, file);
  if (written !== rows) throw new Error(`the direct COPY wrote ${written} rows, expected ${rows}`);
}
