import type { DuckDBConnection } from "@duckdb/node-api";
import { quoteLiteral, quoteRelation, relationParts } from "../../model/sql.js";

/** The names of the engine tables that hold one landed delivery. */
export interface LandingTables {
  /** Good rows: the declared columns plus the partition keys. */
  readonly landed: string;
  /** Bad rows: file, line, reason, raw text. */
  readonly rejected: string;
}

/**
 * The names of the relations landing makes besides the landed and rejected ones: scratch tables, and (Parquet) the
 * view of every row typed, with its problems, that the landed view filters. `releaseLanding` drops them all.
 */
export function landingScratch(landed: string): Record<"rows" | "lines" | "records" | "badKeys" | "badRows" | "typed" | "ordered" | "checked" | "written" | "groups", string> {
  return {
    rows: `${landed}_rows`,
    lines: `${landed}_lines`,
    records: `${landed}_records`,
    badKeys: `${landed}_bad_keys`,
    badRows: `${landed}_bad_rows`,
    typed: `${landed}_typed`,
    ordered: `${landed}_ordered`,
    checked: `${landed}_checked`,
    written: `${landed}_written`,
    groups: `${landed}_groups`,
  };
}

/** Drops every relation of one landed delivery (tables and views), those that exist. */
export async function dropLanding(connection: DuckDBConnection, tables: LandingTables): Promise<void> {
  const scratch = landingScratch(tables.landed);
  const names = [tables.landed, scratch.checked, scratch.written, scratch.ordered, scratch.typed, scratch.rows, tables.rejected, scratch.groups, scratch.badKeys, scratch.badRows, scratch.records, scratch.lines];
  // The relations of one delivery are all in one catalog: the landing's in-memory one (`catalog.name`), or the default.
  const home = relationParts(tables.landed).catalog;
  const catalog = home === undefined ? "current_database()" : quoteLiteral(home);
  const bare = names.map((name) => relationParts(name).name);
  const list = bare.map(quoteLiteral).join(", ");
  const found = await connection.runAndReadAll(
    `SELECT view_name, 'VIEW' FROM duckdb_views() WHERE NOT internal AND database_name = ${catalog} AND view_name IN (${list}) ` +
      `UNION ALL SELECT table_name, 'TABLE' FROM duckdb_tables() WHERE database_name = ${catalog} AND table_name IN (${list})`,
  );
  // Views first: they read the tables. In the order of `names`, so the landed view goes before the typed one it reads.
  const relations = (found.getRowsJS() as [string, "VIEW" | "TABLE"][]).sort(
    (a, b) => (a[1] === b[1] ? bare.indexOf(a[0]) - bare.indexOf(b[0]) : a[1] === "VIEW" ? -1 : 1),
  );
  await dropIfExists(connection, relations.map(([name, kind]) => [kind, quoteRelation(names[bare.indexOf(name)]!)]));
}

/** Drops these views and tables (names as SQL), those that exist, in the order given: in one call, each a round trip to DuckDB's thread. */
export async function dropIfExists(connection: DuckDBConnection, relations: readonly (readonly ["VIEW" | "TABLE", string])[]): Promise<void> {
  if (relations.length > 0) await connection.run(relations.map(([kind, name]) => `DROP ${kind} IF EXISTS ${name};`).join("\n"));
}
