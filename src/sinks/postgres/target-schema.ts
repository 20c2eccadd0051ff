import { LakeswapError } from "../../model/errors.js";
import type { SinkColumn, SinkLayout } from "../sink.js";
import { ident, postgresType, targetLockKey } from "./sql-names.js";
import { dropStaleState, ensureStateTable, stateTable, type Query, type StateScope } from "./state-table.js";

/**
 * An existing target follows its layer's compatible schema changes (the lake's, model/schema-change.ts): a column the
 * layer declares and the target lacks is added (nullable: the rows already there have no value, as the lake's runs
 * written before the change have none), and a column the layer widens is widened (integers, FLOAT to DOUBLE, a
 * DECIMAL's precision with the same scale). Nothing is ever dropped or narrowed: a column the target has and the layer
 * does not declare is left alone with its values, a column wider than the layer's (the layer narrowed back: a rollback
 * of the sync that widened it) stays wide and takes the layer's values as they are (every one fits), and any other type
 * change (a scale, another type) is refused.
 */

/** The PostgreSQL types (as `format_type` prints them) each integer or float type widens to: every value converts exactly. */
const WIDENS_TO: Readonly<Record<string, readonly string[]>> = {
  smallint: ["integer", "bigint"],
  integer: ["bigint"],
  real: ["double precision"],
};

/** Whether a target column of PostgreSQL type `from` widens to `to` with every value it holds unchanged. */
function widensTo(from: string, to: string): boolean {
  if (WIDENS_TO[from]?.includes(to)) return true;
  const [a, b] = [from, to].map((type) => /^numeric\((\d+),(\d+)\)$/.exec(type));
  return a !== null && a !== undefined && b !== null && b !== undefined && a[2] === b[2] && Number(b[1]) > Number(a[1]);
}

/** What an existing target lacks of its layer: columns to add, and columns to widen (their type there, and the layer's). */
export interface TargetChange {
  readonly added: readonly SinkColumn[];
  readonly widened: readonly { readonly column: SinkColumn; readonly from: string; readonly to: string }[];
}

/** Who the messages and statements are about: the sink (as reports show it), the target (quoted, and as `schema.table`) and its state rows. */
export interface TargetNames {
  readonly described: string;
  readonly quoted: string;
  readonly plain: string;
  readonly scope: StateScope;
}

/** The target's columns and their types as `format_type` prints them; empty when the table does not exist. */
export async function readTargetColumns(query: Query, quoted: string): Promise<Map<string, string>> {
  const result = await query<{ name: string; type: string }>(
    "SELECT a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type FROM pg_attribute a " +
      "WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
    [quoted],
  );
  return new Map(result.rows.map((row) => [row.name, row.type]));
}

/**
 * How an existing target (its columns, `readTargetColumns`) must change to take the layer's rows; undefined when it
 * takes them as it is. A column wider than the layer's is kept (its values fit); one whose type the layer changes
 * otherwise is refused naming both types and the fix.
 */
export function planTargetChange(names: TargetNames, layout: SinkLayout, existing: ReadonlyMap<string, string>): TargetChange | undefined {
  const added: SinkColumn[] = [];
  const widened: { column: SinkColumn; from: string; to: string }[] = [];
  for (const column of layout.columns) {
    const [actual, type] = [existing.get(column.name), postgresType(column)];
    if (actual === undefined) added.push(column);
    else if (widensTo(actual, type)) widened.push({ column, from: actual, to: type });
    else if (actual !== type && !widensTo(type, actual)) throw typeRefusal(names, layout, column.name, actual, type);
  }
  return added.length + widened.length > 0 ? { added, widened } : undefined;
}

function typeRefusal(names: TargetNames, layout: SinkLayout, column: string, actual: string, type: string): LakeswapError {
  return new LakeswapError(
    "CONFLICT",
    `${names.described}: column '${column}' is ${actual} in the existing table, but lake table ${layout.lakeTable} sends ${type}; ` +
      `alter or drop ${names.plain}, or set sinks.postgres.table to another table (lakeswap creates it)`,
  );
}

/**
 * Applies a target's change in one transaction of its own, before any partition is written: the writers of the
 * target (other lakeswaps' partition transactions hold its advisory lock shared) are waited for, the columns read
 * again (another writer may have changed them meanwhile), then one `ALTER TABLE` adds and widens (on a partitioned
 * target PostgreSQL applies it to every partition). A column the target lacks although partitions were sent with it
 * (dropped by hand: those rows lost its values) is refused; state rows of an older lakeswap (which do not say their
 * columns) are dropped, so those partitions are sent again in full. A type change that rewrites the table keeps its
 * state rows (the rows are the same, widened): their storage is moved along. A kill rolls it all back.
 */
export async function followLayout(query: Query, names: TargetNames, layout: SinkLayout): Promise<void> {
  await query(`BEGIN; SELECT pg_advisory_xact_lock(${targetLockKey(names.scope.schema, names.scope.table)})`);
  try {
    const change = planTargetChange(names, layout, await readTargetColumns(query, names.quoted));
    if (change) await applyChange(query, names, layout, change);
    await query("COMMIT");
  } catch (error) {
    await query("ROLLBACK").catch(() => undefined);
    throw error;
  }
}

async function applyChange(query: Query, names: TargetNames, layout: SinkLayout, change: TargetChange): Promise<void> {
  const state = stateTable(names.scope);
  await ensureStateTable(query, names.scope);
  await dropStaleState(query, names.scope);
  if (change.added.length > 0) {
    const missing = change.added.map((column) => column.name);
    const sent = await query<{ partition: string; columns: string[] }>(
      `SELECT partition, columns FROM ${state} WHERE table_name = $1 AND columns && $2::text[] ORDER BY partition LIMIT 3`,
      [names.scope.table, missing],
    );
    const first = sent.rows[0];
    if (first) throw droppedByHand(names, layout, change.added.find((column) => first.columns.includes(column.name))!, sent.rows.map((row) => row.partition));
    await query(`DELETE FROM ${state} WHERE table_name = $1 AND columns IS NULL`, [names.scope.table]);
  }
  // Each table's storage before the change: a type change that rewrites a table (integer to bigint) gives it another.
  await query(
    "CREATE TEMPORARY TABLE lakeswap_storage ON COMMIT DROP AS SELECT c.oid AS relid, c.relfilenode FROM pg_class c WHERE c.oid = to_regclass($1) " +
      "UNION SELECT t.relid, c.relfilenode FROM pg_partition_tree(to_regclass($1)) t JOIN pg_class c ON c.oid = t.relid",
    [names.quoted],
  );
  const statement = alterStatement(names.quoted, change);
  try {
    await query(statement);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new LakeswapError(
      "CONFLICT",
      `${names.described}: the table could not follow lake table ${layout.lakeTable} (${describeChange(change)}): ${reason}; ` +
        `run it as the table's owner: ${alterStatement(names.plain, change, false)}`,
      { cause: error },
    );
  }
  await query(
    `UPDATE ${state} s SET target_filenode = c.relfilenode FROM lakeswap_storage b JOIN pg_class c ON c.oid = b.relid ` +
      "WHERE s.table_name = $1 AND b.relfilenode <> 0 AND s.target_filenode = b.relfilenode AND c.relfilenode <> b.relfilenode",
    [names.scope.table],
  );
  await query("DROP TABLE lakeswap_storage");
}

/** `ALTER TABLE <target> ADD COLUMN ..., ALTER COLUMN ... TYPE ...`, names quoted (or as a user types them, for a message). */
function alterStatement(target: string, change: TargetChange, quoted = true): string {
  const name = (column: string): string => (quoted ? ident(column) : column);
  const actions = [
    ...change.added.map((column) => `ADD COLUMN ${name(column.name)} ${postgresType(column)}`),
    ...change.widened.map(({ column, to }) => `ALTER COLUMN ${name(column.name)} TYPE ${to}`),
  ];
  return `ALTER TABLE ${target} ${actions.join(", ")}`;
}

/** The change in words: `coupon text added, n integer -> bigint`. */
function describeChange(change: TargetChange): string {
  return [
    ...change.added.map((column) => `${column.name} ${postgresType(column)} added`),
    ...change.widened.map(({ column, from, to }) => `${column.name} ${from} -> ${to}`),
  ].join(", ");
}

function droppedByHand(names: TargetNames, layout: SinkLayout, column: SinkColumn, partitions: readonly string[]): LakeswapError {
  const type = postgresType(column);
  return new LakeswapError(
    "CONFLICT",
    `${names.described}: the existing table has no column '${column.name}' (${type} expected, from lake table ${layout.lakeTable}), ` +
      `though partitions were sent with it (${partitions.map((p) => p || "(whole table)").join(", ")}${partitions.length >= 3 ? ", ..." : ""}): it was dropped by hand, with their values; ` +
      `to send them again: ALTER TABLE ${names.plain} ADD COLUMN ${column.name} ${type}; DELETE FROM ${names.scope.schema}.lakeswap_state WHERE table_name = '${names.scope.table}'; ` +
      "or set sinks.postgres.table to another table (lakeswap creates it)",
  );
}
