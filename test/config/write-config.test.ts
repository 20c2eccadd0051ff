import { describe, expect, it } from "vitest";
import { resolveEdited } from "../support/pipeline-fixture.js";

describe("write: in lakeswap.yaml", () => {
  it("defaults to partition_replace; resolves append, upsert (with its keys) and replace", () => {
    expect(resolveEdited(() => {})().datasets[0]).toMatchObject({ write: "partition_replace", upsert: undefined });
    expect(resolveEdited((c) => (c.datasets.orders.write = "append"))().datasets[0]).toMatchObject({ write: "append", upsert: undefined });
    const upsert = resolveEdited((c) => {
      Object.assign(c.datasets.orders, { write: "upsert", primary_key: ["order_id"], order_by: ["updated_at"] });
    })().datasets[0];
    expect(upsert).toMatchObject({ write: "upsert", upsert: { primaryKey: ["order_id"], orderBy: ["updated_at"], deleteFlag: undefined } });
    // A whole table: no partition keys, and a derived layer of it that is one unit too.
    const replaced = resolveEdited((c) => {
      Object.assign(c.datasets.orders, { write: "replace", partition: undefined, layers: [{ ...c.datasets.orders.layers[0], write: "replace" }] });
    })().datasets[0]!;
    expect(replaced.partition).toEqual([]);
    expect(replaced.layers[0]!.partitionKeys).toEqual([]);
  });

  it.each([
    ["a misspelt mode, with a did-you-mean", (c: any) => (c.datasets.orders.write = "upsrt"), /datasets\.orders\.write: expected one of "partition_replace", "replace", "append", "upsert", got the string "upsrt" \(did you mean 'upsert'\?\)/],
    ["upsert without a key", (c: any) => (c.datasets.orders.write = "upsert"), /datasets\.orders\.primary_key: write: upsert merges rows by key: declare primary_key/],
    ["a key that is not a column", (c: any) => Object.assign(c.datasets.orders, { write: "upsert", primary_key: ["order_di"] }), /datasets\.orders\.primary_key: unknown column 'order_di' \(did you mean 'order_id'\?\)/],
    ["a delete flag that is not BOOLEAN", (c: any) => Object.assign(c.datasets.orders, { write: "upsert", primary_key: ["order_id"], delete_flag: "status" }), /datasets\.orders\.delete_flag: column 'status' is VARCHAR; a delete flag is a BOOLEAN column/],
    ["upsert keys on another mode", (c: any) => Object.assign(c.datasets.orders, { write: "append", primary_key: ["order_id"] }), /datasets\.orders\.primary_key: applies to write: upsert only \(this dataset writes append\)/],
    ["replace with partition keys", (c: any) => (c.datasets.orders.write = "replace"), /datasets\.orders\.partition: write: replace makes the whole table one unit/],
    ["partition_replace without partition keys", (c: any) => (c.datasets.orders.partition = undefined), /datasets\.orders\.partition: declare at least one partition key.*or, for a table that is replaced as a whole, write: replace/],
    ["append on a derived layer", (c: any) => (c.datasets.orders.layers[0].write = "append"), /layers\[0\]\.write: 'append' applies to a dataset's raw table/],
    ["a replace layer with partition keys", (c: any) => Object.assign(c.datasets.orders.layers[1], { write: "replace" }), /layers\[1\]: write: replace builds the whole table as one unit .*remove partition_keys and inputs\.map/],
  ])("refuses %s", (_what, edit, message) => {
    expect(resolveEdited(edit)).toThrow(message);
  });
});
