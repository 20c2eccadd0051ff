import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    pool: "forks",
    // Both cores: most tests wait on child processes, fsyncs and servers; one worker (the default on 2 cores) took 22 minutes.
    maxWorkers: 2,
  },
});
