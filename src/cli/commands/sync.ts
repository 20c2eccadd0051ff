import type { Command } from "commander";
import path from "node:path";
import { loadPipelineConfig } from "../../config/pipeline-config.js";
import { LakeswapError } from "../../model/errors.js";
import { Pipeline } from "../../pipeline/pipeline.js";
import { openSink } from "../../sinks/open-sink.js";
import { fetchSource } from "../../sources/fetch-source.js";
import { assertDay } from "../../model/day.js";
import { Progress, formatTable, report } from "../output.js";
import { addWaitOptions, checkPartitionFilters, wantsJson, withLake } from "../context.js";

interface Options {
  config: string;
  input?: string[];
  partition?: string[];
  fullRefresh?: boolean;
  allowEmpty?: boolean;
  allowDuplicates?: boolean;
  asOf?: string;
}

/** `lakeswap sync`: runs the plan, layer by layer, and reports built / skipped / failed. */
export function registerSync(program: Command): void {
  addWaitOptions(
    program
      .command("sync")
      .description("land a delivery and build every layer, rebuilding only what changed")
      .option("-c, --config <file>", "the pipeline config", "lakeswap.yaml")
      .option("--input <file...>", "the file(s) of this delivery, instead of the datasets' source paths")
      .option("--partition <spec...>", "only these partitions (in layers with the same keys)")
      .option("--full-refresh", "rebuild every partition, whatever the signatures say")
      .option("--allow-empty", "accept derived builds of 0 rows for partitions that had rows")
      .option("--allow-duplicates", "write: append only: append a delivery again to partitions that already hold it")
      .option("--as-of <day>", "the last day of lookback windows, YYYY-MM-DD (default: today in each source's time zone)")
      .option("--grace <duration>", "GC grace window for old runs (default 6h)")
      .option("--json", "print the report as JSON"),
  ).action(async (options: Options, command: Command) => {
    const config = loadPipelineConfig(options.config);
    checkPartitionFilters(config, options.partition);
    await withLake(
      command,
      async (lake) => {
        const progress = new Progress(wantsJson(command));
        const result = await new Pipeline(lake, config, {
          inputs: options.input?.map((file: string) => path.resolve(file)),
          partitions: options.partition,
          fullRefresh: options.fullRefresh,
          allowEmpty: options.allowEmpty,
          allowDuplicates: options.allowDuplicates,
          openSink,
          fetchSource: (request) => fetchSource(request),
          asOf: options.asOf === undefined ? undefined : assertDay(options.asOf, "--as-of"),
          onProgress: ({ layer, done, total, label }) => progress.update(done, total, `${layer}: ${label}`),
        }).sync();
        progress.done();
        report(wantsJson(command), result, () => {
          const undo = result.totals.built > 0 ? ` (undo with: lakeswap rollback --sync ${result.syncId})` : ": nothing was built";
          const lines = [`sync ${result.syncId}${undo}`, ""];
          lines.push(...result.loads.map((l) => {
            const from = l.fetched
              ? `fetched ${l.fetched.days - l.fetched.failed} of ${l.fetched.days} day(s) from its http source`
              : `read ${l.rowsRead} rows from ${l.files.length} file(s)`;
            const rows = l.fetched ? `, ${l.rowsRead} rows` : "";
            return `${l.dataset}: ${from}${rows}: ${l.rowsLoaded} loaded, ${l.rowsDeadLettered} dead-lettered${l.deadLetterTable ? ` (${l.deadLetterTable}, delivery=${l.delivery})` : ""}`;
          }));
          // The same signatures either way; say so only when they took the slow path, with why.
          const slow = result.loads.find((l) => l.signing.form === "sql");
          if (slow) lines.push(`signatures computed in plain SQL, about 5x slower than with lakeswap's extension: ${slow.signing.reason ?? "not loaded"}`);
          lines.push(
            "",
            formatTable(
              ["layer", "table", "built", "skipped", "failed", "rows", "seconds"],
              result.layers.map((l) => [l.layer, l.table, l.built, l.skipped, l.failed, l.rows, l.seconds.toFixed(2)]),
            ),
          );
          const again = result.partitions.filter((p) => p.reason === "already appended");
          if (again.length > 0) {
            const tables = [...new Set(again.map((p) => p.table))].join(", ");
            lines.push("", `${tables}: ${again.length} partition(s) skip: already appended (they hold this delivery already; --allow-duplicates appends it again)`);
          }
          const empty = result.partitions.filter((p) => p.reason === "empty in source");
          if (empty.length > 0) {
            lines.push(
              "",
              `${empty.length} day(s) came back from the source without rows, and were left as they are (a day with rows keeps them): ` +
                `${empty.map((p) => `${p.table}/${p.partition}`).join(", ")}. If they really are empty now, set allow_empty: true under the dataset's source`,
            );
          }
          const changed = result.partitions.filter((p) => p.action !== "skip");
          if (changed.length > 0) {
            lines.push(
              "",
              formatTable(
                ["layer", "partition", "action", "reason", "run", "rows", "error"],
                changed.map((p) => [p.layer, p.partition || "(whole table)", p.action, p.reason, p.run, p.rows, p.error]),
              ),
            );
          }
          if (result.sinks.length > 0) {
            const sent = result.sinks.filter((s) => s.action === "sent").length;
            const skippedCount = result.sinks.filter((s) => s.action === "skipped").length;
            const failedCount = result.sinks.filter((s) => s.action === "failed").length;
            const removed = result.sinks.filter((s) => s.action === "removed").length;
            lines.push("", `sinks: ${sent} partition(s) sent, ${skippedCount} skipped (unchanged), ${failedCount} failed${removed > 0 ? `, ${removed} removed (gone from the lake)` : ""}`);
            const notSkipped = result.sinks.filter((s) => s.action !== "skipped");
            if (notSkipped.length > 0) {
              lines.push(
                formatTable(
                  ["layer", "target", "partition", "action", "reason", "rows", "error"],
                  notSkipped.map((s) => [s.layer, s.table, s.partition, s.action, s.reason, s.rows, s.error]),
                ),
              );
            }
          }
          return lines.join("\n");
        });
        const sinkFailures = result.sinks.filter((s) => s.action === "failed").length;
        if (result.totals.failed > 0 || sinkFailures > 0) {
          const what = [
            ...(result.totals.failed > 0 ? [`${result.totals.failed} partition(s) failed`] : []),
            ...(sinkFailures > 0 ? [`${sinkFailures} sink partition write(s) failed (nothing of them applied; the lake's swaps stand)`] : []),
          ];
          throw new LakeswapError("PARTIAL_FAILURE", `${what.join(", ")}; rerun the same sync to redo only those`);
        }
      },
      config,
    );
  });
}
