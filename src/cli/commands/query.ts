import type { Command } from "commander";
import { formatTable, report } from "../output.js";
import { wantsJson, withLake } from "../context.js";

/** `lakeswap query`: SQL over the current runs of every lake table. */
export function registerQuery(program: Command): void {
  program
    .command("query <sql>")
    .description("run SQL over the current runs; lake tables are visible by name")
    .option("--json", "print the rows as JSON objects")
    .action(async (sql: string, _options: unknown, command: Command) => {
      await withLake(command, async (lake) => {
        const result = await lake.query(sql);
        const objects = result.rows.map((row) => Object.fromEntries(result.columns.map((c, i) => [c, row[i]])));
        report(wantsJson(command), objects, () => formatTable(result.columns, result.rows));
      }, { readOnly: true });
    });
}
