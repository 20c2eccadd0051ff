// The lake of a helper child process (crash-writer.ts, reader-loop.ts), kept apart from lake-fixture.ts so that a
// helper loads no emulator code.
import type { Lake, LakeSettings } from "../../src/lake/lake.js";
import { awsTargetInEnvironment, resolveAwsTarget } from "../../src/config/aws-config.js";
import { openAwsLake, openEmbeddedLake } from "../../src/open/open-lake.js";

/** Opens the lake a child process was pointed at, as the CLI would: AWS when the environment names a target, else the folder. */
export async function openLakeForChild(lakeDir: string, settings: LakeSettings = {}): Promise<Lake> {
  if (awsTargetInEnvironment(process.env)) return openAwsLake(resolveAwsTarget(undefined, process.env, "environment"), settings);
  return openEmbeddedLake(lakeDir, settings);
}
