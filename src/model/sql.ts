import { createHash } from "node:crypto";
import { InvalidInputError } from "./errors.js";

const IDENTIFIER = /^[a-z][a-z0-9_]{0,127}$/;

/**
 * Checks a table, column or partition key name: lowercase letter first, then
 * lowercase letters, digits or '_' (the names Glue and Hive accept unchanged).
 */
export function assertIdentifier(kind: string, name: string): string {
  if (!IDENTIFIER.test(name)) {
    throw new InvalidInputError(
      `${kind} '${printable(name)}' is not allowed: use a lowercase letter first, then lowercase letters, digits or '_' (at most 128 characters)`,
    );
  }
  return name;
}

/**
 * Checks a table name given by a user (a command's argument, a library call, a config key)
 * before it reaches a path, a store key or SQL: the identifier rule above, so
 * `../../evil/victim`, `t/../x` and `orders;drop` are refused with exit 2.
 */
export function assertTableName(name: string): string {
  if (typeof name !== "string") throw new InvalidInputError(`table name ${String(name)} is not a name: use a lowercase identifier such as orders`);
  if (!IDENTIFIER.test(name)) {
    throw new InvalidInputError(
      `table name '${printable(name)}' is not allowed: use a lowercase letter first, then lowercase letters, digits or '_' (at most 128 characters), for example orders_stage`,
    );
  }
  return name;
}

/** An identifier quoted for SQL; the name must already be a checked identifier. */
export function quoteIdentifier(name: string): string {
  if (!IDENTIFIER.test(name) && !/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) {
    throw new InvalidInputError(`'${printable(name)}' cannot be used as a SQL identifier`);
  }
  return `"${name}"`;
}

/** A relation's name, bare or qualified by its catalog (`catalog.name`), as its parts. */
export function relationParts(relation: string): { readonly catalog?: string; readonly name: string } {
  const dot = relation.indexOf(".");
  return dot < 0 ? { name: relation } : { catalog: relation.slice(0, dot), name: relation.slice(dot + 1) };
}

/** A relation's name, bare or qualified by its catalog (`catalog.name`), quoted part by part; each part must be an identifier. */
export function quoteRelation(relation: string): string {
  const { catalog, name } = relationParts(relation);
  return catalog === undefined ? quoteIdentifier(name) : `${quoteIdentifier(catalog)}.${quoteIdentifier(name)}`;
}

/** A SQL string literal: single quotes doubled, NUL refused. */
export function quoteLiteral(value: string): string {
  if (value.includes("\0")) throw new InvalidInputError("a SQL string may not contain a NUL character");
  return `'${value.replaceAll("'", "''")}'`;
}

/**
 * A file's path as a SQL literal for DuckDB's readers (read_csv, read_parquet, parquet_schema, ...), which take a
 * path holding `*`, `?` or `[` as a glob: `a[1].csv` would read `a1.csv`, `b*.csv` every `b…csv` of the folder. Each
 * such character is written as a one-character class (`[[]`, `[*]`, `[?]`), which matches only itself; the path
 * DuckDB reports for the file (its `filename` column) is the file's own.
 */
export function quoteFilePath(path: string): string {
  return quoteLiteral(path.replace(/[[*?]/g, (character) => `[${character}]`));
}

/** A value made safe to quote in a message: control characters shown as escapes, long values cut. */
export function printable(value: string, max = 80): string {
  // eslint-disable-next-line no-control-regex
  const shown = value.replace(/[\u0000-\u001f\u007f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}`);
  return shown.length > max ? `${shown.slice(0, max)}…` : shown;
}

/**
 * A name that leaves `room` characters of an identifier (at most 128) for a suffix: `name` itself where it fits, else
 * shortened and ended with a hash of the whole, so two long names alike at the start never give the same one.
 */
export function nameWithRoom(name: string, room: number): string {
  const length = 128 - room;
  if (name.length <= length) return name;
  const hash = createHash("sha256").update(name).digest("hex").slice(0, 8);
  return `${name.slice(0, length - hash.length - 1)}_${hash}`;
}
