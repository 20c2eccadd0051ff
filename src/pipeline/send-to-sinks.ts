import { TargetUnavailableError, type OtherSourcePartition, type Sink, type SinkColumn, type SinkLayout, type SinkOpener, type SinkPartitionWrite, type SinkSpec } from "../sinks/sink.js";
import { NotFoundError, errorMessage } from "../model/errors.js";
import type { ObjectStore } from "../store/object-store.js";
import type { Lake, PartitionState } from "../lake/lake.js";
import { parsePartitionPath, partitionPath } from "../model/partition.js";
import { mapLimited } from "../shared/map-limited.js";
import { keysInTwoPartitions } from "./shared-keys.js";
import { lakeIdentity, type LakeIdentity } from "../lake/lake-identity.js";

/** What happened to one partition at one sink: `sent`, `skipped` (its signature is already there) or `failed` (nothing applied). */
export interface SinkedPartition {
  /** The sink, as reports show it (never with a password). */
  readonly sink: string;
  readonly layer: string;
  readonly table: string;
  readonly partition: string;
  readonly action: "sent" | "skipped" | "failed" | "removed";
  /**
   * `target failed`: the target could not be prepared (unreachable, or a table that does not fit); the entry's partition
   * is then `*`. `another source's`: another lake or lake table sent the partition to the target, which keeps it.
   */
  readonly reason: "new" | "changed" | "unchanged" | "unreadable" | "gone from the lake" | "target failed" | "another source's";
  readonly run?: string;
  readonly rows?: number;
  readonly seconds: number;
  readonly error?: string;
}

/** One lake table and the sinks its layer declares. */
export interface SinkTargets {
  readonly layer: string;
  readonly table: string;
  readonly columns: readonly SinkColumn[];
  readonly partitionKeys: readonly string[];
  readonly sinks: readonly SinkSpec[];
}

/**
 * Partitions a sink may read ahead, per write it has in flight (the PostgreSQL sink exports the next partitions'
 * rows during the current transactions). One is enough to hide the export behind the database's work, and keeps at
 * most twice as many partitions' rows in TMPDIR as writes in flight.
 */
const READ_AHEAD = 1;

/** The signature a sink records for a partition: the lake's, or the run id where the partition was never signed. */
function sinkSignature(state: PartitionState): string {
  return state.signature ?? `run:${state.runId}`;
}

/**
 * Sends a table's current partitions to each of its sinks: only those whose
 * signature differs from what the sink recorded (so a rerun sends nothing and
 * a rolled-back partition is sent again), each in one transaction of the
 * target. A failure fails that partition (the target rolls it back) and never
 * the lake's swaps, which stand.
 */
export async function sendToSinks(
  lake: Lake,
  openSink: SinkOpener,
  targets: SinkTargets,
  states: ReadonlyMap<string, PartitionState>,
  selected: (partition: string) => boolean = () => true,
  onProgress?: (label: string) => void,
): Promise<SinkedPartition[]> {
  const current = [...states.values()].filter((s) => s.runId !== "" && selected(s.partition)).sort((a, b) => (a.partition < b.partition ? -1 : 1));
  const results: SinkedPartition[] = [];
  if (targets.sinks.length === 0) return results;
  // The lake's id goes with each partition's state row in a target: a target fed by two lakes keeps each one's apart.
  const identity = lakeIdentity(lake.parts.store);
  identity.catch(() => undefined);
  for (const spec of targets.sinks) {
    const sink = await openSink(spec);
    const base = { sink: sink.description, layer: targets.layer, table: `${spec.schema}.${spec.table}` };
    try {
      let source: LakeIdentity;
      try {
        source = await identity;
      } catch (error) {
        results.push({ ...base, partition: "*", action: "failed", reason: "target failed", seconds: 0, error: `${errorMessage(error)} (none of the table's partitions was checked or sent)` });
        continue;
      }
      const layout: SinkLayout = {
        lakeTable: targets.table,
        source: { lakeId: source.id, location: source.location },
        columns: targets.columns,
        partitionKeys: targets.partitionKeys,
        mode: spec.mode,
        primaryKey: spec.primaryKey,
        hardDelete: spec.hardDelete,
        deleteFlag: spec.deleteFlag,
      };
      results.push(...(await sendToSink({ lake, sink, layout, base, onProgress }, states, current, selected)));
    } finally {
      await sink.close();
    }
  }
  return results;
}

/** One sink of a table, opened, with the layout of the table there and how its report entries start. */
interface SinkTarget {
  readonly lake: Lake;
  readonly sink: Sink;
  readonly layout: SinkLayout;
  readonly base: Pick<SinkedPartition, "sink" | "layer" | "table">;
  readonly onProgress?: (label: string) => void;
}

/** One partition to send, with why; `unreadable` says why it cannot be (its run moved, or has no files). */
interface PlannedSend {
  readonly state: PartitionState;
  readonly reason: "new" | "changed";
  readonly write?: SinkPartitionWrite;
  readonly unreadable?: string;
}

/** Sends a table's `current` partitions to one sink: removes what the lake no longer has, then sends what changed. */
async function sendToSink(
  target: SinkTarget,
  states: ReadonlyMap<string, PartitionState>,
  current: readonly PartitionState[],
  selected: (partition: string) => boolean,
): Promise<SinkedPartition[]> {
  const { sink, layout, base } = target;
  let recorded: Map<string, string>;
  let others: ReadonlyMap<string, OtherSourcePartition>;
  try {
    ({ recorded, others } = await sink.prepare(layout));
  } catch (error) {
    // The target cannot be reached or does not fit: one failure for the whole target, said once (not once per partition).
    const count = current.length;
    return [{ ...base, partition: "*", action: "failed", reason: "target failed", seconds: 0, error: `${errorMessage(error)} (none of the table's ${count} partition(s) was checked or sent)` }];
  }
  const refused = refuseOtherSources(target, current, others);
  if (refused.length > 0 && refused[0]!.partition === "*") return refused;
  const results = [...refused, ...(await removeGone(sink, layout, base, recorded, states, selected))];
  let changed = current.filter((state) => !others.has(state.partition) && recorded.get(state.partition) !== sinkSignature(state));
  for (const state of current) {
    if (!changed.includes(state) && !others.has(state.partition)) results.push({ ...base, partition: state.partition, action: "skipped", reason: "unchanged", run: state.runId, seconds: 0 });
  }
  if (changed.length === 0) return results;
  if (layout.mode === "upsert") {
    let shared: Map<string, string>;
    try {
      shared = await keysInTwoPartitions(target.lake, layout, changed.map((s) => s.partition), changed.length === [...states.values()].filter((s) => s.runId !== "").length);
    } catch (error) {
      const why = `the check that no key is in two partitions of lake table ${layout.lakeTable} failed: ${errorMessage(error)}`;
      return [...results, { ...base, partition: "*", action: "failed", reason: "target failed", seconds: 0, error: `${sink.description}: ${why} (none of the table's ${changed.length} changed partition(s) was sent)` }];
    }
    for (const state of changed.filter((s) => shared.has(s.partition))) {
      results.push({ ...base, partition: state.partition, action: "failed", reason: sendReason(recorded.get(state.partition)), run: state.runId, seconds: 0, error: sharedKeyError(target, state.partition, shared.get(state.partition)!) });
    }
    changed = changed.filter((s) => !shared.has(s.partition));
    if (changed.length === 0) return results;
  }
  results.push(...(await writePartitions(target, await planSends(target, changed, recorded))));
  return results;
}

/**
 * The target's partitions that another source (another lake, or another table of this lake) sent are not this
 * table's to replace: each of this table's partitions among them fails, and the others are sent. An upsert target
 * whose key lacks a partition column fails whole once two sources feed it: a key of one source's partition could
 * overwrite the other's row of that key.
 */
function refuseOtherSources(target: SinkTarget, current: readonly PartitionState[], others: ReadonlyMap<string, OtherSourcePartition>): SinkedPartition[] {
  const { layout, sink, base } = target;
  if (others.size === 0) return [];
  const missing = layout.partitionKeys.filter((key) => !layout.primaryKey.includes(key));
  if (layout.mode === "upsert" && missing.length > 0) {
    const [partition, other] = [...others][0]!;
    const error =
      `${sink.description}: the target also holds partitions of ${other.source} (${partition}${others.size > 1 ? ` and ${others.size - 1} more` : ""}), and its key (${layout.primaryKey.join(", ")}) ` +
      `lacks the partition column(s) ${missing.join(", ")}: a key of lake table ${layout.lakeTable} could overwrite that source's row of the same key. ` +
      `Add ${missing.join(", ")} to the sink's primary_key (and the target's), or give this sink a table of its own; nothing was sent`;
    return [{ ...base, partition: "*", action: "failed", reason: "target failed", seconds: 0, error }];
  }
  return current
    .filter((state) => others.has(state.partition))
    .map((state) => ({
      ...base,
      partition: state.partition,
      action: "failed" as const,
      reason: "another source's" as const,
      run: state.runId,
      seconds: 0,
      error: `${sink.description}: ${others.get(state.partition)!.refusal}`,
    }));
}

/** Why an upsert partition that shares keys with another partition is not sent, and what the user can do. */
function sharedKeyError(target: SinkTarget, partition: string, why: string): string {
  const { layout, sink } = target;
  const missing = layout.partitionKeys.filter((key) => !layout.primaryKey.includes(key));
  return (
    `${sink.description}: partition ${partition} of lake table ${layout.lakeTable} ${why}; upsert holds each key (${layout.primaryKey.join(", ")}) once, ` +
    `so the target would keep whichever partition went last: make the keys unique across partitions (the layer's SQL, or the dataset's write: upsert), ` +
    `or add ${missing.join(", ")} to the sink's primary_key; nothing of this partition was sent`
  );
}

/** Every partition to send, in order, so that each write can name the next ones for the sink to read ahead. */
async function planSends(target: SinkTarget, changed: readonly PartitionState[], recorded: ReadonlyMap<string, string>): Promise<PlannedSend[]> {
  const { lake, sink, layout } = target;
  const table = layout.lakeTable;
  // Every current run of the changed partitions, a run without files too (an upsert that emptied the partition,
  // allow_empty): it is sent as what it is, no rows, so the target drops the partition's rows in the same
  // transaction as its state. A lake with local files hands the sink paths; an S3 lake's runs are read by key, and
  // copied by the sink.
  const [snapshot] = await lake.snapshot({ tables: [table], partitions: [{ table, partitions: changed.map((s) => s.partition) }] });
  const store = lake.parts.store;
  const remote = !store.capabilities.localPaths;
  const byPartition = new Map((snapshot?.partitions ?? []).map((run) => [partitionPath(run.partition), run]));
  return changed.map((state): PlannedSend => {
    const reason = sendReason(recorded.get(state.partition));
    const run = byPartition.get(state.partition);
    if (!run || run.runId !== state.runId) {
      const why = run ? `its run moved to ${run.runId} during the sync` : `run ${state.runId} has no files`;
      return { state, reason, unreadable: `${sink.description}: ${why}` };
    }
    const write: SinkPartitionWrite = {
      partition: run.partition,
      path: state.partition,
      runId: state.runId,
      signature: sinkSignature(state),
      files: remote ? [] : run.files.map((key) => store.localPath(key)),
      remote: remote ? { keys: run.files, read: (key) => readRunFile(store, key) } : undefined,
    };
    return { state, reason, write };
  });
}

/**
 * Writes the planned partitions one transaction each, as many at once as the sink takes (in order, reported in
 * order); a lost connection ends the table's sends with one failure: no write starts after it, those under way end
 * on their own.
 */
async function writePartitions(target: SinkTarget, planned: readonly PlannedSend[]): Promise<SinkedPartition[]> {
  const { sink, layout, base } = target;
  const inFlight = Math.max(1, sink.concurrentWrites ?? 1);
  const writes = planned.flatMap((entry) => (entry.write ? [entry.write] : []));
  let written = 0;
  let lost: unknown;
  // Writes start in plan order, so the `upcoming` of each are the writes not started yet.
  const outcomes = await mapLimited(planned, inFlight, async (entry): Promise<SinkedPartition | undefined> => {
    const { state, reason, write, unreadable } = entry;
    if (lost !== undefined) return undefined;
    if (!write) return { ...base, partition: state.partition, action: "failed", reason: "unreadable", run: state.runId, seconds: 0, error: unreadable };
    written += 1;
    const started = Date.now();
    target.onProgress?.(`${base.table}/${state.partition}`);
    try {
      const { rows } = await sink.write(layout, { ...write, upcoming: writes.slice(written, written + READ_AHEAD * inFlight) });
      return { ...base, partition: state.partition, action: "sent", reason, run: state.runId, rows, seconds: (Date.now() - started) / 1000 };
    } catch (error) {
      if (error instanceof TargetUnavailableError) lost ??= error;
      return { ...base, partition: state.partition, action: "failed", reason, run: state.runId, seconds: (Date.now() - started) / 1000, error: errorMessage(error) };
    }
  });
  const results = outcomes.filter((outcome): outcome is SinkedPartition => outcome !== undefined);
  // The connection is gone: the partitions left are not tried one by one (each would repeat the error), but said once.
  const left = planned.length - results.length;
  if (lost !== undefined && left > 0) {
    results.push({ ...base, partition: "*", action: "failed", reason: "target failed", seconds: 0, error: `${errorMessage(lost)} (the table's ${left} other partition(s) to send were not sent)` });
  }
  return results;
}

/**
 * The target mirrors the lake's partitions: one the sink holds but the lake no longer has (a rollback of the
 * sync that created it) loses its rows (upsert: its keys are deleted or marked deleted), in one transaction
 * with its state row.
 */
async function removeGone(
  sink: Sink,
  layout: SinkLayout,
  base: Pick<SinkedPartition, "sink" | "layer" | "table">,
  recorded: ReadonlyMap<string, string>,
  states: ReadonlyMap<string, PartitionState>,
  selected: (partition: string) => boolean,
): Promise<SinkedPartition[]> {
  const results: SinkedPartition[] = [];
  for (const path of [...recorded.keys()].sort()) {
    if (states.get(path)?.runId || !selected(path)) continue;
    const started = Date.now();
    try {
      const { rows } = await sink.remove(layout, parsePartitionPath(path, layout.partitionKeys), path);
      results.push({ ...base, partition: path, action: "removed", reason: "gone from the lake", rows, seconds: (Date.now() - started) / 1000 });
    } catch (error) {
      results.push({ ...base, partition: path, action: "failed", reason: "gone from the lake", seconds: (Date.now() - started) / 1000, error: errorMessage(error) });
    }
  }
  return results;
}

function sendReason(recorded: string | undefined): "new" | "changed" {
  return recorded === undefined ? "new" : "changed";
}


/** The bytes of one run file, by store key. */
async function readRunFile(store: ObjectStore, key: string): Promise<Uint8Array> {
  const object = await store.get(key);
  if (!object) throw new NotFoundError(`the run file ${key} is missing from the store`);
  return object.body;
}
