import { AthenaClient } from "@aws-sdk/client-athena";
import { S3Client } from "@aws-sdk/client-s3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { makePartition } from "../../src/core/partition.js";
import { defineTable } from "../../src/core/table.js";
import { AthenaEngine } from "../../src/engine/athena-engine.js";
import { DuckDbEngine } from "../../src/engine/duckdb-engine.js";
import { S3Store } from "../../src/store/s3-store.js";
import { startAwsServices, type AwsServices } from "../support/lake-fixture.js";

let services: AwsServices;
let engine: AthenaEngine;
const TABLE = defineTable({ name: "t", columns: [{ name: "id", type: "BIGINT" }], partitionKeys: ["day"] });

beforeEach(async () => {
  services = await startAwsServices();
  const store = new S3Store(new S3Client(services.s3.clientConfig), { bucket: "lake", prefix: "w" });
  engine = new AthenaEngine(new AthenaClient(services.athena.clientConfig), {
    workgroup: "primary",
    database: "db",
    outputLocation: "s3://results/q/",
    queryTimeoutMs: 1500,
    pollMs: 20,
    uriOf: (key) => store.uri(key),
    store,
    landing: new DuckDbEngine(store),
  });
});
afterEach(async () => {
  await engine.close();
  await services.close();
});

const build = (select: string) =>
  engine.build({ table: TABLE, partition: makePartition([["day", "1"]]), select, runId: "20261101T000000Z-aaaaaa", runPrefix: "t/day=1/run=20261101T000000Z-aaaaaa/", sources: [] });

describe("the Athena engine", () => {
  it("builds a run with UNLOAD into the run prefix, partition columns left out, and counts its rows", async () => {
    const result = await build("SELECT range AS id, '1' AS day FROM range(7)");
    expect(result.rows).toBe(7);
    expect(result.files.length).toBeGreaterThan(0);
    const unload = services.athena.executions.find((e) => /^UNLOAD/.test(e.query))!;
    expect(unload.query).toMatch(/^UNLOAD \(SELECT CAST\(q\."id" AS BIGINT\) AS "id" FROM \(.*\) AS q WHERE .*\) TO 's3:\/\/lake\/w\/t\/day=1\/run=20261101T000000Z-aaaaaa\/' WITH \(format = 'PARQUET', compression = 'SNAPPY'\)$/);
  });

  it("fails a build whose SELECT returns rows of another partition, or lacks a declared column", async () => {
    await expect(build("SELECT range AS id, CASE WHEN range = 3 THEN '2' ELSE '1' END AS day FROM range(7)")).rejects.toThrow(
      /a row of the SELECT has day=2, which does not belong to partition day=1/,
    );
    await expect(build("SELECT range AS id, NULL AS day FROM range(2)")).rejects.toThrow(/a row of the SELECT has day=NULL/);
    await expect(build("SELECT range AS ident FROM range(2)")).rejects.toThrow(/the SELECT for t\/day=1 does not match the table: it lacks column id/);
    expect(services.athena.executions.filter((e) => /^UNLOAD/.test(e.query) && e.state === "SUCCEEDED")).toHaveLength(0);
  });

  it("asks Athena for a SELECT's columns once per layer, not once per partition", async () => {
    const sql = (day: string) => `SELECT range AS id, '${day}' AS day FROM range(3)`;
    for (const day of ["1", "2", "3"]) {
      const runId = `20261101T00000${day}Z-aaaaaa`;
      const result = await engine.build({ table: TABLE, partition: makePartition([["day", day]]), select: sql(day), runId, runPrefix: `t/day=${day}/run=${runId}/`, sources: [] });
      expect(result.rows).toBe(3);
    }
    expect(services.athena.executions.filter((e) => /LIMIT 0$/.test(e.query))).toHaveLength(1);
  });

  it("carries Athena's state-change reason when a query fails", async () => {
    services.athena.failNext("HIVE_BAD_DATA: the file is broken", { match: /UNLOAD/ });
    await expect(build("SELECT 1 AS id")).rejects.toThrow(/HIVE_BAD_DATA: the file is broken/);
  });

  it("stops a query that outlives the timeout, with StopQueryExecution", async () => {
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
