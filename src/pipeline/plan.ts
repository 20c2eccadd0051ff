import type { DatasetConfig, LayerConfig } from "../config/pipeline-config.js";
import type { LandedPart, LandedPartition, LandingSummary } from "../landing/landing.js";
import type { PartitionState } from "../lake/lake.js";
import type { AppendedFile } from "../lake/manifest.js";
import { InvalidInputError, errorMessage } from "../model/errors.js";
import { WHOLE_TABLE, assertPartitionValue, makePartition, parsePartitionPath, partitionPath, partitionValue, type Partition } from "../model/partition.js";
import { appendSignature, chainSignature } from "../model/signature.js";

/**
 * The decisions of a plan, as pure functions of what the lake holds (partition states, signatures) and what a
 * delivery or an upstream layer brings: which partitions are built and why. They read nothing themselves; the
 * pipeline reads the states, lands the delivery and maps the partitions, then asks these.
 */

/** Whether a partition is built or skipped. */
export type PlanAction = "build" | "skip";

/** Why a partition is built or skipped. */
export type PlanReason =
  | "new"
  | "content changed"
  | "upstream changed"
  | "transform changed"
  | "never signed"
  | "rolled back"
  | "forced"
  | "pinned"
  | "unchanged"
  | "signature version changed"
  | "appended"
  | "appended by difference"
  | "already appended"
  | "outside lookback"
  | "empty in source"
  | "fetch failed";

/** The decision for one partition of one layer. */
export interface PlannedPartition {
  readonly dataset: string;
  readonly layer: string;
  readonly table: string;
  readonly partition: string;
  readonly action: PlanAction;
  readonly reason: PlanReason;
  /** The signature the partition gets when built; undefined when an input was never signed (it is built, not signed). */
  readonly signature?: string;
  readonly fingerprint?: string;
  /** Signed inputs, `table/partition=signature`. */
  readonly inputs?: readonly string[];
  /** Upstream partitions read (derived layers). */
  readonly inputPartitions?: readonly string[];
  /** Rows in the delivery (raw layer). */
  readonly rows?: number;
  /** Why the day could not be fetched (`fetch failed`). */
  readonly error?: string;
  /** `write: append`: the files whose rows of the partition are appended by difference (`GrownPart.difference`). */
  readonly byDifference?: readonly string[];
}

/** What the decisions take from the sync's options. */
export interface PlanChoices {
  /** --full-refresh: every partition that is not pinned is built. */
  readonly fullRefresh?: boolean;
  /** --allow-duplicates: an append adds a delivery part again. */
  readonly allowDuplicates?: boolean;
  /** Whether `--partition` lets a partition of a table with these keys through (./partition-filter.ts). */
  readonly selected: (partition: Partition, keys: readonly string[], dataset: DatasetConfig) => boolean;
}

/** The rule: pinned, forced, new, rolled back, never signed, signed by another algorithm version, changed, or unchanged. */
export function decide(
  state: PartitionState | undefined,
  expected: string | undefined,
  changed: PlanReason,
  fullRefresh = false,
): { action: PlanAction; reason: PlanReason } {
  if (state?.pinned) return { action: "skip", reason: "pinned" };
  if (fullRefresh) return { action: "build", reason: "forced" };
  if (!state?.runId) return { action: "build", reason: "new" };
  if (state.movedBy === "rollback") return { action: "build", reason: "rolled back" };
  if (expected === undefined || state.signature === undefined) return { action: "build", reason: "never signed" };
  if (signatureVersion(state.signature) !== signatureVersion(expected)) return { action: "build", reason: "signature version changed" };
  if (state.signature !== expected) return { action: "build", reason: changed };
  return { action: "skip", reason: "unchanged" };
}

/** Whether a landed partition lies before a lookback window (`window`: its days) and already has a run: it is settled. */
export function outsideLookback(dataset: DatasetConfig, partition: Partition, state: PartitionState | undefined, window: ReadonlySet<string> | undefined): boolean {
  return window !== undefined && !!state?.runId && !window.has(partitionValue(partition, dataset.window!.key));
}

/** What the raw layer's plan is decided from, besides the delivery. */
export interface RawPlanInput {
  readonly dataset: DatasetConfig;
  /** The delivery's partitions, with their rows and signatures (for an upsert: the merge's). */
  readonly delivery: Pick<LandingSummary, "partitions">;
  readonly states: ReadonlyMap<string, PartitionState>;
  /** The days of the dataset's lookback window, if it has one. */
  readonly window?: ReadonlySet<string>;
  /** `write: append`: the delivery parts each current run was appended from, by partition (read from its manifest). */
  readonly appendedBefore: ReadonlyMap<string, readonly string[]>;
  /** `write: append`: the files each current run was appended from, through which line (its manifest's `appendedFiles`). */
  readonly appendedFilesBefore?: ReadonlyMap<string, readonly AppendedFile[]>;
  /**
   * `write: append`: the parts of files that only grew at their end since the current run took them (their rows through
   * the line then sign as then), with their rows after that line; by `grownKey`.
   */
  readonly grown?: ReadonlyMap<string, GrownPart>;
  /**
   * `write: append`: the lines of the bad rows of each of the delivery's files that has some (`RejectedFile.lines`), or
   * "unknown" where they are not known; a new run records those of each file it takes (`AppendedFile.skipped`).
   */
  readonly badLines?: ReadonlyMap<string, readonly number[] | "unknown">;
  /** The days an http source answered without rows, with the signature of a day without rows (./lookback.ts). */
  readonly emptyDays: readonly { readonly partition: string; readonly signature: string }[];
}

/** `write: append`: what a partition's new run takes from the delivery. */
export interface Appending {
  /** The delivery parts the new run holds, oldest first, this delivery's last (its manifest's `appended`). */
  readonly record: readonly string[];
  /** The delivery's files whose rows of the partition it takes; undefined: every file's. */
  readonly files?: readonly string[];
  /** Of some of `files` (a file that grew at its end), only the rows after this line; `rows`: the rows the run then takes. */
  readonly after?: Readonly<Record<string, number>>;
  /** Of some of `after`'s files, the lines at or before it whose rows the run takes too: bad rows then, fixed in place since. */
  readonly retaken?: Readonly<Record<string, readonly number[]>>;
  readonly rows?: number;
  /** The rows of the delivery the new run takes (the rest of its rows of the partition it holds already). */
  readonly taken: number;
  /** The files the new run holds rows of, each through its last line (its manifest's `appendedFiles`). */
  readonly appendedFiles?: readonly AppendedFile[];
}

/**
 * A part of a file that grew at its end since it was appended through line `through` (or whose bad rows then, at the
 * lines `skipped`, were fixed in place since): its rows after that line and at those lines.
 */
export interface GrownPart {
  readonly through: number;
  readonly skipped?: readonly number[];
  readonly rows: number;
  readonly signature: string;
  /**
   * No split showed what the part continues (a row edited in place, too many bad lines or renamed files to follow): its
   * rows are those the partition does not hold, by content (`Landing.differenceParts`), after `through` and at `skipped`.
   */
  readonly difference?: true;
}

/** The key of a partition's part of one file (`RawPlanInput.grown`). */
export function grownKey(partition: string, file: string): string {
  return `${partition}\0${file}`;
}

/**
 * The raw layer's plan: for partition_replace and upsert (whose delivery is the merge), each partition's signature
 * against the current one; for append, which of the delivery's parts of the partition (one per file) the current run
 * does not hold yet (`appended`: what each new run takes, and the parts it will have been appended from).
 */
export function planRaw(input: RawPlanInput, choices: PlanChoices): { plan: PlannedPartition[]; appended: Map<string, Appending> } {
  const { dataset, states, window } = input;
  const keys = dataset.partition.map((p) => p.key);
  const appended = new Map<string, Appending>();
  const plan: PlannedPartition[] = [];
  for (const landed of input.delivery.partitions.filter((l) => choices.selected(l.partition, keys, dataset))) {
    const partition = partitionPath(landed.partition);
    const state = states.get(partition);
    const base = { dataset: dataset.name, layer: "raw", table: dataset.table, partition, rows: landed.rows };
    if (outsideLookback(dataset, landed.partition, state, window)) {
      // A day before the lookback window is settled: a delivery that still holds it does not rewrite it.
      plan.push({ ...base, action: "skip", reason: "outside lookback" });
      continue;
    }
    if (dataset.write !== "append") {
      plan.push({ ...base, ...decide(state, landed.signature, "content changed", choices.fullRefresh), signature: landed.signature });
      continue;
    }
    const decided = state?.pinned ? undefined : planAppend(input, landed, state, choices);
    if (!decided) plan.push({ ...base, action: "skip", reason: "pinned" });
    else if (decided.action === "skip") plan.push({ ...base, ...decided, signature: state?.signature });
    else {
      appended.set(partition, decided.appending);
      const byDifference = decided.byDifference.length > 0 ? { byDifference: decided.byDifference } : {};
      const reason = !state?.runId ? "new" : decided.byDifference.length > 0 ? "appended by difference" : "appended";
      plan.push({ ...base, rows: decided.rows, action: "build", reason, signature: decided.signature, ...byDifference });
    }
  }
  // The days an http source answered without rows: built empty (allow_empty), or skipped and reported.
  for (const { partition, signature } of input.emptyDays) {
    const base = { dataset: dataset.name, layer: "raw", table: dataset.table, partition, rows: 0 };
    if (!dataset.window!.allowEmpty) plan.push({ ...base, action: "skip", reason: "empty in source" });
    else plan.push({ ...base, ...decide(states.get(partition), signature, "content changed", choices.fullRefresh), signature });
  }
  return { plan, appended };
}

/**
 * An append's plan of a partition: the parts (./freshParts) its current run does not hold; of a file that only grew at
 * its end since the run took it (`RawPlanInput.grown`), its rows after the line it was taken through. What the new run
 * takes, the parts it will hold, and its signature (the parts' appended one by one).
 */
function planAppend(
  input: RawPlanInput,
  landed: LandedPartition,
  state: PartitionState | undefined,
  choices: PlanChoices,
): { action: "skip"; reason: "already appended" } | { action: "build"; rows: number; signature?: string; appending: Appending; byDifference: string[] } {
  const partition = partitionPath(landed.partition);
  const before = state?.runId ? (input.appendedBefore.get(partition) ?? []) : [];
  const filesBefore = state?.runId ? (input.appendedFilesBefore?.get(partition) ?? []) : [];
  const fresh = freshParts(landed, before, choices.allowDuplicates === true);
  const taken = fresh.flatMap((part): { part: LandedPart; rows: number; signature: string; after?: number; retaken?: readonly number[]; difference?: true }[] => {
    const grown = choices.allowDuplicates ? undefined : input.grown?.get(grownKey(partition, part.file));
    if (!grown) return [{ part, rows: part.rows, signature: part.signature }];
    const retaken = grown.skipped?.length ? { retaken: grown.skipped } : {};
    const difference = grown.difference ? { difference: grown.difference } : {};
    // A part whose rows are all held by content (reordered, or rows only taken out) is still taken, with no rows: the
    // new run records the file as it is now, so that it is known when it is renamed or grows (or the next sync reads the
    // partition's rows again to find nothing new).
    return grown.rows === 0 && !grown.difference ? [] : [{ part, rows: grown.rows, signature: grown.signature, after: grown.through, ...retaken, ...difference }];
  });
  if (taken.length === 0) return { action: "skip", reason: "already appended" };
  const parts = landed.parts ?? [];
  const whole = taken.length === (landed.parts?.length ?? 1) && taken.every((t) => t.after === undefined);
  const after = Object.fromEntries(taken.flatMap((t) => (t.after === undefined ? [] : [[t.part.file, t.after] as const])));
  const retaken = Object.fromEntries(taken.flatMap((t) => (t.retaken === undefined ? [] : [[t.part.file, t.retaken] as const])));
  // A grown file's whole part is held too: the same file unchanged next time is recognised without splitting it.
  const record = [...before, ...taken.flatMap((t) => (t.after === undefined ? [t.signature] : [t.signature, t.part.signature]))];
  const files = new Map(filesBefore.map((f) => [f.file, f]));
  for (const { part } of taken) if (part.through !== undefined && parts.length > 0) files.set(part.file, appendedFile(part, part.through, input.badLines?.get(part.file)));
  // A file whose rows the run holds already under another name (renamed, copied, rotated) is recorded as it is too, where
  // its name has no record of its first row: a new file under the name it had would overwrite the record it continues.
  for (const part of parts) {
    const known = files.get(part.file);
    if (part.through !== undefined && !fresh.includes(part) && (known === undefined || (part.head !== undefined && known.head !== part.head))) {
      files.set(part.file, appendedFile(part, part.through, input.badLines?.get(part.file)));
    }
  }
  const rows = taken.reduce((sum, t) => sum + t.rows, 0);
  const appending: Appending = {
    record,
    taken: rows,
    ...(whole ? {} : { files: taken.map((t) => t.part.file) }),
    ...(Object.keys(after).length > 0 ? { after, rows } : {}),
    ...(Object.keys(retaken).length > 0 ? { retaken } : {}),
    ...(files.size > 0 ? { appendedFiles: [...files.values()] } : {}),
  };
  // A new partition of every part signs as its rows do; of some (a file's copy left out), as the parts appended one by one.
  const first = whole ? landed.signature : taken[0]!.signature;
  const signature = !state?.runId
    ? taken.slice(whole ? taken.length : 1).reduce((s, t) => appendSignature(s, t.signature), first)
    : state.signature === undefined
      ? undefined
      : taken.reduce((s, t) => appendSignature(s, t.signature), state.signature);
  return { action: "build", rows, signature, appending, byDifference: taken.filter((t) => t.difference).map((t) => t.part.file) };
}

/**
 * What a new run records of a file it takes rows of: the last line of the partition's rows in it, what they sign as, and
 * the lines at or before it that were bad rows (`bad`: the file's, where known), whose rows the signature leaves out.
 */
function appendedFile(part: LandedPart, through: number, bad: readonly number[] | "unknown" | undefined): AppendedFile {
  const skipped = bad === undefined || bad === "unknown" ? [] : bad.filter((line) => line <= through);
  return { file: part.file, through, signature: part.signature, rows: part.rows, ...(skipped.length > 0 ? { skipped } : {}), ...(part.head !== undefined ? { head: part.head } : {}) };
}

/**
 * An append's parts of a landed partition that its current run (appended from the parts `before`) does not hold:
 * each file's rows of it (a delivery landed without parts is one), in the delivery's order. A part is held when its
 * signature is one of `before` (the same file again, or the same rows in another file), or when the whole delivery's
 * is (one appended before the current run recorded a part per file); of two files of one delivery with the same rows
 * for the partition (a copy), the first is taken, as it would be were they delivered one sync apart. With
 * `allowDuplicates`, every part.
 */
function freshParts(landed: LandedPartition, before: readonly string[], allowDuplicates: boolean): LandedPart[] {
  const parts = landed.parts ?? [{ file: "", rows: landed.rows, signature: landed.signature }];
  if (allowDuplicates) return [...parts];
  const held = new Set(before);
  if (held.has(landed.signature)) return [];
  return parts.filter((p) => !held.has(p.signature) && held.add(p.signature));
}

/** What a derived layer's plan is decided from. */
export interface LayerPlanInput {
  readonly dataset: DatasetConfig;
  readonly layer: LayerConfig;
  readonly upstreamTable: string;
  /** The upstream layer's signatures by partition (undefined: never signed). */
  readonly upstream: ReadonlyMap<string, string | undefined>;
  /** The partition values `inputs.map` gives each upstream partition, in the order of its sorted paths. */
  readonly mapped: readonly (readonly string[])[];
  /** The layer's own partition states. */
  readonly states: ReadonlyMap<string, PartitionState>;
  /** The whole-table inputs' signatures (`table/*=digest`). */
  readonly lookups: readonly string[];
}

/**
 * A derived layer's plan: upstream partitions grouped by the partition they map to, each group's chained signature
 * against the current one. A change is reported as `upstream changed`; which input changed (the transform, read from
 * the current run's manifest) is told by the caller.
 */
export function planLayer(input: LayerPlanInput, choices: PlanChoices): PlannedPartition[] {
  const { dataset, layer, upstreamTable, upstream } = input;
  const plans: PlannedPartition[] = [];
  for (const [partition, inputPartitions] of groupByTarget(input)) {
    if (!choices.selected(parsePartitionPath(partition, layer.partitionKeys), layer.partitionKeys, dataset)) continue;
    const inputSignatures = inputPartitions.map((p) => upstream.get(p));
    const signed = inputSignatures.every((s): s is string => s !== undefined);
    const inputs = signed ? [...inputPartitions.map((p, i) => `${upstreamTable}/${p}=${inputSignatures[i]}`), ...input.lookups] : undefined;
    const signature = inputs ? chainSignature(inputs, layer.fingerprint, partition) : undefined;
    const decision = decide(input.states.get(partition), signature, "upstream changed", choices.fullRefresh);
    plans.push({ dataset: dataset.name, layer: layer.name, table: layer.table, partition, ...decision, signature, fingerprint: layer.fingerprint, inputs, inputPartitions });
  }
  return plans;
}

/** The layer's partitions, sorted, each with the upstream partitions that feed it. */
function groupByTarget(input: LayerPlanInput): [string, string[]][] {
  const { dataset, layer } = input;
  const groups = new Map<string, string[]>();
  [...input.upstream.keys()].sort().forEach((upstreamPath, index) => {
    const values = input.mapped[index] ?? [];
    const pairs = layer.partitionKeys.map((key, i) => {
      const value = values[i] ?? "";
      try {
        return [key, assertPartitionValue(key, value)] as const;
      } catch (error) {
        throw new InvalidInputError(
          `datasets.${dataset.name}.layers.${layer.name}.inputs.map.${key}: for upstream partition ${upstreamPath} it gives ${value === "" ? "NULL" : `'${value}'`}: ${errorMessage(error)}`,
        );
      }
    });
    const target = partitionPath(pairs.length === 0 ? WHOLE_TABLE : makePartition(pairs));
    groups.set(target, [...(groups.get(target) ?? []), upstreamPath]);
  });
  return [...groups.entries()].sort(([a], [b]) => (a < b ? -1 : 1));
}

/** Signatures a layer will have after the sync: built partitions get the planned one, skipped keep theirs. */
export function predict(states: ReadonlyMap<string, PartitionState>, plan: readonly PlannedPartition[]): Map<string, string | undefined> {
  const predicted = signaturesOf(states);
  for (const p of plan) {
    if (p.action === "build") predicted.set(p.partition, p.signature);
  }
  return predicted;
}

/** The signatures of the partitions that have a run. */
export function signaturesOf(states: ReadonlyMap<string, PartitionState>): Map<string, string | undefined> {
  const map = new Map<string, string | undefined>();
  for (const [partition, state] of states) if (state.runId) map.set(partition, state.signature);
  return map;
}

/** The algorithm version of a signature (`v2` of `v2:…`, docs/signatures.md). */
function signatureVersion(signature: string): string {
  return signature.slice(0, Math.max(0, signature.indexOf(":")));
}
