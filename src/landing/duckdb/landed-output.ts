import { promises as fs } from "node:fs";
import path from "node:path";
import { randomBytes } from "node:crypto";
import type { DuckDBConnection } from "@duckdb/node-api";
import { partitionValue } from "../../model/partition.js";
import { quoteIdentifier, quoteLiteral } from "../../model/sql.js";
import { duckdbStorageType } from "../../model/column-types.js";
import type { Landing, LandedFile } from "../landing.js";

/** Writes each partition of a landed delivery into a Parquet file of its own in `dir` (`Landing.writeLandedFiles`). */
export async function writeLandedFiles(connection: DuckDBConnection, request: Parameters<Landing["writeLandedFiles"]>[0]): Promise<LandedFile[]> {
  const { table, delivery, dir } = request;
  const keys = table.partitionKeys;
  const projection = table.columns.map((c) => `CAST(${quoteIdentifier(c.name)} AS ${duckdbStorageType(c.type)}) AS ${quoteIdentifier(c.name)}`).join(", ");
  const compression = `COMPRESSION ${table.compression === "zstd" ? "zstd" : "snappy"}`;
  const files: LandedFile[] = [];
  for (const [index, landed] of delivery.partitions.entries()) {
    const file = path.join(dir, `part-${index}.parquet`);
    const where = keys.map((key) => `${quoteIdentifier(key)} = ${quoteLiteral(partitionValue(landed.partition, key))}`).join(" AND ") || "true";
    // In landed order (insertion order is kept), so a retry of the same segment writes the same rows in the same order.
    await connection.run(`COPY (SELECT ${projection} FROM ${delivery.relation} WHERE ${where}) TO ${quoteLiteral(file)} (FORMAT parquet, ${compression})`);
    files.push({ partition: landed.partition, file, rows: landed.rows, bytes: (await fs.stat(file)).size });
  }
  return files;
}

/** Writes a landed delivery's bad rows as JSONL, each with the receive time of its request (`Landing.writeRejected`). */
export async function writeRejected(connection: DuckDBConnection, request: Parameters<Landing["writeRejected"]>[0]): Promise<number> {
  const { delivery, file, receivedAt } = request;
  const fields = Object.entries(request.fields ?? {}).map(([name, value]) => `${quoteLiteral(value)} AS ${quoteIdentifier(name)}, `).join("");
  const times = `times_${randomBytes(6).toString("hex")}`;
  await connection.run(`CREATE TEMP TABLE ${times} (first_line BIGINT, received_ms BIGINT)`);
  try {
    for (let start = 0; start < receivedAt.length; start += 1000) {
      const values = receivedAt.slice(start, start + 1000).map(([line, ms]) => `(${Math.trunc(line)}, ${Math.trunc(ms)})`);
      await connection.run(`INSERT INTO ${times} VALUES ${values.join(", ")}`);
    }
    // Each bad line takes the receive time of the request it came in: the last one that starts at or before it.
    await connection.run(
      `COPY (SELECT ${fields}r.line, r.reason, r.raw, strftime(make_timestamp(t.received_ms * 1000), '%Y-%m-%dT%H:%M:%S.%gZ') AS received_at ` +
        `FROM ${delivery.rejectedRelation} r ASOF LEFT JOIN ${times} t ON r.line >= t.first_line ORDER BY r.line) TO ${quoteLiteral(file)} (FORMAT json)`,
    );
  } finally {
    await connection.run(`DROP TABLE IF EXISTS ${times}`);
  }
  return delivery.rowsRejected;
}
