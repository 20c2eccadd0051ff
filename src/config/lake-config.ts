import path from "node:path";
import { parseDuration } from "../model/duration.js";
import { DEFAULT_LEASE_WAIT_MS } from "../lake/lease.js";
import { DEFAULT_GRACE_MS } from "../lake/retention.js";

/** The settings of an embedded lake, from flags first, then the environment, then the pipeline config, then defaults. */
export interface LakeConfig {
  /** The lake folder (`--lake`, env `LAKESWAP_LAKE`, default `./lake`). */
  readonly lakeDir: string;
  /** GC grace window (`--grace`, env `LAKESWAP_GRACE`, default 6h). */
  readonly graceMs: number;
  /** How long to wait for another writer (`--wait`/`--no-wait`, env `LAKESWAP_WAIT`, default 2m). */
  readonly leaseWaitMs: number;
}

/** Raw option values as the CLI received them. */
export interface LakeConfigInput {
  readonly lake?: string;
  readonly grace?: string;
  /** `--wait DURATION` gives a string, `--no-wait` gives false. */
  readonly wait?: string | boolean;
}

/** Resolves the lake settings from flags and environment. */
export function resolveLakeConfig(
  input: LakeConfigInput,
  env: NodeJS.ProcessEnv = process.env,
  fromConfigFile: { readonly lake?: string; readonly grace?: string } = {},
): LakeConfig {
  const lakeDir = path.resolve(input.lake ?? env.LAKESWAP_LAKE ?? fromConfigFile.lake ?? "lake");
  const grace = input.grace ?? env.LAKESWAP_GRACE ?? fromConfigFile.grace;
  const graceSource = input.grace !== undefined ? "--grace" : env.LAKESWAP_GRACE !== undefined ? "LAKESWAP_GRACE" : "grace (config)";
  const graceMs = grace !== undefined ? parseDuration(grace, graceSource) : DEFAULT_GRACE_MS;
  let leaseWaitMs = DEFAULT_LEASE_WAIT_MS;
  if (input.wait === false) leaseWaitMs = 0;
  else if (typeof input.wait === "string") leaseWaitMs = parseDuration(input.wait, "--wait");
  else if (env.LAKESWAP_WAIT !== undefined) leaseWaitMs = parseDuration(env.LAKESWAP_WAIT, "LAKESWAP_WAIT");
  return { lakeDir, graceMs, leaseWaitMs };
}
