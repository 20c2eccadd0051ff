import { writeFileSync } from "node:fs";
import path from "node:path";
import { BatchUpdatePartitionCommand, GetPartitionsCommand, GetTableCommand, GlueClient, UpdatePartitionCommand, type Column, type Partition } from "@aws-sdk/client-glue";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { GlueCatalog } from "../../src/catalog/glue-catalog.js";
import { loadPipelineConfig } from "../../src/config/pipeline-config.js";
import type { Lake } from "../../src/lake/lake.js";
import { planSchemaChange } from "../../src/model/schema-change.js";
import { defineTable, type TableDefinition } from "../../src/model/table.js";
import { Pipeline } from "../../src/pipeline/pipeline.js";
import { replacePartition } from "../../src/lake/operations/replace.js";
import { ownAwsBackend, selectedBackends, tempDir, type AwsServices, type TestBackend } from "../support/lake-fixture.js";
import type { AwsTarget } from "../../src/config/aws-config.js";

// Issue 31 on AWS: a schema change in place sets the Glue table's columns and every partition's own (more partitions
// than one BatchUpdatePartition carries), in an order Athena never refuses, and a rerun after a kill finishes it.

const DAYS = 120;
const TABLE = "events_raw";
const CONFIG = `datasets:
  events:
    source: {format: csv, path: events.csv}
    columns:
      id: {type: BIGINT, nullable: false}
      qty: INTEGER
      amount: DECIMAL(10,2)
      ts: TIMESTAMP
    partition:
      day: strftime(ts, '%Y-%m-%d')
`;
/** The declared columns after the change: `note` added in the middle, `qty` widened from INTEGER. */
const WIDER = [{ name: "id", type: "BIGINT" }, { name: "note", type: "VARCHAR" }, { name: "qty", type: "BIGINT" }, { name: "amount", type: "DECIMAL(10,2)" }, { name: "ts", type: "TIMESTAMP" }];
const WIDER_GLUE: Column[] = [
  { Name: "id", Type: "bigint" }, { Name: "note", Type: "string" }, { Name: "qty", Type: "bigint" }, { Name: "amount", Type: "decimal(10,2)" }, { Name: "ts", Type: "timestamp" },
];

/** Day `d` (0-based) from 2026-11-01 on. */
const dayOf = (d: number): string => new Date(Date.UTC(2026, 10, 1) + d * 86_400_000).toISOString().slice(0, 10);

describe.runIf(selectedBackends().includes("aws"))("a schema change in place on Glue", () => {
  let backend: TestBackend & { services: AwsServices; target: AwsTarget };
  let lake: Lake;
  let glue: GlueClient;
  let cleanupDir: () => void;
  let dir: string;
  beforeEach(async () => {
    // Services of its own: the test counts Glue's batch calls.
    backend = await ownAwsBackend();
    lake = await backend.open({ graceMs: 0, leaseWaitMs: 0 });
    glue = new GlueClient(backend.services.glue.clientConfig);
    ({ dir, cleanup: cleanupDir } = tempDir("lakeswap-glue-schema-"));
  });
  afterEach(async () => {
    glue.destroy();
    await lake.close();
    await backend.cleanup();
    cleanupDir();
  });

  /** Loads `days` day partitions of two rows each (qty = id * 10 as INTEGER, amount = id.25); the table's definition then. */
  async function loadDays(days = DAYS): Promise<TableDefinition> {
    writeFileSync(path.join(dir, "lakeswap.yaml"), CONFIG);
    const lines = Array.from({ length: days * 2 }, (_, i) => `${i},${i * 10},${i}.25,${dayOf(Math.floor(i / 2))} 0${i % 2}:00:00`);
    writeFileSync(path.join(dir, "events.csv"), `id,qty,amount,ts\n${lines.join("\n")}\n`);
    const report = await new Pipeline(lake, loadPipelineConfig(path.join(dir, "lakeswap.yaml"))).sync();
    expect(report.totals).toMatchObject({ built: days, failed: 0 });
    return lake.table(TABLE);
  }

  async function partitions(): Promise<Partition[]> {
    const all: Partition[] = [];
    let token: string | undefined;
    do {
      // Pages of 50: the listing is paged as the catalog's is.
      const page = await glue.send(new GetPartitionsCommand({ DatabaseName: backend.target.database, TableName: TABLE, NextToken: token, MaxResults: 50 }));
      all.push(...(page.Partitions ?? []));
      token = page.NextToken;
    } while (token);
    return all;
  }

  /** A catalog whose process dies at its `nth` BatchUpdatePartition call (the ones before went through). */
  function dyingCatalog(nth: number): GlueCatalog {
    let batches = 0;
    const dying = {
      send: (command: unknown) => {
        if (command instanceof BatchUpdatePartitionCommand && ++batches === nth) return Promise.reject(new Error(`killed at batch ${nth}`));
        return glue.send(command as never);
      },
    } as unknown as GlueClient;
    return new GlueCatalog(dying, { database: backend.target.database, uriOf: (key) => `s3://${backend.target.bucket}/${backend.target.prefix}/${key}` });
  }

  const tableColumns = async (): Promise<Column[] | undefined> =>
    (await glue.send(new GetTableCommand({ DatabaseName: backend.target.database, Name: TABLE }))).Table?.StorageDescriptor?.Columns;
  const columnsOf = (p: Partition) => (p.StorageDescriptor?.Columns ?? []).map((c) => ({ Name: c.Name, Type: c.Type }));
  const rowsQuery = `SELECT id, note, qty FROM ${TABLE} ORDER BY id`;
  const expectedRows = (): string[][] => Array.from({ length: DAYS * 2 }, (_, i) => [String(i), "null", String(i * 10)]);
  const shown = (rows: readonly (readonly unknown[])[]): string[][] => rows.map((r) => r.map((v) => (v === null || v === undefined || v === "" ? "null" : String(v))));
  const batchUpdates = (): number => backend.services.glue.callCount("BatchUpdatePartition");

  it("sets the table's and every partition's columns, keeps each partition's run, reads old runs with NULL and widened values, and refuses a disagreeing partition as Athena does", async () => {
    const before = await loadDays();
    const pointers = new Map((await partitions()).map((p) => [(p.Values ?? []).join("/"), { location: p.StorageDescriptor?.Location, run: p.Parameters?.["lakeswap.run"] }]));
    expect(pointers.size).toBe(DAYS);
    const updatesBefore = batchUpdates();

    const changed = await lake.createTable(defineTable({ ...before, columns: WIDER }));
    expect(changed.schemaVersion).toBe(1);
    expect((await lake.table(TABLE)).schemaVersion).toBe(1);
    expect(await tableColumns()).toEqual(WIDER_GLUE);
    const after = await partitions();
    expect(after).toHaveLength(DAYS);
    for (const p of after) {
      const key = (p.Values ?? []).join("/");
      expect(columnsOf(p), key).toEqual(WIDER_GLUE);
      // Only the columns changed: the pointer (Location, run id in Parameters) is where it was.
      expect({ location: p.StorageDescriptor?.Location, run: p.Parameters?.["lakeswap.run"] }, key).toEqual(pointers.get(key));
    }
    expect(batchUpdates() - updatesBefore, "120 partitions: two BatchUpdatePartition calls (100 + 20)").toBe(2);

    // Every old row through Athena: the added column NULL (its runs' files lack it), qty read as BIGINT.
    expect(shown((await lake.query(rowsQuery)).rows)).toEqual(expectedRows());
    // A run written after the change holds a value only BIGINT holds, and the new column; its partition has the table's columns.
    const day = "2027-06-01";
    await replacePartition(lake, TABLE, `day=${day}`, { select: `SELECT CAST(999999 AS BIGINT) AS id, 'hello' AS note, CAST(5000000000 AS BIGINT) AS qty, CAST(1.5 AS DECIMAL(10,2)) AS amount, TIMESTAMP '${day} 00:00:00' AS ts` });
    const newest = (await partitions()).find((p) => p.Values?.[0] === day)!;
    expect(columnsOf(newest)).toEqual(WIDER_GLUE);
    expect(shown((await lake.query(rowsQuery)).rows)).toEqual([...expectedRows(), ["999999", "hello", "5000000000"]]);

    // A partition whose column Athena reads as the table's wider type (int as bigint) is read; one it cannot (double as bigint) fails the query.
    const setColumns = async (d: number, qtyType: string) => {
      const p = after.find((x) => x.Values?.[0] === dayOf(d))!;
      const columns = WIDER_GLUE.map((c) => (c.Name === "qty" ? { ...c, Type: qtyType } : c));
      await glue.send(
        new UpdatePartitionCommand({
          DatabaseName: backend.target.database,
          TableName: TABLE,
          PartitionValueList: p.Values,
          PartitionInput: { Values: p.Values, Parameters: p.Parameters, StorageDescriptor: { ...p.StorageDescriptor, Columns: columns } },
        }),
      );
    };
    await setColumns(3, "int");
    expect(shown((await lake.query(rowsQuery)).rows)).toHaveLength(DAYS * 2 + 1);
    await setColumns(4, "double");
    await expect(lake.query(rowsQuery)).rejects.toThrow(
      `HIVE_PARTITION_SCHEMA_MISMATCH: There is a mismatch between the table and partition schemas. The types are incompatible and cannot be coerced. ` +
        `The column 'qty' in table '${backend.target.database}.${TABLE}' is declared as type 'bigint', but partition 'day=${dayOf(4)}' declared column 'qty' as type 'double'.`,
    );
    // A query that prunes that partition away does not read its schema.
    expect(shown((await lake.query(`SELECT count(*) FROM ${TABLE} WHERE day = '${dayOf(5)}'`)).rows)).toEqual([["2"]]);
    // updateTable again sets exactly the partitions that disagree.
    const catalog = new GlueCatalog(glue, { database: backend.target.database, uriOf: (key) => `s3://${backend.target.bucket}/${backend.target.prefix}/${key}` });
    const updates = batchUpdates();
    await catalog.updateTable(await lake.table(TABLE));
    expect(batchUpdates() - updates).toBe(1);
    expect((await partitions()).every((p) => JSON.stringify(columnsOf(p)) === JSON.stringify(WIDER_GLUE))).toBe(true);
    expect(shown((await lake.query(rowsQuery)).rows)).toHaveLength(DAYS * 2 + 1);
  }, 240_000);

  it("a change killed after its first partition batch leaves every query readable, and the next createTable finishes it", async () => {
    const before = await loadDays();
    const wanted = defineTable({ ...before, columns: WIDER });
    const change = planSchemaChange(before, wanted)!;
    // A catalog whose process dies at its second BatchUpdatePartition: the first batch of 100 went through.
    await expect(dyingCatalog(2).updateTable(change.table)).rejects.toThrow(/killed at batch 2/);

    // Killed mid-way: the table's columns are the new ones, 100 partitions have them, 20 still have the old (narrower) ones.
    expect(await tableColumns()).toEqual(WIDER_GLUE);
    const mid = await partitions();
    expect(mid.filter((p) => JSON.stringify(columnsOf(p)) === JSON.stringify(WIDER_GLUE))).toHaveLength(100);
    expect(mid.filter((p) => columnsOf(p).find((c) => c.Name === "qty")?.Type === "int")).toHaveLength(DAYS - 100);
    // Athena reads every partition meanwhile (the table was widened first), and the definition is still the old one.
    expect(shown((await lake.query(rowsQuery)).rows)).toEqual(expectedRows());
    expect((await lake.table(TABLE)).schemaVersion).toBeUndefined();

    // The rerun plans the change again and finishes it.
    const changed = await lake.createTable(wanted);
    expect(changed.schemaVersion).toBe(1);
    // As planned, stamped with the run id it was made at (after every run current then).
    const { schemaChangedAt, ...definition } = await lake.table(TABLE);
    expect(definition).toEqual(change.table);
    expect(schemaChangedAt! > (await lake.snapshot({ tables: [TABLE] }))[0]!.partitions.map((p) => p.runId).sort().at(-1)!).toBe(true);
    expect((await partitions()).map(columnsOf)).toEqual(Array.from({ length: DAYS }, () => WIDER_GLUE));
    expect(shown((await lake.query(rowsQuery)).rows)).toEqual(expectedRows());
  }, 240_000);

  it("a DECIMAL widened (Athena coerces no partition DECIMAL to another) first leaves every partition's columns: killed then, every query still reads it", async () => {
    const before = await loadDays(3);
    const wanted = defineTable({ ...before, columns: before.columns.map((c) => ({ name: c.name, type: c.name === "amount" ? "DECIMAL(12,2)" : c.type })) });
    const change = planSchemaChange(before, wanted)!;
    const amounts = `SELECT id, amount FROM ${TABLE} ORDER BY id`;
    const expected = Array.from({ length: 6 }, (_, i) => [String(i), `${i}.25`]);
    // Killed at its second batch: the first took the column out of every partition; the table's column is widened after it.
    await expect(dyingCatalog(2).updateTable(change.table)).rejects.toThrow(/killed at batch 2/);
    expect((await tableColumns())?.find((c) => c.Name === "amount")?.Type).toBe("decimal(12,2)");
    expect((await partitions()).map((p) => columnsOf(p).map((c) => c.Name))).toEqual(Array.from({ length: 3 }, () => ["id", "qty", "ts"]));
    // Read by name from the files, as the table's type.
    expect(shown((await lake.query(amounts)).rows)).toEqual(expected);

    expect((await lake.createTable(wanted)).schemaVersion).toBe(1);
    const done = await partitions();
    expect(done.map((p) => columnsOf(p).find((c) => c.Name === "amount")?.Type)).toEqual(["decimal(12,2)", "decimal(12,2)", "decimal(12,2)"]);
    expect(shown((await lake.query(amounts)).rows)).toEqual(expected);
    // The step is needed: a partition still declaring decimal(10,2) under decimal(12,2) fails every query.
    const p = done[0]!;
    const narrow = (p.StorageDescriptor?.Columns ?? []).map((c) => (c.Name === "amount" ? { ...c, Type: "decimal(10,2)" } : c));
    await glue.send(new UpdatePartitionCommand({ DatabaseName: backend.target.database, TableName: TABLE, PartitionValueList: p.Values, PartitionInput: { Values: p.Values, Parameters: p.Parameters, StorageDescriptor: { ...p.StorageDescriptor, Columns: narrow } } }));
    await expect(lake.query(amounts)).rejects.toThrow(/HIVE_PARTITION_SCHEMA_MISMATCH: .* partition 'day=2026-11-01' declared column 'amount' as type 'decimal\(10,2\)'/);
  }, 240_000);
});
