/**
 * Errors that speak to the user: a stable `code`, whether retrying may help,
 * and the process exit code the CLI uses for it (documented in the README).
 */
export type ErrorCode =
  | "INVALID_INPUT"
  | "NOT_FOUND"
  | "CONFLICT"
  | "LEASE_HELD"
  | "LEASE_LOST"
  | "AUDIT_FAILED"
  | "BUILD_FAILED"
  | "PARTIAL_FAILURE"
  | "STORE_ERROR"
  | "NO_SPACE"
  | "ACCESS_DENIED"
  | "INTERRUPTED";

/** Exit codes of the `lakeswap` CLI, one per error code (0 = success, 1 = unexpected internal error). */
export const EXIT_CODES: Readonly<Record<ErrorCode, number>> = {
  INVALID_INPUT: 2,
  NOT_FOUND: 3,
  CONFLICT: 9,
  LEASE_HELD: 4,
  LEASE_LOST: 4,
  AUDIT_FAILED: 5,
  BUILD_FAILED: 6,
  PARTIAL_FAILURE: 7,
  STORE_ERROR: 8,
  NO_SPACE: 10,
  ACCESS_DENIED: 11,
  INTERRUPTED: 130,
};

/** Base class of every error lakeswap raises on purpose. */
export class LakeswapError extends Error {
  readonly code: ErrorCode;
  readonly retryable: boolean;

  constructor(code: ErrorCode, message: string, options: { retryable?: boolean; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "LakeswapError";
    this.code = code;
    this.retryable = options.retryable ?? false;
  }

  get exitCode(): number {
    return EXIT_CODES[this.code];
  }
}

/** Bad input from the command line, config or data: names the value and the fix. */
export class InvalidInputError extends LakeswapError {
  constructor(message: string) {
    super("INVALID_INPUT", message);
    this.name = "InvalidInputError";
  }
}

/** A table, partition or run that does not exist. */
export class NotFoundError extends LakeswapError {
  constructor(message: string) {
    super("NOT_FOUND", message);
    this.name = "NotFoundError";
  }
}

/** Another writer holds the table's lease. */
export class LeaseHeldError extends LakeswapError {
  constructor(message: string) {
    super("LEASE_HELD", message, { retryable: true });
    this.name = "LeaseHeldError";
  }
}

/**
 * An ingested table already holds an object at the key a segment's file goes to, with other rows: the lake holds
 * something else there (two collectors sharing a log id, or a defect). Never overwritten.
 */
export class IngestFileConflictError extends LakeswapError {
  constructor(
    message: string,
    readonly key: string,
  ) {
    super("CONFLICT", message);
    this.name = "IngestFileConflictError";
  }
}

/**
 * A new run's prefix holds files already: another writer issued the same run id (rare: ids are random within a second),
 * or a defect. Nothing of the other run is overwritten; the writer that meets it takes a new id.
 */
export class RunTakenError extends LakeswapError {
  constructor(message: string) {
    super("CONFLICT", message);
    this.name = "RunTakenError";
  }
}

/**
 * A table another writer created with another definition between this writer's read (no such table) and its own
 * creation. Nothing was written over the other's definition; declaring the table again judges it against that one.
 */
export class TableCreatedMeanwhileError extends LakeswapError {
  constructor(table: string, where: string) {
    super("CONFLICT", `table '${table}' was created by another writer in ${where} while this one created it, with another definition; nothing was written over it: rerun to declare it against that one`, { retryable: true });
    this.name = "TableCreatedMeanwhileError";
  }
}

/** A build finished but its audit refused the result; the pointer did not move. */
export class AuditError extends LakeswapError {
  constructor(message: string) {
    super("AUDIT_FAILED", message);
    this.name = "AuditError";
  }
}

/** The engine could not build the run (SQL error, schema mismatch); the pointer did not move. */
export class BuildError extends LakeswapError {
  constructor(message: string, cause?: unknown) {
    super("BUILD_FAILED", message, { cause });
    this.name = "BuildError";
  }
}

/** Returns the message of anything thrown, for reports. */
export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * Whether an error (or one it was caused by) is a full disk or quota: a Node error with ENOSPC or
 * EDQUOT, or DuckDB's IO error, which carries only the system's text ("No space left on device").
 */
export function isNoSpace(error: unknown): boolean {
  for (let current = error, depth = 0; current !== undefined && current !== null && depth < 5; depth += 1) {
    const code = (current as { code?: unknown }).code;
    if (code === "ENOSPC" || code === "EDQUOT" || code === "NO_SPACE") return true;
    if (/No space left on device|Disk quota exceeded/i.test(errorMessage(current))) return true;
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}
