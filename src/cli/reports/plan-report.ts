import type { PlannedPartition } from "../../pipeline/pipeline.js";
import type { PlannedSchemaChange } from "../../pipeline/schema-changes.js";
import { formatTable } from "../output.js";
import { differenceLines } from "./sync-report.js";

/** `lakeswap plan`'s report: each partition to build or skip, and the totals. */
export interface PlanReport {
  readonly partitions: readonly PlannedPartition[];
  readonly totals: { readonly build: number; readonly skip: number };
  /**
   * The schema changes a sync would make first, per table (docs/lake.md, "Schema changes"): in place, or by a rebuild
   * of every partition (`rebuilds`, with `--rebuild-schema`).
   */
  readonly schemaChanges: readonly PlannedSchemaChange[];
}

/** The plan's report from its partitions and the schema changes a sync would make. */
export function planReport(plan: readonly PlannedPartition[], schemaChanges: PlanReport["schemaChanges"] = []): PlanReport {
  const build = plan.filter((p) => p.action === "build").length;
  return { partitions: plan, totals: { build, skip: plan.length - build }, schemaChanges };
}

/** `lakeswap plan`'s text report: a row per partition (with an error column when one has an error), then the totals. */
export function planReportText({ partitions: plan, totals, schemaChanges }: PlanReport): string {
  return [
    ...schemaChanges.map((s) =>
      s.relayout
        ? `${s.table}: built aside in a new layout from its ${s.rebuilds?.length ?? 0} current partition(s), then switched to: ${s.changes.join("; ")}`
        : s.rebuilds
          ? `${s.table}: schema rebuilt by swap, every partition rewritten (${s.rebuilds.length}: ${s.rebuilds.slice(0, 5).join(", ")}${s.rebuilds.length > 5 ? ", …" : ""}): ${s.changes.join("; ")}`
          : `${s.table}: schema changes in place: ${s.changes.join("; ")}`,
    ),
    ...(schemaChanges.length > 0 ? [""] : []),
    plan.some((p) => p.error !== undefined)
      ? formatTable(["layer", "table", "partition", "action", "reason", "error"], plan.map((p) => [p.layer, p.table, p.partition, p.action, p.reason, p.error]))
      : formatTable(["layer", "table", "partition", "action", "reason"], plan.map((p) => [p.layer, p.table, p.partition, p.action, p.reason])),
    ...differenceLines(plan, true),
    "",
    `${totals.build} to build, ${totals.skip} to skip`,
  ].join("\n");
}
