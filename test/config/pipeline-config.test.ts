import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { pipelineJsonSchema, resolvePipelineConfig } from "../../src/config/pipeline-config.js";
import { PipelineWorkspace, pipelineYaml } from "../support/pipeline-fixture.js";

/** Resolves a config next to the fixture's SQL files, after `edit` changed the parsed YAML. */
function resolveEdited(edit: (config: Record<string, any>) => void): () => unknown {
  const ws = new PipelineWorkspace();
  const config = parse(pipelineYaml()) as Record<string, any>;
  edit(config);
  return () => {
    try {
      return resolvePipelineConfig(config, ws.configFile);
    } finally {
      ws.cleanup();
    }
  };
}

describe("lakeswap.yaml", () => {
  it("resolves defaults: table names, partition keys inherited, identity inputs, signature columns", () => {
    const config = resolveEdited(() => undefined)() as ReturnType<typeof resolvePipelineConfig>;
    const orders = config.datasets[0]!;
    expect(orders.table).toBe("orders_raw");
    expect(orders.signatureColumns).toEqual(["order_id", "customer_id", "amount", "status", "order_ts"]);
    expect(orders.layers.map((l) => [l.name, l.table, l.from, l.partitionKeys.join(",")])).toEqual([
      ["stage", "orders_stage", "raw", "day"],
      ["analytics", "orders_monthly", "stage", "month"],
    ]);
    expect(orders.layers[0]!.inputMap).toEqual([{ key: "day", expression: "day" }]);
    expect(config.concurrency).toBe(3);
  });

  it.each([
    ["an unknown key, with a did-you-mean", (c: Record<string, any>) => (c.datasets.orders.sigature = {}), /^lakeswap\.yaml: datasets\.orders\.sigature: unknown key \(did you mean 'signature'\?\)/],
    ["an unknown nested key", (c: Record<string, any>) => (c.datasets.orders.source.fromat = "csv"), /datasets\.orders\.source\.fromat: unknown key \(did you mean 'format'\?\)/],
    ["an unknown layer key", (c: Record<string, any>) => (c.datasets.orders.layers[0].sqll = "x"), /datasets\.orders\.layers\[0\]\.sqll: unknown key \(did you mean 'sql'\?\)/],
    ["a bad format", (c: Record<string, any>) => (c.datasets.orders.source.format = "xml"), /datasets\.orders\.source\.format: /],
    ["a bad column type", (c: Record<string, any>) => (c.datasets.orders.columns.amount = "MONEY"), /datasets\.orders\.columns\.amount: column 'amount' has type 'MONEY'/],
    ["an unknown signature column", (c: Record<string, any>) => (c.datasets.orders.signature = { ignore: ["updated"] }), /datasets\.orders\.signature\.ignore: unknown column 'updated' \(did you mean 'updated_at'\?\)/],
    ["a missing SQL file", (c: Record<string, any>) => (c.datasets.orders.layers[0].sql = "sql/nope.sql"), /datasets\.orders\.layers\[0\]\.sql: file 'sql\/nope\.sql' does not exist/],
    ["an unknown upstream layer", (c: Record<string, any>) => (c.datasets.orders.layers[1].inputs.from = "stag"), /inputs\.from: no earlier layer 'stag' \(did you mean 'stage'\?\)/],
    ["a table name that is not an identifier", (c: Record<string, any>) => (c.datasets.orders.table = "../x"), /datasets\.orders\.table: /],
    ["two layers on one table", (c: Record<string, any>) => (c.datasets.orders.layers[1].table = "orders_stage"), /table 'orders_stage' is used by both/],
  ])("refuses %s, the message starting with the key path", (_what, edit, message) => {
    expect(resolveEdited(edit)).toThrow(message);
  });

  it("has a JSON Schema generated from the same source, with descriptions and defaults", () => {
    const schema = pipelineJsonSchema() as { properties: Record<string, any>; additionalProperties: boolean };
    expect(schema.additionalProperties).toBe(false);
    expect(schema.properties.concurrency).toMatchObject({ default: 4, description: expect.stringContaining("partitions") });
    const dataset = schema.properties.datasets.additionalProperties;
    expect(Object.keys(dataset.properties)).toEqual(
      expect.arrayContaining(["source", "columns", "partition", "signature", "dead_letter", "layers"]),
    );
  });
});
