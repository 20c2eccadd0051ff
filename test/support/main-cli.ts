// Runs the CLI in this process (`main(argv)`), with stdout and stderr captured: a command without a child process.
import { expect, vi } from "vitest";
import { main } from "../../src/cli/main.js";
import { BACKEND_FACTORIES, cloneBackend, type CliResult, type TestBackend } from "./lake-fixture.js";
import { overrideEnvironment, restoreEnvironment } from "./process-env.js";

/** The end of the last call queued: calls run one after another (they share this process's stdout, stderr, environment and working folder). */
let queue: Promise<unknown> = Promise.resolve();

/**
 * Runs `lakeswap <args>` in-process and returns its exit code and output, as `runCli` does for a child.
 * `env` is set for the call only, and so is `options.cwd` (the working folder, default this process's).
 * Calls of concurrent tests wait for one another, so that each captures its own output; what else runs in this
 * process meanwhile sees `env` too (a variable that lakeswap reads only in the CLI, such as LAKESWAP_GRACE or the
 * AWS target's, is safe; TMPDIR or LAKESWAP_FAULT is not), but a child process started meanwhile does not (process-env.ts).
 */
export function runMain(args: readonly string[], env: Record<string, string | undefined> = {}, options: { readonly cwd?: string } = {}): Promise<CliResult> {
  const call = queue.then(() => runMainAlone(args, env, options));
  queue = call.catch(() => undefined);
  return call;
}

async function runMainAlone(args: readonly string[], env: Record<string, string | undefined>, options: { readonly cwd?: string }): Promise<CliResult> {
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
  overrideEnvironment(env);
  const cwd = process.cwd();
  try {
    if (options.cwd !== undefined) process.chdir(options.cwd);
    const code = await main(["node", "lakeswap", ...args]);
    return { code, signal: null, stdout, stderr };
  } finally {
    process.chdir(cwd);
    out.mockRestore();
    err.mockRestore();
    restoreEnvironment();
  }
}

/** Runs `lakeswap sync … --json` in this process: it must end with exit 0 and build nothing (a delivery sent again). */
export async function expectSyncBuildsNothing(args: readonly string[], env: Record<string, string | undefined> = {}): Promise<void> {
  const resend = await runMain(args, env);
  expect(resend.code, resend.stderr).toBe(0);
  expect((JSON.parse(resend.stdout) as { totals: { built: number } }).totals.built).toBe(0);
}

/**
 * A kill matrix's starting lake, made once: `args(backend)` run in this process on a fresh backend, the first time a
 * point asks for it. Each point works on a copy of it (`clone`, cloneBackend); `cleanup` removes it.
 */
export function syncedOnce(backendName: string, args: (backend: TestBackend) => readonly string[]): { clone(): Promise<TestBackend>; cleanup(): Promise<void> } {
  let synced: Promise<TestBackend> | undefined;
  const source = (): Promise<TestBackend> =>
    (synced ??= (async () => {
      const backend = await BACKEND_FACTORIES[backendName]!();
      const first = await runMain(args(backend), backend.cliEnv);
      expect(first.code, first.stderr).toBe(0);
      return backend;
    })());
  return {
    clone: async () => cloneBackend(await source()),
    cleanup: async () => {
      await (await synced?.catch(() => undefined))?.cleanup();
    },
  };
}
