import path from "node:path";
import { didYouMean, type DatasetConfig, type PipelineConfig } from "../config/pipeline-config.js";
import { InvalidInputError } from "../model/errors.js";
import { orderPartition, parsePartition, partitionPath, type Partition } from "../model/partition.js";
import { printable } from "../model/sql.js";

/**
 * Checks `--partition` filters of sync and plan against the pipeline's tables: each must give exactly the
 * partition keys of at least one table, or the command stops (exit 2) naming the keys there are, instead
 * of syncing everything because no table matched a misspelled key. A dataset written by upsert cannot be
 * limited at all.
 */
export function checkPartitionFilters(config: PipelineConfig, specs: readonly string[] | undefined): void {
  const keySets = new Map<string, string[]>();
  for (const dataset of config.datasets) {
    const tables: [string, readonly string[]][] = [[dataset.table, dataset.partition.map((p) => p.key)], ...dataset.layers.map((l): [string, readonly string[]] => [l.table, l.partitionKeys])];
    for (const [table, keys] of tables) {
      const label = keys.join(",");
      keySets.set(label, [...(keySets.get(label) ?? []), table]);
    }
  }
  const knownKeys = [...new Set([...keySets.keys()].flatMap((label) => label.split(",")))];
  const known = [...keySets].map(([label, tables]) => `${label} (${tables.join(", ")})`).join("; ");
  for (const spec of specs ?? []) {
    const partition = parsePartition(spec);
    const unknown = partition.keys.filter((key) => !knownKeys.includes(key));
    if (unknown.length > 0) {
      throw new InvalidInputError(
        `--partition '${printable(spec)}': ${unknown.map((key) => `'${key}'${didYouMean(key, knownKeys)}`).join(", ")} is not a partition key of any table of ${path.basename(config.file)}; the keys are: ${known}`,
      );
    }
    const matches = [...keySets.keys()].some((label) => {
      const keys = label.split(",");
      return keys.length === partition.keys.length && keys.every((key) => partition.keys.includes(key));
    });
    if (!matches) {
      throw new InvalidInputError(`--partition '${printable(spec)}' gives keys ${partition.keys.join(",")}, which no table of ${path.basename(config.file)} has all of, alone; give every key of one table: ${known}`);
    }
  }
  const upsert = config.datasets.find((d) => d.upsert);
  if (upsert && (specs ?? []).length > 0) {
    throw new InvalidInputError(
      `--partition cannot limit a sync of datasets.${upsert.name}, which writes by upsert: a key may move between partitions, and its old partition must change in the same sync. Sync it whole`,
    );
  }
}

/**
 * Whether `--partition` (`wanted`) lets a partition of a table with `keys` through. A dataset with a lookback
 * window takes the named days in addition to its window (they were fetched or kept for that), so its layers are
 * not limited by them.
 */
export function partitionSelected(wanted: readonly string[] | undefined, partition: Partition, keys: readonly string[], dataset?: DatasetConfig): boolean {
  if (dataset?.window) return true;
  if (!wanted || wanted.length === 0) return true;
  const sameKeys = wanted.map((spec) => parsePartition(spec)).filter((p) => [...p.keys].sort().join(",") === [...keys].sort().join(","));
  if (sameKeys.length === 0) return true;
  const path = partitionPath(partition);
  return sameKeys.some((p) => partitionPath(orderPartition(p, keys)) === path);
}
