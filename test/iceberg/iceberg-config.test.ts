import { readFileSync } from "node:fs";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { Catalog } from "../../src/catalog/catalog.js";
import { assertIcebergSupported } from "../../src/lake/commit/iceberg-pointer.js";
import { defineTable, parseTableDefinition } from "../../src/model/table.js";
import type { ObjectStore } from "../../src/store/object-store.js";
import { embeddedBackend, type TestBackend } from "../support/lake-fixture.js";
import { runMain } from "../support/main-cli.js";
import { resolveEdited } from "../support/pipeline-fixture.js";

// `iceberg: true` is declared per dataset and per layer (or with create-table --iceberg), kept in the table
// definition, refused with a message where it cannot be honoured yet.

let backend: TestBackend | undefined;
afterEach(async () => {
  await backend?.cleanup();
  backend = undefined;
});

describe("iceberg: true in lakeswap.yaml", () => {
  it("is read per dataset and per layer, false by default", () => {
    const config = resolveEdited((c) => {
      c.datasets.orders.iceberg = true;
      c.datasets.orders.layers[0].iceberg = true;
    })();
    const dataset = config.datasets[0]!;
    expect(dataset.iceberg).toBe(true);
    expect(dataset.layers.map((l) => l.iceberg)).toEqual([true, false]);
  });

  it("a value that is not true or false is refused, naming the key and the value", () => {
    expect(resolveEdited((c) => (c.datasets.orders.layers[1].iceberg = "yes"))).toThrow('lakeswap.yaml: datasets.orders.layers[1].iceberg: expected true or false, got the string "yes"');
  });
});

describe("the table definition", () => {
  it("create-table --iceberg stores iceberg: true; a definition written before the flag existed still reads", async () => {
    backend = await embeddedBackend();
    const lakeDir = (backend as TestBackend & { lakeDir: string }).lakeDir;
    const made = await runMain([...backend.cliArgs, "create-table", "events", "--columns", "id BIGINT, name VARCHAR", "--partition-keys", "day", "--iceberg", "--json"]);
    expect(made.code, made.stderr).toBe(0);
    expect(JSON.parse(made.stdout).iceberg).toBe(true);
    const stored = JSON.parse(readFileSync(path.join(lakeDir, "_lakeswap", "tables", "events.json"), "utf8"));
    expect(stored.iceberg).toBe(true);
    const old = parseTableDefinition({ name: "events", columns: [{ name: "id", type: "BIGINT" }], partitionKeys: ["day"], compression: "snappy" }, "old.json");
    expect(old.iceberg).toBeUndefined();
    expect(() => parseTableDefinition({ ...stored, iceberg: "yes" }, "bad.json")).toThrow(/'iceberg' is not true or false/);
  });

  it("an ingested table, and a lake outside a local folder whose catalog holds no Iceberg tables, refuse it with the fix", () => {
    expect(() => defineTable({ name: "events", columns: [{ name: "id", type: "BIGINT" }], partitionKeys: [], ingest: true, iceberg: true })).toThrow(/ingested table.*leave out iceberg: true/);
    const s3 = { capabilities: { conditionalWrites: true, localPaths: false }, description: "s3://bucket/lake" } as ObjectStore;
    const table = defineTable({ name: "orders", columns: [{ name: "id", type: "BIGINT" }], partitionKeys: ["day"], iceberg: true });
    const catalog = { capabilities: { maxBatchUpdate: 100, maxBatchRemove: 25, pointersInStore: false } } as Catalog;
    expect(() => assertIcebergSupported({ store: s3, catalog }, table)).toThrow(
      /table 'orders' declares iceberg: true, which lakeswap supports on the embedded lake \(a local folder\) and on AWS \(S3 and Glue\), not on s3:\/\/bucket\/lake with this catalog; leave out iceberg: true/,
    );
  });
});
