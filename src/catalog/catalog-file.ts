import { createHash } from "node:crypto";
import type { TableSnapshot } from "../model/build.js";
import { partitionPath } from "../model/partition.js";

/** One table's share of a catalog file update: its current runs, read under its writer lease, or `undefined` once the table is gone. */
export interface CatalogFileTable {
  readonly name: string;
  readonly snapshot: TableSnapshot | undefined;
}

/**
 * The file plain readers open instead of globbing the folders (the embedded lake's `lake.duckdb`): one view per table
 * over the exact files of its current runs. A writer updates the views of the tables it holds, once its pointers
 * moved and while it still holds their leases, so a view only ever changes from one writer's finished state to the
 * next; the views of other tables are kept as they are.
 */
export interface CatalogFile {
  /** Where the file is, for messages. */
  readonly location: string;
  /**
   * Replaces the views of `tables` (drops those whose snapshot is undefined) and renames the new file into place,
   * one update at a time across processes. `fence` is called right before the rename (the writer still holds the
   * tables' leases); if it throws, the file is left as it was.
   */
  update(tables: readonly CatalogFileTable[], fence?: () => Promise<void>, history?: CatalogFileHistory): Promise<void>;
  /** The tables the file has a view of, each with the `pointersFingerprint` of the state it shows (none when there is no file). */
  tableStates(): Promise<Map<string, string>>;
  /**
   * Per table of `tables`, the run of each partition its view shows (by partition path), where the file keeps that
   * state (a table a sync wrote); tables without it are left out.
   */
  shownRuns?(tables: readonly string[]): Promise<Map<string, ReadonlyMap<string, string>>>;
  /** A hint, which never fails: an update is likely to follow (a writer took leases); get ready for it meanwhile. */
  prepare?(): void;
}

/**
 * The sync an update belongs to, and how long the file keeps a past sync's views: each table the sync changed also
 * gets `<table>__at_<sync id>` (its state right after the sync), kept while its files are (GC keeps a run's files
 * for the grace window after it stopped being current).
 */
export interface CatalogFileHistory {
  readonly syncId?: string;
  readonly graceMs: number;
}

/**
 * What a table's view shows, in one string: each partition's current run (and, in an ingested table, whose runs gain
 * files as segments land, the signature that moved with each), and its columns. A view whose fingerprint differs from the table's
 * pointers now is stale (a writer killed between its moves and its rewrite of the file): rewritten by the next
 * command that holds the table's lease.
 */
export function pointersFingerprint(snapshot: TableSnapshot): string {
  const ingest = snapshot.table.ingest === true;
  const runs = snapshot.partitions.map((p) => `${partitionPath(p.partition)}=${p.runId}${ingest && p.signature !== undefined ? `@${p.signature}` : ""}`).sort();
  // A schema changed in place changes the view (its columns, their types) with no pointer moved.
  const columns = snapshot.table.columns.map((c) => `${c.name} ${c.type}`).join(",");
  return createHash("sha256").update([columns, ...runs].join("\n")).digest("hex").slice(0, 32);
}
