import path from "node:path";
import { z } from "zod";
import { TIME_FORMATS, type TimeFormat } from "../model/column-types.js";
import { parseDuration } from "../model/duration.js";
import { InvalidInputError } from "../model/errors.js";
import { assertIdentifier, printable, quoteIdentifier } from "../model/sql.js";
import { athenaSinkSchema, awsTargetInEnvironment, resolveAwsTarget } from "./aws-config.js";
import type { ColumnDeclarations, DataSinkTarget, IngestContext, IngestNamespaceConfig, IngestPipelineConfig, PipelineColumn, TimeBucketing, WalConfig } from "./ingest-types.js";
import { checkLogs, checkTables, chooseDatasetsSink } from "./ingest-placement.js";
import { resolveFields } from "./dataset/resolve-fields.js";

export type { ColumnDeclarations, DataSinkTarget, IngestContext, IngestNamespaceConfig, IngestPipelineConfig, PipelineColumn } from "./ingest-types.js";

const DEFAULT_BUCKETING = "p_year/p_month/p_day";
const DEFAULT_SEGMENT_MAX_BYTES = "64MiB";
const DEFAULT_SEGMENT_MAX_AGE = "60s";
const DEFAULT_IDEMPOTENCY_WINDOW = "24h";
const DEFAULT_IDEMPOTENCY_MAX_KEYS = 100_000;
const DEFAULT_DEDUPE_WINDOW = "1h";
const DEFAULT_DEDUPE_MAX_IDS = 1_000_000;
const DEFAULT_WAL_MAX_BYTES = "1GiB";
const TIME_TYPES = ["TIMESTAMP", "TIMESTAMPTZ", "DATE"];

const byteSize = z.union([z.number(), z.string()]);
const age = z.union([z.number(), z.string()]);

const dataSinkSchema = z
  .object({
    Athena: athenaSinkSchema
      .optional()
      .describe(
        "S3 for Snappy Parquet, the Glue Data Catalog for tables, Athena for queries. Ingest uses s3_bucket, s3_prefix, " +
          "glue_database_name, athena_workgroup_name and athena_results_s3_bucket, each with its environment equivalent; " +
          "region sets the AWS clients' region; catalog, max_concurrency (datasets' builds) and discovery_cache_ttl_secs (unused) are query keys that ingest ignores",
      ),
    Local: z
      .object({ path: z.string().min(1).optional().describe("the lake folder, relative to this config file (default: lake:, else ./lake)") })
      .strict()
      .optional()
      .describe("an embedded lake: a folder on this machine"),
  })
  .strict()
  .describe("exactly one of Athena: {...} or Local: {path: ./lake}");

const schemaSinkSchema = z
  .object({
    Glue: z
      .object({
        glue_database_name: z
          .string()
          .min(1)
          .optional()
          .describe("the Glue database each namespace's table is created in (env SCHEMA_OUTPUT_GLUE_DATABASE_NAME)"),
      })
      .strict()
      .optional()
      .describe("the Glue Data Catalog"),
  })
  .strict()
  .describe("where the namespaces' table definitions go; pairs with an Athena data sink (a Local data sink ignores it)");

const timeSchema = z
  .object({
    field: z.string().min(1).describe("the declared column (TIMESTAMP, TIMESTAMPTZ or DATE, nullable: false) that places an event in its partition, in UTC"),
    partition: z
      .enum([DEFAULT_BUCKETING, "date"])
      .default(DEFAULT_BUCKETING)
      .describe("p_year/p_month/p_day (default): three keys, '2025', '03', '04'; date: one key of a source contract, '2025-03-04'"),
    format: z
      .enum(TIME_FORMATS as [TimeFormat, ...TimeFormat[]])
      .default("iso8601")
      .describe("how the field is sent: iso8601 (default), text such as 2025-03-04T10:15:00Z; epoch_ms or epoch_s, a number (or digits) of milliseconds or seconds since 1970-01-01T00:00:00Z"),
  })
  .strict()
  .describe("time bucketing: which field partitions the table, and how");

const walSchema = z
  .object({
    dir: z.string().min(1).optional().describe("the log's folder, relative to this config file (default .lakeswap-wal/<pipeline>)"),
    segment_max_bytes: byteSize
      .default(DEFAULT_SEGMENT_MAX_BYTES)
      .describe("a segment is sealed at this size: bytes, or 512KiB, 64MiB, 1GiB (KB, MB, GB are powers of 1000)"),
    segment_max_age: age.default(DEFAULT_SEGMENT_MAX_AGE).describe("... or at this age, e.g. 60s or 5m"),
    max_bytes: byteSize.default(DEFAULT_WAL_MAX_BYTES).describe("the log's size limit; past it the collector answers 503 with Retry-After (backpressure)"),
  })
  .strict();

/** A namespace's keys; `columns` is the column declaration of datasets. */
function namespaceSchema(columns: z.ZodType<ColumnDeclarations>) {
  return z
    .object({
      columns: columns.describe("the event's fields, in order: name -> type, or name -> {type, nullable}; a missing field is NULL (a dead letter when nullable: false)"),
      unknown_fields: z
        .enum(["keep", "deadletter"])
        .default("keep")
        .describe("an event field that is not a declared column: keep (as JSON text in extra_column) or deadletter (the whole event)"),
      extra_column: z.string().min(1).optional().describe("unknown_fields: keep only: the JSON text column that keeps them (default extra)"),
      fields: z
        .record(z.string().regex(/^[a-z][a-z0-9_]{0,127}$/, "name a declared column"), z.string().min(1).max(255))
        .optional()
        .describe("column -> the name the events give its field, e.g. user_id: userId (default: the field named like the column; case does not matter)"),
      time: timeSchema,
      dedupe: z
        .object({
          field: z.string().min(1).describe("the declared column that identifies an event, e.g. event_id"),
          window: age.default(DEFAULT_DEDUPE_WINDOW).describe("how long an id is remembered (default 1h)"),
          max_ids: z.number().int().positive().default(DEFAULT_DEDUPE_MAX_IDS).describe("the most ids remembered at once (about 100 bytes each); past it the oldest are forgotten first"),
        })
        .strict()
        .optional()
        .describe("drop an event whose id this namespace already took within the window (counted as deduplicated)"),
    })
    .strict();
}

/**
 * The ingest keys of `lakeswap.yaml`. `columns` is the column declaration datasets use too: pipeline-config.ts owns
 * it and hands it in, so this module never loads pipeline-config.ts (which loads this one).
 */
export function ingestSchemas(columns: z.ZodType<ColumnDeclarations>) {
  const pipeline = z
    .object({
      data_sink: z.string().min(1).optional().describe("where the Parquet lands: data_sinks.<name> or the bare name (default: the embedded lake, lake: or ./lake)"),
      schema_sink: z
        .string()
        .min(1)
        .optional()
        .describe("the Glue schema sink of an Athena data sink: schema_sinks.<name> (default: the Athena block's glue_database_name); accepted and ignored with a Local data sink"),
      deadletter_sink: z.string().min(1).optional().describe("where dead letters go, in a table named after the pipeline: data_sinks.<name> (default: the data sink)"),
      namespaces: z
        .record(z.string(), namespaceSchema(columns))
        .default({})
        .describe("the event kinds this pipeline accepts (POST /v1/<pipeline>/<namespace>), each a table named after it"),
      wal: walSchema.prefault({}).describe("the write-ahead log: an event is acknowledged once it is fsynced here"),
      idempotency_window: age
        .default(DEFAULT_IDEMPOTENCY_WINDOW)
        .describe("how long the collector remembers a request's Idempotency-Key, so that a retry stores nothing (default 24h)"),
      idempotency_max_keys: z
        .number()
        .int()
        .positive()
        .default(DEFAULT_IDEMPOTENCY_MAX_KEYS)
        .describe("the most keys remembered at once (about 300 bytes each); past it the oldest are forgotten first, counted in /metrics"),
      compact: z
        .object({
          after: age.describe("a day is compacted once no event was added to it for this long, e.g. 2h (as lakeswap compact --older-than)"),
          target_size: z.union([z.number(), z.string()]).default("128MiB").describe("about how large each compacted file grows (default 128MiB)"),
        })
        .strict()
        .optional()
        .describe("the collector compacts its tables' closed days itself, between landings (default: it does not; lakeswap compact does)"),
      auth_token: z
        .string()
        .optional()
        .describe("${VAR}: the bearer token this pipeline's event posts must carry (Authorization: Bearer <token>), taken from the environment (default LAKESWAP_INGEST_TOKEN, else none)"),
    })
    .strict();
  return {
    data_sinks: z
      .record(z.string(), dataSinkSchema)
      .optional()
      .describe("where data is written: Athena (S3 + Glue) or Local (an embedded lake); datasets run on target: or the only one"),
    schema_sinks: z.record(z.string(), schemaSinkSchema).optional().describe("catalogs that hold the ingested tables' definitions"),
    pipelines: z
      .record(z.string(), pipeline)
      .optional()
      .describe("event ingest (lakeswap serve, lakeswap ingest): each pipeline's sinks, namespaces and write-ahead log"),
  };
}

type IngestSchemas = ReturnType<typeof ingestSchemas>;

/** The ingest keys as parsed. */
export interface IngestInput {
  readonly data_sinks?: z.output<IngestSchemas["data_sinks"]>;
  readonly schema_sinks?: z.output<IngestSchemas["schema_sinks"]>;
  readonly pipelines?: z.output<IngestSchemas["pipelines"]>;
}

/** The ingest keys, resolved, and the lake the datasets run on. */
export interface ResolvedIngest {
  readonly pipelines: readonly IngestPipelineConfig[];
  /** The data sink datasets run on: `target:`, the only data sink, or (without datasets) the one every pipeline writes to. */
  readonly datasetsSink?: DataSinkTarget;
  /** The embedded lake folder datasets run on, when the config names one (a Local data sink, `lake:`, or the pipelines' default lake). */
  readonly lake?: string;
}

/** The name of a pipeline's data sink when it names none: the embedded lake. */
export const DEFAULT_DATA_SINK = "lake";

/** The name of a pipeline's data sink when none is declared and DATA_OUTPUT_S3_BUCKET names an AWS target. */
export const ENVIRONMENT_DATA_SINK = "environment";

/**
 * Refuses to collect for a pipeline without namespaces: it would answer every post 404 while saying it collects
 * events. (The config itself may hold one being written; serve and ingest refuse it.)
 */
export function assertNamespaces(pipeline: IngestPipelineConfig): void {
  if (pipeline.namespaces.length > 0) return;
  throw new InvalidInputError(
    `pipelines.${pipeline.name} declares no namespaces, so it could take no events: add pipelines.${pipeline.name}.namespaces.<name> with its columns and time field (README: "Event ingest")`,
  );
}

/** Checks and resolves `data_sinks`, `schema_sinks` and `pipelines`. */
export function resolveIngest(input: IngestInput, context: IngestContext): ResolvedIngest {
  const dataSinks = Object.entries(input.data_sinks ?? {});
  const schemaSinks = Object.entries(input.schema_sinks ?? {});
  for (const [name, sink] of dataSinks) {
    if ((sink.Athena === undefined) === (sink.Local === undefined)) {
      throw new InvalidInputError(`data_sinks.${name}: give exactly one of Athena: {s3_bucket: ..., glue_database_name: ...} or Local: {path: ./lake}`);
    }
  }
  for (const [name, sink] of schemaSinks) {
    // Glue is the only kind today, optional in the schema so that a misspelt kind reads as one error.
    if (sink.Glue === undefined) throw new InvalidInputError(`schema_sinks.${name}: give Glue: {glue_database_name: my_database}`);
    const database = sink.Glue.glue_database_name;
    if (database !== undefined) checkGlueDatabase(database, `schema_sinks.${name}.Glue.glue_database_name`);
  }
  const defaultLake = context.lake ?? path.resolve(context.dir, "lake");
  const dataSinkNames = dataSinks.map(([name]) => name);

  /** A data sink by name, its Athena fields completed from the environment. */
  const dataSink = (name: string): DataSinkTarget => {
    const sink = input.data_sinks?.[name];
    if (sink?.Local) return { kind: "local", name, path: sink.Local.path !== undefined ? path.resolve(context.dir, sink.Local.path) : defaultLake };
    return { kind: "athena", name, aws: resolveAwsTarget(sink?.Athena, context.env, `data_sinks.${name}.Athena`) };
  };

  /**
   * Where a pipeline writes when no data sink is declared: AWS when DATA_OUTPUT_S3_BUCKET is set (the rule of every
   * command), else the embedded lake.
   */
  const defaultSink = (): DataSinkTarget =>
    awsTargetInEnvironment(context.env)
      ? { kind: "athena", name: ENVIRONMENT_DATA_SINK, aws: resolveAwsTarget(undefined, context.env, "environment (DATA_OUTPUT_S3_BUCKET is set)") }
      : { kind: "local", name: DEFAULT_DATA_SINK, path: defaultLake };

  // A pipeline without data_sink writes where the datasets run: the data sink `target:` names, else the only one
  // declared; with none declared, the embedded lake. With several and no target, it must name one.
  const targetName = context.target?.replace(/^data_sinks\./, "");
  const defaultDataName = targetName !== undefined && dataSinkNames.includes(targetName) ? targetName : dataSinkNames.length === 1 ? dataSinkNames[0] : undefined;
  const writtenTo = new Set<string | undefined>();
  const pipelines = Object.entries(input.pipelines ?? {}).map(([name, pipeline]): IngestPipelineConfig => {
    const at = `pipelines.${name}`;
    wrapAt("pipelines", () => assertIdentifier("pipeline name", name));
    if (pipeline.data_sink === undefined && defaultDataName === undefined && dataSinkNames.length > 1) {
      throw new InvalidInputError(`${at}.data_sink: several data sinks are declared (${dataSinkNames.join(", ")}): name the one this pipeline writes to (data_sink: data_sinks.<name>), or set target:`);
    }
    const dataName = pipeline.data_sink !== undefined ? reference(pipeline.data_sink, "data_sinks", dataSinkNames, `${at}.data_sink`, context) : defaultDataName;
    const schemaName =
      pipeline.schema_sink !== undefined ? reference(pipeline.schema_sink, "schema_sinks", schemaSinks.map(([n]) => n), `${at}.schema_sink`, context) : undefined;
    const deadletterName =
      pipeline.deadletter_sink !== undefined ? reference(pipeline.deadletter_sink, "data_sinks", dataSinkNames, `${at}.deadletter_sink`, context) : undefined;
    writtenTo.add(dataName);

    const data: DataSinkTarget = dataName !== undefined ? dataSink(dataName) : defaultSink();
    let schemaSink: IngestPipelineConfig["schemaSink"];
    if (data.kind === "athena") {
      // Skipprd's configuration pairs an Athena data sink with a Glue schema sink; without one, the Athena block's database stands in.
      schemaSink = schemaName !== undefined ? { name: schemaName, database: schemaDatabase(schemaName, input, context) } : { name: data.name === ENVIRONMENT_DATA_SINK ? "SCHEMA_OUTPUT_GLUE_DATABASE_NAME" : `data_sinks.${data.name}`, database: data.aws.database };
    }
    const deadletterSink = deadletterName === undefined || deadletterName === dataName ? data : dataSink(deadletterName);
    const namespaces = Object.entries(pipeline.namespaces).map(([namespace, spec]) => resolveNamespace(namespace, spec, `${at}.namespaces.${namespace}`, context));
    const authToken = pipeline.auth_token !== undefined ? resolveToken(pipeline.auth_token, `${at}.auth_token`, context.env) : undefined;
    const idempotency = resolveIdempotency(pipeline.idempotency_window, pipeline.idempotency_max_keys, at);
    const compact = pipeline.compact && resolveCompact(pipeline.compact, `${at}.compact`);
    return {
      name, dataSink: data, schemaSink, deadletterSink, namespaces, wal: resolveWal(name, pipeline.wal, `${at}.wal`, context.dir), idempotency,
      ...(compact ? { compact } : {}),
      ...(authToken !== undefined ? { authToken } : {}),
    };
  });

  const datasetsSink = chooseDatasetsSink(dataSinkNames, pipelines, writtenTo, context, dataSink);
  const lake = datasetsSink?.kind === "local" ? datasetsSink.path : (context.lake ?? (datasetsSink === undefined && writtenTo.has(undefined) ? defaultLake : undefined));
  checkTables(pipelines, datasetsSink ?? (lake !== undefined ? { kind: "local", name: DEFAULT_DATA_SINK, path: lake } : undefined), context);
  checkLogs(pipelines, lake);
  return { pipelines, datasetsSink, lake };
}

/** Resolves `data_sinks.landing` (or `landing`) to a defined name, or says which names are defined. */
function reference(value: string, kind: "data_sinks" | "schema_sinks", defined: readonly string[], at: string, context: IngestContext): string {
  const noun = kind === "data_sinks" ? "data sink" : "schema sink";
  if (defined.includes(value)) return value;
  const dot = value.indexOf(".");
  const prefix = dot >= 0 ? value.slice(0, dot) : undefined;
  const name = dot >= 0 ? value.slice(dot + 1) : value;
  const definedList = defined.length > 0 ? `defined ${noun}s: ${defined.join(", ")}` : `no ${noun}s are defined`;
  if (prefix !== undefined && prefix !== kind) {
    const other = prefix === "data_sinks" || prefix === "schema_sinks" ? `'${printable(value)}' is a ${prefix === "data_sinks" ? "data sink" : "schema sink"}, but this key takes a ${noun}` : `'${printable(value)}' is not a ${noun} reference`;
    throw new InvalidInputError(`${at}: ${other}: write ${kind}.<name> (${definedList})`);
  }
  if (defined.includes(name)) return name;
  const example = kind === "data_sinks" ? `declare data_sinks.${name}: {Athena: {...}} or {Local: {path: ./lake}}` : `declare schema_sinks.${name}: {Glue: {glue_database_name: ...}}`;
  throw new InvalidInputError(
    `${at}: ${kind}.${printable(name)} is not defined${context.didYouMean(name, defined)}; ${definedList} (${example}, or ${defined.length > 0 ? "name one of these" : `leave out ${at.slice(at.lastIndexOf(".") + 1)}`})`,
  );
}

/** The database of a Glue schema sink: its glue_database_name, else SCHEMA_OUTPUT_GLUE_DATABASE_NAME. */
function schemaDatabase(name: string, input: IngestInput, context: IngestContext): string {
  const database = input.schema_sinks?.[name]?.Glue?.glue_database_name ?? (context.env.SCHEMA_OUTPUT_GLUE_DATABASE_NAME || undefined);
  const at = `schema_sinks.${name}.Glue.glue_database_name`;
  if (database === undefined) throw new InvalidInputError(`${at}: the Glue schema sink needs a database: set glue_database_name, or SCHEMA_OUTPUT_GLUE_DATABASE_NAME`);
  return checkGlueDatabase(database, at);
}

function checkGlueDatabase(database: string, at: string): string {
  if (!/^[a-z0-9_]{1,255}$/.test(database)) {
    throw new InvalidInputError(`${at}: '${printable(database)}' is not a valid Glue database name: use lowercase letters, digits and '_'`);
  }
  return database;
}

/** A token written `${VAR}`, from the environment: never written in the file itself, where it would be read with the config. */
function resolveToken(value: string, at: string, env: NodeJS.ProcessEnv): string {
  const variable = /^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$/.exec(value.trim())?.[1];
  if (variable === undefined) {
    throw new InvalidInputError(`${at}: write the name of the environment variable that holds the token, as \${VAR} (e.g. auth_token: \${EVENTS_TOKEN}), not the token itself`);
  }
  const token = env[variable];
  if (token === undefined || token === "") throw new InvalidInputError(`${at}: environment variable ${variable} is not set (the config reads the token from \${${variable}}); export ${variable}=<a long random token>`);
  return token;
}

function resolveNamespace(name: string, spec: z.output<ReturnType<typeof namespaceSchema>>, at: string, context: IngestContext): IngestNamespaceConfig {
  wrapAt(at.slice(0, at.lastIndexOf(".")), () => assertIdentifier("namespace", name));
  const columns = resolveFields(context.resolveColumns(spec.columns, `${at}.columns`), spec.fields, { format: "jsonl", header: true }, `${at}.fields`, context.didYouMean);
  const renamed = columns.find((c) => c.renamedFrom !== undefined);
  if (renamed) throw new InvalidInputError(`${at}.columns.${renamed.name}.renamed_from: an ingested table's columns are only ever added; declare the column under its name`);
  const names = columns.map((c) => c.name);
  const timeColumn = columns.find((c) => c.name === spec.time.field);
  if (!timeColumn) {
    throw new InvalidInputError(`${at}.time.field: '${printable(spec.time.field)}' is not a declared column${context.didYouMean(spec.time.field, names)}; the columns are ${names.join(", ")}`);
  }
  if (!TIME_TYPES.includes(timeColumn.type)) {
    throw new InvalidInputError(
      `${at}.time.field: column '${timeColumn.name}' is ${timeColumn.type}; the time field must be TIMESTAMP, TIMESTAMPTZ or DATE ` +
        `(declare ${timeColumn.name}: {type: TIMESTAMPTZ, nullable: false}: ISO 8601 text such as 2025-03-04T10:15:00Z is read into it)`,
    );
  }
  if (timeColumn.nullable) {
    throw new InvalidInputError(
      `${at}.time.field: column '${timeColumn.name}' is nullable, but every event needs it to find its partition: declare ${timeColumn.name}: {type: ${timeColumn.type}, nullable: false} (an event without it is dead-lettered)`,
    );
  }
  if (spec.time.format !== "iso8601" && timeColumn.type === "DATE") {
    throw new InvalidInputError(`${at}.time.format: ${spec.time.format} gives a time of day, which column '${timeColumn.name}' (DATE) does not keep: declare it TIMESTAMPTZ`);
  }
  const partition = bucketing(spec.time.partition, timeColumn);
  for (const { key } of partition) {
    if (names.includes(key)) {
      throw new InvalidInputError(`${at}.columns.${key}: '${key}' is a partition key of this namespace (time.partition: ${spec.time.partition}); its value comes from the path, so name the column differently`);
    }
  }
  if (spec.unknown_fields === "deadletter" && spec.extra_column !== undefined) {
    throw new InvalidInputError(`${at}.extra_column: applies to unknown_fields: keep only (this namespace dead-letters events with unknown fields)`);
  }
  const extraColumn = spec.extra_column ?? "extra";
  wrapAt(`${at}.extra_column`, () => assertIdentifier("extra column", extraColumn));
  if (spec.unknown_fields === "keep") {
    if (names.includes(extraColumn)) {
      throw new InvalidInputError(
        `${at}.columns.${extraColumn}: '${extraColumn}' is the column that keeps unknown fields (unknown_fields: keep); rename the column, or set extra_column to another name`,
      );
    }
    if (partition.some((p) => p.key === extraColumn)) throw new InvalidInputError(`${at}.extra_column: '${extraColumn}' is a partition key of this namespace; choose another name`);
  }
  const dedupe = spec.dedupe === undefined ? {} : { dedupe: resolveDedupe(spec.dedupe, columns, `${at}.dedupe`, context) };
  return { name, columns, unknownFields: spec.unknown_fields, extraColumn, time: { field: timeColumn.name, partition, format: spec.time.format }, ...dedupe };
}

function resolveDedupe(spec: { field: string; window: string | number; max_ids: number }, columns: readonly PipelineColumn[], at: string, context: IngestContext): NonNullable<IngestNamespaceConfig["dedupe"]> {
  const names = columns.map((c) => c.name);
  if (!names.includes(spec.field)) {
    throw new InvalidInputError(`${at}.field: '${printable(spec.field)}' is not a declared column${context.didYouMean(spec.field, names)}; the columns are ${names.join(", ")}`);
  }
  const windowMs = parseDuration(String(spec.window), `${at}.window`);
  if (windowMs <= 0) throw new InvalidInputError(`${at}.window: '${spec.window}' would remember no id: use a duration above 0, e.g. 1h`);
  // The id is read from the events' own name of the column's field (`fields`).
  const column = columns.find((c) => c.name === spec.field);
  return { field: column?.field ?? spec.field, windowMs, maxIds: spec.max_ids };
}

/** The partition keys of a bucketing scheme, as DuckDB SQL over the time column; a TIMESTAMPTZ is taken in UTC whatever the session's time zone. */
function bucketing(scheme: string, column: PipelineColumn): TimeBucketing["partition"] {
  const value = column.type === "TIMESTAMPTZ" ? `timezone('UTC', ${quoteIdentifier(column.name)})` : quoteIdentifier(column.name);
  const keys: [string, string][] = scheme === "date" ? [["date", "%Y-%m-%d"]] : [["p_year", "%Y"], ["p_month", "%m"], ["p_day", "%d"]];
  return keys.map(([key, format]) => ({ key, expression: `strftime(${value}, '${format}')` }));
}

function resolveIdempotency(window: string | number, maxKeys: number, at: string): NonNullable<IngestPipelineConfig["idempotency"]> {
  const windowMs = parseDuration(String(window), `${at}.idempotency_window`);
  if (windowMs <= 0) throw new InvalidInputError(`${at}.idempotency_window: '${window}' would forget every key at once: use a duration above 0, e.g. 24h`);
  return { windowMs, maxKeys };
}

function resolveCompact(compact: { after: string | number; target_size: string | number }, at: string): NonNullable<IngestPipelineConfig["compact"]> {
  const afterMs = parseDuration(String(compact.after), `${at}.after`);
  if (afterMs <= 0) throw new InvalidInputError(`${at}.after: '${compact.after}' would compact days still receiving events: use a duration above 0, e.g. 2h`);
  const fileBytes = parseByteSize(compact.target_size, `${at}.target_size`);
  if (fileBytes <= 0) throw new InvalidInputError(`${at}.target_size: '${compact.target_size}' is no size for a file: use one above 0, e.g. 128MiB`);
  return { afterMs, fileBytes };
}

function resolveWal(pipeline: string, wal: z.output<typeof walSchema>, at: string, dir: string): WalConfig {
  const segmentMaxBytes = parseByteSize(wal.segment_max_bytes, `${at}.segment_max_bytes`);
  const maxBytes = parseByteSize(wal.max_bytes, `${at}.max_bytes`);
  const segmentMaxAgeMs = parseDuration(String(wal.segment_max_age), `${at}.segment_max_age`);
  if (segmentMaxAgeMs <= 0) throw new InvalidInputError(`${at}.segment_max_age: '${wal.segment_max_age}' would seal every segment at once: use a duration above 0, e.g. 60s`);
  if (maxBytes < segmentMaxBytes) {
    throw new InvalidInputError(`${at}.max_bytes: ${wal.max_bytes} is less than segment_max_bytes (${wal.segment_max_bytes}): the log could not hold one full segment; raise max_bytes or lower segment_max_bytes`);
  }
  return { dir: path.resolve(dir, wal.dir ?? path.join(".lakeswap-wal", pipeline)), segmentMaxBytes, segmentMaxAgeMs, maxBytes };
}

const SIZE_UNITS: Record<string, number> = {
  b: 1, kb: 1e3, mb: 1e6, gb: 1e9, tb: 1e12, kib: 2 ** 10, mib: 2 ** 20, gib: 2 ** 30, tib: 2 ** 40,
};

/** Parses a size: a whole number of bytes, or `512KiB`, `64MiB`, `1GiB` (KiB = 1024 bytes; KB = 1000). */
export function parseByteSize(value: number | string, what: string): number {
  const match = /^(\d+(?:\.\d+)?) ?([a-z]+)?$/i.exec(String(value).trim());
  const unit = match ? SIZE_UNITS[(match[2] ?? "b").toLowerCase()] : undefined;
  const bytes = match && unit !== undefined ? Math.floor(Number(match[1]) * unit) : Number.NaN;
  if (!Number.isSafeInteger(bytes) || bytes < 1) {
    throw new InvalidInputError(`${what}: '${printable(String(value))}' is not a size: use a whole number of bytes or a number with a unit, for example 64MiB or 1GiB`);
  }
  return bytes;
}

/** Runs a check, prefixing its message with the key path. */
function wrapAt(at: string, check: () => unknown): void {
  try {
    check();
  } catch (error) {
    if (error instanceof InvalidInputError) throw new InvalidInputError(`${at}: ${error.message}`);
    throw error;
  }
}
