import type { Command } from "commander";
import path from "node:path";
import { loadPipelineConfig } from "../../config/pipeline-config.js";
import { checkPartitionFilters } from "../../pipeline/partition-filter.js";
import { Pipeline } from "../../pipeline/pipeline.js";
import { assertDay } from "../../model/day.js";
import { fetchSource } from "../../sources/fetch-source.js";
import { report } from "../output.js";
import { planReport, planReportText } from "../reports/plan-report.js";
import { wantsJson, withLake } from "../context.js";

/** `lakeswap plan`: for each layer and partition, build or skip, and why. */
export function registerPlan(program: Command): void {
  program
    .command("plan")
    .description("show, per layer and partition, whether a sync would build or skip it, and why")
    .option("-c, --config <file>", "the pipeline config", "lakeswap.yaml")
    .option("--input <file...>", "the file(s) of this delivery, instead of the datasets' source paths")
    .option("--partition <spec...>", "only these partitions (in layers with the same keys)")
    .option("--full-refresh", "plan to rebuild every partition")
    .option("--allow-duplicates", "write: append only: plan to append a delivery again to partitions that already hold it, as sync --allow-duplicates")
    .option("--rebuild-schema", "plan the rebuild by swap of tables whose declared columns cannot change in place")
    .option("--as-of <day>", "the last day of lookback windows, YYYY-MM-DD (default: today in each source's time zone)")
    .option("--json", "print the plan as JSON")
    .action(async (options: { config: string; input?: string[]; partition?: string[]; fullRefresh?: boolean; allowDuplicates?: boolean; rebuildSchema?: boolean; asOf?: string }, command: Command) => {
      const config = loadPipelineConfig(options.config);
      checkPartitionFilters(config, options.partition);
      await withLake(
        command,
        async (lake) => {
          const pipeline = new Pipeline(lake, config, {
            inputs: options.input?.map((file: string) => path.resolve(file)),
            partitions: options.partition,
            fullRefresh: options.fullRefresh,
            allowDuplicates: options.allowDuplicates,
            rebuildSchema: options.rebuildSchema,
            fetchSource: (request) => fetchSource(request),
            asOf: options.asOf === undefined ? undefined : assertDay(options.asOf, "--as-of"),
          });
          // The schema changes first: a change that cannot be made in place is refused, as the sync would refuse it.
          const changes = await pipeline.schemaChanges();
          const planned = planReport(await pipeline.plan(), changes);
          report(wantsJson(command), planned, () => planReportText(planned));
        },
        { ...config, readOnly: true },
      );
    });
}
