import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { parse as parseYaml } from "yaml";
import { z } from "zod";
import { InvalidInputError } from "../model/errors.js";
import type { AwsTarget } from "./aws-config.js";
import { formatIssues, didYouMean } from "./config-messages.js";
import type { DatasetConfig } from "./dataset/dataset-config.js";
import { resolveColumns } from "./dataset/resolve-columns.js";
import { resolveDataset } from "./dataset/resolve-dataset.js";
import { refuseSharedSinkTargets } from "./dataset/resolve-sinks.js";
import { resolveIngest, type IngestPipelineConfig } from "./ingest-config.js";
import { pipelineSchema } from "./pipeline-schema.js";

export type { PipelineColumn } from "./ingest-config.js";
export type { DatasetConfig, LayerConfig, LookbackWindow } from "./dataset/dataset-config.js";
export { didYouMean } from "./config-messages.js";
export { maskUrl } from "./dataset/resolve-sinks.js";
export { pipelineSchema } from "./pipeline-schema.js";

/** The pipeline, resolved and checked. */
export interface PipelineConfig {
  readonly file: string;
  readonly lake?: string;
  readonly concurrency: number;
  readonly grace?: string;
  readonly datasets: readonly DatasetConfig[];
  /** Set when the datasets run on AWS. */
  readonly aws?: AwsTarget;
  /** The event pipelines (`pipelines:`); empty when there are none. */
  readonly ingest: readonly IngestPipelineConfig[];
}

/** The JSON Schema of `lakeswap.yaml`, generated from the zod schema. */
export function pipelineJsonSchema(): Record<string, unknown> {
  return z.toJSONSchema(pipelineSchema, { io: "input" }) as Record<string, unknown>;
}

/** Reads, validates and resolves a pipeline config file. */
export function loadPipelineConfig(file: string): PipelineConfig {
  const absolute = path.resolve(file);
  if (!existsSync(absolute)) {
    const where = path.isAbsolute(file) ? "" : ` (looked for ${absolute})`;
    throw new InvalidInputError(`config file '${file}' does not exist${where}; run lakeswap in the folder of lakeswap.yaml, or pass it with -c path/to/lakeswap.yaml`);
  }
  let raw: unknown;
  try {
    raw = parseYaml(readFileSync(absolute, "utf8"));
  } catch (error) {
    throw new InvalidInputError(`${file}: not valid YAML: ${(error as Error).message}`);
  }
  return resolvePipelineConfig(raw, absolute);
}

/** Validates a parsed config (paths resolve against the config file's folder; Athena fields missing from a block come from `env`). */
export function resolvePipelineConfig(raw: unknown, file: string, env: NodeJS.ProcessEnv = process.env): PipelineConfig {
  const parsed = pipelineSchema.safeParse(raw ?? {});
  if (!parsed.success) throw new InvalidInputError(`${path.basename(file)}: ${formatIssues(parsed.error.issues, raw ?? {})}`);
  const config = parsed.data;
  const dir = path.dirname(file);
  try {
    if (Object.keys(config.datasets).length === 0 && Object.keys(config.pipelines ?? {}).length === 0) {
      throw new InvalidInputError(
        "nothing to run: add datasets: (files landed into a raw table and built into layers, lakeswap sync) " +
          "or pipelines: (events collected by lakeswap serve and lakeswap ingest), or both",
      );
    }
    // The tables the datasets write, named before they are resolved (an ingested dataset's raw table is its namespace's).
    const datasetTables: { table: string; where: string }[] = [];
    for (const [name, dataset] of Object.entries(config.datasets)) {
      const raw = dataset.source.ingest === undefined ? (dataset.table ?? `${name}_raw`) : undefined;
      const layers = dataset.layers.map((l) => [l.name, l.table ?? `${name}_${l.name}`] as const);
      for (const [layer, table] of [["raw", raw], ...layers, ["dead_letter", dataset.dead_letter]] as const) {
        if (!table) continue;
        const where = `datasets.${name}.${layer}`;
        const other = datasetTables.find((t) => t.table === table);
        if (other) throw new InvalidInputError(`table '${table}' is used by both ${other.where} and ${where}; give each layer its own table`);
        datasetTables.push({ table, where });
      }
    }
    const ingest = resolveIngest(config, {
      dir,
      lake: config.lake !== undefined ? path.resolve(dir, config.lake) : undefined,
      target: config.target,
      datasetTables,
      env,
      resolveColumns,
      didYouMean,
    });
    const datasets = Object.entries(config.datasets).map(([name, dataset]) => resolveDataset(name, dataset, dir, ingest.pipelines));
    refuseSharedSinkTargets(datasets);
    const aws = ingest.datasetsSink?.kind === "athena" ? ingest.datasetsSink.aws : undefined;
    return {
      file,
      lake: ingest.lake,
      concurrency: aws?.maxConcurrency ?? config.concurrency,
      grace: config.grace,
      datasets,
      aws,
      ingest: ingest.pipelines,
    };
  } catch (error) {
    if (error instanceof InvalidInputError) throw new InvalidInputError(`${path.basename(file)}: ${error.message}`);
    throw error;
  }
}
