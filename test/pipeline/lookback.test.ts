import { describe, expect, it } from "vitest";
import { addDays, assertDay, todayIn } from "../../src/model/day.js";
import { windowDays } from "../../src/pipeline/lookback.js";

const window = { key: "date", lookbackDays: 3, timezone: "UTC", allowEmpty: false };

describe("lookback windows", () => {
  it("takes the last day and lookback_days before it, across month and year ends, plus the days --partition names", () => {
    expect(windowDays(window, "2026-12-01", [])).toEqual(["2026-11-28", "2026-11-29", "2026-11-30", "2026-12-01"]);
    expect(windowDays({ ...window, lookbackDays: 2 }, "2027-01-01", [])).toEqual(["2026-12-30", "2026-12-31", "2027-01-01"]);
    expect(windowDays({ ...window, lookbackDays: 1 }, "2028-03-01", [])).toEqual(["2028-02-29", "2028-03-01"]);
    expect(windowDays({ ...window, lookbackDays: 0 }, "2026-12-01", ["date=2026-10-02", "month=2026-10", "date=2026-11-30"])).toEqual(["2026-10-02", "2026-11-30", "2026-12-01"]);
    expect(() => windowDays(window, "2026-12-01", ["date=2026-02-30"])).toThrow("--partition date=2026-02-30: '2026-02-30' is not a day; write it as YYYY-MM-DD");
  });

  it("counts today in the source's time zone", () => {
    const instant = new Date("2026-12-01T03:30:00Z");
    expect(todayIn("UTC", instant)).toBe("2026-12-01");
    expect(todayIn("America/Los_Angeles", instant)).toBe("2026-11-30");
    expect(todayIn("Pacific/Kiritimati", new Date("2026-11-30T11:00:00Z"))).toBe("2026-12-01");
  });

  it("reads days strictly", () => {
    expect(assertDay("2026-11-30", "x")).toBe("2026-11-30");
    for (const bad of ["2026-11-31", "2026-1-30", "20261130", "2026-11-30T00:00", "", "2026-13-01"]) expect(() => assertDay(bad, "--as-of"), bad).toThrow(/--as-of: '.*' is not a day/);
    expect(addDays("2026-03-29", 1)).toBe("2026-03-30");
  });
});
