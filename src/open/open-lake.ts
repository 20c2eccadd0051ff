import { LocalCatalog } from "../catalog/local-catalog.js";
import type { AwsTarget } from "../config/aws-config.js";
import { parseDuration } from "../model/duration.js";
import { Lake, type LakeSettings } from "../lake/lake.js";
import { TEMP_PREFIX, writeConsequence } from "../lake/layout.js";
import type { AdaptiveLimit } from "../shared/adaptive-limit.js";
import { DuckDbEngine } from "../engine/duckdb-engine.js";
import { LocalStore } from "../store/local-store.js";

/** Opens the embedded lake in `dir`: local folder store, symlink catalog, DuckDB engine. */
export async function openEmbeddedLake(dir: string, settings: LakeSettings = {}): Promise<Lake> {
  const store = new LocalStore(dir, { describeWrite: writeConsequence });
  // One DuckDB adapter serves both ports; its users' SQL and its landing run in separate instances (../duckdb/duckdb-open.ts).
  const duckdb = new DuckDbEngine(store, { stagingPrefix: TEMP_PREFIX });
  return Lake.open({ store, catalog: new LocalCatalog(dir, { describeWrite: writeConsequence }), engine: duckdb, landing: duckdb }, settings);
}

/** Auto-tuned limits of an AWS lake's calls (the collector's: UPLOAD_CONCURRENCY, ATHENA_GLUE_CONTROL_PLANE_CONCURRENCY). */
export interface AwsLimits {
  readonly upload?: AdaptiveLimit;
  readonly glue?: AdaptiveLimit;
}

/** A logger for the AWS SDK clients that prints nothing (see openAwsLake). */
const SILENT_LOGGER = { trace: () => undefined, debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };

/**
 * Opens a lake on AWS: data on S3, pointers in the Glue Data Catalog, derived
 * layers built by Athena; raw files are landed and signed locally with DuckDB
 * and uploaded multipart. Credentials come from the AWS default chain.
 */
export async function openAwsLake(target: AwsTarget, settings: LakeSettings = {}, limits: AwsLimits = {}): Promise<Lake> {
  // Loaded only here: the AWS SDK takes about a second to load, which no command on an embedded lake should pay.
  const [{ AthenaClient }, { GlueClient }, { S3Client }, { GlueCatalog }, { AthenaEngine }, { S3Store }] = await Promise.all([
    import("@aws-sdk/client-athena"),
    import("@aws-sdk/client-glue"),
    import("@aws-sdk/client-s3"),
    import("../catalog/glue-catalog.js"),
    import("../engine/athena-engine.js"),
    import("../store/s3/s3-store.js"),
  ]);
  const region = target.region ?? "us-east-1";
  // One retry layer: lakeswap's own (../shared/retry.ts, around every call), so the SDK clients make one attempt each.
  // Their logger is silent: lakeswap reports each failed call itself, naming the action, the resource and the fix;
  // without a logger of its own a client prints "An error was encountered in a non-retryable streaming request." to
  // the console for every failed call with a streamed body, an upload S3 answers 412 (already stored: done) included.
  const common = { region, maxAttempts: 1, logger: SILENT_LOGGER };
  const s3 = new S3Client({ ...common, ...(target.endpoint ? { endpoint: target.endpoint, forcePathStyle: true } : {}) });
  const store = new S3Store(s3, { bucket: target.bucket, prefix: target.prefix, uploadConcurrency: target.uploadConcurrency, ingestLimit: limits.upload });
  const uriOf = (key: string) => store.uri(key);
  const catalog = new GlueCatalog(new GlueClient({ ...common, ...(target.glueEndpoint ? { endpoint: target.glueEndpoint } : {}) }), {
    database: target.database,
    uriOf,
    limit: limits.glue,
  });
  const engine = new AthenaEngine(new AthenaClient({ ...common, ...(target.athenaEndpoint ? { endpoint: target.athenaEndpoint } : {}) }), {
    workgroup: target.workgroup,
    database: target.database,
    catalog: target.catalog,
    outputLocation: target.resultsLocation,
    queryTimeoutMs: target.queryTimeout ? parseDuration(target.queryTimeout, "query_timeout") : undefined,
    uriOf,
    store,
  });
  // Athena runs users' SQL; deliveries are landed, signed and written locally by DuckDB, then uploaded.
  return Lake.open({ store, catalog, engine, landing: new DuckDbEngine(store, { stagingPrefix: TEMP_PREFIX }) }, settings);
}
