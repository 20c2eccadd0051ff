import { partitionPath } from "../../model/partition.js";
import type { PartitionSnapshot, TableSnapshot } from "../../engine/engine.js";
import type { SnapshotScope } from "../runs.js";
import { settledPointers, type SettledContext } from "../settled-pointers.js";

/** The partitions of some tables a build may read (a derived partition's declared inputs). */
type InputPartitions = readonly { readonly table: string; readonly partitions: readonly string[] }[] | undefined;

/**
 * What a batch of `select` builds reads: one snapshot of the partitions some build reads (`snapshotScope`), and
 * each build's view of it, restricted to its own declared inputs (`restrictSources`).
 */
export function snapshotScope(planned: readonly { readonly item: { readonly inputPartitions?: InputPartitions } }[], readable: readonly string[] | undefined): SnapshotScope {
  const limits = new Map<string, Set<string>>();
  const unlimited = new Set<string>();
  for (const p of planned) {
    const restricted = new Set((p.item.inputPartitions ?? []).map((l) => l.table));
    for (const limit of p.item.inputPartitions ?? []) {
      const set = limits.get(limit.table) ?? new Set<string>();
      for (const partition of limit.partitions) set.add(partition);
      limits.set(limit.table, set);
    }
    for (const name of readable ?? []) if (!restricted.has(name)) unlimited.add(name);
  }
  const partitions = [...limits].filter(([name]) => !unlimited.has(name)).map(([name, set]) => ({ table: name, partitions: [...set] }));
  return { tables: readable, partitions };
}

/**
 * `snapshotScope`, with the tables the batch reads without their lease (`unleased`: another writer's lookup, an
 * ingested raw table) read at a state a finished batch of their writer left (../settled-pointers.ts).
 */
export function settledScope(ctx: SettledContext, scope: SnapshotScope, unleased: readonly string[] | undefined): SnapshotScope {
  if (!unleased || unleased.length === 0) return scope;
  return { ...scope, settled: { tables: unleased, pointers: (table) => settledPointers(ctx, table) } };
}

/** A build's view of the batch's snapshot: each table it has declared inputs of, only those partitions. */
export function restrictSources(sources: readonly TableSnapshot[], limits: InputPartitions): TableSnapshot[] {
  return sources.map((source) => {
    const limit = limits?.find((l) => l.table === source.table.name);
    if (!limit) return source;
    const wanted = new Set(limit.partitions);
    return { table: source.table, partitions: source.partitions.filter((p) => wanted.has(partitionPath(p.partition))) };
  });
}

/**
 * A snapshot with some runs in place of the current ones: a held sync's staged runs of the tables it builds from
 * (by table, then partition path). A staged partition the snapshot lacks (new in the held sync) is added.
 */
export function overlaid(sources: readonly TableSnapshot[], overlay: ReadonlyMap<string, ReadonlyMap<string, PartitionSnapshot>> | undefined): TableSnapshot[] {
  if (!overlay || overlay.size === 0) return [...sources];
  return sources.map((source) => {
    const staged = overlay.get(source.table.name);
    if (!staged || staged.size === 0) return source;
    const kept = source.partitions.filter((p) => !staged.has(partitionPath(p.partition)));
    return { table: source.table, partitions: [...kept, ...[...staged.values()].filter((p) => p.files.length > 0)] };
  });
}
