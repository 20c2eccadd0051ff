import { performance } from "node:perf_hooks";

/** Timings of one measured operation, in milliseconds. */
export interface Timing {
  readonly medianMs: number;
  readonly minMs: number;
  readonly maxMs: number;
  readonly samplesMs: readonly number[];
}

/** The wall time `work` takes, in milliseconds. */
export async function timeMs(work: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await work();
  return performance.now() - started;
}

/** The median of a non-empty list of numbers. */
export function median(values: readonly number[]): number {
  if (values.length === 0) throw new Error("the median of no samples is undefined");
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  const upper = sorted[middle] as number;
  return sorted.length % 2 === 1 ? upper : ((sorted[middle - 1] as number) + upper) / 2;
}

/** Summarizes samples (in milliseconds) as median, min and max. */
export function summarize(samplesMs: readonly number[]): Timing {
  return { medianMs: median(samplesMs), minMs: Math.min(...samplesMs), maxMs: Math.max(...samplesMs), samplesMs };
}
