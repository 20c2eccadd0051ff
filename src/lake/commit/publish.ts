import { parsePartitionPath } from "../../model/partition.js";
import { undoneSchemaOf, type TableDefinition } from "../../model/table.js";
import { faultPoint } from "../../shared/faults.js";
import type { RunManifest } from "../manifest.js";
import type { OutboxEntry } from "../outbox.js";
import { currentPointers, runPrefix, runsStillThere } from "../runs.js";
import { MOVES_PER_ENTRY, moveChunk, type Audited, type SwapContext, type SwapOutcome } from "./swap.js";

/** A partition of a held sync that was not published, and why. */
export interface RefusedMove {
  readonly table: string;
  readonly partition: string;
  readonly reason: string;
}

/** The staged runs of one table, as a held sync recorded them. */
export interface StagedTable {
  readonly table: TableDefinition;
  readonly runs: readonly RunManifest[];
}

/**
 * Publishes staged runs of several tables as one decision; the caller holds every table's lease. Each partition
 * must still be at the run it was staged against and its staged run must still be there (GC removes a staged run
 * after the grace window); the others are refused, named with the reason. Then one outbox entry per table (per
 * 1,000 moves) is recorded, all of them before `commit` (the held sync's record saying `publishing`), and only
 * after the commit does any pointer move: a publication killed before it moves nothing (its entries are dropped on
 * replay), one killed after it is finished by the next writer. A partition already at its staged run (a publication
 * that committed and was killed) counts as moved.
 */
export async function publishStaged(
  ctx: SwapContext,
  staged: readonly StagedTable[],
  syncId: string,
  commit: () => Promise<void>,
): Promise<{ moved: { table: string; outcome: SwapOutcome }[]; refused: RefusedMove[] }> {
  const refused: RefusedMove[] = [];
  const moved: { table: string; outcome: SwapOutcome }[] = [];
  const chunks: { table: TableDefinition; chunk: Audited[]; started: number }[] = [];
  for (const { table, runs } of staged) {
    const partitions = runs.map((m) => parsePartitionPath(m.partition, table.partitionKeys));
    const currents = await currentPointers(ctx, table, partitions);
    const present = await runsStillThere(ctx, table, runs.map((m, i) => ({ partition: partitions[i]!, runId: m.runId, recordedEmpty: m.files.length === 0 })));
    const ready: Audited[] = [];
    runs.forEach((m, i) => {
      const current = currents.get(m.partition);
      if (current?.runId === m.runId) {
        moved.push({ table: table.name, outcome: { partition: m.partition, runId: m.runId, previousRunId: m.previousRunId, rows: m.rows, bytes: m.bytes, seconds: 0 } });
      } else if (current?.runId !== m.previousRunId) {
        const now = current ? `run ${current.runId} is current now` : "the partition has no current run now";
        refused.push({ table: table.name, partition: m.partition, reason: `moved since it was staged against ${m.previousRunId === undefined ? "no run" : `run ${m.previousRunId}`}: ${now}` });
      } else if (!present[i]) {
        refused.push({ table: table.name, partition: m.partition, reason: `its staged run ${m.runId} is gone (gc removes staged runs after the grace window); rerun the sync` });
      } else if (table.rebuiltAt !== undefined && m.runId < table.rebuiltAt) {
        refused.push({ table: table.name, partition: m.partition, reason: `its staged run ${m.runId} was written before the table was rebuilt by swap under other columns; rerun the sync` });
      } else if (undoneSchemaOf(table, m.runId)) {
        refused.push({ table: table.name, partition: m.partition, reason: `its staged run ${m.runId} was written under a schema change rolled back since; rerun the sync` });
      } else {
        ready.push(audited(ctx, table, m, partitions[i]!, current));
      }
    });
    const started = Math.min(...runs.map((m) => Date.parse(m.builtAt)));
    for (let start = 0; start < ready.length; start += MOVES_PER_ENTRY) chunks.push({ table, chunk: ready.slice(start, start + MOVES_PER_ENTRY), started });
  }
  if (chunks.length === 0) {
    await commit();
    return { moved, refused };
  }
  const recordings: Promise<OutboxEntry>[] = [];
  let settle!: { resolve: () => void; reject: (error: unknown) => void };
  const committed = new Promise<void>((resolve, reject) => (settle = { resolve, reject }));
  committed.catch(() => undefined);
  const moving = chunks.map(({ table, chunk, started }) => moveChunk(ctx, table, chunk, started, { syncId, committed, onRecorded: (entry) => recordings.push(entry) }));
  // Every entry stored, then the commit: until then, every chunk waits at its fence with nothing moved.
  Promise.all(recordings)
    .then(() => {
      faultPoint("before-publish-commit");
      return commit();
    })
    .then(settle.resolve, settle.reject);
  const results = await Promise.allSettled(moving);
  const failure = results.find((r): r is PromiseRejectedResult => r.status === "rejected");
  if (failure) {
    // Not committed: every entry goes (nothing moved). Committed: the entries stay for the next writer to finish.
    const uncommitted = await committed.then(() => false, () => true);
    if (uncommitted) for (const recording of recordings) await recording.then((entry) => ctx.outbox.acknowledge(entry)).catch(() => undefined);
    throw failure.reason;
  }
  results.forEach((r, i) => {
    const table = chunks[i]!.table.name;
    if (r.status === "fulfilled") for (const outcome of r.value) moved.push({ table, outcome });
  });
  return { moved, refused };
}

/** A staged run as the move step takes it, rebuilt from its manifest. */
function audited(ctx: SwapContext, table: TableDefinition, m: RunManifest, partition: Audited["item"]["partition"], current: Audited["current"]): Audited {
  return {
    item: { partition, signature: m.signature, fingerprint: m.fingerprint, inputs: m.inputs, appended: m.appended, appendedFiles: m.appendedFiles },
    path: m.partition,
    current,
    runId: m.runId,
    prefix: runPrefix(ctx.catalog, table, partition, m.runId),
    rows: m.rows,
    files: m.files,
    bytes: m.bytes,
    builtAt: Date.parse(m.builtAt) + m.buildSeconds * 1000,
  };
}
