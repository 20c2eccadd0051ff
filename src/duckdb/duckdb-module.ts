import type * as DuckDb from "@duckdb/node-api";

/**
 * DuckDB's Node module, loaded when first needed: loading its native library
 * takes a quarter of a second, which a command that never queries (a resend of
 * a known delivery, `lakeswap history`) should not pay.
 */
let loaded: Promise<typeof DuckDb> | undefined;

export function duckdb(): Promise<typeof DuckDb> {
  loaded ??= import("@duckdb/node-api");
  return loaded;
}
