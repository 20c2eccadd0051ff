import { LakeswapError, TableCreatedMeanwhileError } from "../../model/errors.js";
import { asDeclared, planSchemaChange } from "../../model/schema-change.js";
import { keepIngestLayout, sameDeclaration, tableChange, type TableDefinition } from "../../model/table.js";
import { assertIcebergSupported } from "../commit/iceberg-pointer.js";
import type { HasLakeParts, LakeParts } from "../parts.js";
import { assertNotScratchName } from "../scratch-tables.js";
import { changeSchema } from "./change-schema.js";

/**
 * Declares a table (`Lake.createTable`) on `read`, the caller's own read of it just before (a sync's declared tables,
 * each read once), else on a read of its own. Only a new table is created outside its lease; a declaration that
 * changes an existing one is made under the table's lease, as pointer moves are: columns changed in place
 * (./change-schema.ts), columns added to an ingested table or `iceberg: true` added (./redeclare below; Glue rewrites
 * its partitions' columns too). A table that another writer created since the read is reported by the catalog as
 * TableCreatedMeanwhileError, for the caller to judge the declaration again against it.
 */
export async function declareTable(lake: HasLakeParts & { table(name: string): Promise<TableDefinition> }, wanted: TableDefinition, read?: { readonly existing: TableDefinition | undefined }): Promise<TableDefinition> {
  const parts = lake.parts;
  assertNotScratchName(wanted.name);
  const existing = read ? read.existing : await parts.catalog.getTable(wanted.name);
  // Other columns than the table has: changed in place under its lease where they can be, else refused naming why.
  if (existing && planSchemaChange(existing, wanted)) return (await changeSchema(lake, wanted, `create-table ${wanted.name}`))?.table ?? lake.table(wanted.name);
  const table = declaredAgainst(existing, wanted);
  assertIcebergSupported(parts, table);
  // A catalog's Iceberg table of that name that is not this table's is refused now, not at the first commit.
  if (table.iceberg) await parts.catalog.iceberg?.head(table);
  // Declared as it is: nothing to write (the catalog would read it again to find so).
  if (existing && sameDeclaration(existing, table)) return table;
  if (existing) return parts.withLease(table.name, `create-table ${table.name}`, () => redeclare(parts, wanted));
  await parts.catalog.createTable(table).catch(async (error: unknown) => {
    // Read as absent, and another writer's table appeared since, which the catalog refused this declaration against:
    // judged again as a change of that table (createTable's retry).
    const overtaken = error instanceof LakeswapError && !(error instanceof TableCreatedMeanwhileError) && (await parts.catalog.getTable(table.name));
    throw overtaken ? new TableCreatedMeanwhileError(table.name, parts.store.description) : error;
  });
  return table;
}

/** A declaration of an existing table, under its lease: read again, judged (refused where not a change in place), written. */
async function redeclare(parts: LakeParts, wanted: TableDefinition): Promise<TableDefinition> {
  const existing = await parts.catalog.getTable(wanted.name);
  if (!existing) {
    await parts.catalog.createTable(wanted);
    return wanted;
  }
  const table = declaredAgainst(existing, wanted);
  // Other partition keys: the catalog refuses them, or (Glue) makes a table without partitions again with them.
  if (existing.partitionKeys.join(",") !== table.partitionKeys.join(",")) {
    await parts.catalog.createTable(table);
    return table;
  }
  if (tableChange(existing, table) === "same") return table;
  await parts.catalog.updateTable(table, () => parts.leaseCheck(table.name));
  return table;
}

/** What a declaration makes of the table there is: an ingested one keeps the layout its files were written in. */
function declaredAgainst(existing: TableDefinition | undefined, wanted: TableDefinition): TableDefinition {
  return wanted.ingest ? keepIngestLayout(existing, wanted) : asDeclared(existing, wanted);
}
