import { z } from "zod";
import { ingestSchemas } from "./ingest-config.js";

/**
 * The zod schema of \`lakeswap.yaml\`: validation, defaults and the JSON Schema come from here
 * (resolved into a checked config by ./pipeline-config.ts).
 */

/** `iceberg: true|false` of a dataset or a layer (a wrong value: "expected true or false, got ...", at its key path). */
const icebergSchema = z.boolean().default(false);

const identifier = z.string().regex(/^[a-z][a-z0-9_]{0,127}$/, "use a lowercase letter first, then lowercase letters, digits or '_'");
/** `iceberg_table`: the Glue name of the Iceberg table (AWS), beside `iceberg: true`. */
const icebergTableSchema = identifier
  .optional()
  .describe("with iceberg: true, the name of the table's Iceberg twin in Glue (AWS; default <table>_iceberg); the embedded lake keeps it in <table>/metadata/ whatever its name");

export const columnType = z.union([
  z.string().describe("the column's type, e.g. BIGINT, DECIMAL(10,2), VARCHAR, TIMESTAMP"),
  z
    .object({
      type: z.string().describe("the column's type"),
      nullable: z.boolean().default(true).describe("whether the column may be NULL; a NULL in a non-nullable column is a bad row"),
      renamed_from: identifier.optional().describe("the column's name before a rename: lakeswap sync --rebuild-schema rewrites the runs with its values under the new name"),
    })
    .strict(),
]);

const columnsSchema = z
  .record(identifier, columnType)
  .describe("declared columns, in order: name -> type, or name -> {type, nullable, renamed_from}");

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
    format: z.enum(["csv", "jsonl", "parquet"]).optional().describe("the source files' format: csv, jsonl (JSON Lines, or a JSON array of objects) or parquet"),
    path: z.string().min(1).optional().describe("one file or a glob, relative to this config file; --input FILE names one delivery instead"),
    ingest: z
      .string()
      .regex(/^[a-z][a-z0-9_]{0,127}\.[a-z][a-z0-9_]{0,127}$/, "name a namespace of a pipeline: <pipeline>.<namespace>")
      .optional()
      .describe("events collected by lakeswap serve / lakeswap ingest, <pipeline>.<namespace>: the raw layer is that namespace's ingested table (instead of format and path)"),
    header: z.boolean().default(true).describe("CSV only: the first line holds column names"),
    delimiter: z.string().length(1).default(",").describe("CSV only: the field delimiter"),
    fields: z
      .record(identifier, z.string().min(1).max(255))
      .optional()
      .describe(
        "column -> the name it has in the delivery's files: the CSV header, the JSONL field or the Parquet column it is read from, e.g. airport_name: Airport Name (default: the one named like the column; case does not matter)",
      ),
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
    partitioning: z
      .enum(["native", "index"])
      .optional()
      .describe(
        "partition_replace: how a target the sink creates is laid out; native (default): partitioned by LIST on the partition columns, each partition a table of its own swapped whole (about one COPY per replace); index: one plain table with an index on the partition columns (each replace deletes the old rows); an existing target keeps its layout",
      ),
  })
  .strict();

const sinksSchema = z
  .object({ postgres: postgresSinkSchema.optional() })
  .strict()
  .optional()
  .describe("targets outside the lake this layer's partitions are sent to after each sync (only partitions whose signature changed)");

const auditValue = z.union([z.string(), z.number(), z.boolean()]);

/** One audit of a layer's staged partitions (write-audit-publish): exactly one check, with its severity. */
const auditSchema = z
  .object({
    name: z.string().regex(/^[A-Za-z0-9_.:() -]{1,128}$/, "letters, digits, spaces and _ . : ( ) - only").optional().describe("shown in reports (default: the check and its columns, e.g. not_null(amount))"),
    severity: z.enum(["error", "warn"]).default("error").describe("error (default): a failing partition keeps its pointer where it was and the sync exits 7; warn: only reported"),
    not_null: z.array(identifier).min(1).optional().describe("no row has NULL in these columns"),
    unique: z
      .union([
        z.array(identifier).min(1),
        z
          .object({
            columns: z.array(identifier).min(1),
            scope: z.enum(["partition", "table"]).default("partition").describe("partition (default): within each partition; table: across the table as it will be after the swap (upsert keys)"),
          })
          .strict(),
      ])
      .optional()
      .describe("no two rows share these columns' values: [cols] within the partition, or {columns: [cols], scope: table}"),
    accepted_values: z.record(identifier, z.array(auditValue).min(1)).optional().describe("column -> the values it may hold (NULL is left to not_null)"),
    range: z
      .record(identifier, z.object({ min: auditValue.optional(), max: auditValue.optional() }).strict())
      .optional()
      .describe("column -> {min, max}: every non-NULL value within (bounds included), e.g. amount: {min: 0}"),
    row_count: z
      .object({
        min: z.number().int().min(0).optional().describe("the partition holds at least this many rows"),
        max: z.number().int().min(0).optional().describe("the partition holds at most this many rows"),
        max_change: z
          .string()
          .regex(/^\d+(\.\d+)?%$/, "a percentage, e.g. 50%")
          .optional()
          .describe("the rows change by at most this much against the run the build replaces, e.g. 50%"),
      })
      .strict()
      .optional(),
    freshness: z
      .object({ column: identifier, max_age: z.string().min(1).describe("e.g. 36h, 2d") })
      .strict()
      .optional()
      .describe("the newest value of the column, over the table as it will be after the swap, is at most max_age old"),
    sql: z
      .string()
      .min(1)
      .optional()
      .describe("one SELECT returning the failing rows of a partition: the layer's table name stands for the staged partition's rows, {{ key }} for its values"),
  })
  .strict();

const auditsSchema = z.array(auditSchema).default([]).describe("audits of each staged partition, run before its pointer moves (write-audit-publish)");

const WRITE_MODES = ["partition_replace", "replace", "append", "upsert"] as const;

/** How a sync writes a table: replace partitions (default), replace the whole table, append deliveries, or merge them by key. */
export type WriteMode = (typeof WRITE_MODES)[number];

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
    iceberg: icebergSchema.describe("publish this layer's table as Iceberg too: every sync that moves its pointers commits one Iceberg snapshot (embedded lake; on AWS a Glue table <table>_iceberg of type ICEBERG; default false)"),
    iceberg_table: icebergTableSchema,
    write: writeSchema,
    sinks: sinksSchema,
    audits: auditsSchema,
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
    iceberg: icebergSchema.describe("publish the raw table as Iceberg too: every sync that moves its pointers commits one Iceberg snapshot (embedded lake; on AWS a Glue table <table>_iceberg of type ICEBERG; default false)"),
    iceberg_table: icebergTableSchema,
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
    audits: auditsSchema.describe("audits of each staged partition of the raw table, run before its pointer moves (write-audit-publish)"),
    publish: z
      .enum(["per_partition", "all_or_nothing"])
      .default("per_partition")
      .describe(
        "per_partition (default): each partition that passes its audits moves; all_or_nothing: every run of the dataset's tables is staged, and the pointers move together only if every partition of every layer passed (otherwise the sync is held: lakeswap publish or discard)",
      ),
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

/** A dataset as the schema gives it (before it is resolved). */
export type DatasetInput = z.output<typeof datasetSchema>;

/** One `audits:` entry as the schema gives it. */
export type AuditInput = z.output<typeof auditSchema>;

/** A layer's \`sinks:\` as the schema gives it. */
export type SinksInput = z.output<typeof sinksSchema>;

