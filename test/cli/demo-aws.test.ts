import { ListObjectsV2Command, S3Client } from "@aws-sdk/client-s3";
import { afterEach, describe, expect, it } from "vitest";
import { awsCliEnv, startAwsServices, type AwsServices } from "../support/lake-fixture.js";
import { runMain } from "../support/main-cli.js";

let services: AwsServices | undefined;
afterEach(async () => services?.close());

describe("lakeswap demo --aws", () => {
  it("runs the post's flow on S3, Glue and Athena: 100, 120, then 100 after rollback; teardown drops what it created", async () => {
    services = await startAwsServices();
    const env = awsCliEnv(services, {
      DEMO_BUCKET: "lake",
      DEMO_PREFIX: "partition-swap-demo",
      DEMO_DATABASE: "partition_swap_demo",
      ATHENA_WORKGROUP: "primary",
      DEMO_RESULTS_BUCKET: "results",
    });
    const result = await runMain(["demo", "--aws", "--json"], env);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    const report = JSON.parse(result.stdout) as { steps: { step: string; count?: number; runId?: string }[] };
    expect(report.steps.filter((s) => s.step === "count").map((s) => s.count)).toEqual([100, 120, 100]);
    const [run1, run2] = report.steps.filter((s) => s.step === "swap").map((s) => s.runId);
    expect(report.steps.find((s) => s.step === "rollback")?.runId).toBe(run1);
    expect(run2! > run1!).toBe(true);

    // The swaps were UNLOADs into fresh run prefixes and pointer moves in Glue, never deletes of live data.
    const unloads = services.athena.executions.filter((e) => /^\s*UNLOAD/i.test(e.query));
    expect(unloads.map((e) => e.query)).toEqual([
      expect.stringContaining(`/partition-swap-demo/demo_target/day=2026-11-01/run=${run1}/`),
      expect.stringContaining(`/partition-swap-demo/demo_target/day=2026-11-01/run=${run2}/`),
    ]);
    // Run 1 created the partition; run 2 and the rollback moved it (pointer moves go in Glue's batch calls).
    expect(services.glue.callCount("BatchCreatePartition") + services.glue.callCount("CreatePartition")).toBeGreaterThanOrEqual(1);
    expect(services.glue.callCount("BatchUpdatePartition") + services.glue.callCount("UpdatePartition")).toBeGreaterThanOrEqual(2);

    // Teardown: no database, no tables, no objects under the demo prefix.
    expect(services.glue.state.databases().map((d) => d.Name)).not.toContain("partition_swap_demo");
    const s3 = new S3Client(services.s3.clientConfig);
    const left = await s3.send(new ListObjectsV2Command({ Bucket: "lake", Prefix: "partition-swap-demo/" }));
    expect(left.Contents ?? []).toEqual([]);
  });
});
