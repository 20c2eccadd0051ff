// Child writer of the lease suites: a second process that writes to the same lake through the library, with a
// lease TTL of its own (the CLI has no flag for it). It runs one replace per JSON line read from stdin,
// {"table","partition","select"}, and answers each with one JSON line: {"ok":true,"result":ReplaceResult} or
// {"ok":false,"code","message"}. It prints {"ready":true,"pid"} first and exits when stdin closes.
//
// The lake is named as the CLI names it (--lake DIR, else env LAKESWAP_LAKE), so a test passes backend.cliArgs.
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";
import { resolveLakeConfig } from "../../src/config/lake-config.js";
import { LakeswapError, errorMessage } from "../../src/model/errors.js";
import { openLakeForChild } from "./child-lake.js";
import { replacePartition } from "../../src/lake/operations/replace.js";

const { values } = parseArgs({
  options: { lake: { type: "string" }, "lease-ttl-ms": { type: "string" }, wait: { type: "string" } },
  strict: true,
});
const config = resolveLakeConfig({ lake: values.lake, wait: values.wait });
const ttl = values["lease-ttl-ms"] !== undefined ? Number(values["lease-ttl-ms"]) : undefined;
// No top-level await: the test run bundles this script as CommonJS (test/support/build-bundles.ts).
void main();

async function main(): Promise<void> {
  const lake = await openLakeForChild(config.lakeDir, { graceMs: config.graceMs, leaseWaitMs: config.leaseWaitMs, leaseTtlMs: ttl });
  const answer = (value: unknown) => process.stdout.write(`${JSON.stringify(value)}\n`);

  answer({ ready: true, pid: process.pid });
  for await (const line of createInterface({ input: process.stdin })) {
    if (line.trim().length === 0) continue;
    const command = JSON.parse(line) as { table: string; partition: string; select: string };
    try {
      answer({ ok: true, result: await replacePartition(lake, command.table, command.partition, { select: command.select }) });
    } catch (error) {
      answer({ ok: false, code: error instanceof LakeswapError ? error.code : "INTERNAL", message: errorMessage(error) });
    }
  }
  await lake.close();
}
