import { describe, expect, it } from "vitest";
import { pipelineJsonSchema, type resolvePipelineConfig } from "../../src/config/pipeline-config.js";
import { resolveEdited } from "../support/pipeline-fixture.js";

describe("lakeswap.yaml", () => {
  it("resolves defaults: table names, partition keys inherited, identity inputs, signature columns", () => {
    const config = resolveEdited(() => undefined)() as ReturnType<typeof resolvePipelineConfig>;
    const orders = config.datasets[0]!;
    expect(orders.table).toBe("orders_raw");
    expect(orders.signatureColumns).toEqual(["order_id", "customer_id", "amount", "status", "order_ts"]);
    expect(orders.layers.map((l) => [l.name, l.table, l.from, l.partitionKeys.join(",")])).toEqual([
      ["stage", "orders_stage", "raw", "day"],
      ["analytics", "orders_monthly", "stage", "month"],
    ]);
    expect(orders.layers[0]!.inputMap).toEqual([{ key: "day", expression: "day" }]);
    expect(config.concurrency).toBe(3);
  });

  it.each([
    ["an unknown key, with a did-you-mean", (c: Record<string, any>) => (c.datasets.orders.sigature = {}), /^lakeswap\.yaml: datasets\.orders\.sigature: unknown key \(did you mean 'signature'\?\)/],
    ["an unknown nested key", (c: Record<string, any>) => (c.datasets.orders.source.fromat = "csv"), /datasets\.orders\.source\.fromat: unknown key \(did you mean 'format'\?\)/],
    ["an unknown layer key", (c: Record<string, any>) => (c.datasets.orders.layers[0].sqll = "x"), /datasets\.orders\.layers\[0\]\.sqll: unknown key \(did you mean 'sql'\?\)/],
    ["a bad format", (c: Record<string, any>) => (c.datasets.orders.source.format = "xml"), /datasets\.orders\.source\.format: /],
    ["a bad column type", (c: Record<string, any>) => (c.datasets.orders.columns.amount = "MONEY"), /datasets\.orders\.columns\.amount: column 'amount' has type 'MONEY'/],
    ["an unknown signature column", (c: Record<string, any>) => (c.datasets.orders.signature = { ignore: ["updated"] }), /datasets\.orders\.signature\.ignore: unknown column 'updated' \(did you mean 'updated_at'\?\)/],
    ["a missing SQL file", (c: Record<string, any>) => (c.datasets.orders.layers[0].sql = "sql/nope.sql"), /datasets\.orders\.layers\[0\]\.sql: file 'sql\/nope\.sql' does not exist/],
    ["an unknown upstream layer", (c: Record<string, any>) => (c.datasets.orders.layers[1].inputs.from = "stag"), /inputs\.from: no earlier layer 'stag' \(did you mean 'stage'\?\)/],
    ["a table name that is not an identifier", (c: Record<string, any>) => (c.datasets.orders.table = "../x"), /datasets\.orders\.table: /],
    ["two layers on one table", (c: Record<string, any>) => (c.datasets.orders.layers[1].table = "orders_stage"), /table 'orders_stage' is used by both/],
    ["a rename from a column still declared", (c: Record<string, any>) => (c.datasets.orders.columns.total = { type: "DECIMAL(10,2)", renamed_from: "amount" }), /datasets\.orders\.columns\.total\.renamed_from: 'amount' is declared as a column too; name the column's old name/],
    ["a rename from itself", (c: Record<string, any>) => (c.datasets.orders.columns.amount = { type: "DECIMAL(10,2)", renamed_from: "amount" }), /columns\.amount\.renamed_from: 'amount' is the column's own name/],
  ])("refuses %s, the message starting with the key path", (_what, edit, message) => {
    expect(resolveEdited(edit)).toThrow(message);
  });

  it("has a JSON Schema generated from the same source, with descriptions and defaults", () => {
    const schema = pipelineJsonSchema() as { properties: Record<string, any>; additionalProperties: boolean };
    expect(schema.additionalProperties).toBe(false);
    expect(schema.properties.concurrency).toMatchObject({ default: 4, description: expect.stringContaining("partitions") });
    const dataset = schema.properties.datasets.additionalProperties;
    expect(Object.keys(dataset.properties)).toEqual(
      expect.arrayContaining(["source", "columns", "partition", "signature", "dead_letter", "layers"]),
    );
  });
});

describe("the AWS target in lakeswap.yaml", () => {
  const sink = (athena: Record<string, unknown>) => (c: Record<string, any>) => {
    c.data_sinks = { warehouse: { Athena: athena } };
  };
  const complete = {
    s3_bucket: "my-output-bucket",
    s3_prefix: "warehouse/events",
    glue_database_name: "my_database",
    athena_workgroup_name: "primary",
    athena_results_s3_bucket: "my-athena-results",
    region: "us-east-1",
    catalog: "AwsDataCatalog",
  };

  it("accepts the Athena output block as the sink documents it", () => {
    const config = resolveEdited(sink(complete))() as ReturnType<typeof resolvePipelineConfig>;
    expect(config.aws).toMatchObject({
      bucket: "my-output-bucket",
      prefix: "warehouse/events",
      database: "my_database",
      workgroup: "primary",
      resultsLocation: "s3://my-athena-results/lakeswap-query-results/",
      region: "us-east-1",
      catalog: "AwsDataCatalog",
    });
  });

  it("says so when athena_results_s3_bucket is an s3:// URI", () => {
    expect(resolveEdited(sink({ ...complete, athena_results_s3_bucket: "s3://my-athena-results/prefix" }))).toThrow(
      /data_sinks\.warehouse\.Athena\.athena_results_s3_bucket: 's3:\/\/my-athena-results\/prefix' is an s3:\/\/ URI, but this field takes a bucket name: use 'my-athena-results'/,
    );
  });

  it("fills missing fields from the environment equivalents, and names what is still missing", () => {
    const saved = { ...process.env };
    try {
      process.env.DATA_OUTPUT_S3_BUCKET = "env-bucket";
      process.env.SCHEMA_OUTPUT_GLUE_DATABASE_NAME = "env_db";
      delete process.env.DATA_OUTPUT_ATHENA_WORKGROUP_NAME;
      expect(resolveEdited(sink({}))).toThrow(/needs athena_workgroup_name \(DATA_OUTPUT_ATHENA_WORKGROUP_NAME\)/);
      process.env.DATA_OUTPUT_ATHENA_WORKGROUP_NAME = "wg";
      const config = resolveEdited(sink({ s3_prefix: "p" }))() as ReturnType<typeof resolvePipelineConfig>;
      expect(config.aws).toMatchObject({ bucket: "env-bucket", database: "env_db", workgroup: "wg", prefix: "p" });
    } finally {
      // Restored in place: a replaced process.env no longer reaches the real environment (os.tmpdir(), child processes' defaults).
      for (const name of ["DATA_OUTPUT_S3_BUCKET", "SCHEMA_OUTPUT_GLUE_DATABASE_NAME", "DATA_OUTPUT_ATHENA_WORKGROUP_NAME"]) {
        if (saved[name] === undefined) delete process.env[name];
        else process.env[name] = saved[name];
      }
    }
  });

  it("refuses unknown keys in the block with a did-you-mean", () => {
    expect(resolveEdited(sink({ ...complete, s3_bucktet: "x" }))).toThrow(/data_sinks\.warehouse\.Athena\.s3_bucktet: unknown key \(did you mean 's3_bucket'\?\)/);
  });
});

describe("lakeswap.yaml type errors name the key, the expected type and the value", () => {
  it.each([
    ["a string for a number", (c: Record<string, any>) => (c.concurrency = "four"), /^lakeswap\.yaml: concurrency: expected a number, got the string "four"$/],
    ["a number for a column type", (c: Record<string, any>) => (c.datasets.orders.columns.amount = 5), /^lakeswap\.yaml: datasets\.orders\.columns\.amount: expected a string or a mapping \(key: value\), got the number 5$/],
    ["a string for nullable", (c: Record<string, any>) => (c.datasets.orders.columns.amount = { type: "DOUBLE", nullable: "no" }), /^lakeswap\.yaml: datasets\.orders\.columns\.amount\.nullable: expected true or false, got the string "no"$/],
    ["a bad format", (c: Record<string, any>) => (c.datasets.orders.source.format = "xml"), /^lakeswap\.yaml: datasets\.orders\.source\.format: expected one of "csv", "jsonl", "parquet", got the string "xml"$/],
    ["a list for a mapping", (c: Record<string, any>) => (c.datasets = [1]), /^lakeswap\.yaml: datasets: expected a mapping \(key: value\), got a list \(\[1\]\)$/],
    ["a number out of range", (c: Record<string, any>) => (c.concurrency = 1000), /^lakeswap\.yaml: concurrency: expected number to be <=64, got the number 1000$/],
  ])("%s", (_name, edit, message) => {
    const resolve = resolveEdited(edit);
    expect(resolve).toThrow(message);
    expect(resolve).not.toThrow(/Invalid input/);
  });

  it("says to quote a type that YAML split at its comma in a {...} mapping", async () => {
    const { parse } = await import("yaml");
    // `{amount: DECIMAL(10,2)}` reads as {amount: "DECIMAL(10", "2)": null}.
    const split = (parse("{amount: DECIMAL(10,2), status: VARCHAR}") as Record<string, unknown>);
    expect(resolveEdited((c) => (c.datasets.orders.columns = split))).toThrow(
      /datasets\.orders\.columns: key '2\)' is not allowed: .*\(a type with a comma inside \{\.\.\.\} is split there by YAML: quote it, e\.g\. \{amount: "DECIMAL\(10,2\)"\}\)/,
    );
  });

  it("refuses a partition key too long for a file name with a value of 128 characters", () => {
    const key = `k${"x".repeat(121)}`;
    expect(resolveEdited((c) => (c.datasets.orders.partition = { [key]: "strftime(order_ts, '%Y-%m-%d')" }))).toThrow(
      /datasets\.orders\.partition\.kx+: partition key 'kx+…?' is 122 characters long: use at most 121/,
    );
  });
});
