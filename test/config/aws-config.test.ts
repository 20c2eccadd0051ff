import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { athenaSinkSchema, resolveAwsTarget } from "../../src/config/aws-config.js";
import { defineTable } from "../../src/model/table.js";
import { openAwsLake } from "../../src/open/open-lake.js";
import { startAwsServices, type AwsServices } from "../support/lake-fixture.js";

// Item 16 of issue 9: the Glue and Athena endpoints are set in the Athena block, like S3's `endpoint`.

describe("AWS target endpoints", () => {
  let services: AwsServices;
  const saved: Record<string, string | undefined> = {};

  beforeAll(async () => {
    for (const name of ["AWS_ENDPOINT_URL_GLUE", "AWS_ENDPOINT_URL_ATHENA", "AWS_ENDPOINT_URL", "LAKESWAP_S3_ENDPOINT"]) {
      saved[name] = process.env[name];
      delete process.env[name];
    }
    process.env.AWS_ACCESS_KEY_ID ??= "test";
    process.env.AWS_SECRET_ACCESS_KEY ??= "test";
    process.env.AWS_EC2_METADATA_DISABLED = "true";
    services = await startAwsServices();
  });

  afterAll(async () => {
    await services.close();
    for (const [name, value] of Object.entries(saved)) if (value !== undefined) process.env[name] = value;
  });

  it("reads glue_endpoint and athena_endpoint from the Athena block, and the lake uses them", async () => {
    const block = athenaSinkSchema.parse({
      s3_bucket: "lake",
      s3_prefix: "endpoints",
      glue_database_name: "endpoints_db",
      athena_workgroup_name: "primary",
      athena_results_s3_bucket: "results",
      region: "us-east-1",
      endpoint: services.s3.endpoint,
      glue_endpoint: services.glue.endpoint,
      athena_endpoint: services.athena.endpoint,
    });
    const target = resolveAwsTarget(block, {}, "lakeswap.yaml: data_sinks.w.Athena");
    expect(target).toMatchObject({ endpoint: services.s3.endpoint, glueEndpoint: services.glue.endpoint, athenaEndpoint: services.athena.endpoint });

    const lake = await openAwsLake(target);
    try {
      await lake.createTable(defineTable({ name: "t", columns: [{ name: "id", type: "BIGINT" }], partitionKeys: ["day"] }));
      const result = await lake.query("SELECT 1 + 1 AS two");
      expect(result.rows).toEqual([[2]]);
      expect(services.athena.executions.map((e) => e.query)).toContain("SELECT 1 + 1 AS two");
    } finally {
      await lake.close();
    }
  });

  it("takes the S3 endpoint from LAKESWAP_S3_ENDPOINT when the block has none; the block wins", () => {
    const base = { s3_bucket: "b", glue_database_name: "d", athena_workgroup_name: "w" };
    expect(resolveAwsTarget(athenaSinkSchema.parse(base), { LAKESWAP_S3_ENDPOINT: "http://s3.internal:9000" }, "x").endpoint).toBe("http://s3.internal:9000");
    expect(
      resolveAwsTarget(athenaSinkSchema.parse({ ...base, endpoint: "http://other:9000" }), { LAKESWAP_S3_ENDPOINT: "http://s3.internal:9000" }, "x").endpoint,
    ).toBe("http://other:9000");
  });

  it("refuses an endpoint that is not a URL, naming the key", () => {
    const parsed = athenaSinkSchema.safeParse({ s3_bucket: "b", glue_endpoint: "glue.internal" });
    expect(parsed.success).toBe(false);
    expect(parsed.error?.issues[0]?.path).toEqual(["glue_endpoint"]);
  });
});
