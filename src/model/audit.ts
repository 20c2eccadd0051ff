// Data audits: what a staged run's rows must satisfy before its pointer moves (write-audit-publish).

/** Whether a failed audit keeps the partition's pointer where it was (`error`) or is only reported (`warn`). */
type AuditSeverity = "error" | "warn";

/** A literal an audit compares a column with: cast to the column's type where it is used. */
export type AuditValue = string | number | boolean;

/** What one audit checks. Checks on columns name columns of the audited table (or its partition keys). */
export type AuditCheck =
  /** No row has NULL in any of these columns. */
  | { readonly kind: "not_null"; readonly columns: readonly string[] }
  /** No two rows share these columns' values: within the partition, or across the table as it will be after the swap. */
  | { readonly kind: "unique"; readonly columns: readonly string[]; readonly scope: "partition" | "table" }
  /** Every non-NULL value of the column is one of these. */
  | { readonly kind: "accepted_values"; readonly column: string; readonly values: readonly AuditValue[] }
  /** Every non-NULL value of the column is at least `min` and at most `max` (either may be absent). */
  | { readonly kind: "range"; readonly column: string; readonly min?: AuditValue; readonly max?: AuditValue }
  /**
   * The partition's rows: at least `min`, at most `max`, and changed by at most `maxChange` (a fraction, 0.5 for 50%)
   * against the run it replaces (a new partition has nothing to compare with).
   */
  | { readonly kind: "row_count"; readonly min?: number; readonly max?: number; readonly maxChange?: number }
  /** The newest value of the column, over the table as it will be after the swap, is at most `maxAgeMs` old. */
  | { readonly kind: "freshness"; readonly column: string; readonly maxAgeMs: number; readonly maxAge: string }
  /**
   * A SELECT returning the failing rows of one partition: the audited table's name stands for the staged partition's
   * rows (partition columns included), `{{ key }}` for the partition's values; it reads nothing else.
   */
  | { readonly kind: "sql"; readonly sql: string };

/** One audit of a table, resolved from the config. */
export interface AuditSpec {
  /** Shown in reports: the config's `name`, or the check with its columns, e.g. `not_null(amount)`. */
  readonly name: string;
  readonly severity: AuditSeverity;
  readonly check: AuditCheck;
}

/** How many rows of a failing audit's partition are shown. */
export const AUDIT_SAMPLE_ROWS = 5;

/** An audit one staged run failed. */
export interface AuditFinding {
  readonly audit: string;
  readonly severity: AuditSeverity;
  /** The partition's path (`day=2026-11-01`; "" for a table without partition keys). */
  readonly partition: string;
  /** What failed: rows (not_null, accepted_values, range, sql), duplicated keys (unique), or 1 (row_count, freshness). */
  readonly failing: number;
  /** What the count counts, and what was expected (e.g. "rows with amount NULL", "rows 12, previous run 1000, at most 50% change"). */
  readonly detail: string;
  /** Up to AUDIT_SAMPLE_ROWS failing rows (or keys), values JSON-safe. */
  readonly samples: readonly Readonly<Record<string, unknown>>[];
}

/** One line naming a finding, for errors and text reports: `not_null(amount) failed on day=2026-11-01: 3 rows with amount NULL`. */
export function describeFinding(finding: AuditFinding, table: string): string {
  const where = finding.partition === "" ? table : `${table}/${finding.partition}`;
  return `audit ${finding.audit} ${finding.severity === "error" ? "failed" : "warned"} on ${where}: ${finding.detail}`;
}
