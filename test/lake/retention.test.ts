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

  it("keeps a run that stopped being current less than the grace window ago, however old it is (a catalog file reader may still read it)", () => {
    // Hourly syncs: run 05:00 (built 6 h 59 min ago) was current until the 06:00 swap, 5 h 59 min ago; the grace window is 6 h.
    const hourly = ["050000", "060000", "070000", "080000", "090000", "100000", "110000", "120000"].map((time) => run(time));
    const at = (time: string) => new Date(`2026-11-01T${time.slice(0, 2)}:${time.slice(2, 4)}:00Z`);
    const swaps = hourly.slice(1).map((r, i) => ({ runId: r.runId, previousRunId: hourly[i]!.runId, swappedAt: at(r.runId.slice(9, 15)) }));
    const later = new Date("2026-11-01T11:59:00Z");
    const decide = (withSwaps: boolean, graceMs: number) =>
      planRetention({ runs: hourly, currentRunId: hourly[7]!.runId, previousRunId: hourly[6]!.runId, swaps: withSwaps ? swaps : undefined, now: later, graceMs })
        .filter((d) => d.runId.includes("T05") || d.runId.includes("T06"))
        .map((d) => [d.runId.slice(9, 15), d.keep, d.reason]);
    expect(decide(true, 6 * hour)).toEqual([
      ["050000", true, "replaced within grace window"],
      ["060000", true, "within grace window"],
    ]);
    // Without the swaps only its age counted: it was removed 6 h after it was built, while still read.
    expect(decide(false, 6 * hour)[0]).toEqual(["050000", false, "superseded"]);
    // Once it stopped being current longer ago than the window, it goes.
    expect(decide(true, 5 * hour)[0]).toEqual(["050000", false, "superseded"]);
  });

  it("keeps the runs a rollback skipped while the swap after that rollback is within the window", () => {
    // 01:00 -> 02:00 -> 03:00, rolled back to 01:00 (02:00 and 03:00 current until then), then 04:00 swapped in at 11:30.
    const runs = [run("010000"), run("020000"), run("030000"), run("040000"), run("050000")];
    const swaps = [{ runId: runs[3]!.runId, previousRunId: runs[0]!.runId, swappedAt: new Date("2026-11-01T11:30:00Z") }];
    const decisions = planRetention({ runs, currentRunId: runs[4]!.runId, previousRunId: runs[3]!.runId, swaps, now, graceMs: 2 * hour });
    expect(decisions.map((d) => [d.runId.slice(9, 15), d.keep, d.reason])).toEqual([
      ["010000", true, "replaced within grace window"],
      ["020000", true, "replaced within grace window"],
      ["030000", true, "replaced within grace window"],
      ["040000", true, "previous"],
      ["050000", true, "current"],
    ]);
  });
});
