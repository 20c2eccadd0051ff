import { promises as fs } from "node:fs";
import path from "node:path";
import type { DuckDBConnection } from "@duckdb/node-api";
import type { FileAccess } from "../../engine/duckdb-file-access.js";
import { duckdbStorageType } from "../../model/column-types.js";
import { quoteFilePath, quoteIdentifier, quoteLiteral } from "../../model/sql.js";
import { signatureColumnOrder, type Signing } from "../../model/signature.js";
import type { CompactRunRequest, StagedCompaction } from "../landing.js";
import { signatureQuery } from "./signature-sql.js";

/** What compacting a run needs of the landing: its DuckDB, how it reaches store files, and how it signs. */
export interface CompactRunParts {
  withConnection<T>(work: (connection: DuckDBConnection) => Promise<T>): Promise<T>;
  readonly files: FileAccess;
  signing(): Promise<Signing>;
}

/**
 * Rewrites a run's Parquet files into files of about `fileBytes` each (the table's codec), staged beside the lake, and
 * signs what was written, read back from the staged files themselves: the caller compares it with the partition's
 * signature before it places them as the new run. Columns a file lacks (added to the table after it was written) are
 * NULL, as a reader of the run sees them.
 */
export async function compactRun(parts: CompactRunParts, request: CompactRunRequest): Promise<StagedCompaction> {
  const { table } = request;
  const sources = await parts.files.readable(request.files, "compact");
  let stage: { readonly dir: string; remove(): Promise<void> } | undefined;
  try {
    stage = await parts.files.stage(`compact-${request.runId}`);
    const dir = stage.dir;
    const signing = await parts.signing();
    const signed = signatureColumnOrder(table.columns);
    const { rows, upper, lower } = await parts.withConnection(async (connection) => {
      const list = `[${sources.paths.map(quoteFilePath).join(", ")}]`;
      const present = new Set(
        (await connection.runAndReadAll(`DESCRIBE SELECT * FROM read_parquet(${list}, hive_partitioning = false, union_by_name = true)`)).getRowsJS().map((row) => String(row[0])),
      );
      const projection = table.columns
        .map((c) => `CAST(${present.has(c.name) ? quoteIdentifier(c.name) : "NULL"} AS ${duckdbStorageType(c.type)}) AS ${quoteIdentifier(c.name)}`)
        .join(", ");
      await connection.run(
        `COPY (SELECT ${projection} FROM read_parquet(${list}, hive_partitioning = false, union_by_name = true)) TO ${quoteLiteral(dir)} ` +
          `(FORMAT PARQUET, COMPRESSION ${table.compression === "zstd" ? "zstd" : "snappy"}, FILE_SIZE_BYTES ${Math.max(1, Math.floor(request.fileBytes))})`,
      );
      // A file DuckDB began just as the rows ran out holds none: it is not part of the run.
      const written = (await fs.readdir(dir)).filter((name) => name.endsWith(".parquet")).map((name) => path.join(dir, name));
      const counts = await connection.runAndReadAll(`SELECT file_name, num_rows FROM parquet_file_metadata([${written.map(quoteFilePath).join(", ")}])`);
      for (const [file, count] of counts.getRowsJS()) if (Number(count) === 0 && written.length > 1) await fs.rm(String(file));
      const relation = `compacted_${request.runId.replace(/[^A-Za-z0-9]/g, "_")}`;
      await connection.run(`CREATE OR REPLACE TEMP VIEW ${relation} AS SELECT * FROM read_parquet(${quoteLiteral(path.join(dir, "*.parquet"))}, hive_partitioning = false)`);
      try {
        const [row] = (await connection.runAndReadAll(signatureQuery(relation, [], signed, signing.form))).getRowsJS();
        return { rows: Number(row?.[0] ?? 0), upper: String(row?.[1] ?? "0"), lower: String(row?.[2] ?? "0") };
      } finally {
        await connection.run(`DROP VIEW IF EXISTS ${relation}`);
      }
    });
    const staged = stage;
    return {
      rows,
      lanes: { upper, lower },
      place: async () => (await parts.files.placeRun(dir, { runId: request.runId, runPrefix: request.runPrefix })).files,
      discard: () => staged.remove(),
    };
  } catch (error) {
    await stage?.remove();
    throw error;
  } finally {
    await sources.release();
  }
}
