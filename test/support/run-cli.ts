// Child-process entry for tests: runs the CLI from the TypeScript sources, so tests never depend on a stale build.
// Like bin/lakeswap.js, it marks a Ctrl-C that arrives while the CLI loads, for main() to act on (src/cli/main.ts).
const EARLY_INTERRUPT = Symbol.for("lakeswap.interruptedWhileLoading");
const onEarlyInterrupt = () => {
  (globalThis as Record<symbol, unknown>)[EARLY_INTERRUPT] = true;
};
process.once("SIGINT", onEarlyInterrupt);
// Tests of a Ctrl-C that arrives while the CLI loads send it here, at a known point, rather than after a guessed delay.
if (process.env.LAKESWAP_TEST_SIGINT_WHILE_LOADING === "1") process.kill(process.pid, "SIGINT");
const { main } = await import("../../src/cli/main.js");
// Removed once main() has installed its own handler (as bin/lakeswap.js does), so no Ctrl-C is dropped in between.
const running = main(process.argv);
process.off("SIGINT", onEarlyInterrupt);
process.exitCode = await running;
