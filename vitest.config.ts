import { defineConfig } from "vitest/config";
import SlowFirstSequencer from "./test/support/slow-first-sequencer.js";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // The run's temporary folder on a memory file system where there is room (test/support/test-tmpdir.ts); then
    // bundles the CLI (and the helper scripts tests start as child processes) from the sources, once per run; and
    // one PostgreSQL cluster for the run and one set of AWS emulators per worker (each in a process of its own),
    // started when a test first asks for them.
    globalSetup: ["test/support/test-tmpdir.ts", "test/support/build-bundles.ts", "test/support/global-services.ts"],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    pool: "forks",
    // Both cores: most tests wait on child processes, fsyncs and servers; one worker (the default on 2 cores) took 22 minutes.
    maxWorkers: 2,
    // The longest files first, also in CI where vitest has no durations cached from an earlier run.
    sequence: { sequencer: SlowFirstSequencer },
  },
});
