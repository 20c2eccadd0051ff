import type { DatasetConfig, PipelineConfig } from "../config/pipeline-config.js";
import type { LandedDelivery } from "../landing/landing.js";
import type { Lake, LakeWriter } from "../lake/lake.js";
import { InvalidInputError, errorMessage } from "../model/errors.js";
import { newRunId } from "../model/run-id.js";
import { faultPoint } from "../shared/faults.js";
import type { FetchedSource } from "../sources/source.js";
import { asLanded, changeSchemas, createTables, plannedSchemaChanges, refuseIncompleteLayouts, type PlannedSchemaChange } from "./schema-changes.js";
import { buildsEveryPartition, fetchWindow, knownDelivery, landDelivery, mergeDelivery, planDelivery } from "./land.js";
import { checkLayerInputs, layerBuilds, runLayers } from "./layers.js";
import { checkPartitionFilters } from "./partition-filter.js";
import { tablesWritten, type PipelineContext, type PipelineOptions, type Run } from "./pipeline-context.js";
import type { PlannedPartition } from "./plan.js";
import { PlanRun } from "./plan-run.js";
import { SyncLog } from "./sync-log.js";
import { totals, type SyncReport } from "./sync-report.js";
import { SyncRun, type SyncTally } from "./sync-run.js";

export type { PipelineOptions } from "./pipeline-context.js";
export type { PlannedPartition } from "./plan.js";
export type { LoadReport, SyncReport } from "./sync-report.js";

/** A plan (no leases, nothing built), or a sync with its log and what it has done so far. */
type Pass = { readonly plan: PlanRun } | { readonly plan?: undefined; readonly log: SyncLog; readonly tally: SyncTally };

/**
 * Runs a pipeline: lands a delivery into the raw layer and builds the derived
 * layers, rebuilding exactly the partitions whose input or transform changed.
 * A plan is the first half of a sync: the same loop, without the leases and the builds.
 */
export class Pipeline {
  private readonly ctx: PipelineContext;

  constructor(lake: Lake, config: PipelineConfig, options: PipelineOptions = {}) {
    // Deliveries are landed, merged and mapped by the Landing port the lake was opened with (src/open/open-lake.ts).
    this.ctx = { lake, landing: lake.landing, config, options };
  }

  /** What a sync would do, layer by layer, without changing anything (and without taking leases: a sync decides again under them). */
  async plan(): Promise<PlannedPartition[]> {
    checkPartitionFilters(this.ctx.config, this.ctx.options.partitions);
    const plan = new PlanRun(this.ctx);
    await this.run({ plan });
    return plan.planned;
  }

  /**
   * Runs the plan: layers in order, partitions of a layer concurrently; a
   * failed partition does not stop the others. The delivery is landed first
   * (reading files decides nothing); then the leases of every table the
   * dataset writes are taken, and every build-or-skip decision is made under
   * them (DESIGN.md invariant 7), against the state they protect.
   */
  async sync(): Promise<SyncReport> {
    checkPartitionFilters(this.ctx.config, this.ctx.options.partitions);
    this.checkSinkOptions();
    if (this.ctx.options.hold && this.ctx.options.rebuildSchema) {
      throw new InvalidInputError("--rebuild-schema moves every rebuilt partition's pointer before the sync builds anything, so it cannot be held: run it without --hold, then hold the syncs after it");
    }
    const tally: SyncTally = { partitions: [], layers: [], loads: [], sinks: [], snapshots: [] };
    const log = new SyncLog(this.ctx.lake, { syncId: newRunId(), config: this.ctx.config.file, startedAt: new Date().toISOString() });
    try {
      await this.run({ log, tally });
    } catch (error) {
      await log.finish(errorMessage(error));
      throw error;
    }
    await log.finish();
    const elapsedMs = tally.layers.reduce((sum, l) => sum + l.seconds * 1000, 0);
    const held = log.heldState();
    return {
      syncId: log.syncId,
      partitions: tally.partitions,
      layers: tally.layers,
      loads: tally.loads,
      totals: totals(tally.partitions, elapsedMs),
      sinks: tally.sinks,
      ...(tally.snapshots.length > 0 ? { snapshots: [...tally.snapshots].sort((a, b) => (a.table < b.table ? -1 : 1)) } : {}),
      ...(held ? { held } : {}),
      ...(log.schemaChangesMade().length > 0
        ? {
            schemaChanges: log.schemaChangesMade().map(({ table, changes, rebuilt, relayout, definition }) => ({
              table,
              changes,
              ...(rebuilt ? { rebuilt: log.rebuiltCount(table) } : {}),
              ...(relayout && definition.layout !== undefined ? { layout: definition.layout } : {}),
            })),
          }
        : {}),
    };
  }

  /**
   * The schema changes a sync of this config would make in place (./schema-changes.ts), per table; a change that
   * cannot be made in place is refused as the sync would refuse it (CONFLICT, naming each change).
   */
  async schemaChanges(): Promise<PlannedSchemaChange[]> {
    const changes = [];
    for (const dataset of this.ctx.config.datasets) changes.push(...(await plannedSchemaChanges(this.ctx, dataset)));
    return changes;
  }

  /** The one loop of plan and sync: each dataset's raw layer (landed, fetched, or the collector's), then its layers. */
  private async run(pass: Pass): Promise<void> {
    for (const dataset of this.ctx.config.datasets) {
      // A sync of files lands them next: the landing gets ready while the layers' SQL is checked (that check loads
      // DuckDB anyway; a dataset without layers may need none, a delivery landed before).
      if (!pass.plan && !dataset.ingested && !dataset.http && dataset.layers.length > 0) this.ctx.landing.prepare?.(dataset.partition.map((p) => p.expression));
      await checkLayerInputs(this.ctx, dataset);
      if (dataset.ingested) {
        // The raw layer is the collector's: nothing to land; its layers are built from what it holds now.
        await this.withLeases(pass, dataset, (run) => runLayers(this.ctx, dataset, run));
        continue;
      }
      const fetched = dataset.http ? await fetchWindow(this.ctx, dataset) : undefined;
      try {
        if (fetched && !fetched.dataset) {
          // Not one day could be fetched: nothing to land; the layers are still brought up to date.
          await this.withLeases(pass, dataset, async (run) => {
            run.fetchFailed(dataset, fetched.source);
            await runLayers(this.ctx, dataset, run);
          });
        } else {
          await this.landAndBuild(pass, fetched?.dataset ?? dataset, fetched?.source);
        }
      } finally {
        await fetched?.source.release();
      }
    }
  }

  /**
   * Lands one dataset's delivery (files, or what its http source returned), then decides and builds its raw layer
   * and its derived layers under the leases of every table it writes.
   */
  private async landAndBuild(pass: Pass, declared: DatasetConfig, fetched: FetchedSource | undefined): Promise<void> {
    const ctx = this.ctx;
    // Landed as the raw table will be once this sync changed its schema in place (./schema-changes.ts).
    const dataset = await asLanded(ctx, declared);
    const builds = pass.plan === undefined;
    // The same delivery again (same bytes, same declaration) is planned from what its landing found; it is read
    // again only if some raw partition must be built from it.
    const known = await knownDelivery(ctx, dataset);
    // While a new delivery lands, the instances its layers' builds run in and the catalog file's writer get ready.
    if (builds && !known.summary) ctx.lake.prepareWrite(layerBuilds(dataset));
    // Landing first: a delivery with bad rows and no dead-letter table changes nothing, not even the catalog.
    let landed = known.summary ? undefined : await landDelivery(ctx, dataset, builds && (await buildsEveryPartition(ctx, dataset)));
    let merged: LandedDelivery | undefined;
    let releasing: Promise<void> | undefined;
    // Once: started when raw is written (a large delivery: the layers need only its runs) or when the layers are (a
    // small one, ./sync-run.ts), and waited for at the end of the sync.
    const release = (): Promise<void> =>
      (releasing ??= (async () => {
        const [delivery, merge] = [landed, merged];
        [landed, merged] = [undefined, undefined];
        if (merge) await ctx.landing.releaseLanding(merge);
        if (delivery) await ctx.landing.releaseLanding(delivery);
      })());
    try {
      await this.withLeases(pass, dataset, async (run) => {
        const startedMs = Date.now();
        const states = await run.states(dataset.table);
        // Upsert: the delivery is merged into the table's rows as they are under the lease; the merge is what is planned and written.
        if (landed && dataset.upsert) merged = await mergeDelivery(ctx, dataset, landed, await run.currentRuns(dataset.table));
        // An append whose file no split can follow reads the current runs of its partitions (./append-difference.ts).
        const current = (partitions: readonly string[]) => run.currentRuns(dataset.table, partitions);
        let raw = await planDelivery(ctx, dataset, merged ?? landed ?? known.summary!, states, fetched, current);
        if (run.builds && !landed && raw.plan.some((p) => p.action === "build")) {
          landed = await landDelivery(ctx, dataset);
          raw = await planDelivery(ctx, dataset, landed, states, fetched, current);
        }
        await run.raw({ dataset, ...raw, states, landed, merged, known, fetched, startedMs, release });
        await runLayers(ctx, dataset, run);
        // A small delivery is dropped now, while the sync settles and its leases end (a large one was after raw).
        release().catch(() => undefined);
      }, true);
    } finally {
      await release();
    }
  }

  /**
   * Runs `work` for one dataset: a plan at once; a sync after creating the dataset's tables, under the leases of
   * every table it writes, whose schemas it first changes in place where declared so (`landedFirst`: a delivery
   * was landed before, as the raw table's schema will be: checked under the leases).
   */
  private async withLeases(pass: Pass, dataset: DatasetConfig, work: (run: Run) => Promise<void>, landedFirst = false): Promise<void> {
    if (pass.plan) return work(pass.plan);
    const changing = await createTables(this.ctx, dataset);
    if (landedFirst) faultPoint("sync-before-leases");
    const leased = async (writer: LakeWriter): Promise<void> => {
      // A delivery landed before the leases was read as the raw table will be once changed: checked under them.
      const relaid = await changeSchemas(this.ctx, writer, pass.log, changing, dataset, landedFirst ? dataset : undefined);
      const run = new SyncRun(this.ctx, writer, pass.log, pass.tally, dataset);
      try {
        await work(run);
      } finally {
        // Under the leases, whatever the work did.
        await run.collected();
      }
      // Held runs (--hold, publish: all_or_nothing) stay staged or are published together, under the same leases.
      await run.settle(dataset);
      // A table whose partition keys changed is switched to its new layout as the writer ends, only if it is whole.
      refuseIncompleteLayouts(relaid, pass.tally.partitions);
    };
    await this.ctx.lake.write(tablesWritten(dataset), `sync ${this.ctx.config.file}`, leased, {
      // The sync's id is provisional until its first record: asked when the snapshot is committed.
      summary: () => ({ "lakeswap.sync-id": pass.log.syncId }),
      onSnapshot: (commit) => {
        pass.log.snapshot(commit.table, commit.snapshotId);
        pass.tally.snapshots.push(commit);
      },
    });
  }

  /** A layer that declares sinks needs an opener for them: refusing up front beats a sync that silently sends nothing. */
  private checkSinkOptions(): void {
    if (this.ctx.options.openSink) return;
    for (const dataset of this.ctx.config.datasets) {
      const declared = [...((dataset.sinks ?? []).length > 0 ? ["raw"] : []), ...dataset.layers.filter((l) => (l.sinks ?? []).length > 0).map((l) => l.name)];
      if (declared.length > 0) {
        throw new InvalidInputError(`datasets.${dataset.name}: layer ${declared.join(", ")} declares sinks, but this Pipeline has no openSink option (pass openSink from lakeswap's sinks)`);
      }
    }
  }
}
