import type { DuckDBConnection } from "@duckdb/node-api";
import { InvalidInputError } from "../../model/errors.js";
import { partitionOfValues, partitionPath, partitionValue, type Partition } from "../../model/partition.js";
import { finishRawSignature, signatureColumnOrder } from "../../model/signature.js";
import { quoteFilePath, quoteIdentifier, quoteLiteral, quoteRelation } from "../../model/sql.js";
import type { LandedPartition, MergeRequest } from "../landing.js";
import { signatureOfRow, signatureQuery } from "./signature-sql.js";
import { readFiles } from "../../engine/duckdb-run.js";
import type { SignatureForm } from "../../duckdb/duckdb-open.js";

/** The relations one merge made, dropped together when it is released. */
export interface MergeRelations {
  /** The merged rows of the touched partitions: declared columns, then partition keys. */
  readonly merged: string;
  /** The delivery's winning row per key. */
  readonly winners: string;
  /** Which current file holds which partition. */
  readonly files: string;
}

/** The names of one merge's relations. */
export function mergeRelations(id: string): MergeRelations {
  return { merged: `merged_${id}`, winners: `winners_${id}`, files: `merge_files_${id}` };
}

/** Drops what a merge made. */
export async function dropMerge(connection: DuckDBConnection, relations: MergeRelations): Promise<void> {
  await connection.run(`DROP VIEW IF EXISTS ${quoteIdentifier(relations.merged)}`);
  await connection.run(`DROP TABLE IF EXISTS ${quoteIdentifier(relations.winners)}`);
  await connection.run(`DROP TABLE IF EXISTS ${quoteIdentifier(relations.files)}`);
}

/** The column DuckDB adds to tell which file a row came from (a lake column name never starts with '_'). */
const FILE_COLUMN = "__lakeswap_file";

/**
 * Merges a landed delivery into a table's current rows by primary key
 * (`MergeRequest`), with DuckDB: the delivery's winning row per key is kept
 * in a table, the touched partitions are found (the delivery's, and those
 * whose current files hold one of its keys), and the merged rows are a view
 * over the touched partitions' files and the winners, signed here per
 * partition as landing signs a delivery. `localFiles` maps each current
 * file's store key to a path DuckDB can read.
 */
export async function mergeDelivery(
  connection: DuckDBConnection,
  request: MergeRequest,
  relations: MergeRelations,
  localFiles: ReadonlyMap<string, string>,
  form: SignatureForm,
): Promise<LandedPartition[]> {
  const merge = mergeSql(connection, request, relations);
  await refuseNullKeys(merge);
  await keepWinners(merge);
  const rows = await fileTable(merge, localFiles);
  const touched = await touchedPartitions(merge, rows);
  await createMerged(merge, rows, touched);
  return signMerged(merge, touched, form);
}

/** One merge's SQL pieces, over the delivery (`landed`), the winners and the current files. */
interface MergeSql {
  readonly connection: DuckDBConnection;
  readonly request: MergeRequest;
  readonly relations: MergeRelations;
  /** `datasets.<name>`, for messages. */
  readonly at: string;
  readonly landed: string;
  readonly winners: string;
  readonly files: string;
  readonly keys: readonly string[];
  readonly pk: readonly string[];
  /** `, a.day, a.hour`: the partition keys after other columns (none for a table without partition keys). */
  andKeys(alias: string, type?: string): string;
  /** The primary key of `left` equals that of `right`. */
  matches(left: string, right: string): string;
  /** The winner of a key: the greatest by order_by (the first, without one). */
  readonly order: string;
  values(sql: string): Promise<unknown[][]>;
  /** The rows of the current files `paths`, each with its partition's keys. */
  read(paths: readonly string[]): string;
}

function mergeSql(connection: DuckDBConnection, request: MergeRequest, relations: MergeRelations): MergeSql {
  const keys = request.table.partitionKeys;
  const pk = request.primaryKey.map(quoteIdentifier);
  const files = quoteIdentifier(relations.files);
  const andKeys = (alias: string, type = "") => keys.map((k) => `, ${alias ? `${alias}.` : ""}${quoteIdentifier(k)}${type}`).join("");
  return {
    connection,
    request,
    relations,
    at: `datasets.${request.dataset}`,
    landed: quoteRelation(request.delivery.relation),
    winners: quoteIdentifier(relations.winners),
    files,
    keys,
    pk,
    andKeys,
    matches: (left, right) => pk.map((c) => `${left}.${c} = ${right}.${c}`).join(" AND "),
    order: request.orderBy.length > 0 ? request.orderBy.map((c) => `${quoteIdentifier(c)} DESC NULLS LAST`).join(", ") : "1",
    values: async (sql) => (await connection.runAndReadAll(sql)).getRowsJS(),
    read: (paths) =>
      // By column name where the table's schema changed in place: runs written before lack added columns.
      `(SELECT c.*${andKeys("f")} FROM ${readFiles(request.table, `[${paths.map(quoteFilePath).join(", ")}]`, `filename = '${FILE_COLUMN}', hive_partitioning = false`)} AS c ` +
      `JOIN ${files} AS f USING (${FILE_COLUMN}))`,
  };
}

/** Refuses a delivery with rows without a primary key, or with two different rows at the top of one key (a tie, or no order_by). */
async function refuseNullKeys({ request, at, landed, keys, pk, order, values }: MergeSql): Promise<void> {
  const { primaryKey, orderBy } = request;
  const nullKeys = Number((await values(`SELECT count(*) FROM ${landed} WHERE ${pk.map((c) => `${c} IS NULL`).join(" OR ")}`))[0]?.[0] ?? 0);
  if (nullKeys > 0) {
    throw new InvalidInputError(
      `${at}: ${nullKeys} row(s) of the delivery have no value in the primary key (${primaryKey.join(", ")}), so they cannot be merged; nothing was loaded. ` +
        `Declare the key columns with nullable: false (e.g. ${primaryKey[0]}: {type: ..., nullable: false}) so that such rows are bad rows (kept in dead_letter: when declared)`,
    );
  }
  // Two different rows at the top of a key are an error, never a guess.
  const everything = [...request.columns.map((c) => quoteIdentifier(c.name)), ...keys.map(quoteIdentifier)].join(", ");
  const ranked = `SELECT *, rank() OVER (PARTITION BY ${pk.join(", ")} ORDER BY ${order}) AS __rank FROM ${landed}`;
  const tie = await values(
    `SELECT ${pk.map((c) => `CAST(${c} AS VARCHAR)`).join(", ")}, count(*) FROM (SELECT DISTINCT ${everything} FROM (${ranked}) WHERE __rank = 1) ` +
      `GROUP BY ${pk.join(", ")} HAVING count(*) > 1 LIMIT 1`,
  );
  if (tie.length > 0) {
    const row = tie[0] as unknown[];
    const key = primaryKey.map((c, i) => `${c}=${String(row[i])}`).join(", ");
    const fix = orderBy.length > 0
      ? `they tie on order_by (${orderBy.join(", ")}): make it tell them apart (add a column, e.g. a sequence number)`
      : `declare order_by: [column] under ${at} to say which row wins (the greatest, e.g. updated_at)`;
    throw new InvalidInputError(`${at}: the delivery holds ${Number(row[primaryKey.length])} different rows for the key ${key}; ${fix}. Nothing was loaded.`);
  }
}

/** The delivery's winning row per key, in a table. */
async function keepWinners({ connection, landed, winners, pk, order }: MergeSql): Promise<void> {
  await connection.run(
    `CREATE TABLE ${winners} AS SELECT * EXCLUDE (__row) FROM ` +
      `(SELECT *, row_number() OVER (PARTITION BY ${pk.join(", ")} ORDER BY ${order}) AS __row FROM ${landed}) WHERE __row = 1`,
  );
}

/** Which current file holds which partition, so that a row read from the files knows its partition: the files, each with its partition. */
async function fileTable({ connection, request, files, keys, andKeys }: MergeSql, localFiles: ReadonlyMap<string, string>): Promise<{ path: string; partition: Partition }[]> {
  await connection.run(`CREATE TABLE ${files} (${FILE_COLUMN} VARCHAR${andKeys("", " VARCHAR")})`);
  const rows = request.current.flatMap((run) => run.files.map((key) => ({ path: localFiles.get(key) ?? key, partition: run.partition })));
  for (let start = 0; start < rows.length; start += 1000) {
    const chunk = rows.slice(start, start + 1000).map((r) => `(${[quoteLiteral(r.path), ...keys.map((k) => quoteLiteral(partitionValue(r.partition, k)))].join(", ")})`);
    await connection.run(`INSERT INTO ${files} VALUES ${chunk.join(", ")}`);
  }
  return rows;
}

/** The partitions touched: the delivery's, and every one that holds one of its keys now (whatever partition the key goes to). */
async function touchedPartitions({ winners, keys, matches, values, read }: MergeSql, rows: readonly { path: string }[]): Promise<Map<string, Partition>> {
  const touched = new Map<string, Partition>();
  const addTouched = (found: unknown[][]) => {
    for (const row of found) {
      const partition = partitionOfValues(keys, row);
      touched.set(partitionPath(partition), partition);
    }
  };
  addTouched(await values(keys.length === 0 ? `SELECT 1 FROM ${winners} LIMIT 1` : `SELECT DISTINCT ${keys.map(quoteIdentifier).join(", ")} FROM ${winners}`));
  if (rows.length > 0) {
    addTouched(
      await values(
        `SELECT DISTINCT ${keys.length === 0 ? "1" : keys.map((k) => `cur.${quoteIdentifier(k)}`).join(", ")} FROM ${read(rows.map((r) => r.path))} AS cur ` +
          `WHERE EXISTS (SELECT 1 FROM ${winners} AS w WHERE ${matches("w", "cur")})`,
      ),
    );
  }
  return touched;
}

/** The merged rows: what each touched partition keeps of its current rows (keys the delivery does not hold), and the delivery's rows. */
async function createMerged(merge: MergeSql, rows: readonly { path: string; partition: Partition }[], touched: ReadonlyMap<string, Partition>): Promise<void> {
  const { connection, request, relations, winners, andKeys, matches, read } = merge;
  const touchedFiles = rows.filter((r) => touched.has(partitionPath(r.partition))).map((r) => r.path);
  const cast = (alias: string) => request.columns.map((c) => `CAST(${alias}.${quoteIdentifier(c.name)} AS ${c.type}) AS ${quoteIdentifier(c.name)}`).join(", ");
  const keep = touchedFiles.length === 0
    ? []
    : [`SELECT ${cast("cur")}${andKeys("cur")} FROM ${read(touchedFiles)} AS cur WHERE NOT EXISTS (SELECT 1 FROM ${winners} AS w WHERE ${matches("w", "cur")})`];
  const live = request.deleteFlag ? ` WHERE NOT coalesce(w.${quoteIdentifier(request.deleteFlag)}, false)` : "";
  const incoming = `SELECT ${cast("w")}${andKeys("w")} FROM ${winners} AS w${live}`;
  await connection.run(`CREATE VIEW ${quoteIdentifier(relations.merged)} AS ${[...keep, incoming].join(" UNION ALL ")}`);
}

/**
 * Each touched partition's rows and signature, signed as landing signs a delivery: the same columns, the same
 * algorithm, so an unchanged partition keeps its signature. A touched partition left without rows (every key deleted
 * or moved away) becomes empty.
 */
async function signMerged({ request, relations, keys, values }: MergeSql, touched: ReadonlyMap<string, Partition>, form: SignatureForm): Promise<LandedPartition[]> {
  const signed = signatureColumnOrder(request.columns.filter((c) => request.signatureColumns.includes(c.name)));
  const signatures = new Map<string, LandedPartition>();
  for (const row of await values(signatureQuery(relations.merged, keys, signed, form))) {
    const partition = partitionOfValues(keys, row);
    const { rows: count, signature } = signatureOfRow(signed, row, keys.length);
    if (count === 0) continue;
    signatures.set(partitionPath(partition), { partition, rows: count, signature });
  }
  return [...touched.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([path, partition]) => signatures.get(path) ?? { partition, rows: 0, signature: finishRawSignature(signed, 0, 0n, 0n) });
}
