import type { Catalog } from "../catalog/catalog.js";
import { InvalidInputError } from "../model/errors.js";
import { nameWithRoom } from "../model/sql.js";
import type { TableDefinition } from "../model/table.js";

/** What ends a scratch table's name: `__held_` and 6 hex digits. */
const SCRATCH_SUFFIX = /__held_[0-9a-f]{6}$/;

/** The length of that suffix. */
const SUFFIX_LENGTH = "__held_000000".length;


/**
 * The name of a scratch table over `table`'s staged runs (./commit/staged-reads.ts): `<table>__held_<token>`, the
 * table's name shortened with a hash of it where the whole would pass 128 characters. The suffix is reserved: no
 * user table may end with it (`assertNotScratchName`), so a scratch table never collides with one.
 */
export function scratchTableName(table: string, token: string): string {
  return `${scratchBase(table)}__held_${token}`;
}

/** Whether a catalog table is a scratch table: never one of the lake's tables, so hidden from every listing of them. */
export function isScratchTable(name: string): boolean {
  return SCRATCH_SUFFIX.test(name);
}

/** Whether `name` is a scratch table over `table` (one a sync may have left behind, killed while building from it). */
export function isScratchTableOf(name: string, table: string): boolean {
  return isScratchTable(name) && name.slice(0, -SUFFIX_LENGTH) === scratchBase(table);
}

/** Refuses a user table named like a scratch table. */
export function assertNotScratchName(name: string): void {
  if (isScratchTable(name)) {
    throw new InvalidInputError(`table name '${name}' is reserved: lakeswap names its scratch tables <table>__held_<6 hex digits>; choose another name`);
  }
}

/** The lake's tables: the catalog's, without scratch tables. */
export async function lakeTables(catalog: Pick<Catalog, "listTables">): Promise<TableDefinition[]> {
  return (await catalog.listTables()).filter((table) => !isScratchTable(table.name));
}

function scratchBase(table: string): string {
  return nameWithRoom(table, SUFFIX_LENGTH);
}
