import { InvalidInputError, LakeswapError, errorMessage } from "../model/errors.js";
import { syncRecordKey } from "./layout.js";
import type { AuditFinding } from "../model/audit.js";
import type { RunManifest } from "./manifest.js";
import type { TableDefinition } from "../model/table.js";

export { syncRecordKey };
import { isRunId } from "../model/run-id.js";

/** One pointer a sync moved. */
export interface SyncMove {
  readonly table: string;
  /** `raw`, a derived layer's name, or `dead letter`. */
  readonly layer: string;
  readonly partition: string;
  /** The run the sync made current. */
  readonly run: string;
  /** The run that was current before; absent when the sync created the partition. */
  readonly previousRun?: string;
  /** The move was decided and recorded, but its pointer may not have moved yet: the sync stopped right then. */
  readonly pending?: boolean;
  /** The runs the sync moved the pointer to before `run` (a rebuild by swap, then a build): each is the sync's too. */
  readonly through?: readonly string[];
}

/**
 * The record of one sync: every pointer it moved, so that one command can
 * move them all back (`lakeswap rollback --sync ID`). Written as the sync
 * goes: each move is recorded before its pointer moves, so a sync that dies
 * at any moment leaves the record of every pointer it may have moved.
 */
export interface SyncRecord {
  readonly format: 1;
  /** Sortable by time, like a run id: `20261102T140501Z-1a2b3c`. */
  readonly syncId: string;
  readonly config: string;
  readonly startedAt: string;
  /** Set once the sync ran to its end (with or without failed partitions), or stopped on an error. */
  readonly finishedAt?: string;
  /** The error that stopped the sync before its end. */
  readonly error?: string;
  readonly moves: readonly SyncMove[];
  /** The Iceberg snapshot the sync committed in each `iceberg: true` table it changed (`query --as-of` reads it). */
  readonly snapshots?: readonly { readonly table: string; readonly snapshotId: number }[];
  /** A held sync (`sync --hold`, or `publish: all_or_nothing` with a failure): built and audited, its runs staged. */
  readonly held?: HeldSync;
  /**
   * The schema changes the sync made in place, each recorded before the catalog's definition was written: what
   * `rollback --sync` restores (`previous`), and what the sync declared (`definition`, `changes` in words).
   */
  readonly schemaChanges?: readonly SchemaChangeRecord[];
}

/** One table's schema change in place, as a sync recorded it. */
export interface SchemaChangeRecord {
  readonly table: string;
  readonly changes: readonly string[];
  readonly previous: TableDefinition;
  readonly definition: TableDefinition;
  /** Made by rewriting every partition (`sync --rebuild-schema`): its moves are the sync's; a rollback restores the definition before it moves them back. */
  readonly rebuilt?: true;
  /** The columns the rebuild renamed (new name to old name). */
  readonly renames?: Readonly<Record<string, string>>;
  /**
   * The partition keys changed (`sync --rebuild-schema`): the sync built the table in a new layout (`definition.layout`)
   * and switched to it; a rollback switches back to `previous`'s layout, whose runs stayed as they were.
   */
  readonly relayout?: true;
}

/**
 * What a held sync staged: each table's runs (their manifests, each naming the run it was staged against as
 * `previousRunId`), and what their audits found. `held`: nothing moved; `publishing`: `lakeswap publish` committed
 * (its outbox entries apply, also after a kill); `published`: its pointers moved (`refused` lists those that could
 * not: moved by someone else since); `discarded`: dropped, its runs left to GC.
 */
export interface HeldSync {
  readonly status: "held" | "publishing" | "published" | "discarded";
  readonly tables: readonly { readonly table: string; readonly layer: string; readonly runs: readonly RunManifest[] }[];
  readonly audits: readonly (AuditFinding & { readonly table: string })[];
  /** Why the sync was held: `--hold`, or the failures of an all-or-nothing sync. */
  readonly reason: string;
  readonly publishedAt?: string;
  readonly refused?: readonly { readonly table: string; readonly partition: string; readonly reason: string }[];
}



/** Checks a sync id given on the command line (`last` names the newest sync). */
export function checkSyncId(syncId: string): string {
  if (syncId !== "last" && !isRunId(syncId)) {
    throw new InvalidInputError(`'${syncId}' is not a sync id (YYYYMMDDTHHMMSSZ-xxxxxx) or 'last'; lakeswap syncs lists them`);
  }
  return syncId;
}

/**
 * Parses a stored sync record. With the record's store `key`, a file that is not one is a
 * STORE_ERROR naming it (a record silently skipped would make `rollback --sync last` undo an older
 * sync); without a key, undefined.
 */
export function parseSyncRecord(body: Uint8Array, key?: string): SyncRecord | undefined {
  const fix = "move it away and rerun (the pointers it moved are in lakeswap history)";
  let value: SyncRecord | null;
  try {
    value = JSON.parse(Buffer.from(body).toString("utf8")) as SyncRecord | null;
  } catch (error) {
    if (key === undefined) return undefined;
    throw new LakeswapError("STORE_ERROR", `sync record '${key}' is not valid JSON (${errorMessage(error)}); ${fix}`);
  }
  if (typeof value === "object" && value !== null && value.format === 1 && typeof value.syncId === "string" && Array.isArray(value.moves)) return value;
  if (key === undefined) return undefined;
  throw new LakeswapError("STORE_ERROR", `'${key}' is not a lakeswap sync record (format 1 with syncId and moves); ${fix}`);
}
