// The crash kit's handshake with a child stopped at a fault point (LAKESWAP_FAULT=<point>:stop).
import { spawn } from "node:child_process";
import { describe, expect, it } from "vitest";
import { Child } from "./crash-kit.js";

/** A child that says what src/shared/faults.ts says at a `stop` fault point, stops itself the same way, then prints `went on`. */
function stoppingChild(): Child {
  const script = [
    "process.stderr.write(`lakeswap: fault point after-build reached: stopping (pid ${process.pid}); continue it with kill -CONT ${process.pid}\\n`);",
    "process.kill(process.pid, 'SIGSTOP');",
    "process.stdout.write('went on\\n');",
  ].join("\n");
  return new Child(spawn(process.execPath, ["-e", script], { stdio: ["ignore", "pipe", "pipe"] }));
}

describe("Child.untilStopped", () => {
  // Found in CI: a test sent SIGCONT on the child's word alone, which comes before its SIGSTOP takes effect; the SIGCONT
  // arrived first and was lost, and the child stayed stopped until the test timed out.
  it("returns only once the child is stopped, so a SIGCONT sent at once is never lost", async () => {
    for (let n = 0; n < 20; n += 1) {
      const child = stoppingChild();
      try {
        await child.untilStopped("after-build", 10_000);
        child.kill("SIGCONT");
        await child.until("the child to go on", () => child.lines.includes("went on"), 10_000);
        expect(await child.exited).toEqual({ code: 0, signal: null });
      } finally {
        child.kill("SIGKILL");
      }
    }
  }, 60_000);
});
