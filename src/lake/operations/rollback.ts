import { InvalidInputError, LakeswapError, NotFoundError } from "../../model/errors.js";
import { keysOfPath, parsePartitionPath, partitionPath, type Partition } from "../../model/partition.js";
import { currentRuns, ensureManifest, listRuns, readManifest, runFileNames, runFiles, runPrefix, type LakeContext } from "../runs.js";
import { movePointers, removePointers } from "../commit/move.js";
import type { SyncMove, SyncRecord } from "../sync-record.js";
import { syncLeaseName } from "../layout.js";
import { notIngested, partitionOf, type HasLakeParts, type PartitionInput } from "../parts.js";
import { findSync } from "./syncs.js";
import { unfinishedBefore, type UnfinishedSyncShown } from "../unfinished-syncs.js";
import { withoutDropped } from "./rebuild-schema.js";
import { forgetLayout, layoutRemoved, recordLayout } from "./relayout.js";
import { defineTable, parseTableDefinition, schemaMark, undoneSchemaOf, type TableDefinition } from "../../model/table.js";
import { isRunId, newRunIdAfter } from "../../model/run-id.js";

/** What a rollback did. */
export interface RollbackResult {
  readonly table: string;
  readonly partition: string;
  readonly fromRunId: string;
  readonly toRunId: string;
  readonly rows?: number;
}

/** What `rollbackSync` did to one partition the sync had moved. */
interface SyncRollbackEntry {
  readonly table: string;
  readonly partition: string;
  /** `rolled back` to the run before the sync; `removed`: the sync created the partition; `skipped`: see `reason`. */
  readonly action: "rolled back" | "removed" | "skipped";
  /** The run the sync made current. */
  readonly fromRunId: string;
  readonly toRunId?: string;
  readonly reason?: string;
}

/** What `rollbackSync` did. */
export interface SyncRollbackResult {
  readonly syncId: string;
  readonly partitions: readonly SyncRollbackEntry[];
  /** The schema changes the sync made in place, each undone (`restored`: the definition before the sync) or `skipped` (see `reason`). */
  readonly schemas?: readonly { readonly table: string; readonly action: "restored" | "skipped"; readonly changes: readonly string[]; readonly reason?: string }[];
  /**
   * Syncs that never finished (killed before the sync rolled back, perhaps their rerun) whose runs some partitions
   * hold now: the lake shows their partial moves again, each with those partitions. `rollback --sync` of each returns
   * them to the state before it.
   */
  readonly unfinished?: readonly UnfinishedSyncShown[];
}

/** Moves a partition's pointer back to the newest completed older run, or to `toRunId`, under the table's lease. */
export async function rollbackPartition(lake: HasLakeParts, tableName: string, partitionInput: PartitionInput, options: { toRunId?: string } = {}): Promise<RollbackResult> {
  const parts = lake.parts;
  const table = notIngested(await parts.table(tableName), "rolled back");
  const partition = partitionOf(table, partitionInput, true);
  checkRunId(table, options.toRunId);
  return parts.withLease(table.name, `rollback ${table.name}/${partitionPath(partition)}`, () => moveBack(parts, table, partition, options.toRunId), { catalogFile: "settled" });
}

/**
 * Moves back every pointer one sync moved (`last`: the newest sync): each
 * partition to the run that was current before the sync, or, where the sync
 * created the partition, no run at all. A sync still running is waited for
 * (its own lease, held from its first record to its end), and then the
 * leases of every table it moved are taken together, in name order, as a
 * sync takes them: the rollback undoes the sync's whole result, never a part
 * of it while the rest is still moving. A partition whose pointer moved
 * since (a later sync, a rollback) is left alone and reported. Per table the
 * moves are one batch (Glue: 100 per call, every entry checked). As with a
 * one-partition rollback, the next sync rebuilds what was rolled back unless
 * it is pinned.
 */
export async function rollbackSync(lake: HasLakeParts, syncId: string): Promise<SyncRollbackResult> {
  const parts = lake.parts;
  for (;;) {
    const record = await findSync(lake, syncId);
    const command = `rollback sync ${record.syncId}`;
    // Waits for a sync that is still running (or takes over the lease of one that died), then for its tables.
    const result = await parts.withLease(syncLeaseName(record.syncId), command, async () => {
      const tables = tablesOf(await findSync(lake, record.syncId));
      return parts.withLeases(tables, command, async () => {
        // Read again under every lease: nothing can add to the record now. `last` may name a newer sync by now (one
        // that recorded while this rollback waited), and a sync that moved one more table than was locked is locked again.
        const final = await findSync(lake, syncId);
        if (final.syncId !== record.syncId || tablesOf(final).some((table) => !tables.includes(table))) return undefined;
        refuseHeld(final);
        // A schema rebuilt by swap is restored before its runs are moved back (on Glue, every partition then gets the
        // old columns, which read its rewritten files as well: a narrowed column widens), a change in place after.
        const rebuilt = await restoreSchemas(lake, final, "rebuilt");
        // A table switched back to its layout before the sync: the sync's moves were in the layout switched away from.
        const switched = new Set((final.schemaChanges ?? []).filter((c) => c.relayout && rebuilt.some((r) => r.table === c.table && r.action === "restored")).map((c) => c.table));
        const partitions = await rollbackRecorded(lake, final, switched);
        await finishRebuildRollbacks(lake, final, rebuilt);
        const schemas = [...rebuilt, ...(await restoreSchemas(lake, final, "in place"))];
        // The sync may have been the rerun of one killed before it: moved back, the lake shows that one's partial moves.
        const unfinished = partitions.some((p) => p.action !== "skipped") ? await unfinishedBefore(lake, final) : [];
        return { syncId: final.syncId, partitions, ...(schemas.length > 0 ? { schemas } : {}), ...(unfinished.length > 0 ? { unfinished } : {}) };
      });
    }, { kernelLock: false });
    if (result) return result;
  }
}

/**
 * A held sync moved no pointer yet, and its staged runs were written under the schema it changed: restoring the old
 * definition under them would leave publish to move them in under it. It is discarded (which restores it) or published.
 */
function refuseHeld(record: SyncRecord): void {
  const id = record.syncId;
  if (record.held?.status === "held") {
    throw new InvalidInputError(`sync ${id} is held: none of its pointers moved. lakeswap discard ${id} drops it and undoes its schema changes; lakeswap publish ${id} moves them`);
  }
  if (record.held?.status === "publishing") throw new InvalidInputError(`sync ${id} is being published (its publication committed, then stopped): finish it with lakeswap publish ${id}, then roll it back`);
}

/** Rolls back the moves of a finished (or dead) sync, under the leases of its tables: downstream layers first. */
async function rollbackRecorded(lake: HasLakeParts, record: SyncRecord, switched: ReadonlySet<string>): Promise<SyncRollbackEntry[]> {
  const byTable = new Map<string, SyncMove[]>();
  for (const move of record.moves) byTable.set(move.table, [...(byTable.get(move.table) ?? []), move]);
  const entries: SyncRollbackEntry[] = [];
  // Tables in the reverse order the sync reached them: a derived layer is rolled back before its inputs.
  for (const [tableName, moves] of [...byTable].reverse()) {
    const table = await lake.parts.catalog.getTable(tableName);
    if (switched.has(tableName)) {
      const reason = "it moved in the layout under the new partition keys, which the rollback switched the table away from";
      entries.push(...moves.map((m): SyncRollbackEntry => ({ table: tableName, partition: m.partition, action: "skipped", fromRunId: m.run, reason })));
      continue;
    }
    if (!table) {
      entries.push(...moves.map((m): SyncRollbackEntry => ({ table: tableName, partition: m.partition, action: "skipped", fromRunId: m.run, reason: "the table no longer exists" })));
      continue;
    }
    entries.push(...(await rollbackMoves(lake.parts, table, moves)));
  }
  return entries;
}

/** The tables a sync moved pointers of or changed the schema of. */
function tablesOf(record: SyncRecord): string[] {
  return [...new Set([...record.moves.map((move) => move.table), ...(record.schemaChanges ?? []).map((change) => change.table)])];
}

/**
 * Restores the definition each table had before the sync changed its schema in place, newest change first, after
 * its pointers moved back: runs the sync wrote are no longer current. A table whose definition changed again since
 * (a later sync) keeps it, reported.
 */
export async function restoreSchemas(lake: HasLakeParts, record: SyncRecord, only?: "rebuilt" | "in place"): Promise<NonNullable<SyncRollbackResult["schemas"]>> {
  const restored: NonNullable<SyncRollbackResult["schemas"]>[number][] = [];
  // A change of partition keys is restored with the rebuilds, before the moves: the sync's moves were in its new layout.
  const chosen = (record.schemaChanges ?? []).filter((change) => only === undefined || (change.rebuilt === true || change.relayout === true) === (only === "rebuilt"));
  // Each change judged first, every refusal before any definition is written: a rollback restores all or nothing of them.
  const writes: (() => Promise<void>)[] = [];
  for (const change of [...chosen].reverse()) {
    const judged = await judgeRestore(lake, record, change);
    if (judged.skipped !== undefined) {
      restored.push({ table: change.table, action: "skipped", changes: change.changes, reason: judged.skipped });
      continue;
    }
    writes.push(judged.write);
    restored.push({ table: change.table, action: "restored", changes: change.changes });
  }
  for (const write of writes) await write();
  return restored;
}

/**
 * Whether a rollback restores one schema change of `record`: skipped (why), or the write that restores it. A change
 * that must not be restored and cannot be skipped (a rebuild or a change of keys with runs written since, a layout
 * GC removed) is a CONFLICT.
 */
async function judgeRestore(lake: HasLakeParts, record: SyncRecord, change: NonNullable<SyncRecord["schemaChanges"]>[number]): Promise<{ skipped: string; write?: undefined } | { skipped?: undefined; write: () => Promise<void> }> {
  const source = `the record of sync ${record.syncId}`;
  const [now, set, previous] = [await lake.parts.catalog.getTable(change.table), parseTableDefinition(change.definition, source, change.table), parseTableDefinition(change.previous, source, change.table)];
  // A rebuild that stopped on the way left the definition of one of its steps: marked `rebuilding` (embedded), or
  // the one before less the columns it drops (Glue). Either is the sync's all the same.
  const unmarked = now && change.rebuilt ? defineTable({ ...now, rebuilding: undefined }) : now;
  const steps = change.rebuilt ? [set, withoutDropped(previous, set)] : [set];
  // The changes undone since are no change of the definition itself: a second rollback of the sync finds it as it was before.
  const shape = (table: TableDefinition | undefined): string => JSON.stringify(table && { ...table, undoneSchemas: undefined });
  if (!now || !steps.some((step) => shape(unmarked) === shape(step)) || shape(now) === shape(previous)) {
    return { skipped: !now ? "the table no longer exists" : shape(now) === shape(previous) ? "it is as it was before the sync already" : "its schema changed again since" };
  }
  // A run written under the new schema that is still current (a later command's) may hold what the old one cannot
  // (a value only the widened type holds; Athena refuses the file outright): the definition stays. Such runs sort
  // after the change's run id (`schemaChangedAt`: every swap issues ids after it).
  const mark = set.schemaChangedAt ?? record.syncId;
  const snapshot = (await currentRuns(lake.parts, { tables: [change.table], files: false }))[0];
  // A rebuild's own runs are moved back by this rollback, right after.
  const own = new Set(change.rebuilt || change.relayout ? record.moves.filter((m) => m.table === change.table).flatMap((m) => [m.run, ...(m.through ?? [])].map((run) => `${m.partition}@${run}`)) : []);
  const newer = (snapshot?.partitions ?? []).filter((p) => p.runId !== "" && p.runId > mark && !own.has(`${partitionPath(p.partition)}@${p.runId}`)).map((p) => partitionPath(p.partition));
  if (newer.length > 0) {
    const shown = `${newer.slice(0, 3).join(", ")}${newer.length > 3 ? ` and ${newer.length - 3} more` : ""}`;
    if (change.rebuilt || change.relayout) {
      // Its rewritten runs moved back under a definition left as it is would be read under columns they were not
      // written with; a layout switched away from would take the runs written since out of every reader's sight.
      throw new LakeswapError("CONFLICT", `sync ${record.syncId} ${change.relayout ? "changed the partition keys" : "rebuilt the schema"} of ${change.table}, and runs written since are current (${shown}): roll back the syncs after it first, then this one again`);
    }
    return { skipped: `runs written since the change are current (${shown}); roll them back first, then this sync again` };
  }
  if (change.relayout && (await layoutRemoved(lake.parts.store, previous))) {
    throw new LakeswapError("CONFLICT", `sync ${record.syncId} changed the partition keys of ${change.table}, and the layout it switched away from was garbage-collected since: it cannot be switched back to`);
  }
  // The runs written under the change (every one sorts after its mark, and before an id issued now, after every
  // pointer's runs) keep its columns: the restored definition names them, so that no pointer ever moves to one again.
  const latest = [mark, ...(snapshot?.partitions ?? []).map((p) => p.runId), schemaMark(now)].filter((id): id is string => id !== undefined && id !== "").sort().at(-1);
  const undone = { from: mark, to: newRunIdAfter(latest), syncId: record.syncId };
  const restored = defineTable({ ...previous, undoneSchemas: [...(now.undoneSchemas ?? []), undone] });
  return {
    write: async () => {
      await lake.parts.catalog.updateTable(change.rebuilt ? backFromRebuild(lake, restored, set, change.renames ?? {}) : restored, () => lake.parts.leaseCheck(change.table));
      if (change.relayout) {
        // The old layout is the table's again; the one switched away from is retired (GC removes it after the grace window).
        await forgetLayout(lake.parts.store, previous);
        await recordLayout(lake.parts.store, set, "retired");
      }
    },
  };
}

/**
 * The definition a rollback of a rebuild by swap writes before it moves the pointers back. Where readers read every
 * run by name under the definition (the embedded lake), the old one marked `rebuilding` the other way (a run of the
 * rebuild not moved back yet reads under the old columns, a renamed column from its new name); then, once every
 * pointer is back, `finishRebuildRollbacks` writes the old one as it was. On Glue, the old one at once: each partition
 * then gets its columns, under which the rebuilt files read too (a narrowed column as the wider one).
 */
function backFromRebuild(lake: HasLakeParts, previous: TableDefinition, rebuilt: TableDefinition, renamed: Readonly<Record<string, string>>): TableDefinition {
  if (!lake.parts.catalog.capabilities.readsRunsByName) return previous;
  const renames = Object.fromEntries(Object.entries(renamed).map(([to, from]) => [from, to]));
  return defineTable({ ...previous, schemaVersion: Math.max(previous.schemaVersion ?? 0, rebuilt.schemaVersion ?? 1), rebuilding: { renames } });
}

/** Writes the old definitions of the rebuilds a rollback moved back (`backFromRebuild`), without the rollback's mark. */
async function finishRebuildRollbacks(lake: HasLakeParts, record: SyncRecord, restored: readonly { readonly table: string; readonly action: string }[]): Promise<void> {
  for (const change of record.schemaChanges ?? []) {
    if (!change.rebuilt || !restored.some((r) => r.table === change.table && r.action === "restored")) continue;
    const previous = parseTableDefinition(change.previous, `the record of sync ${record.syncId}`, change.table);
    const now = await lake.parts.catalog.getTable(change.table);
    if (now?.rebuilding) await lake.parts.catalog.updateTable(defineTable({ ...previous, undoneSchemas: now.undoneSchemas }), () => lake.parts.leaseCheck(change.table));
  }
}

/**
 * Refuses to move a partition back to a run written before its table was rebuilt by swap (`rebuiltAt`): the run holds
 * columns the table no longer reads (a wider type Athena refuses under the narrow one, a column renamed since).
 */
function refuseBeforeRebuild(table: TableDefinition, label: string, runId: string): void {
  if (table.rebuiltAt === undefined || runId >= table.rebuiltAt) return;
  throw new LakeswapError(
    "CONFLICT",
    `run ${runId} of ${label} was written before table ${table.name} was rebuilt by swap under other columns; roll back the sync that rebuilt it instead (lakeswap syncs lists it; rollback --sync ID)`,
  );
}

/**
 * Refuses to move a partition's pointer to a run written under a schema change `rollback --sync` undid since (model/
 * table.ts `undoneSchemas`): it holds columns as that definition declared them (a column the table no longer has, or
 * has again as another column, another type), which no reader may read under the definition as it is. `runs`: the
 * partition's complete runs, to name the ones it may be moved to instead.
 */
function refuseUndoneSchema(table: TableDefinition, partition: string, runId: string, runs: readonly string[], current: string): void {
  const undone = undoneSchemaOf(table, runId);
  if (!undone) return;
  const label = `${table.name}/${partition}`;
  const fits = runs.filter((id) => id !== current && !undoneSchemaOf(table, id) && !(table.rebuiltAt !== undefined && id < table.rebuiltAt));
  throw new LakeswapError(
    "CONFLICT",
    `run ${runId} of ${label} was written under the schema of ${table.name} that sync ${undone.syncId} set and rollback --sync undid since: ` +
      `its columns are that schema's, not the table's now, and no reader may see them as the table's; ` +
      (fits.length > 0
        ? `roll back to a run written under the table's schema instead (--to ${fits.at(-1)}; lakeswap history ${table.name} --partition ${partition} lists them)`
        : `its current run ${current} is the only one written under the table's schema now`),
  );
}

/** Checks a run id given on the command line. */
function checkRunId(table: TableDefinition, runId: string | undefined): void {
  if (runId !== undefined && !isRunId(runId)) {
    throw new InvalidInputError(`'${runId}' is not a run id (YYYYMMDDTHHMMSSZ-xxxxxx); see lakeswap history ${table.name} --partition ...`);
  }
}

/** Moves a partition's pointer back to the newest completed older run, or to `toRunId`; the caller holds the table's lease. */
async function moveBack(ctx: LakeContext, table: TableDefinition, partition: Partition, toRunId: string | undefined): Promise<RollbackResult> {
  const label = `${table.name}/${partitionPath(partition)}`;
  const current = await ctx.catalog.getPointer(table, partition);
  if (!current) throw new NotFoundError(`partition ${label} has no current run, so there is nothing to roll back`);
  // A writer killed between swap and manifest left the current run without one; record it, so it can be rolled forward to.
  await ensureManifest(ctx, table, current);
  const runs = await listRuns(ctx, table, partition);
  const complete = runs.filter((run) => run.hasManifest && run.files.length > 0);
  let target: string;
  if (toRunId !== undefined) {
    if (toRunId === current.runId) throw new InvalidInputError(`run ${toRunId} is already the current run of ${label}`);
    if (!complete.some((run) => run.runId === toRunId)) {
      throw new NotFoundError(`run ${toRunId} of ${label} does not exist or never completed; runs to choose from: ${complete.map((r) => r.runId).join(", ") || "none"}`);
    }
    target = toRunId;
  } else {
    const newest = complete.filter((run) => run.runId < current.runId).map((run) => run.runId).at(-1);
    if (!newest) throw new NotFoundError(`partition ${label} has no older run to roll back to (current run ${current.runId})`);
    target = newest;
  }
  refuseBeforeRebuild(table, label, target);
  refuseUndoneSchema(table, partitionPath(partition), target, complete.map((run) => run.runId), current.runId);
  const manifest = await readManifest(ctx.store, table, partition, target);
  const fence = (): Promise<void> => ctx.leaseCheck(table.name);
  await fence();
  const location = runPrefix(ctx.catalog, table, partition, target);
  await movePointers(ctx.catalog, table, [{ partition, runId: target, location, previousRunId: current.runId, signature: manifest?.signature, kind: "rollback", runFiles: manifest && runFileNames(location, manifest.files) }], fence);
  return { table: table.name, partition: partitionPath(partition), fromRunId: current.runId, toRunId: target, rows: manifest?.rows };
}

/** One table's share of a sync rollback, under its lease: the moves back are one batch (Glue: 100 per call, every entry checked). */
async function rollbackMoves(ctx: LakeContext, table: TableDefinition, moves: readonly SyncMove[]): Promise<SyncRollbackEntry[]> {
  const entries: SyncRollbackEntry[] = [];
  const back: { partition: Partition; runId: string; location: string; previousRunId: string; signature?: string; runFiles?: string[] }[] = [];
  const removals: Partition[] = [];
  const pointers = new Map((await ctx.catalog.listPointers(table)).map((p) => [partitionPath(p.partition), p]));
  for (const move of moves) {
    const skip = (reason: string): void => {
      entries.push({ table: table.name, partition: move.partition, action: "skipped", fromRunId: move.run, reason });
    };
    if (keysOfPath(move.partition).join("/") !== table.partitionKeys.join("/")) {
      // Moved in another layout (the table's partition keys changed since, or the sync that changed them failed).
      skip(`the table is partitioned by (${table.partitionKeys.join(", ") || "none"}) now, not as when the sync moved it; roll back the sync that changed its partition keys first`);
      continue;
    }
    const partition = parsePartitionPath(move.partition, table.partitionKeys);
    const current = pointers.get(partitionPath(partition));
    if (move.pending && current?.runId !== move.run && current?.runId === move.previousRun) {
      skip("the sync stopped before it moved this pointer");
      continue;
    }
    // Where the sync stopped between two moves of a partition, its pointer is at a run the sync moved it to before.
    const at = current !== undefined && move.through?.includes(current.runId) ? current.runId : move.run;
    if (current?.runId !== at) {
      skip(current ? `moved since the sync: run ${current.runId} is current now` : "the partition has no current run any more");
      continue;
    }
    if (move.previousRun === undefined) {
      removals.push(partition);
      entries.push({ table: table.name, partition: move.partition, action: "removed", fromRunId: at });
      continue;
    }
    if (table.rebuiltAt !== undefined && move.previousRun < table.rebuiltAt) {
      skip(`run ${move.previousRun}, current before the sync, was written before the table was rebuilt by swap under other columns; roll back the rebuild's sync first`);
      continue;
    }
    const undone = undoneSchemaOf(table, move.previousRun);
    if (undone) {
      skip(`run ${move.previousRun}, current before the sync, was written under the schema sync ${undone.syncId} set, which was rolled back since: its columns are not the table's now`);
      continue;
    }
    const manifest = await readManifest(ctx.store, table, partition, move.previousRun);
    const files = (await runFiles(ctx, table, partition, move.previousRun)).length;
    if (!manifest || files === 0) {
      skip(`run ${move.previousRun}, current before the sync, no longer exists (garbage-collected?); lakeswap history ${table.name} --partition ${move.partition}`);
      continue;
    }
    const location = runPrefix(ctx.catalog, table, partition, move.previousRun);
    back.push({ partition, runId: move.previousRun, location, previousRunId: at, signature: manifest.signature, runFiles: runFileNames(location, manifest.files) });
    entries.push({ table: table.name, partition: move.partition, action: "rolled back", fromRunId: at, toRunId: move.previousRun });
  }
  const fence = (): Promise<void> => ctx.leaseCheck(table.name);
  await fence();
  if (back.length > 0) await movePointers(ctx.catalog, table, back.map((b) => ({ ...b, kind: "rollback" as const })), fence);
  if (removals.length > 0) await removePointers(ctx.catalog, table, removals, fence);
  return entries;
}
