import { describe, expect, it } from "vitest";
import { resolveEdited } from "../support/pipeline-fixture.js";

describe("audits: and publish: in lakeswap.yaml", () => {
  it("resolves each check (one audit per column where a check maps several), with its name and severity", () => {
    const dataset = resolveEdited((c) => {
      c.datasets.orders.audits = [
        { not_null: ["amount", "customer_id"] },
        { unique: { columns: ["order_id"], scope: "table" }, severity: "warn" },
        { accepted_values: { status: ["completed", "cancelled"], day: ["2026-11-01"] } },
        { range: { amount: { min: 0 } } },
        { row_count: { min: 1, max_change: "50%" } },
        { freshness: { column: "order_ts", max_age: "36h" } },
        { name: "no_refunds", sql: "SELECT * FROM orders_raw WHERE status = 'refunded'" },
      ];
      c.datasets.orders.publish = "all_or_nothing";
    })().datasets[0]!;
    expect(dataset.publish).toBe("all_or_nothing");
    expect(dataset.audits.map((a) => [a.name, a.severity])).toEqual([
      ["not_null(amount, customer_id)", "error"],
      ["unique(order_id; table)", "warn"],
      ["accepted_values(status)", "error"],
      ["accepted_values(day)", "error"],
      ["range(amount)", "error"],
      ["row_count", "error"],
      ["freshness(order_ts)", "error"],
      ["no_refunds", "error"],
    ]);
    expect(dataset.audits[5]!.check).toEqual({ kind: "row_count", min: 1, max: undefined, maxChange: 0.5 });
    expect(dataset.audits[6]!.check).toMatchObject({ kind: "freshness", maxAgeMs: 36 * 3_600_000 });
    // A layer's audits name its own columns (and partition keys).
    const layer = resolveEdited((c) => (c.datasets.orders.layers[1].audits = [{ not_null: ["revenue", "month"] }]))().datasets[0]!.layers[1]!;
    expect(layer.audits.map((a) => a.name)).toEqual(["not_null(revenue, month)"]);
  });

  it.each([
    ["an entry with no check", [{ severity: "warn" }], /datasets\.orders\.audits\[0\]: no check given; an audit holds exactly one of not_null, unique/],
    ["two checks in one entry", [{ not_null: ["amount"], unique: ["order_id"] }], /audits\[0\]: not_null and unique in one entry; an audit holds exactly one of .* \(write two entries for two checks\)/],
    ["a column the layer lacks", [{ not_null: ["amout"] }], /audits\[0\]\.not_null: column 'amout' is not a column of this layer \(did you mean 'amount'\?\)/],
    ["a range without bounds", [{ range: { amount: {} } }], /audits\[0\]\.range\.amount: give min, max or both/],
    ["a max_change that is not a percentage", [{ row_count: { max_change: "half" } }], /audits\[0\]\.row_count\.max_change: .*a percentage, e\.g\. 50%/],
    ["min above max", [{ row_count: { min: 10, max: 5 } }], /audits\[0\]\.row_count: min 10 is above max 5/],
    ["a max_age that is not a duration", [{ freshness: { column: "order_ts", max_age: "soon" } }], /audits\[0\]\.freshness\.max_age 'soon' is not a duration/],
    ["a severity that is not one", [{ not_null: ["amount"], severity: "fatal" }], /audits\[0\]\.severity: expected one of "error", "warn"/],
    ["the same audit twice", [{ not_null: ["amount"] }, { not_null: ["amount"] }], /audits\[1\]: audit 'not_null\(amount\)' is declared twice in this layer; give one of them a name:/],
  ])("refuses %s, naming where and the fix", (_what, audits, message) => {
    expect(resolveEdited((c) => (c.datasets.orders.audits = audits))).toThrow(message);
  });

  it("refuses publish: that is not a mode", () => {
    expect(resolveEdited((c) => (c.datasets.orders.publish = "atomic"))).toThrow(/datasets\.orders\.publish: expected one of "per_partition", "all_or_nothing"/);
  });
});
