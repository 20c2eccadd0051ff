/**
 * Row generators in the SQL both engines accept: DuckDB (the embedded lake)
 * and Trino (Athena, whose emulator refuses what Trino's grammar refuses), so
 * a contract suite sends the same SELECT to either backend. DuckDB's
 * `range(n)` table function is not Trino's; a cross join of digit VALUES is
 * both's.
 */

/** `SELECT id<columns> FROM …`: `count` rows with `id` 0 … count-1 (INTEGER), `columns` appended as written (", 'a' AS tag"). */
export function rowsSelect(count: number, columns = ""): string {
  const digits = Math.max(1, String(Math.max(0, count - 1)).length);
  const digit = "(VALUES (0), (1), (2), (3), (4), (5), (6), (7), (8), (9))";
  const id = Array.from({ length: digits }, (_, i) => (i === 0 ? "d0.d" : `${10 ** i} * d${i}.d`)).join(" + ");
  const from = Array.from({ length: digits }, (_, i) => `${digit} AS d${i}(d)`).join(" CROSS JOIN ");
  return `SELECT id${columns} FROM (SELECT ${id} AS id FROM ${from}) AS n WHERE id < ${count}`;
}

/** A partition's content as the contract suites write it: `rows` rows of (id BIGINT, tag), with its SELECT. */
export interface TaggedRows {
  readonly tag: string;
  readonly rows: number;
  readonly select: string;
}

/** `rows` rows with ids 0 … rows-1 and `tag` in every row, in SQL both engines accept. */
export function taggedRows(tag: string, rows: number): TaggedRows {
  return { tag, rows, select: `SELECT CAST(id AS BIGINT) AS id, '${tag}' AS tag FROM (${rowsSelect(rows)}) AS r` };
}
