import { createReadStream } from "node:fs";
import path from "node:path";
import type { Readable } from "node:stream";
import type { Command } from "commander";
import { loadPipelineConfig, type PipelineConfig } from "../../config/pipeline-config.js";
import { DEFAULT_DATA_SINK, ENVIRONMENT_DATA_SINK, assertNamespaces, parseByteSize, type IngestPipelineConfig } from "../../config/ingest-config.js";
import { InvalidInputError, LakeswapError, NotFoundError } from "../../model/errors.js";
import type { IngestAuth, IngestHandler, IngestRequest } from "../../ingest/http-server.js";
import type { IngestService, SegmentReport } from "../../ingest/ingest-service.js";
import { formatTable, report } from "../output.js";
import { interruptCleanups, wantsJson } from "../context.js";
import { didYouMean } from "../../config/pipeline-config.js";
import { BackgroundThreads, DEFAULT_BACKGROUND_NICE } from "../../ingest/thread-priority.js";
import { DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_CONNECTIONS } from "../../ingest/server-limits.js";

/** The largest file or stdin `lakeswap ingest` appends as one record; larger input goes in several. */
const INGEST_CHUNK_BYTES = 8 * 1024 * 1024;

/** `lakeswap serve` and `lakeswap ingest`: the event collector, over HTTP or from files. */
export function registerIngest(program: Command): void {
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
      const { Metrics, IngestLakes, openIngestService, startIngestServer, LANDING_YIELDS } = await ingestModules();
      const config = loadPipelineConfig(options.config);
      const pipelines = choosePipelines(config, options.pipeline);
      for (const pipeline of pipelines) assertNamespaces(pipeline);
      sayWhereItRuns(pipelines, config.file);
      const port = portOf(options.port ?? process.env.LAKESWAP_PORT ?? "8080");
      const limits = serverLimits(options);
      const background = new BackgroundThreads(niceOf(options.backgroundNice ?? String(DEFAULT_BACKGROUND_NICE)));
      const metrics = new Metrics();
      const lakes = new IngestLakes();
      const services = new Map<string, IngestService>();
      try {
        // Each log writes on a thread of its own, which is not lowered with the others (below); landing yields to bursts.
        for (const pipeline of pipelines) services.set(pipeline.name, await openIngestService(pipeline, lakes, metrics, { walSyncer: "thread", yieldToAppends: LANDING_YIELDS }));
      } catch (error) {
        for (const service of services.values()) await service.close();
        await lakes.close();
        throw error;
      }
      const flushInterval = options.flushInterval ? Number(options.flushInterval) : 1000;
      for (const service of services.values()) service.start(flushInterval);
      const auth = authOf(pipelines, process.env);
      const server = await startIngestServer({ handler: router(services), metrics, port, host: options.host, auth, ...limits });
      // Threads are made on demand (DuckDB's with the first landing): lowered now, and the new ones at each flush.
      background.lower();
      const lowering = setInterval(() => background.lower(), flushInterval);
      lowering.unref();
      process.stderr.write(`lakeswap: collecting ${[...services.keys()].join(", ")} on ${server.url} (POST /v1/<pipeline>/<namespace>)\n`);
      const open = pipelines.filter((p) => auth.tokenFor(p.name) === undefined).map((p) => p.name);
      if (open.length > 0 && !isLoopback(options.host)) {
        process.stderr.write(
          `lakeswap: warning: ${open.join(", ")} take events from anyone who reaches ${options.host}: set auth_token: \${VAR} on the pipeline or LAKESWAP_INGEST_TOKEN, and put TLS in front (README: "Event ingest")\n`,
        );
      }
      let stopping: Promise<void> | undefined;
      const stop = (signal: string): Promise<void> => {
        stopping ??= (async () => {
          process.stderr.write(`lakeswap: ${signal}: no longer accepting; finishing requests in flight and landing what the log holds\n`);
          clearInterval(lowering);
          await server.close();
          for (const service of services.values()) {
            try {
              await service.flush();
            } catch (error) {
              process.stderr.write(`lakeswap: ${(error as Error).message}; it stays in the write-ahead log for the next start\n`);
            }
            await service.close();
          }
          await lakes.close();
        })();
        return stopping;
      };
      // SIGINT goes through main.ts's interrupt cleanups; SIGTERM (a deploy, a container stop) is handled here.
      interruptCleanups.add(() => stop("interrupt"));
      await new Promise<void>((resolve) => {
        process.once("SIGTERM", () => {
          void stop("SIGTERM").then(resolve, (error: unknown) => {
            process.stderr.write(`lakeswap: ${(error as Error).message}\n`);
            process.exitCode = 1;
            resolve();
          });
        });
      });
    });

  program
    .command("ingest")
    .description("append events from a file or stdin (NDJSON, or a JSON array) to a pipeline, land them, and report")
    .argument("<pipeline>", "the pipeline (pipelines.<name> in the config)")
    .argument("[file]", "an NDJSON or JSON file; - or nothing: stdin")
    .option("-c, --config <file>", "the config with pipelines:", "lakeswap.yaml")
    .option("--namespace <name>", "the namespace of the events (default: the pipeline's only namespace)")
    .option("--format <format>", "ndjson or json (default: from the file name, else by its first character)")
    .option("--json", "print the report as JSON")
    .action(async (pipelineName: string, file: string | undefined, options: { config: string; namespace?: string; format?: string }, command: Command) => {
      const { Metrics, IngestLakes, openIngestService } = await ingestModules();
      const config = loadPipelineConfig(options.config);
      const [pipeline] = choosePipelines(config, [pipelineName]) as [IngestPipelineConfig];
      const namespace = chooseNamespace(pipeline, options.namespace);
      sayWhereItRuns([pipeline], config.file);
      const metrics = new Metrics();
      const lakes = new IngestLakes();
      const started = Date.now();
      try {
        const service = await openIngestService(pipeline, lakes, metrics);
        let segments: SegmentReport[];
        let accepted = 0;
        try {
          for await (const { body, format } of chunks(file, options.format)) {
            accepted += (await service.accept({ pipeline: pipeline.name, namespace, body, format })).accepted;
          }
          segments = await service.flush();
        } finally {
          await service.close();
        }
        const totals = {
          pipeline: pipeline.name,
          namespace,
          accepted,
          events: segments.reduce((sum, s) => sum + s.events, 0),
          written: segments.reduce((sum, s) => sum + s.written, 0),
          deadLettered: segments.reduce((sum, s) => sum + s.deadLettered, 0),
          files: segments.reduce((sum, s) => sum + s.files, 0),
          seconds: (Date.now() - started) / 1000,
          segments,
        };
        const quarantined = segments.filter((s) => s.quarantined !== undefined);
        report(wantsJson(command), totals, () =>
          [
            `${pipeline.name}/${namespace}: ${accepted} events accepted; landed ${totals.events} (with any earlier events the log held): ${totals.written} written, ${totals.deadLettered} dead-lettered` +
              (totals.deadLettered > 0 ? ` (table ${pipeline.name})` : ""),
            "",
            formatTable(
              ["segment", "events", "written", "dead-lettered", "files"],
              segments.map((s) => [s.segment, s.quarantined !== undefined ? "quarantined" : s.events, s.written, s.deadLettered, s.files]),
            ),
          ].join("\n"),
        );
        if (quarantined.length > 0) {
          throw new LakeswapError(
            "CONFLICT",
            `${quarantined.length} segment(s) could not land, because the lake holds other rows where their files go, and were moved out of the log: ` +
              `${quarantined.map((s) => s.quarantined).join(", ")} (their events are kept there; the log's messages above name the objects)`,
          );
        }
      } finally {
        await lakes.close();
      }
    });
}

/** Says on stderr where each pipeline lands its events, and why there (as every command says which lake it runs on). */
function sayWhereItRuns(pipelines: readonly IngestPipelineConfig[], file: string): void {
  for (const pipeline of pipelines) {
    const sink = pipeline.dataSink;
    if (sink.kind === "athena") {
      const database = pipeline.schemaSink?.database ?? sink.aws.database;
      const because = sink.name === ENVIRONMENT_DATA_SINK ? "DATA_OUTPUT_S3_BUCKET is set" : `${path.basename(file)} declares data_sinks.${sink.name}`;
      process.stderr.write(`lakeswap: pipeline ${pipeline.name} runs on AWS (s3://${sink.aws.bucket}${sink.aws.prefix ? `/${sink.aws.prefix}` : ""}, Glue database ${database}), because ${because}\n`);
    } else {
      const because = sink.name === DEFAULT_DATA_SINK ? "lake: or the default ./lake; DATA_OUTPUT_S3_BUCKET is not set" : `data_sinks.${sink.name} in ${path.basename(file)}`;
      process.stderr.write(`lakeswap: pipeline ${pipeline.name} lands in the embedded lake ${sink.path} (${because})\n`);
    }
  }
}

/** Routes each request to its pipeline's collector. */
function router(services: ReadonlyMap<string, IngestService>): IngestHandler {
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

function choosePipelines(config: PipelineConfig, names: readonly string[] | undefined): IngestPipelineConfig[] {
  if (config.ingest.length === 0) throw new InvalidInputError(`${path.basename(config.file)} declares no pipelines: add pipelines.<name> with its namespaces (README: "Event ingest")`);
  if (!names || names.length === 0) return [...config.ingest];
  return names.map((name) => {
    const found = config.ingest.find((p) => p.name === name);
    if (!found) {
      const known = config.ingest.map((p) => p.name);
      throw new InvalidInputError(`pipeline '${name}' is not declared in ${path.basename(config.file)}${didYouMean(name, known)}; pipelines: ${known.join(", ")}`);
    }
    return found;
  });
}

function chooseNamespace(pipeline: IngestPipelineConfig, name: string | undefined): string {
  assertNamespaces(pipeline);
  const known = pipeline.namespaces.map((ns) => ns.name);
  if (name === undefined) {
    if (known.length === 1) return known[0]!;
    throw new InvalidInputError(`pipeline '${pipeline.name}' has several namespaces (${known.join(", ")}): name one with --namespace`);
  }
  if (!known.includes(name)) throw new InvalidInputError(`pipeline '${pipeline.name}' has no namespace '${name}'${didYouMean(name, known)}; its namespaces: ${known.join(", ")}`);
  return name;
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

/**
 * The input as bodies of whole lines, each at most about INGEST_CHUNK_BYTES (a JSON array is read whole: it is
 * one value). NDJSON is split at line ends, so no event is cut.
 */
async function* chunks(file: string | undefined, format: string | undefined): AsyncGenerator<{ body: Buffer; format: "ndjson" | "json" }> {
  const stream: Readable = file === undefined || file === "-" ? process.stdin : createReadStream(file);
  if (format !== undefined && format !== "ndjson" && format !== "json") throw new InvalidInputError(`--format '${format}' is not known: use ndjson or json`);
  let kind: "ndjson" | "json" | undefined = (format as "ndjson" | "json" | undefined) ?? (file?.endsWith(".json") ? "json" : file && /\.(ndjson|jsonl)$/.test(file) ? "ndjson" : undefined);
  let held: Buffer[] = [];
  let heldBytes = 0;
  for await (const piece of stream as AsyncIterable<Buffer>) {
    if (kind === undefined) {
      const first = piece.toString("utf8").trimStart()[0];
      if (first !== undefined) kind = first === "[" ? "json" : "ndjson";
    }
    held.push(piece);
    heldBytes += piece.length;
    if (kind === "ndjson" && heldBytes >= INGEST_CHUNK_BYTES) {
      const all = Buffer.concat(held);
      const end = all.lastIndexOf(10);
      if (end >= 0) {
        yield { body: all.subarray(0, end + 1), format: "ndjson" };
        held = [all.subarray(end + 1)];
        heldBytes = held[0]!.length;
      }
    }
  }
  if (heldBytes > 0) yield { body: Buffer.concat(held), format: kind ?? "ndjson" };
}

/**
 * The collector's modules, loaded when an ingest command runs: the other commands then never load the write-ahead
 * log's native CRC-32C, node:http or the collector (a few milliseconds of every command's start).
 */
async function ingestModules() {
  const [{ startIngestServer }, { Metrics }, { IngestLakes, openIngestService }, { LANDING_YIELDS }] = await Promise.all([
    import("../../ingest/http-server.js"),
    import("../../ingest/metrics.js"),
    import("../../open/open-ingest.js"),
    import("../../ingest/ingest-service.js"),
  ]);
  return { startIngestServer, Metrics, IngestLakes, openIngestService, LANDING_YIELDS };
}
