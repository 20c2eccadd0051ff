import { Command, CommanderError } from "commander";
import { outOfMemoryMessage } from "../duckdb/duckdb-open.js";
import { EXIT_CODES, LakeswapError, errorMessage, isNoSpace } from "../model/errors.js";
import { interruptCleanups } from "./context.js";
import { takeJsonReport, toJson, writeStdout } from "./output.js";
import { registerCreateTable } from "./commands/create-table.js";
import { registerDemo } from "./commands/demo.js";
import { registerDropTable } from "./commands/drop-table.js";
import { registerGc } from "./commands/gc.js";
import { registerCompact } from "./commands/compact.js";
import { registerHistory } from "./commands/history.js";
import { registerQuery } from "./commands/query.js";
import { registerReplace } from "./commands/replace.js";
import { registerRollback } from "./commands/rollback.js";
import { registerTables } from "./commands/tables.js";
import { registerPlan } from "./commands/plan.js";
import { registerSync } from "./commands/sync.js";
import { registerSyncs } from "./commands/syncs.js";
import { registerPin } from "./commands/pin.js";
import { registerPublish } from "./commands/publish.js";
import { registerSchema } from "./commands/schema.js";
import { registerIngest } from "./commands/ingest.js";
import { registerServe } from "./commands/serve.js";

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
    registerHistory, registerGc, registerCompact, registerQuery, registerTables, registerPlan, registerSync, registerSyncs, registerPublish, registerPin, registerSchema, registerServe, registerIngest,
  ]) register(program);
  for (const command of program.commands) command.exitOverride();
  return program;
}

/**
 * The mark an entry point (bin/lakeswap.js, test/support/run-cli.ts) sets on `globalThis` when Ctrl-C
 * arrives while it still loads the CLI: main() then stops at once, as for a Ctrl-C during a command.
 */
export const EARLY_INTERRUPT = Symbol.for("lakeswap.interruptedWhileLoading");

/** Set by the first Ctrl-C: the command's own result or error is then not printed (the interruption was). */
let interrupted = false;

/**
 * Runs the CLI and returns its exit code (documented in the README); the only place that decides it,
 * and the only place that exits the process (on Ctrl-C, with 130). With --json, stdout gets exactly one
 * JSON document: the command's result, or the error, or (a sync with failed partitions) both in one.
 */
export async function main(argv: readonly string[]): Promise<number> {
  const json = argv.includes("--json");
  guardOutputStreams();
  quietAwsSdkNodeWarning();
  interrupted = false;
  const onInterrupt = () => interrupt(json);
  process.once("SIGINT", onInterrupt);
  try {
    const early = globalThis as { [EARLY_INTERRUPT]?: boolean };
    if (early[EARLY_INTERRUPT]) {
      delete early[EARLY_INTERRUPT];
      process.off("SIGINT", onInterrupt);
      onInterrupt();
      return 130;
    }
    const code = await run(argv, json);
    return interrupted ? 130 : code;
  } finally {
    // Removed again, so that main may run many times in one process (tests).
    process.off("SIGINT", onInterrupt);
  }
}

/**
 * The AWS SDK prints seven lines on every process under Node 20: its releases after January 2027 will need Node 22.
 * lakeswap pins the SDK's version, so that notice is for lakeswap's maintainers, not for someone running a command;
 * the CLI turns it off unless the variable is set (`AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED=false` keeps it).
 */
function quietAwsSdkNodeWarning(): void {
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true";
}

let outputGuarded = false;

/**
 * Once per process: a stdout whose reader went away (`lakeswap tables | head -1`) is not an error of ours (the rest
 * is dropped quietly), and a stderr that is closed or gone (`2>&-`, a parent that stopped reading) never turns the
 * command's exit code into 1: an unhandled 'error' event of either stream would crash the process.
 */
function guardOutputStreams(): void {
  if (outputGuarded) return;
  outputGuarded = true;
  process.stdout.on("error", (error: NodeJS.ErrnoException) => {
    if (error.code !== "EPIPE") writeStderr(`lakeswap: cannot write to stdout: ${error.message}\n`);
  });
  process.stderr.on("error", () => undefined);
}

/** Writes to stderr unless it is gone (its errors are ignored by guardOutputStreams). */
function writeStderr(text: string): void {
  if (process.stderr.destroyed || !process.stderr.writable) return;
  process.stderr.write(text);
}

/** Parses and runs one command line; returns its exit code. */
async function run(argv: readonly string[], json: boolean): Promise<number> {
  const program = buildProgram();
  // With --json, commander's own messages are not printed: the error document carries them (the help still goes to stderr).
  if (json) for (const command of [program, ...program.commands]) command.configureOutput({ outputError: () => undefined });
  try {
    await program.parseAsync([...argv]);
    const reported = takeJsonReport();
    if (json && reported && !interrupted) writeStdout(`${toJson(reported.value)}\n`);
    return 0;
  } catch (error) {
    const reported = takeJsonReport();
    if (interrupted) return 130;
    if (error instanceof CommanderError) return usageError(error, json);
    const { code, exitCode } = exitOf(error);
    const message = outOfMemoryMessage(errorMessage(error)) ?? errorMessage(error);
    if (json) {
      const failure = { error: { code, message } };
      // A report already made (a sync whose partitions partly failed) and the error are one document.
      const document = reported && typeof reported.value === "object" && reported.value !== null && !Array.isArray(reported.value)
        ? { ...reported.value, ...failure }
        : reported ? { result: reported.value, ...failure } : failure;
      writeStdout(`${toJson(document)}\n`);
    }
    writeStderr(`lakeswap: ${message}\n`);
    if (!(error instanceof LakeswapError) && process.env.LAKESWAP_DEBUG) writeStderr(`${(error as Error).stack}\n`);
    return exitCode;
  }
}

/**
 * The error code and exit code of a failure: a LakeswapError's own, except that a build or store failure caused by a
 * full disk (DuckDB's IO errors carry only "No space left on device") is NO_SPACE (10), as the README documents;
 * anything else unexpected is INTERNAL (1).
 */
function exitOf(error: unknown): { readonly code: string; readonly exitCode: number } {
  const generic = !(error instanceof LakeswapError) || error.code === "BUILD_FAILED" || error.code === "STORE_ERROR";
  if (generic && isNoSpace(error)) return { code: "NO_SPACE", exitCode: EXIT_CODES.NO_SPACE };
  return error instanceof LakeswapError ? { code: error.code, exitCode: error.exitCode } : { code: "INTERNAL", exitCode: 1 };
}

/**
 * The exit code of commander's error: 0 for --help and --version; else 2, with the message on stderr
 * (commander printed it already, unless --json) and, with --json, as the error document. commander
 * reports a missing command by showing the help with the internal message "(outputHelp)": that is
 * said in words instead.
 */
function usageError(error: CommanderError, json: boolean): number {
  if (error.exitCode === 0) return 0;
  const noCommand = error.code === "commander.help" || error.message === "(outputHelp)";
  const message = noCommand ? "no command given: name one (lakeswap --help lists them)" : error.message.replace(/^error: /, "");
  if (json || noCommand) writeStderr(`lakeswap: ${message}\n`);
  if (json) writeStdout(`${toJson({ error: { code: "INVALID_INPUT", message } })}\n`);
  return 2;
}

/** The message of a Ctrl-C, on stderr and (with --json) in the error document. */
const INTERRUPTED_MESSAGE = "interrupted (Ctrl-C): stopped; every partition pointer is where it was or on its new, complete run (lakeswap syncs and history show which)";

/**
 * Ctrl-C: says so (a JSON error with --json), closes the open lakes (stopping engine queries in
 * flight), and exits 130. Pointers move atomically, so one that had not moved stays where it was.
 * What the command still reports after this (its error, as its queries are stopped) is not printed.
 * A second Ctrl-C exits at once.
 */
function interrupt(json: boolean): void {
  interrupted = true;
  process.once("SIGINT", () => process.exit(130));
  writeStderr(`\nlakeswap: ${INTERRUPTED_MESSAGE}\n`);
  if (json) writeStdout(`${toJson({ error: { code: "INTERRUPTED", message: INTERRUPTED_MESSAGE } })}\n`);
  void Promise.allSettled([...interruptCleanups].map((cleanup) => cleanup())).finally(() => process.exit(130));
}
