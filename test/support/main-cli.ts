// Runs the CLI in this process (`main(argv)`), with stdout and stderr captured: a command without a child process.
import { vi } from "vitest";
import { main } from "../../src/cli/main.js";
import type { CliResult } from "./lake-fixture.js";

/**
 * Runs `lakeswap <args>` in-process and returns its exit code and output, as `runCli` does for a child.
 * `env` is set for the call only, and so is `options.cwd` (the working folder, default this process's).
 * Calls must not overlap (they share this process's stdout, stderr, environment and working folder).
 */
export async function runMain(args: readonly string[], env: Record<string, string | undefined> = {}, options: { readonly cwd?: string } = {}): Promise<CliResult> {
  let stdout = "";
  let stderr = "";
  const capture = (append: (text: string) => void) => (chunk: string | Uint8Array, ...rest: unknown[]): boolean => {
    append(typeof chunk === "string" ? chunk : Buffer.from(chunk).toString());
    const callback = rest.find((arg): arg is () => void => typeof arg === "function");
    callback?.();
    return true;
  };
  const out = vi.spyOn(process.stdout, "write").mockImplementation(capture((text) => (stdout += text)) as typeof process.stdout.write);
  const err = vi.spyOn(process.stderr, "write").mockImplementation(capture((text) => (stderr += text)) as typeof process.stderr.write);
  const saved = Object.fromEntries(Object.keys(env).map((key) => [key, process.env[key]]));
  for (const [key, value] of Object.entries(env)) setEnv(key, value);
  const cwd = process.cwd();
  try {
    if (options.cwd !== undefined) process.chdir(options.cwd);
    const code = await main(["node", "lakeswap", ...args]);
    return { code, signal: null, stdout, stderr };
  } finally {
    process.chdir(cwd);
    out.mockRestore();
    err.mockRestore();
    for (const [key, value] of Object.entries(saved)) setEnv(key, value);
  }
}

function setEnv(key: string, value: string | undefined): void {
  if (value === undefined) delete process.env[key];
  else process.env[key] = value;
}
