import { errorMessage, InvalidInputError, NotFoundError } from "../../model/errors.js";
import { parsePartitionPath } from "../../model/partition.js";
import { publishStaged, type RefusedMove, type StagedTable } from "../commit/publish.js";
import { syncLeaseName } from "../layout.js";
import type { HasLakeParts } from "../parts.js";
import type { HeldSync, SyncRecord } from "../sync-record.js";
import { collectAfterSwap } from "./gc.js";
import { findSync, recordSync } from "./syncs.js";
import { restoreSchemas, type SyncRollbackResult } from "./rollback.js";

/** What `lakeswap publish` did. */
export interface PublishResult {
  readonly syncId: string;
  /** The pointers that moved to their staged runs. */
  readonly published: readonly { readonly table: string; readonly partition: string; readonly runId: string; readonly previousRunId?: string }[];
  /** The partitions that were not published, and why (moved since they were staged, staged run gone, a failed move). */
  readonly refused: readonly RefusedMove[];
}

/**
 * Publishes a held sync: under the sync's own lease (a sync still running is waited for) and then the leases of
 * every table it staged runs of, each partition still at the run it was staged against moves to its staged run, all
 * tables in one publication (../commit/publish.ts); the others are refused and named. The record then lists the
 * moves as the sync's own, so `rollback --sync` undoes them; an `iceberg: true` table commits one snapshot.
 */
export async function publishSync(lake: HasLakeParts, syncId: string): Promise<PublishResult> {
  return onHeldSync(lake, syncId, "publish", async (record, held) => {
    const parts = lake.parts;
    const staged: StagedTable[] = [];
    for (const { table: name, runs } of held.tables) {
      const table = await parts.catalog.getTable(name);
      if (table) staged.push({ table, runs });
    }
    const gone: RefusedMove[] = held.tables
      .filter((t) => !staged.some((s) => s.table.name === t.table))
      .flatMap((t) => t.runs.map((m) => ({ table: t.table, partition: m.partition, reason: "the table no longer exists" })));
    const publishing: HeldSync = { ...held, status: "publishing" };
    const { moved, refused } = await publishStaged(parts, staged, record.syncId, () => recordSync(lake, { ...record, held: publishing }));
    const failed = moved.filter((m) => m.outcome.error !== undefined).map((m) => ({ table: m.table, partition: m.outcome.partition, reason: `the move failed: ${errorMessage(m.outcome.error)}` }));
    const published = moved.filter((m) => m.outcome.error === undefined).map((m) => ({ table: m.table, partition: m.outcome.partition, runId: m.outcome.runId as string, previousRunId: m.outcome.previousRunId }));
    const allRefused = [...gone, ...refused, ...failed];
    const isPublished = (table: string, partition: string) => published.some((p) => p.table === table && p.partition === partition);
    await recordSync(lake, {
      ...record,
      moves: record.moves.filter((m) => isPublished(m.table, m.partition)).map(({ pending: _pending, ...move }) => move),
      held: { ...held, status: "published", publishedAt: new Date().toISOString(), refused: allRefused },
    });
    for (const { table } of staged) {
      const partitions = published.filter((p) => p.table === table.name).map((p) => parsePartitionPath(p.partition, table.partitionKeys));
      if (partitions.length > 0) await collectAfterSwap(parts, table, partitions).catch(() => undefined);
    }
    return { syncId: record.syncId, published, refused: allRefused };
  });
}

/**
 * Drops a held sync: nothing moves, its staged runs are left to GC (never current, they go after the grace window),
 * and the schema changes it made in place (before it built) are undone as `rollback --sync` undoes them. Marked
 * discarded first: a discard stopped before its schemas were restored is finished by discarding it again.
 */
export async function discardSync(lake: HasLakeParts, syncId: string): Promise<{ readonly syncId: string; readonly runs: number; readonly schemas?: SyncRollbackResult["schemas"] }> {
  return onHeldSync(lake, syncId, "discard", async (record, held) => {
    if (held.status !== "discarded") await recordSync(lake, { ...record, moves: [], held: { ...held, status: "discarded" } });
    const schemas = await restoreSchemas(lake, record);
    return { syncId: record.syncId, runs: held.tables.reduce((sum, t) => sum + t.runs.length, 0), ...(schemas.length > 0 ? { schemas } : {}) };
  });
}

/**
 * Runs `work` on held sync `syncId` under its lease and its tables' leases, with its record read again under them.
 * A sync that is not held, or no longer (published, discarded), is refused with what to do instead; a publication
 * that committed but was interrupted (`publishing`) is finished by `publish`.
 */
async function onHeldSync<T>(lake: HasLakeParts, syncId: string, verb: "publish" | "discard", work: (record: SyncRecord, held: HeldSync) => Promise<T>): Promise<T> {
  const parts = lake.parts;
  const first = await findSync(lake, syncId, "held");
  const command = `${verb} sync ${first.syncId}`;
  return parts.withLease(syncLeaseName(first.syncId), command, async () => {
    // The tables it staged runs of, and those whose schema it changed in place (a discard restores them).
    const tables = [...new Set([...(first.held?.tables ?? []).map((t) => t.table), ...(first.schemaChanges ?? []).map((c) => c.table)])];
    return parts.withLeases(tables, command, async () => {
      const record = await findSync(lake, first.syncId);
      const held = record.held;
      if (!held) {
        throw new InvalidInputError(`sync ${record.syncId} is not held: it moved its pointers as it ran (lakeswap rollback --sync ${record.syncId} undoes it)`);
      }
      // Discarding again finishes a discard that stopped before it restored the sync's schemas (nothing else is left to do).
      if (held.status === "discarded" && verb === "discard") return work(record, held);
      if (held.status === "discarded") throw new NotFoundError(`sync ${record.syncId} was discarded; nothing of it can be published any more. Rerun the sync`);
      if (held.status === "published") throw new InvalidInputError(`sync ${record.syncId} was published already (${held.publishedAt}); lakeswap rollback --sync ${record.syncId} undoes it`);
      if (held.status === "publishing" && verb === "discard") {
        throw new InvalidInputError(`sync ${record.syncId} is being published (its publication committed, then stopped); finish it with lakeswap publish ${record.syncId}`);
      }
      return work(record, held);
    }, { summary: () => ({ "lakeswap.sync-id": first.syncId }) });
  }, { kernelLock: false });
}
