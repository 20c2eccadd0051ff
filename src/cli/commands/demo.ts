import { rm } from "node:fs/promises";
import type { Command } from "commander";
import { InvalidInputError } from "../../model/errors.js";
import { DEMO_STEPS, FULL_DEMO, runDemoStep, type DemoStep, type DemoStepResult } from "../../demo/swap-demo.js";
import { MTD_TABLES, runMtdDemo, type MtdDeliveryResult } from "../../demo/mtd-demo.js";
import { UPSERT_DEMO_TABLE, describeUpsertStep, runUpsertDemo, writeUpsertWorkspace, type UpsertDemoStep } from "../../demo/upsert-demo.js";
import type { Lake } from "../../lake/lake.js";
import { resolveAwsTarget, type AwsTarget } from "../../config/aws-config.js";
import type { LakePlace } from "../../open/open-lake.js";
import { report, writeStdout } from "../output.js";
import { wantsJson, withLake } from "../context.js";
import { dropTable } from "../../lake/operations/drop-table.js";

/** `lakeswap demo [step]`: the zero-downtime partition swap story, end to end or one step at a time. */
export function registerDemo(program: Command): void {
  program
    .command("demo [step]")
    .description(
      `zero-downtime partition swaps on an embedded lake; run it whole, or one step: ${DEMO_STEPS.join("|")}; ` +
        "'mtd' runs the month-to-date pipeline story; 'upsert' merges deliveries by key (write: upsert) in a temporary folder",
    )
    .option("--keep", "skip the final teardown, so the lake (and upsert's folder) can be explored afterwards")
    .option("--aws", "run on AWS (S3 + Glue + Athena) from DEMO_BUCKET, DEMO_PREFIX, DEMO_DATABASE, ATHENA_WORKGROUP")
    .option("--json", "print the steps as JSON")
    .action(async (step: string | undefined, options: { keep?: boolean; aws?: boolean }, command: Command) => {
      const json = wantsJson(command);
      const target = options.aws ? { aws: demoAwsTarget(process.env), explicitAws: true } : {};
      if (step === "mtd") {
        await withLake(command, (lake, config) => mtdDemo(lake, target.aws ? { aws: target.aws } : { dir: config.lakeDir }, json, options.keep === true), target);
        return;
      }
      if (step === "upsert") {
        await upsertDemo(command, target, json, options.keep === true);
        return;
      }
      if (step !== undefined && !(DEMO_STEPS as readonly string[]).includes(step)) {
        throw new InvalidInputError(`unknown demo step '${step}': use one of ${DEMO_STEPS.join(", ")}, mtd, upsert, or no step for the whole demo`);
      }
      await withLake(command, async (lake, config) => {
        const where = target.aws ? `AWS (s3://${target.aws.bucket}/${target.aws.prefix}, Glue database ${target.aws.database})` : `embedded lake at ${config.lakeDir}`;
        const lakeDir = target.aws ? undefined : config.lakeDir;
        let steps: readonly DemoStep[] = step ? [step as DemoStep] : FULL_DEMO;
        if (!step) {
          // A whole demo starts from a clean slate: tear down what an earlier partial demo left.
          await runDemoStep(lake, "teardown", { dir: lakeDir, aws: target.aws });
          if (options.keep) steps = steps.filter((s) => s !== "teardown");
          if (!json) writeStdout(`lakeswap demo: zero-downtime partition swaps, ${where}\n\n`);
        }
        const results: DemoStepResult[] = [];
        for (const current of steps) {
          const result = await runDemoStep(lake, current, { dir: lakeDir, aws: target.aws });
          results.push(result);
          if (!json) writeStdout(`${current.padEnd(9)} ${result.message}\n`);
        }
        if (json) report(true, { lake: lakeDir ?? where, steps: results }, () => "");
      }, target);
    });
}

/** The AWS target of the demo, from the environment variables of the article's demo. */
function demoAwsTarget(env: NodeJS.ProcessEnv): AwsTarget {
  const missing = ["DEMO_BUCKET", "DEMO_DATABASE", "ATHENA_WORKGROUP"].filter((name) => !env[name]);
  if (missing.length > 0) {
    throw new InvalidInputError(`lakeswap demo --aws needs ${missing.join(", ")} (and optionally DEMO_PREFIX): export DEMO_BUCKET=my-sandbox-bucket DEMO_PREFIX=partition-swap-demo DEMO_DATABASE=partition_swap_demo ATHENA_WORKGROUP=primary`);
  }
  return resolveAwsTarget(
    {
      s3_bucket: env.DEMO_BUCKET,
      s3_prefix: env.DEMO_PREFIX ?? "partition-swap-demo",
      glue_database_name: env.DEMO_DATABASE,
      athena_workgroup_name: env.ATHENA_WORKGROUP,
      athena_results_s3_bucket: env.DEMO_RESULTS_BUCKET ?? env.DATA_OUTPUT_ATHENA_RESULTS_S3_BUCKET,
    },
    env,
    "demo",
  );
}

async function mtdDemo(lake: Lake, place: LakePlace, json: boolean, keep: boolean): Promise<void> {
  const lakeDir = place.dir;
  const dropDemoTables = async () => {
    const existing = new Set((await lake.listTables()).map((t) => t.name));
    for (const table of MTD_TABLES) if (existing.has(table)) await dropTable(lake, table);
  };
  await dropDemoTables();
  if (!json) writeStdout(`lakeswap demo mtd: month-to-date deliveries through raw -> stage -> analytics, embedded lake at ${lakeDir}\n`);
  const print = (result: MtdDeliveryResult) => {
    if (json) return;
    writeStdout(`\n${result.delivery}: ${result.description} (${result.rowsRead} rows read)\n`);
    for (const layer of result.layers) {
      const built = layer.builtPartitions.length > 0 ? `: ${layer.builtPartitions.join(", ")}` : "";
      writeStdout(`  ${layer.layer.padEnd(10)} built ${String(layer.built).padStart(2)}, skipped ${String(layer.skipped).padStart(2)}${built}\n`);
    }
  };
  const results = await runMtdDemo(lake, print);
  if (!keep) {
    await dropDemoTables();
    await runDemoStep(lake, "teardown", place);
  }
  if (json) report(true, { lake: lakeDir, deliveries: results }, () => "");
  else writeStdout(keep ? `\nthe lake is kept${lakeDir ? ` at ${lakeDir}: try lakeswap --lake ${lakeDir} tables` : ""}\n` : "\nteardown: dropped the demo tables\n");
}

/**
 * `lakeswap demo upsert`: the demo's pipeline and deliveries go into a fresh temporary folder, and so does its lake
 * unless --lake, LAKESWAP_LAKE or --aws names one. Without --keep the demo's table and the folder are removed at the end.
 */
async function upsertDemo(command: Command, target: { aws?: AwsTarget; explicitAws?: boolean }, json: boolean, keep: boolean): Promise<void> {
  const workspace = await writeUpsertWorkspace();
  try {
    await withLake(
      command,
      async (lake, config) => {
        const lakeDir = target.aws ? undefined : config.lakeDir;
        const where = target.aws ? `AWS (s3://${target.aws.bucket}/${target.aws.prefix}, Glue database ${target.aws.database})` : `embedded lake at ${lakeDir}`;
        const dropDemoTable = async () => {
          if ((await lake.listTables()).some((t) => t.name === UPSERT_DEMO_TABLE)) await dropTable(lake, UPSERT_DEMO_TABLE);
        };
        await dropDemoTable();
        if (!json) {
          writeStdout(`lakeswap demo upsert: deliveries merged by customer_id into ${UPSERT_DEMO_TABLE}, ${where}\n`);
          writeStdout(`(write: upsert, order_by: [updated_at], delete_flag: deleted; the pipeline is ${workspace.configFile})\n`);
        }
        let index = 0;
        const steps = await runUpsertDemo(lake, workspace, (step: UpsertDemoStep) => {
          index += 1;
          if (!json) writeStdout(`\n${describeUpsertStep(step, index)}`);
        });
        if (!keep) {
          await dropDemoTable();
          // The lake folder itself goes when nothing else is in it (a lake inside the demo's folder goes with the folder).
          if ((await lake.listTables()).length === 0) await runDemoStep(lake, "teardown", { dir: lakeDir, aws: target.aws });
        }
        if (json) report(true, { lake: lakeDir ?? where, folder: workspace.dir, kept: keep, table: UPSERT_DEMO_TABLE, steps }, () => "");
        else if (keep) {
          const lakeFlag = lakeDir ? `--lake ${lakeDir} ` : "";
          writeStdout(`\nkept ${workspace.dir} (lakeswap.yaml, deliveries/) and the table: try lakeswap ${lakeFlag}query "SELECT * FROM ${UPSERT_DEMO_TABLE}"\n`);
        } else writeStdout(`\nteardown: dropped ${UPSERT_DEMO_TABLE} and removed ${workspace.dir}\n`);
      },
      target.aws ? target : { lake: workspace.config.lake, file: workspace.configFile },
    );
  } finally {
    if (!keep) await rm(workspace.dir, { recursive: true, force: true });
  }
}
