import type { HttpSourceSpec } from "./http-source-spec.js";

/**
 * The source port: a partitioned API a sync asks for one partition at a time (`source: {http: ...}`). Core calls a
 * SourceFetcher (the CLI passes ./fetch-source.ts) and lands what it wrote like any delivery of JSONL files.
 */

/** A dataset's `source.http`, resolved. */
export interface HttpSource {
  readonly spec: HttpSourceSpec;
  /** Partitions fetched at the same time (the request rate limit holds across them). */
  readonly concurrency: number;
}

/** The partitions one sync asks a source for: values of one partition key (the source's contract key). */
export interface FetchRequest {
  /** Names the dataset in messages (`datasets.<name>`). */
  readonly dataset: string;
  readonly source: HttpSource;
  readonly key: string;
  readonly values: readonly string[];
  /** The declared columns: each row is written with exactly these fields. */
  readonly columns: readonly string[];
  readonly onFetched?: (value: string, done: number, total: number) => void;
}

/** One partition's answer: its rows in a local JSONL file, or why it could not be fetched. */
export interface FetchedPartitionFile {
  readonly value: string;
  /** Set when the fetch succeeded (0 rows: an empty file). */
  readonly file?: string;
  readonly rows: number;
  readonly error?: string;
}

/** What one sync fetched; `release` removes the files. */
export interface FetchedSource {
  readonly partitions: readonly FetchedPartitionFile[];
  release(): Promise<void>;
}

export type SourceFetcher = (request: FetchRequest) => Promise<FetchedSource>;
