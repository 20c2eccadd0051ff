import type { Command } from "commander";
import { InvalidInputError } from "../../model/errors.js";
import { report } from "../output.js";
import { assertTableName } from "../../model/sql.js";
import { addWaitOptions, readFlagFile, wantsJson, withLake } from "../context.js";
import { replacePartition } from "../../lake/operations/replace.js";

interface Options {
  partition: string;
  sql?: string;
  sqlFile?: string;
  allowEmpty?: boolean;
}

/** `lakeswap replace`: builds one partition into a fresh run and swaps its pointer. */
export function registerReplace(program: Command): void {
  addWaitOptions(
    program
      .command("replace <table>")
      .description("build one partition into a fresh run, audit it, and swap the partition's pointer to it")
      .option("--partition <spec>", "the partition: day=2026-11-01 or p_year=2025,p_month=03,p_day=04 (none for a table without partition keys)", "")
      .option("--sql <select>", "the SELECT that produces the partition's rows (lake tables are visible by name)")
      .option("--sql-file <file>", "read the SELECT from a file")
      .option("--allow-empty", "accept 0 rows for a partition that has rows")
      .option("--grace <duration>", "GC grace window for old runs (default 6h, env LAKESWAP_GRACE)")
      .option("--json", "print the result as JSON"),
  ).action(async (name: string, options: Options, command: Command) => {
    assertTableName(name);
    if ((options.sql === undefined) === (options.sqlFile === undefined)) {
      throw new InvalidInputError("give the SELECT with exactly one of --sql '...' or --sql-file FILE");
    }
    const select = options.sql ?? readFlagFile("--sql-file", options.sqlFile as string);
    await withLake(command, async (lake) => {
      const result = await replacePartition(lake, name, options.partition, { select, allowEmpty: options.allowEmpty });
      report(wantsJson(command), result, () => {
        const previous = result.previousRunId ? `; previous run ${result.previousRunId} (${result.previousRows ?? "?"} rows) kept` : "";
        const removed = result.gc.removed.length > 0 ? `; gc removed ${result.gc.removed.length} old run(s)` : "";
        return `${result.partition ? `${result.table}/${result.partition}` : result.table}: run ${result.runId} is current, ${result.rows} rows in ${result.seconds.toFixed(2)}s${previous}${removed}`;
      });
    });
  });
}
