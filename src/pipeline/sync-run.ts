import type { IcebergCommit } from "../lake/commit/iceberg-commit.js";
import type { DatasetConfig, LayerConfig, PipelineColumn } from "../config/pipeline-config.js";
import type { PartitionSnapshot, TableSnapshot } from "../engine/engine.js";
import type { LakeWriter, PartitionState, SwapBuild, SwapItem } from "../lake/lake.js";
import type { SwapOutcome } from "../lake/commit/swap.js";
import type { LandedDelivery } from "../landing/landing.js";
import { partitionStates } from "../lake/operations/partition-states.js";
import type { AuditSpec } from "../model/audit.js";
import { LakeswapError, errorMessage } from "../model/errors.js";
import { keysOfPath, parsePartitionPath } from "../model/partition.js";
import type { SinkSpec } from "../sinks/sink.js";
import type { FetchedSource } from "../sources/source.js";
import { deadLetterParts, keepSummary, writeDeadLetters } from "./land.js";
import { layerBuilds } from "./layers.js";
import { renderSql } from "../model/render-sql.js";
import { fetchFailures } from "./lookback.js";
import { partitionSelected } from "./partition-filter.js";
import { tableOfLayer, tablesWritten, type PipelineContext, type RawStep, type Run } from "./pipeline-context.js";
import { decide, signaturesOf, type Appending, type PlannedPartition } from "./plan.js";
import { sendToSinks, type SinkedPartition } from "./send-to-sinks.js";
import type { SyncLog } from "./sync-log.js";
import { loadReport, skipped, totals, type LayerReport, type LoadReport, type SyncedPartition } from "./sync-report.js";

/** A landed delivery of at least this many rows is dropped before the layers build; a smaller one after them. */
const RELEASE_BEFORE_LAYERS_ROWS = 100_000;

/** What a sync has done so far: the parts of its report. */
export interface SyncTally {
  readonly partitions: SyncedPartition[];
  readonly layers: LayerReport[];
  readonly loads: LoadReport[];
  readonly sinks: SinkedPartition[];
  readonly snapshots: IcebergCommit[];
}

/**
 * The second half of a sync, for one dataset, under the leases `writer` holds: each layer is decided against the
 * states the leases protect (DESIGN.md invariant 7), then built as one batch, recorded in the sync's log, and sent
 * to its sinks.
 */
export class SyncRun implements Run {
  readonly builds = true;
  private readonly written: ReadonlySet<string>;
  /** Stage runs instead of moving pointers (`--hold`, `publish: all_or_nothing`). */
  private readonly holding: boolean;
  /** The sinks of a held dataset's layers, sent once its runs are published. */
  private readonly deferredSinks: (() => Promise<void>)[] = [];
  /** The runs staged so far, by table and partition: what later layers build from in place of the current runs. */
  private readonly overlay = new Map<string, Map<string, PartitionSnapshot>>();
  /** `table/partition` of the swaps that made a partition's only run (SwapOutcome.onlyRun): GC has nothing there to collect. */
  private readonly onlyRuns = new Set<string>();
  /** The GCs after the layers' swaps, running while the next layers build; the dataset settles once they end. */
  private readonly collecting: Promise<unknown>[] = [];

  constructor(
    private readonly ctx: PipelineContext,
    private readonly writer: LakeWriter,
    private readonly log: SyncLog,
    private readonly tally: SyncTally,
    dataset: DatasetConfig,
  ) {
    this.written = new Set(tablesWritten(dataset));
    this.holding = ctx.options.hold === true || dataset.publish === "all_or_nothing";
  }

  states(table: string): Promise<Map<string, PartitionState>> {
    // A table this sync does not write (an ingested raw table, a lookup of another pipeline) is read without its lease,
    // at a state a finished batch of its writer left: never halfway through its moves (lake/settled-pointers.ts).
    return this.written.has(table) ? this.writer.partitionStates(table) : partitionStates(this.ctx.lake, table, true);
  }

  async upstream(table: string): Promise<Map<string, string | undefined>> {
    return signaturesOf(await this.states(table));
  }

  currentRuns(table: string, partitions?: readonly string[]): Promise<TableSnapshot> {
    return this.writer.currentRuns(table, partitions);
  }

  fetchFailed(dataset: DatasetConfig, source: FetchedSource): void {
    const failed = fetchFailures(dataset, source);
    this.tally.partitions.push(...failed);
    this.tally.layers.push({ dataset: dataset.name, layer: "raw", table: dataset.table, ...totals(failed, 0) });
  }

  /** Dead letters, then every changed raw partition written from the landed delivery in one pass, then the raw layer's sinks. */
  async raw(step: RawStep): Promise<void> {
    const { dataset, landed, known, fetched } = step;
    const load = landed ? await this.deadLetters(dataset, landed) : loadReport(dataset, known.summary!);
    const loadIndex = this.tally.loads.push(fetched ? { ...load, fetched: { days: fetched.partitions.length, failed: fetched.partitions.filter((p) => p.error !== undefined).length } } : load) - 1;
    const delivery = step.merged ?? landed;
    // Where raw changes, its layers are likely to be built next: the engine gets ready for them while raw is written.
    if (delivery && step.plan.some((p) => p.action === "build")) this.writer.prepareBuilds(layerBuilds(dataset));
    const build = { kind: "landed", carryCurrent: dataset.write === "append" } as const;
    const results = [
      ...(delivery
        ? await this.execute(dataset.table, "raw", step.plan, { ...build, delivery }, (p) => appendItem(step.appended.get(p.partition)), {
            // An upsert may leave a partition without rows (every key deleted or moved away): that is its merge, not a
            // failed build; so may a day the source now returns empty, where allow_empty says so.
            allowEmpty: dataset.write === "upsert" || dataset.window?.allowEmpty === true,
            audits: dataset.audits,
          })
        : skipped(dataset.table, "raw", step.plan)),
      // A day that could not be fetched keeps its current run; it fails, and the rerun fetches it again.
      ...fetchFailures(dataset, fetched),
    ];
    this.tally.partitions.push(...results);
    if (dataset.write === "append") {
      const rowsAppended = results.filter((r) => r.action === "build").reduce((sum, r) => sum + (step.appended.get(r.partition)?.taken ?? 0), 0);
      this.tally.loads[loadIndex] = { ...this.tally.loads[loadIndex]!, rowsAppended };
    }
    // A clean delivery whose raw layer landed whole is known from now on: the same delivery again is not read again (one
    // with a line held back is read again: the same bytes, once quiet, give that line).
    const whole = landed && !landed.unterminated && landed.rowsRejected === 0;
    if (whole && !dataset.upsert && known.key !== undefined && !known.summary && results.every((r) => r.action !== "failed")) {
      await keepSummary(this.ctx, dataset, known.key, landed);
    }
    this.tally.layers.push({ dataset: dataset.name, layer: "raw", table: dataset.table, ...totals(results, Date.now() - step.startedMs) });
    // A large landed delivery is dropped while the layers build from the runs, its memory theirs; a small one once they
    // are built (../pipeline.ts), its drop's queries off their way. The sync waits for the drop at its end.
    if (delivery === undefined || delivery.rowsRead >= RELEASE_BEFORE_LAYERS_ROWS) step.release().catch(() => undefined);
    const columns = [...dataset.columns, ...dataset.partition.map((p) => ({ name: p.key, type: "VARCHAR", nullable: false }))];
    await this.sendToSinks(dataset, "raw", dataset.table, columns, dataset.partition.map((p) => p.key), dataset.sinks ?? []);
  }

  /**
   * The delivery's bad rows into the dataset's dead-letter table; staged with the rest of a held sync. An append's are
   * kept per file (./land.ts `deadLetterParts`): a file's partition that holds the same bad rows already is left as it is.
   */
  private async deadLetters(dataset: DatasetConfig, landed: LandedDelivery): Promise<LoadReport> {
    const table = dataset.deadLetter;
    if (!table || landed.rowsRejected === 0) return loadReport(dataset, landed);
    const perFile = dataset.write === "append";
    if (!perFile && !this.holding) return writeDeadLetters(this.writer, this.log, dataset, landed);
    const parts = deadLetterParts(dataset, landed);
    const states = perFile ? await this.writer.partitionStates(table) : new Map<string, PartitionState>();
    const plan = parts.map((part): PlannedPartition => ({
      dataset: dataset.name,
      layer: "dead letter",
      table,
      partition: part.partition,
      signature: part.signature,
      rows: part.rows,
      ...(perFile ? decide(states.get(part.partition), part.signature, "content changed") : { action: "build", reason: "new" }),
    }));
    const selects = new Map(parts.map((part) => [part.partition, part.select]));
    const results = await this.execute(table, "dead letter", plan, { kind: "select", landed: true }, (p) => ({ select: selects.get(p.partition)! }));
    const failed = results.find((r) => r.action === "failed");
    if (failed) throw new LakeswapError("BUILD_FAILED", `the dead letters of delivery ${landed.id} (${table}/${failed.partition}) could not be written: ${failed.error}`);
    const written = new Set(results.filter((r) => r.action === "build").map((r) => r.partition));
    return loadReport(dataset, landed, perFile ? parts.map((part) => ({ partition: part.partition, files: part.files, rows: part.rows, written: written.has(part.partition) })) : []);
  }

  /** Builds a derived layer's changed partitions from its upstream, then sends the layer to its sinks. */
  async layer(dataset: DatasetConfig, layer: LayerConfig, plan: readonly PlannedPartition[], _states: ReadonlyMap<string, PartitionState>, startedMs: number): Promise<void> {
    const upstreamTable = tableOfLayer(dataset, layer.from);
    const readable = [upstreamTable, ...layer.lookups];
    // What it reads of tables another writer moves is read as a batch of theirs left them, as the plan read them.
    const unleased = readable.filter((table) => !this.written.has(table));
    const build = { kind: "select", readable, unleased, concurrency: this.ctx.config.concurrency } as const;
    const itemOf = (p: PlannedPartition): Pick<SwapItem, "select" | "inputPartitions"> => ({
      select: renderSql(layer.sql, parsePartitionPath(p.partition, layer.partitionKeys), layer.sqlPath),
      inputPartitions: [{ table: upstreamTable, partitions: p.inputPartitions ?? [] }],
    });
    // A source day swapped to empty (allow_empty) empties what the layers below hold of it.
    const results = await this.execute(layer.table, layer.name, plan, build, itemOf, { allowEmpty: dataset.window?.allowEmpty === true, audits: layer.audits });
    this.tally.partitions.push(...results);
    this.tally.layers.push({ dataset: dataset.name, layer: layer.name, table: layer.table, ...totals(results, Date.now() - startedMs) });
    const columns = [...layer.columns, ...layer.partitionKeys.map((key) => ({ name: key, type: "VARCHAR", nullable: false }))];
    await this.sendToSinks(dataset, layer.name, layer.table, columns, layer.partitionKeys, layer.sinks ?? []);
  }

  /**
   * Builds a layer's changed partitions as one batch (../lake/commit/swap.ts): built and audited, then their
   * pointers move together, each move recorded in the sync's record first. A failed partition does not stop the
   * others; a lost lease stops the layer, refused access the sync.
   */
  private async execute(
    table: string,
    layer: string,
    plan: readonly PlannedPartition[],
    build: SwapBuild,
    itemOf: (p: PlannedPartition) => Pick<SwapItem, "select" | "inputPartitions" | AppendKeys>,
    options: SwapChoices = {},
  ): Promise<SyncedPartition[]> {
    const builds = plan.filter((p) => p.action === "build");
    const results = skipped(table, layer, plan.filter((p) => p.action === "skip"));
    if (builds.length === 0) return results;
    try {
      results.push(...(await this.swap(table, layer, builds, build, itemOf, options)));
    } catch (error) {
      // Refused access (exit 11) and a full disk (exit 10) are the whole sync's error, not one partition's.
      if (error instanceof LakeswapError && (error.code === "ACCESS_DENIED" || error.code === "NO_SPACE")) throw error;
      // The lease is lost (or the catalog failed): what is not finished fails, and the rerun redoes it. A move
      // recorded as intended stays in the sync's record as pending: rollback --sync checks where its pointer is.
      for (const p of builds) results.push({ table, layer, partition: p.partition, action: "failed", reason: p.reason, seconds: 0, error: errorMessage(error) });
    }
    // The confirmations are stored with the next layer's intent, or when the sync finishes: one write fewer a layer.
    // A sync killed before then leaves them pending, which rollback --sync reads from where the pointers are.
    // One GC for the layer's swaps, not one per swap, off the layers' way: it removes only runs no pointer names (nor
    // held within the grace window), never one a later layer reads, and a table is written by one layer of a dataset.
    // It ends under the leases (`collected`), whatever it finds: the swaps stand, and what it left the next GC removes.
    const swapped = results.filter((r) => r.action === "build" && !r.staged && !this.onlyRuns.has(`${table}/${r.partition}`)).map((r) => r.partition);
    if (swapped.length > 0) this.collecting.push(this.writer.collectGarbage(table, swapped).catch(() => undefined));
    return results.sort((a, b) => (a.partition < b.partition ? -1 : a.partition > b.partition ? 1 : 0));
  }

  /** The batch's swaps, each outcome confirmed in (or abandoned from) the sync's log. */
  private async swap(
    table: string,
    layer: string,
    builds: readonly PlannedPartition[],
    build: SwapBuild,
    itemOf: (p: PlannedPartition) => Pick<SwapItem, "select" | "inputPartitions" | AppendKeys>,
    options: SwapChoices,
  ): Promise<SyncedPartition[]> {
    const items = builds.map((p): SwapItem => ({
      partition: parsePartitionPath(p.partition, keysOfPath(p.partition)),
      signature: p.signature,
      fingerprint: p.fingerprint,
      inputs: p.inputs,
      ...itemOf(p),
    }));
    let done = 0;
    const outcomes = await this.writer.replaceBatch(table, items, {
      build,
      allowEmpty: this.ctx.options.allowEmpty || options.allowEmpty,
      audits: options.audits,
      stage: this.holding,
      overlay: this.overlay,
      beforeSwap: (moves) => this.log.intend(moves.map((m) => ({ table, layer, partition: m.partition, run: m.runId, previousRun: m.previousRunId }))),
      onBuilt: (partition) => {
        done += 1;
        this.ctx.options.onProgress?.({ layer, done, total: builds.length, label: `${table}/${partition}` });
      },
    });
    if (this.holding) this.stage(table, layer, outcomes);
    for (const outcome of outcomes) if (outcome.onlyRun) this.onlyRuns.add(`${table}/${outcome.partition}`);
    return outcomes.map((outcome, index): SyncedPartition => {
      const p = builds[index] as PlannedPartition;
      const audits = outcome.audits?.length ? { audits: outcome.audits } : {};
      if (outcome.error !== undefined || outcome.runId === undefined) {
        this.log.abandon({ table, partition: p.partition });
        return { table, layer, partition: p.partition, action: "failed", reason: p.reason, seconds: outcome.seconds, error: errorMessage(outcome.error), ...audits };
      }
      const staged = outcome.staged ? { staged: true } : {};
      // A staged run stays an intent until its publication; the next layers build from it.
      if (!outcome.staged) this.log.confirm({ table, layer, partition: p.partition, run: outcome.runId, previousRun: outcome.previousRunId });
      const byDifference = p.byDifference ? { byDifference: p.byDifference } : {};
      return { table, layer, partition: p.partition, action: "build", reason: p.reason, run: outcome.runId, previousRun: outcome.previousRunId, rows: outcome.rows, seconds: outcome.seconds, ...byDifference, ...audits, ...staged };
    });
  }

  /** Keeps a batch's staged runs: in the sync's record (for publish), and for the layers built from them. */
  private stage(table: string, layer: string, outcomes: readonly SwapOutcome[]): void {
    const byPath = this.overlay.get(table) ?? new Map<string, PartitionSnapshot>();
    for (const { staged } of outcomes) {
      if (staged) byPath.set(staged.partition, { partition: parsePartitionPath(staged.partition, keysOfPath(staged.partition)), runId: staged.runId, files: staged.files.map((f) => f.key) });
    }
    this.overlay.set(table, byPath);
    this.log.stage(table, layer, outcomes.flatMap((o) => (o.staged ? [o.staged] : [])), outcomes.flatMap((o) => o.audits ?? []));
  }

  /** Waits for the GCs after the layers' swaps (they never fail: what one could not remove, the next GC removes). */
  async collected(): Promise<void> {
    await Promise.all(this.collecting.splice(0));
  }

  /**
   * The end of a held dataset, still under its leases: with `--hold`, its runs stay staged; with `publish:
   * all_or_nothing`, they are published together if no partition of the dataset failed, else held.
   */
  async settle(dataset: DatasetConfig): Promise<void> {
    if (!this.holding) return;
    const tables = new Set(tablesWritten(dataset));
    // Only this dataset's staged runs: another dataset of the sync settled its own (and may be held).
    const staged = this.log.stagedTables().filter((t) => tables.has(t.table));
    if (this.ctx.options.hold) {
      if (staged.length > 0) this.log.hold("sync --hold: built and audited, nothing moved");
      return;
    }
    if (staged.length > 0) {
      const failed = this.tally.partitions.filter((p) => tables.has(p.table) && p.action === "failed");
      if (failed.length > 0) {
        const named = failed.slice(0, 3).map((p) => `${p.table}/${p.partition}`).join(", ");
        return this.log.hold(`publish: all_or_nothing: ${failed.length} partition(s) failed (${named}${failed.length > 3 ? ", ..." : ""}), so none moved`);
      }
      await this.publish(staged);
    }
    // The sinks of the layers, once what they read is the lake's (or was already: nothing staged).
    for (const send of this.deferredSinks.splice(0)) await send();
  }

  /** Publishes this dataset's staged runs together (all_or_nothing, every partition passed), then GC as after swaps. */
  private async publish(staged: ReturnType<SyncLog["stagedTables"]>): Promise<void> {
    const { moved, refused } = await this.writer.publishStaged(staged, this.log.syncId, () => this.log.publishing());
    const layerOf = new Map(staged.map((t) => [t.table, t.layer]));
    const done = moved.filter((m) => m.outcome.error === undefined && m.outcome.runId !== undefined);
    this.log.published(
      done.map((m) => ({ table: m.table, layer: layerOf.get(m.table) ?? "", partition: m.outcome.partition, run: m.outcome.runId as string, previousRun: m.outcome.previousRunId })),
      refused,
      new Set(staged.map((t) => t.table)),
    );
    const published = new Set(done.map((m) => `${m.table}\n${m.outcome.partition}`));
    this.tally.partitions.forEach((p, i) => {
      if (p.staged && published.has(`${p.table}\n${p.partition}`)) this.tally.partitions[i] = { ...p, staged: undefined };
    });
    // One GC per table for the published partitions, as after a layer's swaps.
    for (const { table } of staged) {
      const partitions = done.filter((m) => m.table === table).map((m) => m.outcome.partition);
      if (partitions.length > 0) await this.writer.collectGarbage(table, partitions);
    }
  }

  /**
   * After a layer's swaps, under its lease: sends the partitions whose signature a sink does not hold yet
   * (./send-to-sinks.ts). The lake's swaps stand whatever the sink does.
   */
  private async sendToSinks(
    dataset: DatasetConfig,
    layer: string,
    table: string,
    columns: readonly PipelineColumn[],
    partitionKeys: readonly string[],
    specs: readonly SinkSpec[],
    published = false,
  ): Promise<void> {
    const openSink = this.ctx.options.openSink;
    if (specs.length === 0 || !openSink) return;
    if (this.holding && !published) {
      // Staged runs are not the lake's yet: sent once they are published (all_or_nothing, at the end of the dataset);
      // a held sync's are sent by the first sync after its publication (a sink keeps the signatures it holds).
      this.deferredSinks.push(() => this.sendToSinks(dataset, layer, table, columns, partitionKeys, specs, true));
      return;
    }
    const states = await this.writer.partitionStates(table);
    const selected = (partition: string): boolean => partitionSelected(this.ctx.options.partitions, parsePartitionPath(partition, partitionKeys), partitionKeys, dataset);
    const total = [...states.keys()].filter(selected).length * specs.length;
    let done = 0;
    const sinked = await sendToSinks(this.ctx.lake, openSink, { layer, table, columns, partitionKeys, sinks: specs }, states, selected, (label) => {
      done += 1;
      this.ctx.options.onProgress?.({ layer: `${layer} -> sink`, done, total, label });
    });
    this.tally.sinks.push(...sinked);
  }
}

/** What a layer's swaps take from its config: whether an empty build is accepted, and the audits each run must pass. */
interface SwapChoices {
  readonly allowEmpty?: boolean;
  readonly audits?: readonly AuditSpec[];
}


/** What a swap item of an append takes from the plan's `Appending`. */
type AppendKeys = "appended" | "landedFiles" | "landedAfter" | "landedRetaken" | "landedRows" | "appendedFiles";

function appendItem(appending: Appending | undefined): Pick<SwapItem, AppendKeys> {
  if (!appending) return {};
  return { appended: appending.record, landedFiles: appending.files, landedAfter: appending.after, landedRetaken: appending.retaken, landedRows: appending.rows, appendedFiles: appending.appendedFiles };
}
