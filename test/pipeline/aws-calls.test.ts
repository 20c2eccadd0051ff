import { writeFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { loadPipelineConfig } from "../../src/config/pipeline-config.js";
import { Pipeline } from "../../src/pipeline/pipeline.js";
import { ownAwsBackend, tempDir } from "../support/lake-fixture.js";

// A sync of many partitions on AWS makes calls per batch, not per partition: Glue writes grow as N/100, Glue
// listings stay constant, and a resend of the same delivery makes a constant number of calls whatever N is.

const CONFIG = `datasets:
  events:
    source: {format: csv, path: events.csv}
    columns:
      id: {type: BIGINT, nullable: false}
      ts: TIMESTAMP
    partition:
      day: strftime(ts, '%Y-%m-%d')
`;

const GLUE_PARTITION_WRITES = ["BatchCreatePartition", "BatchUpdatePartition", "CreatePartition", "UpdatePartition"];
const GLUE_LISTINGS = ["GetPartitions", "GetTables"];

interface Calls {
  readonly partitionWrites: number;
  readonly listings: number;
  readonly singleReads: number;
  /** GetTable calls: the table's definition read. */
  readonly tableReads: number;
  readonly glue: number;
  readonly s3: number;
}

/** Syncs N new day partitions, then the same delivery again, on fresh emulators; the calls each made. */
async function syncCalls(days: number): Promise<{ first: Calls; resend: Calls }> {
  // Services of its own: the test counts every call they receive.
  const backend = await ownAwsBackend();
  const { dir, cleanup } = tempDir("lakeswap-calls-");
  const lake = await backend.open();
  try {
    writeFileSync(path.join(dir, "lakeswap.yaml"), CONFIG);
    const start = Date.UTC(2000, 0, 1);
    const lines = Array.from({ length: days * 2 }, (_, i) => `${i},${new Date(start + Math.floor(i / 2) * 86_400_000).toISOString().slice(0, 10)} 0${i % 2}:00:00`);
    writeFileSync(path.join(dir, "events.csv"), `id,ts\n${lines.join("\n")}\n`);
    const config = loadPipelineConfig(path.join(dir, "lakeswap.yaml"));
    const { glue, s3 } = backend.services;
    const calls = (since: { glue: number; s3: number }): Calls => {
      const made = glue.calls.slice(since.glue);
      const count = (operations: readonly string[]) => made.filter((c) => operations.includes(c.operation)).length;
      return {
        partitionWrites: count(GLUE_PARTITION_WRITES),
        // A listing is one call per page of up to 1,000 partitions (Glue's most): counted as listings begun.
        listings: made.filter((c) => GLUE_LISTINGS.includes(c.operation) && !(c.input as { NextToken?: string }).NextToken).length,
        singleReads: count(["GetPartition"]),
        tableReads: count(["GetTable"]),
        glue: made.length,
        s3: s3.requests.count() - since.s3,
      };
    };
    const mark = () => ({ glue: glue.calls.length, s3: s3.requests.count() });

    let since = mark();
    const first = await new Pipeline(lake, config).sync();
    expect(first.totals).toMatchObject({ built: days, failed: 0 });
    const firstCalls = calls(since);
    since = mark();
    const resend = await new Pipeline(lake, config).sync();
    expect(resend.totals).toMatchObject({ built: 0, skipped: days });
    return { first: firstCalls, resend: calls(since) };
  } finally {
    await lake.close();
    cleanup();
    await backend.cleanup();
  }
}

describe("the AWS calls of a sync", () => {
  it("grow with Glue's batches, not with the partitions; a resend makes the same few calls whatever the number of partitions", async () => {
    const small = await syncCalls(150);
    const large = await syncCalls(450);
    // N new partitions: N/100 batch calls (rounded up), and nothing per partition.
    expect(small.first.partitionWrites).toBe(2);
    expect(large.first.partitionWrites).toBe(5);
    expect(large.first.singleReads).toBe(small.first.singleReads);
    expect(large.first.listings, "Glue listings do not grow with N").toBe(small.first.listings);
    expect(large.first.listings).toBeLessThanOrEqual(10);
    // The resend: no partition write at all, and the same calls for 450 partitions as for 150.
    expect(large.resend).toEqual(small.resend);
    expect(large.resend.partitionWrites).toBe(0);
    expect(large.resend.glue + large.resend.s3).toBeLessThanOrEqual(30);
    // The table's definition is read a few times per sync, not once per question a sync asks of it: under its lease
    // only this writer changes it, so the catalog keeps what it read (11 reads for the first sync, 7 for a resend, before).
    expect(large.first.tableReads).toBe(small.first.tableReads);
    expect(small.first.tableReads).toBeLessThanOrEqual(5);
    expect(small.resend.tableReads).toBeLessThanOrEqual(3);
    // Each new partition costs its own few S3 requests (its run written, listed and audited, its manifest): its runs
    // before the swap are found by listing the table once, not the partition twice, and GC after the swap has nothing
    // to list in a partition that held no run before (8 requests per partition before).
    expect((large.first.s3 - small.first.s3) / (450 - 150)).toBeLessThanOrEqual(4.5);
  }, 300_000);
});
