import { duckdbStorageType } from "../model/column-types.js";
import type { PartitionSnapshot, TableSnapshot } from "../model/build.js";
import { parsePartitionPath, partitionPath } from "../model/partition.js";
import { quoteIdentifier, quoteLiteral } from "../model/sql.js";
import { parseTableDefinition, type TableDefinition } from "../model/table.js";
import { tableViewSelect } from "../engine/duckdb-run.js";

/*
 * The past syncs' views of the catalog file (`<table>__at_<sync id>`), each a table's state right after a sync, as a
 * chain: the newest reads the table's view itself, and each one reads the next newer one but for the partitions that
 * changed since, whose runs of then it reads instead. A past view thus names the files of the partitions that changed
 * between its sync and the next one only, not every file of the table (a view's text is read whole by every reader
 * that opens the file, and written whole by every update: with a view per sync naming every file, a table of
 * thousands of partitions synced every few minutes made a file of tens of megabytes that grew with each sync). Each
 * link costs a query of an old view a few milliseconds, so a chain is at most MAX_CHAIN views long: every MAX_CHAIN-th
 * past view names all its files and reads no newer one.
 */

/** Most past views a query of one reads through, itself included. */
export const MAX_CHAIN = 10;

/** One partition as a view shows it: its run and the files read of it. */
export interface ShownRun {
  readonly runId: string;
  readonly files: readonly string[];
}

/** What a table's view shows, by partition path. */
export type ShownState = ReadonlyMap<string, ShownRun>;

/** A past view's partitions that changed after its sync, each with what it showed then (null: it had no such partition). */
export type Overrides = ReadonlyMap<string, ShownRun | null>;

/** The state a table's view shows of a snapshot: every partition, emptied ones too (they hide a newer state's rows). */
export function shownState(snapshot: TableSnapshot): ShownState {
  return new Map(snapshot.partitions.map((p) => [partitionPath(p.partition), { runId: p.runId, files: [...p.files] }]));
}

/** A state or overrides as the file's records keep them: `[path, run, files]`, or `[path, null]` for no partition. */
export function encodeShown(state: ReadonlyMap<string, ShownRun | null>): string {
  return JSON.stringify([...state].map(([path, run]) => (run ? [path, run.runId, run.files] : [path, null])));
}

/** A stored state or overrides; undefined for none (a file written before past views were chained) or for text that is not one. */
export function decodeShown(text: unknown): Map<string, ShownRun | null> | undefined {
  if (typeof text !== "string") return undefined;
  try {
    const rows = JSON.parse(text) as unknown;
    if (!Array.isArray(rows)) return undefined;
    const state = new Map<string, ShownRun | null>();
    for (const row of rows) {
      if (!Array.isArray(row) || typeof row[0] !== "string") return undefined;
      const [path, runId, files] = row as [string, unknown, unknown];
      if (runId === null) state.set(path, null);
      else if (typeof runId === "string" && Array.isArray(files) && files.every((f) => typeof f === "string")) state.set(path, { runId, files: files as string[] });
      else return undefined;
    }
    return state;
  } catch {
    return undefined;
  }
}

/** A stored state (every partition with a run); undefined for none or for text that is not one. */
export function decodeState(text: unknown): ShownState | undefined {
  const state = decodeShown(text);
  if (!state || [...state.values()].some((run) => run === null)) return undefined;
  return state as ShownState;
}

/** The partitions whose run or files differ between `before` and `after`, each with what `before` showed (null: absent). */
export function changedPartitions(before: ShownState, after: ShownState): Map<string, ShownRun | null> {
  const changed = new Map<string, ShownRun | null>();
  for (const [path, run] of before) {
    const now = after.get(path);
    if (!now || now.runId !== run.runId || now.files.join("\n") !== run.files.join("\n")) changed.set(path, run);
  }
  for (const path of after.keys()) if (!before.has(path)) changed.set(path, null);
  return changed;
}

/** A past view's overrides once more partitions changed: one it overrides already keeps what it showed then. */
export function mergeOverrides(overrides: Overrides, changed: Overrides): Map<string, ShownRun | null> {
  const merged = new Map(overrides);
  for (const [path, run] of changed) if (!merged.has(path)) merged.set(path, run);
  return merged;
}

/**
 * The SELECT of a past state read from its runs' files alone (a view at the end of a chain), as the table's view was
 * then: `after` (the state its next newer view shows) but for its overrides.
 */
export function frozenViewSelect(table: TableDefinition, after: ShownState, overrides: Overrides, pathOf: (key: string) => string, quotePath: (path: string) => string): string {
  const partitions: PartitionSnapshot[] = [];
  for (const path of [...new Set([...after.keys(), ...overrides.keys()])].sort()) {
    const run = overrides.has(path) ? overrides.get(path) : after.get(path);
    if (run && run.files.length > 0) partitions.push({ partition: parsePartitionPath(path, table.partitionKeys), runId: run.runId, files: run.files });
  }
  return tableViewSelect(table, partitions, pathOf, quotePath);
}

/** A table definition as a past view's record keeps it (the columns its state had). */
export function encodeDefinition(table: TableDefinition): string {
  return JSON.stringify(table);
}

/** A past view's definition as encodeDefinition wrote it; undefined for none or for text that is not one. */
export function decodeDefinition(text: unknown, name: string): TableDefinition | undefined {
  if (typeof text !== "string") return undefined;
  try {
    return parseTableDefinition(JSON.parse(text), "a past view's record in the catalog file", name);
  } catch {
    return undefined;
  }
}

/**
 * The SELECT of a past state's view, with the columns of `table` as they were then: the rows of `next` (the table's
 * view, or the next newer past view, with the columns it has) but for the partitions in `overrides`, and those
 * partitions' runs of then. A column `next` lacks is NULL there; every column is cast to its type of then.
 */
export function pastViewSelect(
  table: TableDefinition,
  next: { readonly relation: string; readonly columns: ReadonlySet<string> },
  overrides: Overrides,
  pathOf: (key: string) => string,
  quotePath: (path: string) => string,
): string {
  const keys = table.partitionKeys;
  const nextColumns = table.columns.map((c) => (next.columns.has(c.name) ? quoteIdentifier(c.name) : `CAST(NULL AS ${duckdbStorageType(c.type)}) AS ${quoteIdentifier(c.name)}`));
  const nextKeys = keys.map((key) => `CAST(${quoteIdentifier(key)} AS VARCHAR) AS ${quoteIdentifier(key)}`);
  const newer = `SELECT ${[...nextColumns, ...nextKeys].join(", ")} FROM ${next.relation}${overrideFilter(keys, overrides)}`;
  const then: PartitionSnapshot[] = [];
  for (const [path, run] of overrides) {
    if (run && run.files.length > 0) then.push({ partition: parsePartitionPath(path, keys), runId: run.runId, files: run.files });
  }
  const union = then.length === 0 ? newer : `${newer} UNION ALL BY NAME ${tableViewSelect(table, then, pathOf, quotePath)}`;
  const cast = table.columns.map((c) => `CAST(${quoteIdentifier(c.name)} AS ${duckdbStorageType(c.type)}) AS ${quoteIdentifier(c.name)}`);
  return `SELECT ${[...cast, ...keys.map(quoteIdentifier)].join(", ")} FROM (${union})`;
}

/** The WHERE that leaves out the overridden partitions (a table without partition keys: all of it, or nothing). */
function overrideFilter(keys: readonly string[], overrides: Overrides): string {
  if (overrides.size === 0) return "";
  if (keys.length === 0) return " WHERE false";
  const values = [...overrides.keys()].map((path) => {
    const partition = parsePartitionPath(path, keys);
    const literals = keys.map((_, i) => quoteLiteral(partition.values[i] as string));
    return keys.length === 1 ? literals[0] : `(${literals.join(", ")})`;
  });
  const columns = keys.length === 1 ? quoteIdentifier(keys[0] as string) : `(${keys.map(quoteIdentifier).join(", ")})`;
  return ` WHERE ${columns} NOT IN (${values.join(", ")})`;
}
