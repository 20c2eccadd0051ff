import type { Catalog } from "../../catalog/catalog.js";
import type { LandColumn } from "../../landing/landing.js";
import { LakeswapError, errorMessage } from "../../model/errors.js";
import type { TableDefinition } from "../../model/table.js";
import { faultPoint } from "../../shared/faults.js";
import { swapBatch } from "../commit/swap.js";
import type { LakeParts } from "../parts.js";
import { pinsPrefix } from "../layout.js";
import { currentRuns } from "../runs.js";
import type { RebuildMove } from "./rebuild-schema.js";

/*
 * A change of a table's partition keys (`sync --rebuild-schema`, docs/lake.md "Changing partition keys"). Runs of one
 * layout cannot be moved under other keys one partition at a time: readers would see a partition of each layout at
 * once, or rows twice. So the table is built aside, in a layout of its own (model/table.ts `layout`,
 * `<table>__layout_<token>`: its own pointers, runs and manifests), while every reader keeps reading the old one; once
 * every partition of the new layout is built, one write of the table's definition switches every reader to it. The old
 * layout stays as it was, the target of `rollback --sync` (one write of the definition back).
 */

/** How a raw table's current rows are partitioned under its new keys: as its dataset lands a delivery. */
export interface Repartition {
  readonly columns: readonly LandColumn[];
  /** The new partition keys, each an expression over the columns. */
  readonly partition: readonly { readonly key: string; readonly expression: string }[];
  readonly signatureColumns: readonly string[];
}

/**
 * Refuses a change of partition keys lakeswap cannot make whole, before anything is written: the new layout is built
 * from the table's rows as they are, so a table whose partitions carry more than their rows (an appended partition's
 * record of the deliveries it holds, a pin), or that is published beyond its pointers (Iceberg), keeps its keys.
 */
export async function refuseRelayout(parts: Pick<LakeParts, "store">, existing: TableDefinition, wanted: TableDefinition): Promise<void> {
  const why = existing.iceberg
    ? "it is published as Iceberg (iceberg: true), whose partition spec does not follow a new layout yet"
    : (await parts.store.list(pinsPrefix(existing.name))).length > 0
      ? `some of its partitions are pinned (unpin them first: lakeswap pins ${existing.name})`
      : undefined;
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
export async function buildLayout(
  parts: LakeParts,
  existing: TableDefinition,
  table: TableDefinition,
  repartition: Repartition,
  record: { readonly intend: (moves: readonly RebuildMove[]) => Promise<void>; readonly moved: (moves: readonly RebuildMove[]) => void },
): Promise<RebuildMove[]> {
  const [snapshot] = await currentRuns(parts, { tables: [existing.name] });
  const files = (snapshot?.partitions ?? []).flatMap((p) => p.files);
  if (files.length === 0) return [];
  const label = `table '${table.name}' under its new partition keys (${table.partitionKeys.join(", ")})`;
  const delivery = await parts.landing
    .land({ files: files.map((key) => parts.store.localPath(key)), format: "parquet", header: false, delimiter: ",", ...repartition })
    .catch((error: unknown) => {
      throw new LakeswapError(error instanceof LakeswapError ? error.code : "BUILD_FAILED", `${label}: ${errorMessage(error)}`);
    });
  try {
    const bad = delivery.firstRejects[0];
    if (delivery.rowsRejected > 0) {
      // The rows were the table's: a new key expression that cannot be computed for one of them (a day from a NULL).
      throw new LakeswapError("CONFLICT", `${label}: ${delivery.rowsRejected} of its rows cannot be placed (${bad?.reason ?? "bad row"}); nothing was switched. Declare partition keys every row has a value of`);
    }
    const items = delivery.partitions.map((p) => ({ partition: p.partition, signature: p.signature }));
    let moves: RebuildMove[] = [];
    const outcomes = await swapBatch(parts, table, items, {
      build: { kind: "landed", delivery },
      allowEmpty: true,
      beforeSwap: async (planned) => {
        moves = planned.map((m) => ({ partition: m.partition, runId: m.runId, previousRunId: m.previousRunId ?? "" }));
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
  }
}

/**
 * A catalog whose definitions of the tables in `pending` are those, for a writer that builds their new layouts: its
 * swaps, states and snapshots then read and move the new layout's pointers, while every other reader of the catalog
 * still reads the old one.
 */
export function withPendingLayouts(catalog: Catalog, pending: ReadonlyMap<string, TableDefinition>): Catalog {
  return {
    capabilities: catalog.capabilities,
    ...(catalog.iceberg ? { iceberg: catalog.iceberg } : {}),
    open: (options) => catalog.open(options),
    getTable: async (name) => pending.get(name) ?? catalog.getTable(name),
    listTables: async () => (await catalog.listTables()).map((t) => pending.get(t.name) ?? t),
    createTable: (table) => catalog.createTable(table),
    updateTable: (table, fence) => catalog.updateTable(table, fence),
    ...(catalog.rebuildRefusal ? { rebuildRefusal: (existing: TableDefinition, wanted: TableDefinition) => catalog.rebuildRefusal?.(existing, wanted) } : {}),
    dropTable: (name) => catalog.dropTable(name),
    ...(catalog.holdTable ? { holdTable: (name: string) => catalog.holdTable?.(name) ?? (() => undefined) } : {}),
    getPointer: (table, partition) => catalog.getPointer(table, partition),
    listPointers: (table) => catalog.listPointers(table),
    movePointers: (table, moves, fence) => catalog.movePointers(table, moves, fence),
    removePointers: (table, partitions, fence) => catalog.removePointers(table, partitions, fence),
  };
}
