// Vitest setup file: test files share their worker's process (vitest.config.ts, `isolate: false`), so what a file
// sets in process.env (a DATABASE_URL, a fault point, TMPDIR) is put back when the file ends, before the next one,
// and so are the functions it spied on (vi.spyOn of fs, process.stdout).
import { afterAll, beforeAll, vi } from "vitest";

let saved: Record<string, string | undefined> = {};

beforeAll(() => {
  saved = { ...process.env };
});

afterAll(() => {
  for (const name of Object.keys(process.env)) if (!(name in saved)) delete process.env[name];
  Object.assign(process.env, saved);
  vi.restoreAllMocks();
});
