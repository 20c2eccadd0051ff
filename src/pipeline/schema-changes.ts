import type { DatasetConfig } from "../config/pipeline-config.js";
import type { LakeWriter, SchemaRebuild } from "../lake/lake.js";
import { rebuildReadably, type RebuildMove } from "../lake/operations/rebuild-schema.js";
import { InvalidInputError, LakeswapError } from "../model/errors.js";
import { partitionPath } from "../model/partition.js";
import { asDeclared, planSchemaChange, type SchemaChange } from "../model/schema-change.js";
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

/**
 * How the sync changes a declared table the catalog holds: in place, by a rebuild (`--rebuild-schema`), or not at all
 * (undefined); a change neither can make is refused (CONFLICT), as is a rebuild the catalog's readers could not follow.
 */
function judge(ctx: PipelineContext, dataset: DatasetConfig, existing: TableDefinition, wanted: TableDefinition): SchemaChange | undefined {
  const planned = planSchemaChange(existing, wanted, { rebuild: ctx.options.rebuildSchema === true, renames: declaredRenames(dataset, wanted.name) });
  // What the catalog's readers could not read while pointers move is built aside, in a new layout (rebuildReadably).
  const change = planned && rebuildReadably(ctx.lake.parts.catalog, existing, planned);
  if (change?.relayout) {
    const rekeyed = existing.partitionKeys.join(",") !== wanted.partitionKeys.join(",");
    refuseRelayoutOf(dataset, wanted.name, rekeyed);
    // Every partition of a new layout is built before it is switched to: a sync limited to some builds only those.
    if ((ctx.options.partitions ?? []).length > 0) {
      const what = rekeyed ? "changes its partition keys" : "is rebuilt aside (its readers could not read it halfway rebuilt)";
      throw new InvalidInputError(`table '${wanted.name}' ${what}, which builds every partition of it in a new layout: run lakeswap sync --rebuild-schema without --partition`);
    }
  }
  return change;
}

/**
 * Refuses a change of partition keys (../lake/operations/relayout.ts) of a table whose dataset writes it in a way a
 * new layout built from its rows could not carry on: appended partitions (each records the deliveries it holds),
 * sinks (their targets keep their partitioning), a publication held to the dataset's end (the new layout is already
 * switched to whole, or not at all).
 */
function refuseRelayoutOf(dataset: DatasetConfig, table: string, rekeyed: boolean): void {
  const { layer } = layerOf(dataset, table);
  const sinks = layer === "raw" ? (dataset.sinks ?? []) : (dataset.layers.find((l) => l.table === table)?.sinks ?? []);
  const sync = rekeyed ? "the sync that changes the keys" : "the sync that rebuilds it";
  const why =
    layer === "raw" && dataset.write === "append"
      ? "it is written with write: append (each partition records the deliveries appended to it, which a new layout would not)"
      : sinks.length > 0
        ? `layer ${layer} sends it to sinks, whose targets hold the old layout's rows (take the sinks off for ${sync}, then send the layer to new targets: sinks[].table)`
        : dataset.publish === "all_or_nothing"
          ? `its dataset publishes all_or_nothing (a new layout is switched to whole anyway: take publish off for ${sync})`
          : undefined;
  if (why === undefined) return;
  if (rekeyed) {
    throw new LakeswapError("CONFLICT", `table '${table}' cannot change its partition keys: ${why}. Declare it with its partition keys as they are, or drop it (lakeswap drop-table ${table}) and load it again`);
  }
  throw new LakeswapError(
    "CONFLICT",
    `table '${table}' cannot be rebuilt here: its readers could not read it halfway rebuilt, so it would be built aside in a new layout, and ${why}. ` +
      "Add a column of the new type instead (in place), fill it, then drop the old one with --rebuild-schema",
  );
}

/** The layer of a dataset that writes table `name` (`raw`, or a derived layer), with its declared columns. */
function layerOf(dataset: DatasetConfig, name: string): { readonly layer: string; readonly columns: DatasetConfig["columns"] } {
  const layer = dataset.layers.find((l) => l.table === name);
  return name === dataset.table ? { layer: "raw", columns: dataset.columns } : { layer: layer?.name ?? name, columns: layer?.columns ?? [] };
}

/** The columns a dataset declares renamed (`renamed_from:`) in the table `name` it writes: new name to old name. */
function declaredRenames(dataset: DatasetConfig, name: string): Record<string, string> {
  return Object.fromEntries(layerOf(dataset, name).columns.flatMap((c) => (c.renamedFrom !== undefined ? [[c.name, c.renamedFrom]] : [])));
}

/**
 * Whether the sync builds table `name` in a new layout (its partition keys change, or a rebuild its catalog's readers
 * could not read halfway: `judge`), whose partitions are then all new: empty until the sync fills it. False for a
 * change the sync would refuse (it says so where it judges it).
 */
export async function buildsInNewLayout(ctx: PipelineContext, name: string): Promise<boolean> {
  for (const dataset of ctx.config.datasets) {
    const wanted = declaredTables(dataset).find((t) => t.name === name);
    const existing = wanted && (await ctx.lake.parts.catalog.getTable(name));
    if (!wanted || !existing) continue;
    try {
      return judge(ctx, dataset, existing, wanted)?.relayout !== undefined;
    } catch {
      return false;
    }
  }
  return false;
}

/** The definition a declared table will have once this sync has changed it (the catalog's where it is as declared). */
async function upcoming(ctx: PipelineContext, dataset: DatasetConfig, wanted: TableDefinition): Promise<TableDefinition> {
  const existing = await ctx.lake.parts.catalog.getTable(wanted.name);
  return (existing && judge(ctx, dataset, existing, wanted)?.table) ?? asDeclared(existing, wanted);
}

/**
 * The dataset with its columns as its raw table will have them: each marked `added` or `signedAs` as the table records
 * (or will record, once changed), which is how landing reads and signs them. The dataset as it is where the table is
 * new, ingested, or never changed.
 */
export async function asLanded(ctx: PipelineContext, dataset: DatasetConfig): Promise<DatasetConfig> {
  if (dataset.ingested) return dataset;
  const table = await upcoming(ctx, dataset, rawTable(dataset));
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
    if (existing && judge(ctx, dataset, existing, table)) changing.push(table);
    else await ctx.lake.createTable(table, { existing });
  }
  return changing;
}

/** A schema change a sync would make: in place, or by rewriting every partition (`rebuilds`: their paths). */
export interface PlannedSchemaChange {
  readonly table: string;
  readonly changes: readonly string[];
  readonly rebuilds?: readonly string[];
  /** The partition keys change: the table is built aside in a new layout (from `rebuilds`, its partitions now) and switched to. */
  readonly relayout?: true;
}

/** The schema changes a sync of `dataset` would make, per table (a change that cannot be made is refused). */
export async function plannedSchemaChanges(ctx: PipelineContext, dataset: DatasetConfig): Promise<PlannedSchemaChange[]> {
  const planned: PlannedSchemaChange[] = [];
  for (const table of declaredTables(dataset)) {
    const existing = await ctx.lake.parts.catalog.getTable(table.name);
    const change = existing ? judge(ctx, dataset, existing, table) : undefined;
    if (!change || !existing) continue;
    // A rebuild an earlier sync began rewrites the runs from before its mark; a new one, every run.
    const mark = change.rebuild?.finishing ? existing.schemaChangedAt : undefined;
    const stale = async () => (await ctx.lake.parts.catalog.listPointers(existing)).filter((p) => mark === undefined || p.runId < mark).map((p) => partitionPath(p.partition)).sort();
    const rebuilds = change.rebuild || change.relayout ? await stale() : undefined;
    planned.push({ table: table.name, changes: change.changes, ...(rebuilds ? { rebuilds } : {}), ...(change.relayout ? { relayout: true as const } : {}) });
  }
  return planned;
}

/**
 * Changes the schemas of `changing` under the sync's leases, each recorded first. The raw table's columns must then
 * be as a delivery `landed` was read and signed: a table another writer changed meanwhile is a CONFLICT (rerun).
 * Returns the tables whose partition keys change: the sync builds them in their new layouts, which the writer switches
 * to at the end of its work, once the sync found every partition of them built (`refuseIncompleteLayouts`).
 */
export async function changeSchemas(ctx: PipelineContext, writer: LakeWriter, log: SyncLog, changing: readonly TableDefinition[], dataset: DatasetConfig, landed?: DatasetConfig): Promise<string[]> {
  const relaid: string[] = [];
  let changedRaw: TableDefinition | undefined;
  for (const wanted of changing) {
    const { layer } = layerOf(dataset, wanted.name);
    const moves = (list: readonly RebuildMove[]) =>
      list.map((m) => ({ table: wanted.name, layer, partition: m.partition, run: m.runId, ...(m.previousRunId !== undefined ? { previousRun: m.previousRunId } : {}) }));
    const rebuild: SchemaRebuild = {
      allowed: ctx.options.rebuildSchema === true,
      renames: declaredRenames(dataset, wanted.name),
      // A raw table's runs sign as its deliveries do; a layer's keep their chained signatures.
      signatureColumns: layer === "raw" ? dataset.signatureColumns : undefined,
      intend: (list) => log.intend(moves(list)),
      moved: (list) => log.rebuilt(wanted.name, moves(list)),
      refused: () => log.withdrawSchemaChange(wanted.name),
      onProgress: ctx.options.onProgress && ((event) => ctx.options.onProgress?.({ layer: `${layer} (schema rebuild)`, ...event })),
      // A raw table whose keys change is partitioned under them as its deliveries are (columns as landed).
      ...(layer === "raw" ? { repartition: { columns: (landed ?? dataset).columns, partition: dataset.partition, signatureColumns: dataset.signatureColumns } } : {}),
    };
    const record = (change: SchemaChange, previous: TableDefinition) =>
      log.changeSchema({
        table: wanted.name,
        changes: change.changes,
        previous,
        definition: change.table,
        ...(change.rebuild ? { rebuilt: true as const, renames: change.rebuild.renames } : {}),
        ...(change.relayout ? { relayout: true as const } : {}),
      });
    const change = await writer.changeSchema(wanted, record, rebuild);
    if (change?.relayout) relaid.push(wanted.name);
    // A raw table built in a new layout is read as that layout holds it (the catalog's is the old one until the switch).
    if (change && wanted.name === landed?.table) changedRaw = change.table;
  }
  if (landed && !landed.ingested) assertLandedAs(changedRaw ?? (await ctx.lake.table(landed.table)), landed);
  return relaid;
}

/**
 * Refuses to end a sync whose new layouts are not whole: a partition of a table whose keys it changes failed, so the
 * writer must not switch to the layout (the error ends its work; every reader stays on the old layout).
 */
export function refuseIncompleteLayouts(relaid: readonly string[], results: readonly { readonly table: string; readonly partition: string; readonly action: string; readonly error?: string }[]): void {
  const failed = results.filter((r) => relaid.includes(r.table) && r.action === "failed");
  if (failed.length === 0) return;
  const shown = failed.slice(0, 3).map((r) => `${r.table}/${r.partition}${r.error ? ` (${r.error})` : ""}`).join("; ");
  throw new LakeswapError(
    "BUILD_FAILED",
    `the new layout of ${[...new Set(failed.map((r) => r.table))].join(", ")} is not whole: ${failed.length} partition(s) failed (${shown}); ` +
      `nothing was switched, every reader still reads the old layout. Fix the cause and rerun lakeswap sync --rebuild-schema`,
  );
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
