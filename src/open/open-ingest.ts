import type { DataSinkTarget, IngestPipelineConfig } from "../config/ingest-config.js";
import type { Lake, LakeSettings } from "../lake/lake.js";
import { openAwsLake, openEmbeddedLake } from "./open-lake.js";
import { glueLimitFromEnv, uploadLimitFromEnv, type AdaptiveLimit } from "../shared/adaptive-limit.js";
import { Collector, type CollectorOptions } from "../ingest/collector.js";
import type { Metrics } from "../ingest/metrics.js";

/** The lakes a set of pipelines write to, one per data sink, opened once and shared. */
export class IngestLakes {
  private readonly open = new Map<string, Promise<Lake>>();
  /**
   * The auto-tuned limits of every AWS lake of the collector: S3 upload requests (UPLOAD_CONCURRENCY, from 16 up
   * to UPLOAD_CONCURRENCY_MAX) and Glue calls (ATHENA_GLUE_CONTROL_PLANE_CONCURRENCY, from 2 up to ATHENA_GLUE_CP_MAX).
   */
  readonly limits: { readonly upload: AdaptiveLimit; readonly glue: AdaptiveLimit };

  constructor(
    private readonly settings: LakeSettings = {},
    env: NodeJS.ProcessEnv = process.env,
  ) {
    this.limits = { upload: uploadLimitFromEnv(env), glue: glueLimitFromEnv(env) };
  }

  lakeOf(target: DataSinkTarget): Promise<Lake> {
    const key = target.kind === "local" ? `local:${target.path}` : `athena:${target.aws.bucket}/${target.aws.prefix}/${target.aws.database}`;
    let lake = this.open.get(key);
    if (!lake) {
      lake = target.kind === "local" ? openEmbeddedLake(target.path, this.settings) : openAwsLake(target.aws, this.settings, this.limits);
      this.open.set(key, lake);
    }
    return lake;
  }

  async close(): Promise<void> {
    const lakes = [...this.open.values()];
    this.open.clear();
    for (const lake of lakes) await (await lake).close();
  }
}

/** Opens the collector of one pipeline: its write-ahead log, and the lakes of its data and dead-letter sinks. */
export async function openCollector(
  pipeline: IngestPipelineConfig,
  lakes: IngestLakes,
  metrics: Metrics,
  options: Pick<CollectorOptions, "log" | "walSyncer" | "yieldToAppends"> = {},
): Promise<Collector> {
  // On AWS the namespaces' tables go to the schema sink's Glue database (Skipprd's configuration pairs each data sink with one).
  const data = pipeline.dataSink.kind === "athena" && pipeline.schemaSink ? { ...pipeline.dataSink, aws: { ...pipeline.dataSink.aws, database: pipeline.schemaSink.database } } : pipeline.dataSink;
  const lake = await lakes.lakeOf(data);
  const deadLetterLake = await lakes.lakeOf(pipeline.deadletterSink);
  const aws = pipeline.dataSink.kind === "athena" || pipeline.deadletterSink.kind === "athena";
  return Collector.open({ pipeline, lake, deadLetterLake, metrics, ...options, limits: aws ? lakes.limits : undefined });
}
