import { faultPoint } from "../../shared/faults.js";
import { partitionPath, type Partition } from "../../model/partition.js";
import type { TableDefinition } from "../../model/table.js";
import { swapBatch } from "../commit/swap.js";
import { notIngested, partitionOf, type HasLakeParts, type LakeParts, type PartitionInput } from "../parts.js";
import { collectAfterSwap, type PartitionGcReport } from "./gc.js";

/** What one partition replace did. */
export interface ReplaceResult {
  readonly table: string;
  readonly partition: string;
  readonly runId: string;
  readonly previousRunId?: string;
  readonly rows: number;
  readonly previousRows?: number;
  readonly bytes: number;
  readonly seconds: number;
  readonly gc: PartitionGcReport;
}

/** Options of one partition replace. */
export interface ReplaceOptions {
  readonly select: string;
  /** Accept a build of 0 rows for a partition that has rows (default false). */
  readonly allowEmpty?: boolean;
  /** Recorded with the run and moved with the pointer. */
  readonly signature?: string;
  /** The transform's fingerprint, recorded with the run (derived layers). */
  readonly fingerprint?: string;
  /** The signed inputs, recorded with the run (`table/partition=signature`). */
  readonly inputs?: readonly string[];
  /** Restricts what the SELECT sees of some tables to the given partitions (a derived partition's declared inputs). */
  readonly inputPartitions?: readonly { readonly table: string; readonly partitions: readonly string[] }[];
  /** The SELECT reads a landed delivery (raw layer, dead letters). */
  readonly landed?: boolean;
  /** The lake tables the SELECT may read (default: every table). */
  readonly readable?: readonly string[];
  /** Leave GC to the caller, who collects once for many replaces (`LakeWriter.collectGarbage`); `gc` is then empty. */
  readonly deferGc?: boolean;
  /** Told the planned move as the build starts, so a sync can record its intent; awaited before the pointer moves (../commit/swap.ts). */
  readonly beforeSwap?: (move: { readonly runId: string; readonly previousRunId?: string }) => Promise<void>;
}

/**
 * Replaces one partition: lease -> build into a fresh run prefix -> audit ->
 * move the pointer -> write the run's manifest -> GC -> release. A failure at
 * any step before the pointer moves leaves readers on the old run.
 */
export async function replacePartition(lake: HasLakeParts, tableName: string, partitionInput: PartitionInput, options: ReplaceOptions): Promise<ReplaceResult> {
  const parts = lake.parts;
  const table = notIngested(await parts.table(tableName), "replaced");
  const partition = partitionOf(table, partitionInput);
  return parts.withLease(table.name, `replace ${table.name}/${partitionPath(partition)}`, () => replaceOne(parts, table, partition, options), { catalogFile: "settled" });
}

/** One partition as a batch of one, under the lease the caller holds. */
export async function replaceOne(parts: LakeParts, table: TableDefinition, partition: Partition, options: ReplaceOptions): Promise<ReplaceResult> {
  const [outcome] = await swapBatch(
    parts,
    table,
    [{ partition, signature: options.signature, fingerprint: options.fingerprint, inputs: options.inputs, select: options.select, inputPartitions: options.inputPartitions }],
    {
      build: { kind: "select", landed: options.landed, readable: options.readable },
      allowEmpty: options.allowEmpty,
      previousRows: true,
      afterLeftovers: true,
      beforeSwap: options.beforeSwap ? async ([move]) => move && options.beforeSwap?.(move) : undefined,
    },
  );
  if (!outcome || outcome.error !== undefined || outcome.runId === undefined) throw outcome?.error ?? new Error("the replace did not run");
  const gc = options.deferGc
    ? { table: table.name, partition: outcome.partition, kept: [], removed: [] }
    : ((await collectAfterSwap(parts, table, [partition]))[0] as PartitionGcReport);
  faultPoint("before-release");
  return {
    table: table.name,
    partition: outcome.partition,
    runId: outcome.runId,
    previousRunId: outcome.previousRunId,
    rows: outcome.rows ?? 0,
    previousRows: outcome.previousRows,
    bytes: outcome.bytes ?? 0,
    seconds: outcome.seconds,
    gc,
  };
}
