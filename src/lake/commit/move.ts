import { PointerBatchError, type Catalog, type Fence, type PointerMove } from "../../catalog/catalog.js";
import type { Partition } from "../../model/partition.js";
import type { TableDefinition } from "../../model/table.js";

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
