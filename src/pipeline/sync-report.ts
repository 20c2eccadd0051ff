import type { AuditFinding } from "../model/audit.js";
import type { IcebergCommit } from "../lake/commit/iceberg-commit.js";
import type { DatasetConfig } from "../config/pipeline-config.js";
import type { LandingSummary, Signing } from "../landing/landing.js";
import type { SinkedPartition } from "./send-to-sinks.js";
import type { PlanAction, PlanReason, PlannedPartition } from "./plan.js";

/** What one partition of a sync did. */
export interface SyncedPartition {
  readonly table: string;
  readonly layer: string;
  readonly partition: string;
  readonly action: PlanAction | "failed";
  readonly reason: PlanReason;
  readonly run?: string;
  /** The run that was current before this sync built `run` (absent for a new partition). */
  readonly previousRun?: string;
  readonly rows?: number;
  readonly seconds: number;
  readonly error?: string;
  /** What the partition's data audits found: warnings, or the errors that kept its pointer where it was. */
  readonly audits?: readonly AuditFinding[];
  /** Built and audited, its pointer not moved: the sync is held (`lakeswap publish`). */
  readonly staged?: boolean;
  /** `write: append`: the files whose rows of the partition were appended by difference (the rows it did not hold yet). */
  readonly byDifference?: readonly string[];
}

/** Totals of one layer, or of the whole sync. */
interface SyncTotals {
  readonly built: number;
  readonly skipped: number;
  readonly failed: number;
  readonly rows: number;
  readonly seconds: number;
}

/** How the delivery was landed: rows read = rows loaded + rows dead-lettered. */
export interface LoadReport {
  readonly dataset: string;
  readonly delivery: string;
  readonly files: readonly string[];
  readonly rowsRead: number;
  readonly rowsLoaded: number;
  /** `write: append`: of `rowsLoaded`, those appended to the partitions this sync built (the others were held already). */
  readonly rowsAppended?: number;
  readonly rowsDeadLettered: number;
  readonly deadLetterTable?: string;
  /**
   * `write: append` with a dead-letter table: the partitions its bad rows are in, one per file (`delivery=<the file's
   * id>`, a digest of its name and bytes): `written` by this sync (staged, in a held one), or else kept already (the
   * same file, unchanged, dead-lettered by an earlier sync). Absent for other write modes: their bad rows are in
   * `delivery=<delivery>`.
   */
  readonly deadLetterPartitions?: readonly DeadLetterPartition[];
  /** Of `rowsDeadLettered`, those kept already by an earlier sync (in `deadLetterPartitions` not written); with them only. */
  readonly rowsDeadLetteredBefore?: number;
  /** How the raw signatures were computed: `native` (lakeswap's DuckDB extension) or `sql` (the same signatures, slower), with why. */
  readonly signing: Signing;
  /** An http source: the days asked for, and how many of them could not be fetched (`files` are where they were kept while landed). */
  readonly fetched?: { readonly days: number; readonly failed: number };
  /**
   * `write: append`: the files whose last record was held back, not written whole yet (no line end, or a quote left
   * open): its row is appended once it is, or once the file has not changed for a minute.
   */
  readonly unterminated?: readonly string[];
}

/** A partition of a dead-letter table that a load's bad rows are in (`LoadReport.deadLetterPartitions`). */
export interface DeadLetterPartition {
  readonly partition: string;
  readonly files: readonly string[];
  readonly rows: number;
  readonly written: boolean;
}

/** The totals of one layer of a sync. */
export type LayerReport = { readonly dataset: string; readonly layer: string; readonly table: string } & SyncTotals;

/** The report of a sync. */
export interface SyncReport {
  /** The id of this sync's record: `lakeswap rollback --sync ID` moves back every pointer it moved. */
  readonly syncId: string;
  readonly partitions: readonly SyncedPartition[];
  readonly layers: readonly LayerReport[];
  readonly loads: readonly LoadReport[];
  readonly totals: SyncTotals;
  /** What each layer's sinks (PostgreSQL) got: per sink and partition, sent / skipped / failed / removed. */
  readonly sinks: readonly SinkedPartition[];
  /** Set when the sync is held: its runs are staged, its pointers did not move (`lakeswap publish SYNC_ID` moves them). */
  readonly held?: { readonly status: "held" | "publishing" | "published" | "discarded"; readonly reason: string };
  /** The Iceberg snapshot committed in each `iceberg: true` table the sync changed (absent when none). */
  readonly snapshots?: readonly IcebergCommit[];
  /**
   * The schema changes the sync made (docs/lake.md, "Schema changes"), per table (absent when none): in place, or by
   * a rebuild by swap (`rebuilt`: how many partitions it rewrote and moved).
   */
  readonly schemaChanges?: readonly {
    readonly table: string;
    readonly changes: readonly string[];
    /** Rebuilt by swap: how many partitions were rewritten. */
    readonly rebuilt?: number;
    /** The partition keys changed: the layout the table was built in and switched to (its folder on the embedded lake). */
    readonly layout?: string;
  }[];
}

/**
 * How a delivery was landed, from its landing (or the summary kept of it); an append's with the dead-letter partitions
 * its bad rows are in (none in a summary: a delivery with bad rows is landed anew).
 */
export function loadReport(dataset: DatasetConfig, delivery: LandingSummary, deadLetters: readonly DeadLetterPartition[] = []): LoadReport {
  const byFile =
    dataset.write === "append" && dataset.deadLetter
      ? { deadLetterPartitions: deadLetters, rowsDeadLetteredBefore: deadLetters.filter((p) => !p.written).reduce((sum, p) => sum + p.rows, 0) }
      : {};
  return {
    dataset: dataset.name,
    delivery: delivery.id,
    files: delivery.files,
    rowsRead: delivery.rowsRead,
    rowsLoaded: delivery.rowsLoaded,
    rowsDeadLettered: delivery.rowsRejected,
    deadLetterTable: dataset.deadLetter,
    ...byFile,
    signing: delivery.signing,
    ...(delivery.unterminated ? { unterminated: delivery.unterminated } : {}),
  };
}

/** The report of a layer that builds nothing. */
export function skipped(table: string, layer: string, plan: readonly PlannedPartition[]): SyncedPartition[] {
  return plan.map((p) => ({ table, layer, partition: p.partition, action: "skip", reason: p.reason, seconds: 0 }));
}

/** Built, skipped and failed partitions and rows of `results`, over `elapsedMs`. */
export function totals(results: readonly SyncedPartition[], elapsedMs: number): SyncTotals {
  return {
    built: results.filter((r) => r.action === "build").length,
    skipped: results.filter((r) => r.action === "skip").length,
    failed: results.filter((r) => r.action === "failed").length,
    rows: results.reduce((sum, r) => sum + (r.rows ?? 0), 0),
    seconds: elapsedMs / 1000,
  };
}
