import { PointerBatchError, type Catalog, type Fence, type Pointer, type PointerMove } from "../../catalog/catalog.js";
import { partitionPath, type Partition } from "../../model/partition.js";
import type { TableDefinition } from "../../model/table.js";
import type { LakeContext } from "../runs.js";

/**
 * Moves pointers in the catalog's batches (`capabilities.maxBatchUpdate` per call; Glue: 100), `fence` right
 * before each call. A batch whose entries partly failed does not stop the others: every batch is sent, and
 * then one PARTIAL_FAILURE names every pointer that did not move. Any other error stops at once (a lost lease:
 * no further batch is sent).
 */
export async function movePointers(catalog: Catalog, table: TableDefinition, moves: readonly PointerMove[], fence?: Fence): Promise<void> {
  await inBatches(moves, catalog.capabilities.maxBatchUpdate, "move", table.name, (batch) => catalog.movePointers(table, batch, fence));
}

/** Removes pointers in the catalog's batches (`capabilities.maxBatchRemove`; Glue: 25), as `movePointers` moves them. */
export async function removePointers(catalog: Catalog, table: TableDefinition, partitions: readonly Partition[], fence?: Fence): Promise<void> {
  await inBatches(partitions, catalog.capabilities.maxBatchRemove, "remove", table.name, (batch) => catalog.removePointers(table, batch, fence));
}

async function inBatches<T>(
  items: readonly T[],
  size: number,
  action: PointerBatchError["action"],
  table: string,
  send: (batch: readonly T[]) => Promise<void>,
): Promise<void> {
  if (items.length === 0) return;
  const failed: string[] = [];
  for (let start = 0; start < items.length; start += size) {
    try {
      await send(items.slice(start, start + size));
    } catch (error) {
      if (!(error instanceof PointerBatchError)) throw error;
      failed.push(...error.failed);
    }
  }
  if (failed.length > 0) throw new PointerBatchError(action, table, failed, items.length);
}

/** The pointers of the given partitions: one listing of the table's pointers for a batch, single reads for a few. */
export async function currentPointers(ctx: Pick<LakeContext, "catalog">, table: TableDefinition, partitions: readonly Partition[]): Promise<Map<string, Pointer>> {
  const pointers = new Map<string, Pointer>();
  if (partitions.length <= 4) {
    for (const partition of partitions) {
      const pointer = await ctx.catalog.getPointer(table, partition);
      if (pointer) pointers.set(partitionPath(partition), pointer);
    }
    return pointers;
  }
  const wanted = new Set(partitions.map(partitionPath));
  for (const pointer of await ctx.catalog.listPointers(table)) {
    const path = partitionPath(pointer.partition);
    if (wanted.has(path)) pointers.set(path, pointer);
  }
  return pointers;
}
