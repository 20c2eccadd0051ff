import type { Lake } from "../lake/lake.js";
import { quoteIdentifier, quoteLiteral } from "../model/sql.js";
import type { SinkLayout } from "../sinks/sink.js";

/** Separates the values of a key of several columns in the example key the query returns (a control character no value is expected to hold). */
const SEPARATOR = "\u001f";

/**
 * Partitions to send (`changed`, partition paths) of an upsert sink's lake table that hold a key another partition of
 * the table holds too, each with why (a key, and another partition that holds it). An upsert target holds each key
 * once: two partitions that send one key would each move the target's row to themselves, and the target would hold
 * whichever was sent last (3 rows sent, 2 held, and a later change to the other partition silently moves the key
 * back). The lake itself never promises keys unique across partitions (only a dataset with `write: upsert` merges by
 * key across them), so the sink checks before it sends anything: one query through the lake's engine (DuckDB, or
 * Athena on AWS) that takes the keys of the changed partitions and looks for each in the whole table (the key columns
 * only; an incremental sync aggregates a day's keys, not the table's).
 *
 * No query where no two partitions can share a key: a table without partition keys, or a primary key that holds
 * every partition key. Keys with a NULL part match nothing (PostgreSQL refuses them on their own).
 */
export async function keysInTwoPartitions(
  lake: Lake,
  layout: Pick<SinkLayout, "lakeTable" | "primaryKey" | "partitionKeys">,
  changed: readonly string[],
  everyPartition: boolean,
): Promise<Map<string, string>> {
  const { lakeTable, primaryKey, partitionKeys } = layout;
  const found = new Map<string, string>();
  if (changed.length === 0 || partitionKeys.length === 0 || partitionKeys.every((key) => primaryKey.includes(key))) return found;
  const keys = primaryKey.map((name) => quoteIdentifier(name));
  const table = quoteIdentifier(lakeTable);
  // Every partition sent, a key of one column: whether any key is there twice at all first (the common answer, no),
  // which costs DuckDB half of finding where (57 vs 120-137 ms for 1,000,000 rows in 30 partitions).
  if (everyPartition && keys.length === 1) {
    const [[twice]] = (await lake.query(`SELECT count(*) - count(DISTINCT ${keys[0]}) FROM ${table}`)).rows as [[unknown]];
    if (Number(twice) === 0) return found;
  }
  const columns = (alias: string): string => keys.map((key) => `${alias}.${key}`).join(", ");
  const on = (left: string, right: string): string => keys.map((key) => `${left}.${key} = ${right}.${key}`).join(" AND ");
  // Each row's partition as its path (`day=2026-11-01`, as the lake names it); with one partition key, its value (no
  // text made per row), the path added to the few rows the query returns.
  const single = partitionKeys.length === 1 ? partitionKeys[0]! : undefined;
  const partition = single !== undefined ? `CAST(${quoteIdentifier(single)} AS VARCHAR)` : partitionKeys.map((key) => `${quoteLiteral(`${key}=`)} || CAST(${quoteIdentifier(key)} AS VARCHAR)`).join(" || '/' || ");
  const prefix = single !== undefined ? `${single}=` : "";
  const sent = changed.map((p) => quoteLiteral(p.slice(prefix.length))).join(", ");
  const keyText = `concat_ws(chr(31), ${keys.map((key) => `CAST(r.${key} AS VARCHAR)`).join(", ")})`;
  // Where every partition is sent (a first load), every key is looked at; else only those of the partitions sent.
  const candidates = everyPartition ? "lakeswap_rows r" : `lakeswap_rows r JOIN (SELECT DISTINCT ${keys.join(", ")} FROM lakeswap_rows WHERE lakeswap_partition IN (${sent})) s ON ${on("r", "s")}`;
  const result = await lake.query(
    `WITH lakeswap_rows AS (SELECT ${keys.join(", ")}, ${partition} AS lakeswap_partition FROM ${table}), ` +
      `lakeswap_shared AS (SELECT ${columns("r")}, min(r.lakeswap_partition) AS lakeswap_first, max(r.lakeswap_partition) AS lakeswap_last ` +
      `FROM ${candidates} GROUP BY ${columns("r")} HAVING min(r.lakeswap_partition) <> max(r.lakeswap_partition)) ` +
      `SELECT r.lakeswap_partition, count(*) AS lakeswap_rows, min(${keyText}) AS lakeswap_example, ` +
      `min_by(CASE WHEN s.lakeswap_first = r.lakeswap_partition THEN s.lakeswap_last ELSE s.lakeswap_first END, ${keyText}) AS lakeswap_other ` +
      `FROM lakeswap_rows r JOIN lakeswap_shared s ON ${on("r", "s")} WHERE r.lakeswap_partition IN (${sent}) GROUP BY r.lakeswap_partition`,
  );
  for (const [partition, count, example, other] of result.rows) {
    const values = String(example).split(SEPARATOR);
    const key = primaryKey.map((name, i) => `${name} = ${JSON.stringify(values[i] ?? "")}`).join(", ");
    found.set(`${prefix}${String(partition)}`, `holds ${String(count)} row(s) whose key another partition of the table holds too, e.g. (${key}), also in partition ${prefix}${String(other)}`);
  }
  return found;
}
