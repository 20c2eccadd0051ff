// Where this test run's bundles are (built once per run by test/support/build-bundles.ts, vitest's global setup).
import { existsSync } from "node:fs";
import path from "node:path";

/** The environment variable that names the folder of this run's bundles. */
export const BUNDLES_VARIABLE = "LAKESWAP_TEST_BUNDLES";

/** The bundle built from `test/support/<script>` (`run-cli.ts` for the CLI): the file to run with node. */
export function bundleOf(script: string): string {
  const dir = process.env[BUNDLES_VARIABLE];
  if (!dir) throw new Error(`${BUNDLES_VARIABLE} is not set: run the tests through vitest (its global setup, test/support/build-bundles.ts, builds the bundles)`);
  const file = path.join(dir, script.replace(/\.ts$/, ".cjs"));
  if (!existsSync(file)) throw new Error(`no bundle ${file} of test/support/${script}: add it to test/support/build-bundles.ts`);
  return file;
}
