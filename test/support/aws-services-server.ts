// A process of its own for a set of the run's shared AWS emulators (S3 behind the conditional-write proxy, Glue,
// Athena), started by vitest's global setup (test/support/global-services.ts). In vitest's main process they shared
// one event loop with the reporter and the workers' RPC, and every AWS test of both workers waited on it (the Athena
// emulator parses each query with a Trino grammar, synchronously); here each set has an event loop, and a core, of
// its own. It prints one JSON line, {"s3","glue","athena"} (their endpoints), once they listen, and stops them and
// exits when its stdin closes: when the run ends, or when vitest dies without a teardown.
import { startAwsServices } from "./aws-services.js";

// No top-level await: the test run bundles this script as CommonJS (test/support/build-bundles.ts).
void main();

async function main(): Promise<void> {
  const services = await startAwsServices();
  process.stdout.write(`${JSON.stringify({ s3: services.s3.endpoint, glue: services.glue.endpoint, athena: services.athena.endpoint })}\n`);
  process.stdin.on("end", () => {
    // A client still connected (a child process of a killed run) would hold close() open: exit regardless after a while.
    setTimeout(() => process.exit(0), 5000).unref();
    void services.close().finally(() => process.exit(0));
  });
  process.stdin.resume();
}
