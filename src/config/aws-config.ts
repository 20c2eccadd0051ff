import { z } from "zod";
import { InvalidInputError } from "../model/errors.js";

/**
 * The Athena output block, as the Athena/Glue sink documents it
 * (`data_sinks.<name>.Athena`), plus `endpoint`, `glue_endpoint` and
 * `athena_endpoint` for S3-compatible stores and private or emulated endpoints.
 */
export const athenaSinkSchema = z
  .object({
    s3_bucket: z.string().min(1).optional().describe("S3 bucket for Parquet output (env DATA_OUTPUT_S3_BUCKET)"),
    s3_prefix: z.string().optional().describe("key prefix for output objects (env DATA_OUTPUT_S3_PREFIX)"),
    glue_database_name: z.string().min(1).optional().describe("Glue database name (env SCHEMA_OUTPUT_GLUE_DATABASE_NAME)"),
    athena_workgroup_name: z.string().min(1).optional().describe("Athena workgroup for queries (env DATA_OUTPUT_ATHENA_WORKGROUP_NAME)"),
    athena_results_s3_bucket: z
      .string()
      .optional()
      .describe("S3 bucket for Athena query results, a bucket name, not an s3:// URI (env DATA_OUTPUT_ATHENA_RESULTS_S3_BUCKET)"),
    region: z.string().optional().describe("AWS region (default: the SDK's default chain)"),
    catalog: z.string().optional().describe("the Athena data catalog (default AwsDataCatalog)"),
    max_concurrency: z.number().int().min(1).max(64).optional().describe("partitions built at the same time"),
    discovery_cache_ttl_secs: z.number().optional().describe("accepted for compatibility; unused"),
    endpoint: z.string().url().optional().describe("S3 endpoint URL of an S3-compatible store, path-style requests (env LAKESWAP_S3_ENDPOINT; default: AWS's)"),
    glue_endpoint: z.string().url().optional().describe("Glue endpoint URL (env AWS_ENDPOINT_URL_GLUE, read by the AWS SDK; default: AWS's)"),
    athena_endpoint: z.string().url().optional().describe("Athena endpoint URL (env AWS_ENDPOINT_URL_ATHENA, read by the AWS SDK; default: AWS's)"),
    query_timeout: z.string().optional().describe("longest an Athena query may run, e.g. 30m (default 30m)"),
    upload_concurrency: z.number().int().min(1).max(64).optional().describe("parts of one multipart upload sent at once (env UPLOAD_CONCURRENCY; default: 4 per CPU, 4 to 16)"),
  })
  .strict();

/** Everything lakeswap needs to run on AWS. */
export interface AwsTarget {
  readonly bucket: string;
  readonly prefix: string;
  readonly database: string;
  readonly workgroup: string;
  /** s3:// location for query results, or undefined to use the workgroup's. */
  readonly resultsLocation?: string;
  readonly region?: string;
  readonly catalog?: string;
  readonly maxConcurrency?: number;
  readonly endpoint?: string;
  readonly queryTimeout?: string;
  /** Glue and Athena endpoints (`glue_endpoint`, `athena_endpoint`); unset means AWS's, or AWS_ENDPOINT_URL_GLUE / AWS_ENDPOINT_URL_ATHENA, which the SDK reads. */
  readonly glueEndpoint?: string;
  readonly athenaEndpoint?: string;
  /** Parts of one multipart upload in flight. */
  readonly uploadConcurrency?: number;
}

/** Resolves an Athena sink block and its environment equivalents (the block wins over the environment). */
export function resolveAwsTarget(block: z.output<typeof athenaSinkSchema> | undefined, env: NodeJS.ProcessEnv, where: string): AwsTarget {
  const pick = (key: keyof z.output<typeof athenaSinkSchema>, variable: string): string | undefined => {
    const value = block?.[key];
    return typeof value === "string" && value !== "" ? value : env[variable] || undefined;
  };
  const bucket = pick("s3_bucket", "DATA_OUTPUT_S3_BUCKET");
  const database = pick("glue_database_name", "SCHEMA_OUTPUT_GLUE_DATABASE_NAME");
  const workgroup = pick("athena_workgroup_name", "DATA_OUTPUT_ATHENA_WORKGROUP_NAME");
  const results = pick("athena_results_s3_bucket", "DATA_OUTPUT_ATHENA_RESULTS_S3_BUCKET");
  const missing = [
    [bucket, "s3_bucket (DATA_OUTPUT_S3_BUCKET)"],
    [database, "glue_database_name (SCHEMA_OUTPUT_GLUE_DATABASE_NAME)"],
    [workgroup, "athena_workgroup_name (DATA_OUTPUT_ATHENA_WORKGROUP_NAME)"],
  ].filter(([value]) => value === undefined).map(([, name]) => name);
  if (missing.length > 0) throw new InvalidInputError(`${where}: the AWS target needs ${missing.join(", ")}`);
  if (results?.startsWith("s3://")) {
    throw new InvalidInputError(
      `${where}.athena_results_s3_bucket: '${results}' is an s3:// URI, but this field takes a bucket name: use '${results.slice(5).split("/")[0]}'`,
    );
  }
  if (bucket?.startsWith("s3://")) {
    throw new InvalidInputError(`${where}.s3_bucket: '${bucket}' is an s3:// URI, but this field takes a bucket name; put the path in s3_prefix`);
  }
  if (database && !/^[a-z0-9_]{1,255}$/.test(database)) {
    throw new InvalidInputError(`${where}.glue_database_name: '${database}' is not a valid Glue database name: use lowercase letters, digits and '_'`);
  }
  return {
    bucket: bucket as string,
    prefix: (pick("s3_prefix", "DATA_OUTPUT_S3_PREFIX") ?? "").replace(/^\/+|\/+$/g, ""),
    database: database as string,
    workgroup: workgroup as string,
    resultsLocation: results ? `s3://${results}/lakeswap-query-results/` : undefined,
    region: block?.region ?? env.AWS_REGION ?? env.AWS_DEFAULT_REGION,
    catalog: block?.catalog,
    maxConcurrency: block?.max_concurrency,
    endpoint: block?.endpoint ?? (env.LAKESWAP_S3_ENDPOINT || undefined),
    glueEndpoint: block?.glue_endpoint,
    athenaEndpoint: block?.athena_endpoint,
    queryTimeout: block?.query_timeout,
    uploadConcurrency: block?.upload_concurrency ?? (env.UPLOAD_CONCURRENCY ? positiveInteger(env.UPLOAD_CONCURRENCY, "UPLOAD_CONCURRENCY") : undefined),
  };
}

/** True when the environment names an AWS target (DATA_OUTPUT_S3_BUCKET is set). */
export function awsTargetInEnvironment(env: NodeJS.ProcessEnv): boolean {
  return Boolean(env.DATA_OUTPUT_S3_BUCKET);
}

function positiveInteger(value: string, name: string): number {
  const number = Number(value);
  if (!Number.isInteger(number) || number < 1 || number > 64) {
    throw new InvalidInputError(`${name} '${value}' is not a number of parallel uploads: use a whole number from 1 to 64`);
  }
  return number;
}
