import { describeFinding, type AuditCheck, type AuditFinding, type AuditSpec } from "../../model/audit.js";
import { AuditError } from "../../model/errors.js";
import { partitionPath, type Partition } from "../../model/partition.js";
import type { TableDefinition } from "../../model/table.js";
import { mapLimited } from "../../shared/map-limited.js";
import { currentRuns, readManifest, type LakeContext } from "../runs.js";

/** A staged run, audited from its files (./swap.ts): what the data audits take of it. */
export interface StagedRun {
  readonly item: { readonly partition: Partition };
  readonly path: string;
  readonly runId: string;
  readonly files: readonly { readonly key: string }[];
  readonly rows: number;
  /** The run it would replace, if any, and that run's rows where they were read already. */
  readonly current?: { readonly runId: string };
  readonly previousRows?: number;
}

/**
 * The data audits of a batch's staged runs (write-audit-publish), before any pointer moves: `row_count` from the
 * rows the file audit counted (and the replaced run's manifest), the others by the Landing port over the runs'
 * files (and, for audits over the whole table, the current runs of the table's other partitions). Returns each
 * partition's findings, warnings included.
 */
async function auditStagedRuns(ctx: LakeContext, table: TableDefinition, staged: readonly StagedRun[], audits: readonly AuditSpec[], now: Date): Promise<Map<string, AuditFinding[]>> {
  const findings = new Map<string, AuditFinding[]>();
  if (audits.length === 0 || staged.length === 0) return findings;
  const add = (finding: AuditFinding): void => {
    findings.set(finding.partition, [...(findings.get(finding.partition) ?? []), finding]);
  };
  for (const audit of audits) {
    if (audit.check.kind !== "row_count") continue;
    const check = audit.check;
    const previous = check.maxChange === undefined ? [] : await mapLimited(staged, 16, (run) => previousRows(ctx, table, run));
    staged.forEach((run, i) => {
      const detail = rowCountFailure(check, run.rows, previous[i]);
      if (detail !== undefined) add({ audit: audit.name, severity: audit.severity, partition: run.path, failing: 1, detail, samples: [] });
    });
  }
  const wholeTable = audits.some((a) => (a.check.kind === "unique" && a.check.scope === "table") || a.check.kind === "freshness");
  const stagedPaths = new Set(staged.map((run) => run.path));
  const others = wholeTable
    ? ((await currentRuns(ctx, { tables: [table.name] }))[0]?.partitions ?? []).filter((p) => !stagedPaths.has(partitionPath(p.partition)) && p.files.length > 0)
    : [];
  const found = await ctx.landing.auditRuns({
    table,
    audits,
    staged: staged.map((run) => ({ partition: run.item.partition, runId: run.runId, files: run.files.map((f) => f.key) })),
    others,
    now,
  });
  for (const finding of found) add(finding);
  return findings;
}

/** The rows of the run a staged run replaces: known, or from its manifest (none for a new partition). */
async function previousRows(ctx: LakeContext, table: TableDefinition, run: StagedRun): Promise<number | undefined> {
  if (run.previousRows !== undefined || !run.current) return run.previousRows;
  return (await readManifest(ctx.store, table, run.item.partition, run.current.runId))?.rows;
}

/** Why a partition's rows fail a row_count audit, or undefined when they pass. */
function rowCountFailure(check: Extract<AuditCheck, { kind: "row_count" }>, rows: number, previous: number | undefined): string | undefined {
  if (check.min !== undefined && rows < check.min) return `${rows} rows, fewer than min ${check.min}`;
  if (check.max !== undefined && rows > check.max) return `${rows} rows, more than max ${check.max}`;
  if (check.maxChange === undefined || previous === undefined) return undefined;
  const change = previous === 0 ? (rows === 0 ? 0 : Infinity) : Math.abs(rows - previous) / previous;
  if (change <= check.maxChange + 1e-12) return undefined;
  const percent = (fraction: number) => `${+(fraction * 100).toFixed(1)}%`;
  return `${rows} rows against ${previous} in the run it replaces: a change of ${Number.isFinite(change) ? percent(change) : "more than 100%"}, above max_change ${percent(check.maxChange)}`;
}

/** The error of a partition whose staged run failed error audits: its pointer stays, its run is kept for inspection. */
function auditFailure(table: TableDefinition, path: string, runId: string, prefix: string, findings: readonly AuditFinding[]): AuditError | undefined {
  const errors = findings.filter((f) => f.severity === "error");
  if (errors.length === 0) return undefined;
  const label = path === "" ? table.name : `${table.name}/${path}`;
  return new AuditError(
    `${errors.map((f) => describeFinding(f, table.name)).join("; ")}; the pointer of ${label} was not moved, and run ${runId} is kept for inspection under ${prefix} ` +
      "(lakeswap gc removes it after the grace window). Fix the delivery or the layer's SQL and rerun, or relax the audit in lakeswap.yaml",
  );
}

/**
 * The gate before the pointers move: the staged runs that pass every error audit, and every run's findings. A
 * run that fails one is reported through `fail` and kept where it is (never current, an incomplete run to GC); an
 * audit that cannot run at all fails every run of the batch alike.
 */
export async function gateOnAudits<T extends StagedRun & { readonly prefix: string }>(
  ctx: LakeContext,
  table: TableDefinition,
  staged: readonly T[],
  audits: readonly AuditSpec[] | undefined,
  now: Date,
  fail: (run: T, error: unknown) => void,
): Promise<{ passed: T[]; findings: Map<string, AuditFinding[]> }> {
  if (!audits?.length) return { passed: [...staged], findings: new Map() };
  let findings: Map<string, AuditFinding[]>;
  try {
    findings = await auditStagedRuns(ctx, table, staged, audits, now);
  } catch (error) {
    for (const run of staged) fail(run, error);
    return { passed: [], findings: new Map() };
  }
  const passed = staged.filter((run) => {
    const error = auditFailure(table, run.path, run.runId, run.prefix, findings.get(run.path) ?? []);
    if (error) fail(run, error);
    return error === undefined;
  });
  return { passed, findings };
}
