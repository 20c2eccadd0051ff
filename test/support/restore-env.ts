// Vitest setup file: test files share their worker's process (vitest.config.ts, `isolate: false`), so what a file
// sets in process.env (a DATABASE_URL, a fault point, TMPDIR) is put back when the file ends, before the next one,
// and so are the functions it spied on (vi.spyOn of fs, process.stdout).
import os from "node:os";
import { afterAll, beforeAll, vi } from "vitest";

let saved: Record<string, string | undefined> = {};

beforeAll(() => {
  saved = { ...process.env };
});

afterAll(() => {
  assertEnvIsReal();
  for (const name of Object.keys(process.env)) if (!(name in saved)) delete process.env[name];
  Object.assign(process.env, saved);
  vi.restoreAllMocks();
});

/**
 * Fails the file that replaced process.env with a plain object (`process.env = saved`): from then on, what any later
 * file of this worker sets there no longer reaches the real environment, so os.tmpdir() ignores a TMPDIR a test set,
 * and the test cleans up the run's shared temporary folder instead of its own.
 */
function assertEnvIsReal(): void {
  const probe = `${os.tmpdir()}-probe`;
  const tmpdir = process.env.TMPDIR;
  process.env.TMPDIR = probe;
  const seen = os.tmpdir();
  if (tmpdir === undefined) delete process.env.TMPDIR;
  else process.env.TMPDIR = tmpdir;
  if (seen !== probe) throw new Error("this test file replaced process.env (process.env = ...): restore variables one by one instead");
}
