import { Command, CommanderError } from "commander";
import { LakeswapError, errorMessage } from "../core/errors.js";
import { interruptCleanups } from "./context.js";
import { takeJsonReport, toJson, writeStdout } from "./output.js";
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
import { registerIngest } from "./commands/ingest.js";

/** Builds the `lakeswap` command line. */
export function buildProgram(): Command {
  const program = new Command("lakeswap")
    .description("Zero-downtime partition replace, rollback and retention for Hive-style Parquet tables")
    .version("0.1.0")
    .option("--lake <dir>", "the lake folder (default ./lake, env LAKESWAP_LAKE)")
    .option("--json", "print the result as one JSON document (also accepted after the command)")
    .showHelpAfterError()
    .exitOverride();
  for (const register of [
    registerDemo, registerCreateTable, registerDropTable, registerReplace, registerRollback,
    registerHistory, registerGc, registerQuery, registerTables, registerPlan, registerSync, registerSyncs, registerPin, registerSchema, registerIngest,
  ]) register(program);
  for (const command of program.commands) command.exitOverride();
  return program;
}

/**
 * Runs the CLI and returns its exit code (documented in the README); the only place that decides it,
 * and the only place that exits the process (on Ctrl-C, with 130). With --json, stdout gets exactly one
 * JSON document: the command's result, or the error, or (a sync with failed partitions) both in one.
 */
export async function main(argv: readonly string[]): Promise<number> {
  const json = argv.includes("--json");
  // A reader that goes away (`lakeswap tables | head -1`) is not an error of ours: drop the rest quietly.
  const onStdoutError = (error: NodeJS.ErrnoException) => {
    if (error.code !== "EPIPE") process.stderr.write(`lakeswap: cannot write to stdout: ${error.message}\n`);
  };
  const onInterrupt = () => interrupt(json);
  process.stdout.on("error", onStdoutError);
  process.once("SIGINT", onInterrupt);
  try {
    return await run(argv, json);
  } finally {
    // Removed again, so that main may run many times in one process (tests).
    process.stdout.off("error", onStdoutError);
    process.off("SIGINT", onInterrupt);
  }
}

/** Parses and runs one command line; returns its exit code. */
async function run(argv: readonly string[], json: boolean): Promise<number> {
  const program = buildProgram();
  if (json) program.configureOutput({ writeErr: () => undefined, outputError: () => undefined });
  try {
    await program.parseAsync([...argv]);
    const reported = takeJsonReport();
    if (json && reported) writeStdout(`${toJson(reported.value)}\n`);
    return 0;
  } catch (error) {
    const reported = takeJsonReport();
    if (error instanceof CommanderError) {
      // Help and version exit 0; usage errors were printed by commander (on stderr; with --json, here).
      if (error.exitCode === 0) return 0;
      if (json) {
        const message = error.message.replace(/^error: /, "");
        process.stderr.write(`lakeswap: ${message}\n`);
        writeStdout(`${toJson({ error: { code: "INVALID_INPUT", message } })}\n`);
      }
      return 2;
    }
    const code = error instanceof LakeswapError ? error.code : "INTERNAL";
    const exitCode = error instanceof LakeswapError ? error.exitCode : 1;
    if (json) {
      const failure = { error: { code, message: errorMessage(error) } };
      // A report already made (a sync whose partitions partly failed) and the error are one document.
      const document = reported && typeof reported.value === "object" && reported.value !== null && !Array.isArray(reported.value)
        ? { ...reported.value, ...failure }
        : reported ? { result: reported.value, ...failure } : failure;
      writeStdout(`${toJson(document)}\n`);
    }
    process.stderr.write(`lakeswap: ${errorMessage(error)}\n`);
    if (!(error instanceof LakeswapError) && process.env.LAKESWAP_DEBUG) process.stderr.write(`${(error as Error).stack}\n`);
    return exitCode;
  }
}

/**
 * Ctrl-C: says so (a JSON error with --json), closes the open lakes (stopping engine queries in
 * flight), and exits 130. Pointers move atomically, so one that had not moved stays where it was.
 * A second Ctrl-C exits at once.
 */
function interrupt(json: boolean): void {
  process.once("SIGINT", () => process.exit(130));
  const message = "interrupted (Ctrl-C): stopped; every partition pointer is where it was or on its new, complete run (lakeswap syncs and history show which)";
  process.stderr.write(`\nlakeswap: ${message}\n`);
  if (json) writeStdout(`${toJson({ error: { code: "INTERRUPTED", message } })}\n`);
  void Promise.allSettled([...interruptCleanups].map((cleanup) => cleanup())).finally(() => process.exit(130));
}
