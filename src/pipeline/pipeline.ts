import { createHash } from "node:crypto";
import type { DatasetConfig, LayerConfig, PipelineColumn, PipelineConfig } from "../config/pipeline-config.js";
import type { LandedDelivery, Landing, LandingSummary, Signing } from "../landing/landing.js";
import { InvalidInputError, LakeswapError, errorMessage } from "../model/errors.js";
import type { Lake, LakeWriter, PartitionState, SwapBuild, SwapItem } from "../lake/lake.js";
import type { SinkOpener, SinkSpec } from "../sinks/sink.js";
import type { FetchedSource, SourceFetcher } from "../sources/source.js";
import { sendToSinks, type SinkedPartition } from "./send-to-sinks.js";
import { SyncLog } from "./sync-log.js";
import {
  WHOLE_TABLE,
  assertPartitionValue,
  makePartition,
  orderPartition,
  partitionOfValues,
  parsePartition,
  parsePartitionPath,
  partitionPath,
  partitionValue,
  type Partition,
} from "../model/partition.js";
import { emptyDays, fetchFailures, fetchedDataset, windowDays } from "./lookback.js";
import { faultPoint } from "../shared/faults.js";
import { newRunId } from "../model/run-id.js";
import { SIGNATURE_VERSION, appendSignature, chainSignature } from "../model/signature.js";
import { quoteLiteral, quoteRelation } from "../model/sql.js";
import { defineTable, type TableDefinition } from "../model/table.js";
import { identifyDelivery, keepLandingSummary, landingSummary } from "../lake/operations/deliveries.js";
import { partitionStates, runManifest } from "../lake/operations/partition-states.js";

/** The version of what a landing summary holds; a change lands every delivery anew. */
const LANDING_SUMMARY_VERSION = 1;

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
}

/** What one partition of a sync did. */
export interface SyncedPartition {
  readonly table: string;
  readonly layer: string;
  readonly partition: string;
  readonly action: PlanAction | "failed";
  readonly reason: PlanReason;
  readonly run?: string;
  /** The run that was current before this sync built `run` (absent for a new partition). */
  readonly previousRun?: string;
  readonly rows?: number;
  readonly seconds: number;
  readonly error?: string;
}

/** Totals of one layer, or of the whole sync. */
interface SyncTotals {
  readonly built: number;
  readonly skipped: number;
  readonly failed: number;
  readonly rows: number;
  readonly seconds: number;
}

/** How the delivery was landed: rows read = rows loaded + rows dead-lettered. */
export interface LoadReport {
  readonly dataset: string;
  readonly delivery: string;
  readonly files: readonly string[];
  readonly rowsRead: number;
  readonly rowsLoaded: number;
  readonly rowsDeadLettered: number;
  readonly deadLetterTable?: string;
  /** How the raw signatures were computed: `native` (lakeswap's DuckDB extension) or `sql` (the same signatures, slower), with why. */
  readonly signing: Signing;
  /** An http source: the days asked for, and how many of them could not be fetched (`files` are where they were kept while landed). */
  readonly fetched?: { readonly days: number; readonly failed: number };
}

/** The report of a sync. */
export interface SyncReport {
  /** The id of this sync's record: `lakeswap rollback --sync ID` moves back every pointer it moved. */
  readonly syncId: string;
  readonly partitions: readonly SyncedPartition[];
  readonly layers: readonly ({ readonly dataset: string; readonly layer: string; readonly table: string } & SyncTotals)[];
  readonly loads: readonly LoadReport[];
  readonly totals: SyncTotals;
  /** What each layer's sinks (PostgreSQL) got: per sink and partition, sent / skipped / failed / removed. */
  readonly sinks: readonly SinkedPartition[];
}

/** Options of plan and sync. */
export interface PipelineOptions {
  /** Files (or globs) of this delivery, instead of the datasets' source paths; absolute (resolved by the caller). */
  readonly inputs?: readonly string[];
  /** Only these partitions, in layers partitioned by the same keys. */
  readonly partitions?: readonly string[];
  /** Rebuild every partition, whatever the signatures say. */
  readonly fullRefresh?: boolean;
  /** Accept derived builds of 0 rows for partitions that had rows. */
  readonly allowEmpty?: boolean;
  /** `write: append`: append a delivery part again even where the partition already holds it (never the default). */
  readonly allowDuplicates?: boolean;
  readonly onProgress?: (event: { readonly layer: string; readonly done: number; readonly total: number; readonly label: string }) => void;
  /** Opens a declared sink's adapter (the CLI passes src/sinks/open-sink.ts); required when a layer declares `sinks:`. */
  readonly openSink?: SinkOpener;
  /** Fetches the days of http sources (the CLI passes src/sources/fetch-source.ts); required when a dataset declares `source.http`. */
  readonly fetchSource?: SourceFetcher;
  /** The last day of lookback windows, YYYY-MM-DD (default: today in each source's time zone). */
  readonly asOf?: string;
}

/** The columns of a dead-letter table; partitioned by delivery so a rerun replaces its own bad rows. */
const DEAD_LETTER_COLUMNS: readonly PipelineColumn[] = [
  { name: "dataset", type: "VARCHAR", nullable: false },
  { name: "file", type: "VARCHAR", nullable: true },
  { name: "line", type: "BIGINT", nullable: true },
  { name: "reason", type: "VARCHAR", nullable: false },
  { name: "raw", type: "VARCHAR", nullable: true },
];

/**
 * Runs a pipeline: lands a delivery into the raw layer and builds the derived
 * layers, rebuilding exactly the partitions whose input or transform changed.
 */
export class Pipeline {
  /** Lands, merges and maps deliveries: the Landing port the lake was opened with (src/open/open-lake.ts). */
  private readonly landing: Landing;

  constructor(
    private readonly lake: Lake,
    private readonly config: PipelineConfig,
    private readonly options: PipelineOptions = {},
  ) {
    this.landing = lake.landing;
  }

  /** What a sync would do, layer by layer, without changing anything (and without taking leases: a sync decides again under them). */
  async plan(): Promise<PlannedPartition[]> {
    this.checkPartitionOptions();
    const planned: PlannedPartition[] = [];
    for (const dataset of this.config.datasets) {
      await this.checkLayerInputs(dataset);
      if (dataset.ingested) {
        planned.push(...(await this.planLayers(dataset, new Map([["raw", signaturesOf(await this.statesOf(dataset.table))]]))));
        continue;
      }
      const fetched = dataset.http ? await this.fetchWindow(dataset) : undefined;
      try {
        // Days that could not be fetched keep their runs; a sync would fail them.
        const failed = fetchFailures(dataset, fetched?.source).map(
          (f): PlannedPartition => ({ dataset: dataset.name, layer: "raw", table: dataset.table, partition: f.partition, action: "skip", reason: "fetch failed", error: f.error }),
        );
        planned.push(...failed);
        if (fetched && !fetched.dataset) {
          planned.push(...(await this.planLayers(dataset, new Map([["raw", signaturesOf(await this.statesOf(dataset.table))]]))));
          continue;
        }
        planned.push(...(await this.planDelivery(fetched?.dataset ?? dataset, fetched?.source)));
      } finally {
        await fetched?.source.release();
      }
    }
    return planned;
  }

  /** The plan of a dataset whose raw layer is landed from a delivery: raw, then the layers against what raw will hold. */
  private async planDelivery(dataset: DatasetConfig, fetched: FetchedSource | undefined): Promise<PlannedPartition[]> {
    const known = await this.knownDelivery(dataset);
    const landed = known.summary ? undefined : await this.land(dataset);
    const exists = (await this.lake.listTables()).some((t) => t.name === dataset.table);
    const merged = landed && dataset.upsert ? await this.merge(dataset, landed.delivery, exists ? [...((await this.lake.snapshot({ tables: [dataset.table] }))[0]?.partitions ?? [])] : []) : undefined;
    try {
      const { plan: raw } = await this.planRaw(dataset, merged ?? landed?.delivery ?? known.summary!, await this.statesOf(dataset.table), fetched);
      // Derived layers are planned against what the layers above will hold after the sync.
      return [...raw, ...(await this.planLayers(dataset, new Map([["raw", predict(await this.statesOf(dataset.table), raw)]])))];
    } finally {
      if (merged) await this.landing.releaseLanding(merged);
      if (landed) await this.landing.releaseLanding(landed.delivery);
    }
  }

  /** The derived layers' plan, each against what the layer above will hold after the sync (`predicted`, from raw on). */
  private async planLayers(dataset: DatasetConfig, predicted: Map<string, Map<string, string | undefined>>): Promise<PlannedPartition[]> {
    const planned: PlannedPartition[] = [];
    for (const layer of dataset.layers) {
      const upstreamTable = this.tableOfLayer(dataset, layer.from);
      const states = await this.statesOf(layer.table);
      const lookups = await this.lookupSignatures(layer, (table) => this.statesOf(table));
      const layerPlan = await this.planDerived(dataset, layer, upstreamTable, predicted.get(layer.from) ?? new Map(), states, lookups);
      planned.push(...layerPlan);
      predicted.set(layer.name, predict(states, layerPlan));
    }
    return planned;
  }

  /**
   * Runs the plan: layers in order, partitions of a layer concurrently; a
   * failed partition does not stop the others. The delivery is landed first
   * (reading files decides nothing); then the leases of every table the
   * dataset writes are taken, and every build-or-skip decision is made under
   * them (DESIGN.md invariant 7), against the state they protect.
   */
  async sync(): Promise<SyncReport> {
    this.checkPartitionOptions();
    const results: SyncedPartition[] = [];
    const layers: SyncReport["layers"][number][] = [];
    const loads: LoadReport[] = [];
    const sinks: SinkedPartition[] = [];
    this.checkSinkOptions();
    const log = new SyncLog(this.lake, { syncId: newRunId(), config: this.config.file, startedAt: new Date().toISOString() });
    try {
      for (const dataset of this.config.datasets) {
        await this.checkLayerInputs(dataset);
        if (dataset.ingested) {
          // The raw layer is the collector's: nothing to land; its layers are built from what it holds now.
          await this.createTables(dataset);
          await this.lake.write(this.tablesWritten(dataset), `sync ${this.config.file}`, (writer) => this.buildLayers(writer, log, dataset, results, layers, sinks));
          continue;
        }
        const fetched = dataset.http ? await this.fetchWindow(dataset) : undefined;
        try {
          if (fetched && !fetched.dataset) {
            // Not one day could be fetched: nothing to land; the layers are still brought up to date.
            await this.createTables(dataset);
            await this.lake.write(this.tablesWritten(dataset), `sync ${this.config.file}`, async (writer) => {
              const failed = fetchFailures(dataset, fetched.source);
              results.push(...failed);
              layers.push({ dataset: dataset.name, layer: "raw", table: dataset.table, ...totals(failed, 0) });
              await this.buildLayers(writer, log, dataset, results, layers, sinks);
            });
          } else {
            await this.syncDelivery(fetched?.dataset ?? dataset, log, { results, layers, loads, sinks }, fetched?.source);
          }
        } finally {
          await fetched?.source.release();
        }
      }
    } catch (error) {
      await log.finish(errorMessage(error));
      throw error;
    }
    await log.finish();
    return { syncId: log.syncId, partitions: results, layers, loads, totals: totals(results, layers.reduce((sum, l) => sum + l.seconds * 1000, 0)), sinks };
  }

  /**
   * Lands one dataset's delivery (files, or what its http source returned) and builds its raw layer and then its
   * derived layers, under the leases of every table it writes.
   */
  private async syncDelivery(
    dataset: DatasetConfig,
    log: SyncLog,
    out: { results: SyncedPartition[]; layers: SyncReport["layers"][number][]; loads: LoadReport[]; sinks: SinkedPartition[] },
    fetched?: FetchedSource,
  ): Promise<void> {
    const { results, layers, loads, sinks } = out;
    // The same delivery again (same bytes, same declaration) is planned from what its landing found; it is read
    // again only if some raw partition must be built from it.
    const known = await this.knownDelivery(dataset);
    // Landing first: a delivery with bad rows and no dead-letter table changes nothing, not even the catalog.
    let landed = known.summary ? undefined : await this.land(dataset, await this.buildsEveryPartition(dataset));
    let merged: LandedDelivery | undefined;
    const release = async (): Promise<void> => {
      const delivery = landed?.delivery;
      const merge = merged;
      [landed, merged] = [undefined, undefined];
      if (merge) await this.landing.releaseLanding(merge);
      if (delivery) await this.landing.releaseLanding(delivery);
    };
    try {
      await this.createTables(dataset);
      faultPoint("sync-before-leases");
      await this.lake.write(this.tablesWritten(dataset), `sync ${this.config.file}`, async (writer) => {
        const started = Date.now();
        const rawStates = await writer.partitionStates(dataset.table);
        // Upsert: the delivery is merged into the table's rows as they are under the lease; the merge is what is planned and written.
        if (landed && dataset.upsert) merged = await this.merge(dataset, landed.delivery, await writer.currentRuns(dataset.table));
        let { plan: rawPlan, appended } = await this.planRaw(dataset, merged ?? landed?.delivery ?? known.summary!, rawStates, fetched);
        if (!landed && rawPlan.some((p) => p.action === "build")) {
          landed = await this.land(dataset);
          ({ plan: rawPlan, appended } = await this.planRaw(dataset, landed.delivery, rawStates, fetched));
        }
        const load = landed ? await this.writeDeadLetters(writer, log, dataset, landed) : loadReport(dataset, known.summary!);
        loads.push(fetched ? { ...load, fetched: { days: fetched.partitions.length, failed: fetched.partitions.filter((p) => p.error !== undefined).length } } : load);
        // Every changed raw partition is written from the landed delivery in one pass.
        const rawBuild = { kind: "landed", delivery: merged ?? landed?.delivery, carryCurrent: dataset.write === "append" } as const;
        const rawResults = [
          ...(rawBuild.delivery
            ? await this.execute(writer, log, dataset.table, "raw", rawPlan, { ...rawBuild, delivery: rawBuild.delivery }, (p) => ({ appended: appended.get(p.partition) }), {
                // An upsert may leave a partition without rows (every key deleted or moved away): that is its merge, not a
                // failed build; so may a day the source now returns empty, where allow_empty says so.
                allowEmpty: dataset.write === "upsert" || dataset.window?.allowEmpty === true,
              })
            : skipped(dataset.table, "raw", rawPlan)),
          // A day that could not be fetched keeps its current run; it fails, and the rerun fetches it again.
          ...fetchFailures(dataset, fetched),
        ];
        results.push(...rawResults);
        // A clean delivery whose raw layer landed whole is known from now on: the same delivery again is not read again.
        if (landed && !dataset.upsert && known.key !== undefined && !known.summary && landed.delivery.rowsRejected === 0 && rawResults.every((r) => r.action !== "failed")) {
          await this.keepSummary(dataset, known.key, landed.delivery);
        }
        layers.push({ dataset: dataset.name, layer: "raw", table: dataset.table, ...totals(rawResults, Date.now() - started) });
        await release();
        const rawColumns = [...dataset.columns, ...dataset.partition.map((p) => ({ name: p.key, type: "VARCHAR", nullable: false }))];
        sinks.push(...(await this.sendToSinks(writer, dataset, "raw", dataset.table, rawColumns, dataset.partition.map((p) => p.key), dataset.sinks ?? [])));
        await this.buildLayers(writer, log, dataset, results, layers, sinks);
      });
    } finally {
      await release();
    }
  }

  /**
   * Builds a dataset's derived layers in order, under the leases `writer` holds: each layer is planned against its
   * upstream's signatures as they are now (an ingested raw table is read without its lease: the collector only ever
   * adds to it, and what it adds after this read changes its signature, so the next sync builds it).
   */
  private async buildLayers(
    writer: LakeWriter,
    log: SyncLog,
    dataset: DatasetConfig,
    results: SyncedPartition[],
    layers: SyncReport["layers"][number][],
    sinks: SinkedPartition[],
  ): Promise<void> {
    const written = new Set(this.tablesWritten(dataset));
    const statesOf = (table: string): Promise<Map<string, PartitionState>> => (written.has(table) ? writer.partitionStates(table) : this.statesOf(table));
    for (const layer of dataset.layers) {
      const layerStarted = Date.now();
      const upstreamTable = this.tableOfLayer(dataset, layer.from);
      const actual = signaturesOf(await statesOf(upstreamTable));
      const lookups = await this.lookupSignatures(layer, statesOf);
      const plan = await this.planDerived(dataset, layer, upstreamTable, actual, await writer.partitionStates(layer.table), lookups);
      const build = { kind: "select", readable: [upstreamTable, ...layer.lookups], concurrency: this.config.concurrency } as const;
      const layerResults = await this.execute(
        writer,
        log,
        layer.table,
        layer.name,
        plan,
        build,
        (p) => ({
          select: renderSql(layer.sql, parsePartitionPath(p.partition, layer.partitionKeys), layer.sqlPath),
          inputPartitions: [{ table: upstreamTable, partitions: p.inputPartitions ?? [] }],
        }),
        // A source day swapped to empty (allow_empty) empties what the layers below hold of it.
        { allowEmpty: dataset.window?.allowEmpty === true },
      );
      results.push(...layerResults);
      layers.push({ dataset: dataset.name, layer: layer.name, table: layer.table, ...totals(layerResults, Date.now() - layerStarted) });
      const layerColumns = [...layer.columns, ...layer.partitionKeys.map((key) => ({ name: key, type: "VARCHAR", nullable: false }))];
      sinks.push(...(await this.sendToSinks(writer, dataset, layer.name, layer.table, layerColumns, layer.partitionKeys, layer.sinks ?? [])));
    }
  }

  /**
   * After a layer's swaps, under its lease: sends the partitions whose signature a sink does not hold yet
   * (./sink-sync.ts). The lake's swaps stand whatever the sink does.
   */
  private async sendToSinks(
    writer: LakeWriter,
    dataset: DatasetConfig,
    layer: string,
    table: string,
    columns: readonly PipelineColumn[],
    partitionKeys: readonly string[],
    specs: readonly SinkSpec[],
  ): Promise<SinkedPartition[]> {
    if (specs.length === 0 || !this.options.openSink) return [];
    const states = await writer.partitionStates(table);
    const selected = (partition: string): boolean => this.selected(parsePartitionPath(partition, partitionKeys), partitionKeys, dataset);
    const total = [...states.keys()].filter(selected).length * specs.length;
    let done = 0;
    return sendToSinks(this.lake, this.options.openSink, { layer, table, columns, partitionKeys, sinks: specs }, states, selected, (label) => {
      done += 1;
      this.options.onProgress?.({ layer: `${layer} -> sink`, done, total, label });
    });
  }

  /** A layer that declares sinks needs an opener for them: refusing up front beats a sync that silently sends nothing. */
  private checkSinkOptions(): void {
    if (this.options.openSink) return;
    for (const dataset of this.config.datasets) {
      const declared = [...((dataset.sinks ?? []).length > 0 ? ["raw"] : []), ...dataset.layers.filter((l) => (l.sinks ?? []).length > 0).map((l) => l.name)];
      if (declared.length > 0) {
        throw new InvalidInputError(`datasets.${dataset.name}: layer ${declared.join(", ")} declares sinks, but this Pipeline has no openSink option (pass openSink from lakeswap's sinks)`);
      }
    }
  }

  /** Every table one dataset's sync writes: raw, each layer, the dead-letter table. */
  private tablesWritten(dataset: DatasetConfig): string[] {
    // An ingested raw table is the collector's to write (lakeswap serve / ingest); a sync only reads it.
    return [...(dataset.ingested ? [] : [dataset.table]), ...dataset.layers.map((l) => l.table), ...(dataset.deadLetter ? [dataset.deadLetter] : [])];
  }

  /** `--partition` values must name partitions of some layer: a misspelled key would otherwise select nothing silently. */
  private checkPartitionOptions(): void {
    const upsert = this.config.datasets.find((d) => d.upsert);
    if (upsert && (this.options.partitions ?? []).length > 0) {
      throw new InvalidInputError(
        `--partition cannot limit a sync of datasets.${upsert.name}, which writes by upsert: a key may move between partitions, and its old partition must change in the same sync. Sync it whole`,
      );
    }
    const keySets = this.config.datasets.flatMap((d) => [d.partition.map((p) => p.key), ...d.layers.map((l) => l.partitionKeys)]);
    const known = [...new Set(keySets.map((keys) => [...keys].sort().join(",")))];
    for (const spec of this.options.partitions ?? []) {
      const keys = [...parsePartition(spec).keys].sort().join(",");
      if (!known.includes(keys)) {
        throw new InvalidInputError(
          `--partition ${spec}: no layer of ${this.config.file} is partitioned by ${keys.split(",").join(", ")}; ` +
            `partition keys here: ${known.map((k) => k.split(",").join("/")).join("; ")}`,
        );
      }
    }
  }

  /**
   * A derived layer's SQL may read only its declared inputs: the layer it is
   * built from and its whole-table inputs (`inputs.tables`). Anything else it
   * names (another lake table, its own table) would be read without entering
   * the signature, so it is refused here, before anything is built.
   */
  private async checkLayerInputs(dataset: DatasetConfig): Promise<void> {
    const lakeTables = new Set((await this.lake.listTables()).map((t) => t.name.toLowerCase()));
    for (const layer of dataset.layers) {
      const upstreamTable = this.tableOfLayer(dataset, layer.from);
      const declared = new Set([upstreamTable, ...layer.lookups].map((t) => t.toLowerCase()));
      const blank = partitionOfValues(layer.partitionKeys, layer.partitionKeys.map(() => "x"));
      const where = `datasets.${dataset.name}.layers.${layer.name} (${layer.sqlPath})`;
      let read: string[] | undefined;
      try {
        read = await this.landing.tablesRead(renderSql(layer.sql, blank, layer.sqlPath));
      } catch (error) {
        if (error instanceof InvalidInputError) throw new InvalidInputError(`${where}: ${error.message}`);
        throw error;
      }
      for (const table of read ?? []) {
        const name = table.toLowerCase();
        if (declared.has(name)) continue;
        if (name === layer.table.toLowerCase()) {
          throw new InvalidInputError(`${where} reads its own table '${layer.table}': a layer is built from the layers above it (inputs.from), never from itself`);
        }
        const known = lakeTables.has(name) || this.config.datasets.some((d) => this.tablesWritten(d).some((t) => t.toLowerCase() === name));
        throw new InvalidInputError(
          `${where} reads table '${table}', which it does not declare` +
            `${known ? "" : " (and which is not a lake table)"}; it may read ${[...new Set([upstreamTable, ...layer.lookups])].join(", ")}. ` +
            `Declare a table every partition reads as inputs.tables: [${table}] (it then enters the layer's signature).`,
        );
      }
      for (const lookup of layer.lookups) {
        const known = lakeTables.has(lookup.toLowerCase()) || this.config.datasets.some((d) => this.tablesWritten(d).includes(lookup));
        if (!known) throw new InvalidInputError(`datasets.${dataset.name}.layers.${layer.name}.inputs.tables: table '${lookup}' does not exist in this lake`);
      }
    }
  }

  /**
   * The whole-table inputs of a layer, each as `table/*=digest` over its
   * partitions' signatures. A partition nobody signed (written by `replace`)
   * counts by its run id: runs are immutable, so a new run is a change.
   */
  private async lookupSignatures(
    layer: LayerConfig,
    statesOf: (table: string) => Promise<Map<string, PartitionState>>,
  ): Promise<string[]> {
    const signatures: string[] = [];
    for (const table of layer.lookups) {
      const states = [...(await statesOf(table)).values()].filter((state) => state.runId !== "");
      const text = states.map((state) => `${state.partition}=${state.signature ?? `run:${state.runId}`}`).sort().join("\n");
      signatures.push(`${table}/*=${createHash("sha256").update(text).digest("hex")}`);
    }
    return signatures;
  }

  /** The delivery's files as the dataset or `--input` names them (paths come resolved: by the config, or by the command). */
  private patterns(dataset: DatasetConfig): string[] {
    if (dataset.fetchedFiles) return dataset.fetchedFiles.map((f) => f.file);
    return this.options.inputs?.length ? [...this.options.inputs] : [dataset.source.path];
  }

  /**
   * The key a delivery's landing summary is kept under: its id (a digest of
   * its files' names and bytes) and everything that decides what landing
   * finds in it (format, columns, partition expressions, signed columns, the
   * signature version). Undefined with --full-refresh, which lands anew.
   */
  private async knownDelivery(dataset: DatasetConfig): Promise<{ key?: string; summary?: LandingSummary }> {
    const key = await this.deliveryKey(dataset);
    if (key === undefined) return {};
    const summary = await landingSummary(this.lake, dataset.table, key);
    return { key, summary: summary && summary.rowsRejected === 0 ? summary : undefined };
  }

  private async deliveryKey(dataset: DatasetConfig): Promise<string | undefined> {
    // An upsert merges the delivery into what the table holds now, which may have changed since: it is landed every time.
    if (this.options.fullRefresh || dataset.upsert) return undefined;
    const { id } = await identifyDelivery(this.lake, this.patterns(dataset), dataset.table);
    const declaration = JSON.stringify({
      landing: LANDING_SUMMARY_VERSION,
      signature: SIGNATURE_VERSION,
      id,
      source: { format: dataset.source.format, header: dataset.source.header, delimiter: dataset.source.delimiter },
      columns: dataset.columns,
      partition: dataset.partition,
      signed: dataset.signatureColumns,
    });
    return createHash("sha256").update(declaration).digest("hex").slice(0, 32);
  }

  /** Keeps what landing found; failing to is only a warning (the next sync of the same delivery reads it again). */
  private async keepSummary(dataset: DatasetConfig, key: string, delivery: LandedDelivery): Promise<void> {
    try {
      await keepLandingSummary(this.lake, dataset.table, key, delivery);
    } catch (error) {
      process.emitWarning(`could not keep the landing summary of delivery ${delivery.id}: ${errorMessage(error)}; its next sync reads it again`);
    }
  }

  /**
   * Whether every raw partition of a delivery is expected to be built: a full
   * refresh, or a first load (no partition of the raw table has a run), of
   * every partition (no --partition). Then landing writes the runs' files while
   * it signs the rows. A guess made before the write lease: a partition the
   * plan then skips (another writer built it meanwhile) only has its files dropped.
   */
  private async buildsEveryPartition(dataset: DatasetConfig): Promise<boolean> {
    // Append and upsert write other rows than the delivery's partitions (more files, or the merge).
    if (this.options.partitions?.length || dataset.write !== "partition_replace") return false;
    if (this.options.fullRefresh) return true;
    return [...(await this.statesOf(dataset.table)).values()].every((state) => state.runId === "");
  }

  private async land(dataset: DatasetConfig, writeAhead = false): Promise<{ delivery: LandedDelivery }> {
    const delivery = await this.landing.land({
      writeAhead: writeAhead ? this.rawTable(dataset) : undefined,
      files: this.patterns(dataset),
      format: dataset.source.format,
      header: dataset.source.header,
      delimiter: dataset.source.delimiter,
      columns: dataset.columns,
      partition: dataset.partition,
      signatureColumns: dataset.signatureColumns,
    });
    if (delivery.rowsRejected > 0 && !dataset.deadLetter) {
      await this.landing.releaseLanding(delivery);
      const first = delivery.firstRejects[0];
      // A Parquet row has a number but no line; a CSV record may span lines, and a line may be megabytes long.
      const parquet = dataset.source.format === "parquet";
      // An http source's rows are in files of its own, one per day: the day and the row's number name it.
      const fetchedDay = first ? dataset.fetchedFiles?.find((f) => f.file === first.file)?.partition : undefined;
      const where = !first
        ? "the delivery"
        : fetchedDay !== undefined
          ? `datasets.${dataset.name}: the http source's answer for ${fetchedDay}, row ${first.line}`
          : `${first.file}${first.line === null ? "" : parquet ? ` row ${first.line}` : `:${first.line}`}`;
      const text = first?.raw ? first.raw.replaceAll("\r", "\\r").replaceAll("\n", "\\n") : "";
      const shown = text.length > 120 ? `${text.slice(0, 117)}...` : text;
      const fix = fetchedDay !== undefined ? "Declare the columns as the API sends them" : "Fix the file";
      throw new InvalidInputError(
        `${where}: ${first?.reason ?? "bad row"}${shown ? ` (${parquet ? "row" : "line"}: ${shown})` : ""}; ${delivery.rowsRejected} bad row(s) in all, nothing was loaded. ` +
          `${fix}, or set dead_letter: <table> under datasets.${dataset.name} to load the rest and keep the bad rows there.`,
      );
    }
    return { delivery };
  }

  /**
   * The raw layer's plan: for partition_replace and upsert (whose delivery is
   * the merge), each partition's signature against the current one; for
   * append, whether the current run already holds the delivery's part of the
   * partition (`appended`: the parts each new run will have been appended from).
   */
  private async planRaw(
    dataset: DatasetConfig,
    delivery: Pick<LandingSummary, "partitions">,
    states: ReadonlyMap<string, PartitionState>,
    fetched?: FetchedSource,
  ): Promise<{ plan: PlannedPartition[]; appended: Map<string, readonly string[]> }> {
    const keys = dataset.partition.map((p) => p.key);
    const appended = new Map<string, readonly string[]>();
    const plan: PlannedPartition[] = [];
    const window = dataset.window ? new Set(this.windowDays(dataset)) : undefined;
    for (const landed of delivery.partitions.filter((l) => this.selected(l.partition, keys, dataset))) {
      const partition = partitionPath(landed.partition);
      const state = states.get(partition);
      const base = { dataset: dataset.name, layer: "raw", table: dataset.table, partition, rows: landed.rows };
      if (window && state?.runId && !window.has(partitionValue(landed.partition, dataset.window!.key))) {
        // A day before the lookback window is settled: a delivery that still holds it does not rewrite it.
        plan.push({ ...base, action: "skip", reason: "outside lookback" });
        continue;
      }
      if (dataset.write !== "append") {
        plan.push({ ...base, ...this.decide(state, landed.signature, () => "content changed"), signature: landed.signature });
        continue;
      }
      const before = state?.runId ? ((await runManifest(this.lake, dataset.table, partition, state.runId))?.appended ?? []) : [];
      if (state?.pinned) {
        plan.push({ ...base, action: "skip", reason: "pinned" });
      } else if (before.includes(landed.signature) && !this.options.allowDuplicates) {
        plan.push({ ...base, action: "skip", reason: "already appended", signature: state?.signature });
      } else {
        appended.set(partition, [...before, landed.signature]);
        const signature = !state?.runId ? landed.signature : state.signature === undefined ? undefined : appendSignature(state.signature, landed.signature);
        plan.push({ ...base, action: "build", reason: state?.runId ? "appended" : "new", signature });
      }
    }
    plan.push(...this.planEmptyDays(dataset, fetched, states));
    return { plan, appended };
  }

  /** The days an http source answered without rows: built empty (allow_empty) or skipped and reported (./lookback.ts). */
  private planEmptyDays(dataset: DatasetConfig, fetched: FetchedSource | undefined, states: ReadonlyMap<string, PartitionState>): PlannedPartition[] {
    return emptyDays(dataset, fetched).map(({ partition, signature }) => {
      const base = { dataset: dataset.name, layer: "raw", table: dataset.table, partition, rows: 0 };
      if (!dataset.window!.allowEmpty) return { ...base, action: "skip", reason: "empty in source" };
      return { ...base, ...this.decide(states.get(partition), signature, () => "content changed"), signature };
    });
  }

  private windowDays(dataset: DatasetConfig): string[] {
    return windowDays(dataset.window!, this.options.asOf, this.options.partitions ?? []);
  }

  /**
   * Fetches a dataset's window from its http source. The returned dataset lands the fetched files as JSONL, each
   * file's rows in the partition of the day it was asked for; none when not one day could be fetched.
   */
  private async fetchWindow(dataset: DatasetConfig): Promise<{ source: FetchedSource; dataset?: DatasetConfig }> {
    const fetchSource = this.options.fetchSource;
    if (!fetchSource) {
      throw new InvalidInputError(`datasets.${dataset.name}: its source is an http API, but this Pipeline has no fetchSource option (pass fetchSource from lakeswap's sources)`);
    }
    const key = dataset.window!.key;
    const source = await fetchSource({
      dataset: dataset.name,
      source: dataset.http!,
      key,
      values: this.windowDays(dataset),
      columns: dataset.columns.map((c) => c.name),
      onFetched: (value, done, total) => this.options.onProgress?.({ layer: "fetch", done, total, label: `${dataset.name}/${key}=${value}` }),
    });
    return { source, dataset: fetchedDataset(dataset, source) };
  }

  /** Upsert: the delivery merged into the table's current runs by key (./../landing/landing.ts, `MergeRequest`). */
  private async merge(dataset: DatasetConfig, delivery: LandedDelivery, current: Awaited<ReturnType<LakeWriter["currentRuns"]>>): Promise<LandedDelivery> {
    const upsert = dataset.upsert!;
    return this.landing.mergeLanded({
      table: this.rawTable(dataset),
      delivery,
      current,
      columns: dataset.columns,
      signatureColumns: dataset.signatureColumns,
      primaryKey: upsert.primaryKey,
      orderBy: upsert.orderBy,
      deleteFlag: upsert.deleteFlag,
      dataset: dataset.name,
    });
  }

  private async planDerived(
    dataset: DatasetConfig,
    layer: LayerConfig,
    upstreamTable: string,
    upstream: ReadonlyMap<string, string | undefined>,
    states: ReadonlyMap<string, PartitionState>,
    lookups: readonly string[],
  ): Promise<PlannedPartition[]> {
    const fingerprint = layer.fingerprint;
    const fromKeys = this.keysOfLayer(dataset, layer.from);
    const upstreamPaths = [...upstream.keys()].sort();
    // A layer without partition keys (write: replace) is one unit that every upstream partition feeds.
    const mapped = layer.inputMap.length === 0
      ? upstreamPaths.map(() => [])
      : await this.landing.mapPartitions({ fromKeys, values: upstreamPaths.map((p) => parsePartitionPath(p, fromKeys).values), map: layer.inputMap });
    const groups = new Map<string, string[]>();
    upstreamPaths.forEach((upstreamPath, index) => {
      const values = mapped[index] ?? [];
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
    const plans: PlannedPartition[] = [];
    for (const [partition, inputPartitions] of [...groups.entries()].sort(([a], [b]) => (a < b ? -1 : 1))) {
      if (!this.selected(parsePartitionPath(partition, layer.partitionKeys), layer.partitionKeys, dataset)) continue;
      const inputSignatures = inputPartitions.map((p) => upstream.get(p));
      const signed = inputSignatures.every((s): s is string => s !== undefined);
      const inputs = signed ? [...inputPartitions.map((p, i) => `${upstreamTable}/${p}=${inputSignatures[i]}`), ...lookups] : undefined;
      const signature = inputs ? chainSignature(inputs, fingerprint, partition) : undefined;
      const state = states.get(partition);
      const decision = this.decide(state, signature, () => "upstream changed");
      // Which input changed is read from the current run's manifest, only for the partitions that changed.
      if (decision.reason === "upstream changed" && state?.runId && (await runManifest(this.lake, layer.table, partition, state.runId))?.fingerprint !== fingerprint) {
        decision.reason = "transform changed";
      }
      plans.push({ dataset: dataset.name, layer: layer.name, table: layer.table, partition, ...decision, signature, fingerprint, inputs, inputPartitions });
    }
    return plans;
  }

  /** The rule: pinned, forced, new, rolled back, never signed, signed by another algorithm version, changed, or unchanged. */
  private decide(
    state: PartitionState | undefined,
    expected: string | undefined,
    changed: () => PlanReason,
  ): { action: PlanAction; reason: PlanReason } {
    if (state?.pinned) return { action: "skip", reason: "pinned" };
    if (this.options.fullRefresh) return { action: "build", reason: "forced" };
    if (!state?.runId) return { action: "build", reason: "new" };
    if (state.movedBy === "rollback") return { action: "build", reason: "rolled back" };
    if (expected === undefined || state.signature === undefined) return { action: "build", reason: "never signed" };
    if (signatureVersion(state.signature) !== signatureVersion(expected)) return { action: "build", reason: "signature version changed" };
    if (state.signature !== expected) return { action: "build", reason: changed() };
    return { action: "skip", reason: "unchanged" };
  }

  /**
   * Builds a layer's changed partitions as one batch (./swap.ts): built and
   * audited, then their pointers move together, each move recorded in the
   * sync's record first. A failed partition does not stop the others; a lost
   * lease stops the layer, refused access the sync.
   */
  private async execute(
    writer: LakeWriter,
    log: SyncLog,
    table: string,
    layer: string,
    plan: readonly PlannedPartition[],
    build: SwapBuild,
    itemOf: (p: PlannedPartition) => Pick<SwapItem, "select" | "inputPartitions" | "appended">,
    options: { readonly allowEmpty?: boolean } = {},
  ): Promise<SyncedPartition[]> {
    const results: SyncedPartition[] = plan
      .filter((p) => p.action === "skip")
      .map((p) => ({ table, layer, partition: p.partition, action: "skip", reason: p.reason, seconds: 0 }));
    const builds = plan.filter((p) => p.action === "build");
    if (builds.length === 0) return results;
    let done = 0;
    const items = builds.map((p): SwapItem => ({
      partition: parsePartitionPath(p.partition, keysOf(p)),
      signature: p.signature,
      fingerprint: p.fingerprint,
      inputs: p.inputs,
      ...itemOf(p),
    }));
    try {
      const outcomes = await writer.replaceBatch(table, items, {
        build,
        allowEmpty: this.options.allowEmpty || options.allowEmpty,
        beforeSwap: (moves) => log.intend(moves.map((m) => ({ table, layer, partition: m.partition, run: m.runId, previousRun: m.previousRunId }))),
        onBuilt: (partition) => {
          done += 1;
          this.options.onProgress?.({ layer, done, total: builds.length, label: `${table}/${partition}` });
        },
      });
      for (const [index, outcome] of outcomes.entries()) {
        const p = builds[index] as PlannedPartition;
        if (outcome.error !== undefined || outcome.runId === undefined) {
          log.abandon({ table, partition: p.partition });
          results.push({ table, layer, partition: p.partition, action: "failed", reason: p.reason, seconds: outcome.seconds, error: errorMessage(outcome.error) });
          continue;
        }
        log.confirm({ table, layer, partition: p.partition, run: outcome.runId, previousRun: outcome.previousRunId });
        results.push({
          table, layer, partition: p.partition, action: "build", reason: p.reason,
          run: outcome.runId, previousRun: outcome.previousRunId, rows: outcome.rows, seconds: outcome.seconds,
        });
      }
    } catch (error) {
      // Refused access (exit 11) and a full disk (exit 10) are the whole sync's error, not one partition's.
      if (error instanceof LakeswapError && (error.code === "ACCESS_DENIED" || error.code === "NO_SPACE")) throw error;
      // The lease is lost (or the catalog failed): what is not finished fails, and the rerun redoes it. A move
      // recorded as intended stays in the sync's record as pending: rollback --sync checks where its pointer is.
      for (const p of builds) results.push({ table, layer, partition: p.partition, action: "failed", reason: p.reason, seconds: 0, error: errorMessage(error) });
    }
    await log.flush();
    // One GC for the layer's swaps, not one per swap.
    const swapped = results.filter((r) => r.action === "build").map((r) => r.partition);
    if (swapped.length > 0) await writer.collectGarbage(table, swapped);
    return results.sort((a, b) => (a.partition < b.partition ? -1 : a.partition > b.partition ? 1 : 0));
  }

  private async writeDeadLetters(writer: LakeWriter, log: SyncLog, dataset: DatasetConfig, landed: { delivery: LandedDelivery }): Promise<LoadReport> {
    const { delivery } = landed;
    const deliveryId = delivery.id;
    if (dataset.deadLetter && delivery.rowsRejected > 0) {
      const moved = { table: dataset.deadLetter, layer: "dead letter", partition: `delivery=${deliveryId}` };
      const result = await writer.replace(dataset.deadLetter, moved.partition, {
        select: `SELECT ${quoteLiteral(dataset.name)} AS dataset, file, line, reason, raw FROM ${quoteRelation(delivery.rejectedRelation)} ORDER BY file, line`,
        landed: true,
        beforeSwap: (move) => log.intend([{ ...moved, run: move.runId, previousRun: move.previousRunId }]),
      });
      log.confirm({ ...moved, run: result.runId, previousRun: result.previousRunId });
    }
    return loadReport(dataset, delivery);
  }

  private async createTables(dataset: DatasetConfig): Promise<void> {
    const definitions: TableDefinition[] = [
      ...(dataset.ingested ? [] : [this.rawTable(dataset)]),
      ...dataset.layers.map((layer) =>
        defineTable({ name: layer.table, columns: layer.columns, partitionKeys: layer.partitionKeys, compression: layer.compression }),
      ),
    ];
    if (dataset.deadLetter) definitions.push(defineTable({ name: dataset.deadLetter, columns: DEAD_LETTER_COLUMNS, partitionKeys: ["delivery"] }));
    for (const table of definitions) await this.lake.createTable(table);
  }

  private rawTable(dataset: DatasetConfig): TableDefinition {
    return defineTable({ name: dataset.table, columns: dataset.columns, partitionKeys: dataset.partition.map((p) => p.key), compression: dataset.compression });
  }

    private async statesOf(table: string): Promise<Map<string, PartitionState>> {
    const exists = (await this.lake.listTables()).some((t) => t.name === table);
    return exists ? partitionStates(this.lake, table) : new Map();
  }

  /**
   * Whether `--partition` lets a partition through. A dataset with a lookback window takes the named days in
   * addition to its window (they were fetched or kept for that), so its layers are not limited by them.
   */
  private selected(partition: Partition, keys: readonly string[], dataset?: DatasetConfig): boolean {
    if (dataset?.window) return true;
    const wanted = this.options.partitions;
    if (!wanted || wanted.length === 0) return true;
    const sameKeys = wanted.map((spec) => parsePartition(spec)).filter((p) => [...p.keys].sort().join(",") === [...keys].sort().join(","));
    if (sameKeys.length === 0) return true;
    const path = partitionPath(partition);
    return sameKeys.some((p) => partitionPath(orderPartition(p, keys)) === path);
  }

  private tableOfLayer(dataset: DatasetConfig, layer: string): string {
    return layer === "raw" ? dataset.table : (dataset.layers.find((l) => l.name === layer)?.table ?? dataset.table);
  }

  private keysOfLayer(dataset: DatasetConfig, layer: string): readonly string[] {
    return layer === "raw" ? dataset.partition.map((p) => p.key) : (dataset.layers.find((l) => l.name === layer)?.partitionKeys ?? []);
  }
}

/** Signatures a layer will have after the sync: built partitions get the planned one, skipped keep theirs. */
function predict(states: ReadonlyMap<string, PartitionState>, plan: readonly PlannedPartition[]): Map<string, string | undefined> {
  const predicted = signaturesOf(states);
  for (const p of plan) {
    if (p.action === "build") predicted.set(p.partition, p.signature);
  }
  return predicted;
}

function signaturesOf(states: ReadonlyMap<string, PartitionState>): Map<string, string | undefined> {
  const map = new Map<string, string | undefined>();
  for (const [partition, state] of states) if (state.runId) map.set(partition, state.signature);
  return map;
}

/** The partition keys of a planned partition, read off its path. */
function keysOf(planned: PlannedPartition): string[] {
  if (planned.partition === "") return [];
  return planned.partition.split("/").map((part) => part.slice(0, part.indexOf("=")));
}

/** Puts the partition into a layer's SQL: `{{ key }}` becomes the quoted value; any other placeholder is an error. */
function renderSql(sql: string, partition: Partition, file: string): string {
  return sql.replace(/\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g, (_match, name: string) => {
    const index = partition.keys.indexOf(name);
    if (index < 0) {
      throw new InvalidInputError(`${file}: unknown placeholder {{ ${name} }}; this layer's partition keys are ${partition.keys.join(", ")}`);
    }
    return quoteLiteral(partition.values[index] as string);
  });
}

/** How a delivery was landed, from its landing (or the summary kept of it). */
function loadReport(dataset: DatasetConfig, delivery: LandingSummary): LoadReport {
  return {
    dataset: dataset.name,
    delivery: delivery.id,
    files: delivery.files,
    rowsRead: delivery.rowsRead,
    rowsLoaded: delivery.rowsLoaded,
    rowsDeadLettered: delivery.rowsRejected,
    deadLetterTable: dataset.deadLetter,
    signing: delivery.signing,
  };
}

/** The report of a layer that builds nothing. */
function skipped(table: string, layer: string, plan: readonly PlannedPartition[]): SyncedPartition[] {
  return plan.map((p) => ({ table, layer, partition: p.partition, action: "skip", reason: p.reason, seconds: 0 }));
}

function totals(results: readonly SyncedPartition[], elapsedMs: number): SyncTotals {
  return {
    built: results.filter((r) => r.action === "build").length,
    skipped: results.filter((r) => r.action === "skip").length,
    failed: results.filter((r) => r.action === "failed").length,
    rows: results.reduce((sum, r) => sum + (r.rows ?? 0), 0),
    seconds: elapsedMs / 1000,
  };
}

/** The algorithm version of a signature (`v2` of `v2:…`, docs/signatures.md). */
function signatureVersion(signature: string): string {
  return signature.slice(0, Math.max(0, signature.indexOf(":")));
}
