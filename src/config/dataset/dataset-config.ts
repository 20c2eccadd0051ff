import type { AuditSpec } from "../../model/audit.js";
import type { SinkSpec } from "../../sinks/sink.js";
import type { HttpSource } from "../../sources/source.js";
import type { PipelineColumn } from "../ingest-config.js";
import type { WriteMode } from "../pipeline-schema.js";


/** A derived layer, resolved. */
export interface LayerConfig {
  readonly name: string;
  readonly table: string;
  /** The SQL file, for messages. */
  readonly sqlPath: string;
  /** The SQL file's text, read once here: core never reads files. */
  readonly sql: string;
  /** The transform's fingerprint: a hash of the SQL file's bytes. */
  readonly fingerprint: string;
  readonly columns: readonly PipelineColumn[];
  readonly partitionKeys: readonly string[];
  readonly from: string;
  /** This layer's partition keys as expressions over the upstream partition keys. */
  readonly inputMap: readonly { readonly key: string; readonly expression: string }[];
  /** Whole tables every partition reads (`inputs.tables`); part of the signature. */
  readonly lookups: readonly string[];
  readonly compression: "snappy" | "zstd";
  /** `iceberg: true`: the layer's table is published as Iceberg too. */
  readonly iceberg?: boolean;
  /** `iceberg_table`: the Glue name of its Iceberg table (default `<table>_iceberg`). */
  readonly icebergTable?: string;
  /** Targets outside the lake this layer is sent to (`sinks:`). */
  readonly sinks: readonly SinkSpec[];
  /** What each staged partition must satisfy before its pointer moves (`audits:`). */
  readonly audits: readonly AuditSpec[];
}

/** How an upsert dataset merges deliveries (`write: upsert`). */
export interface UpsertConfig {
  readonly primaryKey: readonly string[];
  readonly orderBy: readonly string[];
  readonly deleteFlag?: string;
}

/**
 * Which days a sync takes from a source (`lookback_days`, and every http source): today in `timezone` (or the
 * sync's --as-of day) and the `lookbackDays` days before it, as values of partition key `key` (YYYY-MM-DD).
 */
export interface LookbackWindow {
  readonly key: string;
  readonly lookbackDays: number;
  readonly timezone: string;
  /** A day the source returns without rows is swapped to empty (otherwise it keeps its rows and is reported). */
  readonly allowEmpty: boolean;
}

/** A dataset, resolved: its raw layer and its derived layers in build order. */
export interface DatasetConfig {
  readonly name: string;
  /** The delivery's files (for an ingested dataset: none, and never read). */
  readonly source: { readonly format: "csv" | "jsonl" | "parquet"; readonly path: string; readonly header: boolean; readonly delimiter: string };
  /** `source: {http: ...}`: each sync fetches the window's days from a JSON API; its one partition key is `window.key`. */
  readonly http?: HttpSource;
  /** The days a sync takes (http sources, and file sources with lookback_days). */
  readonly window?: LookbackWindow;
  /** Set by a sync for the days its http source returned: the JSONL files landed instead of `source.path`, each with its day's partition. */
  readonly fetchedFiles?: readonly { readonly file: string; readonly partition: string }[];
  /** `source: {ingest: <pipeline>.<namespace>}`: the raw layer is that namespace's ingested table, filled by lakeswap serve / ingest; a sync only builds the layers. */
  readonly ingested?: { readonly pipeline: string; readonly namespace: string };
  readonly table: string;
  readonly columns: readonly PipelineColumn[];
  readonly partition: readonly { readonly key: string; readonly expression: string }[];
  readonly signatureColumns: readonly string[];
  readonly deadLetter?: string;
  readonly compression: "snappy" | "zstd";
  /** `iceberg: true`: the raw table is published as Iceberg too. */
  readonly iceberg?: boolean;
  /** `iceberg_table`: the Glue name of its Iceberg table (default `<table>_iceberg`). */
  readonly icebergTable?: string;
  /** How the raw table is written. */
  readonly write: WriteMode;
  /** Set for `write: upsert`. */
  readonly upsert?: UpsertConfig;
  readonly layers: readonly LayerConfig[];
  /** Targets outside the lake the raw layer is sent to (`sinks:`). */
  readonly sinks: readonly SinkSpec[];
  /** What each staged partition of the raw table must satisfy before its pointer moves (`audits:`). */
  readonly audits: readonly AuditSpec[];
  /**
   * `publish:`: `per_partition` (default), each partition that passes moves; `all_or_nothing`, the dataset's runs are
   * staged, and its pointers move together only if every partition of every layer passed (else the sync is held).
   */
  readonly publish?: "per_partition" | "all_or_nothing";
}
