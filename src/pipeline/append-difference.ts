import type { DatasetConfig } from "../config/pipeline-config.js";
import type { TableSnapshot } from "../engine/engine.js";
import type { LandedDelivery, LandedPart } from "../landing/landing.js";
import { partitionPath, type Partition } from "../model/partition.js";
import type { PipelineContext } from "./pipeline-context.js";
import { grownKey, type GrownPart } from "./plan.js";

/** The current runs of some partitions of a dataset's raw table (their paths), with their files, read under its lease. */
export type CurrentRuns = (partitions: readonly string[]) => Promise<TableSnapshot>;

/** A part of a landed delivery that its partition does not hold and that may continue a file its run recorded. */
export interface DifferenceCandidate {
  readonly partition: Partition;
  readonly path: string;
  readonly part: LandedPart;
  /**
   * A part without a record of its own name or of its first row, beside too many records of files gone whose first rows
   * are not known (runs from before they were kept): the fewest rows one of them holds. It is taken as continuing one
   * where the partition holds at least half that many of its rows (else it is new whole).
   */
  readonly gone?: number;
  /**
   * Parts of a partition that continue one recorded file (a file and its copy): each takes only the rows that neither
   * the partition nor a part of its family before it holds (their rows after the record may be the same rows).
   */
  readonly family?: string;
}

/**
 * `write: append`: the candidates that no split showed to continue a recorded file (`grown` has none for them: a row
 * edited in place, more bad lines than a run records, more renamed files than are paired) take the rows their partition
 * does not hold yet, by content (`Landing.differenceParts`), into `grown`. Only their partitions' current runs are read.
 * A part none of whose rows the partition holds stays new whole (the same rows, without the word), as does one that
 * seems to continue no gone file (`DifferenceCandidate.gone`), or any where `current` is not given or lists no run.
 */
export async function appendByDifference(
  ctx: PipelineContext,
  dataset: DatasetConfig,
  delivery: LandedDelivery,
  candidates: readonly DifferenceCandidate[],
  current: CurrentRuns | undefined,
  grown: Map<string, GrownPart>,
): Promise<void> {
  const left = candidates.filter((c) => !grown.has(grownKey(c.path, c.part.file)));
  if (left.length === 0 || !current) return;
  const snapshot = await current([...new Set(left.map((c) => c.path))]);
  const files = new Map(snapshot.partitions.map((p) => [partitionPath(p.partition), p.files]));
  // A partition without a run holds no row: only a family's parts (a new file and its copy) take less than all.
  const wanted = left.filter((c) => files.has(c.path) || c.family !== undefined);
  if (wanted.length === 0) return;
  const differences = await ctx.landing.differenceParts({
    delivery,
    table: snapshot.table,
    columns: dataset.columns,
    signatureColumns: dataset.signatureColumns,
    keys: dataset.partition.map((p) => p.key),
    parts: wanted.map((c) => ({ partition: c.partition, file: c.part.file, current: files.get(c.path) ?? [], ...(c.family !== undefined ? { family: c.family } : {}) })),
  });
  wanted.forEach((c, i) => {
    const { after, retaken, rows, signature } = differences[i]!;
    const heldRows = c.part.rows - rows;
    if (heldRows === 0 || (c.gone !== undefined && heldRows * 2 < c.gone)) return;
    grown.set(grownKey(c.path, c.part.file), { through: after, ...(retaken.length > 0 ? { skipped: retaken } : {}), rows, signature, difference: true });
  });
}
