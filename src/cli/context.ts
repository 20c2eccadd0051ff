import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import type { Command } from "commander";
import { awsTargetInEnvironment, resolveAwsTarget, type AwsTarget } from "../config/aws-config.js";
import { resolveLakeConfig, type LakeConfig } from "../config/lake-config.js";
import { loadPipelineConfig } from "../config/pipeline-config.js";
import { InvalidInputError, errorMessage } from "../model/errors.js";
import type { Lake } from "../lake/lake.js";
import { leaseSubject } from "../lake/lease.js";
import { printable } from "../model/sql.js";
import { openAwsLake, openEmbeddedLake } from "../open/open-lake.js";

/** Options every command understands. */
interface GlobalOptions {
  readonly lake?: string;
  readonly json?: boolean;
  readonly grace?: string;
  readonly wait?: string | boolean;
}

/** Where a command's lake settings come from besides its flags: a pipeline config, or the demo's explicit AWS target. */
export interface LakeSource {
  readonly lake?: string;
  readonly grace?: string;
  readonly aws?: AwsTarget;
  /** The pipeline config file the settings come from, for messages. */
  readonly file?: string;
  /** The AWS target was asked for on the command line (demo --aws): no need to say where the command runs. */
  readonly explicitAws?: boolean;
  /**
   * The command only reads (history, tables, query, syncs, plan): the lake is opened without replaying
   * pending catalog changes, so reading never moves a pointer; pending ones are reported on stderr.
   */
  readonly readOnly?: boolean;
}

/**
 * What runs when Ctrl-C arrives: each open lake's close (which stops running engine
 * queries, e.g. Athena's StopQueryExecution). src/cli/main.ts runs them, then exits 130.
 */
export const interruptCleanups = new Set<() => Promise<void>>();

/** The lake settings a command runs with, from its flags, the environment and the pipeline config. */
function lakeConfig(command: Command, fromConfigFile: { lake?: string; grace?: string } = {}): LakeConfig {
  return resolveLakeConfig(command.optsWithGlobals<GlobalOptions>(), process.env, fromConfigFile);
}

/**
 * Opens the lake for a command, runs `work`, and always closes it. Says on stderr which lake the
 * command runs on when it is not the one named by --lake (AWS from the environment or the config,
 * or a folder from LAKESWAP_LAKE, the config or the default), and refuses --lake with an AWS target.
 */
export async function withLake<T>(
  command: Command,
  work: (lake: Lake, config: LakeConfig) => Promise<T>,
  fromConfigFile: LakeSource = {},
): Promise<T> {
  const config = lakeConfig(command, fromConfigFile);
  const settings = {
    readOnly: fromConfigFile.readOnly === true,
    graceMs: config.graceMs,
    leaseWaitMs: config.leaseWaitMs,
    onLeaseWait: (holder: { table: string; pid: number; host: string; command: string; acquiredAt: string }) =>
      process.stderr.write(
        `waiting for ${leaseSubject(holder.table)}: pid ${holder.pid} on ${holder.host} (${holder.command}) holds its lease since ${holder.acquiredAt}\n`,
      ),
  };
  const fromEnvironment = fromConfigFile.aws === undefined && awsTargetInEnvironment(process.env);
  const aws = fromConfigFile.aws ?? (fromEnvironment ? resolveAwsTarget(undefined, process.env, "environment") : undefined);
  const lakeFlag = command.optsWithGlobals<GlobalOptions>().lake;
  if (aws) {
    const because = fromEnvironment ? "DATA_OUTPUT_S3_BUCKET is set" : `${path.basename(fromConfigFile.file ?? "the config")} declares data_sinks`;
    const where = `AWS (s3://${aws.bucket}${aws.prefix ? `/${aws.prefix}` : ""}, Glue database ${aws.database})`;
    if (lakeFlag !== undefined) {
      throw new InvalidInputError(
        `--lake '${printable(lakeFlag)}' names an embedded lake, but this command runs on ${where} because ${because}: ` +
          (fromEnvironment ? "unset DATA_OUTPUT_S3_BUCKET to use the folder, or leave out --lake" : "leave out --lake, or use a config without data_sinks"),
      );
    }
    if (!fromConfigFile.explicitAws) process.stderr.write(`lakeswap: running on ${where}, because ${because}\n`);
  } else if (lakeFlag === undefined) {
    const source = process.env.LAKESWAP_LAKE !== undefined ? "LAKESWAP_LAKE" : fromConfigFile.lake !== undefined ? `lake: in ${path.basename(fromConfigFile.file ?? "the config")}` : "the default; name another with --lake";
    process.stderr.write(`lakeswap: embedded lake ${config.lakeDir} (${source})\n`);
  }
  const lake = aws ? await openAwsLake(aws, settings) : await openEmbeddedLake(config.lakeDir, settings);
  const cleanup = () => lake.close();
  interruptCleanups.add(cleanup);
  try {
    if (fromConfigFile.readOnly) await reportPendingChanges(lake);
    return await work(lake, config);
  } finally {
    interruptCleanups.delete(cleanup);
    await lake.close();
  }
}

/** Says on stderr which pointer moves a writer left unconfirmed (a read-only command does not replay them). */
async function reportPendingChanges(lake: Lake): Promise<void> {
  const pending = await lake.pendingChanges();
  if (pending.length === 0) return;
  const shown = pending.slice(0, 5).map((p) => `${p.table}/${p.partition} -> run ${p.runId}`).join(", ");
  process.stderr.write(
    `lakeswap: ${pending.length} pointer move(s) recorded by an interrupted writer are pending (${shown}${pending.length > 5 ? ", …" : ""}): ` +
      "this command only reads and leaves them; the next command that writes (sync, replace, rollback, gc) completes them\n",
  );
}

/** Loads the pipeline config named by -c, as the lake source of a command that does not need its datasets. */
export function configSource(file: string | undefined, options: { readonly readOnly?: boolean } = {}): LakeSource {
  return { ...(file !== undefined ? loadPipelineConfig(file) : {}), ...options };
}

/** True when the command was given --json. */
export function wantsJson(command: Command): boolean {
  return command.optsWithGlobals<GlobalOptions>().json === true;
}

/** Adds --wait/--no-wait to a command that writes. */
export function addWaitOptions(command: Command): Command {
  return command
    .option("--wait <duration>", "wait up to this long for another writer of the table (default 2m, env LAKESWAP_WAIT)")
    .option("--no-wait", "fail at once if another writer holds the table");
}

/** Reads a file named by a flag (--sql-file, --columns-file), or an InvalidInputError naming the flag and the file. */
export function readFlagFile(flag: string, file: string): string {
  const absolute = path.resolve(file);
  if (!existsSync(absolute)) {
    throw new InvalidInputError(`${flag} '${printable(file)}': no such file (looked at ${absolute}); check the path`);
  }
  try {
    return readFileSync(absolute, "utf8");
  } catch (error) {
    throw new InvalidInputError(`${flag} '${printable(file)}' cannot be read: ${errorMessage(error)}`);
  }
}

/** Parses --limit and other counts: a whole number from 1, or commander's usage error (exit 2) quoting the value. */
export function positiveCount(flag: string): (value: string) => number {
  return (value: string) => {
    if (!/^\d+$/.test(value.trim()) || Number(value) < 1) {
      throw new InvalidInputError(`${flag} '${printable(value)}' is not a count: use a whole number from 1, for example ${flag} 5`);
    }
    return Number(value);
  };
}
