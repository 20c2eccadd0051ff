import { Command, CommanderError } from "commander";
import { LakeswapError, errorMessage } from "../core/errors.js";
import { registerCreateTable } from "./commands/create-table.js";
import { registerDemo } from "./commands/demo.js";
import { registerDropTable } from "./commands/drop-table.js";
import { registerGc } from "./commands/gc.js";
import { registerHistory } from "./commands/history.js";
import { registerQuery } from "./commands/query.js";
import { registerReplace } from "./commands/replace.js";
import { registerRollback } from "./commands/rollback.js";
import { registerTables } from "./commands/tables.js";
import { registerPlan } from "./commands/plan.js";
import { registerSync } from "./commands/sync.js";
import { registerSyncs } from "./commands/syncs.js";
import { registerPin } from "./commands/pin.js";
import { registerSchema } from "./commands/schema.js";

/** Builds the `lakeswap` command line. */
export function buildProgram(): Command {
  const program = new Command("lakeswap")
    .description("Zero-downtime partition replace, rollback and retention for Hive-style Parquet tables")
    .version("0.1.0")
    .option("--lake <dir>", "the lake folder (default ./lake, env LAKESWAP_LAKE)")
    .showHelpAfterError()
    .exitOverride();
  for (const register of [
    registerDemo, registerCreateTable, registerDropTable, registerReplace, registerRollback,
    registerHistory, registerGc, registerQuery, registerTables, registerPlan, registerSync, registerSyncs, registerPin, registerSchema,
  ]) register(program);
  for (const command of program.commands) command.exitOverride();
  return program;
}

/** Runs the CLI and returns its exit code (documented in the README); the only place that decides it. */
export async function main(argv: readonly string[]): Promise<number> {
  const program = buildProgram();
  const json = argv.includes("--json");
  try {
    await program.parseAsync([...argv]);
    return 0;
  } catch (error) {
    if (error instanceof CommanderError) {
      // Help and version exit 0; usage errors were already printed by commander.
      return error.exitCode === 0 ? 0 : 2;
    }
    const code = error instanceof LakeswapError ? error.code : "INTERNAL";
    const exitCode = error instanceof LakeswapError ? error.exitCode : 1;
    if (json) process.stdout.write(`${JSON.stringify({ error: { code, message: errorMessage(error) } }, null, 2)}\n`);
    process.stderr.write(`lakeswap: ${errorMessage(error)}\n`);
    if (!(error instanceof LakeswapError) && process.env.LAKESWAP_DEBUG) process.stderr.write(`${(error as Error).stack}\n`);
    return exitCode;
  }
}
