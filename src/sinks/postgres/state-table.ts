import type pg from "pg";
import { OtherSourceError, type OtherSourcePartition, type SinkState } from "../sink.js";
import { ident, sqlState } from "./sql-names.js";

/** The state table, one per schema: each partition's signature, written in the same transaction as its rows. */
const STATE_TABLE = "lakeswap_state";

/** Runs one statement on the sink's connection. */
export type Query = <Row extends pg.QueryResultRow = pg.QueryResultRow>(sql: string, values?: unknown[]) => Promise<pg.QueryResult<Row>>;

/**
 * SQLSTATEs of a CREATE ... IF NOT EXISTS that lost to another session creating the same object at the same moment
 * (unique_violation on pg_namespace or pg_type, duplicate_schema, duplicate_table, duplicate_object): IF NOT EXISTS
 * looks before it creates, and does not wait for a creation in progress.
 */
const LOST_CREATE_RACE = new Set(["23505", "42P06", "42P07", "42710"]);

/** Runs a CREATE ... IF NOT EXISTS; where another session created the object meanwhile, again (it then finds it). */
export async function createIfAbsent(query: Query, sql: string): Promise<void> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      await query(sql);
      return;
    } catch (error) {
      if (attempt >= 3 || !LOST_CREATE_RACE.has(sqlState(error) ?? "")) throw error;
    }
  }
}

/** Where the state rows of one target live: the schema's state table, the target's name in it, and the target itself (quoted). */
export interface StateScope {
  readonly schema: string;
  readonly table: string;
  /** `"schema"."table"`, as `to_regclass` reads it. */
  readonly target: string;
}

/** The source a sink writes for: its lake's id and location, and the lake table. */
export interface StateSource {
  readonly lakeId: string;
  readonly location: string;
  readonly lakeTable: string;
}

/**
 * Whether state row `s` is this source's: written by it, or by a lakeswap that recorded no source (readState gives
 * such rows to the first source that reads them; one written since by an older lakeswap still running is taken too).
 * `lake` and `table` are the parameters that hold the source's lake id and lake table.
 */
function ours(lake = "$3", table = "$4"): string {
  return `(s.source_lake IS NULL OR (s.source_lake = ${lake} AND s.source_table = ${table}))`;
}

/** State row `s`'s source as messages name it. */
const DESCRIBED_SOURCE = "format('lake table %s of %s (lake id %s)', s.source_table, s.source_location, s.source_lake)";

/** The state table of the target's schema, quoted. */
export function stateTable(scope: StateScope): string {
  return `${ident(scope.schema)}.${ident(STATE_TABLE)}`;
}

/**
 * Creates (or upgrades) the state table and returns each partition's recorded signature, this source's and the
 * others'. A state row vouches for its partition's rows only in the table (OID) and storage (relfilenode; in a
 * partitioned target, a leaf's) it was written with: rows of another identity (the target dropped and recreated,
 * truncated or rewritten, a leaf dropped; a row of an older lakeswap, without identity) are deleted first, so those
 * partitions are sent in full.
 */
export async function readState(query: Query, scope: StateScope, source: StateSource): Promise<SinkState> {
  await ensureStateTable(query, scope);
  await dropStaleState(query, scope);
  // Rows of a lakeswap that recorded no source: the target had one source then, which this is (the first to come).
  await query(`UPDATE ${stateTable(scope)} SET source_lake = $2, source_table = $3, source_location = $4 WHERE table_name = $1 AND source_lake IS NULL`, [
    scope.table,
    source.lakeId,
    source.lakeTable,
    source.location,
  ]);
  const rows = await query<{ partition: string; signature: string; ours: boolean; other: string | null }>(
    `SELECT partition, signature, ${ours("$2", "$3")} AS ours, ${DESCRIBED_SOURCE} AS other FROM ${stateTable(scope)} s WHERE table_name = $1`,
    [scope.table, source.lakeId, source.lakeTable],
  );
  const recorded = new Map<string, string>();
  const others = new Map<string, OtherSourcePartition>();
  for (const row of rows.rows) {
    if (row.ours) recorded.set(row.partition, row.signature);
    else others.set(row.partition, { source: row.other ?? "another source", refusal: otherSourceMessage(scope, source, row.partition, row.other ?? "another source") });
  }
  return { recorded, others };
}


/**
 * Creates the state table if missing, and adds what an older lakeswap's lacks: the target's identity, the columns
 * each partition was sent with (`columns`), and the source that sent it (`source_*`): NULL in a row an older lakeswap wrote.
 */
export async function ensureStateTable(query: Query, scope: StateScope): Promise<void> {
  const state = stateTable(scope);
  await createIfAbsent(
    query,
    `CREATE TABLE IF NOT EXISTS ${state} (` +
      "table_name text NOT NULL, partition text NOT NULL, signature text NOT NULL, run_id text NOT NULL, " +
      "updated_at timestamptz NOT NULL DEFAULT now(), target_oid oid, target_filenode oid, columns text[], " +
      "source_lake text, source_table text, source_location text, PRIMARY KEY (table_name, partition))",
  );
  await query(
    `ALTER TABLE ${state} ADD COLUMN IF NOT EXISTS target_oid oid, ADD COLUMN IF NOT EXISTS target_filenode oid, ADD COLUMN IF NOT EXISTS columns text[], ` +
      "ADD COLUMN IF NOT EXISTS source_lake text, ADD COLUMN IF NOT EXISTS source_table text, ADD COLUMN IF NOT EXISTS source_location text",
  );
}

/** Deletes the target's state rows of another identity than the target's own (see readState). */
export async function dropStaleState(query: Query, scope: StateScope): Promise<void> {
  await query(
    `DELETE FROM ${stateTable(scope)} s WHERE s.table_name = $1 AND NOT EXISTS ` +
      "(SELECT 1 FROM pg_class c WHERE c.oid = to_regclass($2) AND c.oid = s.target_oid AND (c.relfilenode = s.target_filenode OR c.relkind = 'p' AND " +
      "EXISTS (SELECT 1 FROM pg_partition_tree(c.oid) t JOIN pg_class l ON l.oid = t.relid WHERE t.isleaf AND l.relfilenode = s.target_filenode)))",
    [scope.table, scope.target],
  );
}

/** What a state row records of one partition's write: its signature and run, and the columns its rows were sent with. */
export interface StateEntry {
  readonly partition: string;
  readonly signature: string;
  readonly runId: string;
  readonly columns: readonly string[];
}

/**
 * Records a partition's write, with the target's identity as the running transaction sees it: its OID, and the
 * storage of the partition's leaf (`leaf`, quoted, in a partitioned target) or of the target itself; and the source
 * that wrote it. A row another source recorded meanwhile is left as it is, and the write fails (OtherSourceError):
 * its transaction rolls back.
 */
export async function recordState(query: Query, scope: StateScope, source: StateSource, entry: StateEntry, leaf = scope.target): Promise<void> {
  const written = await query(
    `INSERT INTO ${stateTable(scope)} AS s (table_name, partition, source_lake, source_table, signature, run_id, updated_at, target_oid, target_filenode, columns, source_location) ` +
      "SELECT $1, $2, $3, $4, $5, $6, now(), c.oid, l.relfilenode, $9::text[], $10 FROM pg_class c, pg_class l WHERE c.oid = to_regclass($7) AND l.oid = to_regclass($8) " +
      "ON CONFLICT (table_name, partition) DO UPDATE SET signature = EXCLUDED.signature, run_id = EXCLUDED.run_id, updated_at = now(), " +
      "target_oid = EXCLUDED.target_oid, target_filenode = EXCLUDED.target_filenode, columns = EXCLUDED.columns, " +
      `source_lake = EXCLUDED.source_lake, source_table = EXCLUDED.source_table, source_location = EXCLUDED.source_location WHERE ${ours()}`,
    [scope.table, entry.partition, source.lakeId, source.lakeTable, entry.signature, entry.runId, scope.target, leaf, [...entry.columns], source.location],
  );
  if (written.rowCount === 1) return;
  await refuseOtherSource(query, scope, source, entry.partition);
  throw new Error(`the state row of partition ${entry.partition} of ${scope.target} was not written: the table is gone (dropped while it was written)`);
}

/** Deletes a partition's state row (a partition removed from the target); one another source recorded meanwhile fails the removal (OtherSourceError). */
export async function forgetState(query: Query, scope: StateScope, source: StateSource, partition: string): Promise<void> {
  const deleted = await query(`DELETE FROM ${stateTable(scope)} s WHERE table_name = $1 AND partition = $2 AND ${ours()}`, [scope.table, partition, source.lakeId, source.lakeTable]);
  if (deleted.rowCount === 0) await refuseOtherSource(query, scope, source, partition);
}

/** Throws OtherSourceError where another source holds the partition's state row. */
async function refuseOtherSource(query: Query, scope: StateScope, source: StateSource, partition: string): Promise<void> {
  const other = await query<{ other: string }>(`SELECT ${DESCRIBED_SOURCE} AS other FROM ${stateTable(scope)} s WHERE table_name = $1 AND partition = $2 AND NOT ${ours()}`, [
    scope.table,
    partition,
    source.lakeId,
    source.lakeTable,
  ]);
  const row = other.rows[0];
  if (row) throw new OtherSourceError(otherSourceMessage(scope, source, partition, row.other));
}

/** Why a partition that another source sent is neither written nor removed by this one, and what the user can do. */
function otherSourceMessage(scope: StateScope, source: StateSource, partition: string, other: string): string {
  return (
    `partition ${partition || "(the whole table)"} of ${scope.schema}.${scope.table} was sent by ${other}, not by lake table ${source.lakeTable} of ${source.location} ` +
    `(lake id ${source.lakeId}): each partition of a target belongs to the source that sent it, and another source's rows are never replaced or removed. ` +
    `Give this sink a table of its own, or, to hand the partition over, delete its state row first: ` +
    `DELETE FROM ${scope.schema}.lakeswap_state WHERE table_name = '${scope.table}' AND partition = '${partition}'`
  );
}
