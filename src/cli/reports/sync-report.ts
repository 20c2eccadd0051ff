import type { LoadReport, SyncReport } from "../../pipeline/pipeline.js";
import { describeFinding } from "../../model/audit.js";
import { formatTable } from "../output.js";

/** `lakeswap sync`'s text report: what each dataset landed, each layer's totals, the partitions and sink writes that changed. */
export function syncReportText(result: SyncReport): string {
  // A sync that built and changed nothing is not recorded (lakeswap syncs does not list it): no command takes its id.
  const head = result.held
    ? `sync ${result.syncId}: HELD, nothing moved (${result.held.reason}); lakeswap publish ${result.syncId} moves it, lakeswap discard ${result.syncId} drops it`
    : result.totals.built > 0
      ? `sync ${result.syncId} (undo with: lakeswap rollback --sync ${result.syncId})`
      : (result.schemaChanges ?? []).length > 0
        ? `sync ${result.syncId}: nothing was built`
        : "sync: nothing was built, so nothing was recorded or needs undoing";
  const lines = [head, ""];
  for (const s of result.schemaChanges ?? []) {
    lines.push(
      s.layout !== undefined
        ? `${s.table}: built in a new layout (${s.layout}) and switched to: ${s.changes.join("; ")}`
        : s.rebuilt !== undefined
          ? `${s.table}: schema rebuilt by swap (${s.rebuilt} partitions rewritten): ${s.changes.join("; ")}`
          : `${s.table}: schema changed in place: ${s.changes.join("; ")}`,
    );
  }
  if ((result.schemaChanges ?? []).length > 0) lines.push("");
  lines.push(...result.loads.map(loadLine));
  // The same signatures either way; say so only when they took the slow path, with why.
  const slow = result.loads.find((l) => l.signing.form === "sql");
  if (slow) lines.push(`signatures computed in plain SQL, about 5x slower than with lakeswap's extension: ${slow.signing.reason ?? "not loaded"}`);
  lines.push(
    "",
    formatTable(
      ["layer", "table", "built", "skipped", "failed", "rows", "seconds"],
      result.layers.map((l) => [l.layer, l.table, l.built, l.skipped, l.failed, l.rows, l.seconds.toFixed(2)]),
    ),
  );
  lines.push(...partitionLines(result), ...sinkLines(result));
  if ((result.snapshots ?? []).length > 0) lines.push("");
  for (const s of result.snapshots ?? []) {
    lines.push(`iceberg: ${s.table} snapshot ${s.snapshotId}: +${s.addedFiles}/-${s.deletedFiles} data files, ${s.totalFiles} in all (${s.ms.toFixed(0)} ms)`);
  }
  return lines.join("\n");
}

/** One dataset's landing: where its rows came from, and how many were loaded and dead-lettered. */
function loadLine(l: LoadReport): string {
  const from = l.fetched ? `fetched ${l.fetched.days - l.fetched.failed} of ${l.fetched.days} day(s) from its http source` : `read ${l.rowsRead} rows from ${l.files.length} file(s)`;
  const rows = l.fetched ? `, ${l.rowsRead} rows` : "";
  const appended = l.rowsAppended === undefined ? "" : ` (${l.rowsAppended} appended)`;
  const held = l.unterminated
    ? `; held back the last record of ${l.unterminated.join(", ")}: not written whole yet (no line end, or a quote left open); appended once it is, or once the file is unchanged for a minute`
    : "";
  return `${l.dataset}: ${from}${rows}: ${l.rowsLoaded} loaded${appended}, ${l.rowsDeadLettered} dead-lettered${deadLetterText(l)}${held}`;
}

/** Where a load's bad rows are: the delivery's partition, or an append's by file (those kept already by an earlier sync said apart). */
function deadLetterText(l: LoadReport): string {
  if (!l.deadLetterTable) return "";
  const byFile = l.deadLetterPartitions;
  if (!byFile) return ` (${l.deadLetterTable}, delivery=${l.delivery})`;
  if (byFile.length === 0) return ` (${l.deadLetterTable})`;
  const named = byFile.slice(0, 3).map((p) => p.partition).join(", ") + (byFile.length > 3 ? ` and ${byFile.length - 3} more` : "");
  const before = l.rowsDeadLetteredBefore ? `, ${l.rowsDeadLetteredBefore} of them kept already by an earlier sync` : "";
  return `${before} (${l.deadLetterTable}, by file: ${named})`;
}

/** The partitions skipped as already appended or empty in their source, and the table of those built or failed. */
function partitionLines(result: SyncReport): string[] {
  const lines: string[] = [];
  const again = result.partitions.filter((p) => p.reason === "already appended");
  if (again.length > 0) {
    const tables = [...new Set(again.map((p) => p.table))].join(", ");
    lines.push("", `${tables}: ${again.length} partition(s) skip: already appended (they hold this delivery already; --allow-duplicates appends it again)`);
  }
  const empty = result.partitions.filter((p) => p.reason === "empty in source");
  if (empty.length > 0) {
    lines.push(
      "",
      `${empty.length} day(s) came back from the source without rows, and were left as they are (a day with rows keeps them): ` +
        `${empty.map((p) => `${p.table}/${p.partition}`).join(", ")}. If they really are empty now, set allow_empty: true under the dataset's source`,
    );
  }
  lines.push(...differenceLines(result.partitions));
  const changed = result.partitions.filter((p) => p.action !== "skip");
  if (changed.length > 0) {
    lines.push(
      "",
      formatTable(
        ["layer", "partition", "action", "reason", "run", "rows", "error"],
        changed.map((p) => [p.layer, p.partition || "(whole table)", p.staged ? "staged" : p.action, p.reason, p.run, p.rows, shortError(p)]),
      ),
    );
  }
  return [...lines, ...auditLines(result)];
}

/**
 * The partitions appended by difference, each with its files: a file no split could follow (a row edited in place, bad
 * lines or renamed files past what is recorded) had only the rows its partition did not hold appended (`planned`: has).
 */
export function differenceLines(partitions: readonly { readonly table: string; readonly partition: string; readonly byDifference?: readonly string[] }[], planned = false): string[] {
  const appended = partitions.filter((p) => (p.byDifference ?? []).length > 0);
  if (appended.length === 0) return [];
  const named = appended.map((p) => `${p.table}/${p.partition} (${(p.byDifference ?? []).join(", ")})`);
  return [
    "",
    `${appended.length} partition(s) ${planned ? "to append" : "appended"} by difference: a file changed otherwise than by growing at its end (a row edited in place, ` +
      `or renamed or fixed past what its records follow), so only its rows the partition does not hold ${planned ? "are" : "were"} appended (a row alike to one held counts as held): ${named.join(", ")}`,
  ];
}

/** A failed partition's error for the table: the audits that held it by name (their findings follow the table). */
function shortError(p: SyncReport["partitions"][number]): string | undefined {
  const held = (p.audits ?? []).filter((f) => f.severity === "error");
  if (p.action !== "failed" || held.length === 0) return p.error;
  return `held by audit ${held.map((f) => f.audit).join(", ")}; its pointer did not move`;
}

/** Every audit finding: the audit, the partition, what failed, and up to 5 sample rows. */
function auditLines(result: SyncReport): string[] {
  const findings = result.partitions.flatMap((p) => (p.audits ?? []).map((f) => ({ ...f, table: p.table })));
  if (findings.length === 0) return [];
  const lines = ["", "audits:"];
  for (const f of findings) {
    lines.push(`  ${f.severity === "error" ? "FAIL" : "WARN"} ${describeFinding(f, f.table)}`);
    for (const sample of f.samples) lines.push(`    ${JSON.stringify(sample)}`);
  }
  const held = result.partitions.filter((p) => p.action === "failed" && (p.audits ?? []).some((f) => f.severity === "error"));
  if (held.length > 0) {
    lines.push(`  ${held.length} partition(s) held: their pointers stayed where they were and their staged runs are kept for inspection until gc's grace window ends`);
  }
  return lines;
}

/** What the sinks got: counts by action, and the table of the writes that were not skipped. */
function sinkLines(result: SyncReport): string[] {
  if (result.sinks.length === 0) return [];
  const sent = result.sinks.filter((s) => s.action === "sent").length;
  const skippedCount = result.sinks.filter((s) => s.action === "skipped").length;
  const failedCount = result.sinks.filter((s) => s.action === "failed").length;
  const removed = result.sinks.filter((s) => s.action === "removed").length;
  const lines = ["", `sinks: ${sent} partition(s) sent, ${skippedCount} skipped (unchanged), ${failedCount} failed${removed > 0 ? `, ${removed} removed (gone from the lake)` : ""}`];
  const notSkipped = result.sinks.filter((s) => s.action !== "skipped");
  if (notSkipped.length > 0) {
    lines.push(
      formatTable(
        ["layer", "target", "partition", "action", "reason", "rows", "error"],
        notSkipped.map((s) => [s.layer, s.table, s.partition, s.action, s.reason, s.rows, s.error]),
      ),
    );
  }
  return lines;
}
