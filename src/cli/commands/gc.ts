import type { Command } from "commander";
import { formatDuration } from "../../model/duration.js";
import { Progress, formatTable, report } from "../output.js";
import { assertTableName } from "../../model/sql.js";
import { addWaitOptions, configSource, wantsJson, withLake } from "../context.js";
import { collectGarbage } from "../../lake/operations/gc.js";

/** `lakeswap gc`: removes runs outside the retention rule. */
export function registerGc(program: Command): void {
  addWaitOptions(
    program
      .command("gc [table]")
      .description("remove old runs: keeps the current and previous run, the rollback target and runs younger than the grace window")
      .option("--dry-run", "show what would be removed, remove nothing")
      .option("--grace <duration>", "keep every run younger than this (default 6h, env LAKESWAP_GRACE)")
      .option("-c, --config <file>", "reach the lake of this pipeline config (lakeswap.yaml), as sync does")
      .option("--json", "print the report as JSON"),
  ).action(async (name: string | undefined, options: { dryRun?: boolean; config?: string }, command: Command) => {
    if (name !== undefined) assertTableName(name);
    const config = configSource(options.config);
    await withLake(command, async (lake, config) => {
      const progress = new Progress(wantsJson(command));
      const reports = await collectGarbage(lake, name, {
        dryRun: options.dryRun,
        onProgress: ({ done, total, label }) => progress.update(done, total, label),
      });
      progress.done();
      const removed = reports.flatMap((r) => r.removed.map((run) => ({ table: r.table, partition: r.partition, ...run })));
      const bytes = removed.reduce((sum, run) => sum + run.bytes, 0);
      report(
        wantsJson(command),
        { dryRun: options.dryRun === true, graceMs: config.graceMs, partitions: reports, removedRuns: removed.length, removedBytes: bytes },
        () => {
          const verb = options.dryRun ? "would remove" : "removed";
          const head = `gc (grace window ${formatDuration(config.graceMs)}): ${verb} ${removed.length} run(s), ${bytes} bytes, in ${reports.length} partition(s)`;
          if (removed.length === 0) return head;
          return `${head}\n${formatTable(["table", "partition", "run", "reason", "bytes"], removed.map((r) => [r.table, r.partition, r.runId, r.reason, r.bytes]))}`;
        },
      );
    }, config);
  });
}
