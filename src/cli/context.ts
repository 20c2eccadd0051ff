import type { Command } from "commander";
import { awsTargetInEnvironment, resolveAwsTarget, type AwsTarget } from "../config/aws-config.js";
import { resolveLakeConfig, type LakeConfig } from "../config/lake-config.js";
import type { Lake } from "../core/lake.js";
import { openAwsLake, openEmbeddedLake } from "../open-lake.js";

/** Options every command understands. */
export interface GlobalOptions {
  readonly lake?: string;
  readonly json?: boolean;
  readonly grace?: string;
  readonly wait?: string | boolean;
}

/** The lake settings a command runs with, from its flags, the environment and the pipeline config. */
export function lakeConfig(command: Command, fromConfigFile: { lake?: string; grace?: string } = {}): LakeConfig {
  return resolveLakeConfig(command.optsWithGlobals<GlobalOptions>(), process.env, fromConfigFile);
}

/** Opens the lake for a command, runs `work`, and always closes it. */
export async function withLake<T>(
  command: Command,
  work: (lake: Lake, config: LakeConfig) => Promise<T>,
  fromConfigFile: { lake?: string; grace?: string; aws?: AwsTarget } = {},
): Promise<T> {
  const config = lakeConfig(command, fromConfigFile);
  const settings = {
    graceMs: config.graceMs,
    leaseWaitMs: config.leaseWaitMs,
    onLeaseWait: (holder: { table: string; pid: number; host: string; command: string; acquiredAt: string }) =>
      process.stderr.write(
        `waiting for table '${holder.table}': pid ${holder.pid} on ${holder.host} (${holder.command}) holds its lease since ${holder.acquiredAt}\n`,
      ),
  };
  const aws = fromConfigFile.aws ?? (awsTargetInEnvironment(process.env) ? resolveAwsTarget(undefined, process.env, "environment") : undefined);
  const lake = aws ? await openAwsLake(aws, settings) : await openEmbeddedLake(config.lakeDir, settings);
  // Ctrl-C stops running engine queries (Athena StopQueryExecution) before exiting.
  const interrupt = () => {
    void lake.close().finally(() => process.exit(130));
  };
  process.once("SIGINT", interrupt);
  try {
    return await work(lake, config);
  } finally {
    process.removeListener("SIGINT", interrupt);
    await lake.close();
  }
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
