import { defineConfig } from "vitest/config";
import SlowFirstSequencer from "./test/support/slow-first-sequencer.js";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Child processes that start without parsing extra CA certificates (test/support/no-extra-ca-certs.ts); the run's
    // temporary folder on a memory file system where there is room (test/support/test-tmpdir.ts); then
    // bundles the CLI (and the helper scripts tests start as child processes) from the sources, once per run; and
    // one PostgreSQL cluster for the run and one set of AWS emulators per worker (each in a process of its own),
    // started when a test first asks for them.
    globalSetup: ["test/support/no-extra-ca-certs.ts", "test/support/test-tmpdir.ts", "test/support/build-bundles.ts", "test/support/global-services.ts"],
    // Test files run one after another in their worker's process, which loads lakeswap, DuckDB and the AWS SDK once
    // instead of once per file (a fresh module graph per file cost about a third of the suite's CPU). Each file
    // still starts its own lakes, workspaces and processes; what a file sets in process.env is put back after it.
    isolate: false,
    setupFiles: ["test/support/restore-env.ts"],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    pool: "forks",
    // A larger young generation for the workers: they allocate much that dies young (AWS SDK requests, DuckDB results),
    // and V8's default (16 MB semi-spaces) scavenged so often that GC took about 5% of their CPU. On 2 cores, side by
    // side on one machine: 379 s with the default, 359 s with this.
    execArgv: ["--max-semi-space-size=32"],
    // More workers than cores: most tests wait on child processes, fsyncs and servers. On 2 cores one worker (the default)
    // took 22 minutes; side by side on one machine, one after another: 2 workers 437 s, 3 workers 405 s, 4 workers 439 s.
    maxWorkers: 3,
    // The longest files first, also in CI where vitest has no durations cached from an earlier run.
    sequence: { sequencer: SlowFirstSequencer },
  },
});
