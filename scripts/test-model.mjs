#!/usr/bin/env node
// `npm run test:model -- --runs N [--commands C] [--seed S] [--path P --replay R] [--backends local,aws] [--test NAME]`: the
// model test (test/model) with more sequences than `npm test` runs. The options become MODEL_* environment variables,
// which the test reads (vitest itself does not pass arguments on to a test file); --test runs only the tests whose
// name contains NAME (vitest's -t). A failure prints its seed and path, and the commands' replayPath (R): given all
// three, the run replays that sequence.
import { spawnSync } from "node:child_process";

const names = { "--runs": "MODEL_RUNS", "--commands": "MODEL_COMMANDS", "--seed": "MODEL_SEED", "--path": "MODEL_PATH", "--replay": "MODEL_REPLAY", "--backends": "BACKENDS", "--test": "MODEL_TEST" };
const env = { ...process.env };
const args = process.argv.slice(2);
for (let i = 0; i < args.length; i += 1) {
  const [flag, inline] = args[i].split("=", 2);
  const name = names[flag];
  const value = inline ?? args[++i];
  if (!name || value === undefined) {
    console.error(`test:model: unknown option '${args[i] ?? flag}'; use ${Object.keys(names).join(", ")}, each with a value`);
    process.exit(2);
  }
  env[name] = value;
}
env.MODEL_RUNS ??= "50";
const filter = env.MODEL_TEST ? ["-t", env.MODEL_TEST] : [];
const result = spawnSync("npx", ["vitest", "run", "test/model", ...filter], { stdio: "inherit", env });
process.exit(result.status ?? 1);
