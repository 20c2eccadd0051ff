import { partitionPath, type Partition } from "./partition.js";

/** Where lakeswap keeps its own records in the lake; never under a table's location. */
export const METADATA_PREFIX = "_lakeswap";

/**
 * The record of one run, keyed by its run id and written once the run is
 * current: what it holds (files, rows), where it came from (signature, inputs)
 * and how long it took. Immutable afterwards.
 */
export interface RunManifest {
  readonly format: 1;
  readonly table: string;
  readonly partition: string;
  readonly runId: string;
  readonly rows: number;
  readonly files: readonly { readonly key: string; readonly size: number }[];
  readonly bytes: number;
  /** The run that was current before this one was swapped in. */
  readonly previousRunId?: string;
  readonly signature?: string;
  /** The transform's fingerprint (derived layers). */
  readonly fingerprint?: string;
  /** The signed inputs this run was built from (`table/partition=signature`). */
  readonly inputs?: readonly string[];
  readonly builtAt: string;
  readonly swappedAt: string;
  readonly buildSeconds: number;
  /** True when the process died after the swap and a later command rebuilt this record from the files. */
  readonly recovered?: boolean;
}

/** The store key of a run's manifest. */
export function manifestKey(table: string, partition: Partition, runId: string): string {
  return `${manifestsPrefix(table, partition)}${runId}.json`;
}

/** The store key prefix of the manifests of one partition, or of a whole table. */
export function manifestsPrefix(table: string, partition?: Partition): string {
  return partition
    ? `${METADATA_PREFIX}/manifests/${table}/${partitionPath(partition)}/`
    : `${METADATA_PREFIX}/manifests/${table}/`;
}

/** The store key of a partition's pin (a pinned partition is never rebuilt by a sync). */
export function pinKey(table: string, partition: Partition): string {
  return `${pinsPrefix(table)}${partitionPath(partition)}.json`;
}

/** The store key prefix of a table's pins. */
export function pinsPrefix(table: string): string {
  return `${METADATA_PREFIX}/pins/${table}/`;
}

/** Parses a stored manifest, refusing anything that is not one. */
export function parseManifest(body: Uint8Array, key: string): RunManifest {
  const value = JSON.parse(Buffer.from(body).toString("utf8")) as Partial<RunManifest>;
  if (value.format !== 1 || typeof value.runId !== "string" || typeof value.rows !== "number") {
    throw new Error(`'${key}' is not a lakeswap run manifest`);
  }
  return value as RunManifest;
}
