import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Bundles the CLI (and the helper scripts tests start as child processes) from the sources, once per run; and
    // one PostgreSQL cluster and one set of AWS emulators for the run, started when a test first asks for them.
    globalSetup: ["test/support/build-bundles.ts", "test/support/global-services.ts"],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    pool: "forks",
    // Both cores: most tests wait on child processes, fsyncs and servers; one worker (the default on 2 cores) took 22 minutes.
    maxWorkers: 2,
  },
});
