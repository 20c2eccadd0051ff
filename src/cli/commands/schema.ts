import type { Command } from "commander";
import { pipelineJsonSchema } from "../../config/pipeline-config.js";
import { writeStdout } from "../output.js";

/** `lakeswap config-schema`: the JSON Schema of lakeswap.yaml, generated from the same source as validation. */
export function registerSchema(program: Command): void {
  program
    .command("config-schema")
    .description("print the JSON Schema of lakeswap.yaml (for editors)")
    .action(() => {
      writeStdout(`${JSON.stringify(pipelineJsonSchema(), null, 2)}\n`);
    });
}
