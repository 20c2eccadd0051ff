import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { InvalidInputError } from "../../model/errors.js";
import { assertPartitionKey } from "../../model/partition.js";
import { transformFingerprint } from "../../model/signature.js";
import { didYouMean } from "../config-messages.js";
import type { DatasetInput } from "../pipeline-schema.js";
import type { LayerConfig } from "./dataset-config.js";
import { resolveAudits } from "./resolve-audits.js";
import { resolveColumns, wrapAt } from "./resolve-columns.js";
import { resolveSinks } from "./resolve-sinks.js";

type LayerInput = DatasetInput["layers"][number];

/** A dataset's derived layers in build order, each built from `raw` (with `rawKeys`) or an earlier layer. */
export function resolveLayers(name: string, dataset: DatasetInput, dir: string, rawKeys: readonly string[]): LayerConfig[] {
  const layerNames = ["raw"];
  const keysByLayer = new Map<string, readonly string[]>([["raw", rawKeys]]);
  return dataset.layers.map((layer, index): LayerConfig => {
    const where = `datasets.${name}.layers[${index}]`;
    if (layerNames.includes(layer.name)) throw new InvalidInputError(`${where}.name: layer '${layer.name}' is declared twice (or is 'raw')`);
    const { from, keys, map } = layerKeys(where, layer, layerNames, keysByLayer);
    const sqlPath = path.resolve(dir, layer.sql);
    if (!existsSync(sqlPath)) throw new InvalidInputError(`${where}.sql: file '${layer.sql}' does not exist (looked at ${sqlPath})`);
    const sqlBytes = readFileSync(sqlPath);
    const layerColumns = resolveColumns(layer.columns, `${where}.columns`);
    for (const key of keys) {
      if (layerColumns.some((c) => c.name === key)) {
        throw new InvalidInputError(`${where}.columns.${key}: '${key}' is a partition key of this layer; its value comes from the path, so leave it out of the columns`);
      }
    }
    layerNames.push(layer.name);
    keysByLayer.set(layer.name, keys);
    return {
      name: layer.name,
      table: layer.table ?? `${name}_${layer.name}`,
      sqlPath,
      sql: sqlBytes.toString("utf8"),
      fingerprint: transformFingerprint(sqlBytes),
      columns: layerColumns,
      partitionKeys: keys,
      from,
      inputMap: keys.map((key) => ({ key, expression: map[key] as string })),
      lookups: [...new Set(layer.inputs?.tables ?? [])],
      compression: layer.compression,
      iceberg: layer.iceberg,
      icebergTable: icebergTableOf(layer, where),
      sinks: resolveSinks(layer.sinks, [...layerColumns, ...keys.map((key) => ({ name: key, type: "VARCHAR" }))], `${where}.sinks`, undefined),
      audits: resolveAudits(layer.audits, layerColumns, keys, where),
    };
  });
}

/** The layer it is built from, its partition keys, and each key's expression over the upstream keys, checked. */
function layerKeys(
  where: string,
  layer: LayerInput,
  layerNames: readonly string[],
  keysByLayer: ReadonlyMap<string, readonly string[]>,
): { from: string; keys: readonly string[]; map: Record<string, string> } {
  if (layer.write === "append" || layer.write === "upsert") {
    throw new InvalidInputError(
      `${where}.write: '${layer.write}' applies to a dataset's raw table, where deliveries arrive; a derived layer is rebuilt from its inputs ` +
        `(partition_replace, or replace for a whole table), so that a rerun gives the same rows. Declare write: ${layer.write} on the dataset`,
    );
  }
  if (layer.write === "replace" && (layer.partition_keys?.length || layer.inputs?.map)) {
    throw new InvalidInputError(`${where}: write: replace builds the whole table as one unit from every upstream partition: remove partition_keys and inputs.map`);
  }
  const from = layer.inputs?.from ?? layerNames.at(-1)!;
  const fromKeys = keysByLayer.get(from);
  if (!fromKeys) throw new InvalidInputError(`${where}.inputs.from: no earlier layer '${from}'${didYouMean(from, layerNames)}`);
  const keys = layer.write === "replace" ? [] : (layer.partition_keys ?? (layer.inputs?.map ? Object.keys(layer.inputs.map) : fromKeys));
  if (keys.length === 0 && layer.write !== "replace") {
    throw new InvalidInputError(`${where}.partition_keys: the layer it is built from ('${from}') has no partition keys; declare partition_keys with inputs.map, or write: replace (the whole table as one unit)`);
  }
  const map = layer.inputs?.map ?? Object.fromEntries(keys.map((key) => [key, key]));
  const mapped = Object.keys(map);
  if (mapped.length !== keys.length || keys.some((k) => !mapped.includes(k))) {
    throw new InvalidInputError(`${where}.inputs.map: map each partition key (${keys.join(", ")}) to an expression over the upstream keys (${fromKeys.join(", ")})`);
  }
  for (const key of keys) wrapAt(`${where}.partition_keys`, () => assertPartitionKey(key));
  return { from, keys, map };
}

/** `iceberg_table`, which names the Iceberg table of a table published as Iceberg: without `iceberg: true` it is a mistake. */
export function icebergTableOf(declared: { readonly iceberg?: boolean; readonly iceberg_table?: string }, at: string): string | undefined {
  if (declared.iceberg_table !== undefined && !declared.iceberg) {
    throw new InvalidInputError(`${at}.iceberg_table: '${declared.iceberg_table}' names the Iceberg table of a table published as Iceberg; add iceberg: true, or leave it out`);
  }
  return declared.iceberg_table;
}
