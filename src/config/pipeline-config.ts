import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { parse as parseYaml } from "yaml";
import { z } from "zod";
import { InvalidInputError } from "../model/errors.js";
import { assertPartitionKey } from "../model/partition.js";
import { postgresColumnType } from "../model/column-types.js";
import { printable } from "../model/sql.js";
import { transformFingerprint } from "../model/signature.js";
import { normalizeColumnType, type Column } from "../model/table.js";
import type { SinkSpec } from "../sinks/sink.js";
import type { HttpSource } from "../sources/source.js";
import { assertHttpSourceSpec } from "../sources/http-source-spec.js";
import { parseDuration } from "../model/duration.js";
import type { AwsTarget } from "./aws-config.js";
import { ingestSchemas, resolveIngest, type IngestPipelineConfig, type PipelineColumn } from "./ingest-config.js";

const identifier = z.string().regex(/^[a-z][a-z0-9_]{0,127}$/, "use a lowercase letter first, then lowercase letters, digits or '_'");

const columnType = z.union([
  z.string().describe("the column's type, e.g. BIGINT, DECIMAL(10,2), VARCHAR, TIMESTAMP"),
  z
    .object({
      type: z.string().describe("the column's type"),
      nullable: z.boolean().default(true).describe("whether the column may be NULL; a NULL in a non-nullable column is a bad row"),
    })
    .strict(),
]);

const columnsSchema = z
  .record(identifier, columnType)
  .describe("declared columns, in order: name -> type, or name -> {type, nullable}");

const httpSourceSchema = z
  .object({
    url: z
      .string()
      .min(1)
      .describe("the URL of one partition: {{ date }} (the contract key) takes the day, ${VAR} an environment variable, e.g. https://api.example.com/report?date={{ date }}"),
    headers: z
      .record(z.string().regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/, "a header name: letters, digits and - _ . only"), z.string())
      .default({})
      .describe("request headers; ${VAR} takes an environment variable and is never printed, e.g. Authorization: Bearer ${TOKEN}"),
    rows: z.string().default("rows").describe("the path to the rows array in each page, e.g. rows or data.items ($ for the body itself); missing or null: no rows"),
    fields: z.record(identifier, z.string().min(1)).default({}).describe("column -> path inside a row, e.g. sessions: metricValues[0].value (default: the field named like the column)"),
    pagination: z
      .union([
        z.object({ next_url: z.string().min(1).describe("the path to the next page's URL in each page") }).strict(),
        z
          .object({
            cursor: z.string().min(1).describe("the path to the next page's cursor in each page"),
            param: z.string().min(1).describe("the query parameter the cursor is sent back in"),
          })
          .strict(),
      ])
      .optional()
      .describe("how to follow pages to the end: {next_url: <path>} or {cursor: <path>, param: <name>}; none: one page"),
    requests_per_second: z.number().positive().max(10_000).optional().describe("at most this many requests a second, all partitions together"),
    timeout: z.string().default("30s").describe("the longest one request may take, e.g. 30s"),
    max_attempts: z.number().int().min(1).max(20).default(5).describe("attempts per request: 429, 5xx, timeouts and network errors are retried with backoff and jitter, honouring Retry-After"),
    max_pages: z.number().int().min(1).max(1_000_000).default(10_000).describe("pages per partition at most (a pagination loop stops with an error)"),
    concurrency: z.number().int().min(1).max(32).default(4).describe("partitions fetched at the same time"),
  })
  .strict();

const sourceSchema = z
  .object({
    format: z.enum(["csv", "jsonl", "parquet"]).optional().describe("the source files' format"),
    path: z.string().min(1).optional().describe("one file or a glob, relative to this config file; --input FILE names one delivery instead"),
    ingest: z
      .string()
      .regex(/^[a-z][a-z0-9_]{0,127}\.[a-z][a-z0-9_]{0,127}$/, "name a namespace of a pipeline: <pipeline>.<namespace>")
      .optional()
      .describe("events collected by lakeswap serve / lakeswap ingest, <pipeline>.<namespace>: the raw layer is that namespace's ingested table (instead of format and path)"),
    header: z.boolean().default(true).describe("CSV only: the first line holds column names"),
    delimiter: z.string().length(1).default(",").describe("CSV only: the field delimiter"),
    http: httpSourceSchema.optional().describe("a JSON API asked for one partition (one day) at a time, instead of format and path"),
    contract: identifier
      .optional()
      .describe("the partition key whose value the source is asked for, a day as YYYY-MM-DD (http: default date); with a file source and lookback_days, the partition key that holds the day"),
    replace_partition: z
      .boolean()
      .optional()
      .describe("each partition the source returns replaces the lake's as a unit (a new run swapped in, never delete-then-write); http sources always do"),
    lookback_days: z
      .number()
      .int()
      .min(0)
      .max(3660)
      .optional()
      .describe("every sync takes today and this many days before it (an API restates recent days); older days are settled and never rewritten"),
    timezone: z.string().min(1).optional().describe("the zone 'today' is taken in, an IANA name such as Europe/Berlin (default UTC)"),
    allow_empty: z.boolean().default(false).describe("a day the source now returns without rows is swapped to empty; without it such a day keeps its rows and is reported"),
  })
  .strict();

const signatureSchema = z
  .object({
    columns: z.array(identifier).optional().describe("sign only these columns"),
    ignore: z.array(identifier).optional().describe("sign every column but these (e.g. updated_at)"),
  })
  .strict()
  .describe("which business columns the raw signature covers (default: all)");

const postgresSinkSchema = z
  .object({
    url: z
      .string()
      .min(1)
      .describe("the database URL, postgres:// or postgresql://; write ${DATABASE_URL} to take it from the environment (never printed with its password)"),
    table: z.string().min(1).describe("the target table, schema.table (e.g. analytics.orders_monthly; default schema public); created from the layer's columns if missing"),
    mode: z
      .enum(["upsert", "partition_replace"])
      .default("partition_replace")
      .describe("upsert: merge rows by primary_key (INSERT ... ON CONFLICT); partition_replace: delete the partition's rows and insert the new ones, in one transaction"),
    primary_key: z.array(identifier).min(1).optional().describe("the key upsert merges on (required for upsert): columns of this layer"),
    hard_delete: z
      .boolean()
      .default(false)
      .describe(
        "upsert: a key the lake no longer holds (deleted, moved away, rolled back) is deleted from the target; default false: its row is kept and marked (_lakeswap_deleted_at set, and the dataset's delete_flag column set true on the raw layer)",
      ),
  })
  .strict();

const sinksSchema = z
  .object({ postgres: postgresSinkSchema.optional() })
  .strict()
  .optional()
  .describe("targets outside the lake this layer's partitions are sent to after each sync (only partitions whose signature changed)");

const WRITE_MODES = ["partition_replace", "replace", "append", "upsert"] as const;

/** How a sync writes a table: replace partitions (default), replace the whole table, append deliveries, or merge them by key. */
type WriteMode = (typeof WRITE_MODES)[number];

const writeSchema = z
  .enum(WRITE_MODES)
  .default("partition_replace")
  .describe(
    "partition_replace (default): each partition the delivery holds is replaced as a unit; " +
      "append: each delivery's rows are added to its partitions (the same delivery twice adds nothing); " +
      "upsert: rows are merged by primary_key into their partitions; replace: the whole table is one unit",
  );

const layerSchema = z
  .object({
    name: identifier.describe("the layer's name, e.g. stage or analytics"),
    table: identifier.optional().describe("the layer's table (default <dataset>_<layer>)"),
    sql: z.string().min(1).describe("the SQL file that builds one partition, relative to this config file; {{ key }} stands for the partition value, quoted"),
    columns: columnsSchema,
    partition_keys: z.array(identifier).min(1).optional().describe("the layer's partition keys (default: the upstream layer's)"),
    inputs: z
      .object({
        from: identifier.optional().describe("the layer read (default: the layer above)"),
        map: z
          .record(identifier, z.string().min(1))
          .optional()
          .describe("each of this layer's partition keys as an expression over the upstream partition keys, e.g. month: substr(day, 1, 7); an upstream partition feeds the partition it maps to (default: the same keys)"),
        tables: z
          .array(identifier)
          .optional()
          .describe("lake tables every partition of this layer reads whole (lookups such as customers_raw); their signatures enter this layer's, so a change in them rebuilds it. A layer's SQL may read only the layer it is built from and these"),
      })
      .strict()
      .optional()
      .describe("which upstream partitions feed each partition of this layer"),
    compression: z.enum(["snappy", "zstd"]).default("snappy").describe("Parquet compression"),
    write: writeSchema,
    sinks: sinksSchema,
  })
  .strict();

const datasetSchema = z
  .object({
    source: sourceSchema,
    table: identifier.optional().describe("the raw table (default <dataset>_raw)"),
    columns: columnsSchema.optional(),
    partition: z
      .record(identifier, z.string().min(1))
      .default({})
      .describe("partition keys, each an expression over the source columns, e.g. day: strftime(order_ts, '%Y-%m-%d'); none for write: replace (the whole table is one unit), optional for append and upsert"),
    signature: signatureSchema.optional(),
    dead_letter: identifier.optional().describe("a table for bad rows (with reason and raw text); without it a bad row stops the load"),
    compression: z.enum(["snappy", "zstd"]).default("snappy").describe("Parquet compression of the raw table"),
    write: writeSchema,
    primary_key: z.array(identifier).min(1).optional().describe("upsert: the columns that identify a row"),
    order_by: z
      .array(identifier)
      .min(1)
      .optional()
      .describe("upsert: when a delivery holds a key several times, the row greatest by these columns wins (e.g. [updated_at]); without it, such a key is an error"),
    delete_flag: identifier.optional().describe("upsert: a BOOLEAN column; a delivery row where it is true removes its key from the table"),
    layers: z.array(layerSchema).default([]).describe("derived layers, in build order"),
    sinks: sinksSchema,
  })
  .strict();

const ingest = ingestSchemas(columnsSchema);

/**
 * The whole `lakeswap.yaml`, one schema: validation, defaults and the JSON Schema come from here. `datasets` (batch
 * files) and `pipelines` (event ingest, ingest-config.ts) may both be present; at least one is.
 */
export const pipelineSchema = z
  .object({
    lake: z.string().optional().describe("the lake folder, relative to this config file (overridden by --lake and LAKESWAP_LAKE); also the default Local path"),
    concurrency: z.number().int().min(1).max(64).default(4).describe("partitions of one layer built at the same time"),
    grace: z.string().optional().describe("GC grace window for old runs, e.g. 6h (default 6h)"),
    datasets: z.record(identifier, datasetSchema).default({}).describe("datasets, each landed into a raw layer and built into derived layers (default none)"),
    data_sinks: ingest.data_sinks,
    schema_sinks: ingest.schema_sinks,
    pipelines: ingest.pipelines,
    target: z.string().optional().describe("which data sink the datasets run on (data_sinks.<name> or the name), when several are declared; a Local one sets the lake folder"),
  })
  .strict();

export type { PipelineColumn } from "./ingest-config.js";

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
  /** Targets outside the lake this layer is sent to (`sinks:`). */
  readonly sinks: readonly SinkSpec[];
}

/** How an upsert dataset merges deliveries (`write: upsert`). */
interface UpsertConfig {
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
  /** How the raw table is written. */
  readonly write: WriteMode;
  /** Set for `write: upsert`. */
  readonly upsert?: UpsertConfig;
  readonly layers: readonly LayerConfig[];
  /** Targets outside the lake the raw layer is sent to (`sinks:`). */
  readonly sinks: readonly SinkSpec[];
}

/** The pipeline, resolved and checked. */
export interface PipelineConfig {
  readonly file: string;
  readonly lake?: string;
  readonly concurrency: number;
  readonly grace?: string;
  readonly datasets: readonly DatasetConfig[];
  /** Set when the datasets run on AWS. */
  readonly aws?: AwsTarget;
  /** The event pipelines (`pipelines:`); empty when there are none. */
  readonly ingest: readonly IngestPipelineConfig[];
}

/** The JSON Schema of `lakeswap.yaml`, generated from the zod schema. */
export function pipelineJsonSchema(): Record<string, unknown> {
  return z.toJSONSchema(pipelineSchema, { io: "input" }) as Record<string, unknown>;
}

/** Reads, validates and resolves a pipeline config file. */
export function loadPipelineConfig(file: string): PipelineConfig {
  const absolute = path.resolve(file);
  if (!existsSync(absolute)) {
    const where = path.isAbsolute(file) ? "" : ` (looked for ${absolute})`;
    throw new InvalidInputError(`config file '${file}' does not exist${where}; run lakeswap in the folder of lakeswap.yaml, or pass it with -c path/to/lakeswap.yaml`);
  }
  let raw: unknown;
  try {
    raw = parseYaml(readFileSync(absolute, "utf8"));
  } catch (error) {
    throw new InvalidInputError(`${file}: not valid YAML: ${(error as Error).message}`);
  }
  return resolvePipelineConfig(raw, absolute);
}

/** Validates a parsed config (paths resolve against the config file's folder; Athena fields missing from a block come from `env`). */
export function resolvePipelineConfig(raw: unknown, file: string, env: NodeJS.ProcessEnv = process.env): PipelineConfig {
  const parsed = pipelineSchema.safeParse(raw ?? {});
  if (!parsed.success) throw new InvalidInputError(`${path.basename(file)}: ${formatIssues(parsed.error.issues, raw ?? {})}`);
  const config = parsed.data;
  const dir = path.dirname(file);
  try {
    if (Object.keys(config.datasets).length === 0 && Object.keys(config.pipelines ?? {}).length === 0) {
      throw new InvalidInputError(
        "nothing to run: add datasets: (files landed into a raw table and built into layers, lakeswap sync) " +
          "or pipelines: (events collected by lakeswap serve and lakeswap ingest), or both",
      );
    }
    // The tables the datasets write, named before they are resolved (an ingested dataset's raw table is its namespace's).
    const datasetTables: { table: string; where: string }[] = [];
    for (const [name, dataset] of Object.entries(config.datasets)) {
      const raw = dataset.source.ingest === undefined ? (dataset.table ?? `${name}_raw`) : undefined;
      const layers = dataset.layers.map((l) => [l.name, l.table ?? `${name}_${l.name}`] as const);
      for (const [layer, table] of [["raw", raw], ...layers, ["dead_letter", dataset.dead_letter]] as const) {
        if (!table) continue;
        const where = `datasets.${name}.${layer}`;
        const other = datasetTables.find((t) => t.table === table);
        if (other) throw new InvalidInputError(`table '${table}' is used by both ${other.where} and ${where}; give each layer its own table`);
        datasetTables.push({ table, where });
      }
    }
    const ingest = resolveIngest(config, {
      dir,
      lake: config.lake !== undefined ? path.resolve(dir, config.lake) : undefined,
      target: config.target,
      datasetTables,
      env,
      resolveColumns,
      didYouMean,
    });
    const datasets = Object.entries(config.datasets).map(([name, dataset]) => resolveDataset(name, dataset, dir, ingest.pipelines));
    const aws = ingest.datasetsSink?.kind === "athena" ? ingest.datasetsSink.aws : undefined;
    return {
      file,
      lake: ingest.lake,
      concurrency: aws?.maxConcurrency ?? config.concurrency,
      grace: config.grace,
      datasets,
      aws,
      ingest: ingest.pipelines,
    };
  } catch (error) {
    if (error instanceof InvalidInputError) throw new InvalidInputError(`${path.basename(file)}: ${error.message}`);
    throw error;
  }
}

type DatasetInput = z.output<typeof datasetSchema>;

function resolveDataset(name: string, dataset: DatasetInput, dir: string, pipelines: readonly IngestPipelineConfig[]): DatasetConfig {
  const at = `datasets.${name}`;
  const ingested = dataset.source.ingest !== undefined ? ingestedSource(at, dataset, pipelines) : undefined;
  const http = dataset.source.http !== undefined ? httpSource(at, dataset) : undefined;
  if (!ingested && !http && (dataset.source.format === undefined || dataset.source.path === undefined)) {
    throw new InvalidInputError(
      `${at}.source: give format and path (the delivery's files), http: {url: ...} (a JSON API asked one day at a time), or ingest: <pipeline>.<namespace> (events collected by lakeswap serve)`,
    );
  }
  if (!ingested && dataset.columns === undefined) throw new InvalidInputError(`${at}.columns: declare the delivery's columns, e.g. columns: {order_id: BIGINT, order_ts: TIMESTAMP}`);
  const columns = ingested ? ingested.columns : resolveColumns(dataset.columns ?? {}, `${at}.columns`);
  const names = columns.map((c) => c.name);
  // An http source's one partition key is its contract key, whose value is the day asked for: the sync fills in
  // which file holds which day (the expression here is never evaluated).
  const partition = ingested
    ? ingested.partition
    : http
      ? [{ key: http.key, expression: "NULL" }]
      : Object.entries(dataset.partition).map(([key, expression]) => ({ key, expression }));
  if (partition.length === 0 && dataset.write === "partition_replace") {
    throw new InvalidInputError(
      `${at}.partition: declare at least one partition key, e.g. day: strftime(order_ts, '%Y-%m-%d'); or, for a table that is replaced as a whole, write: replace (without partition)`,
    );
  }
  if (partition.length > 0 && dataset.write === "replace") {
    throw new InvalidInputError(`${at}.partition: write: replace makes the whole table one unit, replaced by each delivery: remove partition (or use write: partition_replace to replace the delivery's partitions)`);
  }
  for (const { key } of partition) {
    wrapAt(`${at}.partition.${key.slice(0, 40)}`, () => assertPartitionKey(key));
    if (names.includes(key)) throw new InvalidInputError(`${at}.partition.${key}: '${key}' is also a column; a partition key's value comes from the path, so name it differently`);
  }
  const window = lookbackWindow(at, dataset, partition.map((p) => p.key), http?.key);
  const signature = dataset.signature ?? {};
  if (signature.columns && signature.ignore) {
    throw new InvalidInputError(`${at}.signature: give either columns or ignore, not both`);
  }
  for (const [key, list] of [["columns", signature.columns], ["ignore", signature.ignore]] as const) {
    for (const column of list ?? []) {
      if (!names.includes(column)) throw new InvalidInputError(`${at}.signature.${key}: unknown column '${column}'${didYouMean(column, names)}`);
    }
  }
  const signatureColumns = signature.columns ?? names.filter((n) => !(signature.ignore ?? []).includes(n));
  if (signatureColumns.length === 0) throw new InvalidInputError(`${at}.signature: it leaves no column to sign`);
  const upsert = resolveUpsert(dataset, columns, at);

  const layerNames = ["raw"];
  const keysByLayer = new Map<string, readonly string[]>([["raw", partition.map((p) => p.key)]]);
  const layers = dataset.layers.map((layer, index): LayerConfig => {
    const where = `${at}.layers[${index}]`;
    if (layerNames.includes(layer.name)) throw new InvalidInputError(`${where}.name: layer '${layer.name}' is declared twice (or is 'raw')`);
    if (layer.write === "append" || layer.write === "upsert") {
      throw new InvalidInputError(
        `${where}.write: '${layer.write}' applies to a dataset's raw table, where deliveries arrive; a derived layer is rebuilt from its inputs ` +
          `(partition_replace, or replace for a whole table), so that a rerun gives the same rows. Declare write: ${layer.write} on the dataset`,
      );
    }
    if (layer.write === "replace" && (layer.partition_keys?.length || layer.inputs?.map)) {
      throw new InvalidInputError(`${where}: write: replace builds the whole table as one unit from every upstream partition: remove partition_keys and inputs.map`);
    }
    const from = layer.inputs?.from ?? layerNames.at(-1)!;
    const fromKeys = keysByLayer.get(from);
    if (!fromKeys) throw new InvalidInputError(`${where}.inputs.from: no earlier layer '${from}'${didYouMean(from, layerNames)}`);
    const keys = layer.write === "replace" ? [] : (layer.partition_keys ?? (layer.inputs?.map ? Object.keys(layer.inputs.map) : fromKeys));
    if (keys.length === 0 && layer.write !== "replace") {
      throw new InvalidInputError(`${where}.partition_keys: the layer it is built from ('${from}') has no partition keys; declare partition_keys with inputs.map, or write: replace (the whole table as one unit)`);
    }
    const map = layer.inputs?.map ?? Object.fromEntries(keys.map((key) => [key, key]));
    const mapped = Object.keys(map);
    if (mapped.length !== keys.length || keys.some((k) => !mapped.includes(k))) {
      throw new InvalidInputError(`${where}.inputs.map: map each partition key (${keys.join(", ")}) to an expression over the upstream keys (${fromKeys.join(", ")})`);
    }
    for (const key of keys) wrapAt(`${where}.partition_keys`, () => assertPartitionKey(key));
    const sqlPath = path.resolve(dir, layer.sql);
    if (!existsSync(sqlPath)) throw new InvalidInputError(`${where}.sql: file '${layer.sql}' does not exist (looked at ${sqlPath})`);
    const sqlBytes = readFileSync(sqlPath);
    const layerColumns = resolveColumns(layer.columns, `${where}.columns`);
    for (const key of keys) {
      if (layerColumns.some((c) => c.name === key)) {
        throw new InvalidInputError(`${where}.columns.${key}: '${key}' is a partition key of this layer; its value comes from the path, so leave it out of the columns`);
      }
    }
    layerNames.push(layer.name);
    keysByLayer.set(layer.name, keys);
    return {
      name: layer.name,
      table: layer.table ?? `${name}_${layer.name}`,
      sqlPath,
      sql: sqlBytes.toString("utf8"),
      fingerprint: transformFingerprint(sqlBytes),
      columns: layerColumns,
      partitionKeys: keys,
      from,
      inputMap: keys.map((key) => ({ key, expression: map[key] as string })),
      lookups: [...new Set(layer.inputs?.tables ?? [])],
      compression: layer.compression,
      sinks: resolveSinks(layer.sinks, [...layerColumns, ...keys.map((key) => ({ name: key, type: "VARCHAR" }))], `${where}.sinks`, undefined),
    };
  });
  return {
    name,
    // Relative to the config file; resolved here, so core never resolves paths. An ingested dataset reads no files.
    source: {
      format: dataset.source.format ?? "jsonl",
      path: dataset.source.path !== undefined ? path.resolve(dir, dataset.source.path) : "",
      header: dataset.source.header,
      delimiter: dataset.source.delimiter,
    },
    ...(ingested ? { ingested: { pipeline: ingested.pipeline, namespace: ingested.namespace } } : {}),
    ...(http ? { http: http.source } : {}),
    ...(window ? { window } : {}),
    table: ingested?.namespace ?? dataset.table ?? `${name}_raw`,
    columns,
    partition,
    signatureColumns,
    deadLetter: dataset.dead_letter,
    compression: dataset.compression,
    write: dataset.write,
    upsert,
    layers,
    // The raw layer of an upsert dataset carries its delete flag: a soft delete in the target sets it true.
    sinks: resolveSinks(dataset.sinks, [...columns, ...partition.map((p) => ({ name: p.key, type: "VARCHAR" }))], `${at}.sinks`, upsert?.deleteFlag),
  };
}

/**
 * `source: {ingest: <pipeline>.<namespace>}`: the namespace's columns (and the extra column that keeps unknown fields)
 * and time bucketing are the raw layer's; what only a file delivery has (format, path, columns, partition, a write
 * mode, dead letters) is refused, naming where it is declared instead.
 */
function ingestedSource(at: string, dataset: DatasetInput, pipelines: readonly IngestPipelineConfig[]): {
  pipeline: string;
  namespace: string;
  columns: PipelineColumn[];
  partition: { key: string; expression: string }[];
} {
  const [pipelineName, namespaceName] = (dataset.source.ingest as string).split(".") as [string, string];
  const pipeline = pipelines.find((p) => p.name === pipelineName);
  if (!pipeline) {
    const known = pipelines.map((p) => p.name);
    throw new InvalidInputError(`${at}.source.ingest: no pipeline '${pipelineName}'${didYouMean(pipelineName, known)}; pipelines: ${known.join(", ") || "none (declare pipelines.<name>)"}`);
  }
  const ns = pipeline.namespaces.find((n) => n.name === namespaceName);
  if (!ns) {
    const known = pipeline.namespaces.map((n) => n.name);
    throw new InvalidInputError(`${at}.source.ingest: pipeline '${pipelineName}' has no namespace '${namespaceName}'${didYouMean(namespaceName, known)}; its namespaces: ${known.join(", ")}`);
  }
  const fileOnly: [string, boolean][] = [
    ["source.format", dataset.source.format !== undefined],
    ["source.path", dataset.source.path !== undefined],
    ["columns", dataset.columns !== undefined],
    ["partition", Object.keys(dataset.partition).length > 0],
    ["dead_letter", dataset.dead_letter !== undefined],
    ["signature", dataset.signature !== undefined],
  ];
  for (const [key, given] of fileOnly) {
    if (given) throw new InvalidInputError(`${at}.${key}: an ingested dataset takes its columns, partitions and dead letters from pipelines.${pipelineName}.namespaces.${namespaceName}: remove ${key}`);
  }
  if (dataset.write !== "partition_replace") throw new InvalidInputError(`${at}.write: an ingested table is appended to by the collector; remove write (its layers are built with partition_replace)`);
  if (dataset.table !== undefined && dataset.table !== ns.name) throw new InvalidInputError(`${at}.table: the raw table of an ingested dataset is the namespace's table, '${ns.name}': remove table`);
  const columns = [...ns.columns];
  if (ns.unknownFields === "keep") columns.push({ name: ns.extraColumn, type: "VARCHAR", nullable: true });
  return { pipeline: pipelineName, namespace: namespaceName, columns, partition: ns.time.partition.map((p) => ({ ...p })) };
}

/** `source.http`, checked: what only a file delivery has is refused, and the contract key is the one partition key. */
function httpSource(at: string, dataset: DatasetInput): { source: HttpSource; key: string } {
  const http = dataset.source.http!;
  for (const [key, given] of [["format", dataset.source.format], ["path", dataset.source.path], ["ingest", dataset.source.ingest]] as const) {
    if (given !== undefined) throw new InvalidInputError(`${at}.source.${key}: an http source is fetched, not read from files: remove ${key} (or http)`);
  }
  const key = dataset.source.contract ?? "date";
  if (Object.keys(dataset.partition).length > 0) {
    throw new InvalidInputError(
      `${at}.partition: an http source is partitioned by its contract key, '${key}', whose value is the day it was asked for: remove partition (name the key with source.contract)`,
    );
  }
  if (dataset.write !== "partition_replace") {
    throw new InvalidInputError(`${at}.write: an http source replaces each day it fetches (partition_replace); remove write: ${dataset.write}`);
  }
  if (dataset.source.replace_partition === false) {
    throw new InvalidInputError(
      `${at}.source.replace_partition: an http source always replaces the days it fetches (a new run swapped in, never appended twice): remove replace_partition: false`,
    );
  }
  if (!/^https?:\/\//i.test(http.url)) throw new InvalidInputError(`${at}.source.http.url: '${printable(http.url, 200)}' is not an http:// or https:// URL`);
  const placeholders = [...http.url.matchAll(/\{\{\s*([^}]*?)\s*\}\}/g)].map((m) => m[1] ?? "");
  const unknown = placeholders.find((name) => name !== key);
  if (unknown !== undefined) {
    throw new InvalidInputError(`${at}.source.http.url: unknown placeholder {{ ${printable(unknown, 40)} }}; the URL takes {{ ${key} }} (the day asked for, YYYY-MM-DD)`);
  }
  if (placeholders.length === 0) {
    throw new InvalidInputError(`${at}.source.http.url: the URL does not say which day to return: put {{ ${key} }} where the day goes, e.g. ?date={{ ${key} }}`);
  }
  const pagination = http.pagination;
  const source: HttpSource = {
    concurrency: http.concurrency,
    spec: {
      url: http.url,
      headers: http.headers,
      rows: http.rows,
      fields: http.fields,
      pagination: pagination === undefined ? undefined : "next_url" in pagination ? { kind: "next_url", path: pagination.next_url } : { kind: "cursor", path: pagination.cursor, param: pagination.param },
      requestsPerSecond: http.requests_per_second,
      timeoutMs: parseDuration(http.timeout, `${at}.source.http.timeout`),
      maxAttempts: http.max_attempts,
      maxPages: http.max_pages,
    },
  };
  // The paths and header names are checked now, not at the first fetch.
  wrapAt(`${at}.source.http`, () => assertHttpSourceSpec(source.spec));
  return { key, source };
}

/**
 * The days a sync takes from the source: every http source has a window (today only, without lookback_days); a
 * file source has one with lookback_days, over the partition key `contract` names (default: its only one).
 */
function lookbackWindow(at: string, dataset: DatasetInput, keys: readonly string[], httpKey: string | undefined): LookbackWindow | undefined {
  const source = dataset.source;
  const windowed = httpKey !== undefined || source.lookback_days !== undefined;
  if (!windowed) {
    for (const [key, given] of [["timezone", source.timezone !== undefined], ["allow_empty", source.allow_empty], ["contract", source.contract !== undefined]] as const) {
      if (given) throw new InvalidInputError(`${at}.source.${key}: applies to http sources and to sources with lookback_days: remove it, or add lookback_days`);
    }
    if (source.replace_partition === true && dataset.write !== "partition_replace") {
      throw new InvalidInputError(`${at}.source.replace_partition: true replaces each delivered partition, which contradicts write: ${dataset.write}: keep one of them`);
    }
    return undefined;
  }
  if (httpKey === undefined) {
    if (source.ingest !== undefined) throw new InvalidInputError(`${at}.source.lookback_days: an ingested table is appended to by the collector: remove lookback_days`);
    if (source.replace_partition === false || dataset.write !== "partition_replace") {
      throw new InvalidInputError(
        `${at}.source.lookback_days: a lookback window replaces the days it takes again: it needs replace_partition: true (write: partition_replace), not ${source.replace_partition === false ? "replace_partition: false" : `write: ${dataset.write}`}`,
      );
    }
  }
  const key = httpKey ?? source.contract ?? (keys.length === 1 ? keys[0]! : undefined);
  if (key === undefined) {
    throw new InvalidInputError(`${at}.source.contract: the dataset has partition keys ${keys.join(", ")}: name the one that holds the day (YYYY-MM-DD), e.g. contract: ${keys[0]}`);
  }
  if (!keys.includes(key)) throw new InvalidInputError(`${at}.source.contract: '${key}'${didYouMean(key, [...keys])} is not a partition key of the dataset (${keys.join(", ")})`);
  const timezone = source.timezone ?? "UTC";
  try {
    new Intl.DateTimeFormat("en-CA", { timeZone: timezone });
  } catch {
    throw new InvalidInputError(`${at}.source.timezone: '${printable(timezone, 60)}' is not a time zone; use an IANA name such as UTC, Europe/Berlin or America/Los_Angeles`);
  }
  return { key, lookbackDays: source.lookback_days ?? 0, timezone, allowEmpty: source.allow_empty };
}

/** Checks the keys of `write: upsert` (and that they are not given to another mode). */
function resolveUpsert(dataset: DatasetInput, columns: readonly PipelineColumn[], at: string): UpsertConfig | undefined {
  const names = columns.map((c) => c.name);
  if (dataset.write !== "upsert") {
    for (const key of ["primary_key", "order_by", "delete_flag"] as const) {
      if (dataset[key] !== undefined) throw new InvalidInputError(`${at}.${key}: applies to write: upsert only (this dataset writes ${dataset.write})`);
    }
    return undefined;
  }
  const primaryKey = dataset.primary_key;
  if (!primaryKey) throw new InvalidInputError(`${at}.primary_key: write: upsert merges rows by key: declare primary_key: [column, ...] (columns of this dataset)`);
  for (const [key, list] of [["primary_key", primaryKey], ["order_by", dataset.order_by ?? []], ["delete_flag", dataset.delete_flag ? [dataset.delete_flag] : []]] as const) {
    for (const column of list) {
      if (!names.includes(column)) throw new InvalidInputError(`${at}.${key}: unknown column '${column}'${didYouMean(column, names)}; the dataset's columns are ${names.join(", ")}`);
    }
    if (new Set(list).size !== list.length) throw new InvalidInputError(`${at}.${key}: a column is named twice (${list.join(", ")})`);
  }
  const flag = columns.find((c) => c.name === dataset.delete_flag);
  if (flag && flag.type !== "BOOLEAN") {
    throw new InvalidInputError(`${at}.delete_flag: column '${flag.name}' is ${flag.type}; a delete flag is a BOOLEAN column (true removes the key)`);
  }
  if (flag && primaryKey.includes(flag.name)) throw new InvalidInputError(`${at}.delete_flag: '${flag.name}' is part of the primary key`);
  return { primaryKey, orderBy: dataset.order_by ?? [], deleteFlag: dataset.delete_flag };
}

type SinksInput = z.output<typeof sinksSchema>;

const SQL_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

/** Checks a layer's `sinks:` against its columns and resolves `${VAR}` in the URL from the environment. */
function resolveSinks(sinks: SinksInput, layerColumns: readonly Column[], at: string, deleteFlag: string | undefined, env: NodeJS.ProcessEnv = process.env): SinkSpec[] {
  const postgres = sinks?.postgres;
  if (!postgres) return [];
  const where = `${at}.postgres`;
  const columns = layerColumns.map((c) => c.name);
  for (const column of layerColumns) {
    if (postgresColumnType(column.type) === undefined) {
      throw new InvalidInputError(`${where}: column '${column.name}' is ${column.type}, which the PostgreSQL sink does not send; leave it out of this layer or cast it in its SQL`);
    }
  }
  const url = interpolateEnvironment(postgres.url, env, `${where}.url`);
  const maskedUrl = maskUrl(url);
  if (!/^postgres(ql)?:\/\//.test(url)) {
    throw new InvalidInputError(`${where}.url: '${printable(maskedUrl)}' is not a PostgreSQL URL: use postgres://user@host:5432/database (or postgresql://)`);
  }
  checkUrlAuthority(url, maskedUrl, `${where}.url`);
  try {
    new URL(url);
  } catch {
    throw new InvalidInputError(`${where}.url: '${printable(maskedUrl)}' is not a valid URL: use postgres://user:password@host:5432/database (percent-encode special characters in the password)`);
  }
  const parts = postgres.table.split(".");
  const [schema, table] = parts.length === 1 ? ["public", parts[0]!] : [parts[0]!, parts[1]!];
  if (parts.length > 2 || !SQL_NAME.test(schema) || !SQL_NAME.test(table)) {
    throw new InvalidInputError(
      `${where}.table: '${printable(postgres.table)}' is not a table name: use schema.table of lowercase letters, digits and '_' (letter or '_' first, at most 63 characters each), e.g. analytics.orders_monthly`,
    );
  }
  if (table === "lakeswap_state") throw new InvalidInputError(`${where}.table: lakeswap_state is the sink's own state table; choose another name`);
  const primaryKey = postgres.primary_key ?? [];
  for (const column of primaryKey) {
    if (!columns.includes(column)) {
      throw new InvalidInputError(`${where}.primary_key: unknown column '${column}'${didYouMean(column, columns)}; the layer's columns are ${columns.join(", ")}`);
    }
  }
  if (new Set(primaryKey).size !== primaryKey.length) throw new InvalidInputError(`${where}.primary_key: a column is named twice (${primaryKey.join(", ")})`);
  if (postgres.mode === "upsert" && primaryKey.length === 0) {
    throw new InvalidInputError(`${where}.primary_key: upsert merges rows by key: declare primary_key: [column, ...] (columns of this layer)`);
  }
  if (postgres.hard_delete && postgres.mode !== "upsert") {
    throw new InvalidInputError(`${where}.hard_delete: applies to mode: upsert only (partition_replace always deletes what the lake no longer holds)`);
  }
  const flag = postgres.mode === "upsert" && deleteFlag !== undefined && columns.includes(deleteFlag) ? { deleteFlag } : {};
  return [{ kind: "postgres", url, maskedUrl, schema, table, mode: postgres.mode, primaryKey, hardDelete: postgres.hard_delete, ...flag }];
}

/** Replaces each `${VAR}` with the environment variable's value; a variable that is not set is an error naming it. */
function interpolateEnvironment(value: string, env: NodeJS.ProcessEnv, at: string): string {
  return value.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_match, name: string) => {
    const found = env[name];
    if (found === undefined || found === "") throw new InvalidInputError(`${at}: environment variable ${name} is not set (the config reads it as \${${name}}); export ${name}=postgres://user:password@host:5432/database`);
    return found;
  });
}

/**
 * A URL as messages show it: everything between the user name and the last `@` replaced by `***` (so a
 * password holding an unencoded `@`, `/` or `?` is hidden whole), and a `password=` parameter too.
 */
export function maskUrl(url: string): string {
  const scheme = /^[a-z][a-z0-9+.-]*:\/\//i.exec(url)?.[0];
  const at = url.lastIndexOf("@");
  let masked = url;
  if (scheme && at > scheme.length) {
    const userInfo = url.slice(scheme.length, at);
    const colon = userInfo.indexOf(":");
    const user = colon >= 0 ? userInfo.slice(0, colon) : userInfo;
    // A user name holding '/', '?' or '#' is no user name but a mangled password: hide it all.
    const shown = /[/?#]/.test(user) ? "***" : colon >= 0 ? `${user}:***` : user;
    masked = `${scheme}${shown}${url.slice(at)}`;
  }
  return masked.replace(/([?&]password=)[^&#]*/gi, "$1***");
}

/**
 * Refuses a URL whose user or password holds an unencoded `@`, `/`, `?` or `#`: URL parsers end the host at
 * the first `/`, `?` or `#`, so part of the password would be read as the host (and printed in a DNS error).
 */
function checkUrlAuthority(url: string, maskedUrl: string, at: string): void {
  const rest = url.slice(url.indexOf("://") + 3);
  const authorityEnd = rest.search(/[/?#]/);
  const authority = authorityEnd < 0 ? rest : rest.slice(0, authorityEnd);
  const signs = rest.split("@").length - 1;
  const inAuthority = authority.split("@").length - 1;
  if (signs > 1 || signs !== inAuthority) {
    throw new InvalidInputError(
      `${at}: '${printable(maskedUrl)}' cannot be read unambiguously: its user or password holds an '@', '/', '?' or '#' that is not percent-encoded; ` +
        "percent-encode them in the password ('@' as %40, '/' as %2F, '?' as %3F, '#' as %23, ':' as %3A), e.g. with encodeURIComponent",
    );
  }
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

function resolveColumns(columns: Readonly<Record<string, z.output<typeof columnType>>>, at: string): PipelineColumn[] {
  const entries = Object.entries(columns);
  if (entries.length === 0) throw new InvalidInputError(`${at}: declare at least one column`);
  return entries.map(([name, spec]) => {
    const type = typeof spec === "string" ? spec : spec.type;
    const nullable = typeof spec === "string" ? true : spec.nullable;
    try {
      return { name, type: normalizeColumnType(name, type), nullable };
    } catch (error) {
      throw new InvalidInputError(`${at}.${name}: ${(error as Error).message}`);
    }
  });
}

/**
 * Formats zod issues: each starts with its key path, names what was expected and quotes the value
 * given (`concurrency: expected a number, got "four"`); unknown keys get a did-you-mean.
 */
function formatIssues(issues: readonly z.core.$ZodIssue[], raw: unknown): string {
  return issues.map((issue) => formatIssue(issue, raw, [])).join("; ");
}

function formatIssue(issue: z.core.$ZodIssue, raw: unknown, basePath: readonly PropertyKey[]): string {
  const fullPath = [...basePath, ...issue.path];
  const where = keyPath(fullPath);
  const value = valueAt(raw, fullPath);
  switch (issue.code) {
    case "unrecognized_keys": {
      const known = knownKeys(pipelineSchema, fullPath);
      return issue.keys
        .map((key) => `${where === "(top level)" ? key : `${where}.${key}`}: unknown key${didYouMean(key, known)}${known.length > 0 ? ` (allowed: ${known.join(", ")})` : ""}`)
        .join("; ");
    }
    case "invalid_type":
      return `${where}: expected ${typeName(issue.expected)}, got ${shown(value)}`;
    case "invalid_union": {
      // Each alternative failed: name what each one expected at this key.
      const expected = [...new Set(issue.errors.map((branch) => {
        const first = branch.find((inner) => inner.path.length === 0 && inner.code === "invalid_type");
        return first && first.code === "invalid_type" ? typeName(first.expected) : undefined;
      }))].filter((name): name is string => name !== undefined);
      if (expected.length === issue.errors.length) return `${where}: expected ${expected.join(" or ")}, got ${shown(value)}`;
      // An alternative of the right shape failed inside: report that one's issues.
      const inner = issue.errors.find((branch) => !branch.some((i) => i.path.length === 0 && i.code === "invalid_type")) ?? issue.errors[0] ?? [];
      return inner.map((i) => formatIssue(i, raw, fullPath)).join("; ");
    }
    case "invalid_key": {
      const key = String(fullPath.at(-1));
      const parent = keyPath(fullPath.slice(0, -1));
      return `${parent}: key '${key}' is not allowed: ${issue.issues.map((i) => i.message).join("; ")}`;
    }
    case "invalid_value": {
      const hint = typeof value === "string" ? didYouMean(value, issue.values.map(String)) : "";
      return `${where}: expected one of ${issue.values.map((v) => JSON.stringify(v)).join(", ")}, got ${shown(value)}${hint}`;
    }
    case "too_small":
    case "too_big":
    case "invalid_format":
      return `${where}: ${issue.message.replace(/^(Too big|Too small|Invalid string): /, "")}, got ${shown(value)}`;
    default:
      return `${where}: ${issue.message}, got ${shown(value)}`;
  }
}

function keyPath(parts: readonly PropertyKey[]): string {
  return parts.map((p) => (typeof p === "number" ? `[${p}]` : `.${String(p)}`)).join("").replace(/^\./, "") || "(top level)";
}

function valueAt(raw: unknown, parts: readonly PropertyKey[]): unknown {
  let current = raw;
  for (const part of parts) {
    if (current === null || typeof current !== "object") return undefined;
    current = (current as Record<PropertyKey, unknown>)[part];
  }
  return current;
}

/** A zod type name as a user reads it. */
function typeName(expected: string): string {
  const names: Record<string, string> = {
    string: "a string", number: "a number", int: "a whole number", boolean: "true or false", object: "a mapping (key: value)",
    record: "a mapping (key: value)", array: "a list", null: "null",
  };
  return names[expected] ?? expected;
}

/** A value as a message quotes it: its YAML type, and its text cut short. */
function shown(value: unknown): string {
  if (value === undefined) return "nothing";
  if (value === null) return "null (an empty value)";
  if (Array.isArray(value)) return `a list (${printable(JSON.stringify(value), 60)})`;
  if (typeof value === "object") return `a mapping (${printable(JSON.stringify(value), 60)})`;
  if (typeof value === "string") return `the string ${printable(JSON.stringify(value), 80)}`;
  return `${typeof value === "number" ? "the number" : `the ${typeof value}`} ${String(value)}`;
}

/** The keys an object schema allows at `keyPath`, for did-you-mean hints. */
function knownKeys(schema: z.ZodType, keyPath: readonly PropertyKey[]): string[] {
  let current: z.ZodType | undefined = schema;
  const unwrap = (s: z.ZodType | undefined): z.ZodType | undefined => {
    let inner = s;
    while (inner && "innerType" in (inner.def as object)) inner = (inner.def as unknown as { innerType: z.ZodType }).innerType;
    return inner;
  };
  for (const step of keyPath) {
    current = unwrap(current);
    if (!current) return [];
    const def = current.def as unknown as { type: string; valueType?: z.ZodType; element?: z.ZodType; shape?: Record<string, z.ZodType>; options?: z.ZodType[] };
    if (def.type === "object") current = (current as z.ZodObject).shape[String(step)];
    else if (def.type === "record") current = def.valueType;
    else if (def.type === "array") current = def.element;
    else if (def.type === "union") current = def.options?.find((o) => unwrap(o)?.def.type === "object");
    else return [];
  }
  current = unwrap(current);
  if (current?.def.type === "union") current = unwrap((current.def as unknown as { options: z.ZodType[] }).options.find((o) => unwrap(o)?.def.type === "object"));
  return current?.def.type === "object" ? Object.keys((current as z.ZodObject).shape) : [];
}

/** ` (did you mean 'x'?)` when a known name is close to `value`. */
export function didYouMean(value: string, known: readonly string[]): string {
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of known) {
    const distance = editDistance(value, candidate);
    if (distance < bestDistance) [best, bestDistance] = [candidate, distance];
  }
  const close = bestDistance <= Math.max(2, Math.floor(value.length / 3));
  const prefix = known.find((candidate) => candidate.startsWith(value) || value.startsWith(candidate));
  const suggestion = close ? best : prefix;
  return suggestion !== undefined ? ` (did you mean '${suggestion}'?)` : "";
}

function editDistance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i += 1) {
    let diagonal = row[0]!;
    row[0] = i;
    for (let j = 1; j <= b.length; j += 1) {
      const above = row[j]!;
      row[j] = Math.min(row[j]! + 1, row[j - 1]! + 1, diagonal + (a[i - 1] === b[j - 1] ? 0 : 1));
      diagonal = above;
    }
  }
  return row[b.length]!;
}
