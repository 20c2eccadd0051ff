import path from "node:path";
import { InvalidInputError } from "../../model/errors.js";
import { assertPartitionKey } from "../../model/partition.js";
import { printable } from "../../model/sql.js";
import type { HttpSource } from "../../sources/source.js";
import { assertHttpSourceSpec } from "../../sources/http-source-spec.js";
import { parseDuration } from "../../model/duration.js";
import type { IngestPipelineConfig, PipelineColumn } from "../ingest-config.js";
import { didYouMean } from "../config-messages.js";
import type { DatasetInput } from "../pipeline-schema.js";
import type { DatasetConfig, LookbackWindow, UpsertConfig } from "./dataset-config.js";
import { resolveAudits } from "./resolve-audits.js";
import { resolveColumns, wrapAt } from "./resolve-columns.js";
import { resolveFields } from "./resolve-fields.js";
import { icebergTableOf, resolveLayers } from "./resolve-layers.js";
import { resolveSinks } from "./resolve-sinks.js";

/** A dataset of `lakeswap.yaml`, checked and resolved: its source, raw table, signature, write mode and layers (paths against `dir`). */
export function resolveDataset(name: string, dataset: DatasetInput, dir: string, pipelines: readonly IngestPipelineConfig[]): DatasetConfig {
  const at = `datasets.${name}`;
  const ingested = dataset.source.ingest !== undefined ? ingestedSource(at, dataset, pipelines) : undefined;
  const http = dataset.source.http !== undefined ? httpSource(at, dataset) : undefined;
  if (!ingested && !http && (dataset.source.format === undefined || dataset.source.path === undefined)) {
    throw new InvalidInputError(
      `${at}.source: give format and path (the delivery's files), http: {url: ...} (a JSON API asked one day at a time), or ingest: <pipeline>.<namespace> (events collected by lakeswap serve)`,
    );
  }
  if (!ingested && dataset.columns === undefined) throw new InvalidInputError(`${at}.columns: declare the delivery's columns, e.g. columns: {order_id: BIGINT, order_ts: TIMESTAMP}`);
  const columns = ingested ? ingested.columns : resolveFields(resolveColumns(dataset.columns ?? {}, `${at}.columns`), dataset.source.fields, { format: dataset.source.format ?? "jsonl", header: dataset.source.header }, `${at}.source.fields`, didYouMean);
  const names = columns.map((c) => c.name);
  const partition = rawPartition(at, dataset, names, ingested?.partition, http?.key);
  const window = lookbackWindow(at, dataset, partition.map((p) => p.key), http?.key);
  const signatureColumns = resolveSignatureColumns(at, dataset, names);
  const upsert = resolveUpsert(dataset, columns, at);
  const layers = resolveLayers(name, dataset, dir, partition.map((p) => p.key));
  return {
    name,
    // Relative to the config file; resolved here, so core never resolves paths. An ingested dataset reads no files.
    source: {
      format: dataset.source.format ?? "jsonl",
      path: dataset.source.path !== undefined ? path.resolve(dir, dataset.source.path) : "",
      header: dataset.source.header,
      delimiter: dataset.source.delimiter,
    },
    ...(ingested ? { ingested: { pipeline: ingested.pipeline, namespace: ingested.namespace } } : {}),
    ...(http ? { http: http.source } : {}),
    ...(window ? { window } : {}),
    table: ingested?.namespace ?? dataset.table ?? `${name}_raw`,
    columns,
    partition,
    signatureColumns,
    deadLetter: dataset.dead_letter,
    compression: dataset.compression,
    iceberg: dataset.iceberg,
    icebergTable: icebergTableOf(dataset, at),
    write: dataset.write,
    upsert,
    layers,
    // The raw layer of an upsert dataset carries its delete flag: a soft delete in the target sets it true.
    sinks: resolveSinks(dataset.sinks, [...columns, ...partition.map((p) => ({ name: p.key, type: "VARCHAR" }))], `${at}.sinks`, upsert?.deleteFlag),
    audits: rawAudits(at, dataset, columns, partition.map((p) => p.key), ingested !== undefined),
    publish: dataset.publish,
  };
}

/** The raw table's audits; an ingested table has no staged runs to audit (the collector adds files as they land). */
function rawAudits(at: string, dataset: DatasetInput, columns: readonly PipelineColumn[], keys: readonly string[], ingested: boolean): DatasetConfig["audits"] {
  if (ingested && dataset.audits.length > 0) {
    throw new InvalidInputError(`${at}.audits: an ingested raw table is filled event by event, never staged and swapped, so it cannot be audited; declare the audits on its first layer`);
  }
  return resolveAudits(dataset.audits, columns, keys, at);
}

/** The raw table's partition keys and expressions, checked against the write mode and the columns. */
function rawPartition(
  at: string,
  dataset: DatasetInput,
  names: readonly string[],
  ingestedPartition: readonly { key: string; expression: string }[] | undefined,
  httpKey: string | undefined,
): { key: string; expression: string }[] {
  // An http source's one partition key is its contract key, whose value is the day asked for: the sync fills in
  // which file holds which day (the expression here is never evaluated).
  const partition = ingestedPartition
    ? [...ingestedPartition]
    : httpKey !== undefined
      ? [{ key: httpKey, expression: "NULL" }]
      : Object.entries(dataset.partition).map(([key, expression]) => ({ key, expression }));
  if (partition.length === 0 && dataset.write === "partition_replace") {
    throw new InvalidInputError(
      `${at}.partition: declare at least one partition key, e.g. day: strftime(order_ts, '%Y-%m-%d'); or, for a table that is replaced as a whole, write: replace (without partition)`,
    );
  }
  if (partition.length > 0 && dataset.write === "replace") {
    throw new InvalidInputError(`${at}.partition: write: replace makes the whole table one unit, replaced by each delivery: remove partition (or use write: partition_replace to replace the delivery's partitions)`);
  }
  for (const { key } of partition) {
    wrapAt(`${at}.partition.${key.slice(0, 40)}`, () => assertPartitionKey(key));
    if (names.includes(key)) throw new InvalidInputError(`${at}.partition.${key}: '${key}' is also a column; a partition key's value comes from the path, so name it differently`);
  }
  return partition;
}

/** The columns the raw signature covers (`signature.columns`, or every column but `signature.ignore`). */
function resolveSignatureColumns(at: string, dataset: DatasetInput, names: readonly string[]): string[] {
  const signature = dataset.signature ?? {};
  if (signature.columns && signature.ignore) {
    throw new InvalidInputError(`${at}.signature: give either columns or ignore, not both`);
  }
  for (const [key, list] of [["columns", signature.columns], ["ignore", signature.ignore]] as const) {
    for (const column of list ?? []) {
      if (!names.includes(column)) throw new InvalidInputError(`${at}.signature.${key}: unknown column '${column}'${didYouMean(column, names)}`);
    }
  }
  const signatureColumns = signature.columns ? [...signature.columns] : names.filter((n) => !(signature.ignore ?? []).includes(n));
  if (signatureColumns.length === 0) throw new InvalidInputError(`${at}.signature: it leaves no column to sign`);
  return signatureColumns;
}

/**
 * `source: {ingest: <pipeline>.<namespace>}`: the namespace's columns (and the extra column that keeps unknown fields)
 * and time bucketing are the raw layer's; what only a file delivery has (format, path, columns, partition, a write
 * mode, dead letters) is refused, naming where it is declared instead.
 */
function ingestedSource(at: string, dataset: DatasetInput, pipelines: readonly IngestPipelineConfig[]): {
  pipeline: string;
  namespace: string;
  columns: PipelineColumn[];
  partition: { key: string; expression: string }[];
} {
  const [pipelineName, namespaceName] = (dataset.source.ingest as string).split(".") as [string, string];
  const pipeline = pipelines.find((p) => p.name === pipelineName);
  if (!pipeline) {
    const known = pipelines.map((p) => p.name);
    throw new InvalidInputError(`${at}.source.ingest: no pipeline '${pipelineName}'${didYouMean(pipelineName, known)}; pipelines: ${known.join(", ") || "none (declare pipelines.<name>)"}`);
  }
  const ns = pipeline.namespaces.find((n) => n.name === namespaceName);
  if (!ns) {
    const known = pipeline.namespaces.map((n) => n.name);
    throw new InvalidInputError(`${at}.source.ingest: pipeline '${pipelineName}' has no namespace '${namespaceName}'${didYouMean(namespaceName, known)}; its namespaces: ${known.join(", ")}`);
  }
  const fileOnly: [string, boolean][] = [
    ["source.format", dataset.source.format !== undefined],
    ["source.path", dataset.source.path !== undefined],
    ["source.fields", dataset.source.fields !== undefined],
    ["columns", dataset.columns !== undefined],
    ["partition", Object.keys(dataset.partition).length > 0],
    ["dead_letter", dataset.dead_letter !== undefined],
    ["signature", dataset.signature !== undefined],
  ];
  for (const [key, given] of fileOnly) {
    if (given) throw new InvalidInputError(`${at}.${key}: an ingested dataset takes its columns, partitions and dead letters from pipelines.${pipelineName}.namespaces.${namespaceName}: remove ${key}`);
  }
  if (dataset.iceberg) throw new InvalidInputError(`${at}.iceberg: an ingested table cannot be published as Iceberg yet; remove iceberg (its layers may set iceberg: true)`);
  if (dataset.write !== "partition_replace") throw new InvalidInputError(`${at}.write: an ingested table is appended to by the collector; remove write (its layers are built with partition_replace)`);
  if (dataset.table !== undefined && dataset.table !== ns.name) throw new InvalidInputError(`${at}.table: the raw table of an ingested dataset is the namespace's table, '${ns.name}': remove table`);
  const columns = [...ns.columns];
  if (ns.unknownFields === "keep") columns.push({ name: ns.extraColumn, type: "VARCHAR", nullable: true });
  return { pipeline: pipelineName, namespace: namespaceName, columns, partition: ns.time.partition.map((p) => ({ ...p })) };
}

/** `source.http`, checked: what only a file delivery has is refused, and the contract key is the one partition key. */
function httpSource(at: string, dataset: DatasetInput): { source: HttpSource; key: string } {
  const http = dataset.source.http!;
  for (const [key, given] of [["format", dataset.source.format], ["path", dataset.source.path], ["ingest", dataset.source.ingest]] as const) {
    if (given !== undefined) throw new InvalidInputError(`${at}.source.${key}: an http source is fetched, not read from files: remove ${key} (or http)`);
  }
  if (dataset.source.fields !== undefined) {
    throw new InvalidInputError(`${at}.source.fields: an http source reads its columns by source.http.fields (a path inside each row): move the names there`);
  }
  const key = dataset.source.contract ?? "date";
  if (Object.keys(dataset.partition).length > 0) {
    throw new InvalidInputError(
      `${at}.partition: an http source is partitioned by its contract key, '${key}', whose value is the day it was asked for: remove partition (name the key with source.contract)`,
    );
  }
  if (dataset.write !== "partition_replace") {
    throw new InvalidInputError(`${at}.write: an http source replaces each day it fetches (partition_replace); remove write: ${dataset.write}`);
  }
  if (dataset.source.replace_partition === false) {
    throw new InvalidInputError(
      `${at}.source.replace_partition: an http source always replaces the days it fetches (a new run swapped in, never appended twice): remove replace_partition: false`,
    );
  }
  if (!/^https?:\/\//i.test(http.url)) throw new InvalidInputError(`${at}.source.http.url: '${printable(http.url, 200)}' is not an http:// or https:// URL`);
  const placeholders = [...http.url.matchAll(/\{\{\s*([^}]*?)\s*\}\}/g)].map((m) => m[1] ?? "");
  const unknown = placeholders.find((name) => name !== key);
  if (unknown !== undefined) {
    throw new InvalidInputError(`${at}.source.http.url: unknown placeholder {{ ${printable(unknown, 40)} }}; the URL takes {{ ${key} }} (the day asked for, YYYY-MM-DD)`);
  }
  if (placeholders.length === 0) {
    throw new InvalidInputError(`${at}.source.http.url: the URL does not say which day to return: put {{ ${key} }} where the day goes, e.g. ?date={{ ${key} }}`);
  }
  const pagination = http.pagination;
  const source: HttpSource = {
    concurrency: http.concurrency,
    spec: {
      url: http.url,
      headers: http.headers,
      rows: http.rows,
      fields: http.fields,
      pagination: pagination === undefined ? undefined : "next_url" in pagination ? { kind: "next_url", path: pagination.next_url } : { kind: "cursor", path: pagination.cursor, param: pagination.param },
      requestsPerSecond: http.requests_per_second,
      timeoutMs: parseDuration(http.timeout, `${at}.source.http.timeout`),
      maxAttempts: http.max_attempts,
      maxPages: http.max_pages,
    },
  };
  // The paths and header names are checked now, not at the first fetch.
  wrapAt(`${at}.source.http`, () => assertHttpSourceSpec(source.spec));
  return { key, source };
}

/**
 * The days a sync takes from the source: every http source has a window (today only, without lookback_days); a
 * file source has one with lookback_days, over the partition key `contract` names (default: its only one).
 */
function lookbackWindow(at: string, dataset: DatasetInput, keys: readonly string[], httpKey: string | undefined): LookbackWindow | undefined {
  const source = dataset.source;
  const windowed = httpKey !== undefined || source.lookback_days !== undefined;
  if (!windowed) {
    for (const [key, given] of [["timezone", source.timezone !== undefined], ["allow_empty", source.allow_empty], ["contract", source.contract !== undefined]] as const) {
      if (given) throw new InvalidInputError(`${at}.source.${key}: applies to http sources and to sources with lookback_days: remove it, or add lookback_days`);
    }
    if (source.replace_partition === true && dataset.write !== "partition_replace") {
      throw new InvalidInputError(`${at}.source.replace_partition: true replaces each delivered partition, which contradicts write: ${dataset.write}: keep one of them`);
    }
    return undefined;
  }
  if (httpKey === undefined) {
    if (source.ingest !== undefined) throw new InvalidInputError(`${at}.source.lookback_days: an ingested table is appended to by the collector: remove lookback_days`);
    if (source.replace_partition === false || dataset.write !== "partition_replace") {
      throw new InvalidInputError(
        `${at}.source.lookback_days: a lookback window replaces the days it takes again: it needs replace_partition: true (write: partition_replace), not ${source.replace_partition === false ? "replace_partition: false" : `write: ${dataset.write}`}`,
      );
    }
  }
  const key = httpKey ?? source.contract ?? (keys.length === 1 ? keys[0]! : undefined);
  if (key === undefined) {
    throw new InvalidInputError(`${at}.source.contract: the dataset has partition keys ${keys.join(", ")}: name the one that holds the day (YYYY-MM-DD), e.g. contract: ${keys[0]}`);
  }
  if (!keys.includes(key)) throw new InvalidInputError(`${at}.source.contract: '${key}'${didYouMean(key, [...keys])} is not a partition key of the dataset (${keys.join(", ")})`);
  const timezone = source.timezone ?? "UTC";
  try {
    new Intl.DateTimeFormat("en-CA", { timeZone: timezone });
  } catch {
    throw new InvalidInputError(`${at}.source.timezone: '${printable(timezone, 60)}' is not a time zone; use an IANA name such as UTC, Europe/Berlin or America/Los_Angeles`);
  }
  return { key, lookbackDays: source.lookback_days ?? 0, timezone, allowEmpty: source.allow_empty };
}

/** Checks the keys of `write: upsert` (and that they are not given to another mode). */
function resolveUpsert(dataset: DatasetInput, columns: readonly PipelineColumn[], at: string): UpsertConfig | undefined {
  const names = columns.map((c) => c.name);
  if (dataset.write !== "upsert") {
    for (const key of ["primary_key", "order_by", "delete_flag"] as const) {
      if (dataset[key] !== undefined) throw new InvalidInputError(`${at}.${key}: applies to write: upsert only (this dataset writes ${dataset.write})`);
    }
    return undefined;
  }
  const primaryKey = dataset.primary_key;
  if (!primaryKey) throw new InvalidInputError(`${at}.primary_key: write: upsert merges rows by key: declare primary_key: [column, ...] (columns of this dataset)`);
  for (const [key, list] of [["primary_key", primaryKey], ["order_by", dataset.order_by ?? []], ["delete_flag", dataset.delete_flag ? [dataset.delete_flag] : []]] as const) {
    for (const column of list) {
      if (!names.includes(column)) throw new InvalidInputError(`${at}.${key}: unknown column '${column}'${didYouMean(column, names)}; the dataset's columns are ${names.join(", ")}`);
    }
    if (new Set(list).size !== list.length) throw new InvalidInputError(`${at}.${key}: a column is named twice (${list.join(", ")})`);
  }
  const flag = columns.find((c) => c.name === dataset.delete_flag);
  if (flag && flag.type !== "BOOLEAN") {
    throw new InvalidInputError(`${at}.delete_flag: column '${flag.name}' is ${flag.type}; a delete flag is a BOOLEAN column (true removes the key)`);
  }
  if (flag && primaryKey.includes(flag.name)) throw new InvalidInputError(`${at}.delete_flag: '${flag.name}' is part of the primary key`);
  return { primaryKey, orderBy: dataset.order_by ?? [], deleteFlag: dataset.delete_flag };
}

