import { postgresColumnType } from "../../model/column-types.js";
import { LakeswapError } from "../../model/errors.js";
import { quoteLiteral } from "../../model/sql.js";
import type { SinkColumn } from "../sink.js";

/** The PostgreSQL type a layer's column is sent as (`BIGINT` -> `bigint`); an error for a type the sink does not send. */
export function postgresType(column: SinkColumn): string {
  const type = postgresColumnType(column.type);
  if (!type) throw new LakeswapError("INVALID_INPUT", `column '${column.name}' of type ${column.type} cannot be sent to PostgreSQL`);
  return type;
}

/** A PostgreSQL identifier, quoted; names are checked by the config (lowercase letters, digits, '_'). */
export function ident(name: string): string {
  if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new LakeswapError("INVALID_INPUT", `'${name}' cannot be used as a PostgreSQL identifier`);
  return `"${name}"`;
}

/**
 * The first half of the advisory locks lakeswap's writers of one target take, an SQL expression:
 * `hashtext('lakeswap:schema.table')`. Alone, the table's lock (held shared by each partition's transaction); with a
 * second key, a partition's (or a level's of a partitioned target).
 */
export function targetLockKey(schema: string, table: string): string {
  return `hashtext(${quoteLiteral(`lakeswap:${schema}.${table}`)})`;
}

/** The SQLSTATE of a PostgreSQL error, also when the sink's `failure` wrapped it. */
export function sqlState(error: unknown): string | undefined {
  const cause = error instanceof LakeswapError ? error.cause : error;
  const code = (cause as { code?: unknown } | undefined)?.code;
  return typeof code === "string" ? code : undefined;
}
