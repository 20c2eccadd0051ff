import path from "node:path";
import { didYouMean, type PipelineConfig } from "../config/pipeline-config.js";
import { DEFAULT_DATA_SINK, ENVIRONMENT_DATA_SINK, assertNamespaces, type IngestPipelineConfig } from "../config/ingest-config.js";
import { InvalidInputError } from "../model/errors.js";

/** The pipelines `names` picks from the config (every pipeline when none are named), or an error naming the ones it declares. */
export function choosePipelines(config: PipelineConfig, names: readonly string[] | undefined): IngestPipelineConfig[] {
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

/** The namespace `name` of a pipeline, or its only one when no name is given. */
export function chooseNamespace(pipeline: IngestPipelineConfig, name: string | undefined): string {
  assertNamespaces(pipeline);
  const known = pipeline.namespaces.map((ns) => ns.name);
  if (name === undefined) {
    if (known.length === 1) return known[0]!;
    throw new InvalidInputError(`pipeline '${pipeline.name}' has several namespaces (${known.join(", ")}): name one with --namespace`);
  }
  if (!known.includes(name)) throw new InvalidInputError(`pipeline '${pipeline.name}' has no namespace '${name}'${didYouMean(name, known)}; its namespaces: ${known.join(", ")}`);
  return name;
}

/** Says on stderr where each pipeline lands its events, and why there (as every command says which lake it runs on). */
export function sayWhereItRuns(pipelines: readonly IngestPipelineConfig[], file: string): void {
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

/**
 * The collector's modules, loaded when an ingest command runs: the other commands then never load the write-ahead
 * log's native CRC-32C, node:http or the collector (a few milliseconds of every command's start).
 */
export async function ingestModules() {
  const [{ startIngestServer }, { Metrics }, { IngestLakes, openCollector }, { LANDING_YIELDS }] = await Promise.all([
    import("../ingest/http-server.js"),
    import("../ingest/metrics.js"),
    import("../open/open-ingest.js"),
    import("../ingest/landing-yield.js"),
  ]);
  return { startIngestServer, Metrics, IngestLakes, openCollector, LANDING_YIELDS };
}
