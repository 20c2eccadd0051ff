// Child-process entry for tests: runs the CLI from the TypeScript sources, so tests never depend on a stale build.
// Like bin/lakeswap.js, it marks a Ctrl-C that arrives while the CLI loads, for main() to act on (src/cli/main.ts).
const EARLY_INTERRUPT = Symbol.for("lakeswap.interruptedWhileLoading");
const onEarlyInterrupt = () => {
  (globalThis as Record<symbol, unknown>)[EARLY_INTERRUPT] = true;
};
process.once("SIGINT", onEarlyInterrupt);
void start();

async function start(): Promise<void> {
  // Tests of a Ctrl-C that arrives while the CLI loads send it here, at a known point, rather than after a guessed delay.
  if (process.env.LAKESWAP_TEST_SIGINT_WHILE_LOADING === "1") {
    // A signal listener does not keep the process alive: the timer does, until the signal has come.
    const alive = setInterval(() => undefined, 1000);
    await new Promise((resolve) => {
      process.once("SIGINT", resolve);
      process.kill(process.pid, "SIGINT");
    });
    clearInterval(alive);
  }
  const { main } = await import("../../src/cli/main.js");
  // Removed once main() has installed its own handler (as bin/lakeswap.js does), so no Ctrl-C is dropped in between.
  const running = main(process.argv);
  process.off("SIGINT", onEarlyInterrupt);
  process.exitCode = await running;
}
