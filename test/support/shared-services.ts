/**
 * A test's way to the run's shared services (test/support/global-services.ts):
 * the PostgreSQL cluster, a fresh database per test, through `usePostgres`;
 * the AWS emulators' endpoints through `sharedAwsEndpoints`. Run without the
 * global setup, a file starts its own services instead. Test workers only:
 * this module imports vitest.
 */
import { randomBytes } from "node:crypto";
import type pg from "pg";
import { afterAll, afterEach, beforeAll, inject } from "vitest";
import { awsEndpoints, type AwsEndpoints } from "./aws-services.js";
import type { SharedAws, SharedPostgres } from "./global-services.js";
import { queryAs, startPostgres, type PostgresServer } from "./postgres.js";

/** The run's shared service, started on this first request; undefined when the run has no global setup. */
async function askBroker<T>(service: "postgres" | "aws"): Promise<T | undefined> {
  const broker = inject("serviceBroker");
  if (broker === undefined) return undefined;
  // The AWS emulators: the set of this worker's slot (1 to maxWorkers), so the two workers never wait on one another's.
  const response = await fetch(`${broker}/${service}?worker=${process.env.VITEST_POOL_ID ?? "1"}`, { method: "POST" });
  const text = await response.text();
  if (!response.ok) throw new Error(`the run's shared ${service} did not start: ${text}`);
  return JSON.parse(text) as T;
}

/** The run's AWS emulators, or undefined when the run has no global setup (the caller then starts its own). */
export async function sharedAwsEndpoints(): Promise<AwsEndpoints | undefined> {
  const shared = await askBroker<SharedAws>("aws");
  if (!shared) return undefined;
  return awsEndpoints(shared.s3, shared.glue, shared.athena);
}

/** A database of a test's own. */
interface PostgresDatabase {
  readonly name: string;
  /** Its connection string (as the superuser). */
  readonly url: string;
  /** Runs SQL in it, in a connection of its own; returns the rows. */
  query<Row extends pg.QueryResultRow = pg.QueryResultRow>(sql: string, values?: unknown[]): Promise<Row[]>;
}

/** What `usePostgres` gives a test file. */
export interface PostgresHooks {
  /** Runs SQL on the cluster's `postgres` database, for what a test does to the server (e.g. ending a session). */
  admin<Row extends pg.QueryResultRow = pg.QueryResultRow>(sql: string, values?: unknown[]): Promise<Row[]>;
  /** Creates an empty database, named `<prefix>_<random>_<n>`: no other test, file or worker uses it. */
  database(): Promise<PostgresDatabase>;
  /** Runs `cleanup` after the current test ends (the last added first). */
  onCleanup(cleanup: () => void | Promise<void>): void;
}

/**
 * Registers a file's PostgreSQL hooks: before its tests, the run's shared
 * cluster (or, run without the global setup, a cluster of its own); after
 * each test, the cleanups it added; after the file, its databases dropped
 * (or its own cluster stopped).
 */
export function usePostgres(prefix: string): PostgresHooks {
  let url = "";
  let own: PostgresServer | undefined;
  const tag = `${prefix}_${randomBytes(4).toString("hex")}`;
  const created: string[] = [];
  const cleanups: (() => void | Promise<void>)[] = [];
  beforeAll(async () => {
    const shared = await askBroker<SharedPostgres>("postgres");
    if (shared) {
      url = shared.url;
    } else {
      own = await startPostgres();
      url = own.url;
    }
  }, 120_000);
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });
  afterAll(async () => {
    if (own) {
      await own.stop();
      return;
    }
    // WITH (FORCE): a child process a test killed may still hold a session.
    for (const name of created) await queryAs(url, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  });
  return {
    admin: (sql, values) => queryAs(url, sql, values),
    async database() {
      const name = `${tag}_${created.length + 1}`;
      await queryAs(url, `CREATE DATABASE ${name}`);
      created.push(name);
      const databaseUrl = url.replace(/\/postgres$/, `/${name}`);
      return { name, url: databaseUrl, query: (sql, values) => queryAs(databaseUrl, sql, values) };
    },
    onCleanup(cleanup) {
      cleanups.push(cleanup);
    },
  };
}
