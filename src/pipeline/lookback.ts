import type { DatasetConfig, LookbackWindow } from "../config/pipeline-config.js";
import type { FetchedSource } from "../sources/source.js";
import { addDays, assertDay, todayIn } from "../model/day.js";
import { makePartition, parsePartition, partitionPath } from "../model/partition.js";
import { rawSignature } from "../model/signature.js";
import { quoteLiteral } from "../model/sql.js";

/**
 * Lookback windows (`lookback_days`, and every http source): which days a sync takes, how the days an http source
 * returned are landed, and what becomes of the days it returned empty or could not return.
 */

/** The days of a window, oldest first: `asOf` (default today in the window's zone) and the days before it, and the days `--partition` names. */
export function windowDays(window: LookbackWindow, asOf: string | undefined, partitions: readonly string[]): string[] {
  const last = asOf ?? todayIn(window.timezone);
  const days = new Set<string>();
  for (let back = window.lookbackDays; back >= 0; back -= 1) days.add(addDays(last, -back));
  for (const spec of partitions) {
    const named = parsePartition(spec);
    if (named.keys.length !== 1 || named.keys[0] !== window.key) continue;
    days.add(assertDay(named.values[0] as string, `--partition ${spec}`));
  }
  return [...days].sort();
}

/**
 * The dataset as a sync lands what its http source returned: the fetched days' JSONL files, each file's rows in
 * the partition of the day it was asked for. Undefined when not one day could be fetched.
 */
export function fetchedDataset(dataset: DatasetConfig, fetched: FetchedSource): DatasetConfig | undefined {
  const files = fetched.partitions.filter((p): p is typeof p & { file: string } => p.file !== undefined);
  if (files.length === 0) return undefined;
  // Which day a row belongs to is which file it came from: the landing numbers the files from 1.
  const days = `[${files.map((p) => quoteLiteral(p.value)).join(", ")}]`;
  return {
    ...dataset,
    source: { format: "jsonl", path: "", header: true, delimiter: "," },
    partition: [{ key: dataset.window!.key, expression: `(${days})[__file]` }],
    fetchedFiles: files.map((p) => ({ file: p.file, partition: dayPartition(dataset.window!.key, p.value) })),
  };
}

/** The days an http source returned without rows (they are in no landed partition), with the signature of a day without rows. */
export function emptyDays(dataset: DatasetConfig, fetched: FetchedSource | undefined): { partition: string; signature: string }[] {
  const window = dataset.window;
  if (!window || !fetched) return [];
  const signed = dataset.columns.filter((c) => dataset.signatureColumns.includes(c.name));
  // A sum over no rows (docs/signatures.md), as the landing would sign an empty partition.
  const signature = rawSignature(signed, []);
  return fetched.partitions
    .filter((p) => p.file !== undefined && p.rows === 0)
    .map((p) => ({ partition: dayPartition(window.key, p.value), signature }));
}

/** The days an http source could not return: each fails (its current run stays), with the fetch's error. */
export function fetchFailures(
  dataset: DatasetConfig,
  fetched: FetchedSource | undefined,
): { table: string; layer: string; partition: string; action: "failed"; reason: "fetch failed"; seconds: number; error?: string }[] {
  const key = dataset.window?.key;
  if (!fetched || key === undefined) return [];
  return fetched.partitions
    .filter((p) => p.error !== undefined)
    .map((p) => ({ table: dataset.table, layer: "raw", partition: dayPartition(key, p.value), action: "failed", reason: "fetch failed", seconds: 0, error: p.error }));
}

/** The partition path of one day of a window (`date=2026-11-01`). */
function dayPartition(key: string, day: string): string {
  return partitionPath(makePartition([[key, day]]));
}
