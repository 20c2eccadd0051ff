import { glueColumnType } from "../model/column-types.js";
import type { TableDefinition } from "../model/table.js";

/** Partition column types Athena reads as a wider table type (its "compatible data types"); any other difference fails its queries. */
export const ATHENA_WIDENS: Readonly<Record<string, readonly string[]>> = { tinyint: ["smallint", "int", "bigint"], smallint: ["int", "bigint"], int: ["bigint"], float: ["double"] };

/**
 * Why Athena could not read a table rebuilt by swap from `existing` to `wanted` while its pointers move (each moved
 * partition with `wanted`'s columns as its own, the table keeping `existing`'s until the last step), or undefined
 * where it can. Athena reads a partition's column under the table's column of the same name only where the types
 * are the same or it widens the partition's to the table's (ATHENA_WIDENS): a rebuild that narrows an integer or a
 * float passes, one that changes a DECIMAL's scale or precision, or a type to another kind, does not. It matches
 * columns by name, so a renamed column would read NULL in the partitions not moved yet. A change of partition keys is
 * no rebuild by swap: its new layout is read whole or not at all.
 */
export function athenaRebuildRefusal(existing: TableDefinition, wanted: TableDefinition): string | undefined {
  if (existing.partitionKeys.join(",") !== wanted.partitionKeys.join(",")) {
    // A new layout is built aside, in a Glue table of its own, and the table switched to it in one step (a view over it,
    // ./glue-catalog.ts putView): readers never read a partition of each. The Iceberg table beside it is not evolved on AWS.
    return wanted.iceberg || existing.iceberg
      ? "its partition keys change, and on AWS lakeswap does not give an iceberg: true table's Glue Iceberg table a new partition spec yet (the embedded lake does)"
      : undefined;
  }
  // A rebuild's renamed column is the one it neither had nor adds (model/schema-change.ts marks added ones).
  const renamed = wanted.columns.filter((c) => !c.added && !existing.columns.some((e) => e.name === c.name)).map((c) => c.name);
  if (renamed.length > 0) {
    return `Athena reads a partition's columns by name, so a renamed column (${renamed.join(", ")}) would read NULL in every partition not moved yet while the pointers move`;
  }
  const unreadable = wanted.columns.flatMap((column) => {
    const before = existing.columns.find((c) => c.name === column.name);
    if (!before) return [];
    const [was, now] = [glueColumnType(before.type), glueColumnType(column.type)];
    return was === now || ATHENA_WIDENS[now]?.includes(was) ? [] : [`column ${column.name} (${now} in the rebuilt partitions, ${was} in the table until its last step)`];
  });
  if (unreadable.length === 0) return undefined;
  return `Athena cannot read a partition under a table whose column has a type it does not widen the partition's to, so queries would fail while the pointers move: ${unreadable.join(", ")}`;
}
