import { tmpdir } from "node:os";
import path from "node:path";
import { DuckDBInstance } from "@duckdb/node-api";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { parseByteSize } from "../../src/config/ingest-config.js";
import { pipelineJsonSchema, pipelineSchema, resolvePipelineConfig, type PipelineConfig } from "../../src/config/pipeline-config.js";
import { resolveEdited } from "../support/pipeline-fixture.js";

// Issue 12, item 1: the Athena output sink page's YAML, lakeswap's datasets, or both, in one lakeswap.yaml.

/** The page's first snippet, verbatim (../shared/seeds/002_e4b1c2e108c67cef.txt, "Configuration"). */
const PAGE_DATA_SINKS = `data_sinks:
  warehouse:
    Athena:
      s3_bucket: my-output-bucket
      s3_prefix: warehouse/events
      glue_database_name: my_database
      athena_workgroup_name: primary
      athena_results_s3_bucket: my-athena-results
      region: us-east-1
      catalog: AwsDataCatalog
`;

/** The page's second snippet, verbatim ("Schema sink pairing"). */
const PAGE_PAIRING = `pipelines:
  events:
    data_sink: data_sinks.landing
    schema_sink: schema_sinks.catalog

schema_sinks:
  catalog:
    Glue:
      glue_database_name: my_database
`;

/** A config file that is never read: ingest keys name no file, so only its folder matters. */
const FILE = path.join(tmpdir(), "lakeswap-ingest-config", "lakeswap.yaml");
const DIR = path.dirname(FILE);

function resolveYaml(yaml: string, env: NodeJS.ProcessEnv = {}): PipelineConfig {
  return resolvePipelineConfig(parse(yaml), FILE, env);
}

/** The page's two snippets in one file, with the `landing` data sink the pairing snippet refers to. */
function pageWithLanding(): Record<string, any> {
  const config = { ...parse(PAGE_DATA_SINKS), ...parse(PAGE_PAIRING) };
  config.data_sinks.landing = { Athena: { ...config.data_sinks.warehouse.Athena, s3_prefix: "landing/events" } };
  return config;
}

/** One pipeline writing to the embedded lake, with `edit` applied to its namespace `pageviews`. */
function namespaceConfig(edit: (namespace: Record<string, any>, config: Record<string, any>) => void = () => {}): Record<string, any> {
  const config = parse(`
pipelines:
  events:
    namespaces:
      pageviews:
        columns: {event_id: {type: VARCHAR, nullable: false}, user_id: VARCHAR, url: VARCHAR, ts: {type: TIMESTAMPTZ, nullable: false}}
        time: {field: ts}
`);
  edit(config.pipelines.events.namespaces.pageviews, config);
  return config;
}

const resolveObject = (config: unknown, env: NodeJS.ProcessEnv = {}) => () => resolvePipelineConfig(config, FILE, env);

describe("the Athena output page's YAML in lakeswap.yaml", () => {
  it("idempotency_window and idempotency_max_keys: 24 h and 100,000 by default, as set, and a clear refusal of a window of 0 or a count that is not a positive integer", () => {
    expect(resolveObject(namespaceConfig())().ingest[0]?.idempotency).toEqual({ windowMs: 24 * 3_600_000, maxKeys: 100_000 });
    const set = namespaceConfig((_ns, config) => Object.assign(config.pipelines.events, { idempotency_window: "90m", idempotency_max_keys: 500 }));
    expect(resolveObject(set)().ingest[0]?.idempotency).toEqual({ windowMs: 90 * 60_000, maxKeys: 500 });
    const zero = namespaceConfig((_ns, config) => Object.assign(config.pipelines.events, { idempotency_window: "0s" }));
    expect(resolveObject(zero)).toThrow(/pipelines\.events\.idempotency_window: '0s' would forget every key at once: use a duration above 0, e\.g\. 24h/);
    const fraction = namespaceConfig((_ns, config) => Object.assign(config.pipelines.events, { idempotency_max_keys: 2.5 }));
    expect(resolveObject(fraction)).toThrow(/idempotency_max_keys/);
  });

  it("compact: {after, target_size}: absent by default (the collector compacts nothing), 128MiB files unless set, and a clear refusal of an after of 0", () => {
    const compact = (value: unknown) => namespaceConfig((_ns, config) => Object.assign(config.pipelines.events, { compact: value }));
    expect(resolveObject(namespaceConfig())().ingest[0]?.compact).toBeUndefined();
    expect(resolveObject(compact({ after: "2h" }))().ingest[0]?.compact).toEqual({ afterMs: 2 * 3_600_000, fileBytes: 128 * 1024 * 1024 });
    expect(resolveObject(compact({ after: "30m", target_size: "64MiB" }))().ingest[0]?.compact).toEqual({ afterMs: 30 * 60_000, fileBytes: 64 * 1024 * 1024 });
    expect(resolveObject(compact({ after: "0s" }))).toThrow(/pipelines\.events\.compact\.after: '0s' would compact days still receiving events: use a duration above 0, e\.g\. 2h/);
    expect(resolveObject(compact({ after: "2h", target_size: "big" }))).toThrow(/pipelines\.events\.compact\.target_size: 'big' is not a size/);
    expect(resolveObject(compact({ target_size: "1GiB" }))).toThrow(/compact\.after/);
  });

  it("refuses renamed_from on a namespace's column: an ingested table's columns are only ever added", () => {
    const renamed = namespaceConfig((ns) => (ns.columns.page = { type: "VARCHAR", renamed_from: "old_page" }));
    expect(resolveObject(renamed)).toThrow(/pipelines\.events\.namespaces\.pageviews\.columns\.page\.renamed_from: an ingested table's columns are only ever added/);
  });

  it("dedupe: {field, window, max_ids} of a namespace: 1 h and 1,000,000 by default; the field must be a declared column", () => {
    const dedupe = (value: unknown) => namespaceConfig((ns) => Object.assign(ns, { dedupe: value }));
    expect(resolveObject(dedupe({ field: "event_id" }))().ingest[0]?.namespaces[0]?.dedupe).toEqual({ field: "event_id", windowMs: 3_600_000, maxIds: 1_000_000 });
    expect(resolveObject(dedupe({ field: "event_id", window: "10m", max_ids: 50 }))().ingest[0]?.namespaces[0]?.dedupe).toEqual({ field: "event_id", windowMs: 600_000, maxIds: 50 });
    expect(resolveObject(namespaceConfig())().ingest[0]?.namespaces[0]?.dedupe).toBeUndefined();
    expect(resolveObject(dedupe({ field: "event_id_" }))).toThrow(/pipelines\.events\.namespaces\.pageviews\.dedupe\.field: 'event_id_' is not a declared column \(did you mean 'event_id'\?\)/);
    expect(resolveObject(dedupe({ field: "event_id", window: "0s" }))).toThrow(/dedupe\.window: '0s' would remember no id: use a duration above 0, e\.g\. 1h/);
  });

  it("parses every key of both snippets, separate or combined", () => {
    for (const yaml of [PAGE_DATA_SINKS, PAGE_PAIRING, `${PAGE_DATA_SINKS}\n${PAGE_PAIRING}`]) {
      expect(pipelineSchema.safeParse(parse(yaml)).error).toBeUndefined();
    }
  });

  it("refuses the combined snippets only for the sink they leave undefined (the pairing names data_sinks.landing, the page defines warehouse)", () => {
    expect(() => resolveYaml(`${PAGE_DATA_SINKS}\n${PAGE_PAIRING}`)).toThrow(
      "lakeswap.yaml: pipelines.events.data_sink: data_sinks.landing is not defined; defined data sinks: warehouse " +
        "(declare data_sinks.landing: {Athena: {...}} or {Local: {path: ./lake}}, or name one of these)",
    );
    expect(() => resolveYaml(PAGE_PAIRING)).toThrow(/pipelines\.events\.data_sink: data_sinks\.landing is not defined; no data sinks are defined/);
  });

  it("accepts the page's YAML without datasets once landing is a data sink: an Athena sink paired with the Glue schema sink", () => {
    const config = resolveObject(pageWithLanding())();
    expect(config.datasets).toEqual([]);
    expect(config.ingest).toHaveLength(1);
    const events = config.ingest[0]!;
    expect(events.name).toBe("events");
    expect(events.dataSink).toMatchObject({
      kind: "athena",
      name: "landing",
      aws: { bucket: "my-output-bucket", prefix: "landing/events", database: "my_database", workgroup: "primary", region: "us-east-1", catalog: "AwsDataCatalog" },
    });
    expect(events.schemaSink).toEqual({ name: "catalog", database: "my_database" });
    expect(events.deadletterSink).toBe(events.dataSink);
    expect(events.namespaces).toEqual([]);
    expect(events.wal).toEqual({ dir: path.join(DIR, ".lakeswap-wal", "events"), segmentMaxBytes: 64 * 2 ** 20, segmentMaxAgeMs: 60_000, maxBytes: 2 ** 30 });
    // Two data sinks and no datasets: lakeswap's other commands (query, ls) run on the one the pipelines write to.
    expect(config.aws).toMatchObject({ prefix: "landing/events" });
  });

  it("accepts the page's first snippet with datasets: the datasets run on the warehouse, as before", () => {
    const config = resolveEdited((c) => Object.assign(c, parse(PAGE_DATA_SINKS)))();
    expect(config.aws).toMatchObject({ bucket: "my-output-bucket", prefix: "warehouse/events", database: "my_database" });
    expect(config.datasets.map((d) => d.name)).toEqual(["orders"]);
    expect(config.ingest).toEqual([]);
  });

  it("accepts both snippets with datasets: target: picks the sink the datasets run on", () => {
    const config = resolveEdited((c) => Object.assign(c, pageWithLanding(), { target: "data_sinks.warehouse" }))();
    expect(config.aws).toMatchObject({ prefix: "warehouse/events" });
    expect(config.ingest[0]!.dataSink).toMatchObject({ name: "landing", aws: { prefix: "landing/events" } });
    expect(resolveEdited((c) => Object.assign(c, pageWithLanding()))).toThrow(/^lakeswap\.yaml: target: name the data sink the datasets run on \(one of warehouse, landing\)$/);
    expect(resolveEdited((c) => Object.assign(c, pageWithLanding(), { target: "wharehouse" }))).toThrow(
      /target: 'wharehouse' is not a data sink \(did you mean 'warehouse'\?\); defined data sinks: warehouse, landing/,
    );
  });

  it("says what to add when the file has neither datasets nor pipelines", () => {
    expect(() => resolveYaml(PAGE_DATA_SINKS)).toThrow(
      "lakeswap.yaml: nothing to run: add datasets: (files landed into a raw table and built into layers, lakeswap sync) or pipelines: (events collected by lakeswap serve and lakeswap ingest), or both",
    );
  });
});

describe("a full ingest config", () => {
  const FULL = `
data_sinks:
  warehouse:
    Athena: {s3_bucket: my-output-bucket, s3_prefix: warehouse/events, glue_database_name: my_deadletters, athena_workgroup_name: primary}
schema_sinks:
  catalog:
    Glue: {glue_database_name: my_database}
pipelines:
  events:
    data_sink: data_sinks.warehouse
    schema_sink: schema_sinks.catalog
    deadletter_sink: data_sinks.warehouse
    namespaces:
      pageviews:
        columns: {event_id: {type: VARCHAR, nullable: false}, user_id: VARCHAR, url: VARCHAR, ts: {type: TIMESTAMPTZ, nullable: false}}
        unknown_fields: keep
        time: {field: ts}
      ga4_daily:
        columns: {event_name: VARCHAR, event_count: BIGINT, event_date: {type: DATE, nullable: false}}
        unknown_fields: deadletter
        time: {field: event_date, partition: date}
    wal: {dir: ./wal/events, segment_max_bytes: 64MiB, segment_max_age: 60s, max_bytes: 1GiB}
`;

  it("resolves every key", () => {
    const [events] = resolveYaml(FULL).ingest;
    expect(events).toMatchObject({
      name: "events",
      dataSink: { kind: "athena", name: "warehouse", aws: { bucket: "my-output-bucket", prefix: "warehouse/events", database: "my_deadletters" } },
      schemaSink: { name: "catalog", database: "my_database" },
      deadletterSink: { kind: "athena", name: "warehouse" },
      wal: { dir: path.join(DIR, "wal", "events"), segmentMaxBytes: 67_108_864, segmentMaxAgeMs: 60_000, maxBytes: 1_073_741_824 },
    });
    expect(events!.namespaces.map((n) => [n.name, n.unknownFields, n.time.partition.map((p) => p.key).join("/")])).toEqual([
      ["pageviews", "keep", "p_year/p_month/p_day"],
      ["ga4_daily", "deadletter", "date"],
    ]);
  });
});

describe("environment equivalents", () => {
  const env = {
    DATA_OUTPUT_S3_BUCKET: "env-bucket",
    DATA_OUTPUT_S3_PREFIX: "env/prefix",
    SCHEMA_OUTPUT_GLUE_DATABASE_NAME: "env_db",
    DATA_OUTPUT_ATHENA_WORKGROUP_NAME: "env_wg",
    DATA_OUTPUT_ATHENA_RESULTS_S3_BUCKET: "env-results",
  };
  const bare = "data_sinks:\n  landing:\n    Athena: {}\nschema_sinks:\n  catalog:\n    Glue: {}\npipelines:\n  events:\n    data_sink: landing\n    schema_sink: catalog\n";

  it("fill every field the blocks leave out, the Glue schema sink's database included", () => {
    const events = resolveYaml(bare, env).ingest[0]!;
    expect(events.dataSink).toMatchObject({
      kind: "athena",
      aws: { bucket: "env-bucket", prefix: "env/prefix", database: "env_db", workgroup: "env_wg", resultsLocation: "s3://env-results/lakeswap-query-results/" },
    });
    expect(events.schemaSink).toEqual({ name: "catalog", database: "env_db" });
  });

  it("give way to the block's own fields", () => {
    const config = parse(bare);
    config.data_sinks.landing.Athena = { s3_bucket: "yaml-bucket" };
    config.schema_sinks.catalog.Glue = { glue_database_name: "yaml_db" };
    const events = resolveObject(config, env)();
    expect(events.ingest[0]!.dataSink).toMatchObject({ aws: { bucket: "yaml-bucket", prefix: "env/prefix", database: "env_db" } });
    expect(events.ingest[0]!.schemaSink).toEqual({ name: "catalog", database: "yaml_db" });
  });

  it("name what is still missing", () => {
    expect(() => resolveYaml(bare.replace("Athena: {}", "Athena: {glue_database_name: deadletters}"), { DATA_OUTPUT_S3_BUCKET: "b", DATA_OUTPUT_ATHENA_WORKGROUP_NAME: "wg" })).toThrow(
      /^lakeswap\.yaml: schema_sinks\.catalog\.Glue\.glue_database_name: the Glue schema sink needs a database: set glue_database_name, or SCHEMA_OUTPUT_GLUE_DATABASE_NAME$/,
    );
    expect(() => resolveYaml(bare, { SCHEMA_OUTPUT_GLUE_DATABASE_NAME: "db" })).toThrow(
      /^lakeswap\.yaml: data_sinks\.landing\.Athena: the AWS target needs s3_bucket \(DATA_OUTPUT_S3_BUCKET\), athena_workgroup_name \(DATA_OUTPUT_ATHENA_WORKGROUP_NAME\)$/,
    );
  });
});

describe("sink references", () => {
  const sinks = parse(`
data_sinks:
  warehouse: {Athena: {s3_bucket: b, glue_database_name: warehouse_db, athena_workgroup_name: primary}}
  local: {Local: {path: ./lake}}
schema_sinks:
  catalog: {Glue: {glue_database_name: catalog_db}}
`);
  const withPipeline = (pipeline: Record<string, unknown>) => resolveObject({ ...structuredClone(sinks), pipelines: { events: pipeline } });

  it("accept data_sinks.<name> and the bare name", () => {
    const a = withPipeline({ data_sink: "data_sinks.warehouse", schema_sink: "schema_sinks.catalog", deadletter_sink: "data_sinks.local" })();
    const b = withPipeline({ data_sink: "warehouse", schema_sink: "catalog", deadletter_sink: "local" })();
    expect(a.ingest).toEqual(b.ingest);
    expect(a.ingest[0]!.deadletterSink).toEqual({ kind: "local", name: "local", path: path.join(DIR, "lake") });
  });

  it.each([
    ["an undefined data sink", { data_sink: "data_sinks.landing" }, "pipelines.events.data_sink: data_sinks.landing is not defined; defined data sinks: warehouse, local"],
    ["an undefined schema sink", { data_sink: "warehouse", schema_sink: "schema_sinks.glue" }, "pipelines.events.schema_sink: schema_sinks.glue is not defined; defined schema sinks: catalog"],
    ["a misspelt dead-letter sink", { data_sink: "warehouse", deadletter_sink: "data_sinks.warehose" }, "pipelines.events.deadletter_sink: data_sinks.warehose is not defined (did you mean 'warehouse'?); defined data sinks: warehouse, local"],
    ["a schema sink given as a data sink", { data_sink: "schema_sinks.catalog" }, "pipelines.events.data_sink: 'schema_sinks.catalog' is a schema sink, but this key takes a data sink: write data_sinks.<name> (defined data sinks: warehouse, local)"],
    ["a reference of another kind", { data_sink: "buckets.warehouse" }, "pipelines.events.data_sink: 'buckets.warehouse' is not a data sink reference: write data_sinks.<name>"],
  ])("refuse %s, naming the defined sinks", (_what, pipeline, message) => {
    expect(withPipeline(pipeline)).toThrow(`lakeswap.yaml: ${message}`);
  });

  it("write a pipeline without data_sink where the datasets run: the only data sink, or target:; with several and no target, ask", () => {
    const only = resolveObject({ data_sinks: { warehouse: structuredClone(sinks.data_sinks.warehouse) }, pipelines: { events: {} } })();
    expect(only.ingest[0]!.dataSink).toMatchObject({ kind: "athena", name: "warehouse" });
    const targeted = resolveObject({ ...structuredClone(sinks), target: "local", pipelines: { events: {} } })();
    expect(targeted.ingest[0]!.dataSink).toMatchObject({ kind: "local", name: "local" });
    expect(withPipeline({})).toThrow(/pipelines\.events\.data_sink: several data sinks are declared \(warehouse, local\): name the one this pipeline writes to/);
  });

  it("check a schema sink's reference even where a Local data sink ignores it", () => {
    expect(withPipeline({ data_sink: "local", schema_sink: "glue" })).toThrow(/pipelines\.events\.schema_sink: schema_sinks\.glue is not defined; defined schema sinks: catalog/);
    expect(withPipeline({ data_sink: "local", schema_sink: "catalog" })().ingest[0]!.schemaSink).toBeUndefined();
  });
});

describe("misspelt keys get a did-you-mean", () => {
  it.each([
    ["schema_sink", (c: any) => (c.pipelines = { events: { data_sink: "warehouse", schema_snk: "catalog" } }), "pipelines.events.schema_snk: unknown key (did you mean 'schema_sink'?) (allowed: data_sink, schema_sink, deadletter_sink, namespaces, wal, idempotency_window, idempotency_max_keys, compact, auth_token)"],
    ["Athena", (c: any) => (c.data_sinks.warehouse = { Athna: c.data_sinks.warehouse.Athena }), "data_sinks.warehouse.Athna: unknown key (did you mean 'Athena'?) (allowed: Athena, Local)"],
    ["Glue", (c: any) => (c.schema_sinks.catalog = { glue: { glue_database_name: "x" } }), "schema_sinks.catalog.glue: unknown key (did you mean 'Glue'?) (allowed: Glue)"],
    ["glue_database_name", (c: any) => (c.schema_sinks.catalog.Glue = { glue_databse_name: "x" }), "schema_sinks.catalog.Glue.glue_databse_name: unknown key (did you mean 'glue_database_name'?)"],
    ["pipelines", (c: any) => ((c.pipeline = c.pipelines), delete c.pipelines), "pipeline: unknown key (did you mean 'pipelines'?)"],
  ])("%s", (_key, edit, message) => {
    const config = pageWithLanding();
    edit(config);
    expect(resolveObject(config)).toThrow(`lakeswap.yaml: ${message}`);
  });

  it("and a data sink with both Athena and Local, or neither, is refused", () => {
    const config = pageWithLanding();
    config.data_sinks.warehouse.Local = { path: "./lake" };
    expect(resolveObject(config)).toThrow("lakeswap.yaml: data_sinks.warehouse: give exactly one of Athena: {s3_bucket: ..., glue_database_name: ...} or Local: {path: ./lake}");
    config.data_sinks.warehouse = {};
    expect(resolveObject(config)).toThrow(/data_sinks\.warehouse: give exactly one of Athena/);
  });
});

describe("the embedded lake", () => {
  it("is the data sink of a pipeline that names none: lake: or ./lake next to the config file", () => {
    const config = resolveObject(namespaceConfig())();
    expect(config.ingest[0]!.dataSink).toEqual({ kind: "local", name: "lake", path: path.join(DIR, "lake") });
    expect(config.ingest[0]!.deadletterSink).toEqual(config.ingest[0]!.dataSink);
    expect(config.ingest[0]!.schemaSink).toBeUndefined();
    expect(config.lake).toBe(path.join(DIR, "lake"));
    expect(config.aws).toBeUndefined();
    const moved = resolveObject(namespaceConfig((_n, c) => (c.lake = "data/lake")))();
    expect(moved.ingest[0]!.dataSink).toMatchObject({ path: path.join(DIR, "data", "lake") });
    expect(moved.lake).toBe(path.join(DIR, "data", "lake"));
  });

  it("is Local: {path} relative to the config file; a single Local sink sets the datasets' lake", () => {
    const config = resolveEdited((c) => {
      c.data_sinks = { local: { Local: { path: "./shared-lake" } } };
      Object.assign(c, namespaceConfig((_n, p) => (p.pipelines.events.data_sink = "data_sinks.local")));
    })();
    expect(config.ingest[0]!.dataSink).toMatchObject({ kind: "local", name: "local" });
    expect(config.lake).toBe((config.ingest[0]!.dataSink as { path: string }).path);
    expect(config.lake).toMatch(/shared-lake$/);
    expect(config.datasets).toHaveLength(1);
  });

  it("refuses a lake: that disagrees with the Local sink the datasets run on", () => {
    expect(resolveEdited((c) => Object.assign(c, { lake: "./a", data_sinks: { local: { Local: { path: "./b" } } } }))).toThrow(
      /lake: '.*\/a' and data_sinks\.local\.Local\.path '.*\/b' name different folders, and the datasets run on one lake/,
    );
  });
});

describe("namespaces", () => {
  it("resolve columns, unknown fields kept in extra, and p_year/p_month/p_day from the time field in UTC", () => {
    const [pageviews] = resolveObject(namespaceConfig())().ingest[0]!.namespaces;
    expect(pageviews).toEqual({
      name: "pageviews",
      columns: [
        { name: "event_id", type: "VARCHAR", nullable: false },
        { name: "user_id", type: "VARCHAR", nullable: true },
        { name: "url", type: "VARCHAR", nullable: true },
        { name: "ts", type: "TIMESTAMPTZ", nullable: false },
      ],
      unknownFields: "keep",
      extraColumn: "extra",
      time: {
        field: "ts",
        partition: [
          { key: "p_year", expression: `strftime(timezone('UTC', "ts"), '%Y')` },
          { key: "p_month", expression: `strftime(timezone('UTC', "ts"), '%m')` },
          { key: "p_day", expression: `strftime(timezone('UTC', "ts"), '%d')` },
        ],
        format: "iso8601",
      },
    });
  });

  it("take a source contract key: date = 'YYYY-MM-DD'", () => {
    const config = namespaceConfig((n) => {
      n.columns = { event_name: "VARCHAR", event_date: { type: "DATE", nullable: false } };
      n.time = { field: "event_date", partition: "date" };
    });
    expect(resolveObject(config)().ingest[0]!.namespaces[0]!.time).toEqual({
      field: "event_date",
      partition: [{ key: "date", expression: `strftime("event_date", '%Y-%m-%d')` }],
      format: "iso8601",
    });
    expect(resolveObject(namespaceConfig((n) => (n.time.partition = "day")))).toThrow(
      /pipelines\.events\.namespaces\.pageviews\.time\.partition: expected one of "p_year\/p_month\/p_day", "date", got the string "day"/,
    );
  });

  it("read the time field as time.format says: iso8601 (default), epoch_ms or epoch_s (issue 25, item 15)", () => {
    const format = (edit: (n: any) => void) => resolveObject(namespaceConfig(edit))().ingest[0]!.namespaces[0]!.time.format;
    expect(format(() => undefined)).toBe("iso8601");
    expect(format((n) => (n.time.format = "epoch_ms"))).toBe("epoch_ms");
    expect(format((n) => (n.time.format = "epoch_s"))).toBe("epoch_s");
    expect(resolveObject(namespaceConfig((n) => (n.time.format = "epoch")))).toThrow(
      /pipelines\.events\.namespaces\.pageviews\.time\.format: expected one of "iso8601", "epoch_ms", "epoch_s", got the string "epoch"/,
    );
    const dated = namespaceConfig((n) => {
      n.columns = { event_name: "VARCHAR", event_date: { type: "DATE", nullable: false } };
      n.time = { field: "event_date", partition: "date", format: "epoch_s" };
    });
    expect(resolveObject(dated)).toThrow(
      "lakeswap.yaml: pipelines.events.namespaces.pageviews.time.format: epoch_s gives a time of day, which column 'event_date' (DATE) does not keep: declare it TIMESTAMPTZ",
    );
  });

  it("compute partition values in UTC whatever DuckDB's session time zone", async () => {
    const instance = await DuckDBInstance.create(":memory:");
    const connection = await instance.connect();
    try {
      await connection.run("SET TimeZone = 'Asia/Tokyo'");
      const zoned = resolveObject(namespaceConfig())().ingest[0]!.namespaces[0]!.time.partition;
      const dated = resolveObject(namespaceConfig((n) => {
        n.columns.ts = { type: "TIMESTAMP", nullable: false };
        n.time.partition = "date";
      }))().ingest[0]!.namespaces[0]!.time.partition;
      const row = async (expressions: readonly { key: string; expression: string }[], value: string) =>
        (await connection.runAndReadAll(`SELECT ${expressions.map((p) => `${p.expression} AS ${p.key}`).join(", ")} FROM (SELECT ${value} AS ts)`)).getRowObjects()[0];
      // 23:30 UTC is already the 5th in Tokyo (the plain strftime says so); the partition is still the 4th.
      const instant = "TIMESTAMPTZ '2025-03-04 23:30:00+00'";
      expect(await row([{ key: "tokyo_day", expression: `strftime("ts", '%d')` }], instant)).toEqual({ tokyo_day: "05" });
      expect(await row(zoned, instant)).toEqual({ p_year: "2025", p_month: "03", p_day: "04" });
      expect(await row(dated, "TIMESTAMP '2025-03-04 23:30:00'")).toEqual({ date: "2025-03-04" });
    } finally {
      connection.closeSync();
      instance.closeSync();
    }
  });

  it.each([
    ["a time field of a wrong type", (n: any) => (n.time.field = "url"), "time.field: column 'url' is VARCHAR; the time field must be TIMESTAMP, TIMESTAMPTZ or DATE (declare url: {type: TIMESTAMPTZ, nullable: false}: ISO 8601 text such as 2025-03-04T10:15:00Z is read into it)"],
    ["a time field that is not a column", (n: any) => (n.time.field = "tss"), "time.field: 'tss' is not a declared column (did you mean 'ts'?); the columns are event_id, user_id, url, ts"],
    ["a nullable time field", (n: any) => (n.columns.ts = "TIMESTAMPTZ"), "time.field: column 'ts' is nullable, but every event needs it to find its partition: declare ts: {type: TIMESTAMPTZ, nullable: false} (an event without it is dead-lettered)"],
    ["a missing time", (n: any) => delete n.time, "time: expected a mapping (key: value), got nothing"],
    ["a column named like a partition key", (n: any) => (n.columns.p_day = "INTEGER"), "columns.p_day: 'p_day' is a partition key of this namespace (time.partition: p_year/p_month/p_day); its value comes from the path, so name the column differently"],
    ["a column named like the date key", (n: any) => Object.assign(n, { columns: { ...n.columns, date: "DATE" }, time: { field: "ts", partition: "date" } }), "columns.date: 'date' is a partition key of this namespace (time.partition: date)"],
    ["a column named like the extra column", (n: any) => (n.columns.extra = "VARCHAR"), "columns.extra: 'extra' is the column that keeps unknown fields (unknown_fields: keep); rename the column, or set extra_column to another name"],
    ["an unknown_fields value", (n: any) => (n.unknown_fields = "dead_letter"), `unknown_fields: expected one of "keep", "deadletter", got the string "dead_letter" (did you mean 'deadletter'?)`],
    ["extra_column with deadletter", (n: any) => Object.assign(n, { unknown_fields: "deadletter", extra_column: "rest" }), "extra_column: applies to unknown_fields: keep only (this namespace dead-letters events with unknown fields)"],
    ["an extra column that is not an identifier", (n: any) => (n.extra_column = "Extra"), "extra_column: extra column 'Extra' is not allowed: use a lowercase letter first"],
  ])("refuse %s", (_what, edit, message) => {
    expect(resolveObject(namespaceConfig(edit))).toThrow(`lakeswap.yaml: pipelines.events.namespaces.pageviews.${message}`);
  });

  it("refuse a namespace name that is not an identifier, the table's name", () => {
    const config = namespaceConfig((_n, c) => (c.pipelines.events.namespaces["Page-Views"] = c.pipelines.events.namespaces.pageviews));
    expect(resolveObject(config)).toThrow("lakeswap.yaml: pipelines.events.namespaces: namespace 'Page-Views' is not allowed: use a lowercase letter first");
  });

  it("keep unknown fields in a column of another name, or dead-letter their events (then the table has no extra column)", () => {
    const renamed = resolveObject(namespaceConfig((n) => Object.assign(n, { extra_column: "payload", columns: { ...n.columns, extra: "VARCHAR" } })))();
    expect(renamed.ingest[0]!.namespaces[0]).toMatchObject({ unknownFields: "keep", extraColumn: "payload" });
    const strict = resolveObject(namespaceConfig((n) => Object.assign(n, { unknown_fields: "deadletter", columns: { ...n.columns, extra: "VARCHAR" } })))();
    expect(strict.ingest[0]!.namespaces[0]).toMatchObject({ unknownFields: "deadletter" });
    expect(strict.ingest[0]!.namespaces[0]!.columns.map((c) => c.name)).toContain("extra");
  });

  it("refuse two tables of one name in one place", () => {
    expect(resolveObject(namespaceConfig((_n, c) => (c.pipelines.events.namespaces.events = c.pipelines.events.namespaces.pageviews)))).toThrow(
      `lakeswap.yaml: pipelines.events (its dead letters): table 'events' in the lake folder ${path.join(DIR, "lake")} is also pipelines.events.namespaces.events; give each its own name (or its own sink)`,
    );
    expect(resolveEdited((c) => Object.assign(c, namespaceConfig((_n, p) => (p.pipelines.events.namespaces.orders_raw = p.pipelines.events.namespaces.pageviews))))).toThrow(
      /pipelines\.events\.namespaces\.orders_raw: table 'orders_raw' in the lake folder .* is also datasets\.orders\.raw/,
    );
  });
});

describe("the write-ahead log", () => {
  const withWal = (wal: Record<string, unknown>) => resolveObject(namespaceConfig((_n, c) => (c.pipelines.events.wal = wal)));

  it("takes sizes in bytes, KiB/MiB/GiB or KB/MB/GB, and ages such as 60s or 5m", () => {
    expect(withWal({ dir: "./wal/events", segment_max_bytes: "8MiB", segment_max_age: "5m", max_bytes: "2GiB" })().ingest[0]!.wal).toEqual({
      dir: path.join(DIR, "wal", "events"),
      segmentMaxBytes: 8 * 2 ** 20,
      segmentMaxAgeMs: 300_000,
      maxBytes: 2 * 2 ** 30,
    });
    expect(withWal({ segment_max_bytes: 4096, max_bytes: "10MB", segment_max_age: "1.5s" })().ingest[0]!.wal).toMatchObject({
      segmentMaxBytes: 4096,
      maxBytes: 10_000_000,
      segmentMaxAgeMs: 1500,
    });
    expect([parseByteSize("512KiB", "x"), parseByteSize("1 GiB", "x"), parseByteSize("64mib", "x"), parseByteSize("100", "x")]).toEqual([524_288, 2 ** 30, 64 * 2 ** 20, 100]);
  });

  it.each([
    [{ segment_max_bytes: "64 parsecs" }, "pipelines.events.wal.segment_max_bytes: '64 parsecs' is not a size: use a whole number of bytes or a number with a unit, for example 64MiB or 1GiB"],
    [{ max_bytes: 0 }, "pipelines.events.wal.max_bytes: '0' is not a size"],
    [{ segment_max_age: 60 }, "pipelines.events.wal.segment_max_age '60' is not a duration: use a number with a unit, for example 90s, 15m, 6h or 7d"],
    [{ segment_max_age: "0" }, "pipelines.events.wal.segment_max_age: '0' would seal every segment at once: use a duration above 0, e.g. 60s"],
    [{ segment_max_bytes: "1GiB", max_bytes: "512MiB" }, "pipelines.events.wal.max_bytes: 512MiB is less than segment_max_bytes (1GiB): the log could not hold one full segment"],
    [{ dir: "lake/wal" }, "pipelines.events.wal.dir: '" + path.join(DIR, "lake", "wal") + "' overlaps the lake folder '" + path.join(DIR, "lake") + "'; keep the log outside the lake"],
    [{ segment_max_size: "1MiB" }, "pipelines.events.wal.segment_max_size: unknown key (did you mean 'segment_max_age'?)"],
  ])("refuses %j", (wal, message) => {
    expect(withWal(wal)).toThrow(`lakeswap.yaml: ${message}`);
  });

  it("is one folder per pipeline", () => {
    const config = namespaceConfig((_n, c) => {
      c.pipelines.clicks = { ...structuredClone(c.pipelines.events), wal: { dir: ".lakeswap-wal/events" } };
      c.pipelines.clicks.namespaces = { click_events: c.pipelines.clicks.namespaces.pageviews };
    });
    expect(resolveObject(config)).toThrow(/pipelines\.clicks\.wal\.dir: '.*events' overlaps the log of pipeline events/);
  });
});

describe("an Athena data sink and its Glue schema sink", () => {
  const yaml = (schemaSink: string) => `
data_sinks:
  warehouse: {Athena: {s3_bucket: b, glue_database_name: deadletters, athena_workgroup_name: primary}}
schema_sinks:
  catalog: {Glue: {glue_database_name: events_db}}
pipelines:
  events:
    data_sink: data_sinks.warehouse
${schemaSink}`;

  it("puts the tables in the schema sink's database; dead letters stay in the Athena block's", () => {
    const events = resolveYaml(yaml("    schema_sink: schema_sinks.catalog")).ingest[0]!;
    expect(events.schemaSink).toEqual({ name: "catalog", database: "events_db" });
    expect(events.deadletterSink).toMatchObject({ kind: "athena", aws: { database: "deadletters" } });
  });

  it("without a schema sink, takes the Athena block's database", () => {
    expect(resolveYaml(yaml("")).ingest[0]!.schemaSink).toEqual({ name: "data_sinks.warehouse", database: "deadletters" });
  });

  it("needs the Athena block's own database (or SCHEMA_OUTPUT_GLUE_DATABASE_NAME), the dead letters' database", () => {
    const config = parse(yaml("    schema_sink: catalog"));
    delete config.data_sinks.warehouse.Athena.glue_database_name;
    expect(resolveObject(config)).toThrow("lakeswap.yaml: data_sinks.warehouse.Athena: the AWS target needs glue_database_name (SCHEMA_OUTPUT_GLUE_DATABASE_NAME)");
    expect(resolveObject(config, { SCHEMA_OUTPUT_GLUE_DATABASE_NAME: "env_db" })().ingest[0]).toMatchObject({
      dataSink: { aws: { database: "env_db" } },
      schemaSink: { name: "catalog", database: "events_db" },
    });
  });

  it("says what a schema sink without Glue needs", () => {
    const config = parse(yaml("    schema_sink: catalog"));
    config.schema_sinks.catalog = {};
    expect(resolveObject(config)).toThrow("lakeswap.yaml: schema_sinks.catalog: give Glue: {glue_database_name: my_database}");
  });

  it("refuses a schema sink database that Glue would not take", () => {
    const config = parse(yaml("    schema_sink: catalog"));
    config.schema_sinks.catalog.Glue.glue_database_name = "Events-DB";
    expect(resolveObject(config)).toThrow("lakeswap.yaml: schema_sinks.catalog.Glue.glue_database_name: 'Events-DB' is not a valid Glue database name: use lowercase letters, digits and '_'");
  });
});

describe("the JSON Schema", () => {
  it("describes data_sinks, schema_sinks and pipelines with their keys", () => {
    const schema = pipelineJsonSchema() as { properties: Record<string, any>; required?: string[] };
    expect(schema.required ?? []).not.toContain("datasets");
    expect(schema.properties.data_sinks.additionalProperties.properties.Local.description).toMatch(/embedded lake/);
    expect(schema.properties.schema_sinks.additionalProperties.properties.Glue.properties.glue_database_name.description).toMatch(/SCHEMA_OUTPUT_GLUE_DATABASE_NAME/);
    const pipeline = schema.properties.pipelines.additionalProperties;
    expect(Object.keys(pipeline.properties)).toEqual(["data_sink", "schema_sink", "deadletter_sink", "namespaces", "wal", "idempotency_window", "idempotency_max_keys", "compact", "auth_token"]);
    for (const key of Object.keys(pipeline.properties)) expect(pipeline.properties[key].description, key).toBeTruthy();
    const namespace = pipeline.properties.namespaces.additionalProperties;
    expect(namespace.properties.unknown_fields).toMatchObject({ default: "keep", enum: ["keep", "deadletter"] });
    expect(namespace.properties.time.properties.partition).toMatchObject({ default: "p_year/p_month/p_day" });
    expect(pipeline.properties.wal.properties.segment_max_bytes).toMatchObject({ default: "64MiB" });
  });
});

describe("a dataset whose raw layer is an ingested namespace (source: {ingest: ...})", () => {
  const withDataset = (dataset: Record<string, unknown>) =>
    namespaceConfig((_ns, config) => {
      config.datasets = { views: dataset };
    });

  it("takes the namespace's columns, extra column and time bucketing as its raw layer's", () => {
    const config = resolveObject(withDataset({ source: { ingest: "events.pageviews" } }))();
    const [dataset] = config.datasets;
    expect(dataset?.ingested).toEqual({ pipeline: "events", namespace: "pageviews" });
    expect(dataset?.table).toBe("pageviews");
    expect(dataset?.columns.map((c) => c.name)).toEqual(["event_id", "user_id", "url", "ts", "extra"]);
    expect(dataset?.partition.map((p) => p.key)).toEqual(["p_year", "p_month", "p_day"]);
  });

  it("names the pipelines or namespaces there are when the reference is wrong", () => {
    expect(resolveObject(withDataset({ source: { ingest: "event.pageviews" } }))).toThrow(/source\.ingest: no pipeline 'event' \(did you mean 'events'\?\); pipelines: events/);
    expect(resolveObject(withDataset({ source: { ingest: "events.pageview" } }))).toThrow(/has no namespace 'pageview' \(did you mean 'pageviews'\?\); its namespaces: pageviews/);
  });

  it("refuses what only a file delivery has, naming where it is declared instead", () => {
    expect(resolveObject(withDataset({ source: { ingest: "events.pageviews" }, columns: { a: "BIGINT" } }))).toThrow(/datasets\.views\.columns: an ingested dataset takes its columns.*remove columns/);
    expect(resolveObject(withDataset({ source: { ingest: "events.pageviews", format: "csv" } }))).toThrow(/source\.format: an ingested dataset/);
    expect(resolveObject(withDataset({ source: { ingest: "events.pageviews", fields: { url: "URL" } } }))).toThrow(/source\.fields: an ingested dataset takes its columns/);
    expect(resolveObject(withDataset({ source: { ingest: "events.pageviews" }, write: "append" }))).toThrow(/datasets\.views\.write: an ingested table is appended to by the collector/);
    expect(resolveObject(withDataset({ source: { format: "csv" }, columns: { a: "BIGINT" } }))).toThrow(/source: give format and path.*or ingest: <pipeline>\.<namespace>/);
  });
});

describe("a pipeline's auth_token", () => {
  it("is read from the environment variable it names, never written in the file", () => {
    const withToken = (token: unknown) => namespaceConfig((_n, c) => (c.pipelines.events.auth_token = token));
    expect(resolvePipelineConfig(withToken("${EVENTS_TOKEN}"), FILE, { EVENTS_TOKEN: "t0ken" }).ingest[0]!.authToken).toBe("t0ken");
    expect(resolvePipelineConfig(namespaceConfig(), FILE, {}).ingest[0]!.authToken).toBeUndefined();
    expect(() => resolvePipelineConfig(withToken("t0ken"), FILE, {})).toThrow(
      "pipelines.events.auth_token: write the name of the environment variable that holds the token, as ${VAR} (e.g. auth_token: ${EVENTS_TOKEN}), not the token itself",
    );
    expect(() => resolvePipelineConfig(withToken("${EVENTS_TOKEN}"), FILE, {})).toThrow(
      "pipelines.events.auth_token: environment variable EVENTS_TOKEN is not set (the config reads the token from ${EVENTS_TOKEN}); export EVENTS_TOKEN=<a long random token>",
    );
  });
});

