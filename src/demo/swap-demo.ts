import type { Lake } from "../lake/lake.js";
import { removeEmptyLake, type LakePlace } from "../open/open-lake.js";
import { NotFoundError } from "../model/errors.js";
import { defineTable } from "../model/table.js";
import { replacePartition } from "../lake/operations/replace.js";
import { countPartition } from "../lake/operations/partition-states.js";
import { rollbackPartition } from "../lake/operations/rollback.js";
import { dropTable } from "../lake/operations/drop-table.js";

/** The steps of the demo of the article "Zero-downtime partition swaps on Athena", in order. */
export const DEMO_STEPS = ["setup", "swap", "count", "change", "rollback", "teardown"] as const;
export type DemoStep = (typeof DEMO_STEPS)[number];

/** What one demo step did, for the report. */
export interface DemoStepResult {
  readonly step: DemoStep;
  readonly message: string;
  readonly runId?: string;
  readonly previousRunId?: string;
  readonly count?: number;
}

const SOURCE = "demo_source";
const TARGET = "demo_target";
const PARTITION = "day=2026-11-01";
const COLUMNS = [
  { name: "order_id", type: "BIGINT" },
  { name: "customer", type: "VARCHAR" },
  { name: "amount", type: "DECIMAL(10,2)" },
];

/** Generated source rows `first..last`, for the demo's source partition. */
function sourceRows(first: number, last: number): string {
  return (
    `SELECT range AS order_id, 'customer_' || (range % 7) AS customer, CAST((range * 37) % 1000 AS DECIMAL(10,2)) / 10 AS amount ` +
    `FROM range(${first}, ${last + 1})`
  );
}

/** Runs one step of the demo on the lake at `place`; its state lives in the lake between steps. */
export async function runDemoStep(lake: Lake, step: DemoStep, place: LakePlace): Promise<DemoStepResult> {
  switch (step) {
    case "setup": {
      for (const name of [SOURCE, TARGET]) {
        await lake.createTable(defineTable({ name, columns: COLUMNS, partitionKeys: ["day"] }));
      }
      // Source rows are generated where raw files are landed (DuckDB), on every backend.
      const loaded = await replacePartition(lake, SOURCE, PARTITION, { select: sourceRows(1, 100), landed: true });
      return { step, runId: loaded.runId, count: loaded.rows, message: `created ${SOURCE} and ${TARGET} (partitioned by day); loaded ${loaded.rows} rows into ${SOURCE}/${PARTITION}` };
    }
    case "swap": {
      const result = await replacePartition(lake, TARGET, PARTITION, {
        select: `SELECT order_id, customer, amount FROM ${SOURCE} WHERE day = '2026-11-01'`,
      });
      const kept = result.previousRunId ? `; run ${result.previousRunId} kept for rollback` : "";
      return {
        step,
        runId: result.runId,
        previousRunId: result.previousRunId,
        count: result.rows,
        message: `built run ${result.runId} of ${TARGET}/${PARTITION} (${result.rows} rows) in a fresh prefix and moved the pointer${kept}`,
      };
    }
    case "count": {
      const count = await countPartition(lake, TARGET, PARTITION);
      if (count === undefined) throw new NotFoundError(`${TARGET}/${PARTITION} has no current run yet: run 'lakeswap demo swap' first`);
      const pointer = await lake.pointer(TARGET, PARTITION);
      return { step, count, runId: pointer?.runId, message: `SELECT count(*) FROM ${TARGET} WHERE ${PARTITION.replace("=", " = '")}' -> ${count} (run ${pointer?.runId})` };
    }
    case "change": {
      // The source's new delivery: the first 100 orders again plus 20 new ones.
      const result = await replacePartition(lake, SOURCE, PARTITION, { select: sourceRows(1, 120), landed: true });
      return { step, runId: result.runId, count: result.rows, message: `added 20 rows to ${SOURCE}/${PARTITION} (now ${result.rows})` };
    }
    case "rollback": {
      const result = await rollbackPartition(lake, TARGET, PARTITION);
      return {
        step,
        runId: result.toRunId,
        previousRunId: result.fromRunId,
        count: result.rows,
        message: `pointed ${TARGET}/${PARTITION} back from run ${result.fromRunId} to run ${result.toRunId}`,
      };
    }
    case "teardown": {
      const existing = new Set((await lake.listTables()).map((t) => t.name));
      const dropped = [SOURCE, TARGET].filter((name) => existing.has(name));
      for (const name of dropped) await dropTable(lake, name);
      const removedLake = await removeEmptyLake(place);
      const where = removedLake ? `; removed the empty lake folder ${place.dir}` : "";
      return { step, message: dropped.length > 0 ? `dropped ${dropped.join(" and ")} with all their runs${where}` : `nothing to tear down${where}` };
    }
  }
}

/** The whole demo: setup, swap, count, change, swap, count, rollback, count, teardown. */
export const FULL_DEMO: readonly DemoStep[] = ["setup", "swap", "count", "change", "swap", "count", "rollback", "count", "teardown"];
