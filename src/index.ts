export { Lake } from "./core/lake.js";
export type {
  LakePorts, LakeSettings, ReplaceOptions, ReplaceResult, RollbackResult, PartitionHistory, RunHistoryEntry, PartitionGcReport,
} from "./core/lake.js";
export { openEmbeddedLake } from "./open-lake.js";
export { defineTable, parseColumns, type TableDefinition, type Column, type Compression } from "./core/table.js";
export { parsePartition, partitionPath, partitionSpec, type Partition } from "./core/partition.js";
export { newRunId, isRunId, runIdTime } from "./core/run-id.js";
export { LakeswapError, EXIT_CODES, type ErrorCode } from "./core/errors.js";
export type { ObjectStore } from "./store/object-store.js";
export type { Catalog } from "./catalog/catalog.js";
export type { Engine } from "./engine/engine.js";
export { LocalStore } from "./store/local-store.js";
export { LocalCatalog } from "./catalog/local-catalog.js";
export { DuckDbEngine } from "./engine/duckdb-engine.js";
export { Pipeline, type PipelineOptions, type SyncReport } from "./core/pipeline.js";
export type { SinkedPartition } from "./core/sink-sync.js";
export { loadPipelineConfig } from "./config/pipeline-config.js";
export type { Sink, SinkSpec, SinkLayout, SinkMode, SinkOpener } from "./sinks/sink.js";
export { openSink } from "./sinks/open-sink.js";
export type { SourceFetcher, FetchRequest, FetchedSource, HttpSource } from "./sources/source.js";
export { fetchSource } from "./sources/fetch-source.js";
