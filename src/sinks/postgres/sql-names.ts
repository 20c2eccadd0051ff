import { postgresColumnType } from "../../model/column-types.js";
import { LakeswapError } from "../../model/errors.js";
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
