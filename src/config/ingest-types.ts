import type { TimeFormat } from "../model/column-types.js";
import type { Column } from "../model/table.js";
import type { AwsTarget } from "./aws-config.js";

/** A declared column with its nullability (datasets and ingest pipelines declare columns alike). */
export interface PipelineColumn extends Column {
  readonly nullable: boolean;
  /** `renamed_from:` the column's name before a rename (`sync --rebuild-schema` reads the old runs' values under it). */
  readonly renamedFrom?: string;
  /**
   * `source.fields` (a namespace's `fields`): the name the column has in the delivery's files or the events (a CSV
   * header, a JSON field, a Parquet column); absent: its own name.
   */
  readonly field?: string;
}

/**
 * The ingest part of `lakeswap.yaml`, as the Skipprd Athena output sink's documentation writes it (`data_sinks`, `schema_sinks`,
 * `pipelines.<name>.{data_sink, schema_sink, deadletter_sink}`), with lakeswap's own keys under each pipeline
 * (`namespaces`, `wal`). pipeline-config.ts composes these keys into the one schema of the file.
 */

/** Where a pipeline's Parquet lands: an embedded lake folder, or S3 + Glue + Athena. */
export type DataSinkTarget =
  | { readonly kind: "local"; readonly name: string; readonly path: string }
  | { readonly kind: "athena"; readonly name: string; readonly aws: AwsTarget };

/** Partition keys of a namespace's table and the DuckDB SQL computing each one from the time field, in UTC. */
export interface TimeBucketing {
  readonly field: string;
  readonly partition: readonly { readonly key: string; readonly expression: string }[];
  /** How the field's value is read (`time.format`); default iso8601. */
  readonly format?: TimeFormat;
}

/** One namespace of a pipeline: a table (Glue table and folder) of declared columns, bucketed by one time field. */
export interface IngestNamespaceConfig {
  /** The namespace's name, also its table's name. */
  readonly name: string;
  /** The declared columns, in order (the extra column and the partition keys are not among them). */
  readonly columns: readonly PipelineColumn[];
  /** What an event field that is not a declared column does: kept in the extra column (default), or dead-letters its event. */
  readonly unknownFields: "keep" | "deadletter";
  /** The JSON text column that keeps unknown fields (default `extra`); the table has it only when unknownFields is keep. */
  readonly extraColumn: string;
  readonly time: TimeBucketing;
  /**
   * `dedupe: {field, window, max_ids}`: drop an event whose id the namespace took within the window. `field` is the
   * name the events give the id's field (the column's `fields:` name, else the column's).
   */
  readonly dedupe?: { readonly field: string; readonly windowMs: number; readonly maxIds: number };
}

/** The write-ahead log of one pipeline. */
export interface WalConfig {
  /** Absolute; default `<config dir>/.lakeswap-wal/<pipeline>`. */
  readonly dir: string;
  /** A segment is sealed at this size (default 64 MiB) ... */
  readonly segmentMaxBytes: number;
  /** ... or at this age (default 60 s), whichever comes first. */
  readonly segmentMaxAgeMs: number;
  /** Past this many bytes in the log the collector answers 503 with Retry-After (default 1 GiB). */
  readonly maxBytes: number;
}

/** One event pipeline, resolved: where its tables, its catalog and its dead letters go, its namespaces and its log. */
export interface IngestPipelineConfig {
  readonly name: string;
  /** `data_sink`; default the embedded lake (`lake:`, else `<config dir>/lake`). */
  readonly dataSink: DataSinkTarget;
  /**
   * The Glue database the namespaces' tables are created in; set exactly when the data sink is Athena. It is the
   * `schema_sink`'s glue_database_name, or, without a schema_sink, the Athena block's own (then its name is
   * `data_sinks.<name>`). A schema_sink paired with a Local data sink is accepted and ignored.
   */
  readonly schemaSink?: { readonly name: string; readonly database: string };
  /**
   * `deadletter_sink`; default the data sink. Dead letters go to the table named after the pipeline there (on Athena,
   * in that sink's own glue_database_name, the "deadletter database" of Skipprd's documentation).
   */
  readonly deadletterSink: DataSinkTarget;
  readonly namespaces: readonly IngestNamespaceConfig[];
  readonly wal: WalConfig;
  /**
   * `idempotency_window` and `idempotency_max_keys`: how long, and how many, request keys (Idempotency-Key) the
   * collector remembers; default 24 h and 100,000 (src/ingest/idempotency.ts).
   */
  readonly idempotency?: { readonly windowMs: number; readonly maxKeys: number };
  /** `compact: {after, target_size}`: the collector compacts its tables' days closed for `afterMs` itself; absent: it does not. */
  readonly compact?: { readonly afterMs: number; readonly fileBytes: number };
  /** `auth_token: ${VAR}`: the bearer token its event posts must carry (else LAKESWAP_INGEST_TOKEN; neither: none). */
  readonly authToken?: string;
}

/** A `columns:` mapping as parsed: name -> type, or name -> {type, nullable}. */
export type ColumnDeclarations = Record<string, string | { type: string; nullable: boolean }>;

/** What resolving the ingest keys needs from the rest of the file. */
export interface IngestContext {
  /** The config file's folder. */
  readonly dir: string;
  /** `lake:`, absolute. */
  readonly lake?: string;
  /** `target:`: the data sink datasets run on. */
  readonly target?: string;
  /** The datasets' tables, each with the key path that declares it. */
  readonly datasetTables: readonly { readonly table: string; readonly where: string }[];
  readonly env: NodeJS.ProcessEnv;
  /** pipeline-config.ts's column resolution, shared with datasets. */
  readonly resolveColumns: (columns: ColumnDeclarations, at: string) => PipelineColumn[];
  readonly didYouMean: (value: string, known: readonly string[]) => string;
}
