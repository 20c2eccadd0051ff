import type { Command } from "commander";
import { report } from "../output.js";
import { assertTableName } from "../../model/sql.js";
import { wantsJson, withLake } from "../context.js";
import { pinPartition, unpinPartition } from "../../lake/operations/pin.js";

/** `lakeswap pin` / `unpin`: keep a partition as it is through syncs (e.g. after a deliberate rollback). */
export function registerPin(program: Command): void {
  program
    .command("pin <table>")
    .description("keep a partition as it is: syncs skip it (reason: pinned) until unpinned")
    .option("--partition <spec>", "the partition: day=2026-11-01 (none for a table without partition keys)", "")
    .option("--reason <text>", "why, for the record", "")
    .option("--json", "print the result as JSON")
    .action(async (name: string, options: { partition: string; reason: string }, command: Command) => {
      assertTableName(name);
      await withLake(command, async (lake) => {
        await pinPartition(lake, name, options.partition, options.reason);
        report(wantsJson(command), { table: name, partition: options.partition, pinned: true }, () => `${name}/${options.partition} is pinned`);
      });
    });
  program
    .command("unpin <table>")
    .description("let syncs rebuild a pinned partition again")
    .option("--partition <spec>", "the partition: day=2026-11-01 (none for a table without partition keys)", "")
    .option("--json", "print the result as JSON")
    .action(async (name: string, options: { partition: string }, command: Command) => {
      assertTableName(name);
      await withLake(command, async (lake) => {
        const existed = await unpinPartition(lake, name, options.partition);
        report(wantsJson(command), { table: name, partition: options.partition, pinned: false, wasPinned: existed }, () =>
          existed ? `${name}/${options.partition} is no longer pinned` : `${name}/${options.partition} was not pinned`,
        );
      });
    });
}
