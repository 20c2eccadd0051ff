import type { Command } from "commander";
import { didYouMean, loadPipelineConfig } from "../../config/pipeline-config.js";
import { assertNamespaces, parseByteSize, type IngestPipelineConfig } from "../../config/ingest-config.js";
import { InvalidInputError, NotFoundError } from "../../model/errors.js";
import type { IngestHandler, IngestRequest, IngestServer } from "../../ingest/http-server.js";
import type { IngestAuth } from "../../ingest/http-auth.js";
import type { Collector } from "../../ingest/collector.js";
import type { IngestLakes } from "../../open/open-ingest.js";
import { interruptCleanups } from "../context.js";
import { BackgroundThreads, DEFAULT_BACKGROUND_NICE } from "../../ingest/thread-priority.js";
import { DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_CONNECTIONS } from "../../ingest/server-limits.js";
import { choosePipelines, ingestModules, sayWhereItRuns } from "../ingest-pipelines.js";

/** `lakeswap serve`'s options. */
interface ServeOptions {
  readonly config: string;
  readonly port?: string;
  readonly host?: string;
  readonly pipeline?: string[];
  readonly flushInterval?: string;
  readonly backgroundNice?: string;
  readonly maxBytesInFlight?: string;
  readonly maxConnections?: string;
}

/** `lakeswap serve`: the event collector over HTTP, until SIGTERM or Ctrl-C, which land what the log holds first. */
export function registerServe(program: Command): void {
  program
    .command("serve")
    .description("run the event collector: POST /v1/<pipeline>/<namespace> (NDJSON or a JSON array), GET /healthz, GET /metrics")
    .option("-c, --config <file>", "the config with pipelines:", "lakeswap.yaml")
    .option("--port <port>", "the port to listen on (env LAKESWAP_PORT; default 8080)")
    .option("--host <host>", "the interface to listen on (default 127.0.0.1: this machine only; 0.0.0.0 for every interface)")
    .option("--pipeline <name...>", "serve only these pipelines (default: every pipeline of the config)")
    .option("--flush-interval <ms>", "how often sealed segments are landed (default 1000)")
    .option("--max-bytes-in-flight <size>", "the most request body bytes held at once; past it a post gets 503 with Retry-After, its body unread (default 256MiB)")
    .option("--max-connections <n>", `the most connections open at once; more are closed as they arrive (default ${DEFAULT_MAX_CONNECTIONS})`)
    .option(
      "--background-nice <n>",
      `the CPU priority (nice, 0-19) of the threads that land events and do file I/O, so that acknowledging events wins the CPU; Linux only; 0: the same as the requests' thread (default ${DEFAULT_BACKGROUND_NICE})`,
    )
    .action(async (options: ServeOptions) => {
      const { Metrics, IngestLakes, openCollector, startIngestServer, LANDING_YIELDS } = await ingestModules();
      const config = loadPipelineConfig(options.config);
      const pipelines = choosePipelines(config, options.pipeline);
      for (const pipeline of pipelines) assertNamespaces(pipeline);
      sayWhereItRuns(pipelines, config.file);
      const port = portOf(options.port ?? process.env.LAKESWAP_PORT ?? "8080");
      const limits = serverLimits(options);
      const background = new BackgroundThreads(niceOf(options.backgroundNice ?? String(DEFAULT_BACKGROUND_NICE)));
      const metrics = new Metrics();
      const lakes = new IngestLakes();
      // Each log writes on a thread of its own, which is not lowered with the others (below); landing yields to bursts.
      const services = await openEach(pipelines, lakes, (pipeline) => openCollector(pipeline, lakes, metrics, { walSyncer: "thread", yieldToAppends: LANDING_YIELDS }));
      const flushInterval = options.flushInterval ? Number(options.flushInterval) : 1000;
      for (const service of services.values()) service.start(flushInterval);
      const auth = authOf(pipelines, process.env);
      const server = await startIngestServer({ handler: router(services), metrics, port, host: options.host, auth, ...limits });
      // Threads are made on demand (DuckDB's with the first landing): lowered now, and the new ones at each flush.
      background.lower();
      const lowering = setInterval(() => background.lower(), flushInterval);
      lowering.unref();
      process.stderr.write(`lakeswap: collecting ${[...services.keys()].join(", ")} on ${server.url} (POST /v1/<pipeline>/<namespace>)\n`);
      warnIfOpen(pipelines, auth, options.host);
      const stop = stopper({ server, services, lakes, lowering });
      // SIGINT goes through main.ts's interrupt cleanups; SIGTERM (a deploy, a container stop) is handled here.
      interruptCleanups.add(() => stop("interrupt"));
      await untilSigterm(stop);
    });
}

/** Opens the collector of each pipeline; when one fails, closes those opened and the lakes, and throws. */
async function openEach(
  pipelines: readonly IngestPipelineConfig[],
  lakes: IngestLakes,
  open: (pipeline: IngestPipelineConfig) => Promise<Collector>,
): Promise<Map<string, Collector>> {
  const services = new Map<string, Collector>();
  try {
    for (const pipeline of pipelines) services.set(pipeline.name, await open(pipeline));
  } catch (error) {
    for (const service of services.values()) await service.close();
    await lakes.close();
    throw error;
  }
  return services;
}

/** Warns on stderr about pipelines that take events without a token on an interface other machines reach. */
function warnIfOpen(pipelines: readonly IngestPipelineConfig[], auth: IngestAuth, host: string | undefined): void {
  const open = pipelines.filter((p) => auth.tokenFor(p.name) === undefined).map((p) => p.name);
  if (open.length > 0 && !isLoopback(host)) {
    process.stderr.write(
      `lakeswap: warning: ${open.join(", ")} take events from anyone who reaches ${host}: set auth_token: \${VAR} on the pipeline or LAKESWAP_INGEST_TOKEN, and put TLS in front (README: "Event ingest")\n`,
    );
  }
}

/**
 * The collector's stop, run once whatever asks for it: the server stops taking requests and finishes those in
 * flight, then each pipeline lands what its log holds (what fails stays there for the next start) and closes.
 */
function stopper(running: {
  readonly server: IngestServer;
  readonly services: ReadonlyMap<string, Collector>;
  readonly lakes: IngestLakes;
  readonly lowering: NodeJS.Timeout;
}): (signal: string) => Promise<void> {
  let stopping: Promise<void> | undefined;
  return (signal) => {
    stopping ??= (async () => {
      process.stderr.write(`lakeswap: ${signal}: no longer accepting; finishing requests in flight and landing what the log holds\n`);
      clearInterval(running.lowering);
      await running.server.close();
      for (const service of running.services.values()) {
        try {
          await service.flush();
        } catch (error) {
          process.stderr.write(`lakeswap: ${(error as Error).message}; it stays in the write-ahead log for the next start\n`);
        }
        await service.close();
      }
      await running.lakes.close();
    })();
    return stopping;
  };
}

/** Resolves once SIGTERM has stopped the collector (exit code 1 when the stop itself failed). */
function untilSigterm(stop: (signal: string) => Promise<void>): Promise<void> {
  return new Promise<void>((resolve) => {
    process.once("SIGTERM", () => {
      void stop("SIGTERM").then(resolve, (error: unknown) => {
        process.stderr.write(`lakeswap: ${(error as Error).message}\n`);
        process.exitCode = 1;
        resolve();
      });
    });
  });
}

/** Routes each request to its pipeline's collector. */
function router(services: ReadonlyMap<string, Collector>): IngestHandler {
  return {
    accept(request: IngestRequest) {
      const service = services.get(request.pipeline);
      if (!service) {
        return Promise.reject(new NotFoundError(`no pipeline '${request.pipeline}' is collected here${didYouMean(request.pipeline, [...services.keys()])}; pipelines: ${[...services.keys()].join(", ")}`));
      }
      return service.accept(request);
    },
    health() {
      const each = [...services.values()].map((s) => s.health());
      return { ok: each.every((h) => h.ok), detail: { pipelines: each.map((h) => h.detail) } };
    },
  };
}

/** The bearer tokens of the pipelines served: each one's auth_token, else LAKESWAP_INGEST_TOKEN, else none. */
function authOf(pipelines: readonly IngestPipelineConfig[], env: NodeJS.ProcessEnv): IngestAuth {
  const fallback = env.LAKESWAP_INGEST_TOKEN || undefined;
  const byPipeline = new Map(pipelines.map((p) => [p.name, p.authToken ?? fallback]));
  const tokens = [...new Set([...byPipeline.values()].filter((token): token is string => token !== undefined))];
  return { tokenFor: (pipeline) => (byPipeline.has(pipeline) ? byPipeline.get(pipeline) : null), tokens };
}

/** Whether a --host value reaches this machine only (the default). */
function isLoopback(host: string | undefined): boolean {
  return host === undefined || host === "localhost" || host === "::1" || /^127\./.test(host);
}

/** The server's bounds from --max-bytes-in-flight and --max-connections (the server's defaults where not given). */
function serverLimits(options: ServeOptions): { maxBytesInFlight?: number; maxConnections?: number } {
  const maxBytesInFlight = options.maxBytesInFlight !== undefined ? parseByteSize(options.maxBytesInFlight, "--max-bytes-in-flight") : undefined;
  if (maxBytesInFlight !== undefined && maxBytesInFlight < DEFAULT_MAX_BODY_BYTES) {
    throw new InvalidInputError(`--max-bytes-in-flight '${options.maxBytesInFlight}' is below the largest body a request may have (16MiB): use 16MiB or more`);
  }
  const connections = options.maxConnections !== undefined ? Number(options.maxConnections) : undefined;
  if (connections !== undefined && (!Number.isInteger(connections) || connections < 1)) {
    throw new InvalidInputError(`--max-connections '${options.maxConnections}' is not a number of connections: use a whole number from 1, e.g. --max-connections ${DEFAULT_MAX_CONNECTIONS}`);
  }
  return { maxBytesInFlight, maxConnections: connections };
}

function niceOf(value: string): number {
  const nice = Number(value);
  if (!Number.isInteger(nice) || nice < 0 || nice > 19) {
    throw new InvalidInputError(`--background-nice '${value}' is not a nice value: use a whole number from 0 (the same priority as the requests) to 19 (the lowest)`);
  }
  return nice;
}

function portOf(value: string): number {
  const port = Number(value);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new InvalidInputError(`port '${value}' is not a port number: use 0 to 65535 (0 picks a free one)`);
  return port;
}
