import { promises as fs } from "node:fs";
import path from "node:path";
import { LocalCatalog } from "../catalog/local-catalog.js";
import type { AwsTarget } from "../config/aws-config.js";
import { parseDuration } from "../model/duration.js";
import { Lake, type LakeSettings } from "../lake/lake.js";
import { CATALOG_FILE, CATALOG_FILE_LOCK, CATALOG_FILE_STATES, METADATA_FOLDERS, TEMP_PREFIX, writeConsequence } from "../lake/layout.js";
import { DuckDbCatalogFile } from "../catalog/duckdb-catalog-file.js";
import type { AdaptiveLimit } from "../shared/adaptive-limit.js";
import type { GlueCatalog } from "../catalog/glue-catalog.js";
import { DuckDbEngine } from "../engine/duckdb-engine.js";
import { DuckDbLanding } from "../landing/duckdb/duckdb-landing.js";
import { SharedDuckDb } from "../duckdb/shared-duckdb.js";
import { LocalStore } from "../store/local-store.js";

/** Opens the embedded lake in `dir`: local folder store, symlink catalog, DuckDB engine, and `lake.duckdb` for plain readers. */
export async function openEmbeddedLake(dir: string, settings: LakeSettings = {}): Promise<Lake> {
  const store = new LocalStore(dir, { folders: METADATA_FOLDERS, describeWrite: writeConsequence });
  // The engine and the landing share one DuckDB; users' SQL and the landing run in separate instances of it (../duckdb/shared-duckdb.ts).
  const duckdb = new SharedDuckDb();
  const engine = new DuckDbEngine(store, { duckdb });
  const landing = new DuckDbLanding(store, { duckdb, stagingPrefix: TEMP_PREFIX });
  const catalogFile = new DuckDbCatalogFile(store, { file: CATALOG_FILE, lock: CATALOG_FILE_LOCK, states: CATALOG_FILE_STATES, temp: TEMP_PREFIX });
  return Lake.open({ store, catalog: new LocalCatalog(dir, { folders: METADATA_FOLDERS, describeWrite: writeConsequence }), engine, landing, catalogFile }, settings);
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
  const [{ AthenaClient }, { S3Client }, { AthenaEngine }, { S3Store }] = await Promise.all([
    import("@aws-sdk/client-athena"),
    import("@aws-sdk/client-s3"),
    import("../engine/athena-engine.js"),
    import("../store/s3/s3-store.js"),
  ]);
  const common = clientSettings(target);
  const s3 = new S3Client({ ...common, ...(target.endpoint ? { endpoint: target.endpoint, forcePathStyle: true } : {}) });
  const store = new S3Store(s3, { bucket: target.bucket, prefix: target.prefix, uploadConcurrency: target.uploadConcurrency, ingestLimit: limits.upload });
  const uriOf = (key: string) => store.uri(key);
  const catalog = await glueCatalog(target, uriOf, limits.glue);
  const engine = new AthenaEngine(new AthenaClient({ ...common, ...(target.athenaEndpoint ? { endpoint: target.athenaEndpoint } : {}) }), {
    workgroup: target.workgroup,
    database: target.database,
    catalog: target.catalog,
    outputLocation: target.resultsLocation,
    queryTimeoutMs: target.queryTimeout ? parseDuration(target.queryTimeout, "query_timeout") : undefined,
    // A test hook: the test suite polls its Athena emulator, which answers in milliseconds, sooner than the 250 ms default.
    pollMs: process.env.LAKESWAP_ATHENA_POLL_MS ? Number(process.env.LAKESWAP_ATHENA_POLL_MS) : undefined,
    uriOf,
    store,
  });
  // Athena runs users' SQL; deliveries are landed, signed and written locally by DuckDB, then uploaded.
  return Lake.open({ store, catalog, engine, landing: new DuckDbLanding(store, { stagingPrefix: TEMP_PREFIX }) }, settings);
}

/** What every AWS SDK client of a lake is made with. */
function clientSettings(target: AwsTarget): { region: string; maxAttempts: number; logger: typeof SILENT_LOGGER } {
  // One retry layer: lakeswap's own (../shared/retry.ts, around every call), so the SDK clients make one attempt each.
  // Their logger is silent: lakeswap reports each failed call itself, naming the action, the resource and the fix;
  // without a logger of its own a client prints "An error was encountered in a non-retryable streaming request." to
  // the console for every failed call with a streamed body, an upload S3 answers 412 (already stored: done) included.
  return { region: target.region ?? "us-east-1", maxAttempts: 1, logger: SILENT_LOGGER };
}

/** The Glue catalog of an AWS lake (the SDK loaded on first use). */
async function glueCatalog(target: AwsTarget, uriOf: (key: string) => string, limit?: AdaptiveLimit): Promise<GlueCatalog> {
  const [{ GlueClient }, { GlueCatalog }] = await Promise.all([import("@aws-sdk/client-glue"), import("../catalog/glue-catalog.js")]);
  const client = new GlueClient({ ...clientSettings(target), ...(target.glueEndpoint ? { endpoint: target.glueEndpoint } : {}) });
  return new GlueCatalog(client, { database: target.database, uriOf, limit });
}

/** Where a lake is: an embedded lake's folder, or an AWS target. */
export interface LakePlace {
  readonly dir?: string;
  readonly aws?: AwsTarget;
}

/**
 * Removes what is left of a lake without tables (the demo's teardown): the AWS lake's Glue database, or the
 * embedded lake's empty metadata folders and then its folder. Nothing that holds a file or a table is removed.
 * True when the embedded lake's folder is gone.
 */
export async function removeEmptyLake(place: LakePlace): Promise<boolean> {
  if (place.aws) {
    await (await glueCatalog(place.aws, () => "")).removeDatabaseIfEmpty();
    return false;
  }
  if (place.dir === undefined) return false;
  // The catalog file of a lake without tables holds no view; its lock file is lakeswap's alone.
  await fs.rm(path.join(place.dir, CATALOG_FILE), { force: true });
  await fs.rm(path.join(place.dir, CATALOG_FILE_LOCK), { force: true });
  await fs.rm(path.join(place.dir, CATALOG_FILE_STATES), { force: true });
  const metadata = path.join(place.dir, METADATA_FOLDERS.metadata);
  const areas = await fs.readdir(metadata).catch(() => [] as string[]);
  for (const area of areas) await fs.rmdir(path.join(metadata, area)).catch(() => undefined);
  await fs.rmdir(metadata).catch(() => undefined);
  return fs.rmdir(place.dir).then(
    () => true,
    () => false,
  );
}
