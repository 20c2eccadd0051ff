import { footerFacts, type FileFacts } from "./file-facts.js";
import type { Pointer, PointerMove } from "../../catalog/catalog.js";
import type { BuildResult, PartitionSnapshot } from "../../engine/engine.js";
import type { LandedDelivery } from "../../landing/landing.js";
import { AuditError, LakeswapError, errorMessage } from "../../model/errors.js";
import { faultPoint } from "../../shared/faults.js";
import type { AppendedFile, RunManifest } from "../manifest.js";
import type { Outbox, OutboxEntry } from "../outbox.js";
import { partitionPath, type Partition } from "../../model/partition.js";
import { newRunIdAfter } from "../../model/run-id.js";
import { currentPointers, discardRun, engineSnapshot, runFileNames, ensureManifest, listRunFiles, listRunsOf, readManifest, runPrefix, writeManifest, type LakeContext, type RunFile } from "../runs.js";
import { mapLimited } from "../../shared/map-limited.js";
import { movePointers } from "./move.js";
import { overlaid, restrictSources, settledScope, snapshotScope } from "./build-scope.js";
import { buildLandedRuns, stopsBatch } from "./landed-runs.js";
import { stagedReads } from "./staged-reads.js";
import { gateOnAudits } from "./data-audits.js";
import type { AuditFinding, AuditSpec } from "../../model/audit.js";
import { schemaMark, type TableDefinition } from "../../model/table.js";

/** How many pointer moves one outbox entry carries: the catalog then moves them in its own batches (Glue: 100 per call). */
export const MOVES_PER_ENTRY = 1000;

/** Manifests, footers and listings in flight at once. */
const IO_CONCURRENCY = 16;

/** The shared parts of a swap: the lake's ports and its outbox. */
export interface SwapContext extends LakeContext {
  readonly outbox: Outbox;
  /** What audits learnt of `iceberg: true` tables' new files, for the Iceberg commit after them. */
  readonly fileFacts: FileFacts;
}

/** One partition to replace in a batch, with what its run records. */
export interface SwapItem {
  readonly partition: Partition;
  /** Recorded with the run and moved with the pointer. */
  readonly signature?: string;
  /** The transform's fingerprint (derived layers). */
  readonly fingerprint?: string;
  /** The signed inputs (`table/partition=signature`). */
  readonly inputs?: readonly string[];
  /** `write: append`: the delivery parts appended so far, this one last (kept in the run's manifest). */
  readonly appended?: readonly string[];
  /** A `landed` build: the delivery's files whose rows of the partition the run takes (an append of some); absent: every file's. */
  readonly landedFiles?: readonly string[];
  /** Of some of `landedFiles` (a file that grew at its end), only the rows after this line; `landedRows`: how many rows the run then takes. */
  readonly landedAfter?: Readonly<Record<string, number>>;
  /** Of some of `landedAfter`'s files, lines at or before it whose rows the run takes too (bad rows then, fixed since). */
  readonly landedRetaken?: Readonly<Record<string, readonly number[]>>;
  readonly landedRows?: number;
  /** `write: append`: the files appended from and through which line (kept in the run's manifest). */
  readonly appendedFiles?: readonly AppendedFile[];
  /** The SELECT of a `select` build. */
  readonly select?: string;
  /** What the SELECT sees of some tables: only these partitions (a derived partition's declared inputs). */
  readonly inputPartitions?: readonly { readonly table: string; readonly partitions: readonly string[] }[];
}

/**
 * How a batch's runs are built: `landed` writes every run from a landed
 * delivery in one pass (the raw layer); `select` runs each item's SELECT,
 * several at once, over one snapshot of the tables they may read.
 */
export type SwapBuild =
  | {
      readonly kind: "landed";
      readonly delivery: LandedDelivery;
      /**
       * `write: append`: each new run also holds the current run's files, copied
       * within the store (hard links locally, server-side copies on S3), so the
       * run is the partition's rows so far plus the delivery's, and runs stay immutable.
       */
      readonly carryCurrent?: boolean;
    }
  | {
      readonly kind: "select";
      /** The SELECTs read a landed delivery (dead letters), not lake tables. */
      readonly landed?: boolean;
      /** The lake tables the SELECTs may read (default: every table). */
      readonly readable?: readonly string[];
      /** Builds at once. */
      readonly concurrency?: number;
      /** Of `readable`, the tables this writer does not hold (another writer's): read at a state a finished batch left. */
      readonly unleased?: readonly string[];
    };

/** Options of one batch of replaces. */
export interface SwapOptions {
  readonly build: SwapBuild;
  /** Accept a build of 0 rows for a partition that has rows, or a new empty one (default false). */
  readonly allowEmpty?: boolean;
  /**
   * Told the moves this batch plans as its builds start, so a sync records its intent; the record is written while
   * the runs are built (its fsyncs hidden behind the builds) and awaited before any pointer moves. A move whose build
   * or audit then fails stays in it as planned only, which the caller abandons (rollback --sync finds its pointer
   * where it was).
   */
  readonly beforeSwap?: (moves: readonly { readonly partition: string; readonly runId: string; readonly previousRunId?: string }[]) => Promise<void>;
  /** Told each partition whose build (and audit) ended, for progress. */
  readonly onBuilt?: (partition: string) => void;
  /** Read the current run's row count (from its manifest, recovered if missing) for the report: a replace of one partition. */
  readonly previousRows?: boolean;
  /**
   * Issue each new run id after every run of its partition (their folders listed), not only after the current one: a
   * replace's run then sorts after the leftover of a writer killed in the same second, as history lists them. Default
   * false: a batch lists no partition (a leftover, never current and without a manifest, is only an incomplete build for GC).
   */
  readonly afterLeftovers?: boolean;
  /** The data audits each staged run must pass before its pointer moves (./data-audits.ts). */
  readonly audits?: readonly AuditSpec[];
  /**
   * Build and audit only: no pointer moves. Each outcome that passed carries its run's manifest (`staged`), from which
   * `publishStaged` (./publish.ts) moves it later; layers built meanwhile read it through `SwapOptions.overlay`.
   */
  readonly stage?: boolean;
  /** Runs a select build reads in place of the current ones (a held sync's staged runs of upstream tables). */
  readonly overlay?: ReadonlyMap<string, ReadonlyMap<string, PartitionSnapshot>>;
  /** Given the step after the moves (manifests, acknowledgement) to await before its manifests are read or the lease goes (../lake.ts), instead of awaiting it. */
  readonly afterMove?: (recorded: Promise<void>) => void;
}

/** What happened to one partition of a batch. */
export interface SwapOutcome {
  readonly partition: string;
  /** The run that is current now; absent when this partition failed. */
  readonly runId?: string;
  readonly previousRunId?: string;
  readonly rows?: number;
  readonly previousRows?: number;
  readonly bytes?: number;
  readonly seconds: number;
  /** Why this partition failed; its pointer did not move. */
  readonly error?: unknown;
  /** What its data audits found (warnings, or the errors that kept its pointer). */
  readonly audits?: readonly AuditFinding[];
  /** `stage`: the staged run's manifest (its pointer did not move). */
  readonly staged?: RunManifest;
  /**
   * The partition held no run before this one (no pointer, nothing listed under it when the batch began, under the
   * lease): its new run is all it holds, and GC after the swap has nothing of it to collect.
   */
  readonly onlyRun?: boolean;
}

interface Planned {
  readonly item: SwapItem;
  readonly path: string;
  readonly current?: Pointer;
  readonly runId: string;
  readonly prefix: string;
  /** No pointer and no run listed under the partition when the batch began (SwapOutcome.onlyRun). */
  readonly alone?: boolean;
}

export interface Audited extends Planned {
  readonly rows: number;
  readonly files: readonly RunFile[];
  readonly bytes: number;
  readonly previousRows?: number;
  readonly builtAt: number;
}

/**
 * Replaces many partitions of one table as one batch, under the table's
 * lease: every run is built into a fresh prefix (a landed delivery in one
 * pass), audited from its own files, then the pointers move together: one
 * outbox entry per `MOVES_PER_ENTRY` moves, the catalog's batches, then the
 * runs' manifests, then the entry is acknowledged. A partition whose build or
 * audit fails keeps its pointer and is reported; the others go on.
 */
export async function swapBatch(ctx: SwapContext, table: TableDefinition, items: readonly SwapItem[], options: SwapOptions): Promise<SwapOutcome[]> {
  faultPoint("lease-acquired");
  const started = Date.now();
  // The SELECTs are checked while the batch reads its pointers and snapshot.
  if (options.build.kind === "select" && !options.build.landed) ctx.engine.prepareSelects?.(items.flatMap((item) => (item.select === undefined ? [] : [item.select])));
  const currents = await currentPointers(ctx, table, items.map((item) => item.partition));
  // The newest run on disk, where the pointer does not name it: a partition without a pointer (new, or removed by a
  // rollback of the sync that created it, whose run is kept until GC) may hold runs newer than any pointer says; and
  // `afterLeftovers`, every partition. A new run's id sorts after them (the model test found one that did not).
  const newest = new Map<string, string>();
  const empty = new Set<string>();
  const leftovers = items.filter((item) => options.afterLeftovers || !currents.get(partitionPath(item.partition)));
  for (const [path, runs] of await listRunsOf(ctx, table, leftovers.map((item) => item.partition))) {
    const last = runs.at(-1)?.runId;
    if (last !== undefined) newest.set(path, last);
    else if (!currents.get(path)) empty.add(path);
  }
  const planned: Planned[] = items.map((item) => {
    const path = partitionPath(item.partition);
    const current = currents.get(path);
    // After the current run and the one before it (a rollback leaves a newer run behind the pointer).
    // And after the table's last schema change or undoing of one: a run written under a schema sorts after its change (a rollback reads it).
    const latest = [current?.runId, current?.previousRunId, newest.get(path), schemaMark(table)].filter((id): id is string => id !== undefined).sort().at(-1);
    const runId = newRunIdAfter(latest);
    return { item, path, current, runId, prefix: runPrefix(ctx.catalog, table, item.partition, runId), ...(empty.has(path) ? { alone: true } : {}) };
  });

  const failed = new Map<string, unknown>();
  const fail = (p: Planned, error: unknown): void => {
    failed.set(p.path, error);
    options.onBuilt?.(p.path);
  };
  const intent = options.beforeSwap?.(planned.map((p) => ({ partition: p.path, runId: p.runId, previousRunId: p.current?.runId })));
  intent?.catch(() => undefined); // awaited below, whatever the builds do
  let built: Awaited<ReturnType<typeof buildRuns>>;
  try {
    built = await buildRuns(ctx, table, planned, options.build, fail, options.overlay);
  } finally {
    await intent?.catch(() => undefined);
  }
  faultPoint("after-build");
  // The data audits gate the moves; a partition that fails one keeps its run (for inspection) and its pointer.
  const { passed: audited, findings } = await gateOnAudits(ctx, table, await auditRuns(ctx, table, built, options, fail), options.audits, new Date(started), (p, e) => failed.set(p.path, e));
  const outcomes = new Map<string, SwapOutcome>();
  for (const [path, error] of failed) outcomes.set(path, { partition: path, seconds: (Date.now() - started) / 1000, error, audits: findings.get(path) });
  // The intent is stored before any pointer moves; a record that could not be written stops the batch.
  await intent;
  if (options.stage) {
    for (const [i, manifest] of runManifests(table, audited, started).entries()) {
      const a = audited[i] as Audited;
      outcomes.set(a.path, { partition: a.path, runId: a.runId, previousRunId: a.current?.runId, rows: a.rows, bytes: a.bytes, seconds: (Date.now() - started) / 1000, staged: manifest });
    }
  } else if (audited.length > 0) {
    // No lease check here: the catalog fences right before its first move (a write of the lease on S3), and a lease
    // lost before then voids this batch's outbox entry (moveChunk).
    for (let start = 0; start < audited.length; start += MOVES_PER_ENTRY) {
      const chunk = audited.slice(start, start + MOVES_PER_ENTRY);
      for (const outcome of await moveChunk(ctx, table, chunk, started, undefined, options.afterMove)) outcomes.set(outcome.partition, outcome);
    }
  }
  return planned.map((p) => ({ audits: findings.get(p.path), ...(outcomes.get(p.path) ?? { partition: p.path, seconds: 0, error: new Error("not built") }) }));
}

/** Builds every planned run; a failed build's prefix is removed (best effort) and the partition reported. */
async function buildRuns(
  ctx: SwapContext,
  table: TableDefinition,
  planned: Planned[],
  build: SwapBuild,
  fail: (p: Planned, error: unknown) => void,
  overlay: SwapOptions["overlay"],
): Promise<{ planned: Planned; result: BuildResult; builtAt: number }[]> {
  if (planned.length === 0) return [];
  if (build.kind === "landed") return buildLandedRuns(ctx, table, planned, build, fail);

  // One snapshot for the whole batch, of the partitions some build reads; each build sees its own inputs only.
  const snapshot = build.landed ? [] : await engineSnapshot(ctx, settledScope(ctx, snapshotScope(planned, build.readable), build.unleased));
  const sources = overlaid(snapshot, overlay);
  // A held sync's staged runs, for an engine that reads the catalog: in scratch tables while the batch builds.
  const staged = await stagedReads(ctx, snapshot, overlay);
  const done: { planned: Planned; result: BuildResult; builtAt: number }[] = [];
  let stop: unknown;
  await mapLimited(planned, build.concurrency ?? 1, async (p) => {
    if (stop !== undefined) return fail(p, stop);
    try {
      const request = {
        table,
        partition: p.item.partition,
        select: p.item.select ?? "",
        runId: p.runId,
        runPrefix: p.prefix,
        sources: restrictSources(sources, p.item.inputPartitions),
        inputPartitions: p.item.inputPartitions,
        landed: build.landed,
        staged: staged?.of(p.item.inputPartitions),
      };
      // A SELECT over a landed delivery runs where the delivery is; users' SQL runs in the engine.
      const result = build.landed ? await ctx.landing.buildLanded(request) : await ctx.engine.build(request);
      done.push({ planned: p, result, builtAt: Date.now() });
    } catch (error) {
      await discardRun(ctx, p.prefix);
      // Refused access or a lost lease fails every build alike: the rest are not started.
      if (stopsBatch(error)) stop = error;
      fail(p, error);
    }
  }).finally(() => staged?.drop());
  if (stop !== undefined) throw stop;
  return done;
}

/**
 * The audit of new runs, from their own files (DESIGN.md invariant 1): each
 * run's files are listed and their rows counted from their Parquet footers;
 * no files, an unreadable footer, or a count that disagrees with the
 * engine's fails that run's build. So does an empty build, unless
 * `allowEmpty` or the partition was already empty.
 */
async function auditRuns(
  ctx: SwapContext,
  table: TableDefinition,
  built: readonly { planned: Planned; result: BuildResult; builtAt: number }[],
  options: SwapOptions,
  fail: (p: Planned, error: unknown) => void,
): Promise<Audited[]> {
  const listed = await mapLimited(built, IO_CONCURRENCY, async (b) => ({ ...b, files: await listRunFiles(ctx.store, b.planned.prefix) }));
  const allFiles = listed.flatMap((l) => l.files);
  let counts: Map<string, number> | undefined;
  try {
    // An Iceberg table's commit needs each new file's metrics too: read from the same footers, kept for it.
    const rows = table.iceberg ? await footerFacts(ctx.store, ctx.fileFacts, table, allFiles) : await ctx.landing.countFileRows(allFiles);
    counts = new Map(allFiles.map((file, i) => [file.key, rows[i] ?? 0]));
  } catch {
    // Some footer is unreadable: each run is counted on its own below, so only the runs it belongs to fail.
  }
  const audited: Audited[] = [];
  for (const { planned: p, result, files, builtAt } of listed) {
    try {
      const label = `${table.name}/${p.path}`;
      const notMoved = "the pointer was not moved";
      const engineRows = result.rows;
      if (files.length === 0 && !(options.allowEmpty && (engineRows ?? 0) === 0)) {
        throw new AuditError(
          `the build of ${label} wrote no data files under ${p.prefix}` +
            `${engineRows !== undefined ? ` although the engine reported ${engineRows} rows` : ""}; ${notMoved}. ` +
            `If the partition really is empty now, rerun with --allow-empty.`,
        );
      }
      const perFile = counts ? files.map((f) => counts.get(f.key) ?? 0) : await ctx.landing.countFileRows(files);
      const rows = perFile.reduce((sum, n) => sum + n, 0);
      if (engineRows !== undefined && rows !== engineRows) {
        throw new AuditError(`the build of ${label} reported ${engineRows} rows, but its files hold ${rows}; ${notMoved}`);
      }
      let previousRows: number | undefined;
      if (p.current && (options.previousRows || (rows === 0 && !options.allowEmpty))) {
        previousRows = (options.previousRows ? await ensureManifest(ctx, table, p.current) : await readManifest(ctx.store, table, p.item.partition, p.current.runId))?.rows;
      }
      if (rows === 0 && !options.allowEmpty) {
        if (p.current === undefined) {
          throw new AuditError(`the build of ${label}, a new partition, produced 0 rows; ${notMoved}. If it really is empty, rerun with --allow-empty.`);
        }
        if ((previousRows ?? 0) > 0) {
          throw new AuditError(
            `the build of ${label} produced 0 rows, but the partition has ${previousRows} rows (run ${p.current.runId}); ` +
              `${notMoved}. If the partition really is empty now, rerun with --allow-empty.`,
          );
        }
      }
      audited.push({ ...p, rows, files, bytes: files.reduce((sum, f) => sum + f.size, 0), previousRows, builtAt });
      options.onBuilt?.(p.path);
    } catch (error) {
      await discardRun(ctx, p.prefix);
      fail(p, error);
    }
  }
  return audited;
}

/** The manifests of a chunk's audited runs, swapped now. */
function runManifests(table: TableDefinition, chunk: readonly Audited[], started: number): RunManifest[] {
  const swappedAt = new Date().toISOString();
  return chunk.map((a) => ({
    format: 1,
    table: table.name,
    partition: a.path,
    runId: a.runId,
    rows: a.rows,
    files: a.files,
    bytes: a.bytes,
    previousRunId: a.current?.runId,
    signature: a.item.signature,
    fingerprint: a.item.fingerprint,
    inputs: a.item.inputs,
    appended: a.item.appended,
    appendedFiles: a.item.appendedFiles,
    builtAt: new Date(started).toISOString(),
    swappedAt,
    buildSeconds: (a.builtAt - started) / 1000,
  }));
}

/**
 * Moves one chunk of audited runs: outbox entry, the catalog's batches, manifests, acknowledgement. `publish`: the
 * entry belongs to a held sync's publication (../outbox.ts) and no pointer moves before `publish.committed`.
 * `afterMove`: given the manifests and acknowledgement to await, rather than awaiting them here (SwapOptions.afterMove).
 */
export async function moveChunk(
  ctx: SwapContext,
  table: TableDefinition,
  chunk: readonly Audited[],
  started: number,
  publish?: { readonly syncId: string; readonly committed: Promise<void>; readonly onRecorded: (entry: Promise<OutboxEntry>) => void },
  afterMove?: (recorded: Promise<void>) => void,
): Promise<SwapOutcome[]> {
  const manifests = runManifests(table, chunk, started);
  const moves = chunk.map(
    (a): PointerMove => ({
      partition: a.item.partition,
      runId: a.runId,
      location: a.prefix,
      previousRunId: a.current?.runId,
      signature: a.item.signature,
      kind: "swap",
      runFiles: runFileNames(a.prefix, a.files),
    }),
  );
  // Recorded before any pointer moves: a writer that dies from then on leaves changes the next process finishes. The
  // catalog prepares the moves meanwhile (an embedded lake fsyncs the runs, already durable, and stages the pointers'
  // states in temporary files), and the fence it calls right before its first move waits for the entry to be stored.
  const recording = ctx.outbox.record(
    table,
    chunk.map((a, i) => ({ partition: a.path, runId: a.runId, previousRunId: a.current?.runId, signature: a.item.signature, kind: "swap" as const, manifest: manifests[i] })),
    publish?.syncId,
  );
  publish?.onRecorded(recording);
  recording.catch(() => undefined); // awaited below, whatever the catalog does
  let recorded = false;
  let notMoved = new Map<string, unknown>();
  let fenced = 0;
  const fence = async (): Promise<void> => {
    if (!recorded) {
      await recording;
      await publish?.committed;
      recorded = true;
      faultPoint("after-outbox");
    }
    await ctx.leaseCheck(table.name);
    fenced += 1;
  };
  let entry: OutboxEntry;
  try {
    await movePointers(ctx.catalog, table, moves, fence);
    entry = await recording;
  } catch (error) {
    // An entry that could not be stored stops the batch with its own error: the fence waited for it, so nothing moved.
    entry = await recording;
    // The lease was lost before any catalog call: this writer's decision is void, and its entry goes (nothing of it moved).
    if (fenced === 0 && error instanceof LakeswapError && error.code === "LEASE_LOST") await ctx.outbox.acknowledge(entry);
    if (!(error instanceof LakeswapError && error.code === "PARTIAL_FAILURE")) throw error;
    // Some entries of the catalog's batches failed: which pointers moved is read back, the others are this batch's failures.
    const now = await currentPointers(ctx, table, moves.map((m) => m.partition));
    notMoved = new Map(chunk.filter((a) => now.get(a.path)?.runId !== a.runId).map((a) => [a.path, error]));
  }
  faultPoint("after-swap");
  // The moves stand from here: a process that dies before the acknowledgement leaves the entry, whose replay writes the manifests.
  const moved = chunk.flatMap((a, i) => (notMoved.has(a.path) ? [] : [{ a, manifest: manifests[i] as RunManifest }]));
  const lastStep = recordMoves(ctx, table, moved, entry);
  if (afterMove) afterMove(lastStep);
  else await lastStep;
  return chunk.map((a) => {
    const error = notMoved.get(a.path);
    if (error !== undefined) return { partition: a.path, seconds: (Date.now() - started) / 1000, error };
    return {
      partition: a.path,
      runId: a.runId,
      previousRunId: a.current?.runId,
      rows: a.rows,
      previousRows: a.previousRows,
      bytes: a.bytes,
      seconds: (Date.now() - started) / 1000,
      ...(a.alone ? { onlyRun: true } : {}),
    };
  });
}

/** The manifests of the runs whose pointers moved, then the outbox entry's acknowledgement; a failure says the moves stand. */
async function recordMoves(ctx: SwapContext, table: TableDefinition, moved: readonly { a: Audited; manifest: RunManifest }[], entry: OutboxEntry): Promise<void> {
  try {
    await mapLimited(moved, IO_CONCURRENCY, ({ a, manifest }) => writeManifest(ctx.store, table, a.item.partition, manifest));
    await ctx.outbox.acknowledge(entry);
    faultPoint("after-manifest");
  } catch (error) {
    const why = `the pointers of ${moved.length} partition(s) of table ${table.name} moved, but their runs' manifests could not be recorded (${errorMessage(error)}); `;
    throw new LakeswapError(error instanceof LakeswapError ? error.code : "STORE_ERROR", `${why}the next command that writes ${table.name} records them from its outbox entry`, { cause: error });
  }
}
