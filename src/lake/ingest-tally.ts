import { LakeswapError } from "../model/errors.js";
import type { Partition } from "../model/partition.js";
import type { ObjectStore } from "../store/object-store.js";
import { ingestTallyKey } from "./layout.js";

/**
 * An ingested partition's tally: the rows and signature lane sums of every segment counted in it, and, for each
 * collector (a write-ahead log's id), the last segment counted. Segments of one collector are registered in order, so
 * a segment whose number is not above its collector's last is already counted: registering it again adds nothing.
 *
 * In a table whose partitions keep runs (`ingestRuns`), the tally also names the run the counted files are in: the
 * tally is written before the pointer moves, so where the two disagree (a process killed in between) the tally is
 * right, and the next registration or compaction moves the pointer to its run.
 */
export interface Tally {
  readonly format: 1;
  readonly rows: number;
  readonly upper: string;
  readonly lower: string;
  readonly counted: Readonly<Record<string, number>>;
  /** The run every counted file is in (runs layout only). */
  readonly run?: string;
  /** When `run` became the partition's run (ISO time): the replaced run is kept for the grace window from then. */
  readonly since?: string;
  /** When a segment was last counted (ISO time): a partition nothing was added to for a while is closed. */
  readonly at?: string;
}

/** A partition nothing was counted in yet. */
const EMPTY_TALLY: Tally = { format: 1, rows: 0, upper: "0", lower: "0", counted: {} };

/** A partition's tally, or the empty one; a tally that cannot be read stops the command (its signature cannot be kept). */
export async function readTally(store: ObjectStore, table: string, partition: Partition): Promise<Tally> {
  const key = ingestTallyKey(table, partition);
  const object = await store.get(key);
  if (!object) return EMPTY_TALLY;
  try {
    const tally = JSON.parse(new TextDecoder().decode(object.body)) as Tally;
    if (typeof tally.rows !== "number" || typeof tally.upper !== "string" || typeof tally.lower !== "string" || typeof tally.counted !== "object") throw new Error("missing fields");
    if (tally.run !== undefined && typeof tally.run !== "string") throw new Error("'run' is not a run id");
    return tally;
  } catch (error) {
    throw new LakeswapError(
      "STORE_ERROR",
      `the ingest tally ${key} is not readable (${(error as Error).message}); its partition's signature cannot be kept. restore it from a backup (the partition's files themselves are intact and readable)`,
    );
  }
}

/** Writes a partition's tally (durably: a registration or compaction goes on only once it is stored). */
export async function writeTally(store: ObjectStore, table: string, partition: Partition, tally: Tally): Promise<void> {
  await store.put(ingestTallyKey(table, partition), `${JSON.stringify(tally)}\n`);
}
