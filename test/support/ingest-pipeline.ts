import type { IngestNamespaceConfig, IngestPipelineConfig } from "../../src/config/ingest-config.js";

/**
 * A pipeline `events` of one namespace `pageviews` on the embedded lake (the tests hand the collector its lake),
 * keeping unknown fields in `extra` unless told otherwise, partitioned by `day` of its `ts` unless told otherwise; the log in `walDir`.
 */
export function ingestPipeline(
  walDir: string,
  columns: IngestNamespaceConfig["columns"],
  options: {
    readonly partition?: IngestNamespaceConfig["time"]["partition"];
    readonly wal?: Partial<IngestPipelineConfig["wal"]>;
    readonly unknownFields?: IngestNamespaceConfig["unknownFields"];
  } = {},
): IngestPipelineConfig {
  const local = { kind: "local" as const, name: "lake", path: "/unused" };
  return {
    name: "events",
    dataSink: local,
    deadletterSink: local,
    namespaces: [
      {
        name: "pageviews",
        columns: [...columns],
        unknownFields: options.unknownFields ?? "keep",
        extraColumn: "extra",
        time: { field: "ts", partition: options.partition ?? [{ key: "day", expression: "strftime(ts, '%Y-%m-%d')" }] },
      },
    ],
    wal: { dir: walDir, segmentMaxBytes: 64 * 1024 * 1024, segmentMaxAgeMs: 60_000, maxBytes: 1024 * 1024 * 1024, ...options.wal },
  };
}

/** `lakeswap.yaml` of one event pipeline, `events`, with one namespace, `pageviews` (event_id, ts), its log in ./wal. */
export const PAGEVIEWS_YAML = `pipelines:
  events:
    namespaces:
      pageviews:
        columns: {event_id: {type: VARCHAR, nullable: false}, ts: {type: TIMESTAMPTZ, nullable: false}}
        time: {field: ts}
    wal: {dir: ./wal}
`;
