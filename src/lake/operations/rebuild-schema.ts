import type { Catalog, Pointer, PointerMove } from "../../catalog/catalog.js";
import { LakeswapError, errorMessage } from "../../model/errors.js";
import { partitionPath } from "../../model/partition.js";
import { newRunIdAfter } from "../../model/run-id.js";
import { isIntegerType, type SchemaChange } from "../../model/schema-change.js";
import { defineTable, storageName, type TableDefinition } from "../../model/table.js";
import { faultPoint } from "../../shared/faults.js";
import { mapLimited } from "../../shared/map-limited.js";
import { MOVES_PER_ENTRY } from "../commit/swap.js";
import { movePointers } from "../commit/move.js";
import { runLocation } from "../layout.js";
import type { RunManifest } from "../manifest.js";
import type { LakeParts } from "../parts.js";
import { listRunFiles, readManifest, runFileNames, writeManifest } from "../runs.js";
import { DEFAULT_COMPACT_FILE_BYTES } from "./compact.js";
import type { ProgressListener } from "./gc.js";

/** Runs rewritten at once (each one DuckDB query over the landing's shared instance, and a placement). */
const REWRITES_AT_ONCE = 4;

/** One pointer a rebuild moves (a sync records it before it moves: `rollback --sync` moves it back). */
export interface RebuildMove {
  readonly partition: string;
  readonly runId: string;
  /** Absent where the partition had no run (a new layout's, ./relayout.ts). */
  readonly previousRunId?: string;
}

/** How a rebuild signs the runs it writes and reports the pointers it moves. */
export interface RebuildOptions {
  /**
   * The columns a raw table's runs are signed over (its dataset's signed columns). Undefined: a derived table, whose
   * rewritten runs keep their pointer's chained signature (their inputs and transform are the same).
   */
  readonly signatureColumns?: readonly string[];
  /** Told each batch of moves before its pointers move; resolves once recorded. */
  readonly intend: (moves: readonly RebuildMove[]) => Promise<void>;
  /** Told the moves whose pointers moved. */
  readonly moved: (moves: readonly RebuildMove[]) => void;
  /**
   * Told the rebuild was refused before anything moved (a value its new type cannot hold): the definition is as it was,
   * so the change recorded before it is withdrawn (`lakeswap syncs` and `history --schema` must not list it as made).
   */
  readonly refused?: () => Promise<void>;
  readonly onProgress?: ProgressListener;
}

/** A run rewritten under the new definition and placed, its pointer not moved yet. */
interface Rewritten {
  readonly pointer: Pointer;
  readonly manifest: RunManifest;
}

/**
 * Rebuilds a table under a definition that cannot be reached in place (`sync --rebuild-schema`, docs/lake.md "Schema
 * changes"), under the table's lease, and writes the definition: every run current since before the change is
 * rewritten aside under the new columns (each read by name, a renamed one under its old name, each value cast to its
 * new type: a value the type cannot hold stops the rebuild before anything moves); then the definition and the
 * pointers move, in the order the catalog's readers need (`readsRunsByName`):
 * - the embedded lake's readers read every run by name under the definition: it moves first, marked `rebuilding`
 *   (a run not rewritten yet then reads as its rewrite, a renamed column from its old name), then the pointers in
 *   batches, each recorded first (outbox, then the caller's record), then the definition without the mark. A sync
 *   killed on the way leaves the mark, and the next sync that declares the table finishes the rebuild.
 * - Glue's readers (Athena) read each partition under its own columns coerced to the table's: the table first loses
 *   the columns dropped (a partition's column the table lacks is not read), then each moved partition gets the new
 *   columns (narrower than the table's: the caller refused what Athena cannot read), and last the table gets them.
 * The old runs stay for rollback until GC. Returns the moves, in partition order.
 *
 * A rebuild into a new layout of the table (`change.table.layout` another than `existing`'s: what Athena could not read
 * while pointers move, ./relayout.ts) writes no definition: the rewritten runs' pointers are the new layout's first,
 * read by nobody until the writer switches the table to it.
 */
export async function rebuildRuns(parts: LakeParts, existing: TableDefinition, change: SchemaChange, options: RebuildOptions): Promise<RebuildMove[]> {
  const table = change.table;
  const aside = storageName(table) !== storageName(existing);
  const fence = (): Promise<void> => parts.leaseCheck(table.name);
  const mark = table.schemaChangedAt;
  const pointers = (await parts.catalog.listPointers(existing))
    .filter((p) => mark === undefined || p.runId < mark)
    .sort((a, b) => (partitionPath(a.partition) < partitionPath(b.partition) ? -1 : 1));
  let done = 0;
  const placed = new Map<Pointer, Rewritten>();
  try {
    await mapLimited(pointers, REWRITES_AT_ONCE, async (pointer) => {
      placed.set(pointer, await rewrite(parts, existing, change, pointer, options));
      done += 1;
      options.onProgress?.({ done, total: pointers.length, label: `${table.name}/${partitionPath(pointer.partition)}` });
    });
  } catch (error) {
    // Nothing moved: the runs placed so far are named by nothing (GC would take them after the grace window anyway).
    await Promise.allSettled([...placed.values()].map((r) => parts.store.delete(r.manifest.files.map((f) => f.key))));
    // Into a new layout, the change is the layout's (never switched to: the writer abandons it); in place, it was not made.
    if (!aside) await options.refused?.();
    throw error;
  }
  faultPoint("rebuild-after-place");
  const ordered = pointers.map((p) => placed.get(p) as Rewritten);
  if (aside) {
    // A new layout: nobody reads its definition before the switch.
  } else if (parts.catalog.capabilities.readsRunsByName) {
    await parts.catalog.updateTable(defineTable({ ...table, rebuilding: { renames: change.rebuild?.renames ?? {} } }), fence);
  } else {
    const lessDropped = withoutDropped(existing, table);
    if (lessDropped.columns.length < existing.columns.length) await parts.catalog.updateTable(lessDropped, fence);
  }
  faultPoint("rebuild-after-definition");
  const moves: RebuildMove[] = [];
  for (let start = 0; start < ordered.length; start += MOVES_PER_ENTRY) moves.push(...(await moveChunk(parts, table, ordered.slice(start, start + MOVES_PER_ENTRY), options, aside)));
  if (!aside) await parts.catalog.updateTable(table, fence);
  return moves;
}

/** The definition before a rebuild without the columns it drops: what Glue holds while the rebuild's pointers move. */
export function withoutDropped(existing: TableDefinition, rebuilt: TableDefinition): TableDefinition {
  return defineTable({ ...existing, columns: existing.columns.filter((c) => rebuilt.columns.some((t) => t.name === c.name)) });
}

/** Moves one chunk of rewritten runs in: outbox entry and the caller's record first, the catalog's batches, manifests. */
async function moveChunk(parts: LakeParts, table: TableDefinition, chunk: readonly Rewritten[], options: RebuildOptions, aside: boolean): Promise<RebuildMove[]> {
  // Into a new layout, a partition has no run before (its old run is the old layout's).
  const previous = (r: Rewritten) => (aside ? {} : { previousRunId: r.pointer.runId });
  const intended = chunk.map((r) => ({ partition: r.manifest.partition, runId: r.manifest.runId, ...previous(r) }));
  const entry = await parts.outbox.record(
    table,
    chunk.map((r) => ({ partition: r.manifest.partition, runId: r.manifest.runId, ...previous(r), signature: r.manifest.signature, kind: "swap" as const, manifest: r.manifest })),
  );
  await options.intend(intended);
  const pointerMoves = chunk.map((r): PointerMove => {
    const location = runLocation(parts.catalog, table, r.pointer.partition, r.manifest.runId);
    return { partition: r.pointer.partition, runId: r.manifest.runId, location, ...previous(r), signature: r.manifest.signature, kind: "swap", runFiles: runFileNames(location, r.manifest.files), newColumns: true };
  });
  // With the new definition: on Glue each moved partition gets the new columns as its own.
  await movePointers(parts.catalog, table, pointerMoves, () => parts.leaseCheck(table.name));
  faultPoint("rebuild-after-move");
  await mapLimited(chunk, 16, (r) => writeManifest(parts.store, table, r.pointer.partition, r.manifest));
  await parts.outbox.acknowledge(entry);
  options.moved(intended);
  return intended;
}

/** Rewrites one partition's current run under the new definition and places it as a new run (named by nothing yet). */
async function rewrite(parts: LakeParts, existing: TableDefinition, change: SchemaChange, pointer: Pointer, options: RebuildOptions): Promise<Rewritten> {
  const table = change.table;
  const label = `${table.name}/${partitionPath(pointer.partition)}`;
  const started = Date.now();
  // The run's files as the pointer keeps them (the embedded catalog), else listed.
  const location = runLocation(parts.catalog, existing, pointer.partition, pointer.runId);
  const [keys, before] = await Promise.all([
    pointer.runFiles ? pointer.runFiles.map((name) => `${location}${name}`) : listRunFiles(parts.store, location).then((listed) => listed.map((f) => f.key)),
    readManifest(parts.store, existing, pointer.partition, pointer.runId),
  ]);
  // After the change's own id: every run written under the new schema sorts after it (rollback tells them by it).
  const runId = newRunIdAfter([pointer.runId, table.schemaChangedAt ?? ""].sort().at(-1));
  const staged = await parts.landing
    .compactRun({
      table,
      renames: change.rebuild?.renames,
      previousTypes: previousTypes(existing, table, change.rebuild?.renames ?? {}),
      signatureColumns: options.signatureColumns,
      files: keys,
      runId,
      from: pointer.runId,
      runPrefix: runLocation(parts.catalog, table, pointer.partition, runId),
      fileBytes: DEFAULT_COMPACT_FILE_BYTES,
    })
    .catch((error: unknown) => {
      throw new LakeswapError(error instanceof LakeswapError ? error.code : "BUILD_FAILED", `partition ${label}: ${errorMessage(error)}`);
    });
  // A layer's run keeps its chained signature, an appended run the chain of its parts (each part signs as before: checked).
  const signature = options.signatureColumns === undefined || before?.appended ? pointer.signature : staged.signature;
  const resigned = before?.appended ? signedDifferently(existing, table, options.signatureColumns ?? []) : [];
  if (resigned.length > 0) {
    await staged.discard();
    throw new LakeswapError(
      "CONFLICT",
      `partition ${label} is appended to (write: append), and the change alters what its rows sign as (${resigned.join("; ")}): ` +
        `a delivery it already holds could no longer be recognised, and would be appended again. Keep the signed columns as they are (an integer may narrow), or reload the table`,
    );
  }
  const written = await staged.place();
  const now = new Date().toISOString();
  const manifest: RunManifest = {
    format: 1,
    table: table.name,
    partition: partitionPath(pointer.partition),
    runId,
    rows: staged.rows,
    files: written,
    bytes: written.reduce((sum, f) => sum + f.size, 0),
    // Into a new layout, the run is its partition's first there.
    ...(storageName(table) === storageName(existing) ? { previousRunId: pointer.runId } : {}),
    ...(signature !== undefined ? { signature } : {}),
    ...(before?.fingerprint !== undefined ? { fingerprint: before.fingerprint } : {}),
    ...(before?.inputs !== undefined ? { inputs: before.inputs } : {}),
    ...(before?.appended !== undefined ? { appended: before.appended } : {}),
    ...(before?.appendedFiles !== undefined ? { appendedFiles: before.appendedFiles } : {}),
    rebuiltFrom: pointer.runId,
    builtAt: now,
    swappedAt: now,
    buildSeconds: (Date.now() - started) / 1000,
  };
  return { pointer, manifest };
}

/**
 * A rebuild the catalog's readers could not follow while its pointers move batch by batch (Glue: Athena reads a moved
 * partition's new columns under the table's old ones only where it coerces one to the other) is built aside instead,
 * where the catalog keeps layouts apart (`createLayout`): in a new layout of the same partition keys, which readers are
 * switched to in one step once it is whole (./relayout.ts). Where it cannot be (an `iceberg: true` table, whose Iceberg
 * table on Glue keeps its spec; a catalog without layouts), it is refused naming the columns; nothing has been written
 * then. Returns the change as it is to be made.
 */
export function rebuildReadably(catalog: Pick<Catalog, "rebuildRefusal" | "createLayout">, existing: TableDefinition, change: SchemaChange): SchemaChange {
  if (!change.rebuild && !change.relayout) return change;
  const wanted = change.table;
  const why = catalog.rebuildRefusal?.(existing, wanted);
  if (why === undefined) return change;
  if (!change.relayout && catalog.createLayout && !existing.iceberg && !wanted.iceberg) return { ...change, relayout: { from: existing.partitionKeys } };
  const rekeyed = existing.partitionKeys.join(",") !== wanted.partitionKeys.join(",");
  const fix = rekeyed
    ? `Declare it with its partition keys as they are (${existing.partitionKeys.join(", ") || "none"}), or drop it (lakeswap drop-table ${wanted.name}) and load it again`
    : "Add a column of the new type instead (in place), fill it, then drop the old one with --rebuild-schema";
  throw new LakeswapError("CONFLICT", `table '${wanted.name}' cannot ${rekeyed ? "change its partition keys" : "be rebuilt by swap"} here: ${why}. ${fix}`);
}

/**
 * The signed columns whose rows would sign otherwise under `wanted` (docs/signatures.md): dropped or renamed (the
 * signature's header names them), or retyped other than from an integer type to another, whose words are the values.
 */
function signedDifferently(existing: TableDefinition, wanted: TableDefinition, signed: readonly string[]): string[] {
  // `signed` are the columns the declaration signs now; one it no longer has may have been signed (taken as signed).
  return existing.columns
    .filter((c) => signed.includes(c.name) || !wanted.columns.some((w) => w.name === c.name))
    .flatMap((c) => {
      const now = wanted.columns.find((w) => w.name === c.name);
      if (!now) return [`column ${c.name} is no longer there`];
      return now.type === c.type || (isIntegerType(c.type) && isIntegerType(now.type)) ? [] : [`column ${c.name} changes from ${c.type} to ${now.type}`];
    });
}

/** Each column's declared type before the change, by its name after (a renamed one's under its old name). */
function previousTypes(existing: TableDefinition, wanted: TableDefinition, renames: Readonly<Record<string, string>>): Record<string, string> {
  const before = new Map(existing.columns.map((c) => [c.name, c.type]));
  return Object.fromEntries(wanted.columns.flatMap((c) => {
    const type = before.get(renames[c.name] ?? c.name) ?? before.get(c.name);
    return type === undefined ? [] : [[c.name, type]];
  }));
}
