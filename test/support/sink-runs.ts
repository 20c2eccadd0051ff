import path from "node:path";
import { DuckDBInstance } from "@duckdb/node-api";
import { partitionPath, type Partition } from "../../src/model/partition.js";
import { quoteLiteral } from "../../src/model/sql.js";
import type { SinkPartitionWrite, SinkSource } from "../../src/sinks/sink.js";

/** The lake the sink tests' layouts send from (a sync reads it from the lake: ../../src/lake/lake-identity.ts). */
export const TEST_SOURCE: SinkSource = { lakeId: "00000000-0000-4000-8000-000000000001", location: "/lakes/test" };

/**
 * Runs for the PostgreSQL sink's tests, written on demand: `write` COPYs a SELECT into a new Parquet file in `dir`
 * and returns the partition write that names it (run and signature numbered in order). Without a SELECT nothing is
 * written: the write names no file (an emptied partition), or, with `missingFile`, a file that does not exist.
 * DuckDB closes with the test's cleanups.
 */
export async function sinkRuns(dir: string, onCleanup: (cleanup: () => void) => void) {
  const duck = await DuckDBInstance.create(":memory:");
  const connection = await duck.connect();
  onCleanup(() => {
    connection.closeSync();
    duck.closeSync();
  });
  let runs = 0;
  return async (partition: Partition, select: string | undefined, options: { readonly missingFile?: boolean } = {}): Promise<SinkPartitionWrite> => {
    runs += 1;
    const file = path.join(dir, `run-${runs}.parquet`);
    if (select !== undefined) await connection.run(`COPY (${select}) TO ${quoteLiteral(file)} (FORMAT parquet)`);
    const files = select !== undefined || options.missingFile ? [file] : [];
    return { partition, path: partitionPath(partition), runId: `run-${runs}`, signature: `sig-${runs}`, files };
  };
}
