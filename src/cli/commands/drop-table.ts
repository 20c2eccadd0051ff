import type { Command } from "commander";
import { report } from "../output.js";
import { assertTableName } from "../../model/sql.js";
import { addWaitOptions, wantsJson, withLake } from "../context.js";
import { dropTable } from "../../lake/operations/drop-table.js";

/** `lakeswap drop-table`: removes a table, its pointers, runs and records. */
export function registerDropTable(program: Command): void {
  addWaitOptions(
    program
      .command("drop-table <table>")
      .description("remove a table with all its runs (readers stop seeing it first)")
      .option("--json", "print the result as JSON"),
  ).action(async (name: string, _options: unknown, command: Command) => {
    assertTableName(name);
    await withLake(command, async (lake) => {
      await dropTable(lake, name);
      report(wantsJson(command), { table: name, dropped: true }, () => `dropped table ${name}`);
    });
  });
}
