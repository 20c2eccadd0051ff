import { printable } from "../../model/sql.js";
import type { LandColumn } from "./landing-sql.js";

/**
 * The name a column is matched by in the delivery's files, whatever the case they write it in: its `field`
 * (`source.fields`), else its own name.
 */
export function fieldKey(column: LandColumn): string {
  return (column.field ?? column.name).toLowerCase();
}

/** The columns, as a message names what the files lack: a mapped column by its field, and the column it is read into. */
export function namedFields(columns: readonly LandColumn[]): string {
  return columns.map((c) => (c.field === undefined ? c.name : `'${printable(c.field, 80)}' (column ${c.name})`)).join(", ");
}

/**
 * A hint for declared columns a file lacks, none of them mapped: the file's names that read as a column once lowercased,
 * with each run of other characters as '_' (`Airport Name` or `airport-name` for airport_name), as `source.fields`
 * would map them. Empty where there are none.
 */
export function fieldsHint(missing: readonly LandColumn[], names: readonly string[]): string {
  const pairs = missing.flatMap((column) => {
    if (column.field !== undefined) return [];
    const like = names.find((name) => name.trim().toLowerCase().replace(/[^a-z0-9]+/g, "_").replace(/^_+|_+$/g, "") === column.name);
    return like === undefined ? [] : [`${column.name}: ${JSON.stringify(like.trim())}`];
  });
  if (pairs.length === 0) return "";
  return ` Where the file names a column otherwise, read it from that name with source.fields, e.g. source.fields: {${printable(pairs.join(", "), 300)}}.`;
}
