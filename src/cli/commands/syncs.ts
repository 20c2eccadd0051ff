import type { Command } from "commander";
import { loadPipelineConfig } from "../../config/pipeline-config.js";
import { LakeswapError, errorMessage } from "../../model/errors.js";
import { formatTable, report } from "../output.js";
import { positiveCount, wantsJson, withLake } from "../context.js";
import { listSyncs } from "../../lake/operations/syncs.js";
import type { SyncRecord } from "../../lake/sync-record.js";
import { describeFinding } from "../../model/audit.js";

/** `lakeswap syncs`: the recorded syncs, newest first, with what each moved. */
export function registerSyncs(program: Command): void {
  program
    .command("syncs")
    .description("list the recorded syncs, newest first: id, time, config, partitions moved (undo one with rollback --sync ID)")
    .option("--limit <n>", "only the newest n (a whole number from 1)", positiveCount("--limit"))
    .option("-c, --config <file>", "reach the lake of this pipeline config (lakeswap.yaml), as sync does")
    .option("--json", "print the records as JSON")
    .action(async (options: { limit?: number; config?: string }, command: Command) => {
      const config = options.config !== undefined ? loadPipelineConfig(options.config) : undefined;
      await withLake(command, async (lake) => {
        const unreadable: unknown[] = [];
        const all = await listSyncs(lake, { skipUnreadable: true, onUnreadable: (error) => unreadable.push(error) });
        const records = options.limit !== undefined ? all.slice(0, options.limit) : all;
        report(wantsJson(command), records, () => {
          if (records.length === 0) return unreadable.length > 0 ? "" : "no sync has been recorded in this lake yet";
          const table = formatTable(
            ["sync", "started", "finished", "moved", "tables", "held", "config"],
            records.map((r) => [
              r.syncId,
              r.startedAt,
              r.finishedAt ?? "(did not finish)",
              r.held && r.held.status !== "published" ? 0 : r.moves.length,
              [...new Set([...r.moves.map((m) => m.table), ...(r.held?.tables ?? []).map((t) => t.table), ...(r.schemaChanges ?? []).map((c) => c.table)])].join(", "),
              heldText(r.held),
              r.config,
            ]),
          );
          return [table, ...schemaChanges(records), ...heldAudits(records)].join("\n");
        });
        // The readable records are listed; an unreadable one is the error of the command (exit 8), named, and with
        // --json part of the same document ({result, error}).
        if (unreadable.length > 0) throw unreadableRecords(unreadable);
      }, { ...config, readOnly: true });
    });
}

/** A held sync's status for the listing: its staged runs and failed audits, or what became of it. */
function heldText(held: SyncRecord["held"]): string {
  if (!held) return "";
  const runs = held.tables.reduce((sum, t) => sum + t.runs.length, 0);
  const errors = held.audits.filter((f) => f.severity === "error").length;
  if (held.status === "held") return `held: ${runs} staged run(s)${errors > 0 ? `, ${errors} failed audit(s)` : ""} (lakeswap publish or discard)`;
  if (held.status === "publishing") return "publishing stopped: lakeswap publish finishes it";
  return held.status === "published" ? `published ${held.publishedAt ?? ""}${held.refused?.length ? `, ${held.refused.length} refused` : ""}` : "discarded";
}

/** The schema changes syncs made (in place, or rebuilt by swap), one line each (`rollback --sync` restores the definition before). */
function schemaChanges(records: readonly SyncRecord[]): string[] {
  const changed = records.filter((r) => (r.schemaChanges ?? []).length > 0);
  // A discarded sync's changes were restored by its discard, unless a later command changed the schema again or wrote runs under it.
  const how = (r: SyncRecord) => (r.held?.status === "discarded" ? " (discarded: undone by the discard unless changed or written under since; history TABLE --schema shows)" : "");
  const kind = (r: SyncRecord) => (r.schemaChanges!.every((c) => c.rebuilt) ? "rebuilt schemas by swap" : r.schemaChanges!.some((c) => c.rebuilt || c.relayout) ? "changed schemas (in place, rebuilt by swap, or in a new layout)" : "changed schemas in place");
  const mark = (c: NonNullable<SyncRecord["schemaChanges"]>[number]) => (c.relayout ? `(new layout ${c.definition.layout ?? ""}) ` : c.rebuilt ? "(rebuilt) " : "");
  return changed.flatMap((r) => ["", `sync ${r.syncId} ${kind(r)}${how(r)}:`, ...r.schemaChanges!.flatMap((c) => c.changes.map((text) => `  ${c.table}: ${mark(c)}${text}`))]);
}

/** The audit findings of the syncs still held, one line each. */
function heldAudits(records: readonly SyncRecord[]): string[] {
  const held = records.filter((r) => r.held?.status === "held" && r.held.audits.length > 0);
  return held.flatMap((r) => ["", `sync ${r.syncId}: ${r.held!.reason}`, ...r.held!.audits.map((f) => `  ${f.severity === "error" ? "FAIL" : "WARN"} ${describeFinding(f, f.table)}`)]);
}

/** One STORE_ERROR for the sync records that could not be read, each named by its own message. */
function unreadableRecords(errors: readonly unknown[]): LakeswapError {
  const messages = errors.map(errorMessage);
  return new LakeswapError("STORE_ERROR", messages.length === 1 ? messages[0]! : `${messages.length} sync records are unreadable: ${messages.join("; ")}`);
}
