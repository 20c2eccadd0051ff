import type { Command } from "commander";
import { InvalidInputError } from "../../model/errors.js";
import { defineTable, parseColumns } from "../../model/table.js";
import { report } from "../output.js";
import { readFlagFile, wantsJson, withLake } from "../context.js";

interface Options {
  partitionKeys: string;
  columns?: string;
  columnsFile?: string;
  compression: string;
  iceberg?: boolean;
  icebergTable?: string;
}

/** `lakeswap create-table`: declares a table's columns and partition keys. */
export function registerCreateTable(program: Command): void {
  program
    .command("create-table <table>")
    .description("declare a table: its columns and partition keys")
    .option("--partition-keys <keys>", "partition keys, in path order: 'day' or 'p_year,p_month,p_day' (none: the table is one unit, replaced as a whole)", "")
    .option("--columns <columns>", "columns and types: 'id BIGINT, amount DECIMAL(10,2), name VARCHAR'")
    .option("--columns-file <file>", "read the columns from a file (same syntax, commas or new lines)")
    .option("--compression <codec>", "Parquet compression: snappy or zstd", "snappy")
    .option("--iceberg", "publish the table as Iceberg too: every command that moves its pointers commits one Iceberg snapshot (embedded lake; on AWS a Glue table <name>_iceberg of type ICEBERG)")
    .option("--iceberg-table <name>", "the name of its Iceberg table in Glue (AWS; default <name>_iceberg); implies --iceberg")
    .option("--json", "print the table definition as JSON")
    .action(async (name: string, options: Options, command: Command) => {
      if ((options.columns === undefined) === (options.columnsFile === undefined)) {
        throw new InvalidInputError("give the columns with exactly one of --columns '...' or --columns-file FILE");
      }
      const columnsText = options.columns ?? readFlagFile("--columns-file", options.columnsFile as string).replace(/\n/g, ",");
      const table = defineTable({
        name,
        columns: parseColumns(columnsText),
        partitionKeys: options.partitionKeys.split(",").map((key) => key.trim()).filter(Boolean),
        compression: options.compression,
        iceberg: options.iceberg === true || options.icebergTable !== undefined,
        ...(options.icebergTable !== undefined ? { icebergTable: options.icebergTable } : {}),
      });
      await withLake(command, async (lake) => {
        await lake.createTable(table);
        report(wantsJson(command), table, () =>
          `table ${table.name}: ${table.columns.map((c) => `${c.name} ${c.type}`).join(", ")}; ${table.partitionKeys.length > 0 ? `partitioned by ${table.partitionKeys.join(", ")}` : "no partition keys (replaced as a whole)"}${table.iceberg ? "; published as Iceberg too" : ""}`,
        );
      });
    });
}
