/**
 * vitest's global setup: one PostgreSQL cluster for the whole run, and one set
 * of AWS emulators per worker slot, each set in a process of its own
 * (test/support/aws-services-server.ts), started the first time a test asks
 * for them (a run that needs neither starts neither) and stopped when the run
 * ends. Tests reach them over HTTP as before, each in a database, Glue
 * database and S3 prefix of its own (test/support/shared-services.ts). A test
 * that stops a service, injects failures or reads a service's request log
 * starts its own instead.
 *
 * Workers ask for a service at a small HTTP endpoint (`POST /postgres`,
 * `POST /aws?worker=N`) whose address reaches them through vitest's `provide`.
 */
import { spawn, type ChildProcess } from "node:child_process";
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { TestProject } from "vitest/node";
import { bundleOf } from "./bundles.js";
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

/** A set of AWS emulators in a child process. */
interface AwsProcess {
  readonly endpoints: SharedAws;
  stop(): Promise<void>;
}

/** Starts the run's service endpoint; the returned function stops it and every service it started. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  let postgres: Promise<PostgresServer> | undefined;
  const aws = new Map<string, Promise<AwsProcess>>();
  const answers: Record<string, (query: URLSearchParams) => Promise<SharedPostgres | SharedAws>> = {
    "/postgres": async () => {
      postgres ??= startPostgres();
      const server = await postgres;
      return { url: server.url, port: server.port };
    },
    "/aws": async (query) => {
      const worker = query.get("worker") ?? "1";
      if (!aws.has(worker)) aws.set(worker, startAwsProcess());
      return (await aws.get(worker)!).endpoints;
    },
  };
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://broker");
    const answer = req.method === "POST" ? answers[url.pathname] : undefined;
    if (!answer) {
      res.writeHead(404).end();
      return;
    }
    answer(url.searchParams).then(
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
      ...[...aws.values()].map((set) => set.then((a) => a.stop(), () => undefined)),
    ]);
  };
}

/**
 * Starts a set of AWS emulators in a child process (the bundle of test/support/aws-services-server.ts); resolves once
 * they listen. Its young generation is as large as the workers' (vitest.config.ts): it serves every AWS request of a
 * worker, each one allocating much that dies young.
 */
function startAwsProcess(): Promise<AwsProcess> {
  const child: ChildProcess = spawn(process.execPath, ["--max-semi-space-size=32", bundleOf("aws-services-server.ts")], {
    env: { ...process.env, NODE_NO_WARNINGS: "1" },
    stdio: ["pipe", "pipe", "pipe"],
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  let stdout = "";
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve, reject) => {
    const onData = (chunk: Buffer): void => {
      stdout += chunk.toString();
      const newline = stdout.indexOf("\n");
      if (newline < 0) return;
      child.stdout!.off("data", onData);
      child.off("exit", onExit);
      resolve({
        endpoints: JSON.parse(stdout.slice(0, newline)) as SharedAws,
        // Closing its stdin stops it (and a vitest that dies without a teardown closes it too).
        stop: async () => {
          child.stdin!.end();
          await exited;
        },
      });
    };
    const onExit = (code: number | null, signal: NodeJS.Signals | null): void =>
      reject(new Error(`the AWS emulators' process exited (${signal ?? `code ${code}`}) before they listened: ${stderr}`));
    child.stdout!.on("data", onData);
    child.once("exit", onExit);
    child.once("error", reject);
  });
}
