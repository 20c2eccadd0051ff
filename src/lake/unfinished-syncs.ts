import type { CatalogFile } from "../catalog/catalog-file.js";
import type { TableSnapshot } from "../model/build.js";
import { partitionPath } from "../model/partition.js";
import { listSyncs } from "./operations/syncs.js";
import type { SyncRecord } from "./sync-record.js";
import type { HasLakeParts } from "./parts.js";
import { currentRuns } from "./runs.js";

/**
 * Of `tables` (held), those whose catalog file views wait for a sync of their dataset: their current runs include a
 * run of a sync that never finished (killed between the swaps of its dataset's tables, whose other tables may not hold
 * its moves), so a view of them now would show a state no sync finished. The views of all the dataset's tables are
 * rewritten at once when a sync of it (the killed one's rerun) finishes; a `rollback --sync` of the killed sync moves
 * its runs out. A partition whose view shows that run already (the catalog file's, where it tells: the rerun that
 * finished kept the run, having nothing to rebuild there) waits for nothing. All of `tables` where the sync records cannot
 * be read: the views stay as they are, the next command decides again. Read only where a command finds a view behind
 * pointers it did not move itself (a rare path: it lists every sync record).
 */
export async function waitingForRerun(
  lake: HasLakeParts,
  tables: readonly string[],
  catalogFile?: Pick<CatalogFile, "shownRuns">,
): Promise<Set<string>> {
  try {
    const runs = await unfinishedSyncRuns(lake);
    if (runs.size === 0) return new Set();
    const snapshots = (await currentRuns(lake.parts, { tables: [...tables], files: false })).filter((snapshot) => showsUnfinishedSync(snapshot, runs));
    const inView = (snapshots.length > 0 ? await catalogFile?.shownRuns?.(snapshots.map((snapshot) => snapshot.table.name)) : undefined) ?? new Map<string, ReadonlyMap<string, string>>();
    return new Set(snapshots.filter((snapshot) => showsUnfinishedSync(snapshot, runs, inView.get(snapshot.table.name))).map((snapshot) => snapshot.table.name));
  } catch {
    return new Set(tables);
  }
}

/** The runs that syncs which never finished (their record has no `finishedAt`) moved pointers to, or were about to, by table. */
async function unfinishedSyncRuns(lake: HasLakeParts): Promise<Map<string, Set<string>>> {
  const runs = new Map<string, Set<string>>();
  // An unreadable record is not one this can tell about; `lakeswap syncs` reports it.
  for (const record of await listSyncs(lake, { skipUnreadable: true })) {
    if (record.finishedAt !== undefined) continue;
    for (const move of record.moves) {
      const ofTable = runs.get(move.table) ?? new Set<string>();
      for (const run of [move.run, ...(move.through ?? [])]) ofTable.add(run);
      runs.set(move.table, ofTable);
    }
  }
  return runs;
}

/** Whether the table's current runs include one of `runs` (a sync's that never finished) that its view does not show (`inView`, where known). */
function showsUnfinishedSync(snapshot: TableSnapshot, runs: ReadonlyMap<string, ReadonlySet<string>>, inView?: ReadonlyMap<string, string>): boolean {
  const unfinished = runs.get(snapshot.table.name);
  return unfinished !== undefined && snapshot.partitions.some((p) => unfinished.has(p.runId) && inView?.get(partitionPath(p.partition)) !== p.runId);
}

/** A sync that never finished whose runs are current in some partitions: a state no sync finished. */
export interface UnfinishedSyncShown {
  readonly syncId: string;
  /** `table/partition` of each partition whose current run is the sync's. */
  readonly partitions: readonly string[];
}

/**
 * The syncs that never finished (killed, or stopped) just before sync `rolledBack` (of its pipeline config, or in the
 * tables it moved), newest first, down to the newest one that finished: those it may have been the rerun of. Each with the partitions that
 * hold one of its runs now (those without any left out): once `syncId` is rolled back, they show its partial moves, a
 * state no sync finished. Empty where the sync records cannot be read: this only adds a warning.
 */
export async function unfinishedBefore(lake: HasLakeParts, rolledBack: SyncRecord): Promise<UnfinishedSyncShown[]> {
  const tables = new Set(rolledBack.moves.map((m) => m.table));
  // A sync of the same pipeline config, or one that moved some of the same tables (a rerun need not move them all).
  const related = (r: SyncRecord): boolean => r.config === rolledBack.config || r.moves.some((m) => tables.has(m.table));
  try {
    const before = (await listSyncs(lake, { skipUnreadable: true })).filter((r) => r.syncId < rolledBack.syncId && r.moves.length > 0 && related(r));
    const finished = before.findIndex((r) => r.finishedAt !== undefined);
    const shown: UnfinishedSyncShown[] = [];
    for (const record of finished < 0 ? before : before.slice(0, finished)) {
      const runs = new Set(record.moves.flatMap((m) => [m.run, ...(m.through ?? [])].map((run) => `${m.table}\n${run}`)));
      const snapshots = await currentRuns(lake.parts, { tables: [...new Set(record.moves.map((m) => m.table))], files: false });
      const partitions = snapshots.flatMap((snapshot) =>
        snapshot.partitions.filter((p) => runs.has(`${snapshot.table.name}\n${p.runId}`)).map((p) => `${snapshot.table.name}/${partitionPath(p.partition)}`),
      );
      if (partitions.length > 0) shown.push({ syncId: record.syncId, partitions: partitions.sort() });
    }
    return shown;
  } catch {
    return [];
  }
}

/** The warning of a command outside syncs whose moves of `tables` the catalog file's views do not show yet (held back). */
export function warnHeldBack(location: string, tables: readonly string[]): void {
  const [them, they] = tables.length > 1 ? ["them", "they hold"] : ["it", "it holds"];
  process.emitWarning(
    `${location} still shows ${tables.join(", ")} as the last finished sync left ${them}: ${they} runs of a sync that never finished (lakeswap syncs), ` +
      `so plain readers of the file see this change once a sync of ${them} finishes (the killed sync's rerun), or after lakeswap rollback --sync of the ` +
      `unfinished one; lakeswap query sees it now`,
    { code: "LAKESWAP_CATALOG_FILE" },
  );
}
