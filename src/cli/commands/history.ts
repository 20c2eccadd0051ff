import type { Command } from "commander";
import { formatTable, report } from "../output.js";
import { InvalidInputError } from "../../model/errors.js";
import { assertTableName } from "../../model/sql.js";
import { configSource, wantsJson, withLake } from "../context.js";
import { readHistory, readSchemaHistory, type SchemaHistory } from "../../lake/operations/history.js";
import { snapshotHistory } from "../../lake/operations/iceberg-as-of.js";

/** `lakeswap history`: a partition's runs with time, rows and which one is current; or an Iceberg table's snapshots. */
export function registerHistory(program: Command): void {
  program
    .command("history <table>")
    .description("list the runs of a table's partitions (id, time, rows, current or not), or with --snapshots its Iceberg snapshots")
    .option("--partition <spec>", "only this partition")
    .option("--snapshots", "list the Iceberg snapshots of an iceberg: true table instead (what query --as-of reads)")
    .option("--schema", "list the changes of the table's schema instead: which sync made each, what changed, the columns after it")
    .option("-c, --config <file>", "reach the lake of this pipeline config (lakeswap.yaml), as sync does")
    .option("--json", "print the history as JSON")
    .action(async (name: string, options: { partition?: string; snapshots?: boolean; schema?: boolean; config?: string }, command: Command) => {
      assertTableName(name);
      await withLake(command, async (lake) => {
        if (options.schema && (options.snapshots || options.partition !== undefined)) {
          throw new InvalidInputError(`--schema lists the schema changes of the whole table '${name}': leave out ${options.snapshots ? "--snapshots" : `--partition ${options.partition}`}`);
        }
        if (options.schema) {
          const history = await readSchemaHistory(lake, name);
          report(wantsJson(command), history, () => schemaHistoryText(history));
          return;
        }
        if (options.snapshots && options.partition !== undefined) {
          throw new InvalidInputError(`--snapshots lists the snapshots of the whole table '${name}' (each holds every partition): leave out --partition ${options.partition}`);
        }
        if (options.snapshots) {
          const snapshots = await snapshotHistory(lake, name);
          report(wantsJson(command), snapshots, () =>
            snapshots.length === 0
              ? `table ${name} has no Iceberg snapshot yet (its first sync or replace commits one)`
              : formatTable(
                  ["snapshot", "committed", "sync", "command", "files +/-", "records +/-", "records", ""],
                  snapshots.map((s) => [s.snapshotId, s.committedAt, s.syncId ?? "", s.command ?? "", `+${s.addedFiles}/-${s.deletedFiles}`, `+${s.addedRecords}/-${s.deletedRecords}`, s.totalRecords, s.current ? "current" : ""]),
                ),
          );
          return;
        }
        const histories = await readHistory(lake, name, options.partition);
        report(wantsJson(command), histories, () => {
          const rows = histories.flatMap((h) =>
            h.runs.map((run) => [h.partition || "(whole table)", run.runId, run.createdAt, run.rows ?? "?", run.bytes, run.state]),
          );
          return rows.length === 0 ? `table ${name} has no runs yet` : formatTable(["partition", "run", "created", "rows", "bytes", "state"], rows);
        });
      }, configSource(options.config, { readOnly: true }));
    });
}

/** `history --schema` as text: the schema now, then each change, newest first. */
function schemaHistoryText(history: SchemaHistory): string {
  const now = `table ${history.table}: schema version ${history.version} (${history.columns.join(", ")})`;
  if (history.changes.length === 0) return `${now}\nno schema change recorded (each sync or create-table that changes the schema in place records one)`;
  const rows = history.changes.map((c) => [c.syncId, c.changedAt, c.by, `${c.fromVersion} -> ${c.toVersion}`, `${c.how}: ${c.changes.join("; ")}`, c.current ? "current" : ""]);
  return `${now}\n${formatTable(["sync", "changed", "by", "version", "changes", ""], rows)}`;
}
