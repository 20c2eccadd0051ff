import type { Pointer } from "../../catalog/catalog.js";
import type { BuildResult } from "../../engine/engine.js";
import type { LandedDelivery, LandedPartition } from "../../landing/landing.js";
import { LakeswapError } from "../../model/errors.js";
import { partitionPath, type Partition } from "../../model/partition.js";
import type { TableDefinition } from "../../model/table.js";
import { mapLimited } from "../../shared/map-limited.js";
import { discardRun, type LakeContext } from "../runs.js";
import { carryCurrentRun } from "./append-carry.js";

/** Store calls made at once. */
const IO_CONCURRENCY = 16;

/** A run of a batch to write from a landed delivery. */
export interface LandedPlanned {
  readonly item: {
    readonly partition: Partition;
    readonly landedFiles?: readonly string[];
    readonly landedAfter?: Readonly<Record<string, number>>;
    readonly landedRetaken?: Readonly<Record<string, readonly number[]>>;
    readonly landedRows?: number;
  };
  readonly path: string;
  readonly current?: Pointer;
  readonly runId: string;
  readonly prefix: string;
}

/**
 * Errors that stop a whole batch, not one partition: without the lease nothing may move, and refused access or a
 * full disk fails every partition alike.
 */
export function stopsBatch(error: unknown): boolean {
  return error instanceof LakeswapError && (error.code === "LEASE_LOST" || error.code === "ACCESS_DENIED" || error.code === "NO_SPACE");
}

/**
 * Writes a batch's runs from a landed delivery in one pass (each run its partition's rows, or those of some files:
 * `landedFiles`); with `carryCurrent` (append), each new run also holds its current run's files. A run that could not
 * be written is discarded and reported through `fail`, unless the error stops the batch.
 */
export async function buildLandedRuns<P extends LandedPlanned>(
  ctx: LakeContext,
  table: TableDefinition,
  planned: P[],
  build: { readonly delivery: LandedDelivery; readonly carryCurrent?: boolean },
  fail: (p: P, error: unknown) => void,
): Promise<{ planned: P; result: BuildResult; builtAt: number }[]> {
  let results: BuildResult[];
  try {
    results = await ctx.landing.writeLandedRuns({
      table,
      delivery: build.delivery,
      runs: planned.map((p) => ({ partition: p.item.partition, runId: p.runId, runPrefix: p.prefix, files: p.item.landedFiles, after: p.item.landedAfter, retaken: p.item.landedRetaken })),
    });
  } catch (error) {
    await mapLimited(planned, IO_CONCURRENCY, (p) => discardRun(ctx, p.prefix));
    if (stopsBatch(error)) throw error;
    for (const p of planned) fail(p, error);
    return [];
  }
  const landedOf = new Map(build.delivery.partitions.map((landed) => [partitionPath(landed.partition), landed]));
  const carried = new Map<string, number>();
  if (build.carryCurrent) {
    const carry = await mapLimited(planned, IO_CONCURRENCY, async (p) => {
      try {
        carried.set(p.path, await carryCurrentRun(ctx, table, p));
        return undefined;
      } catch (error) {
        await discardRun(ctx, p.prefix);
        if (stopsBatch(error)) throw error;
        fail(p, error);
        return p.path;
      }
    });
    const failed = new Set(carry.filter((path): path is string => path !== undefined));
    planned = planned.filter((p) => !failed.has(p.path));
    results = results.filter((_, i) => !carry[i]);
  }
  const builtAt = Date.now();
  // The landing's own count of each partition's rows (plus the rows carried over) is what the audit checks the files against.
  return planned.map((p, i) => ({
    planned: p,
    result: { ...(results[i] ?? { files: [] }), rows: (p.item.landedRows ?? landedRows(landedOf.get(p.path), p.item.landedFiles)) + (carried.get(p.path) ?? 0) },
    builtAt,
  }));
}

/** The rows a run takes of a landed partition: all of them, or those of the files it takes. */
function landedRows(landed: LandedPartition | undefined, files: readonly string[] | undefined): number {
  if (!landed || !files) return landed?.rows ?? 0;
  return (landed.parts ?? []).filter((part) => files.includes(part.file)).reduce((sum, part) => sum + part.rows, 0);
}
