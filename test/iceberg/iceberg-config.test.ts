import { readFileSync } from "node:fs";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { Catalog } from "../../src/catalog/catalog.js";
import { assertIcebergSupported } from "../../src/lake/commit/iceberg-pointer.js";
import { defineTable, parseTableDefinition, tableChange } from "../../src/model/table.js";
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

  it("iceberg_table names the Iceberg table (Glue); without iceberg: true, or not a table name, it is refused with the fix", () => {
    const config = resolveEdited((c) => {
      c.datasets.orders.iceberg = true;
      c.datasets.orders.iceberg_table = "orders_twin";
      c.datasets.orders.layers[0].iceberg = true;
    })();
    expect(config.datasets[0]!.icebergTable).toBe("orders_twin");
    expect(config.datasets[0]!.layers.map((l) => l.icebergTable)).toEqual([undefined, undefined]);
    expect(resolveEdited((c) => (c.datasets.orders.layers[0].iceberg_table = "stage_twin"))).toThrow(
      "datasets.orders.layers[0].iceberg_table: 'stage_twin' names the Iceberg table of a table published as Iceberg; add iceberg: true, or leave it out",
    );
    expect(resolveEdited((c) => {
      c.datasets.orders.iceberg = true;
      c.datasets.orders.iceberg_table = "Orders-Twin";
    })).toThrow(/datasets\.orders\.iceberg_table: use a lowercase letter first/);
    const columns = [{ name: "id", type: "BIGINT" }];
    expect(() => defineTable({ name: "orders", columns, partitionKeys: [], iceberg: true, icebergTable: "orders" })).toThrow(/its own name: the Hive table has it; choose another \(default orders_iceberg\)/);
    expect(() => defineTable({ name: "orders", columns, partitionKeys: [], icebergTable: "orders_twin" })).toThrow(/add iceberg: true \(or --iceberg\)/);
    // Added with iceberg: true to a loaded table: publishing added; renamed later: refused (an Iceberg table is not renamed).
    const plain = defineTable({ name: "orders", columns, partitionKeys: [] });
    const twin = defineTable({ name: "orders", columns, partitionKeys: [], iceberg: true, icebergTable: "orders_twin" });
    expect(tableChange(plain, twin)).toBe("iceberg added");
    expect(tableChange(twin, parseTableDefinition(JSON.parse(JSON.stringify(twin)), "t.json"))).toBe("same");
    expect(() => tableChange(twin, defineTable({ name: "orders", columns, partitionKeys: [], iceberg: true }))).toThrow(
      /published as the Iceberg table 'orders_twin', and the declaration names 'orders_iceberg': an Iceberg table is not renamed; declare iceberg_table: orders_twin again/,
    );
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
