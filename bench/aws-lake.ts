import type { AwsTarget } from "../src/config/aws-config.js";
import { awsCliEnv, startAwsServices, type AwsServices } from "../test/support/lake-fixture.js";

/*
 * AWS, emulated: S3 (s3rver behind the conditional-write proxy), the Glue
 * emulator and the Athena emulator of test/support, started in the benchmark's
 * process; the `lakeswap` processes reach them over HTTP with the real AWS SDK,
 * selected by environment variables as a user selects AWS
 * (DATA_OUTPUT_S3_BUCKET and friends, src/config/aws-config.ts).
 * Figures here are context: an emulator on the same two cpus is not AWS.
 */

/** API calls by service and operation. */
export interface ApiCalls {
  readonly glue: Readonly<Record<string, number>>;
  readonly s3: Readonly<Record<string, number>>;
  /** Queries started on the Athena emulator (its own Glue and S3 reads are then in `glue` and `s3` too). */
  readonly athenaQueries: number;
  readonly total: number;
}

/** Glue calls that write partitions (the "write calls"). */
export const GLUE_PARTITION_WRITES = ["BatchCreatePartition", "BatchUpdatePartition", "CreatePartition", "UpdatePartition"] as const;

/** Glue calls that list (the "listings": one per page). */
export const GLUE_LISTINGS = ["GetPartitions", "GetTables"] as const;

/** The sum of some operations' counts. */
export function sumOf(calls: Readonly<Record<string, number>>, operations: readonly string[]): number {
  return operations.reduce((sum, operation) => sum + (calls[operation] ?? 0), 0);
}

/** The emulated services of one benchmark run, and the lakes made in them. */
export class BenchAws {
  private lakes = 0;

  private constructor(readonly services: AwsServices) {}

  static async start(): Promise<BenchAws> {
    // The in-process SDK clients (month-to-date replay) take credentials from the default chain.
    process.env.AWS_ACCESS_KEY_ID ??= "test";
    process.env.AWS_SECRET_ACCESS_KEY ??= "test";
    process.env.AWS_EC2_METADATA_DISABLED = "true";
    return new BenchAws(await startAwsServices());
  }

  /** A fresh, empty lake: its own S3 prefix and Glue database; the target for in-process use and the environment of a `lakeswap` process. */
  lake(name: string): { readonly target: AwsTarget; readonly env: Readonly<Record<string, string>> } {
    const id = `${name.replace(/[^a-z0-9]/g, "_")}_${++this.lakes}`;
    const target: AwsTarget = {
      bucket: "lake",
      prefix: `bench/${id}`,
      database: `bench_${id}`,
      workgroup: "primary",
      resultsLocation: "s3://results/lakeswap-query-results/",
      region: "us-east-1",
      endpoint: this.services.s3.endpoint,
      glueEndpoint: this.services.glue.endpoint,
      athenaEndpoint: this.services.athena.endpoint,
    };
    const env = awsCliEnv(this.services, {
      DATA_OUTPUT_S3_BUCKET: target.bucket,
      DATA_OUTPUT_S3_PREFIX: target.prefix,
      SCHEMA_OUTPUT_GLUE_DATABASE_NAME: target.database,
      DATA_OUTPUT_ATHENA_WORKGROUP_NAME: target.workgroup,
      DATA_OUTPUT_ATHENA_RESULTS_S3_BUCKET: "results",
    });
    return { target, env };
  }

  /** Runs `work` and counts the API calls the emulators answered meanwhile (run nothing else against them at the same time). */
  async counting<T>(work: () => Promise<T>): Promise<{ readonly result: T; readonly calls: ApiCalls }> {
    const glueBefore = this.services.glue.calls.length;
    const s3Before = this.services.s3.requests.entries.length;
    const athenaBefore = this.services.athena.executions.length;
    const result = await work();
    const glue = tally(this.services.glue.calls.slice(glueBefore).map((c) => c.operation));
    const s3 = tally(this.services.s3.requests.entries.slice(s3Before).map((r) => r.operation));
    const athenaQueries = this.services.athena.executions.length - athenaBefore;
    const total = sumOf(glue, Object.keys(glue)) + sumOf(s3, Object.keys(s3)) + athenaQueries;
    return { result, calls: { glue, s3, athenaQueries, total } };
  }

  async close(): Promise<void> {
    await this.services.close();
  }
}

function tally(operations: readonly string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const operation of operations) counts[operation] = (counts[operation] ?? 0) + 1;
  return counts;
}
