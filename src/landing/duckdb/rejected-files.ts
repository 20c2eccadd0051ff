import type { DuckDBConnection } from "@duckdb/node-api";
import { MAX_KNOWN_BAD_LINES, type LandedDelivery, type RejectedFile } from "../landing.js";
import { assertStillAsRead, type DeliveryIds, type ReadFiles } from "./delivery-identity.js";

/**
 * A landed delivery with its bad rows by file (`LandRequest.fileParts`: an append keeps each file's dead letters in a
 * partition of its own). Each file with bad rows is named as a delivery of that file alone would be (a digest of its
 * name and bytes: read again, only those files), and checked unchanged since the delivery was read (`delivered`).
 */
export async function withRejectedFiles(connection: DuckDBConnection, delivery: LandedDelivery, ids: DeliveryIds, delivered: ReadFiles): Promise<LandedDelivery> {
  if (delivery.rowsRejected === 0) return { ...delivery, rejectedFiles: [] };
  const newlines = "coalesce(length(raw) - length(replace(raw, chr(10), '')), 0)";
  const reader = await connection.runAndReadAll(
    "SELECT file, count(*) AS rows, md5(string_agg(to_json({'line': line, 'reason': reason, 'raw': raw})::VARCHAR, chr(10) ORDER BY line, reason, raw)) AS digest, " +
      // Every line a bad row spans (a record with a quote left open runs on over the lines after it, up to the next quote).
      `CASE WHEN count(line) = count(*) AND sum(1 + ${newlines}) <= ${MAX_KNOWN_BAD_LINES} ` +
      `THEN list_sort(list_distinct(flatten(list(range(line::BIGINT, line::BIGINT + 1 + ${newlines})))))::DOUBLE[] END AS lines ` +
      `FROM ${delivery.rejectedRelation} GROUP BY file ORDER BY file`,
  );
  const rejectedFiles: RejectedFile[] = [];
  for (const [file, rows, digest, lines] of reader.getRowsJS()) {
    // Every bad row is read from one of the delivery's files; one that is not would have no partition to be kept in.
    if (typeof file !== "string" || !delivery.files.includes(file)) {
      throw new Error(`a bad row of delivery ${delivery.id} names ${String(file)}, which is not one of its files: its dead letters were not written`);
    }
    const known = Array.isArray(lines) ? { lines: lines.map(Number) } : {};
    rejectedFiles.push({ file, id: (await ids.idOf([file])).id, rows: Number(rows), digest: String(digest), ...known });
  }
  await assertStillAsRead(delivered, "while its files with bad rows were named");
  return { ...delivery, rejectedFiles };
}
