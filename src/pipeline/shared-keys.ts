import type { Lake } from "../lake/lake.js";
import { quoteIdentifier } from "../model/sql.js";
import { partitionPath } from "../model/partition.js";
import type { SinkLayout } from "../sinks/sink.js";

/** Separates partition values (and key values) in the text the query compares: a control character no value is expected to hold. */
const SEPARATOR = "\u001f";

/**
 * Partitions of an upsert sink's lake table that hold a key another partition of the table holds too, each with why
 * (a key, and another partition that holds it). An upsert target holds each key once: two partitions that send one
 * key would each move the target's row to themselves, and the target would hold whichever was sent last (3 rows sent,
 * 2 held, and a later change to the other partition silently moves the key back). The lake itself never promises
 * keys unique across partitions (only a dataset with `write: upsert` merges by key across them), so the sink checks
 * the whole table, one query through the lake's engine (DuckDB, or Athena on AWS), before it sends anything.
 *
 * No query where no two partitions can share a key: a table without partition keys, or a primary key that holds
 * every partition key. Keys with a NULL part match nothing (PostgreSQL refuses them on their own).
 */
export async function keysInTwoPartitions(lake: Lake, layout: Pick<SinkLayout, "lakeTable" | "primaryKey" | "partitionKeys">): Promise<Map<string, string>> {
  const { lakeTable, primaryKey, partitionKeys } = layout;
  const found = new Map<string, string>();
  if (partitionKeys.length === 0 || partitionKeys.every((key) => primaryKey.includes(key))) return found;
  const text = (names: readonly string[]): string => `concat_ws(chr(31), ${names.map((name) => `CAST(${quoteIdentifier(name)} AS VARCHAR)`).join(", ")})`;
  const keys = primaryKey.map((name) => quoteIdentifier(name));
  // The table's rows as key, partition (one text) and key (one text); then the keys whose rows lie in two partitions or more.
  const rows = `SELECT ${keys.join(", ")}, ${text(partitionKeys)} AS lakeswap_partition, ${text(primaryKey)} AS lakeswap_key FROM ${quoteIdentifier(lakeTable)}`;
  const shared =
    `SELECT ${keys.join(", ")}, min(lakeswap_partition) AS lakeswap_first, max(lakeswap_partition) AS lakeswap_last FROM lakeswap_rows ` +
    `GROUP BY ${keys.join(", ")} HAVING min(lakeswap_partition) <> max(lakeswap_partition)`;
  const other = "CASE WHEN s.lakeswap_first = r.lakeswap_partition THEN s.lakeswap_last ELSE s.lakeswap_first END";
  const result = await lake.query(
    `WITH lakeswap_rows AS (${rows}), lakeswap_shared AS (${shared}) ` +
      `SELECT r.lakeswap_partition, count(*) AS lakeswap_rows, min(r.lakeswap_key) AS lakeswap_example, min_by(${other}, r.lakeswap_key) AS lakeswap_other ` +
      `FROM lakeswap_rows r JOIN lakeswap_shared s ON ${keys.map((key) => `r.${key} = s.${key}`).join(" AND ")} GROUP BY r.lakeswap_partition`,
  );
  const path = (values: unknown): string => partitionPath({ keys: partitionKeys, values: String(values).split(SEPARATOR) });
  for (const [partition, count, example, otherPartition] of result.rows) {
    const values = String(example).split(SEPARATOR);
    const key = primaryKey.map((name, i) => `${name} = ${JSON.stringify(values[i] ?? "")}`).join(", ");
    found.set(path(partition), `holds ${String(count)} row(s) whose key another partition of the table holds too, e.g. (${key}), also in partition ${path(otherPartition)}`);
  }
  return found;
}
