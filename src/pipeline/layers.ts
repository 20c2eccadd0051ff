import { createHash } from "node:crypto";
import type { DatasetConfig, LayerConfig } from "../config/pipeline-config.js";
import type { PartitionState } from "../lake/lake.js";
import { runManifest } from "../lake/operations/partition-states.js";
import { InvalidInputError } from "../model/errors.js";
import { parsePartitionPath, partitionOfValues } from "../model/partition.js";
import { renderSql } from "../model/render-sql.js";
import { keysOfLayer, planChoices, tableOfLayer, tablesWritten, type PipelineContext, type Run } from "./pipeline-context.js";
import { planLayer, type PlannedPartition } from "./plan.js";

/**
 * A dataset's derived layers, in order, each planned against its upstream's signatures as `run` sees them (built by
 * now in a sync, predicted in a plan) and then carried out by `run`. An ingested raw table is read without its
 * lease: the collector only ever adds to it, and what it adds after this read changes its signature, so the next
 * sync builds it.
 */
export async function runLayers(ctx: PipelineContext, dataset: DatasetConfig, run: Run): Promise<void> {
  for (const layer of dataset.layers) {
    const started = Date.now();
    const upstreamTable = tableOfLayer(dataset, layer.from);
    const upstream = await run.upstream(upstreamTable);
    const lookups = await lookupSignatures(layer, (table) => run.states(table));
    const states = await run.states(layer.table);
    const plan = await planDerived(ctx, dataset, layer, upstreamTable, upstream, states, lookups);
    await run.layer(dataset, layer, plan, states, started);
  }
}

/** A derived layer's plan (./plan.ts): its upstream partitions mapped by `inputs.map`, and which input changed. */
async function planDerived(
  ctx: PipelineContext,
  dataset: DatasetConfig,
  layer: LayerConfig,
  upstreamTable: string,
  upstream: ReadonlyMap<string, string | undefined>,
  states: ReadonlyMap<string, PartitionState>,
  lookups: readonly string[],
): Promise<PlannedPartition[]> {
  const fromKeys = keysOfLayer(dataset, layer.from);
  const upstreamPaths = [...upstream.keys()].sort();
  // A layer without partition keys (write: replace) is one unit that every upstream partition feeds.
  const mapped = layer.inputMap.length === 0 ? upstreamPaths.map(() => []) : await mapUpstream(ctx, fromKeys, upstreamPaths, layer.inputMap);
  const plans: PlannedPartition[] = [];
  for (const planned of planLayer({ dataset, layer, upstreamTable, upstream, mapped, states, lookups }, planChoices(ctx.options))) {
    const runId = states.get(planned.partition)?.runId;
    // Which input changed is read from the current run's manifest, only for the partitions that changed.
    const transformChanged = planned.reason === "upstream changed" && !!runId && (await runManifest(ctx.lake, layer.table, planned.partition, runId))?.fingerprint !== layer.fingerprint;
    plans.push(transformChanged ? { ...planned, reason: "transform changed" } : planned);
  }
  return plans;
}

/**
 * Each upstream partition's values under a layer's `inputs.map`, in the map's key order. A map whose every expression
 * is an upstream key (the default, `day: day`) is read off the upstream values: no SQL to check and run for it.
 */
async function mapUpstream(ctx: PipelineContext, fromKeys: readonly string[], upstreamPaths: readonly string[], map: LayerConfig["inputMap"]): Promise<string[][]> {
  const values = upstreamPaths.map((p) => parsePartitionPath(p, fromKeys).values);
  if (!mapRunsSql(fromKeys, map)) return values.map((row) => map.map(({ expression }) => row[fromKeys.indexOf(expression)] as string));
  return ctx.landing.mapPartitions({ fromKeys, values, map });
}

/** Whether an `inputs.map` has an expression that is not one of the upstream keys `fromKeys` (then it is SQL to run). */
function mapRunsSql(fromKeys: readonly string[], map: LayerConfig["inputMap"]): boolean {
  return map.some(({ expression }) => !fromKeys.includes(expression));
}

/**
 * What each derived layer's builds read and write, for `LakeWriter.prepareBuilds`: its upstream, its lookups and its
 * own table. A layer's `inputs.map` expressions run in the first of these instances (they read no table), so they need
 * none of their own: each instance costs 15-60 ms of CPU to start, beside the builds.
 */
export function layerBuilds(dataset: DatasetConfig): string[][] {
  return dataset.layers.map((layer) => [tableOfLayer(dataset, layer.from), ...layer.lookups, layer.table]);
}

/**
 * The whole-table inputs of a layer, each as `table/*=digest` over its partitions' signatures. A partition nobody
 * signed (written by `replace`) counts by its run id: runs are immutable, so a new run is a change.
 */
async function lookupSignatures(layer: LayerConfig, statesOfTable: (table: string) => Promise<Map<string, PartitionState>>): Promise<string[]> {
  const signatures: string[] = [];
  for (const table of layer.lookups) {
    const states = [...(await statesOfTable(table)).values()].filter((state) => state.runId !== "");
    const text = states.map((state) => `${state.partition}=${state.signature ?? `run:${state.runId}`}`).sort().join("\n");
    signatures.push(`${table}/*=${createHash("sha256").update(text).digest("hex")}`);
  }
  return signatures;
}

/**
 * A derived layer's SQL may read only its declared inputs: the layer it is built from and its whole-table inputs
 * (`inputs.tables`). Anything else it names (another lake table, its own table) would be read without entering the
 * signature, so it is refused here, before anything is built.
 */
export async function checkLayerInputs(ctx: PipelineContext, dataset: DatasetConfig): Promise<void> {
  const lakeTables = new Set((await ctx.lake.listTables()).map((t) => t.name.toLowerCase()));
  const written = (name: string): boolean => ctx.config.datasets.some((d) => tablesWritten(d).some((t) => t.toLowerCase() === name));
  for (const layer of dataset.layers) {
    const upstreamTable = tableOfLayer(dataset, layer.from);
    const declared = new Set([upstreamTable, ...layer.lookups].map((t) => t.toLowerCase()));
    const where = `datasets.${dataset.name}.layers.${layer.name} (${layer.sqlPath})`;
    for (const table of await tablesRead(ctx, layer, where)) {
      const name = table.toLowerCase();
      if (declared.has(name)) continue;
      if (name === layer.table.toLowerCase()) {
        throw new InvalidInputError(`${where} reads its own table '${layer.table}': a layer is built from the layers above it (inputs.from), never from itself`);
      }
      throw new InvalidInputError(
        `${where} reads table '${table}', which it does not declare` +
          `${lakeTables.has(name) || written(name) ? "" : " (and which is not a lake table)"}; it may read ${[...new Set([upstreamTable, ...layer.lookups])].join(", ")}. ` +
          `Declare a table every partition reads as inputs.tables: [${table}] (it then enters the layer's signature).`,
      );
    }
    for (const lookup of layer.lookups) {
      const known = lakeTables.has(lookup.toLowerCase()) || ctx.config.datasets.some((d) => tablesWritten(d).includes(lookup));
      if (!known) throw new InvalidInputError(`datasets.${dataset.name}.layers.${layer.name}.inputs.tables: table '${lookup}' does not exist in this lake`);
    }
  }
}

/** The tables a layer's SQL reads (rendered for a placeholder partition); an error names the layer (`where`). */
async function tablesRead(ctx: PipelineContext, layer: LayerConfig, where: string): Promise<string[]> {
  const blank = partitionOfValues(layer.partitionKeys, layer.partitionKeys.map(() => "x"));
  try {
    return (await ctx.landing.tablesRead(renderSql(layer.sql, blank, layer.sqlPath))) ?? [];
  } catch (error) {
    if (error instanceof InvalidInputError) throw new InvalidInputError(`${where}: ${error.message}`);
    throw error;
  }
}
