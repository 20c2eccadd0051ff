import type { DuckDBConnection } from "@duckdb/node-api";
import { serializedParseTree } from "../../engine/sql-guard.js";

/** Node classes of DuckDB's parse tree that compute a value from their children alone. */
const PLAIN_NODES = new Set(["CONSTANT", "CAST", "OPERATOR", "CASE", "COMPARISON", "CONJUNCTION", "BETWEEN"]);
/** Values remembered per map, at most: past that, the map starts again. */
const MAX_VALUES = 100_000;

/**
 * The values of `inputs.map` expressions, remembered by the process for each map whose every expression gives the same
 * value for the same upstream values (a deterministic map): a sync plans each derived layer over every upstream
 * partition, so a process that syncs again (a collector, the month-to-date replay) maps, from its third sync on, only
 * the partitions it has not seen. A map is remembered only where DuckDB's parser shows nothing but the upstream keys, constants, operators and
 * functions DuckDB declares CONSISTENT (no `now()`, `random()`, `current_date`, macro or subquery): any other is run
 * every time, as before.
 */
export class PartitionMaps {
  private consistent?: Promise<ReadonlySet<string>>;
  private readonly maps = new Map<string, Promise<Map<string, string[]> | undefined>>();
  /** Maps asked for once so far. */
  private readonly seen = new Set<string>();

  /**
   * `run` maps values; `functions` reads which functions are consistent (once a process). Returns each row of
   * `values` mapped, running only the rows this map has not seen where it is remembered.
   */
  async map(
    fromKeys: readonly string[],
    expressions: readonly string[],
    values: readonly (readonly string[])[],
    run: (values: readonly (readonly string[])[]) => Promise<string[][]>,
    functions: (read: (connection: DuckDBConnection) => Promise<ReadonlySet<string>>) => Promise<ReadonlySet<string>>,
  ): Promise<string[][]> {
    const key = JSON.stringify([fromKeys, expressions]);
    let known = this.maps.get(key);
    if (!known) {
      // A map asked for once (a command's one sync) is only run: reading DuckDB's list of functions takes tens of
      // milliseconds. One asked for again (a process that syncs again) is checked, and remembered where it may be.
      if (!this.seen.has(key)) {
        this.seen.add(key);
        return run(values);
      }
      this.consistent ??= functions(consistentFunctions);
      known = this.remembered(fromKeys, expressions, this.consistent);
      this.maps.set(key, known);
    }
    const rows = await known;
    if (!rows) return run(values);
    const rowKey = (row: readonly string[]): string => JSON.stringify(row);
    const missing = values.filter((row) => !rows.has(rowKey(row)));
    if (missing.length > 0) {
      const mapped = await run(missing);
      if (rows.size + missing.length > MAX_VALUES) rows.clear();
      missing.forEach((row, i) => rows.set(rowKey(row), mapped[i] as string[]));
    }
    return values.map((row) => [...(rows.get(rowKey(row)) as string[])]);
  }

  /** An empty store of a map's values, or undefined where the map is not deterministic (then nothing is remembered). */
  private async remembered(fromKeys: readonly string[], expressions: readonly string[], consistent: Promise<ReadonlySet<string>>): Promise<Map<string, string[]> | undefined> {
    try {
      const functions = await consistent;
      const keys = new Set(fromKeys.map((k) => k.toLowerCase()));
      for (const expression of expressions) {
        const tree = JSON.parse(await serializedParseTree(`SELECT ${expression}`)) as { error?: boolean; statements?: { node?: { select_list?: unknown[] } }[] };
        const selected = tree.error ? undefined : tree.statements?.[0]?.node?.select_list;
        if (selected?.length !== 1 || !deterministic(selected[0], keys, functions)) return undefined;
      }
      return new Map();
    } catch {
      return undefined;
    }
  }
}

/** Whether a parse tree node computes its value from `keys`' columns alone, through functions of `functions` only. */
function deterministic(node: unknown, keys: ReadonlySet<string>, functions: ReadonlySet<string>): boolean {
  if (Array.isArray(node)) return node.every((child) => deterministic(child, keys, functions));
  if (typeof node !== "object" || node === null) return true;
  const fields = node as Record<string, unknown>;
  if (typeof fields.class === "string") {
    if (fields.class === "COLUMN_REF") {
      const names = fields.column_names as unknown[] | undefined;
      if (names?.length !== 1 || !keys.has(String(names[0]).toLowerCase())) return false;
    } else if (fields.class === "FUNCTION") {
      if (fields.schema !== "" || fields.catalog !== "" || !functions.has(String(fields.function_name).toLowerCase())) return false;
    } else if (!PLAIN_NODES.has(fields.class)) {
      return false;
    }
  }
  return Object.values(fields).every((child) => deterministic(child, keys, functions));
}

/** The functions every overload of which DuckDB declares CONSISTENT: the same arguments always give the same value. */
async function consistentFunctions(connection: DuckDBConnection): Promise<ReadonlySet<string>> {
  const reader = await connection.runAndReadAll(
    "SELECT lower(function_name) FROM duckdb_functions() GROUP BY ALL HAVING bool_and(coalesce(stability = 'CONSISTENT', false) AND NOT has_side_effects AND function_type = 'scalar')",
  );
  return new Set(reader.getRowsJS().map((row) => String(row[0])));
}
