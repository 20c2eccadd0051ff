import type { DatasetConfig, LayerConfig, PipelineConfig } from "../config/pipeline-config.js";
import type { TableSnapshot } from "../engine/engine.js";
import type { LandedDelivery, Landing, LandingSummary } from "../landing/landing.js";
import type { Lake, PartitionState } from "../lake/lake.js";
import type { SinkOpener } from "../sinks/sink.js";
import type { FetchedSource, SourceFetcher } from "../sources/source.js";
import { partitionSelected } from "./partition-filter.js";
import type { Appending, PlanChoices, PlannedPartition } from "./plan.js";

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
  /** `--hold`: build and audit everything, move nothing; the sync is held until `lakeswap publish` (or `discard`). */
  readonly hold?: boolean;
  /**
   * `--rebuild-schema`: a table whose declared columns cannot be reached in place (a column dropped, renamed or
   * narrowed, a scale changed) is rebuilt by swap: every current run rewritten under the new columns, then moved to.
   */
  readonly rebuildSchema?: boolean;
}

/** What every step of a plan or a sync works with. */
export interface PipelineContext {
  readonly lake: Lake;
  /** Lands, merges and maps deliveries: the Landing port the lake was opened with (src/open/open-lake.ts). */
  readonly landing: Landing;
  readonly config: PipelineConfig;
  readonly options: PipelineOptions;
}

/**
 * What a plan and a sync do differently at each step of the one loop they share (./pipeline.ts): a sync reads the
 * states under its leases and builds what it decided; a plan reads them as they are and predicts what a sync would
 * leave, building nothing.
 */
export interface Run {
  /** Whether this run builds (a sync) or only decides (a plan). */
  readonly builds: boolean;
  /** A table's partition states, as the decisions see them. */
  states(table: string): Promise<Map<string, PartitionState>>;
  /** The signatures a layer reading `table` is planned against: as built by now (sync), or as predicted (plan). */
  upstream(table: string): Promise<Map<string, string | undefined>>;
  /**
   * A table's current runs and their files (of `partitions` only, where given), with the definition they are read
   * under: what an upsert merges into, and what an append takes a part's rows by difference from.
   */
  currentRuns(table: string, partitions?: readonly string[]): Promise<TableSnapshot>;
  /** Not one day of an http source could be fetched: its days fail (or are reported), nothing is landed. */
  fetchFailed(dataset: DatasetConfig, source: FetchedSource): void;
  /** Carries out the raw layer's plan. */
  raw(step: RawStep): Promise<void>;
  /** Carries out a derived layer's plan, decided from its `states`; `startedMs` is when the layer was begun. */
  layer(dataset: DatasetConfig, layer: LayerConfig, plan: readonly PlannedPartition[], states: ReadonlyMap<string, PartitionState>, startedMs: number): Promise<void>;
}

/** The raw layer of one dataset, decided: what `Run.raw` carries out. */
export interface RawStep {
  readonly dataset: DatasetConfig;
  readonly plan: readonly PlannedPartition[];
  /** `write: append`: what each new run takes from the delivery, and the parts it is appended from. */
  readonly appended: ReadonlyMap<string, Appending>;
  readonly states: ReadonlyMap<string, PartitionState>;
  /** The landed delivery, unless the plan was made from the summary kept of the same delivery. */
  readonly landed?: LandedDelivery;
  /** Upsert: the delivery merged into the table's rows; what is written. */
  readonly merged?: LandedDelivery;
  /** The key of the delivery's landing summary, and the summary when one was kept. */
  readonly known: { readonly key?: string; readonly summary?: LandingSummary };
  readonly fetched?: FetchedSource;
  readonly startedMs: number;
  /** Drops the landed and merged deliveries once their runs are written. */
  readonly release: () => Promise<void>;
}

/** Every table one dataset's sync writes: raw, each layer, the dead-letter table. */
export function tablesWritten(dataset: DatasetConfig): string[] {
  // An ingested raw table is the collector's to write (lakeswap serve / ingest); a sync only reads it.
  return [...(dataset.ingested ? [] : [dataset.table]), ...dataset.layers.map((l) => l.table), ...(dataset.deadLetter ? [dataset.deadLetter] : [])];
}

/** The table of a dataset's layer (`raw`: the dataset's table). */
export function tableOfLayer(dataset: DatasetConfig, layer: string): string {
  return layer === "raw" ? dataset.table : (dataset.layers.find((l) => l.name === layer)?.table ?? dataset.table);
}

/** The partition keys of a dataset's layer. */
export function keysOfLayer(dataset: DatasetConfig, layer: string): readonly string[] {
  return layer === "raw" ? dataset.partition.map((p) => p.key) : (dataset.layers.find((l) => l.name === layer)?.partitionKeys ?? []);
}

/** What the plan's decisions take from the options. */
export function planChoices(options: PipelineOptions): PlanChoices {
  return {
    fullRefresh: options.fullRefresh,
    allowDuplicates: options.allowDuplicates,
    selected: (partition, keys, dataset) => partitionSelected(options.partitions, partition, keys, dataset),
  };
}
