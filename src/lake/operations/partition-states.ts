import type { PointerMoveKind } from "../../catalog/catalog.js";
import { partitionPath } from "../../model/partition.js";
import { pinnedPartition, pinsPrefix } from "../layout.js";
import type { RunManifest } from "../manifest.js";
import { partitionOf, type HasLakeParts, type PartitionInput } from "../parts.js";
import { readManifest, runFiles } from "../runs.js";
import { settledPointers } from "../settled-pointers.js";
import { assertTableName } from "../../model/sql.js";
import type { SwapItem, SwapOutcome } from "../commit/swap.js";

/** What a sync needs to know about a partition's current run (fingerprint, inputs and rows only where its manifest was read: a pointer without a signature). */
export interface PartitionState {
  readonly partition: string;
  readonly runId: string;
  readonly signature?: string;
  readonly fingerprint?: string;
  readonly inputs?: readonly string[];
  readonly rows?: number;
  readonly movedBy?: PointerMoveKind;
  readonly pinned: boolean;
}

/**
 * The current run of every partition of a table, with what a sync compares: signature, fingerprint, inputs, how the
 * pointer moved, pins. None for a table that does not exist yet (its first sync). `settled`: a table read without
 * its lease (another writer's), whose pointers are read at a state a finished batch left, not halfway through its
 * writer's moves (../settled-pointers.ts).
 */
export async function partitionStates(lake: HasLakeParts, tableName: string, settled = false): Promise<Map<string, PartitionState>> {
  const { store, catalog } = lake.parts;
  const table = await catalog.getTable(assertTableName(tableName));
  if (!table) return new Map();
  const prefix = pinsPrefix(table.name);
  const pins = new Set((await store.list(prefix)).map((o) => pinnedPartition(o.key.slice(prefix.length))));
  const states = new Map<string, PartitionState>();
  for (const pointer of settled ? await settledPointers(lake.parts, table) : await catalog.listPointers(table)) {
    const path = partitionPath(pointer.partition);
    // The signature moves with the pointer (pointer state, Glue Parameters): a manifest is read only where it does not.
    const manifest = pointer.signature === undefined ? await readManifest(store, table, pointer.partition, pointer.runId) : undefined;
    states.set(path, {
      partition: path,
      runId: pointer.runId,
      signature: pointer.signature ?? manifest?.signature,
      fingerprint: manifest?.fingerprint,
      inputs: manifest?.inputs,
      rows: manifest?.rows,
      movedBy: pointer.movedBy,
      pinned: pins.has(path),
    });
  }
  for (const path of pins) {
    if (!states.has(path)) states.set(path, { partition: path, runId: "", pinned: true });
  }
  return states;
}

/** A run's manifest (its fingerprint, the delivery parts appended into it, ...), or undefined when it has none. */
export async function runManifest(lake: HasLakeParts, tableName: string, partitionInput: PartitionInput, runId: string): Promise<RunManifest | undefined> {
  const table = await lake.parts.table(tableName);
  return readManifest(lake.parts.store, table, partitionOf(table, partitionInput, true), runId);
}

/** Row count of one partition's current run, or undefined when it has none. */
export async function countPartition(lake: HasLakeParts, tableName: string, partitionInput: PartitionInput): Promise<number | undefined> {
  const parts = lake.parts;
  const table = await parts.table(tableName);
  const partition = partitionOf(table, partitionInput, true);
  const pointer = await parts.catalog.getPointer(table, partition);
  if (!pointer) return undefined;
  return parts.engine.countRows(table, { partition, runId: pointer.runId, files: await runFiles(parts, table, partition, pointer.runId) });
}

/**
 * The states of the tables a writer holds, read once each and kept up to date with the writer's own batches: under
 * a table's lease nobody else moves its pointers. Each partition a batch moved (or staged, in a held sync: the
 * layers below plan against it) takes its new run and signature; one that failed keeps its state (its pointer did
 * not move). A batch that throws, or a single replace, forgets the table: the next read goes to the catalog. Pins
 * are read with the states; a pin set during the writer's work counts from its next writer on.
 */
export class HeldStates {
  private readonly tables = new Map<string, Map<string, PartitionState>>();

  async read(table: string, load: () => Promise<Map<string, PartitionState>>): Promise<Map<string, PartitionState>> {
    let states = this.tables.get(table);
    if (!states) {
      states = await load();
      this.tables.set(table, states);
    }
    return new Map(states);
  }

  forget(table: string): void {
    this.tables.delete(table);
  }

  /** Runs `batch` (the table's swaps) and applies its moves to the kept states, or forgets them. */
  async afterBatch(table: string, items: readonly SwapItem[], batch: () => Promise<SwapOutcome[]>): Promise<SwapOutcome[]> {
    const states = this.tables.get(table);
    this.tables.delete(table);
    const outcomes = await batch();
    if (!states) return outcomes;
    outcomes.forEach((outcome, i) => {
      if (outcome.error !== undefined || outcome.runId === undefined) return;
      const item = items[i] as SwapItem;
      const path = partitionPath(item.partition);
      // An unsigned run's state carries what its manifest records, as a read of the catalog would give it.
      const recorded = item.signature === undefined ? { fingerprint: item.fingerprint, inputs: item.inputs, rows: outcome.rows } : {};
      states.set(path, { partition: path, runId: outcome.runId, signature: item.signature, ...recorded, movedBy: "swap", pinned: states.get(path)?.pinned ?? false });
    });
    this.tables.set(table, states);
    return outcomes;
  }
}
