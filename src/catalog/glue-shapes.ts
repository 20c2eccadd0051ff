// Glue's shapes as lakeswap reads them: a table's stored definition, per-entry errors of batch calls, column lists.
import type { Column, ErrorDetail, Table as GlueTable } from "@aws-sdk/client-glue";
import { LakeswapError } from "../model/errors.js";
import { parseTableDefinition, type TableDefinition } from "../model/table.js";

/** The table definition lakeswap stored with a Glue table, or undefined for tables it did not create. */
export function definitionOf(table: GlueTable): TableDefinition | undefined {
  const stored = table.Parameters?.["lakeswap.definition"];
  if (!stored) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(stored);
  } catch {
    throw new LakeswapError("STORE_ERROR", `Glue table ${table.Name} has a lakeswap.definition parameter that is not JSON; restore it (lakeswap create-table writes it) or drop the table`);
  }
  return parseTableDefinition(value, `lakeswap.definition of Glue table ${table.Name}`);
}

function sameValues(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}

/** The items whose entries Glue reported as failed, each with its reason (an entry is named by its partition values). */
export function entryErrors<T>(items: readonly T[], valuesOf: (item: T) => readonly string[], errors: readonly { values?: readonly string[]; detail?: ErrorDetail }[]): { item: T; detail?: ErrorDetail }[] {
  return errors.flatMap((error) => {
    const item = items.find((i) => sameValues(valuesOf(i), error.values ?? []));
    return item === undefined ? [] : [{ item, detail: error.detail }];
  });
}

/** Whether two column lists are the same names and types, in the same order. */
export function sameColumns(a: readonly Column[], b: readonly Column[]): boolean {
  return sameValues(a.map((c) => `${c.Name} ${c.Type}`), b.map((c) => `${c.Name} ${c.Type}`));
}
