import { randomBytes } from "node:crypto";
import { LakeswapError } from "../../model/errors.js";
import { newRunIdAfter } from "../../model/run-id.js";
import { planSchemaChange, type SchemaChange } from "../../model/schema-change.js";
import { defineTable, layoutName, schemaMark, type TableDefinition } from "../../model/table.js";
import { faultPoint } from "../../shared/faults.js";
import type { HasLakeParts } from "../parts.js";
import { rebuildReadably, rebuildRuns, type RebuildOptions } from "./rebuild-schema.js";
import { refuseRelayout, type PendingLayouts, type Repartition } from "./relayout.js";
import { claimSyncId, recordSync } from "./syncs.js";

/**
 * Changes a table's schema in place (model/schema-change.ts) under its lease, outside a sync (`lakeswap
 * create-table`, the library's `Lake.createTable`): the declaration is judged again against the definition read under
 * the lease (another writer may have changed it meanwhile), the change is recorded as a sync of its own that moved no
 * pointer (`lakeswap syncs` lists it, `rollback --sync` restores the definition before), and the catalog's definition
 * is written over (Glue: the table's and every partition's columns). Runs already written are not touched: readers
 * match their files by column name. Undefined where the table already is as declared.
 */
export async function changeSchema(lake: HasLakeParts, wanted: TableDefinition, command: string): Promise<SchemaChange | undefined> {
  const parts = lake.parts;
  return parts.withLease(wanted.name, command, async () => {
    const existing = await parts.catalog.getTable(wanted.name);
    const change = existing ? planSchemaChange(existing, wanted) : undefined;
    if (!change || !existing) return undefined;
    if (change.rebuild) throw new LakeswapError("CONFLICT", `table '${wanted.name}' is being rebuilt by swap (a sync stopped before its end): run lakeswap sync with its config to finish the rebuild`);
    const stamped = await stampSchemaChange(lake, change);
    const at = new Date().toISOString();
    const schemaChanges = [{ table: wanted.name, changes: stamped.changes, previous: existing, definition: stamped.table }];
    const claimed = await claimSyncId(lake, command);
    try {
      await recordSync(lake, { format: 1, syncId: claimed.syncId, config: command, startedAt: at, finishedAt: at, moves: [], schemaChanges });
    } finally {
      await claimed.release();
    }
    await parts.catalog.updateTable(stamped.table, () => parts.leaseCheck(wanted.name));
    return stamped;
  });
}

/**
 * The change with the run id it is made at (`schemaChangedAt`): after every run current now, and before every run
 * written from now on (a swap issues run ids after it), so that a rollback can tell the runs written under the new
 * schema. Under the table's lease.
 */
async function stampSchemaChange(lake: HasLakeParts, change: SchemaChange): Promise<SchemaChange> {
  const runs = (await lake.parts.catalog.listPointers(change.table)).map((p) => p.runId);
  const latest = [...runs, schemaMark(change.table)].filter((id): id is string => id !== undefined && id !== "").sort().at(-1);
  const at = newRunIdAfter(latest);
  // A rebuild by swap rewrites every run from before it: none of those is moved back to while it stands. A change of
  // partition keys names the new layout the table is built in (./relayout.ts).
  const layout = change.relayout ? { layout: layoutName(change.table.name, randomBytes(3).toString("hex")) } : {};
  return { ...change, table: defineTable({ ...change.table, schemaChangedAt: at, ...(change.rebuild ? { rebuiltAt: at } : {}), ...layout }) };
}

/** A rebuild by swap as a sync asks for it: the renames it declares, and how its runs are signed and its moves recorded. */
export interface SchemaRebuild extends RebuildOptions {
  /** `--rebuild-schema`: a change that cannot be made in place is rebuilt (one an earlier sync began is finished anyway). */
  readonly allowed: boolean;
  readonly renames: Readonly<Record<string, string>>;
  /**
   * A raw table whose partition keys change: how its current rows are partitioned under the new keys
   * (./operations/relayout.ts). Absent for a derived table, whose sync builds its new layout from its inputs.
   */
  readonly repartition?: Repartition;
}

/** What a writer's change of a held table's schema works with besides the lake's parts. */
export interface HeldSchemaChange {
  readonly record: (change: SchemaChange, previous: TableDefinition) => Promise<void>;
  readonly rebuild: SchemaRebuild | undefined;
  /** The writer's new layouts (a change of partition keys starts one). */
  readonly layouts: PendingLayouts;
  /** Told a table whose pointers the change moves (the writer's states of it are stale). */
  readonly moved: (table: string) => void;
}

/**
 * A writer's change of a held table's schema as declared (`LakeWriter.changeSchema`), judged against its definition
 * as it is now: recorded first, then made in place, by a rebuild by swap (./rebuild-schema.ts), or in a new layout the
 * writer switches to at its end (./relayout.ts). Undefined where the table already is as declared.
 */
export async function changeHeldSchema(lake: HasLakeParts, wanted: TableDefinition, held: HeldSchemaChange): Promise<SchemaChange | undefined> {
  const parts = lake.parts;
  const { rebuild } = held;
  const existing = await parts.catalog.getTable(wanted.name);
  const judged = existing ? planSchemaChange(existing, wanted, { rebuild: rebuild?.allowed === true, renames: rebuild?.renames }) : undefined;
  if (!judged || !existing) return undefined;
  // What the catalog's readers could not read while pointers move is built aside, in a new layout (rebuildReadably).
  const planned = rebuildReadably(parts.catalog, existing, judged);
  if (planned.relayout) await refuseRelayout(parts, existing, planned.table);
  // A rebuild an earlier sync began keeps its mark: the runs before it are the ones still to rewrite.
  const change = planned.rebuild?.finishing ? planned : await stampSchemaChange(lake, planned);
  await held.record(change, existing);
  faultPoint("schema-after-record");
  if (change.relayout) {
    held.moved(wanted.name);
    // A raw table's rows go to its new layout as they are: landed under the new partition keys, or, for a rebuild built
    // aside (same keys), each run rewritten under the new columns as a rebuild by swap does.
    const aside = change.rebuild !== undefined && rebuild?.repartition !== undefined ? rebuild : undefined;
    await held.layouts.begin(parts, existing, change.table, aside ? undefined : rebuild?.repartition, rebuild ?? { intend: async () => undefined, moved: () => undefined });
    if (aside) await rebuildRuns(parts, existing, change, aside);
  } else if (change.rebuild) {
    if (!rebuild) throw new LakeswapError("CONFLICT", `table '${wanted.name}' is being rebuilt by swap: only a sync finishes it`);
    held.moved(wanted.name);
    await rebuildRuns(parts, existing, change, rebuild);
  } else {
    await parts.catalog.updateTable(change.table, () => parts.leaseCheck(wanted.name));
  }
  faultPoint("schema-after-change");
  return change;
}
