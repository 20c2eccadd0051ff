import type { Command } from "commander";
import { formatTable, report } from "../output.js";
import { wantsJson, withLake } from "../context.js";

/** `lakeswap query`: SQL over the current runs of every lake table. */
export function registerQuery(program: Command): void {
  program
    .command("query <sql>")
    .description("run SQL over the current runs; lake tables are visible by name")
    .option("--as-of <sync|time|snapshot>", "read the iceberg: true tables as they were after a sync (its id, or last), at a time (2026-11-02T14:05:00Z) or at a snapshot id")
    .option("--json", "print the rows as JSON objects")
    .action(async (sql: string, options: { asOf?: string }, command: Command) => {
      await withLake(command, async (lake) => {
        const result = await lake.query(sql, { asOf: options.asOf });
        const objects = result.rows.map((row) => Object.fromEntries(result.columns.map((c, i) => [c, row[i]])));
        report(wantsJson(command), objects, () => formatTable(result.columns, result.rows));
      }, { readOnly: true });
    });
}
