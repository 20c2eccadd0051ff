import type { Command } from "commander";
import path from "node:path";
import { loadPipelineConfig } from "../../config/pipeline-config.js";
import { LakeswapError } from "../../model/errors.js";
import { checkPartitionFilters } from "../../pipeline/partition-filter.js";
import { Pipeline } from "../../pipeline/pipeline.js";
import { openSink } from "../../sinks/open-sink.js";
import { fetchSource } from "../../sources/fetch-source.js";
import { assertDay } from "../../model/day.js";
import { Progress, report } from "../output.js";
import { syncReportText } from "../reports/sync-report.js";
import { addWaitOptions, wantsJson, withLake } from "../context.js";

interface Options {
  config: string;
  input?: string[];
  partition?: string[];
  fullRefresh?: boolean;
  allowEmpty?: boolean;
  allowDuplicates?: boolean;
  asOf?: string;
  hold?: boolean;
  rebuildSchema?: boolean;
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
      .option("--hold", "build and audit everything, move nothing: the sync is held until lakeswap publish SYNC_ID (or discard)")
      .option("--rebuild-schema", "rewrite every partition of a table whose declared columns cannot change in place (dropped, renamed, narrowed), then move to them")
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
          hold: options.hold,
          rebuildSchema: options.rebuildSchema,
          onProgress: ({ layer, done, total, label }) => progress.update(done, total, `${layer}: ${label}`),
        }).sync();
        progress.done();
        report(wantsJson(command), result, () => syncReportText(result));
        const othersKept = result.sinks.filter((s) => s.action === "failed" && s.reason === "another source's").length;
        const sinkFailures = result.sinks.filter((s) => s.action === "failed").length - othersKept;
        if (result.totals.failed > 0 || sinkFailures > 0 || othersKept > 0) {
          const what = [
            ...(result.totals.failed > 0 ? [`${result.totals.failed} partition(s) failed`] : []),
            ...(sinkFailures > 0 ? [`${sinkFailures} sink partition write(s) failed (nothing of them applied; the lake's swaps stand)`] : []),
            ...(othersKept > 0 ? [`${othersKept} sink partition(s) not sent: another source (lake or lake table) sent them, and each error says how to hand one over`] : []),
          ];
          const rerun = result.totals.failed > 0 || sinkFailures > 0 ? "; rerun the same sync to redo only those" : "";
          throw new LakeswapError("PARTIAL_FAILURE", `${what.join(", ")}${rerun}`);
        }
      },
      config,
    );
  });
}
