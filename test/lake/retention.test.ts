import { describe, expect, it } from "vitest";
import { planRetention } from "../../src/lake/retention.js";

const run = (time: string, published = true, hasFiles = true) => ({ runId: `20261101T${time}Z-aaaaaa`, published, hasFiles });
const now = new Date("2026-11-01T12:00:00Z");
const hour = 3_600_000;

describe("retention", () => {
  it("keeps current, previous and everything younger than the grace window; removes the rest", () => {
    const runs = [run("010000"), run("020000"), run("030000"), run("110000"), run("113000", false)];
    const decisions = planRetention({
      runs,
      currentRunId: runs[2]!.runId,
      previousRunId: runs[1]!.runId,
      now,
      graceMs: 2 * hour,
    });
    expect(decisions.map((d) => [d.runId.slice(9, 15), d.keep, d.reason])).toEqual([
      ["010000", false, "superseded"],
      ["020000", true, "previous"],
      ["030000", true, "current"],
      ["110000", true, "within grace window"],
      ["113000", true, "within grace window"],
    ]);
  });

  it("removes incomplete builds and leftover manifests once they are older than the window", () => {
    const runs = [run("010000", false), run("020000"), run("030000", true, false), run("040000")];
    const decisions = planRetention({ runs, currentRunId: runs[3]!.runId, previousRunId: runs[1]!.runId, now, graceMs: 0 });
    expect(decisions.filter((d) => !d.keep).map((d) => [d.runId.slice(9, 15), d.reason])).toEqual([
      ["010000", "incomplete build"],
      ["030000", "leftover manifest"],
    ]);
  });

  it("after a rollback keeps the run rolled away from (previous) and the next rollback target", () => {
    // run1 -> run2 -> run3, then rollback to run2: previous is run3, the rollback target is run1.
    const runs = [run("010000"), run("020000"), run("030000")];
    const decisions = planRetention({ runs, currentRunId: runs[1]!.runId, previousRunId: runs[2]!.runId, now, graceMs: 0 });
    expect(decisions.map((d) => d.reason)).toEqual(["rollback target", "current", "previous"]);
  });

  it("never takes an incomplete build (files, no manifest) older than the current run as the rollback target", () => {
    // run1 -> run2, a build at 02:30 that never completed, then run3: the rollback target is run2, the build is collected.
    const runs = [run("010000"), run("020000"), run("023000", false), run("030000")];
    const decisions = planRetention({ runs, currentRunId: runs[3]!.runId, now, graceMs: 0 });
    expect(decisions.map((d) => [d.runId.slice(9, 15), d.keep, d.reason])).toEqual([
      ["010000", false, "superseded"],
      ["020000", true, "rollback target"],
      ["023000", false, "incomplete build"],
      ["030000", true, "current"],
    ]);
  });

  it("never removes a run a pending catalog change refers to", () => {
    const runs = [run("010000"), run("020000"), run("030000", false)];
    const decisions = planRetention({
      runs,
      currentRunId: runs[1]!.runId,
      protectedRunIds: new Set([runs[2]!.runId]),
      now,
      graceMs: 0,
    });
    expect(decisions.every((d) => d.keep)).toBe(true);
  });
});
