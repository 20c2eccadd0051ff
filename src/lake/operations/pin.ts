import { pinKey } from "../layout.js";
import { partitionOf, type HasLakeParts, type PartitionInput } from "../parts.js";

/** Marks a partition pinned: syncs leave it as it is (e.g. after a deliberate rollback). */
export async function pinPartition(lake: HasLakeParts, tableName: string, partitionInput: PartitionInput, reason = ""): Promise<void> {
  const table = await lake.parts.table(tableName);
  const partition = partitionOf(table, partitionInput, true);
  await lake.parts.store.put(pinKey(table.name, partition), JSON.stringify({ pinnedAt: new Date().toISOString(), reason }));
}

/** Removes a partition's pin; the next sync decides about it again. True when it was pinned. */
export async function unpinPartition(lake: HasLakeParts, tableName: string, partitionInput: PartitionInput): Promise<boolean> {
  const table = await lake.parts.table(tableName);
  const key = pinKey(table.name, partitionOf(table, partitionInput, true));
  const existed = (await lake.parts.store.get(key)) !== undefined;
  await lake.parts.store.delete([key]);
  return existed;
}
