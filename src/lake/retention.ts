import { runIdTime } from "../model/run-id.js";

/** The default grace window: 6 hours, above Athena's longest query (240 minutes), so no running query loses its files. */
export const DEFAULT_GRACE_MS = 6 * 3_600_000;

/** One run as retention sees it. */
export interface RetentionCandidate {
  readonly runId: string;
  /** Has a manifest: it was swapped in and completed at least once. */
  readonly published: boolean;
  /** Has data files (a run whose files are gone is only a leftover manifest). */
  readonly hasFiles: boolean;
}

/** Why a run is kept or removed. */
export type RetentionReason =
  | "current"
  | "previous"
  | "rollback target"
  | "rewritten by a kept rebuild"
  | "within grace window"
  | "replaced within grace window"
  | "pending catalog change"
  | "superseded"
  | "incomplete build"
  | "leftover manifest";

/** One retention decision. */
export interface RetentionDecision {
  readonly runId: string;
  readonly keep: boolean;
  readonly reason: RetentionReason;
}

/** A swap of a partition to `runId`, from its manifest: the run it replaced and when. */
export interface RecordedSwap {
  readonly runId: string;
  readonly previousRunId?: string;
  /** The run this one rewrote under a rebuilt schema (`sync --rebuild-schema`). */
  readonly rebuiltFrom?: string;
  readonly swappedAt: Date;
}

/**
 * Decides which runs of one partition stay: the current run, the previous run
 * (rollback, and queries that started before the swap), the newest completed
 * run older than the current one (so a rollback always has a target), the run one of those rewrote (a rebuild by swap), runs a
 * pending catalog change refers to, every run younger than the grace window,
 * and every run that was current less than the grace window ago (`swaps`: a
 * reader that opened the catalog file then still reads its files). Everything
 * else goes, including half-written runs of failed builds.
 */
export function planRetention(input: {
  readonly runs: readonly RetentionCandidate[];
  readonly currentRunId?: string;
  readonly previousRunId?: string;
  readonly protectedRunIds?: ReadonlySet<string>;
  /** The partition's recorded swaps (its manifests); without them, a run's age alone counts. */
  readonly swaps?: readonly RecordedSwap[];
  readonly now: Date;
  readonly graceMs: number;
}): RetentionDecision[] {
  const { currentRunId, previousRunId } = input;
  const rollbackTarget = currentRunId
    ? input.runs
        .filter((run) => run.published && run.hasFiles && run.runId < currentRunId)
        .map((run) => run.runId)
        .sort()
        .at(-1)
    : undefined;
  const replacedRecently = recentlyReplaced(input.swaps ?? [], input.runs, input.now.getTime() - input.graceMs);
  // A rebuild by swap's run stands for the one it rewrote, which `rollback --sync` of the rebuild moves back to: kept
  // with it, also after a build in the same sync made the rebuilt run the previous one.
  const kept = new Set([currentRunId, previousRunId, rollbackTarget]);
  const rewritten = new Set((input.swaps ?? []).flatMap((swap) => (swap.rebuiltFrom !== undefined && kept.has(swap.runId) ? [swap.rebuiltFrom] : [])));
  return [...input.runs]
    .sort((a, b) => (a.runId < b.runId ? -1 : 1))
    .map((run): RetentionDecision => {
      const keep = (reason: RetentionReason): RetentionDecision => ({ runId: run.runId, keep: true, reason });
      const remove = (reason: RetentionReason): RetentionDecision => ({ runId: run.runId, keep: false, reason });
      if (run.runId === currentRunId) return keep("current");
      if (run.runId === previousRunId) return keep("previous");
      if (run.runId === rollbackTarget) return keep("rollback target");
      if (rewritten.has(run.runId)) return keep("rewritten by a kept rebuild");
      if (input.protectedRunIds?.has(run.runId)) return keep("pending catalog change");
      if (input.now.getTime() - runIdTime(run.runId).getTime() < input.graceMs) return keep("within grace window");
      if (replacedRecently.has(run.runId)) return keep("replaced within grace window");
      if (!run.hasFiles) return remove(run.published ? "leftover manifest" : "incomplete build");
      return remove(run.published ? "superseded" : "incomplete build");
    });
}

/**
 * The runs that stopped being current after `since`. A swap within the window ended the run it replaced
 * (`previousRunId`) and, where the pointer had been rolled back before it, any completed run between that one and the
 * new run: those were current until the rollback, which came before the swap. (A manifest's `swappedAt` is taken
 * as its batch's pointers are about to move: milliseconds before the move, nothing beside a grace window of hours.)
 */
function recentlyReplaced(swaps: readonly RecordedSwap[], runs: readonly RetentionCandidate[], since: number): Set<string> {
  const ended = new Set<string>();
  for (const swap of swaps) {
    const previous = swap.previousRunId;
    if (swap.swappedAt.getTime() <= since || previous === undefined) continue;
    ended.add(previous);
    for (const run of runs) if (run.published && run.runId > previous && run.runId < swap.runId) ended.add(run.runId);
  }
  return ended;
}

/** What GC decided (and, unless dry-run, did) for one partition. */
export interface PartitionGcReport {
  readonly table: string;
  readonly partition: string;
  readonly kept: readonly { runId: string; reason: RetentionReason }[];
  readonly removed: readonly { runId: string; reason: RetentionReason; bytes: number }[];
  /** Set when GC after a swap failed; the swap itself stands and a later GC retries. */
  readonly error?: string;
}
