export { Lake } from "./lake/lake.js";
export type {
  LakePorts, LakeSettings, ReplaceOptions, ReplaceResult, RollbackResult, PartitionHistory, RunHistoryEntry, PartitionGcReport,
} from "./lake/lake.js";
export { replacePartition } from "./lake/operations/replace.js";
export { rollbackPartition, rollbackSync } from "./lake/operations/rollback.js";
export { collectGarbage } from "./lake/operations/gc.js";
export { readHistory } from "./lake/operations/history.js";
export { pinPartition, unpinPartition } from "./lake/operations/pin.js";
export { dropTable } from "./lake/operations/drop-table.js";
export { METADATA_FOLDERS } from "./lake/layout.js";
export { openEmbeddedLake } from "./open/open-lake.js";
export { defineTable, parseColumns, type TableDefinition, type Column, type Compression } from "./model/table.js";
export { parsePartition, partitionPath, partitionSpec, type Partition } from "./model/partition.js";
export { newRunId, isRunId, runIdTime } from "./model/run-id.js";
export { LakeswapError, EXIT_CODES, type ErrorCode } from "./model/errors.js";
export type { ObjectStore, ObjectStoreCapabilities } from "./store/object-store.js";
export type { Catalog, CatalogCapabilities } from "./catalog/catalog.js";
export type { Engine, EngineCapabilities } from "./engine/engine.js";
export { LocalStore } from "./store/local-store.js";
export { LocalCatalog } from "./catalog/local-catalog.js";
export { DuckDbEngine } from "./engine/duckdb-engine.js";
export { Pipeline, type PipelineOptions, type SyncReport } from "./pipeline/pipeline.js";
export type { SinkedPartition } from "./pipeline/send-to-sinks.js";
export { loadPipelineConfig } from "./config/pipeline-config.js";
export type { Sink, SinkSpec, SinkLayout, SinkMode, SinkOpener } from "./sinks/sink.js";
export { openSink } from "./sinks/open-sink.js";
export type { SourceFetcher, FetchRequest, FetchedSource, HttpSource } from "./sources/source.js";
export { fetchSource } from "./sources/fetch-source.js";
