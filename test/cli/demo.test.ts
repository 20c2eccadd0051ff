import { existsSync, readdirSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import { embeddedBackend, type TestBackend } from "../support/lake-fixture.js";
import { runMain } from "../support/main-cli.js";

let backend: (TestBackend & { lakeDir: string }) | undefined;
afterEach(async () => backend?.cleanup());

describe("lakeswap demo", () => {
  it("runs the swap story end to end: 100, 120, then 100 after rollback, and tears down to nothing", async () => {
    backend = await embeddedBackend();
    const result = await runMain([...backend.cliArgs, "demo", "--json"]);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    const report = JSON.parse(result.stdout) as { steps: { step: string; count?: number; runId?: string; previousRunId?: string }[] };
    const counts = report.steps.filter((s) => s.step === "count").map((s) => s.count);
    expect(counts).toEqual([100, 120, 100]);
    const swaps = report.steps.filter((s) => s.step === "swap");
    expect(swaps).toHaveLength(2);
    const [run1, run2] = swaps.map((s) => s.runId);
    expect(run1).toMatch(/^\d{8}T\d{6}Z-[0-9a-f]{6}$/);
    expect(run2! > run1!).toBe(true);
    expect(swaps[1]!.previousRunId).toBe(run1);
    const rollback = report.steps.find((s) => s.step === "rollback")!;
    expect(rollback.runId).toBe(run1);
    expect(rollback.previousRunId).toBe(run2);
    expect(existsSync(backend.lakeDir)).toBe(false);
  });

  it("runs step by step with its state in the lake folder; run 1 survives the second swap and its GC", async () => {
    backend = await embeddedBackend();
    const step = async (...args: string[]) => {
      const result = await runMain([...backend!.cliArgs, ...args]);
      expect(result.stderr, `${args.join(" ")}: ${result.stderr}`).toBe("");
      expect(result.code).toBe(0);
      return result.stdout;
    };
    const json = async (...args: string[]) => JSON.parse(await step(...args, "--json")) as { steps: { count?: number; runId?: string }[] };
    await step("demo", "setup");
    const run1 = (await json("demo", "swap")).steps[0]!.runId!;
    expect((await json("demo", "count")).steps[0]!.count).toBe(100);
    await step("demo", "change");
    // A grace window of 0 makes GC remove everything the retention rule allows: run 1 stays as the previous run.
    const swap2 = await runMain([...backend.cliArgs, "demo", "swap", "--json"], { LAKESWAP_GRACE: "0" });
    expect(swap2.code).toBe(0);
    expect((await json("demo", "count")).steps[0]!.count).toBe(120);
    const history = JSON.parse(await step("history", "demo_target", "--partition", "day=2026-11-01", "--json")) as {
      runs: { runId: string; state: string; rows: number }[];
    }[];
    expect(history[0]!.runs.map((r) => [r.runId, r.state, r.rows])).toEqual([
      [expect.any(String), "current", 120],
      [run1, "previous", 100],
    ]);
    expect((await json("demo", "rollback")).steps[0]!.runId).toBe(run1);
    expect((await json("demo", "count")).steps[0]!.count).toBe(100);
    await step("demo", "teardown");
    expect(existsSync(backend.lakeDir) ? readdirSync(backend.lakeDir) : []).toEqual([]);
  });
});
