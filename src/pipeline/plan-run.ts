import type { DatasetConfig, LayerConfig } from "../config/pipeline-config.js";
import type { TableSnapshot } from "../engine/engine.js";
import type { PartitionState } from "../lake/lake.js";
import { partitionStates } from "../lake/operations/partition-states.js";
import type { FetchedSource } from "../sources/source.js";
import { declaredTables } from "./land.js";
import { buildsInNewLayout } from "./schema-changes.js";
import { fetchFailures } from "./lookback.js";
import type { PipelineContext, RawStep, Run } from "./pipeline-context.js";
import { predict, signaturesOf, type PlannedPartition } from "./plan.js";

/**
 * A plan: the first half of a sync without its leases (a sync decides again under them). It reads the states as
 * they are, builds nothing, and plans each layer against what the layers above will hold after the sync.
 */
export class PlanRun implements Run {
  readonly builds = false;
  /** The decisions so far, in the order a sync reports them. */
  readonly planned: PlannedPartition[] = [];
  /** What each table planned so far will hold after the sync: built partitions with their planned signature. */
  private readonly predicted = new Map<string, Map<string, string | undefined>>();

  constructor(private readonly ctx: PipelineContext) {}

  async states(table: string): Promise<Map<string, PartitionState>> {
    // A table the sync would build in a new layout (its partition keys change, or a rebuild built aside) is empty until the sync fills it.
    if (await buildsInNewLayout(this.ctx, table)) return new Map();
    return partitionStates(this.ctx.lake, table);
  }

  async upstream(table: string): Promise<Map<string, string | undefined>> {
    return this.predicted.get(table) ?? signaturesOf(await this.states(table));
  }

  async currentRuns(table: string, partitions?: readonly string[]): Promise<TableSnapshot> {
    const exists = (await this.ctx.lake.listTables()).some((t) => t.name === table);
    // A table the sync would build in a new layout is empty until the sync fills it (as `states` says), under the
    // declared definition: its current runs hold the old partition keys or columns, which the delivery, landed as
    // declared, does not (an upsert's merge would read keys its delivery lacks).
    const snapshot = exists && !(await buildsInNewLayout(this.ctx, table)) ? (await this.ctx.lake.snapshot({ tables: [table], ...(partitions ? { partitions: [{ table, partitions }] } : {}) }))[0] : undefined;
    return snapshot ?? { table: this.ctx.config.datasets.flatMap(declaredTables).find((t) => t.name === table) ?? (await this.ctx.lake.table(table)), partitions: [] };
  }

  fetchFailed(dataset: DatasetConfig, source: FetchedSource): void {
    this.planned.push(...failedDays(dataset, source));
  }

  async raw(step: RawStep): Promise<void> {
    // Days that could not be fetched keep their runs; a sync would fail them.
    this.planned.push(...failedDays(step.dataset, step.fetched), ...step.plan);
    this.predicted.set(step.dataset.table, predict(step.states, step.plan));
  }

  async layer(_dataset: DatasetConfig, layer: LayerConfig, plan: readonly PlannedPartition[], states: ReadonlyMap<string, PartitionState>): Promise<void> {
    this.planned.push(...plan);
    this.predicted.set(layer.table, predict(states, plan));
  }
}

/** The days an http source could not return, as a plan reports them. */
function failedDays(dataset: DatasetConfig, source: FetchedSource | undefined): PlannedPartition[] {
  return fetchFailures(dataset, source).map((f) => ({
    dataset: dataset.name, layer: "raw", table: dataset.table, partition: f.partition, action: "skip", reason: "fetch failed", error: f.error,
  }));
}
