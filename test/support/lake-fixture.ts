import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { promises as fs, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { Lake, LakeSettings } from "../../src/lake/lake.js";
import type { AwsTarget } from "../../src/config/aws-config.js";
import { openAwsLake, openEmbeddedLake } from "../../src/open/open-lake.js";
import { startAwsServices, type AwsEndpoints, type AwsServices } from "./aws-services.js";
import { bundleOf } from "./bundles.js";
import { childEnvironment } from "./process-env.js";

export { startAwsServices, type AwsEndpoints, type AwsServices };

const here = path.dirname(fileURLToPath(import.meta.url));
export const REPO_ROOT = path.resolve(here, "../..");

/** A fresh temporary folder, removed by `cleanup`. */
export function tempDir(prefix = "lakeswap-test-"): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** The rows of `sql` over the embedded lake in `lakeDir`, opened for the query and closed after it. */
export async function queryEmbeddedLake(lakeDir: string, sql: string): Promise<readonly (readonly unknown[])[]> {
  const lake = await openEmbeddedLake(lakeDir);
  try {
    return (await lake.query(sql)).rows;
  } finally {
    await lake.close();
  }
}

let inputFiles = 0;

/** Writes a delivery file into `dir`, named `name` or `in-<n>.csv` (n unique in this process); returns its path. */
export function inputFile(dir: string, text: string | Uint8Array, name = `in-${inputFiles++}.csv`): string {
  const file = path.join(dir, name);
  writeFileSync(file, text);
  return file;
}

/** A backend the contract suites run against (embedded today; AWS adapters join in later). */
export interface TestBackend {
  readonly name: string;
  /** Opens the lake in-process. */
  open(settings?: LakeSettings): Promise<Lake>;
  /** Arguments and environment that point a child `lakeswap` process at the same lake. */
  readonly cliArgs: readonly string[];
  readonly cliEnv: Readonly<Record<string, string>>;
  cleanup(): Promise<void>;
}

/** A fresh embedded lake in a temporary folder. */
export async function embeddedBackend(): Promise<TestBackend & { readonly lakeDir: string }> {
  const { dir, cleanup } = tempDir();
  const lakeDir = path.join(dir, "lake");
  return {
    name: "local",
    lakeDir,
    open: (settings) => openEmbeddedLake(lakeDir, settings),
    cliArgs: ["--lake", lakeDir],
    cliEnv: {},
    cleanup: async () => cleanup(),
  };
}

/**
 * A fresh AWS lake, in an S3 prefix and a Glue database of its own, on the run's shared S3, Glue and Athena
 * emulators (test/support/global-services.ts; on a set of its own when run without it). The real AWS SDK clients
 * talk to them over HTTP. A test that reads the services' request logs or state, or injects failures, takes
 * `ownAwsBackend` instead.
 */
export async function awsBackend(): Promise<TestBackend & { readonly services: AwsEndpoints; readonly target: AwsTarget }> {
  const services = await sharedAwsServices();
  return awsBackendOn(services, () => services.close());
}

/**
 * The run's shared AWS emulators (close does nothing), or a set of their own when run without the global setup: for
 * tests that name their own S3 prefix and Glue database, unique in the run, and only talk to the services.
 */
export async function sharedAwsServices(): Promise<AwsEndpoints & { close(): Promise<void> }> {
  // Imported here: it imports vitest, and child processes import this file too.
  const { sharedAwsEndpoints } = await import("./shared-services.js");
  const shared = await sharedAwsEndpoints();
  return shared ? { ...shared, close: async () => undefined } : startAwsServices();
}

/** A fresh AWS lake on emulators of its own (S3 behind the conditional-write proxy, Glue, Athena), stopped by `cleanup`. */
export async function ownAwsBackend(): Promise<TestBackend & { readonly services: AwsServices; readonly target: AwsTarget }> {
  const services = await startAwsServices();
  return awsBackendOn(services, () => services.close());
}

function awsBackendOn<Services extends AwsEndpoints>(
  services: Services,
  cleanup: () => Promise<void>,
): TestBackend & { readonly services: Services; readonly target: AwsTarget } {
  // The in-process SDK clients take credentials from the default chain: give it some, and no instance metadata.
  process.env.AWS_ACCESS_KEY_ID ??= "test";
  process.env.AWS_SECRET_ACCESS_KEY ??= "test";
  process.env.AWS_EC2_METADATA_DISABLED = "true";
  process.env.LAKESWAP_ATHENA_POLL_MS ??= ATHENA_POLL_MS;
  // Long enough that no two lakes of a run (on shared services: of both workers) share a prefix or a database.
  const suffix = randomBytes(6).toString("hex");
  const target: AwsTarget = {
    bucket: "lake",
    prefix: `tests/${suffix}`,
    database: `lakeswap_test_${suffix}`,
    workgroup: "primary",
    resultsLocation: "s3://results/lakeswap/",
    region: "us-east-1",
    endpoint: services.s3.endpoint,
    glueEndpoint: services.glue.endpoint,
    athenaEndpoint: services.athena.endpoint,
  };
  return {
    name: "aws",
    services,
    target,
    open: (settings) => openAwsLake(target, settings),
    cliArgs: [],
    cliEnv: awsCliEnv(services, { DATA_OUTPUT_S3_BUCKET: target.bucket, DATA_OUTPUT_S3_PREFIX: target.prefix, SCHEMA_OUTPUT_GLUE_DATABASE_NAME: target.database, DATA_OUTPUT_ATHENA_WORKGROUP_NAME: target.workgroup, DATA_OUTPUT_ATHENA_RESULTS_S3_BUCKET: "results" }),
    cleanup,
  };
}

/**
 * The first pause between a lake's polls of the emulated Athena (src/open/open-lake.ts; Athena's own default is 250 ms,
 * which, with its growth, left a lake idle most of the time its emulated queries took).
 */
const ATHENA_POLL_MS = process.env.LAKESWAP_ATHENA_POLL_MS ?? "20";

/** Environment that points a child `lakeswap` process at emulated AWS services. */
export function awsCliEnv(services: AwsEndpoints, extra: Record<string, string> = {}): Record<string, string> {
  return {
    LAKESWAP_ATHENA_POLL_MS: ATHENA_POLL_MS,
    AWS_ACCESS_KEY_ID: "test",
    AWS_SECRET_ACCESS_KEY: "test",
    AWS_REGION: "us-east-1",
    AWS_EC2_METADATA_DISABLED: "true",
    AWS_ENDPOINT_URL_GLUE: services.glue.endpoint,
    AWS_ENDPOINT_URL_ATHENA: services.athena.endpoint,
    LAKESWAP_S3_ENDPOINT: services.s3.endpoint,
    ...extra,
  };
}

/**
 * A new lake holding what `source` (a backend of BACKEND_FACTORIES) holds now, for a test to go on from a state that
 * several tests reach the same way: embedded, a copy of the lake folder (its pointers are relative links, and no file
 * of it names the folder); AWS, a copy of the S3 prefix's objects and the Glue database's tables and partitions, in a
 * prefix and database of its own on the same services, their locations moved to the new prefix. Nothing may write to
 * `source` meanwhile. Removing the clone leaves `source` as it is.
 */
export async function cloneBackend(source: TestBackend): Promise<TestBackend> {
  if (source.name === "local") {
    const clone = await embeddedBackend();
    await fs.cp((source as TestBackend & { lakeDir: string }).lakeDir, clone.lakeDir, { recursive: true, verbatimSymlinks: true, preserveTimestamps: true });
    return clone;
  }
  const { services, target: from } = source as TestBackend & { services: AwsEndpoints; target: AwsTarget };
  const clone = awsBackendOn(services, async () => undefined);
  await copyAwsLake(services, from, clone.target);
  return clone;
}

async function copyAwsLake(services: AwsEndpoints, from: AwsTarget, to: AwsTarget): Promise<void> {
  const { CopyObjectCommand, ListObjectsV2Command, S3Client } = await import("@aws-sdk/client-s3");
  const { BatchCreatePartitionCommand, CreateDatabaseCommand, CreateTableCommand, GetDatabaseCommand, GetPartitionsCommand, GetTablesCommand, GlueClient } =
    await import("@aws-sdk/client-glue");
  const s3 = new S3Client(services.s3.clientConfig);
  const glue = new GlueClient(services.glue.clientConfig);
  const [fromUri, toUri] = [`s3://${from.bucket}/${from.prefix}/`, `s3://${to.bucket}/${to.prefix}/`];
  // Every string of a Glue entry that names the source's prefix (locations, and any parameter) names the clone's.
  const moved = <T>(entry: T): T => JSON.parse(JSON.stringify(entry).split(fromUri).join(toUri)) as T;
  try {
    let token: string | undefined;
    do {
      const page = await s3.send(new ListObjectsV2Command({ Bucket: from.bucket, Prefix: `${from.prefix}/`, ContinuationToken: token }));
      // Copied inside S3 (CopyObject keeps the content type and metadata): no object's bytes pass through this process.
      await Promise.all(
        (page.Contents ?? []).map(async ({ Key }) => {
          const key = `${to.prefix}/${Key!.slice(from.prefix.length + 1)}`;
          await s3.send(new CopyObjectCommand({ Bucket: to.bucket, Key: key, CopySource: encodeURI(`${from.bucket}/${Key!}`) }));
        }),
      );
      token = page.NextContinuationToken;
    } while (token);

    const database = (await glue.send(new GetDatabaseCommand({ Name: from.database }))).Database!;
    await glue.send(new CreateDatabaseCommand({ DatabaseInput: { Name: to.database, Description: database.Description, Parameters: database.Parameters } }));
    let tablesToken: string | undefined;
    do {
      const tables = await glue.send(new GetTablesCommand({ DatabaseName: from.database, NextToken: tablesToken }));
      for (const table of tables.TableList ?? []) {
        const { Name, Description, StorageDescriptor, PartitionKeys, TableType, Parameters } = moved(table);
        await glue.send(new CreateTableCommand({ DatabaseName: to.database, TableInput: { Name, Description, StorageDescriptor, PartitionKeys, TableType, Parameters } }));
        let partitionsToken: string | undefined;
        do {
          const partitions = await glue.send(new GetPartitionsCommand({ DatabaseName: from.database, TableName: Name, NextToken: partitionsToken }));
          const inputs = (partitions.Partitions ?? []).map((p) => moved({ Values: p.Values, StorageDescriptor: p.StorageDescriptor, Parameters: p.Parameters }));
          for (let start = 0; start < inputs.length; start += 100) {
            const created = await glue.send(
              new BatchCreatePartitionCommand({ DatabaseName: to.database, TableName: Name, PartitionInputList: inputs.slice(start, start + 100) }),
            );
            if ((created.Errors ?? []).length > 0) throw new Error(`cloning ${Name}'s partitions: ${JSON.stringify(created.Errors)}`);
          }
          partitionsToken = partitions.NextToken;
        } while (partitionsToken);
      }
      tablesToken = tables.NextToken;
    } while (tablesToken);
  } finally {
    s3.destroy();
    glue.destroy();
  }
}

/** The backends selected by BACKENDS (comma-separated; default: every backend available here). */
export const BACKEND_FACTORIES: Record<string, () => Promise<TestBackend>> = { local: embeddedBackend, aws: awsBackend };

/** As BACKEND_FACTORIES, with AWS services of the backend's own (`ownAwsBackend`): for tests that read or steer them. */
export const OWN_BACKEND_FACTORIES: Record<string, () => Promise<TestBackend>> = { local: embeddedBackend, aws: ownAwsBackend };

export function selectedBackends(): string[] {
  const wanted = (process.env.BACKENDS ?? Object.keys(BACKEND_FACTORIES).join(",")).split(",").map((b) => b.trim());
  return wanted.filter((name) => name in BACKEND_FACTORIES);
}

/** Result of one CLI run in a child process. */
export interface CliResult {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs `lakeswap <args>` in a child process (this run's bundle of the sources), in the repository's folder or `options.cwd`. */
export function runCli(args: readonly string[], env: Record<string, string> = {}, options: { readonly cwd?: string } = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawnCli(args, env, options);
    let stdout = "";
    let stderr = "";
    child.stdout?.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    child.on("error", reject);
    child.on("close", (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}

/** Starts `lakeswap <args>` as a child process without waiting for it. */
export function spawnCli(args: readonly string[], env: Record<string, string> = {}, options: { readonly cwd?: string } = {}): ChildProcess {
  return spawn(process.execPath, [bundleOf("run-cli.ts"), ...args], {
    cwd: options.cwd ?? REPO_ROOT,
    env: childEnvironment({ NODE_NO_WARNINGS: "1", ...env }),
    stdio: ["ignore", "pipe", "pipe"],
  });
}
