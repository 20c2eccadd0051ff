import { AthenaClient } from "@aws-sdk/client-athena";
import { CreateDatabaseCommand, CreatePartitionCommand, GlueClient } from "@aws-sdk/client-glue";
import { S3Client } from "@aws-sdk/client-s3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { GlueCatalog } from "../../src/catalog/glue-catalog.js";
import { makePartition } from "../../src/model/partition.js";
import { defineTable } from "../../src/model/table.js";
import { AthenaEngine } from "../../src/engine/athena-engine.js";
import { S3Store } from "../../src/store/s3/s3-store.js";
import { startAwsServices, type AwsServices } from "../support/lake-fixture.js";

let services: AwsServices;
let engine: AthenaEngine;
const TABLE = defineTable({ name: "t", columns: [{ name: "id", type: "BIGINT" }], partitionKeys: ["day"] });
const UP = defineTable({ name: "up", columns: [{ name: "id", type: "BIGINT" }], partitionKeys: ["day"] });
const PARQUET = {
  InputFormat: "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
  OutputFormat: "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
  SerdeInfo: { SerializationLibrary: "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe" },
};

/**
 * An engine on this test's services. The timeout is generous but for the test of the timeout itself: a first query
 * on a loaded machine waits for the emulator's Trino grammar to warm up, which once took longer than 1.5 s.
 */
function newEngine(queryTimeoutMs = 60_000): AthenaEngine {
  const store = new S3Store(new S3Client(services.s3.clientConfig), { bucket: "lake", prefix: "w" });
  return new AthenaEngine(new AthenaClient(services.athena.clientConfig), {
    workgroup: "primary",
    database: "db",
    outputLocation: "s3://results/q/",
    queryTimeoutMs,
    pollMs: 20,
    uriOf: (key) => store.uri(key),
    store,
  });
}

beforeEach(async () => {
  services = await startAwsServices();
  engine = newEngine();
});
afterEach(async () => {
  await engine.close();
  await services.close();
});

/** `SELECT <n> rows of ids 0..n-1 [, <day expression> AS day]` in SQL that both Trino and DuckDB accept (no DuckDB range()). */
const ids = (n: number, extra = "") =>
  `SELECT id${extra} FROM (VALUES ${Array.from({ length: n }, (_, i) => `(${i})`).join(", ")}) AS v(id)`;

const build = (select: string) =>
  engine.build({ table: TABLE, partition: makePartition([["day", "1"]]), select, runId: "20261101T000000Z-aaaaaa", runPrefix: "t/day=1/run=20261101T000000Z-aaaaaa/", sources: [] });

describe("the Athena engine", () => {
  it("builds a run with UNLOAD into the run prefix, partition columns left out", async () => {
    const result = await build(ids(7, ", '1' AS day"));
    expect(result.files.length).toBeGreaterThan(0);
    const unload = services.athena.executions.find((e) => /^UNLOAD/.test(e.query))!;
    expect(unload.rowCount).toBe(7);
    expect(unload.query).toMatch(/^UNLOAD \(SELECT CAST\(q\."id" AS BIGINT\) AS "id" FROM \(.*\) AS q WHERE .*\) TO 's3:\/\/lake\/w\/t\/day=1\/run=20261101T000000Z-aaaaaa\/' WITH \(format = 'PARQUET', compression = 'SNAPPY'\)$/);
  });

  it("fails a build whose SELECT returns rows of another partition, or lacks a declared column", async () => {
    await expect(build(ids(7, ", CASE WHEN id = 3 THEN '2' ELSE '1' END AS day"))).rejects.toThrow(
      /a row of the SELECT has day=2, which does not belong to partition day=1/,
    );
    await expect(build(ids(2, ", CAST(NULL AS VARCHAR) AS day"))).rejects.toThrow(/a row of the SELECT has day=NULL/);
    await expect(build("SELECT id AS ident FROM (VALUES (0), (1)) AS v(id)")).rejects.toThrow(/the SELECT for t\/day=1 does not match the table: it lacks column id/);
    expect(services.athena.executions.filter((e) => /^UNLOAD/.test(e.query) && e.state === "SUCCEEDED")).toHaveLength(0);
  });

  it("asks Athena for a SELECT's columns once per layer, not once per partition", async () => {
    const sql = (day: string) => ids(3, `, '${day}' AS day`);
    for (const day of ["1", "2", "3"]) {
      const runId = `20261101T00000${day}Z-aaaaaa`;
      const result = await engine.build({ table: TABLE, partition: makePartition([["day", day]]), select: sql(day), runId, runPrefix: `t/day=${day}/run=${runId}/`, sources: [] });
      expect(result.files.length).toBeGreaterThan(0);
    }
    expect(services.athena.executions.filter((e) => /LIMIT 0$/.test(e.query))).toHaveLength(1);
  });

  it("asks once too for partitions built at once (as a sync's concurrent builds are), and again after a probe that failed", async () => {
    const table = { ...TABLE, name: "t_at_once" };
    const probes = () => services.athena.executions.filter((e) => /LIMIT 0$/.test(e.query) && e.query.includes("AS tag_at_once")).length;
    const request = (day: string, select: string) => {
      const runId = `20261102T00000${day}Z-bbbbbb`;
      return { table, partition: makePartition([["day", day]]), select, runId, runPrefix: `t_at_once/day=${day}/run=${runId}/`, sources: [] };
    };
    const good = (day: string) => ids(3, `, '${day}' AS day, 1 AS tag_at_once`);
    // A SELECT Athena refuses: every build waiting on that probe fails, and the next one probes again.
    const bad = (day: string) => `SELECT no_such_column, '${day}' AS day, 1 AS tag_at_once FROM (VALUES (1)) AS v(id)`;
    const failed = await Promise.allSettled(["1", "2", "3"].map((day) => engine.build(request(day, bad(day)))));
    expect(failed.map((f) => f.status)).toEqual(["rejected", "rejected", "rejected"]);
    expect(probes()).toBe(1);
    const built = await Promise.all(["1", "2", "3", "4"].map((day) => engine.build(request(day, good(day)))));
    expect(built.every((b) => b.files.length > 0)).toBe(true);
    expect(probes()).toBe(2);
  });

  it("nests a derived build's input CTEs inside the UNLOAD's SELECT (Athena documents UNLOAD (SELECT ...) only)", async () => {
    // The upstream table in Glue, with two partitions built by this engine.
    const glue = new GlueClient(services.glue.clientConfig);
    await glue.send(new CreateDatabaseCommand({ DatabaseInput: { Name: "db" } }));
    await new GlueCatalog(glue, { database: "db", uriOf: (key) => `s3://lake/w/${key}` }).createTable(UP);
    for (const [day, rows] of [["1", 3], ["2", 5]] as const) {
      const runId = `20261101T00000${day}Z-bbbbbb`;
      const runPrefix = `up/day=${day}/run=${runId}/`;
      await engine.build({ table: UP, partition: makePartition([["day", day]]), select: ids(rows), runId, runPrefix, sources: [] });
      await glue.send(
        new CreatePartitionCommand({
          DatabaseName: "db",
          TableName: "up",
          PartitionInput: { Values: [day], StorageDescriptor: { ...PARQUET, Columns: [{ Name: "id", Type: "bigint" }], Location: `s3://lake/w/${runPrefix}` } },
        }),
      );
    }
    glue.destroy();

    const result = await engine.build({
      table: TABLE,
      partition: makePartition([["day", "1"]]),
      select: "SELECT id FROM up",
      runId: "20261101T000009Z-cccccc",
      runPrefix: "t/day=1/run=20261101T000009Z-cccccc/",
      sources: [{ table: UP, partitions: [] }],
      inputPartitions: [{ table: "up", partitions: ["day=1"] }],
    });
    expect(result.files.length).toBeGreaterThan(0);
    const unload = services.athena.executions.find((e) => /^UNLOAD/.test(e.query) && e.query.includes("run=20261101T000009Z-cccccc"))!;
    expect(unload.query).toMatch(/^UNLOAD \(SELECT CAST\(q\."id" AS BIGINT\) AS "id" FROM \(WITH "up" AS \(SELECT \* FROM "db"\."up" WHERE \("day" = '1'\)\) SELECT \* FROM \(SELECT id FROM up\) AS i\) AS q\) TO /);
    // Only the declared input partition was read: day=1's 3 rows, not day=2's 5.
    expect(unload.rowCount).toBe(3);
    expect(services.athena.executions.every((e) => !/^\s*WITH/i.test(e.query))).toBe(true);
  });

  it("reads a held sync's staged partitions from their scratch table, for declared inputs and for a table read whole (a lookup)", async () => {
    // `up` has day=1 (3 rows) and day=2 (5 rows) current; a held sync staged day=1 again (4 rows), in the scratch table's pointers.
    const glue = new GlueClient(services.glue.clientConfig);
    await glue.send(new CreateDatabaseCommand({ DatabaseInput: { Name: "db" } }));
    const catalog = new GlueCatalog(glue, { database: "db", uriOf: (key) => `s3://lake/w/${key}` });
    const scratch = { ...UP, name: "up__held_abc123" };
    for (const table of [UP, scratch]) await catalog.createTable(table);
    for (const [table, day, rows] of [[UP, "1", 3], [UP, "2", 5], [scratch, "1", 4]] as const) {
      const runId = `20261101T00000${rows}Z-bbbbbb`;
      const runPrefix = `up/day=${day}/run=${runId}/`;
      await engine.build({ table: UP, partition: makePartition([["day", day]]), select: ids(rows), runId, runPrefix, sources: [] });
      await catalog.movePointers(table, [{ partition: makePartition([["day", day]]), runId, location: runPrefix, kind: "swap" }]);
    }
    glue.destroy();
    const staged = [{ table: "up", scratch: "up__held_abc123", partitions: ["day=1"] }];
    const derived = async (runId: string, inputPartitions?: { table: string; partitions: string[] }[]): Promise<number> => {
      const runPrefix = `t/day=1/run=${runId}/`;
      await engine.build({ table: TABLE, partition: makePartition([["day", "1"]]), select: "SELECT id FROM up", runId, runPrefix, sources: [{ table: UP, partitions: [] }], inputPartitions, staged });
      return services.athena.executions.find((e) => /^UNLOAD/.test(e.query) && e.query.includes(runPrefix))!.rowCount!;
    };
    // Its declared input day=1: the staged run's 4 rows, not the current 3.
    expect(await derived("20261101T000010Z-cccccc", [{ table: "up", partitions: ["day=1"] }])).toBe(4);
    // Read whole: the staged day=1 and the current day=2.
    expect(await derived("20261101T000011Z-cccccc")).toBe(9);
    const unload = services.athena.executions.find((e) => /^UNLOAD/.test(e.query) && e.query.includes("run=20261101T000011Z-cccccc"))!;
    expect(unload.query).toContain(`WITH "up" AS (SELECT * FROM "db"."up" WHERE (true) AND NOT (("day" = '1')) UNION ALL SELECT * FROM "db"."up__held_abc123" WHERE (true) AND (("day" = '1')))`);
  });

  it("says Athena returned no column metadata when the LIMIT 0 probe has no columns", async () => {
    services.athena.withholdColumnMetadataNext({ match: /LIMIT 0$/ });
    await expect(build(ids(2, ", '1' AS day"))).rejects.toThrow(
      /^Athena returned no column metadata for the SELECT of t\/day=1 \(query [0-9a-f-]+, a LIMIT 0 probe\); its columns cannot be checked/,
    );
    expect(services.athena.executions.filter((e) => /^UNLOAD/.test(e.query))).toHaveLength(0);
  });

  it("turns refused credentials into ACCESS_DENIED naming the action and the workgroup, not a build failure", async () => {
    const store = new S3Store(new S3Client(services.s3.clientConfig), { bucket: "lake", prefix: "w" });
    const denied = new AthenaEngine(new AthenaClient({ ...services.athena.clientConfig, credentials: { accessKeyId: "denied", secretAccessKey: "x" } }), {
      workgroup: "primary",
      database: "db",
      outputLocation: "s3://results/q/",
      pollMs: 20,
      uriOf: (key) => store.uri(key),
      store,
      });
    try {
      await expect(denied.query("SELECT 1", [])).rejects.toMatchObject({
        code: "ACCESS_DENIED",
        exitCode: 11,
        message: expect.stringMatching(/^access denied: athena:StartQueryExecution on workgroup primary was refused \(AccessDeniedException: .*not authorized to perform: athena:StartQueryExecution/),
      });
      await expect(
        denied.build({ table: TABLE, partition: makePartition([["day", "1"]]), select: ids(1), runId: "20261101T000000Z-dddddd", runPrefix: "t/day=1/run=20261101T000000Z-dddddd/", sources: [] }),
      ).rejects.toMatchObject({ code: "ACCESS_DENIED" });
    } finally {
      await denied.close();
    }
  });

  it("refuses a query that reads files (read_text of the lake's metadata, a file path as a table) before sending it (exit 2); a query of tables is sent", async () => {
    const sent = () => services.athena.executions.length;
    const before = sent();
    await expect(engine.query("SELECT * FROM read_text('s3://lake/w/_lakeswap/tables/t.json')", [])).rejects.toMatchObject({
      code: "INVALID_INPUT",
      message: expect.stringMatching(/the query calls the table function read_text\('s3:\/\/lake\/w\/_lakeswap\/tables\/t.json'\).*names lake tables, never files/),
    });
    await expect(engine.query("SELECT * FROM 's3://lake/w/t/day=1/x.parquet'", [])).rejects.toMatchObject({ code: "INVALID_INPUT" });
    expect(sent()).toBe(before);
    await expect(engine.query("SELECT 1 AS one", [])).resolves.toMatchObject({ rows: [[1]] });
    expect(sent()).toBe(before + 1);
  });

  it("carries Athena's state-change reason when a query fails", async () => {
    services.athena.failNext("HIVE_BAD_DATA: the file is broken", { match: /UNLOAD/ });
    await expect(build("SELECT 1 AS id")).rejects.toThrow(/HIVE_BAD_DATA: the file is broken/);
  });

  it("stops a query that outlives the timeout, with StopQueryExecution", async () => {
    await engine.close();
    engine = newEngine(1500);
    services.athena.delayNext(60_000, { match: /UNLOAD/ });
    await expect(build("SELECT 1 AS id")).rejects.toThrow(/ran longer than the timeout \(2s\) and was stopped/);
    const execution = services.athena.executions.find((e) => /^UNLOAD/.test(e.query))!;
    await expect.poll(() => execution.state).toBe("CANCELLED");
  });

  it("stops running queries when closed (Ctrl-C)", async () => {
    services.athena.delayNext(60_000, { match: /count/ });
    const running = engine.query("SELECT count(*) FROM (SELECT 1)", []).catch((error: unknown) => error);
    await expect.poll(() => services.athena.executions.some((e) => e.state === "RUNNING")).toBe(true);
    await engine.stopRunning();
    expect(await running).toBeInstanceOf(Error);
    expect(services.athena.executions.find((e) => /count/.test(e.query))?.state).toBe("CANCELLED");
  });
});
