import { planSchemaChange, type SchemaChange } from "../../model/schema-change.js";
import type { TableDefinition } from "../../model/table.js";
import type { HasLakeParts } from "../parts.js";

/**
 * Changes a table's schema in place (model/schema-change.ts) under its lease: the declaration is judged again against
 * the definition read under the lease (another writer may have changed it meanwhile), and the catalog's definition
 * is written over (Glue: the table's and every partition's columns). Runs already written are not touched: readers
 * match their files by column name. Undefined where the table already is as declared.
 */
export async function changeSchema(lake: HasLakeParts, wanted: TableDefinition, command: string): Promise<SchemaChange | undefined> {
  const parts = lake.parts;
  return parts.withLease(wanted.name, command, async () => {
    const existing = await parts.catalog.getTable(wanted.name);
    const change = existing ? planSchemaChange(existing, wanted) : undefined;
    if (change) await parts.catalog.updateTable(change.table, () => parts.leaseCheck(wanted.name));
    return change;
  });
}
