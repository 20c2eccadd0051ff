import type { Command } from "commander";
import { formatTable, report } from "../output.js";
import { wantsJson, withLake } from "../context.js";

/** `lakeswap tables`: the lake's tables with their partitions. */
export function registerTables(program: Command): void {
  program
    .command("tables")
    .description("list the lake's tables")
    .option("--json", "print the tables as JSON")
    .action(async (_options: unknown, command: Command) => {
      await withLake(command, async (lake) => {
        const snapshot = await lake.snapshot();
        const tables = snapshot.map(({ table, partitions }) => ({
          name: table.name,
          columns: table.columns,
          partitionKeys: table.partitionKeys,
          // Since its partition keys changed, the folder (or S3 prefix) the table's partitions are in.
          ...(table.layout !== undefined ? { layout: table.layout } : {}),
          compression: table.compression,
          partitions: partitions.length,
        }));
        report(wantsJson(command), tables, () =>
          tables.length === 0
            ? "no tables yet (lakeswap create-table, or lakeswap demo)"
            : formatTable(
                ["table", "partition keys", "partitions", "columns"],
                tables.map((t) => [t.name, `${t.partitionKeys.join(",")}${t.layout !== undefined ? ` (in ${t.layout}/)` : ""}`, t.partitions, t.columns.map((c) => `${c.name} ${c.type}`).join(", ")]),
              ),
        );
      }, { readOnly: true });
    });
}
