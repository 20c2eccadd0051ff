import type { Command } from "commander";
import { InvalidInputError } from "../../core/errors.js";
import { DEMO_STEPS, FULL_DEMO, runDemoStep, type DemoStep, type DemoStepResult } from "../../demo/swap-demo.js";
import { report } from "../output.js";
import { wantsJson, withLake } from "../context.js";

/** `lakeswap demo [step]`: the zero-downtime partition swap story, end to end or one step at a time. */
export function registerDemo(program: Command): void {
  program
    .command("demo [step]")
    .description(`zero-downtime partition swaps on an embedded lake; run it whole, or one step: ${DEMO_STEPS.join("|")}`)
    .option("--keep", "skip the final teardown, so the lake can be explored afterwards")
    .option("--json", "print the steps as JSON")
    .action(async (step: string | undefined, options: { keep?: boolean }, command: Command) => {
      if (step !== undefined && !(DEMO_STEPS as readonly string[]).includes(step)) {
        throw new InvalidInputError(`unknown demo step '${step}': use one of ${DEMO_STEPS.join(", ")}, or no step for the whole demo`);
      }
      const json = wantsJson(command);
      await withLake(command, async (lake, config) => {
        let steps: readonly DemoStep[] = step ? [step as DemoStep] : FULL_DEMO;
        if (!step) {
          // A whole demo starts from a clean slate: tear down what an earlier partial demo left.
          await runDemoStep(lake, "teardown", config.lakeDir);
          if (options.keep) steps = steps.filter((s) => s !== "teardown");
          if (!json) process.stdout.write(`lakeswap demo: zero-downtime partition swaps, embedded lake at ${config.lakeDir}\n\n`);
        }
        const results: DemoStepResult[] = [];
        for (const current of steps) {
          const result = await runDemoStep(lake, current, config.lakeDir);
          results.push(result);
          if (!json) process.stdout.write(`${current.padEnd(9)} ${result.message}\n`);
        }
        if (json) report(true, { lake: config.lakeDir, steps: results }, () => "");
      });
    });
}
