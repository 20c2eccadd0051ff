import type * as DuckDb from "@duckdb/node-api";

/**
 * DuckDB's Node module, loaded when first needed: loading its native library
 * takes a quarter of a second, which a command that never queries (a resend of
 * a known delivery, `lakeswap history`) should not pay.
 */
let loaded: Promise<typeof DuckDb> | undefined;
let ready = false;

export function duckdb(): Promise<typeof DuckDb> {
  loaded ??= import("@duckdb/node-api").then((module) => {
    ready = true;
    return module;
  });
  return loaded;
}

/** Whether this process has loaded DuckDB's module already (through `duckdb()`): using it then costs no load. */
export function duckdbLoaded(): boolean {
  return ready;
}
