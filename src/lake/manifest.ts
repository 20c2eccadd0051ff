import { LakeswapError, errorMessage } from "../model/errors.js";


export { manifestKey } from "./layout.js";

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
  /**
   * `write: append`: for each file that a part was appended from, the last line of it the run holds (`through`) and
   * the signature of the file's rows of the partition through that line: a file that later only grew is appended
   * from the next line. The last record of each file, in the order appended.
   */
  readonly appendedFiles?: readonly AppendedFile[];
  /** The run this one rewrote under a rebuilt schema (`sync --rebuild-schema`): GC keeps it while this one is kept for rollback. */
  readonly rebuiltFrom?: string;
  readonly builtAt: string;
  readonly swappedAt: string;
  readonly buildSeconds: number;
  /** True when the process died after the swap and a later command rebuilt this record from the files. */
  readonly recovered?: boolean;
}

/** A file some of whose rows a run was appended from: through which line, and what its rows of the partition through it sign as. */
export interface AppendedFile {
  readonly file: string;
  readonly through: number;
  readonly signature: string;
  /**
   * The lines at or before `through` whose rows were bad when the file was appended (its dead letters), where they were
   * known (a file with at most MAX_KNOWN_BAD_LINES bad rows): `signature` is of its rows without them, and a row at one
   * of them that is good now (fixed in place) is new.
   */
  readonly skipped?: readonly number[];
  /** How many rows of the partition the file held through `through`: the rows taken, wherever lines without a row moved since. */
  readonly rows?: number;
  /** The content of the file's first row of the partition (`LandedPart.head`): a copy or a renamed file is paired with this record by it. */
  readonly head?: string;
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

