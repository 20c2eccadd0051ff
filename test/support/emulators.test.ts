// Sanity tests of the test emulators themselves, driven by the real AWS SDK clients.
import {
  AthenaClient,
  GetQueryExecutionCommand,
  GetQueryResultsCommand,
  GetQueryRuntimeStatisticsCommand,
  StartQueryExecutionCommand,
  StopQueryExecutionCommand,
  type QueryExecution,
} from "@aws-sdk/client-athena";
import {
  AlreadyExistsException,
  ConcurrentModificationException,
  BatchCreatePartitionCommand,
  BatchDeletePartitionCommand,
  BatchUpdatePartitionCommand,
  CreateDatabaseCommand,
  CreatePartitionCommand,
  CreateTableCommand,
  DeletePartitionCommand,
  EntityNotFoundException,
  GetPartitionCommand,
  GetPartitionsCommand,
  GetTableCommand,
  GlueClient,
  InvalidInputException,
  UpdatePartitionCommand,
  UpdateTableCommand,
  type PartitionInput,
} from "@aws-sdk/client-glue";
import {
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadBucketCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
} from "@aws-sdk/client-s3";
import { createRequire } from "node:module";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startAthenaEmulator, type AthenaEmulator } from "./athena-emulator.js";
import { startGlueEmulator, type GlueEmulator } from "./glue-emulator.js";
import { startS3Server, type S3Server } from "./s3-server.js";

async function s3Error(promise: Promise<unknown>): Promise<{ name: string; status: number | undefined }> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof S3ServiceException) return { name: error.name, status: error.$metadata.httpStatusCode };
    throw error;
  }
  throw new Error("expected the request to fail");
}

describe("S3 server (s3rver behind a conditional-write proxy)", () => {
  let server: S3Server;
  let s3: S3Client;

  beforeAll(async () => {
    server = await startS3Server({ buckets: ["lake"] });
    s3 = new S3Client(server.clientConfig);
  });
  afterAll(async () => {
    s3.destroy();
    await server.close();
  });

  it("refuses a second If-None-Match: * write with 412 PreconditionFailed and keeps the first object", async () => {
    const first = await s3.send(new PutObjectCommand({ Bucket: "lake", Key: "lease/t1", Body: "owner-a", IfNoneMatch: "*" }));
    expect(first.ETag).toMatch(/^"[0-9a-f]{32}"$/);
    expect(await s3Error(s3.send(new PutObjectCommand({ Bucket: "lake", Key: "lease/t1", Body: "owner-b", IfNoneMatch: "*" })))).toEqual({
      name: "PreconditionFailed",
      status: 412,
    });
    const body = await s3.send(new GetObjectCommand({ Bucket: "lake", Key: "lease/t1" }));
    expect(await body.Body?.transformToString()).toBe("owner-a");
    expect(server.requests.preconditionFailures).toBe(1);
  });

  it("does compare-and-swap with If-Match, and conditional delete", async () => {
    const put = await s3.send(new PutObjectCommand({ Bucket: "lake", Key: "lease/t2", Body: "v1" }));
    expect(await s3Error(s3.send(new PutObjectCommand({ Bucket: "lake", Key: "lease/t2", Body: "x", IfMatch: '"0123"' })))).toEqual({
      name: "PreconditionFailed",
      status: 412,
    });
    expect(await s3Error(s3.send(new PutObjectCommand({ Bucket: "lake", Key: "lease/absent", Body: "x", IfMatch: put.ETag })))).toEqual({
      name: "NoSuchKey",
      status: 404,
    });
    const swapped = await s3.send(new PutObjectCommand({ Bucket: "lake", Key: "lease/t2", Body: "v2", IfMatch: put.ETag }));
    expect(await s3Error(s3.send(new DeleteObjectCommand({ Bucket: "lake", Key: "lease/t2", IfMatch: put.ETag })))).toEqual({
      name: "PreconditionFailed",
      status: 412,
    });
    await s3.send(new DeleteObjectCommand({ Bucket: "lake", Key: "lease/t2", IfMatch: swapped.ETag }));
    const listed = await s3.send(new ListObjectsV2Command({ Bucket: "lake", Prefix: "lease/t2" }));
    expect(listed.KeyCount).toBe(0);
  });

  it("lets exactly one of many concurrent If-None-Match: * writers win", async () => {
    const attempts = await Promise.allSettled(
      Array.from({ length: 8 }, (_, i) => s3.send(new PutObjectCommand({ Bucket: "lake", Key: "lease/race", Body: `w${i}`, IfNoneMatch: "*" }))),
    );
    expect(attempts.filter((a) => a.status === "fulfilled")).toHaveLength(1);
  });

  it("pages ListObjectsV2 with continuation tokens", async () => {
    for (let i = 0; i < 5; i++) await s3.send(new PutObjectCommand({ Bucket: "lake", Key: `pages/k${i}`, Body: String(i) }));
    const keys: string[] = [];
    let token: string | undefined;
    do {
      const page = await s3.send(new ListObjectsV2Command({ Bucket: "lake", Prefix: "pages/", MaxKeys: 2, ContinuationToken: token }));
      keys.push(...(page.Contents ?? []).map((o) => o.Key ?? ""));
      token = page.NextContinuationToken;
    } while (token);
    expect(keys).toEqual(["pages/k0", "pages/k1", "pages/k2", "pages/k3", "pages/k4"]);
  });

  it("answers HeadBucket and a DeleteObjects' bucket check without listing the bucket, and 404 NoSuchBucket where there is none", async () => {
    for (let i = 0; i < 30; i++) await s3.send(new PutObjectCommand({ Bucket: "lake", Key: `head/k${i}`, Body: String(i) }));
    // s3rver answers a HEAD of a bucket with its listing (1,000 keys, each key's metadata read): count the listings.
    const store = createRequire(import.meta.url)("s3rver/lib/stores/filesystem.js") as { prototype: { listObjects: (...args: unknown[]) => unknown } };
    const listObjects = store.prototype.listObjects;
    let listings = 0;
    store.prototype.listObjects = function (this: unknown, ...args: unknown[]) {
      listings += 1;
      return listObjects.apply(this, args);
    };
    try {
      const head = await s3.send(new HeadBucketCommand({ Bucket: "lake" }));
      expect(head.$metadata.httpStatusCode).toBe(200);
      const deleted = await s3.send(new DeleteObjectsCommand({ Bucket: "lake", Delete: { Objects: [{ Key: "head/k0" }, { Key: "head/none" }] } }));
      expect((deleted.Deleted ?? []).map((d) => d.Key).sort()).toEqual(["head/k0", "head/none"]);
      expect(listings).toBe(0);
    } finally {
      store.prototype.listObjects = listObjects;
    }
    expect(await s3Error(s3.send(new HeadBucketCommand({ Bucket: "no-such-bucket" })))).toEqual({ name: "NotFound", status: 404 });
    expect(await s3Error(s3.send(new DeleteObjectsCommand({ Bucket: "no-such-bucket", Delete: { Objects: [{ Key: "k" }] } })))).toEqual({ name: "NoSuchBucket", status: 404 });
    const left = await s3.send(new ListObjectsV2Command({ Bucket: "lake", Prefix: "head/" }));
    expect(left.KeyCount).toBe(29);
  });

  it("with enforcement off, behaves like s3rver: the second conditional write overwrites", async () => {
    const lax = await startS3Server({ enforceConditionalWrites: false, buckets: ["lake"] });
    const client = new S3Client(lax.clientConfig);
    try {
      await client.send(new PutObjectCommand({ Bucket: "lake", Key: "lease/t1", Body: "owner-a", IfNoneMatch: "*" }));
      await client.send(new PutObjectCommand({ Bucket: "lake", Key: "lease/t1", Body: "owner-b", IfNoneMatch: "*" }));
      const body = await client.send(new GetObjectCommand({ Bucket: "lake", Key: "lease/t1" }));
      expect(await body.Body?.transformToString()).toBe("owner-b");
    } finally {
      client.destroy();
      await lax.close();
    }
  });
});

const PARQUET = {
  InputFormat: "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
  OutputFormat: "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
  SerdeInfo: { SerializationLibrary: "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe", Parameters: { "serialization.format": "1" } },
};

function partition(day: string, location: string, parameters: Record<string, string> = {}): PartitionInput {
  return { Values: [day], StorageDescriptor: { ...PARQUET, Location: location }, Parameters: parameters };
}

describe("Glue emulator", () => {
  let emulator: GlueEmulator;
  let glue: GlueClient;

  beforeAll(async () => {
    emulator = await startGlueEmulator();
    glue = new GlueClient(emulator.clientConfig);
    await glue.send(new CreateDatabaseCommand({ DatabaseInput: { Name: "lake" } }));
    await glue.send(
      new CreateTableCommand({
        DatabaseName: "lake",
        TableInput: {
          Name: "Events",
          TableType: "EXTERNAL_TABLE",
          PartitionKeys: [{ Name: "day", Type: "string" }],
          StorageDescriptor: { ...PARQUET, Columns: [{ Name: "id", Type: "bigint" }], Location: "s3://lake/events/" },
          Parameters: { classification: "parquet" },
        },
      }),
    );
  });
  afterAll(async () => {
    glue.destroy();
    await emulator.close();
  });

  it("reports a pre-existing partition as a per-entry AlreadyExistsException and creates the others", async () => {
    await glue.send(new CreatePartitionCommand({ DatabaseName: "lake", TableName: "events", PartitionInput: partition("2026-11-02", "s3://lake/events/day=2026-11-02/run=a/") }));
    const result = await glue.send(
      new BatchCreatePartitionCommand({
        DatabaseName: "lake",
        TableName: "events",
        PartitionInputList: ["2026-11-01", "2026-11-02", "2026-11-03"].map((day) => partition(day, `s3://lake/events/day=${day}/run=b/`, { run_id: "b" })),
      }),
    );
    expect(result.Errors).toHaveLength(1);
    expect(result.Errors?.[0]?.PartitionValues).toEqual(["2026-11-02"]);
    expect(result.Errors?.[0]?.ErrorDetail?.ErrorCode).toBe("AlreadyExistsException");
    const kept = await glue.send(new GetPartitionCommand({ DatabaseName: "lake", TableName: "events", PartitionValues: ["2026-11-02"] }));
    expect(kept.Partition?.StorageDescriptor?.Location).toBe("s3://lake/events/day=2026-11-02/run=a/");
    const created = await glue.send(new GetPartitionCommand({ DatabaseName: "lake", TableName: "events", PartitionValues: ["2026-11-03"] }));
    expect(created.Partition?.Parameters).toEqual({ run_id: "b" });
    expect(created.Partition?.StorageDescriptor?.SerdeInfo).toEqual(PARQUET.SerdeInfo);
    expect(created.Partition?.CreationTime).toBeInstanceOf(Date);
  });

  it("pages GetPartitions with NextToken and MaxResults, and filters with an Expression", async () => {
    await glue.send(
      new BatchCreatePartitionCommand({
        DatabaseName: "lake",
        TableName: "events",
        PartitionInputList: ["2026-11-04", "2026-11-05"].map((day) => partition(day, `s3://lake/events/day=${day}/run=c/`)),
      }),
    );
    const days: string[] = [];
    let token: string | undefined;
    let pages = 0;
    do {
      const page = await glue.send(new GetPartitionsCommand({ DatabaseName: "lake", TableName: "events", MaxResults: 2, NextToken: token }));
      expect(page.Partitions?.length).toBeLessThanOrEqual(2);
      days.push(...(page.Partitions ?? []).map((p) => p.Values?.[0] ?? ""));
      token = page.NextToken;
      pages += 1;
    } while (token);
    expect(pages).toBe(3);
    expect(days.sort()).toEqual(["2026-11-01", "2026-11-02", "2026-11-03", "2026-11-04", "2026-11-05"]);
    const filtered = await glue.send(
      new GetPartitionsCommand({ DatabaseName: "lake", TableName: "events", Expression: "day = '2026-11-01' OR (day >= '2026-11-04' AND day <> '2026-11-05')" }),
    );
    expect(filtered.Partitions?.map((p) => p.Values?.[0]).sort()).toEqual(["2026-11-01", "2026-11-04"]);
  });

  it("moves a pointer with UpdatePartition and reports batch failures per entry", async () => {
    await glue.send(
      new UpdatePartitionCommand({
        DatabaseName: "lake",
        TableName: "events",
        PartitionValueList: ["2026-11-01"],
        PartitionInput: partition("2026-11-01", "s3://lake/events/day=2026-11-01/run=d/", { run_id: "d", signature: "v1:abc" }),
      }),
    );
    expect(emulator.state.partition("lake", "events", ["2026-11-01"])?.StorageDescriptor?.Location).toBe("s3://lake/events/day=2026-11-01/run=d/");

    emulator.failNext("BatchUpdatePartition", { entries: [1], error: "ConcurrentModificationException" });
    const update = await glue.send(
      new BatchUpdatePartitionCommand({
        DatabaseName: "lake",
        TableName: "events",
        Entries: ["2026-11-03", "2026-11-04", "2026-12-31"].map((day) => ({
          PartitionValueList: [day],
          PartitionInput: partition(day, `s3://lake/events/day=${day}/run=e/`),
        })),
      }),
    );
    expect(update.Errors?.map((e) => [e.PartitionValueList, e.ErrorDetail?.ErrorCode])).toEqual([
      [["2026-11-04"], "ConcurrentModificationException"],
      [["2026-12-31"], "EntityNotFoundException"],
    ]);
    expect(emulator.state.partition("lake", "events", ["2026-11-03"])?.StorageDescriptor?.Location).toContain("run=e/");
    expect(emulator.state.partition("lake", "events", ["2026-11-04"])?.StorageDescriptor?.Location).toContain("run=c/");
  });

  it("UpdateTable on a VersionId that moved fails with ConcurrentModificationException; raceNextUpdate applies another writer's UpdateTable first", async () => {
    await glue.send(new CreateTableCommand({ DatabaseName: "lake", TableInput: { Name: "raced", TableType: "EXTERNAL_TABLE", Parameters: { metadata_location: "s3://lake/m1" } } }));
    const read = (await glue.send(new GetTableCommand({ DatabaseName: "lake", Name: "raced" }))).Table!;
    emulator.raceNextUpdate("lake", "raced", (table) => ({ Name: table.Name, TableType: table.TableType, Parameters: { ...table.Parameters, metadata_location: "s3://lake/other" } }));
    const update = (location: string, version: string | undefined) =>
      glue.send(new UpdateTableCommand({ DatabaseName: "lake", VersionId: version, TableInput: { Name: "raced", TableType: "EXTERNAL_TABLE", Parameters: { metadata_location: location } } }));
    await expect(update("s3://lake/m2", read.VersionId)).rejects.toBeInstanceOf(ConcurrentModificationException);
    const after = (await glue.send(new GetTableCommand({ DatabaseName: "lake", Name: "raced" }))).Table!;
    expect(after.Parameters?.metadata_location).toBe("s3://lake/other");
    expect(Number(after.VersionId)).toBe(Number(read.VersionId) + 1);
    // On the VersionId read now, the update goes through; the race was used up.
    await update("s3://lake/m2", after.VersionId);
    expect((await glue.send(new GetTableCommand({ DatabaseName: "lake", Name: "raced" }))).Table?.Parameters?.metadata_location).toBe("s3://lake/m2");
    expect(emulator.calls.filter((c) => c.operation === "UpdateTable").map((c) => ((c.input as { racing?: boolean }).racing ? "racing" : (c.error ?? "ok"))).slice(-3)).toEqual([
      "racing", "ConcurrentModificationException", "ok",
    ]);
  });

  it("uses the real error names and limits", async () => {
    await expect(glue.send(new GetTableCommand({ DatabaseName: "lake", Name: "nope" }))).rejects.toBeInstanceOf(EntityNotFoundException);
    await expect(glue.send(new CreateDatabaseCommand({ DatabaseInput: { Name: "LAKE" } }))).rejects.toBeInstanceOf(AlreadyExistsException);
    await expect(
      glue.send(
        new BatchDeletePartitionCommand({
          DatabaseName: "lake",
          TableName: "events",
          PartitionsToDelete: Array.from({ length: 26 }, (_, i) => ({ Values: [`d${i}`] })),
        }),
      ),
    ).rejects.toBeInstanceOf(InvalidInputException);
    // A throttled call is retried by the SDK and then succeeds.
    emulator.failNext("GetTable", { error: "ThrottlingException" });
    const table = await glue.send(new GetTableCommand({ DatabaseName: "lake", Name: "EVENTS" }));
    expect(table.Table?.Name).toBe("events");
    expect(emulator.calls.filter((c) => c.operation === "GetTable").map((c) => c.error ?? "ok").slice(-2)).toEqual(["ThrottlingException", "ok"]);
  });
});

describe("Athena emulator (DuckDB over Glue + S3)", () => {
  let s3Server: S3Server;
  let glueEmulator: GlueEmulator;
  let athenaEmulator: AthenaEmulator;
  let glue: GlueClient;
  let athena: AthenaClient;
  let s3: S3Client;

  beforeAll(async () => {
    s3Server = await startS3Server({ buckets: ["lake", "results"] });
    glueEmulator = await startGlueEmulator();
    athenaEmulator = await startAthenaEmulator({ s3Endpoint: s3Server.endpoint, glueEndpoint: glueEmulator.endpoint });
    glue = new GlueClient(glueEmulator.clientConfig);
    athena = new AthenaClient(athenaEmulator.clientConfig);
    s3 = new S3Client(s3Server.clientConfig);
    await glue.send(new CreateDatabaseCommand({ DatabaseInput: { Name: "lakedb" } }));
    await glue.send(
      new CreateTableCommand({
        DatabaseName: "lakedb",
        TableInput: {
          Name: "events",
          TableType: "EXTERNAL_TABLE",
          PartitionKeys: [{ Name: "day", Type: "string" }],
          StorageDescriptor: {
            ...PARQUET,
            Columns: [
              { Name: "id", Type: "bigint" },
              { Name: "name", Type: "string" },
            ],
            Location: "s3://lake/events/",
          },
        },
      }),
    );
  });
  afterAll(async () => {
    athena.destroy();
    glue.destroy();
    s3.destroy();
    await athenaEmulator.close();
    await glueEmulator.close();
    await s3Server.close();
  });

  async function runQuery(query: string): Promise<{ execution: QueryExecution; states: string[] }> {
    const { QueryExecutionId } = await athena.send(
      new StartQueryExecutionCommand({
        QueryString: query,
        QueryExecutionContext: { Database: "lakedb", Catalog: "AwsDataCatalog" },
        ResultConfiguration: { OutputLocation: "s3://results/athena/" },
      }),
    );
    const states: string[] = [];
    for (;;) {
      const { QueryExecution: execution } = await athena.send(new GetQueryExecutionCommand({ QueryExecutionId }));
      const state = execution?.Status?.State ?? "";
      states.push(state);
      if (execution && ["SUCCEEDED", "FAILED", "CANCELLED"].includes(state)) return { execution, states };
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  async function rows(queryExecutionId: string | undefined, maxResults?: number): Promise<string[][]> {
    const all: string[][] = [];
    let token: string | undefined;
    do {
      const page = await athena.send(new GetQueryResultsCommand({ QueryExecutionId: queryExecutionId, NextToken: token, MaxResults: maxResults }));
      all.push(...(page.ResultSet?.Rows ?? []).map((r) => (r.Data ?? []).map((d) => d.VarCharValue ?? "NULL")));
      token = page.NextToken;
    } while (token);
    return all;
  }

  const unloadRun = (day: string, run: string, values: string): string =>
    `UNLOAD (SELECT * FROM (VALUES ${values}) AS t(id, name)) TO 's3://lake/events/day=${day}/run=${run}/' WITH (format = 'PARQUET', compression = 'SNAPPY')`;

  it("UNLOADs Parquet into a run prefix, then counts it through a Glue partition pointing there", async () => {
    const unload = await runQuery(unloadRun("2026-11-01", "r1", "(1, 'a'), (2, 'b'), (3, 'c')"));
    expect(unload.execution.Status?.State).toBe("SUCCEEDED");
    expect(unload.states[0]).toBe("RUNNING");
    const listed = await s3.send(new ListObjectsV2Command({ Bucket: "lake", Prefix: "events/day=2026-11-01/run=r1/" }));
    expect(listed.KeyCount).toBe(1);
    expect(unload.execution.Statistics?.DataManifestLocation).toBe(`s3://results/athena/${unload.execution.QueryExecutionId}-manifest.csv`);
    const statistics = await athena.send(new GetQueryRuntimeStatisticsCommand({ QueryExecutionId: unload.execution.QueryExecutionId }));
    expect(statistics.QueryRuntimeStatistics?.Rows?.OutputRows).toBe(3);

    await glue.send(
      new BatchCreatePartitionCommand({
        DatabaseName: "lakedb",
        TableName: "events",
        PartitionInputList: [partition("2026-11-01", "s3://lake/events/day=2026-11-01/run=r1/")],
      }),
    );
    const count = await runQuery("SELECT count(*) FROM lakedb.events");
    expect(count.execution.Status?.State).toBe("SUCCEEDED");
    expect(await rows(count.execution.QueryExecutionId)).toEqual([["_col0"], ["3"]]);
    const csv = await s3.send(new GetObjectCommand({ Bucket: "results", Key: `athena/${count.execution.QueryExecutionId}.csv` }));
    expect(await csv.Body?.transformToString()).toBe('"_col0"\n"3"\n');
  });

  it("takes partition columns from the Glue partition, pages results and fails UNLOAD into a non-empty prefix", async () => {
    expect((await runQuery(unloadRun("2026-11-02", "r1", "(10, 'x'), (11, NULL)"))).execution.Status?.State).toBe("SUCCEEDED");
    await glue.send(
      new CreatePartitionCommand({
        DatabaseName: "lakedb",
        TableName: "events",
        PartitionInput: partition("2026-11-02", "s3://lake/events/day=2026-11-02/run=r1/"),
      }),
    );
    const select = await runQuery("SELECT day, id, name FROM events ORDER BY id");
    expect(await rows(select.execution.QueryExecutionId, 2)).toEqual([
      ["day", "id", "name"],
      ["2026-11-01", "1", "a"],
      ["2026-11-01", "2", "b"],
      ["2026-11-01", "3", "c"],
      ["2026-11-02", "10", "x"],
      ["2026-11-02", "11", "NULL"],
    ]);

    const again = await runQuery(unloadRun("2026-11-02", "r1", "(12, 'y')"));
    expect(again.execution.Status?.State).toBe("FAILED");
    expect(again.execution.Status?.StateChangeReason).toMatch(/^HIVE_PATH_ALREADY_EXISTS/);
  });

  it("reads an Athena view (a Glue VIRTUAL_VIEW): a table switched to a view over another table in one UpdateTable, and back, its partitions kept", async () => {
    // A second table under other partition keys: what a change of partition keys builds aside.
    await glue.send(
      new CreateTableCommand({
        DatabaseName: "lakedb",
        TableInput: {
          Name: "events__layout_1a2b3c",
          TableType: "EXTERNAL_TABLE",
          PartitionKeys: [{ Name: "month", Type: "string" }],
          StorageDescriptor: { ...PARQUET, Columns: [{ Name: "id", Type: "bigint" }, { Name: "name", Type: "string" }], Location: "s3://lake/events__layout_1a2b3c/" },
        },
      }),
    );
    const unload = `UNLOAD (SELECT * FROM (VALUES (1, 'a'), (2, 'b')) AS t(id, name)) TO 's3://lake/events__layout_1a2b3c/month=2026-11/run=r9/' WITH (format = 'PARQUET')`;
    expect((await runQuery(unload)).execution.Status?.State).toBe("SUCCEEDED");
    await glue.send(new CreatePartitionCommand({ DatabaseName: "lakedb", TableName: "events__layout_1a2b3c", PartitionInput: { Values: ["2026-11"], StorageDescriptor: { ...PARQUET, Location: "s3://lake/events__layout_1a2b3c/month=2026-11/run=r9/" } } }));
    const before = (await glue.send(new GetTableCommand({ DatabaseName: "lakedb", Name: "events" }))).Table!;
    const days = async () => (await glue.send(new GetPartitionsCommand({ DatabaseName: "lakedb", TableName: "events" }))).Partitions?.map((p) => p.Values?.[0]).sort();
    const partitionsBefore = await days();
    const columns = [{ name: "id", type: "bigint" }, { name: "name", type: "varchar" }, { name: "month", type: "varchar" }];
    const presto = Buffer.from(JSON.stringify({ originalSql: 'SELECT * FROM "lakedb"."events__layout_1a2b3c"', catalog: "awsdatacatalog", schema: "lakedb", columns })).toString("base64");
    await glue.send(
      new UpdateTableCommand({
        DatabaseName: "lakedb",
        TableInput: {
          Name: "events",
          TableType: "VIRTUAL_VIEW",
          ViewOriginalText: `/* Presto View: ${presto} */`,
          ViewExpandedText: "/* Presto View */",
          PartitionKeys: [],
          StorageDescriptor: { Columns: [{ Name: "id", Type: "bigint" }, { Name: "name", Type: "string" }, { Name: "month", Type: "string" }] },
        },
      }),
    );
    const viewed = await runQuery("SELECT month, id, name FROM events ORDER BY id");
    expect(viewed.execution.Status?.State, viewed.execution.Status?.StateChangeReason).toBe("SUCCEEDED");
    expect(await rows(viewed.execution.QueryExecutionId)).toEqual([["month", "id", "name"], ["2026-11", "1", "a"], ["2026-11", "2", "b"]]);
    // Its partitions stay in the catalog while it is a view (as Glue, and moto, keep them), and read again once it is a table again.
    expect(await days()).toEqual(partitionsBefore);
    const { Name, TableType, PartitionKeys, StorageDescriptor, Parameters } = before;
    await glue.send(new UpdateTableCommand({ DatabaseName: "lakedb", TableInput: { Name, TableType, PartitionKeys, StorageDescriptor, Parameters } }));
    const back = await runQuery("SELECT count(DISTINCT day) FROM events");
    expect(await rows(back.execution.QueryExecutionId)).toEqual([["_col0"], [String(partitionsBefore?.length)]]);
  });

  it("reports DuckDB's error as the StateChangeReason of a FAILED query", async () => {
    const failed = await runQuery("SELECT no_such_column FROM events");
    expect(failed.execution.Status?.State).toBe("FAILED");
    expect(failed.execution.Status?.StateChangeReason).toMatch(/^COLUMN_NOT_FOUND: .*no_such_column/);
    const missing = await runQuery("SELECT * FROM lakedb.nope");
    expect(missing.execution.Status?.StateChangeReason).toMatch(/^TABLE_NOT_FOUND/);
  });

  it("refuses what Trino refuses before running anything, as Athena does: a syntax error, two statements, an UNLOAD of a WITH", async () => {
    const start = (query: string) =>
      athena.send(new StartQueryExecutionCommand({ QueryString: query, ResultConfiguration: { OutputLocation: "s3://results/athena/" } }));
    const before = athenaEmulator.executions.length;
    // DuckDB runs all of these; Trino does not.
    await expect(start("SELECT * FROM range(3)")).rejects.toMatchObject({ name: "InvalidRequestException", message: expect.stringMatching(/^line 1:21: mismatched input '3'/) });
    await expect(start("SELECT\n  id::int FROM events")).rejects.toMatchObject({ name: "InvalidRequestException", message: expect.stringMatching(/^line 2:5: /) });
    await expect(start("SELECT 1; SELECT 2")).rejects.toMatchObject({ name: "InvalidRequestException", message: expect.stringMatching(/^Only one sql statement is allowed/) });
    await expect(
      start("UNLOAD (WITH t AS (SELECT 1 AS id) SELECT * FROM t) TO 's3://lake/x/' WITH (format = 'PARQUET')"),
    ).rejects.toMatchObject({ name: "InvalidRequestException", message: expect.stringMatching(/^line 1:9: mismatched input 'WITH'\. Expecting: 'SELECT'/) });
    expect(athenaEmulator.executions.length).toBe(before);
    // The same WITH nested inside the UNLOAD's SELECT is accepted and runs.
    const nested = await runQuery(
      "UNLOAD (SELECT id FROM (WITH t AS (SELECT 1 AS id) SELECT * FROM t) AS q) TO 's3://lake/nested/' WITH (format = 'PARQUET')",
    );
    expect(nested.execution.Status?.State).toBe("SUCCEEDED");
  });

  it("fails a CAST to a type Trino lacks with TYPE_NOT_FOUND, and a Parquet column Trino cannot read as the Glue type with HIVE_BAD_DATA", async () => {
    const cast = await runQuery("SELECT CAST(1 AS UBIGINT) AS n");
    expect(cast.execution.Status?.State).toBe("FAILED");
    expect(cast.execution.Status?.StateChangeReason).toBe("TYPE_NOT_FOUND: line 1:18: Unknown type: ubigint");
    expect((await runQuery("SELECT CAST(1 AS DECIMAL(20,0)) AS n, CAST('a' AS VARCHAR) AS s")).execution.Status?.State).toBe("SUCCEEDED");

    // A file whose id is text where Glue says bigint (written by another tool): Trino refuses it, DuckDB would cast.
    await glue.send(
      new CreatePartitionCommand({
        DatabaseName: "lakedb",
        TableName: "events",
        PartitionInput: { Values: ["2026-11-09"], StorageDescriptor: { ...PARQUET, Location: "s3://lake/events/day=2026-11-09/run=bad/" } },
      }),
    );
    expect((await runQuery(unloadRun("2026-11-09", "bad", "('7', 'x')"))).execution.Status?.State).toBe("SUCCEEDED");
    const read = await runQuery("SELECT count(*) FROM events");
    expect(read.execution.Status?.State).toBe("FAILED");
    expect(read.execution.Status?.StateChangeReason).toMatch(/^HIVE_BAD_DATA: Field id's type VARCHAR in parquet file of lakedb\.events is incompatible with type bigint defined in table schema/);
    await glue.send(new DeletePartitionCommand({ DatabaseName: "lakedb", TableName: "events", PartitionValues: ["2026-11-09"] }));
  });

  it("keeps a delayed query RUNNING until StopQueryExecution cancels it", async () => {
    athenaEmulator.delayNext(60_000, { match: "slow_marker" });
    const { QueryExecutionId } = await athena.send(
      new StartQueryExecutionCommand({ QueryString: "SELECT 1 AS slow_marker", ResultConfiguration: { OutputLocation: "s3://results/athena/" } }),
    );
    await new Promise((resolve) => setTimeout(resolve, 100));
    const running = await athena.send(new GetQueryExecutionCommand({ QueryExecutionId }));
    expect(running.QueryExecution?.Status?.State).toBe("RUNNING");
    await athena.send(new StopQueryExecutionCommand({ QueryExecutionId }));
    const stopped = await athena.send(new GetQueryExecutionCommand({ QueryExecutionId }));
    expect(stopped.QueryExecution?.Status?.State).toBe("CANCELLED");
    expect(athenaEmulator.executions.find((e) => e.id === QueryExecutionId)?.state).toBe("CANCELLED");
  });

  it("reads only the partitions a filter on a partition key selects, as Athena prunes, and an object as it is now", async () => {
    const all = await runQuery("SELECT count(*) FROM events");
    expect(await rows(all.execution.QueryExecutionId)).toEqual([["_col0"], ["5"]]);
    const one = await runQuery("SELECT id FROM events WHERE day = '2026-11-02' AND id > 0 ORDER BY id");
    expect(await rows(one.execution.QueryExecutionId)).toEqual([["id"], ["10"], ["11"]]);
    const listed = await s3.send(new ListObjectsV2Command({ Bucket: "lake", Prefix: "events/day=2026-11-02/run=r1/" }));
    const scanned = (listed.Contents ?? []).reduce((sum, object) => sum + (object.Size ?? 0), 0);
    expect(one.execution.Statistics?.DataScannedInBytes).toBe(scanned);
    expect(all.execution.Statistics?.DataScannedInBytes).toBeGreaterThan(scanned);
    const either = await runQuery("SELECT count(*) FROM events WHERE day IN ('2026-11-01', '2026-11-07') OR day = '2026-11-02'");
    expect(await rows(either.execution.QueryExecutionId)).toEqual([["_col0"], ["5"]]);

    // The object read above, rewritten in place with other rows: the next query reads the new rows.
    const [day1] = (await s3.send(new ListObjectsV2Command({ Bucket: "lake", Prefix: "events/day=2026-11-01/run=r1/" }))).Contents ?? [];
    const bytes = await (await s3.send(new GetObjectCommand({ Bucket: "lake", Key: day1?.Key }))).Body?.transformToByteArray();
    await s3.send(new PutObjectCommand({ Bucket: "lake", Key: listed.Contents?.[0]?.Key, Body: bytes }));
    const rewritten = await runQuery("SELECT id FROM events WHERE day = '2026-11-02' ORDER BY id");
    expect(await rows(rewritten.execution.QueryExecutionId)).toEqual([["id"], ["1"], ["2"], ["3"]]);
  });
});
