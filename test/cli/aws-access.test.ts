import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { awsCliEnv, ownAwsBackend, startAwsServices, type AwsServices } from "../support/lake-fixture.js";
import { runMain } from "../support/main-cli.js";
import { PipelineWorkspace, orders } from "../support/pipeline-fixture.js";

// Item 15 of issue 9: missing or refused AWS credentials get their own exit code (11) and a message that names
// the action and the resource, not exit 1 "internal".

describe("lakeswap on AWS without usable credentials", () => {
  let services: AwsServices;
  let env: Record<string, string>;

  beforeAll(async () => {
    services = await startAwsServices();
    env = awsCliEnv(services, {
      DATA_OUTPUT_S3_BUCKET: "lake",
      DATA_OUTPUT_S3_PREFIX: "access",
      SCHEMA_OUTPUT_GLUE_DATABASE_NAME: "access_db",
      DATA_OUTPUT_ATHENA_WORKGROUP_NAME: "primary",
      DATA_OUTPUT_ATHENA_RESULTS_S3_BUCKET: "results",
    });
  });
  afterAll(async () => services.close());

  it("exits 11 naming the S3 action and resource when the credentials are refused", async () => {
    const result = await runMain(["tables"], { ...env, AWS_ACCESS_KEY_ID: "denied" });
    expect(result.code, result.stderr).toBe(11);
    expect(result.stderr).toMatch(/access denied: s3:\w+ on s3:\/\/lake\/access\/_lakeswap\/\S* was refused \(AccessDenied: Access Denied\)/);
  });

  it("exits 11 saying no credentials were found when the default chain has none", async () => {
    const result = await runMain(["tables"], {
      ...env,
      AWS_ACCESS_KEY_ID: "",
      AWS_SECRET_ACCESS_KEY: "",
      AWS_PROFILE: "",
      AWS_SHARED_CREDENTIALS_FILE: "/nonexistent/credentials",
      AWS_CONFIG_FILE: "/nonexistent/config",
    });
    expect(result.code, result.stderr).toBe(11);
    expect(result.stderr).toMatch(/glue:GetDatabase on database access_db: no AWS credentials were found/);
    expect(result.stderr).toMatch(/Set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY/);
  });
});

describe("a sync whose writes S3 refuses", () => {
  it("stops with ACCESS_DENIED (exit 11) instead of reporting every partition failed, and moves nothing", async () => {
    // Services of its own: S3 refuses this test's writes.
    const backend = await ownAwsBackend();
    const workspace = new PipelineWorkspace();
    const lake = await backend.open({ graceMs: 0 });
    try {
      // The raw runs' uploads are refused, as a bucket policy without s3:PutObject on the data prefix would.
      backend.services.s3.failNext("PutObject", { status: 403, code: "AccessDenied", message: "Access Denied", key: /orders_raw\//, times: 1000 });
      const error = await workspace.pipeline(lake, { inputs: [workspace.delivery(orders(3))] }).sync().then(() => undefined, (e: unknown) => e);
      expect(error).toMatchObject({ code: "ACCESS_DENIED", exitCode: 11 });
      expect(String(error)).toMatch(/access denied: s3:PutObject on s3:\/\/lake\/\S*orders_raw\//);
      expect(await lake.pointer("orders_raw", "day=2026-11-01")).toBeUndefined();
    } finally {
      await lake.close();
      workspace.cleanup();
      await backend.cleanup();
    }
  });
});
