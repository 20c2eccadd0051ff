// The model test (issue 25, item 22): random sequences of CLI commands against a small pipeline (raw items by day,
// stage = a filter + project of raw), each applied to a reference model too (./model.ts), and the lake read after
// every command as a plain reader would (./lake-view.ts) and compared with the model (./check.ts).
//
// `npm test` runs a fixed seed and a few short sequences; `npm run test:model -- --runs N [--seed S] [--commands C]`
// runs more. A failure prints the shrunk sequence of commands (`sync --input <01:v2,03:v0 order#5>`: days of the
// pool, each in a variant of model.ts's `variantRows`, rows shuffled by the order number), with the seed and path to
// replay it: MODEL_SEED=S MODEL_PATH=P npm run test:model.
import fc from "fast-check";
import { describe, it } from "vitest";
import { SignatureMap } from "./check.js";
import { ordinaryCommands, type Real } from "./commands.js";
import { LakeModel } from "./model.js";
import { Workspace } from "./workspace.js";

const settings = {
  seed: Number(process.env.MODEL_SEED ?? 20261202),
  runs: Number(process.env.MODEL_RUNS ?? 6),
  commands: Number(process.env.MODEL_COMMANDS ?? 15),
  path: process.env.MODEL_PATH,
};
const long = process.env.MODEL_RUNS !== undefined;

describe("the lake against a reference model, over random command sequences", () => {
  it(
    "embedded lake: sync, rollback (partition and --sync), replace, pin, gc --grace 0",
    async () => {
      await fc.assert(
        fc.asyncProperty(fc.commands(ordinaryCommands(), { maxCommands: settings.commands, replayPath: settings.path }), async (commands) => {
          const ws = new Workspace();
          try {
            await fc.asyncModelRun(() => ({ model: new LakeModel(), real: { ws, signatures: new SignatureMap(), log: [] } satisfies Real }), commands);
          } finally {
            if (process.env.MODEL_VERBOSE) process.stderr.write(`model run: ${[...commands].map(String).join(" ; ")}\n`);
            ws.cleanup();
          }
        }),
        { seed: settings.seed, numRuns: settings.runs, path: settings.path, endOnFailure: !long, verbose: 1 },
      );
    },
    long ? 24 * 3_600_000 : 120_000,
  );
});
