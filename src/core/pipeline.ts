import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { readFile } from "node:fs/promises";
import path from "node:path";
import type { DatasetConfig, LayerConfig, PipelineColumn, PipelineConfig } from "../config/pipeline-config.js";
import type { LandedDelivery, Signing } from "../engine/engine.js";
import { InvalidInputError, LakeswapError, errorMessage } from "./errors.js";
import type { Lake, PartitionState } from "./lake.js";
import { assertPartitionValue, makePartition, orderPartition, parsePartition, parsePartitionPath, partitionPath, type Partition } from "./partition.js";
import { newRunId } from "./run-id.js";
import { chainSignature, transformFingerprint } from "./signature.js";
import type { SyncMove } from "./sync-record.js";
import { quoteIdentifier, quoteLiteral } from "./sql.js";
import { defineTable, type TableDefinition } from "./table.js";

/** Whether a partition is built or skipped. */
export type PlanAction = "build" | "skip";

/** Why a partition is built or skipped. */
export type PlanReason =
  | "new"
  | "content changed"
  | "upstream changed"
  | "transform changed"
  | "never signed"
  | "rolled back"
  | "forced"
  | "pinned"
  | "unchanged"
  | "signature version changed";

/** The decision for one partition of one layer. */
export interface PlannedPartition {
  readonly dataset: string;
  readonly layer: string;
  readonly table: string;
  readonly partition: string;
  readonly action: PlanAction;
  readonly reason: PlanReason;
  /** The signature the partition gets when built; undefined when an input was never signed (it is built, not signed). */
  readonly signature?: string;
  readonly fingerprint?: string;
  /** Signed inputs, `table/partition=signature`. */
  readonly inputs?: readonly string[];
  /** Upstream partitions read (derived layers). */
  readonly inputPartitions?: readonly string[];
  /** Rows in the delivery (raw layer). */
  readonly rows?: number;
}

/** What one partition of a sync did. */
export interface SyncedPartition {
  readonly table: string;
  readonly layer: string;
  readonly partition: string;
  readonly action: PlanAction | "failed";
  readonly reason: PlanReason;
  readonly run?: string;
  /** The run that was current before this sync built `run` (absent for a new partition). */
  readonly previousRun?: string;
  readonly rows?: number;
  readonly seconds: number;
  readonly error?: string;
}

/** Totals of one layer, or of the whole sync. */
export interface SyncTotals {
  readonly built: number;
  readonly skipped: number;
  readonly failed: number;
  readonly rows: number;
  readonly seconds: number;
}

/** How the delivery was landed: rows read = rows loaded + rows dead-lettered. */
export interface LoadReport {
  readonly dataset: string;
  readonly delivery: string;
  readonly files: readonly string[];
  readonly rowsRead: number;
  readonly rowsLoaded: number;
  readonly rowsDeadLettered: number;
  readonly deadLetterTable?: string;
  /** How the raw signatures were computed: `native` (lakeswap's DuckDB extension) or `sql` (the same signatures, slower), with why. */
  readonly signing: Signing;
}

/** The report of a sync. */
export interface SyncReport {
  /** The id of this sync's record: `lakeswap rollback --sync ID` moves back every pointer it moved. */
  readonly syncId: string;
  readonly partitions: readonly SyncedPartition[];
  readonly layers: readonly ({ readonly dataset: string; readonly layer: string; readonly table: string } & SyncTotals)[];
  readonly loads: readonly LoadReport[];
  readonly totals: SyncTotals;
}

/** Options of plan and sync. */
export interface PipelineOptions {
  /** Files (or globs) of this delivery, instead of the datasets' source paths. */
  readonly inputs?: readonly string[];
  /** Only these partitions, in layers partitioned by the same keys. */
  readonly partitions?: readonly string[];
  /** Rebuild every partition, whatever the signatures say. */
  readonly fullRefresh?: boolean;
  /** Accept derived builds of 0 rows for partitions that had rows. */
  readonly allowEmpty?: boolean;
  readonly onProgress?: (event: { readonly layer: string; readonly done: number; readonly total: number; readonly label: string }) => void;
}

/** The columns of a dead-letter table; partitioned by delivery so a rerun replaces its own bad rows. */
export const DEAD_LETTER_COLUMNS: readonly PipelineColumn[] = [
  { name: "dataset", type: "VARCHAR", nullable: false },
  { name: "file", type: "VARCHAR", nullable: true },
  { name: "line", type: "BIGINT", nullable: true },
  { name: "reason", type: "VARCHAR", nullable: false },
  { name: "raw", type: "VARCHAR", nullable: true },
];

/**
 * Runs a pipeline: lands a delivery into the raw layer and builds the derived
 * layers, rebuilding exactly the partitions whose input or transform changed.
 */
export class Pipeline {
  constructor(
    private readonly lake: Lake,
    private readonly config: PipelineConfig,
    private readonly options: PipelineOptions = {},
  ) {}

  /** What a sync would do, layer by layer, without changing anything. */
  async plan(): Promise<PlannedPartition[]> {
    const planned: PlannedPartition[] = [];
    for (const dataset of this.config.datasets) {
      const landed = await this.land(dataset);
      try {
        const raw = await this.planRaw(dataset, landed.delivery);
        planned.push(...raw);
        // Derived layers are planned against what the layers above will hold after the sync.
        const predicted = new Map<string, Map<string, string | undefined>>();
        predicted.set("raw", await this.predict(dataset.table, raw));
        for (const layer of dataset.layers) {
          const upstreamTable = this.tableOfLayer(dataset, layer.from);
          const layerPlan = await this.planDerived(dataset, layer, upstreamTable, predicted.get(layer.from) ?? new Map());
          planned.push(...layerPlan);
          predicted.set(layer.name, await this.predict(layer.table, layerPlan));
        }
      } finally {
        await this.lake.releaseDelivery(landed.delivery);
      }
    }
    return planned;
  }

  /** Runs the plan: layers in order, partitions of a layer concurrently; a failed partition does not stop the others. */
  async sync(): Promise<SyncReport> {
    const results: SyncedPartition[] = [];
    const layers: SyncReport["layers"][number][] = [];
    const loads: LoadReport[] = [];
    const record = { format: 1 as const, syncId: newRunId(), config: this.config.file, startedAt: new Date().toISOString() };
    const moves: SyncMove[] = [];
    // The record is rewritten after each layer, so a sync that dies half-way leaves the record of what it moved.
    const recordMoves = async (moved: readonly SyncMove[], finished = false): Promise<void> => {
      moves.push(...moved);
      if (moves.length > 0) await this.lake.recordSync({ ...record, moves, ...(finished ? { finishedAt: new Date().toISOString() } : {}) });
    };
    for (const dataset of this.config.datasets) {
      // Landing first: a delivery with bad rows and no dead-letter table changes nothing, not even the catalog.
      const landed = await this.land(dataset);
      try {
        await this.createTables(dataset);
        const deadLetters = await this.writeDeadLetters(dataset, landed);
        loads.push(deadLetters.load);
        await recordMoves(deadLetters.moved);
        const started = Date.now();
        const rawPlan = await this.planRaw(dataset, landed.delivery);
        const rawResults = await this.execute(dataset.table, "raw", rawPlan, (p) => ({
          select: `SELECT ${dataset.columns.map((c) => quoteIdentifier(c.name)).join(", ")} FROM ${quoteIdentifier(landed.delivery.relation)} WHERE ${partitionFilter(parsePartitionPath(p.partition, dataset.partition.map((k) => k.key)))}`,
          landed: true,
        }));
        results.push(...rawResults);
        await recordMoves(movesOf(rawResults));
        layers.push({ dataset: dataset.name, layer: "raw", table: dataset.table, ...totals(rawResults, Date.now() - started) });
      } finally {
        await this.lake.releaseDelivery(landed.delivery);
      }
      for (const layer of dataset.layers) {
        const started = Date.now();
        const upstreamTable = this.tableOfLayer(dataset, layer.from);
        const actual = signaturesOf(await this.lake.partitionStates(upstreamTable));
        const plan = await this.planDerived(dataset, layer, upstreamTable, actual);
        const sql = await readFile(layer.sqlPath, "utf8");
        const layerResults = await this.execute(layer.table, layer.name, plan, (p) => ({
          select: renderSql(sql, parsePartitionPath(p.partition, layer.partitionKeys), layer.sqlPath),
          inputPartitions: [{ table: upstreamTable, partitions: p.inputPartitions ?? [] }],
        }));
        results.push(...layerResults);
        await recordMoves(movesOf(layerResults));
        layers.push({ dataset: dataset.name, layer: layer.name, table: layer.table, ...totals(layerResults, Date.now() - started) });
      }
    }
    await recordMoves([], true);
    return { syncId: record.syncId, partitions: results, layers, loads, totals: totals(results, layers.reduce((sum, l) => sum + l.seconds * 1000, 0)) };
  }

  private async land(dataset: DatasetConfig): Promise<{ delivery: LandedDelivery }> {
    const configDir = path.dirname(this.config.file);
    const patterns = this.options.inputs?.length ? this.options.inputs.map((f) => path.resolve(f)) : [path.resolve(configDir, dataset.source.path)];
    const delivery = await this.lake.landDelivery({
      files: patterns,
      format: dataset.source.format,
      header: dataset.source.header,
      delimiter: dataset.source.delimiter,
      columns: dataset.columns,
      partition: dataset.partition,
      signatureColumns: dataset.signatureColumns,
    });
    if (delivery.rowsRejected > 0 && !dataset.deadLetter) {
      await this.lake.releaseDelivery(delivery);
      const first = delivery.firstRejects[0];
      const where = first ? `${first.file}${first.line !== null ? `:${first.line}` : ""}` : "the delivery";
      throw new InvalidInputError(
        `${where}: ${first?.reason ?? "bad row"}${first?.raw ? ` (row: ${first.raw})` : ""}; ${delivery.rowsRejected} bad row(s) in all, nothing was loaded. ` +
          `Fix the file, or declare dead_letter: <table> in datasets.${dataset.name} to load the rest and keep bad rows there.`,
      );
    }
    return { delivery };
  }

  private async planRaw(dataset: DatasetConfig, delivery: LandedDelivery): Promise<PlannedPartition[]> {
    const states = await this.statesOf(dataset.table);
    const keys = dataset.partition.map((p) => p.key);
    return delivery.partitions
      .filter((landed) => this.selected(landed.partition, keys))
      .map((landed) => {
        const partition = partitionPath(landed.partition);
        const state = states.get(partition);
        const decision = this.decide(state, landed.signature, () => "content changed");
        return { dataset: dataset.name, layer: "raw", table: dataset.table, partition, ...decision, signature: landed.signature, rows: landed.rows };
      });
  }

  private async planDerived(
    dataset: DatasetConfig,
    layer: LayerConfig,
    upstreamTable: string,
    upstream: ReadonlyMap<string, string | undefined>,
  ): Promise<PlannedPartition[]> {
    const fingerprint = transformFingerprint(await readFile(layer.sqlPath));
    const fromKeys = this.keysOfLayer(dataset, layer.from);
    const upstreamPaths = [...upstream.keys()].sort();
    const mapped = await this.lake.mapPartitions({
      fromKeys,
      values: upstreamPaths.map((p) => parsePartitionPath(p, fromKeys).values),
      map: layer.inputMap,
    });
    const groups = new Map<string, string[]>();
    upstreamPaths.forEach((upstreamPath, index) => {
      const values = mapped[index] ?? [];
      const pairs = layer.partitionKeys.map((key, i) => {
        const value = values[i] ?? "";
        try {
          return [key, assertPartitionValue(key, value)] as const;
        } catch (error) {
          throw new InvalidInputError(
            `datasets.${dataset.name}.layers.${layer.name}.inputs.map.${key}: for upstream partition ${upstreamPath} it gives ${value === "" ? "NULL" : `'${value}'`}: ${errorMessage(error)}`,
          );
        }
      });
      const target = partitionPath(makePartition(pairs));
      groups.set(target, [...(groups.get(target) ?? []), upstreamPath]);
    });
    const states = await this.statesOf(layer.table);
    const plans: PlannedPartition[] = [];
    for (const [partition, inputPartitions] of [...groups.entries()].sort(([a], [b]) => (a < b ? -1 : 1))) {
      if (!this.selected(parsePartitionPath(partition, layer.partitionKeys), layer.partitionKeys)) continue;
      const inputSignatures = inputPartitions.map((p) => upstream.get(p));
      const signed = inputSignatures.every((s): s is string => s !== undefined);
      const inputs = signed ? inputPartitions.map((p, i) => `${upstreamTable}/${p}=${inputSignatures[i]}`) : undefined;
      const signature = inputs ? chainSignature(inputs, fingerprint, partition) : undefined;
      const state = states.get(partition);
      const decision = this.decide(state, signature, () => (state?.fingerprint !== fingerprint ? "transform changed" : "upstream changed"));
      plans.push({ dataset: dataset.name, layer: layer.name, table: layer.table, partition, ...decision, signature, fingerprint, inputs, inputPartitions });
    }
    return plans;
  }

  /** The rule: pinned, forced, new, rolled back, never signed, signed by another algorithm version, changed, or unchanged. */
  private decide(
    state: PartitionState | undefined,
    expected: string | undefined,
    changed: () => PlanReason,
  ): { action: PlanAction; reason: PlanReason } {
    if (state?.pinned) return { action: "skip", reason: "pinned" };
    if (this.options.fullRefresh) return { action: "build", reason: "forced" };
    if (!state?.runId) return { action: "build", reason: "new" };
    if (state.movedBy === "rollback") return { action: "build", reason: "rolled back" };
    if (expected === undefined || state.signature === undefined) return { action: "build", reason: "never signed" };
    if (signatureVersion(state.signature) !== signatureVersion(expected)) return { action: "build", reason: "signature version changed" };
    if (state.signature !== expected) return { action: "build", reason: changed() };
    return { action: "skip", reason: "unchanged" };
  }

  /** Signatures a layer will have after the sync: built partitions get the planned one, skipped keep theirs. */
  private async predict(table: string, plan: readonly PlannedPartition[]): Promise<Map<string, string | undefined>> {
    const predicted = signaturesOf(await this.statesOf(table));
    for (const p of plan) {
      if (p.action === "build") predicted.set(p.partition, p.signature);
    }
    return predicted;
  }

  private async execute(
    table: string,
    layer: string,
    plan: readonly PlannedPartition[],
    buildOf: (p: PlannedPartition) => { select: string; inputPartitions?: { table: string; partitions: readonly string[] }[]; landed?: boolean },
  ): Promise<SyncedPartition[]> {
    const results: SyncedPartition[] = plan
      .filter((p) => p.action === "skip")
      .map((p) => ({ table, layer, partition: p.partition, action: "skip", reason: p.reason, seconds: 0 }));
    const builds = plan.filter((p) => p.action === "build");
    if (builds.length === 0) return results;
    let done = 0;
    const failAll = (error: unknown) =>
      builds.map((p): SyncedPartition => ({ table, layer, partition: p.partition, action: "failed", reason: p.reason, seconds: 0, error: errorMessage(error) }));
    try {
      await this.lake.write(table, `sync ${table}`, async (writer) => {
        await forEachLimited(builds, this.config.concurrency, async (p) => {
          const started = Date.now();
          try {
            const build = buildOf(p);
            const result = await writer.replace(parsePartitionPath(p.partition, keysOf(p)), {
              select: build.select,
              signature: p.signature,
              fingerprint: p.fingerprint,
              inputs: p.inputs,
              inputPartitions: build.inputPartitions,
              landed: build.landed,
              allowEmpty: this.options.allowEmpty,
            });
            results.push({
              table, layer, partition: p.partition, action: "build", reason: p.reason,
              run: result.runId, previousRun: result.previousRunId, rows: result.rows, seconds: result.seconds,
            });
          } catch (error) {
            if (error instanceof LakeswapError && error.code === "LEASE_LOST") throw error;
            results.push({ table, layer, partition: p.partition, action: "failed", reason: p.reason, seconds: (Date.now() - started) / 1000, error: errorMessage(error) });
          }
          done += 1;
          this.options.onProgress?.({ layer, done, total: builds.length, label: `${table}/${p.partition}` });
        });
      });
    } catch (error) {
      const finished = new Set(results.map((r) => r.partition));
      return [...results, ...failAll(error).filter((r) => !finished.has(r.partition))];
    }
    return results.sort((a, b) => (a.partition < b.partition ? -1 : a.partition > b.partition ? 1 : 0));
  }

  private async writeDeadLetters(
    dataset: DatasetConfig,
    landed: { delivery: LandedDelivery },
  ): Promise<{ load: LoadReport; moved: SyncMove[] }> {
    const { delivery } = landed;
    const deliveryId = await deliveryIdOf(delivery.files);
    const moved: SyncMove[] = [];
    if (dataset.deadLetter && delivery.rowsRejected > 0) {
      const result = await this.lake.replacePartition(dataset.deadLetter, `delivery=${deliveryId}`, {
        select: `SELECT ${quoteLiteral(dataset.name)} AS dataset, file, line, reason, raw FROM ${quoteIdentifier(delivery.rejectedRelation)} ORDER BY file, line`,
        landed: true,
      });
      moved.push({ table: dataset.deadLetter, layer: "dead letter", partition: result.partition, run: result.runId, previousRun: result.previousRunId });
    }
    const load = {
      dataset: dataset.name,
      delivery: deliveryId,
      files: delivery.files,
      rowsRead: delivery.rowsRead,
      rowsLoaded: delivery.rowsLoaded,
      rowsDeadLettered: delivery.rowsRejected,
      deadLetterTable: dataset.deadLetter,
      signing: delivery.signing,
    };
    return { load, moved };
  }

  private async createTables(dataset: DatasetConfig): Promise<void> {
    const definitions: TableDefinition[] = [
      defineTable({ name: dataset.table, columns: dataset.columns, partitionKeys: dataset.partition.map((p) => p.key), compression: dataset.compression }),
      ...dataset.layers.map((layer) =>
        defineTable({ name: layer.table, columns: layer.columns, partitionKeys: layer.partitionKeys, compression: layer.compression }),
      ),
    ];
    if (dataset.deadLetter) definitions.push(defineTable({ name: dataset.deadLetter, columns: DEAD_LETTER_COLUMNS, partitionKeys: ["delivery"] }));
    for (const table of definitions) await this.lake.createTable(table);
  }

  private async statesOf(table: string): Promise<Map<string, PartitionState>> {
    const exists = (await this.lake.listTables()).some((t) => t.name === table);
    return exists ? this.lake.partitionStates(table) : new Map();
  }

  private selected(partition: Partition, keys: readonly string[]): boolean {
    const wanted = this.options.partitions;
    if (!wanted || wanted.length === 0) return true;
    const sameKeys = wanted.map((spec) => parsePartition(spec)).filter((p) => [...p.keys].sort().join(",") === [...keys].sort().join(","));
    if (sameKeys.length === 0) return true;
    const path = partitionPath(partition);
    return sameKeys.some((p) => partitionPath(orderPartition(p, keys)) === path);
  }

  private tableOfLayer(dataset: DatasetConfig, layer: string): string {
    return layer === "raw" ? dataset.table : (dataset.layers.find((l) => l.name === layer)?.table ?? dataset.table);
  }

  private keysOfLayer(dataset: DatasetConfig, layer: string): readonly string[] {
    return layer === "raw" ? dataset.partition.map((p) => p.key) : (dataset.layers.find((l) => l.name === layer)?.partitionKeys ?? []);
  }
}

function signaturesOf(states: ReadonlyMap<string, PartitionState>): Map<string, string | undefined> {
  const map = new Map<string, string | undefined>();
  for (const [partition, state] of states) if (state.runId) map.set(partition, state.signature);
  return map;
}

/** `"day" = '2026-11-05' AND ...` for one partition; keys and values are checked. */
function partitionFilter(partition: Partition): string {
  return partition.keys.map((key, i) => `${quoteIdentifier(key)} = ${quoteLiteral(partition.values[i] as string)}`).join(" AND ");
}

/** The partition keys of a planned partition, read off its path. */
function keysOf(planned: PlannedPartition): string[] {
  return planned.partition.split("/").map((part) => part.slice(0, part.indexOf("=")));
}

/** Puts the partition into a layer's SQL: `{{ key }}` becomes the quoted value; any other placeholder is an error. */
export function renderSql(sql: string, partition: Partition, file: string): string {
  return sql.replace(/\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g, (_match, name: string) => {
    const index = partition.keys.indexOf(name);
    if (index < 0) {
      throw new InvalidInputError(`${file}: unknown placeholder {{ ${name} }}; this layer's partition keys are ${partition.keys.join(", ")}`);
    }
    return quoteLiteral(partition.values[index] as string);
  });
}

/** A delivery's id: a digest of its files' names and contents, so a rerun of the same delivery gets the same id. */
async function deliveryIdOf(files: readonly string[]): Promise<string> {
  const hash = createHash("sha256");
  for (const file of [...files].sort()) {
    hash.update(`${path.basename(file)}\n`);
    for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
    hash.update("\n");
  }
  return `d${hash.digest("hex").slice(0, 16)}`;
}

function totals(results: readonly SyncedPartition[], elapsedMs: number): SyncTotals {
  return {
    built: results.filter((r) => r.action === "build").length,
    skipped: results.filter((r) => r.action === "skip").length,
    failed: results.filter((r) => r.action === "failed").length,
    rows: results.reduce((sum, r) => sum + (r.rows ?? 0), 0),
    seconds: elapsedMs / 1000,
  };
}

/** Runs `work` over `items`, at most `limit` at a time. */
async function forEachLimited<T>(items: readonly T[], limit: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const item = items[next++] as T;
      await work(item);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

/** The algorithm version of a signature (`v2` of `v2:…`, docs/signatures.md). */
function signatureVersion(signature: string): string {
  return signature.slice(0, Math.max(0, signature.indexOf(":")));
}

/** The pointers a layer's results moved, for the sync's record. */
function movesOf(results: readonly SyncedPartition[]): SyncMove[] {
  return results.flatMap((p) => (p.action === "build" && p.run ? [{ table: p.table, layer: p.layer, partition: p.partition, run: p.run, previousRun: p.previousRun }] : []));
}
