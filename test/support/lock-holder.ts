// Child of the kernel-lock suite (test/store/kernel-lock.test.ts): a process that takes the kernel lock of one file
// (src/store/kernel-lock.ts) and holds it. It prints one JSON line, {"answer":"held"|"busy"|{"unavailable":...},"pid"},
// then obeys one command per stdin line (a JSON string), answering each with a JSON line:
//   spawn-sleep  starts `sleep 300` as its own child, as a writer starts a tool: {"sleeper":<pid>}
//   release      releases the lock: {"released":true}
// It exits when stdin closes. --native off takes the lock through flock(1) instead of lakeswap's extension.
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";
import { takeKernelLock } from "../../src/store/kernel-lock.js";

const { values } = parseArgs({ options: { file: { type: "string" }, native: { type: "string" } }, strict: true });
if (values.file === undefined) throw new Error("usage: lock-holder --file FILE [--native off]");
const file = values.file;
// No top-level await: the test run bundles this script as CommonJS (test/support/build-bundles.ts).
void main();

async function main(): Promise<void> {
  const answer = (value: unknown) => process.stdout.write(`${JSON.stringify(value)}\n`);
  const lock = await takeKernelLock(file, { native: values.native !== "off" });
  answer({ answer: typeof lock === "string" || "unavailable" in lock ? lock : "held", pid: process.pid });
  for await (const line of createInterface({ input: process.stdin })) {
    const command = JSON.parse(line) as string;
    if (command === "spawn-sleep") {
      const sleeper = spawn("sleep", ["300"], { stdio: "ignore" });
      sleeper.unref();
      answer({ sleeper: sleeper.pid });
    } else if (command === "release" && typeof lock === "object" && !("unavailable" in lock)) {
      await lock.release();
      answer({ released: true });
    }
  }
}
