/**
 * vitest's global setup: one PostgreSQL cluster and one set of AWS emulators
 * for the whole run, in vitest's main process, started the first time a test
 * asks for them (a run that needs neither starts neither) and stopped when the
 * run ends. Tests reach them over HTTP as before, each in a database, Glue
 * database and S3 prefix of its own (test/support/shared-services.ts). A test
 * that stops a service, injects failures or reads a service's request log
 * starts its own instead.
 *
 * Workers ask for a service at a small HTTP endpoint (`POST /postgres`,
 * `POST /aws`) whose address reaches them through vitest's `provide`.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { TestProject } from "vitest/node";
import { startAwsServices, type AwsServices } from "./aws-services.js";
import { startPostgres, type PostgresServer } from "./postgres.js";

declare module "vitest" {
  export interface ProvidedContext {
    /** The address of the run's service endpoint; absent when vitest ran without this setup. */
    serviceBroker?: string;
  }
}

/** What `POST /postgres` answers. */
export interface SharedPostgres {
  readonly url: string;
  readonly port: number;
}

/** What `POST /aws` answers. */
export interface SharedAws {
  readonly s3: string;
  readonly glue: string;
  readonly athena: string;
}

/** Starts the run's service endpoint; the returned function stops it and every service it started. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  let postgres: Promise<PostgresServer> | undefined;
  let aws: Promise<AwsServices> | undefined;
  const answers: Record<string, () => Promise<SharedPostgres | SharedAws>> = {
    "/postgres": async () => {
      postgres ??= startPostgres();
      const server = await postgres;
      return { url: server.url, port: server.port };
    },
    "/aws": async () => {
      aws ??= startAwsServices();
      const services = await aws;
      return { s3: services.s3.endpoint, glue: services.glue.endpoint, athena: services.athena.endpoint };
    },
  };
  const server = http.createServer((req, res) => {
    const answer = req.method === "POST" ? answers[req.url ?? ""] : undefined;
    if (!answer) {
      res.writeHead(404).end();
      return;
    }
    answer().then(
      (body) => res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(body)),
      (error: unknown) => res.writeHead(500, { "content-type": "text/plain" }).end(error instanceof Error ? (error.stack ?? error.message) : String(error)),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  project.provide("serviceBroker", `http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  return async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    // A service that failed to start has nothing to stop.
    await Promise.all([
      postgres?.then((p) => p.stop(), () => undefined),
      aws?.then((a) => a.close(), () => undefined),
    ]);
  };
}
