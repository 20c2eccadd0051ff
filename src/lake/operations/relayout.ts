import type { Catalog } from "../../catalog/catalog.js";
import type { LandColumn } from "../../landing/landing.js";
import { LakeswapError, errorMessage } from "../../model/errors.js";
import { parseTableDefinition, storageName, type TableDefinition } from "../../model/table.js";
import type { ObjectStore } from "../../store/object-store.js";
import { localCopies } from "../../store/local-copies.js";
import { faultPoint } from "../../shared/faults.js";
import { removePointers } from "../commit/move.js";
import { swapBatch } from "../commit/swap.js";
import type { LakeParts } from "../parts.js";
import { layoutRecordKey, layoutRecordsPrefix, manifestsPrefix, pinsPrefix, runsPrefix } from "../layout.js";
import { currentRuns } from "../runs.js";
import type { PartitionGcReport } from "../retention.js";
import { expireSnapshots } from "./expire-snapshots.js";

/*
 * A change of a table's partition keys (`sync --rebuild-schema`, docs/lake.md "Changing partition keys"). Runs of one
 * layout cannot be moved under other keys one partition at a time: readers would see a partition of each layout at
 * once, or rows twice. So the table is built aside, in a layout of its own (model/table.ts `layout`,
 * `<table>__layout_<token>`: its own pointers, runs and manifests), while every reader keeps reading the old one; once
 * every partition of the new layout is built, one write of the table's definition switches every reader to it. The old
 * layout stays as it was, the target of `rollback --sync` (one write of the definition back).
 */

/** One pointer moved into a new layout, where no partition has a run before (a sync records it as it records a rebuild's: ./rebuild-schema.ts `RebuildMove`). */
interface LayoutMove {
  readonly partition: string;
  readonly runId: string;
}

/** How a raw table's current rows are partitioned under its new keys: as its dataset lands a delivery. */
export interface Repartition {
  readonly columns: readonly LandColumn[];
  /** The new partition keys, each an expression over the columns. */
  readonly partition: readonly { readonly key: string; readonly expression: string }[];
  readonly signatureColumns: readonly string[];
}

/**
 * Refuses a change of partition keys lakeswap cannot make whole, before anything is written: the new layout is built
 * from the table's rows as they are, so a table whose partitions carry more than their rows (a pin) keeps its keys.
 */
export async function refuseRelayout(parts: Pick<LakeParts, "store">, existing: TableDefinition, wanted: TableDefinition): Promise<void> {
  const why = (await parts.store.list(pinsPrefix(existing.name))).length > 0 ? `some of its partitions are pinned (unpin them first: lakeswap pins ${existing.name})` : undefined;
  if (why !== undefined) {
    throw new LakeswapError("CONFLICT", `table '${wanted.name}' cannot change its partition keys: ${why}. Declare it with its partition keys as they are (${existing.partitionKeys.join(", ") || "none"})`);
  }
}

/**
 * Builds the new layout of a raw table (`table`, whose `layout` names it, empty yet) from the current rows of
 * `existing`: every current run's files landed as one Parquet delivery under the new partition keys (each row cast and
 * signed as a delivery's rows are), and every partition it holds written as a run of the new layout, whose pointer
 * moves there (no reader reads it yet). Each batch of moves is recorded first (`intend`), so that the sync's record
 * names them. A derived table's new layout is built by its sync from its inputs instead. Returns the moves.
 */
async function buildLayout(
  parts: LakeParts,
  existing: TableDefinition,
  table: TableDefinition,
  repartition: Repartition,
  record: { readonly intend: (moves: readonly LayoutMove[]) => Promise<void>; readonly moved: (moves: readonly LayoutMove[]) => void },
): Promise<LayoutMove[]> {
  const [snapshot] = await currentRuns(parts, { tables: [existing.name] });
  const files = (snapshot?.partitions ?? []).flatMap((p) => p.files);
  if (files.length === 0) return [];
  const label = `table '${table.name}' under its new partition keys (${table.partitionKeys.join(", ")})`;
  const local = await localCopies(parts.store, files, { kind: "relayout" });
  const delivery = await parts.landing
    .land({ files: local.paths, format: "parquet", header: false, delimiter: ",", ...repartition })
    .catch(async (error: unknown) => {
      await local.release();
      throw new LakeswapError(error instanceof LakeswapError ? error.code : "BUILD_FAILED", `${label}: ${errorMessage(error)}`);
    });
  try {
    const bad = delivery.firstRejects[0];
    if (delivery.rowsRejected > 0) {
      // The rows were the table's: a new key expression that cannot be computed for one of them (a day from a NULL).
      throw new LakeswapError("CONFLICT", `${label}: ${delivery.rowsRejected} of its rows cannot be placed (${bad?.reason ?? "bad row"}); nothing was switched. Declare partition keys every row has a value of`);
    }
    const items = delivery.partitions.map((p) => ({ partition: p.partition, signature: p.signature }));
    let moves: LayoutMove[] = [];
    const outcomes = await swapBatch(parts, table, items, {
      build: { kind: "landed", delivery },
      allowEmpty: true,
      beforeSwap: async (planned) => {
        moves = planned.map((m) => ({ partition: m.partition, runId: m.runId }));
        await record.intend(moves);
      },
    });
    const failed = outcomes.filter((o) => o.error !== undefined);
    if (failed.length > 0) {
      const shown = failed.slice(0, 3).map((o) => `${o.partition} (${errorMessage(o.error)})`).join("; ");
      throw new LakeswapError("BUILD_FAILED", `${label}: ${failed.length} of ${outcomes.length} partitions could not be written: ${shown}; nothing was switched, rerun`);
    }
    record.moved(moves);
    faultPoint("relayout-after-build");
    return moves;
  } finally {
    await parts.landing.releaseLanding(delivery);
    // Only now: a Parquet delivery is read where it lies, until its runs are written.
    await local.release();
  }
}

/**
 * The new layouts a writer builds (the tables whose partition keys it changes), read and written by that writer only:
 * its swaps, states and snapshots read them through `catalog` in place of the catalog's definitions, while every other
 * reader still reads the old layouts; `switchAll` makes them the tables' when the writer's work ends without an error.
 */
export class PendingLayouts {
  private readonly pending = new Map<string, { readonly table: TableDefinition; readonly replaced: TableDefinition }>();

  /** The definition of `name` in its new layout, where this writer builds one. */
  get(name: string): TableDefinition | undefined {
    return this.pending.get(name)?.table;
  }

  /**
   * Starts the new layout `table` of `existing` (recorded first: GC removes one a writer that died left unfinished), a
   * raw table's built from its current rows (`buildLayout`), a derived table's left empty for its sync to build.
   */
  async begin(parts: LakeParts, existing: TableDefinition, table: TableDefinition, repartition: Repartition | undefined, record: Parameters<typeof buildLayout>[4]): Promise<void> {
    await recordLayout(parts.store, table, "building");
    await parts.catalog.createLayout?.(table);
    if (repartition) await buildLayout(parts, existing, table, repartition, record);
    this.pending.set(table.name, { table, replaced: existing });
  }

  /**
   * Switches every table to its new layout, whole now (a failed build would have thrown): one write of its definition
   * each, under its lease. The layout it replaced is retired (GC keeps it as the change's rollback target).
   */
  async switchAll(parts: Pick<LakeParts, "catalog" | "store" | "leaseCheck">): Promise<void> {
    if (this.pending.size > 0) faultPoint("relayout-before-switch");
    for (const [name, { table, replaced }] of this.pending) {
      await parts.catalog.updateTable(table, () => parts.leaseCheck(name));
      this.pending.delete(name);
      faultPoint("relayout-after-switch");
      await forgetLayout(parts.store, table);
      await recordLayout(parts.store, replaced, "retired");
    }
  }

  /** `catalog` with the new layouts' definitions in place of its own. */
  catalog(catalog: Catalog): Catalog {
    const pending = (name: string): TableDefinition | undefined => this.get(name);
    return {
      capabilities: catalog.capabilities,
      ...(catalog.iceberg ? { iceberg: catalog.iceberg } : {}),
      open: (options) => catalog.open(options),
      getTable: async (name) => pending(name) ?? catalog.getTable(name),
      listTables: async () => (await catalog.listTables()).map((t) => pending(t.name) ?? t),
      createTable: (table) => catalog.createTable(table),
      updateTable: (table, fence) => catalog.updateTable(table, fence),
      ...(catalog.rebuildRefusal ? { rebuildRefusal: (existing: TableDefinition, wanted: TableDefinition) => catalog.rebuildRefusal?.(existing, wanted) } : {}),
      dropTable: (name) => catalog.dropTable(name),
      ...(catalog.createLayout ? { createLayout: (table: TableDefinition) => catalog.createLayout?.(table) ?? Promise.resolve() } : {}),
      ...(catalog.dropLayout ? { dropLayout: (table: TableDefinition) => catalog.dropLayout?.(table) ?? Promise.resolve() } : {}),
      ...(catalog.holdTable ? { holdTable: (name: string) => catalog.holdTable?.(name) ?? (() => undefined) } : {}),
      getPointer: (table, partition) => catalog.getPointer(table, partition),
      listPointers: (table) => catalog.listPointers(table),
      movePointers: (table, moves, fence) => catalog.movePointers(table, moves, fence),
      removePointers: (table, partitions, fence) => catalog.removePointers(table, partitions, fence),
    };
  }
}

/**
 * What lakeswap keeps of a layout that is not its table's current one (`_lakeswap/layouts/<table>/<storage>.json`): one
 * being built by a sync (`building`: abandoned, if that sync died), one switched away from (`retired`), one GC is
 * removing or removed (`removing`, `removed`: a rollback to it is refused). With the table as that layout holds it, so
 * GC can find its pointers.
 */
interface LayoutRecord {
  readonly state: "building" | "retired" | "removing" | "removed";
  readonly at: string;
  readonly definition: TableDefinition;
}

/** Records the state of the layout `table` reads (its definition as of that layout). */
export async function recordLayout(store: ObjectStore, table: TableDefinition, state: LayoutRecord["state"]): Promise<void> {
  const record: LayoutRecord = { state, at: new Date().toISOString(), definition: table };
  await store.put(layoutRecordKey(table.name, storageName(table)), `${JSON.stringify(record, null, 2)}\n`);
}

/** Forgets the record of the layout `table` reads: it is the table's current layout now. */
export async function forgetLayout(store: ObjectStore, table: TableDefinition): Promise<void> {
  await store.delete([layoutRecordKey(table.name, storageName(table))]);
}

/** Whether GC removed (or began to remove) the layout `table` reads: a rollback to it would show readers a table without its rows. */
export async function layoutRemoved(store: ObjectStore, table: TableDefinition): Promise<boolean> {
  const state = (await readLayoutRecord(store, layoutRecordKey(table.name, storageName(table))))?.state;
  return state === "removing" || state === "removed";
}

/** The layouts of table `name` other than its current one that still hold something (not removed), each as that layout holds the table. */
export async function otherLayouts(store: ObjectStore, table: TableDefinition): Promise<TableDefinition[]> {
  const layouts: TableDefinition[] = [];
  for (const object of await store.list(layoutRecordsPrefix(table.name))) {
    const record = await readLayoutRecord(store, object.key);
    if (record && record.state !== "removed" && record.definition.name === table.name && storageName(record.definition) !== storageName(table)) layouts.push(record.definition);
  }
  return layouts;
}

async function readLayoutRecord(store: ObjectStore, key: string): Promise<LayoutRecord | undefined> {
  const stored = await store.get(key);
  if (!stored) return undefined;
  try {
    const value = JSON.parse(Buffer.from(stored.body).toString("utf8")) as Partial<LayoutRecord>;
    if (!["building", "retired", "removing", "removed"].includes(value.state ?? "") || typeof value.at !== "string") return undefined;
    return { state: value.state!, at: value.at, definition: parseTableDefinition(value.definition, `'${key}'`) };
  } catch {
    // A record that cannot be read names no layout GC may remove: it stays, and so does its layout.
    return undefined;
  }
}

/**
 * GC of a table's other layouts, under its lease: a layout neither current nor the one the current layout replaced
 * (the target of a rollback of the change) is removed once it stopped being read (switched away from, or left
 * unfinished by a sync that died) more than the grace window ago: marked `removing` first (a rollback to it is refused
 * from then on, and a GC killed on the way finishes it next time), then its pointers, runs and manifests go, and its
 * record stays, marked removed. Reports each layout removed as a partition `layout <storage>` whose runs went.
 */
export async function collectLayouts(parts: LakeParts, table: TableDefinition, options: { readonly graceMs: number; readonly dryRun: boolean }): Promise<PartitionGcReport[]> {
  const reports: PartitionGcReport[] = [];
  const kept = new Set([storageName(table), table.replacedLayout ?? storageName(table)]);
  for (const object of await parts.store.list(layoutRecordsPrefix(table.name))) {
    const record = await readLayoutRecord(parts.store, object.key);
    if (!record || record.state === "removed" || record.definition.name !== table.name) continue;
    const layout = record.definition;
    const storage = storageName(layout);
    // A layout GC began to remove is finished (a rollback to it is refused already), unless it is the current one.
    if (storage === storageName(table) || (record.state !== "removing" && (kept.has(storage) || Date.now() - Date.parse(record.at) < options.graceMs))) continue;
    const objects = [...(await parts.store.list(runsPrefix(parts.catalog, layout))), ...(await parts.store.list(manifestsPrefix(storage)))];
    const runs = new Map<string, number>();
    for (const o of objects) {
      const run = /\/run=([^/]+)\//.exec(o.key)?.[1];
      if (run !== undefined) runs.set(run, (runs.get(run) ?? 0) + o.size);
    }
    reports.push({ table: table.name, partition: `layout ${storage}`, kept: [], removed: [...runs].map(([runId, bytes]) => ({ runId, reason: "superseded" as const, bytes })) });
    if (options.dryRun) continue;
    const fence = (): Promise<void> => parts.leaseCheck(table.name);
    if (record.state !== "removing") await recordLayout(parts.store, layout, "removing");
    faultPoint("layout-gc-marked");
    // An `iceberg: true` table's snapshots that read the layout's files go first (its history keeps only what it can read).
    await expireSnapshots(parts, table, [runsPrefix(parts.catalog, layout)]);
    await removePointers(parts.catalog, layout, (await parts.catalog.listPointers(layout)).map((p) => p.partition), fence);
    await fence();
    await parts.store.delete(objects.map((o) => o.key));
    await parts.catalog.dropLayout?.(layout);
    await recordLayout(parts.store, layout, "removed");
  }
  return reports;
}
