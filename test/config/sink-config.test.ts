import { afterEach, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { maskUrl, resolvePipelineConfig } from "../../src/config/pipeline-config.js";
import { PipelineWorkspace, pipelineYaml } from "../support/pipeline-fixture.js";

const saved = process.env.LAKESWAP_TEST_DB;
afterEach(() => {
  if (saved === undefined) delete process.env.LAKESWAP_TEST_DB;
  else process.env.LAKESWAP_TEST_DB = saved;
});

/** Resolves the fixture's config with `sinks` on its analytics layer (columns order_day, orders, revenue; key month). */
function resolveWithSink(sinks: unknown): () => ReturnType<typeof resolvePipelineConfig> {
  const ws = new PipelineWorkspace();
  const config = parse(pipelineYaml()) as Record<string, any>;
  config.datasets.orders.layers[1].sinks = sinks;
  return () => {
    try {
      return resolvePipelineConfig(config, ws.configFile);
    } finally {
      ws.cleanup();
    }
  };
}

describe("sinks: in lakeswap.yaml", () => {
  it("resolves a PostgreSQL sink, the URL from the environment, schema.table and the key", () => {
    process.env.LAKESWAP_TEST_DB = "postgres://app:pa55@db.example:5432/shop";
    const config = resolveWithSink({ postgres: { url: "${LAKESWAP_TEST_DB}", table: "analytics.orders_monthly", mode: "upsert", primary_key: ["order_day"] } })();
    expect(config.datasets[0]!.layers[1]!.sinks).toEqual([
      {
        kind: "postgres", url: "postgres://app:pa55@db.example:5432/shop", maskedUrl: "postgres://app:***@db.example:5432/shop",
        schema: "analytics", table: "orders_monthly", mode: "upsert", primaryKey: ["order_day"], hardDelete: false,
      },
    ]);
    // Default mode, default schema; the partition key is a column too.
    const plain = resolveWithSink({ postgres: { url: "postgresql://localhost/x", table: "monthly", primary_key: ["month"] } })();
    expect(plain.datasets[0]!.layers[1]!.sinks[0]).toMatchObject({ schema: "public", table: "monthly", mode: "partition_replace", primaryKey: ["month"] });
    expect(plain.datasets[0]!.layers[0]!.sinks).toEqual([]);
  });

  it.each([
    ["an unknown sink key, with a did-you-mean", { postgres: { url: "postgres://h/d", table: "t", mdoe: "upsert" } }, /layers\[1\]\.sinks\.postgres\.mdoe: unknown key \(did you mean 'mode'\?\)/],
    ["an unknown sink kind", { postgress: { url: "postgres://h/d", table: "t" } }, /layers\[1\]\.sinks\.postgress: unknown key \(did you mean 'postgres'\?\)/],
    ["an unknown mode", { postgres: { url: "postgres://h/d", table: "t", mode: "merge" } }, /sinks\.postgres\.mode: expected one of "upsert", "partition_replace", got the string "merge"/],
    ["upsert without a key", { postgres: { url: "postgres://h/d", table: "t", mode: "upsert" } }, /sinks\.postgres\.primary_key: upsert merges rows by key: declare primary_key/],
    ["a key column the layer does not have", { postgres: { url: "postgres://h/d", table: "t", mode: "upsert", primary_key: ["order_dya"] } }, /sinks\.postgres\.primary_key: unknown column 'order_dya' \(did you mean 'order_day'\?\)/],
    ["a table that is not schema.table", { postgres: { url: "postgres://h/d", table: "a.b.c" } }, /sinks\.postgres\.table: 'a\.b\.c' is not a table name/],
    ["a quoted table name", { postgres: { url: "postgres://h/d", table: 'x"; drop table y' } }, /sinks\.postgres\.table: .* is not a table name/],
    ["a URL that is not PostgreSQL's", { postgres: { url: "mysql://u:topsecret@h/d", table: "t" } }, /sinks\.postgres\.url: 'mysql:\/\/u:\*\*\*@h\/d' is not a PostgreSQL URL/],
    ["an environment variable that is not set", { postgres: { url: "${LAKESWAP_NOT_SET_ANYWHERE}", table: "t" } }, /sinks\.postgres\.url: environment variable LAKESWAP_NOT_SET_ANYWHERE is not set/],
  ])("refuses %s, naming the key", (_what, sinks, message) => {
    expect(resolveWithSink(sinks)).toThrow(message);
  });

  it("refuses two layers that send to one PostgreSQL table (the same server, database and table, whoever connects), naming both", () => {
    const ws = new PipelineWorkspace();
    const config = parse(pipelineYaml()) as Record<string, any>;
    const resolve = (raw: unknown, stage: unknown) => {
      config.datasets.orders.sinks = raw;
      config.datasets.orders.layers[0].sinks = stage;
      return () => resolvePipelineConfig(config, ws.configFile);
    };
    try {
      // Sent one over the other, each sync replaced the other's rows and recorded signatures: both went again every
      // sync, and the table held whichever layer was sent last.
      const shared = resolve(
        { postgres: { url: "postgres://app:one@DB.example/shop", table: "orders", mode: "upsert", primary_key: ["order_id"] } },
        { postgres: { url: "postgres://etl:two@db.example:5432/shop", table: "public.orders", mode: "partition_replace" } },
      );
      expect(shared).toThrow(
        "datasets.orders.sinks.postgres and datasets.orders.layers.stage.sinks.postgres both send to table public.orders of postgres://etl:***@db.example:5432/shop: " +
          "each sync would overwrite the other's rows and send both again; give each layer a table of its own",
      );
      // Another table, schema, database or server is another target.
      for (const [url, table] of [["postgres://app:one@db.example/shop", "orders_stage"], ["postgres://app:one@db.example/shop", "stage.orders"], ["postgres://app:one@db.example/other", "orders"], ["postgres://app:one@db2.example/shop", "orders"]]) {
        const config = resolve({ postgres: { url: "postgres://app:one@db.example/shop", table: "orders", mode: "upsert", primary_key: ["order_id"] } }, { postgres: { url, table } })();
        expect(config.datasets[0]!.sinks).toHaveLength(1);
        expect(config.datasets[0]!.layers[0]!.sinks).toHaveLength(1);
      }
    } finally {
      ws.cleanup();
    }
  });

  it("takes partitioning (native or index) for partition_replace, and refuses it for upsert or an unknown value, naming the key", () => {
    const replace = (partitioning: unknown) => ({ postgres: { url: "postgres://h/d", table: "t", partitioning } });
    expect(resolveWithSink(replace("index"))().datasets[0]!.layers[1]!.sinks[0]).toMatchObject({ mode: "partition_replace", partitioning: "index" });
    expect(resolveWithSink(replace("native"))().datasets[0]!.layers[1]!.sinks[0]).toMatchObject({ partitioning: "native" });
    expect(resolveWithSink({ postgres: { url: "postgres://h/d", table: "t" } })().datasets[0]!.layers[1]!.sinks[0]).not.toHaveProperty("partitioning");
    expect(resolveWithSink(replace("hash"))).toThrow(/sinks\.postgres\.partitioning: expected one of "native", "index", got the string "hash"/);
    expect(resolveWithSink({ postgres: { url: "postgres://h/d", table: "t", mode: "upsert", primary_key: ["order_day"], partitioning: "index" } })).toThrow(
      /sinks\.postgres\.partitioning: applies to mode: partition_replace only/,
    );
  });

  // Issue 25 items 17 and 18: the stamp column is the sink's own (_lakeswap_updated_at); hard_delete is upsert's.
  it("lets an upsert layer have its own updated_at; refuses the sink's own column names and hard_delete outside upsert", () => {
    const withColumn = (name: string, sinks: unknown) => {
      const ws = new PipelineWorkspace();
      const config = parse(pipelineYaml()) as Record<string, any>;
      config.datasets.orders.layers[1].columns[name] = "TIMESTAMP";
      config.datasets.orders.layers[1].sinks = sinks;
      try {
        return resolvePipelineConfig(config, ws.configFile);
      } finally {
        ws.cleanup();
      }
    };
    const upsert = { url: "postgres://h/d", table: "t", mode: "upsert", primary_key: ["order_day"] };
    expect(withColumn("updated_at", { postgres: upsert }).datasets[0]!.layers[1]!.sinks[0]).toMatchObject({ mode: "upsert", hardDelete: false });
    expect(withColumn("updated_at", { postgres: { ...upsert, hard_delete: true } }).datasets[0]!.layers[1]!.sinks[0]).toMatchObject({ hardDelete: true });
    // The sink's own columns (_lakeswap_updated_at, _lakeswap_deleted_at) start with '_', which no layer column may.
    expect(() => withColumn("_lakeswap_updated_at", { postgres: upsert })).toThrow(/columns: key '_lakeswap_updated_at' is not allowed: use a lowercase letter first/);
    expect(resolveWithSink({ postgres: { url: "postgres://h/d", table: "t", hard_delete: true } })).toThrow(
      /sinks\.postgres\.hard_delete: applies to mode: upsert only \(partition_replace always deletes what the lake no longer holds\)/,
    );
  });

  it("never shows the password in an error", () => {
    process.env.LAKESWAP_TEST_DB = "mysql://u:hunter2@h/d";
    expect(resolveWithSink({ postgres: { url: "${LAKESWAP_TEST_DB}", table: "t" } })).toThrow(/^(?!.*hunter2).*$/s);
  });

  // Issue 25 item 16: an unencoded '@', '/', '?' or '#' in the password made part of it the host, printed in the DNS error.
  it.each([
    ["a '/' and an '@'", "postgres://app:S3cret/PW@127.0.0.1:5432/shop"],
    ["two '@'", "postgres://app:pa@ss@127.0.0.1:5432/shop"],
    ["a '?'", "postgres://app:S3cret?x@127.0.0.1/shop"],
    ["a '#'", "postgres://app:S3cret#x@127.0.0.1/shop"],
  ])("refuses a URL whose password holds %s unencoded, never printing any of it", (_what, url) => {
    process.env.LAKESWAP_TEST_DB = url;
    const resolve = resolveWithSink({ postgres: { url: "${LAKESWAP_TEST_DB}", table: "t" } });
    expect(resolve).toThrow(/sinks\.postgres\.url: 'postgres:\/\/app:\*\*\*@127\.0\.0\.1.*' cannot be read unambiguously: .*percent-encode them in the password \('@' as %40, '\/' as %2F/);
    expect(resolve).toThrow(/^(?!.*S3cret)(?!.*pa@ss).*$/s);
  });

  it("accepts the same password percent-encoded", () => {
    process.env.LAKESWAP_TEST_DB = "postgres://app:S3cret%2FPW%40x@127.0.0.1:5432/shop";
    const config = resolveWithSink({ postgres: { url: "${LAKESWAP_TEST_DB}", table: "t" } })();
    expect(config.datasets[0]!.layers[1]!.sinks[0]).toMatchObject({ maskedUrl: "postgres://app:***@127.0.0.1:5432/shop" });
  });

  it("masks everything between the user and the last '@'", () => {
    expect(maskUrl("postgres://app:S3cret/PW@127.0.0.1/shop")).toBe("postgres://app:***@127.0.0.1/shop");
    expect(maskUrl("postgres://app:pa@ss@h/d")).toBe("postgres://app:***@h/d");
    expect(maskUrl("postgres://ap/p@h/d")).toBe("postgres://***@h/d");
  });

  it("masks passwords in URLs", () => {
    expect(maskUrl("postgres://u:p%40ss@h:5432/d")).toBe("postgres://u:***@h:5432/d");
    expect(maskUrl("postgres://u@h/d?sslmode=require&password=x")).toBe("postgres://u@h/d?sslmode=require&password=***");
    expect(maskUrl("postgres://h/d")).toBe("postgres://h/d");
  });
});
