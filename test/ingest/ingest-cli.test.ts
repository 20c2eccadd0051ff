import { existsSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { resolveAwsTarget } from "../../src/config/aws-config.js";
import { openAwsLake } from "../../src/open/open-lake.js";
import { awsCliEnv, sharedAwsServices, tempDir } from "../support/lake-fixture.js";
import { runMain } from "../support/main-cli.js";
import { freePort, spawnScript, until } from "../support/crash-kit.js";
import { PAGEVIEWS_YAML } from "../support/ingest-pipeline.js";

const CONFIG = PAGEVIEWS_YAML;

describe("lakeswap ingest with AWS named by the environment alone", () => {
  let services: Awaited<ReturnType<typeof sharedAwsServices>>;
  beforeAll(async () => {
    services = await sharedAwsServices();
    // The in-process SDK clients that read the lake back take credentials from the default chain.
    process.env.AWS_ACCESS_KEY_ID ??= "test";
    process.env.AWS_SECRET_ACCESS_KEY ??= "test";
    process.env.AWS_EC2_METADATA_DISABLED = "true";
  });
  afterAll(async () => {
    await services.close();
  });

  // With DATA_OUTPUT_S3_BUCKET and the other variables set and no data_sinks: in the config, ingest wrote to ./lake
  // without a word, while every other command ran on AWS.
  it("lands on S3 + Glue, as every other command would, and says so on stderr", async () => {
    const { dir, cleanup } = tempDir("lakeswap-ingest-env-");
    try {
      writeFileSync(path.join(dir, "lakeswap.yaml"), CONFIG);
      const events = path.join(dir, "events.ndjson");
      writeFileSync(events, ['{"event_id": "a", "ts": "2026-11-30T01:00:00Z"}', '{"event_id": "b", "ts": "2026-12-01T01:00:00Z"}'].join("\n"));
      const suffix = Math.random().toString(16).slice(2, 8);
      const env = awsCliEnv(services, {
        DATA_OUTPUT_S3_BUCKET: "lake",
        DATA_OUTPUT_S3_PREFIX: `env/${suffix}`,
        SCHEMA_OUTPUT_GLUE_DATABASE_NAME: `env_${suffix}`,
        DATA_OUTPUT_ATHENA_WORKGROUP_NAME: "primary",
        DATA_OUTPUT_ATHENA_RESULTS_S3_BUCKET: "results",
      });
      const result = await runMain(["ingest", "events", events, "-c", path.join(dir, "lakeswap.yaml"), "--json"], env);
      expect(result.stderr).toContain(`lakeswap: pipeline events runs on AWS (s3://lake/env/${suffix}, Glue database env_${suffix}), because DATA_OUTPUT_S3_BUCKET is set`);
      expect(result.code).toBe(0);
      expect(JSON.parse(result.stdout)).toMatchObject({ accepted: 2, written: 2 });
      expect(existsSync(path.join(dir, "lake"))).toBe(false);
      const lake = await openAwsLake({ ...resolveAwsTarget(undefined, env, "environment"), glueEndpoint: services.glue.endpoint, athenaEndpoint: services.athena.endpoint });
      try {
        const counted = await lake.query("SELECT event_id FROM pageviews ORDER BY event_id");
        expect(counted.rows).toEqual([["a"], ["b"]]);
      } finally {
        await lake.close();
      }
    } finally {
      cleanup();
    }
  });

  it("names the embedded lake it lands in when the environment names no AWS target", async () => {
    const { dir, cleanup } = tempDir("lakeswap-ingest-local-");
    try {
      writeFileSync(path.join(dir, "lakeswap.yaml"), CONFIG);
      const events = path.join(dir, "events.ndjson");
      writeFileSync(events, '{"event_id": "a", "ts": "2026-11-30T01:00:00Z"}\n');
      const result = await runMain(["ingest", "events", events, "-c", path.join(dir, "lakeswap.yaml")], { DATA_OUTPUT_S3_BUCKET: undefined });
      expect(result.code).toBe(0);
      expect(result.stderr).toContain(`lakeswap: pipeline events lands in the embedded lake ${path.join(dir, "lake")}`);
      expect(existsSync(path.join(dir, "lake", "pageviews"))).toBe(true);
    } finally {
      cleanup();
    }
  });
});

describe("lakeswap serve's bounds", () => {
  it("refuses a --max-connections or --max-bytes-in-flight that is not a bound, with exit 2, naming the flag", async () => {
    const { dir, cleanup } = tempDir("lakeswap-serve-flags-");
    try {
      writeFileSync(path.join(dir, "lakeswap.yaml"), CONFIG);
      const config = path.join(dir, "lakeswap.yaml");
      const connections = await runMain(["serve", "-c", config, "--port", "0", "--max-connections", "many"], { DATA_OUTPUT_S3_BUCKET: undefined });
      expect(connections.code).toBe(2);
      expect(connections.stderr).toContain("--max-connections 'many' is not a number of connections: use a whole number from 1");
      const bytes = await runMain(["serve", "-c", config, "--port", "0", "--max-bytes-in-flight", "1MiB"], { DATA_OUTPUT_S3_BUCKET: undefined });
      expect(bytes.code).toBe(2);
      expect(bytes.stderr).toContain("--max-bytes-in-flight '1MiB' is below the largest body a request may have (16MiB)");
    } finally {
      cleanup();
    }
  });
});

describe("a pipeline without namespaces", () => {
  // It started "collecting events" and answered 404 to everything.
  it("is refused by serve and ingest at start, exit 2, saying what to add", async () => {
    const { dir, cleanup } = tempDir("lakeswap-no-namespaces-");
    try {
      const config = path.join(dir, "lakeswap.yaml");
      writeFileSync(config, "pipelines:\n  events:\n    wal: {dir: ./wal}\n");
      writeFileSync(path.join(dir, "events.ndjson"), '{"a": 1}\n');
      const message = 'pipelines.events declares no namespaces, so it could take no events: add pipelines.events.namespaces.<name> with its columns and time field (README: "Event ingest")';
      for (const args of [["serve", "-c", config, "--port", "0"], ["ingest", "events", path.join(dir, "events.ndjson"), "-c", config]]) {
        const result = await runMain(args, { DATA_OUTPUT_S3_BUCKET: undefined });
        expect(result.code, args[0]).toBe(2);
        expect(result.stderr).toContain(message);
        expect(result.stderr).not.toContain("collecting");
      }
    } finally {
      cleanup();
    }
  });
});

describe("lakeswap serve's authentication", () => {
  // serve listened on every interface with no authentication; now 127.0.0.1, and a token when one is set.
  it("takes posts with LAKESWAP_INGEST_TOKEN or the pipeline's auth_token only, on 127.0.0.1 by default, and says so", async () => {
    const { dir, cleanup } = tempDir("lakeswap-serve-auth-");
    const config = path.join(dir, "lakeswap.yaml");
    writeFileSync(config, `${CONFIG}  other:\n    auth_token: \${OTHER_TOKEN}\n    namespaces:\n      clicks:\n        columns: {id: BIGINT, ts: {type: TIMESTAMPTZ, nullable: false}}\n        time: {field: ts}\n    wal: {dir: ./wal-other}\n`);
    const port = await freePort();
    const server = spawnScript("run-cli.ts", ["serve", "-c", config, "--port", String(port), "--flush-interval", "50"], { LAKESWAP_INGEST_TOKEN: "env-token", OTHER_TOKEN: "other-token", DATA_OUTPUT_S3_BUCKET: "" });
    try {
      const url = `http://127.0.0.1:${port}`;
      await until("the collector to answer", async () => (await fetch(`${url}/healthz`).then((r) => r.status === 200).catch(() => false)) || undefined);
      expect(server.stderr).toContain(`on http://127.0.0.1:${port}`);
      expect(server.stderr).not.toContain("warning");
      const post = (pipeline: string, namespace: string, token?: string) =>
        fetch(`${url}/v1/${pipeline}/${namespace}`, {
          method: "POST",
          headers: { "content-type": "application/x-ndjson", ...(token ? { authorization: `Bearer ${token}` } : {}) },
          body: '{"event_id": "a", "id": 1, "ts": "2026-11-30T01:00:00Z"}\n',
        });
      expect((await post("events", "pageviews")).status).toBe(401);
      expect((await post("events", "pageviews", "other-token")).status).toBe(401);
      expect((await post("events", "pageviews", "env-token")).status).toBe(200);
      expect((await post("other", "clicks", "env-token")).status).toBe(401);
      expect((await post("other", "clicks", "other-token")).status).toBe(200);
    } finally {
      server.process.kill("SIGTERM");
      expect((await server.exited).code).toBe(0);
      cleanup();
    }
  });
});

