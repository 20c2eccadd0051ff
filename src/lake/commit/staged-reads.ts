import { randomBytes } from "node:crypto";
import type { PointerMove } from "../../catalog/catalog.js";
import type { PartitionSnapshot, StagedInput, TableSnapshot } from "../../engine/engine.js";
import { errorMessage } from "../../model/errors.js";
import { partitionPath } from "../../model/partition.js";
import type { TableDefinition } from "../../model/table.js";
import { runPrefix, type LakeContext } from "../runs.js";
import { isScratchTableOf, scratchTableName } from "../scratch-tables.js";
import { movePointers } from "./move.js";

/** The partitions of some tables a build reads (its declared inputs). */
type InputPartitions = readonly { readonly table: string; readonly partitions: readonly string[] }[] | undefined;

/** A batch's scratch tables: what each build reads from them, and their removal when the batch is built. */
export interface StagedReads {
  /** The staged partitions one build reads, by table, with the scratch table holding them; undefined when it reads none. */
  of(inputs: InputPartitions): StagedInput[] | undefined;
  /** Drops the scratch tables (a failure is a warning: the next held sync of the table, or lakeswap gc, drops them). */
  drop(): Promise<void>;
}

/**
 * A held sync's staged runs, made readable to an engine that reads tables through the catalog (Athena reads
 * Glue, `readsRunFiles: false`): for each table the batch may read that has staged runs, a scratch table with
 * its columns and partition keys whose pointers are the staged runs (`<table>__held_<6 hex>`, ../scratch-tables.ts).
 * Undefined where there is nothing to stage or the engine reads the snapshot's run files (DuckDB: `overlaid`).
 * Called under the leases of the staged tables (a sync stages only tables it writes), so scratch tables a killed
 * sync left over them are dropped first: no live writer can be reading them.
 */
export async function stagedReads(
  ctx: LakeContext,
  sources: readonly TableSnapshot[],
  overlay: ReadonlyMap<string, ReadonlyMap<string, PartitionSnapshot>> | undefined,
): Promise<StagedReads | undefined> {
  if (ctx.engine.capabilities.readsRunFiles || !overlay) return undefined;
  const tables = sources.flatMap(({ table }) => {
    const runs = [...(overlay.get(table.name)?.values() ?? [])];
    return runs.length > 0 ? [{ table, runs }] : [];
  });
  if (tables.length === 0) return undefined;
  // Best effort: a catalog that cannot be listed (another table's broken definition) must not stop the build; gc drops them too.
  await dropLeftovers(ctx, tables.map((t) => t.table.name)).catch((error: unknown) => process.emitWarning(`could not drop leftover scratch tables: ${errorMessage(error)}`));
  const token = randomBytes(3).toString("hex");
  const created: string[] = [];
  const drop = async (): Promise<void> => {
    for (const name of created.splice(0)) {
      await ctx.catalog.dropTable(name).catch((error: unknown) => process.emitWarning(`could not drop the scratch table ${name}: ${errorMessage(error)}; lakeswap gc will`));
    }
  };
  const staged: { table: string; scratch: string; partitions: string[] }[] = [];
  try {
    for (const { table, runs } of tables) {
      const scratch = scratchDefinition(table, scratchTableName(table.name, token));
      created.push(scratch.name);
      await ctx.catalog.createTable(scratch);
      const moves = runs.map((run): PointerMove => ({ partition: run.partition, runId: run.runId, location: runPrefix(ctx.catalog, table, run.partition, run.runId), kind: "swap" }));
      await movePointers(ctx.catalog, scratch, moves);
      staged.push({ table: table.name, scratch: scratch.name, partitions: runs.map((run) => partitionPath(run.partition)) });
    }
  } catch (error) {
    await drop();
    throw error;
  }
  return {
    of: (inputs) => {
      const reads = staged.flatMap((s) => {
        const limit = inputs?.find((l) => l.table === s.table);
        const partitions = limit ? s.partitions.filter((p) => limit.partitions.includes(p)) : s.partitions;
        return partitions.length > 0 ? [{ ...s, partitions }] : [];
      });
      return reads.length > 0 ? reads : undefined;
    },
    drop,
  };
}

/** Drops the scratch tables over `tables` a killed sync left behind (lakeswap gc drops them too: ../operations/gc.ts). */
async function dropLeftovers(ctx: Pick<LakeContext, "catalog">, tables: readonly string[]): Promise<void> {
  const names = (await ctx.catalog.listTables()).map((t) => t.name).filter((name) => tables.some((table) => isScratchTableOf(name, table)));
  for (const name of names) await ctx.catalog.dropTable(name);
}

/** A scratch table's definition: the table's columns, keys and compression, nothing that makes the catalog do more (Iceberg, ingest). */
function scratchDefinition(table: TableDefinition, name: string): TableDefinition {
  return { name, columns: table.columns, partitionKeys: table.partitionKeys, compression: table.compression };
}
