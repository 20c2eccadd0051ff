import { LakeswapError, errorMessage } from "./errors.js";

import { METADATA_PREFIX } from "./layout.js";

export { METADATA_PREFIX, manifestKey, manifestsPrefix, pinKey, pinsPrefix } from "./layout.js";

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
  /** `write: append`: the signatures of the delivery parts this run's rows were appended from, oldest first (the same part is not appended twice). */
  readonly appended?: readonly string[];
  readonly builtAt: string;
  readonly swappedAt: string;
  readonly buildSeconds: number;
  /** True when the process died after the swap and a later command rebuilt this record from the files. */
  readonly recovered?: boolean;
}

/** Parses a stored manifest, refusing anything that is not one with a STORE_ERROR naming the file and the fix. */
export function parseManifest(body: Uint8Array, key: string): RunManifest {
  const fix = "move it away and rerun: the manifest of a current run is rebuilt from the run's files";
  let value: Partial<RunManifest> | null;
  try {
    value = JSON.parse(Buffer.from(body).toString("utf8")) as Partial<RunManifest> | null;
  } catch (error) {
    throw new LakeswapError("STORE_ERROR", `run manifest '${key}' is not valid JSON (${errorMessage(error)}); ${fix}`);
  }
  if (typeof value !== "object" || value === null || value.format !== 1 || typeof value.runId !== "string" || typeof value.rows !== "number") {
    throw new LakeswapError("STORE_ERROR", `'${key}' is not a lakeswap run manifest (format 1 with runId and rows); ${fix}`);
  }
  return value as RunManifest;
}

/**
 * What a failed write of a metadata object means for the pointers, by where it goes, for the
 * message of a full disk: the write before the swap (outbox entry, run files, lease, pin) leaves the
 * pointer where it was; the ones after it (manifest, sync record) come after the pointer moved.
 */
export function writeConsequence(key: string): string {
  const area = key.startsWith(`${METADATA_PREFIX}/`) ? key.split("/")[1] : key.includes("/_runs/") ? "runs" : undefined;
  switch (area) {
    case "outbox":
      return "recording a pointer move in the outbox, before the swap: the pointer did not move";
    case "manifests":
      return "writing a run's manifest, after the swap: the pointer did move to the new run; the manifest is rebuilt from the run's files by the next command";
    case "syncs":
      return "writing the sync's record: pointers this sync moved so far did move (lakeswap history shows them); free space and rerun the sync";
    case "leases":
      return "writing a writer lease: no pointer moved by this write";
    case "pins":
      return "writing a pin: no pointer moved";
    case "pointers":
      return "writing a pointer's state file, after the swap: the pointer did move; free space and rerun, the partition is rebuilt by the next sync";
    case "tables":
      return "writing a table definition: the table was not created";
    case "runs":
      return "writing a run's files, before the swap: the pointer did not move";
    default:
      return "no pointer moved by this write";
  }
}
