import type { DatasetConfig } from "../config/pipeline-config.js";
import type { LakeWriter } from "../lake/lake.js";
import { LakeswapError } from "../model/errors.js";
import { asDeclared, planSchemaChange } from "../model/schema-change.js";
import type { TableDefinition } from "../model/table.js";
import { declaredTables, rawTable } from "./land.js";
import type { PipelineContext } from "./pipeline-context.js";
import type { SyncLog } from "./sync-log.js";

/**
 * A sync's schema changes in place (model/schema-change.ts, docs/lake.md "Schema changes"). A dataset whose declared
 * columns differ from a table's is landed as the table will be once changed (a delivery exported before a column was
 * added may lack it; a widened column keeps its signature), and the change itself is made under the sync's leases,
 * recorded in the sync's record before the catalog is written, so that `rollback --sync` restores the definition.
 */

/** The definition a declared table will have once this sync has changed it in place (the catalog's where it is as declared). */
async function upcoming(ctx: PipelineContext, wanted: TableDefinition): Promise<TableDefinition> {
  const existing = await ctx.lake.parts.catalog.getTable(wanted.name);
  return (existing && planSchemaChange(existing, wanted)?.table) ?? asDeclared(existing, wanted);
}

/**
 * The dataset with its columns as its raw table will have them: each marked `added` or `signedAs` as the table records
 * (or will record, once changed), which is how landing reads and signs them. The dataset as it is where the table is
 * new, ingested, or never changed.
 */
export async function asLanded(ctx: PipelineContext, dataset: DatasetConfig): Promise<DatasetConfig> {
  if (dataset.ingested) return dataset;
  const table = await upcoming(ctx, rawTable(dataset));
  if (!table.columns.some((c) => c.added || c.signedAs)) return dataset;
  const columns = dataset.columns.map((c) => {
    const column = table.columns.find((t) => t.name === c.name);
    return { ...c, ...(column?.added ? { added: true as const } : {}), ...(column?.signedAs ? { signedAs: column.signedAs } : {}) };
  });
  return { ...dataset, columns };
}

/**
 * Creates the tables a dataset's sync writes that do not exist yet (an existing one is checked against its
 * declaration), and returns the declarations of those whose schema changes in place: the sync changes them under its
 * leases (`changeSchemas`). A change that cannot be made in place is refused here, before anything is written.
 */
export async function createTables(ctx: PipelineContext, dataset: DatasetConfig): Promise<TableDefinition[]> {
  const changing: TableDefinition[] = [];
  for (const table of declaredTables(dataset)) {
    const existing = await ctx.lake.parts.catalog.getTable(table.name);
    if (existing && planSchemaChange(existing, table)) changing.push(table);
    else await ctx.lake.createTable(table);
  }
  return changing;
}

/** The schema changes a sync of `dataset` would make in place, per table (a change that cannot be made in place is refused). */
export async function plannedSchemaChanges(ctx: PipelineContext, dataset: DatasetConfig): Promise<{ readonly table: string; readonly changes: readonly string[] }[]> {
  const planned = [];
  for (const table of declaredTables(dataset)) {
    const existing = await ctx.lake.parts.catalog.getTable(table.name);
    const change = existing ? planSchemaChange(existing, table) : undefined;
    if (change) planned.push({ table: table.name, changes: change.changes });
  }
  return planned;
}

/**
 * Changes the schemas of `changing` under the sync's leases, each recorded first. The raw table's columns must then
 * be as a delivery `landed` was read and signed: a table another writer changed meanwhile is a CONFLICT (rerun).
 */
export async function changeSchemas(ctx: PipelineContext, writer: LakeWriter, log: SyncLog, changing: readonly TableDefinition[], landed?: DatasetConfig): Promise<void> {
  for (const wanted of changing) {
    await writer.changeSchema(wanted, (change, previous) => log.changeSchema({ table: wanted.name, changes: change.changes, previous, definition: change.table }));
  }
  if (landed && !landed.ingested) assertLandedAs(await ctx.lake.table(landed.table), landed);
}

/** Refuses a raw table whose columns are no longer as the delivery was landed: another writer changed its schema meanwhile. */
function assertLandedAs(table: TableDefinition, landed: DatasetConfig): void {
  const signing = (columns: readonly { name: string; added?: true; signedAs?: string }[]) =>
    JSON.stringify(columns.map((c) => [c.name, c.added === true, c.signedAs ?? null]).sort());
  const declared = table.columns.filter((c) => landed.columns.some((l) => l.name === c.name));
  if (signing(declared) !== signing(landed.columns)) {
    throw new LakeswapError("CONFLICT", `table '${table.name}' changed its schema while this sync landed its delivery (another writer changed it); rerun the sync`);
  }
}
