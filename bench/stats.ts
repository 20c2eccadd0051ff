import { spawnSync } from "node:child_process";
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

/**
 * Writes every dirty page of the machine to disk (sync(1)) before a timed run, so that no run pays for the
 * write-back of what an earlier step wrote (a delivery just generated, the raw COPY's unflushed files, a lake removed).
 */
export function settleDisk(): void {
  spawnSync("sync", { stdio: "ignore" });
}
