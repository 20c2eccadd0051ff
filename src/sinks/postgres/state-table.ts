import type pg from "pg";
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

/** The state table of the target's schema, quoted. */
export function stateTable(scope: StateScope): string {
  return `${ident(scope.schema)}.${ident(STATE_TABLE)}`;
}

/**
 * Creates (or upgrades) the state table and returns each partition's recorded signature. A state row vouches for its
 * partition's rows only in the table (OID) and storage (relfilenode; in a partitioned target, a leaf's) it was
 * written with: rows of another identity (the target dropped and recreated, truncated or rewritten, a leaf dropped;
 * a row of an older lakeswap, without identity) are deleted first, so those partitions are sent in full.
 */
export async function readState(query: Query, scope: StateScope): Promise<Map<string, string>> {
  await ensureStateTable(query, scope);
  await dropStaleState(query, scope);
  const rows = await query<{ partition: string; signature: string }>(`SELECT partition, signature FROM ${stateTable(scope)} WHERE table_name = $1`, [scope.table]);
  return new Map(rows.rows.map((row) => [row.partition, row.signature]));
}

/**
 * Creates the state table if missing, and adds what an older lakeswap's lacks: the target's identity, and the columns
 * each partition was sent with (`columns`, NULL in a row an older lakeswap wrote).
 */
export async function ensureStateTable(query: Query, scope: StateScope): Promise<void> {
  const state = stateTable(scope);
  await createIfAbsent(
    query,
    `CREATE TABLE IF NOT EXISTS ${state} (` +
      "table_name text NOT NULL, partition text NOT NULL, signature text NOT NULL, run_id text NOT NULL, " +
      "updated_at timestamptz NOT NULL DEFAULT now(), target_oid oid, target_filenode oid, columns text[], PRIMARY KEY (table_name, partition))",
  );
  await query(`ALTER TABLE ${state} ADD COLUMN IF NOT EXISTS target_oid oid, ADD COLUMN IF NOT EXISTS target_filenode oid, ADD COLUMN IF NOT EXISTS columns text[]`);
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
 * storage of the partition's leaf (`leaf`, quoted, in a partitioned target) or of the target itself.
 */
export async function recordState(query: Query, scope: StateScope, entry: StateEntry, leaf = scope.target): Promise<void> {
  await query(
    `INSERT INTO ${stateTable(scope)} (table_name, partition, signature, run_id, updated_at, target_oid, target_filenode, columns) ` +
      "SELECT $1, $2, $3, $4, now(), c.oid, l.relfilenode, $7::text[] FROM pg_class c, pg_class l WHERE c.oid = to_regclass($5) AND l.oid = to_regclass($6) " +
      "ON CONFLICT (table_name, partition) DO UPDATE SET signature = EXCLUDED.signature, run_id = EXCLUDED.run_id, updated_at = now(), " +
      "target_oid = EXCLUDED.target_oid, target_filenode = EXCLUDED.target_filenode, columns = EXCLUDED.columns",
    [scope.table, entry.partition, entry.signature, entry.runId, scope.target, leaf, [...entry.columns]],
  );
}

/** Deletes a partition's state row (a partition removed from the target). */
export async function forgetState(query: Query, scope: StateScope, partition: string): Promise<void> {
  await query(`DELETE FROM ${stateTable(scope)} WHERE table_name = $1 AND partition = $2`, [scope.table, partition]);
}
