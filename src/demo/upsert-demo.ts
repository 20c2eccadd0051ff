import { mkdir, mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { loadPipelineConfig, type PipelineConfig } from "../config/pipeline-config.js";
import type { Lake } from "../lake/lake.js";
import { Pipeline, type SyncReport } from "../pipeline/pipeline.js";
import { rollbackPartition } from "../lake/operations/rollback.js";

/** The table the upsert demo writes (dataset `demo_customers`). */
export const UPSERT_DEMO_TABLE = "demo_customers_raw";

/** The partition the demo rolls back, and the next sync redoes. */
const ROLLED_BACK = "area=north";

const CONFIG = `# The upsert demo: customers merged by customer_id into ${UPSERT_DEMO_TABLE}, partitioned by area.
lake: ./lake                      # --lake and LAKESWAP_LAKE win
datasets:
  demo_customers:
    source: {format: csv, path: deliveries/*.csv}
    write: upsert
    primary_key: [customer_id]
    order_by: [updated_at]        # a customer twice in one delivery: the latest row wins
    delete_flag: deleted          # a row with deleted = true removes the customer
    columns:
      customer_id: {type: BIGINT, nullable: false}
      name: VARCHAR
      region: VARCHAR
      updated_at: TIMESTAMP
      deleted: BOOLEAN
    partition:
      area: lower(region)
`;

const HEADER = "customer_id,name,region,updated_at,deleted";

const DELIVERIES = [
  {
    step: "first-delivery",
    file: "customers-1.csv",
    description: "first delivery: customers 1-7 in four areas",
    rows: [
      "1,Ada,North,2026-11-01 09:00:00,false",
      "2,Bo,North,2026-11-01 09:00:00,false",
      "3,Cy,South,2026-11-01 09:00:00,false",
      "4,Di,South,2026-11-01 09:00:00,false",
      "5,Ed,South,2026-11-01 09:00:00,false",
      "6,Fay,West,2026-11-01 09:00:00,false",
      "7,Gil,East,2026-11-01 09:00:00,false",
    ],
  },
  {
    step: "second-delivery",
    file: "customers-2.csv",
    description: "second delivery: Bo renamed Bob, Cy moves south -> north, Di deleted, Fay twice (the later row wins: Faye), Hal and Ivy new, Gil resent as he was",
    rows: [
      "2,Bob,North,2026-11-02 09:00:00,false",
      "3,Cy,North,2026-11-02 09:00:00,false",
      "4,Di,South,2026-11-02 09:00:00,true",
      "6,Faye,West,2026-11-04 09:00:00,false",
      "6,Fae,West,2026-11-03 09:00:00,false",
      "7,Gil,East,2026-11-01 09:00:00,false",
      "8,Hal,West,2026-11-02 09:00:00,false",
      "9,Ivy,North,2026-11-02 09:00:00,false",
    ],
  },
] as const;

/** A customer as a reader of the table sees it. */
interface DemoCustomer {
  readonly area: string;
  readonly customer_id: number;
  readonly name: string;
  readonly region: string;
  /** The day of `updated_at`. */
  readonly updated: string;
}

/** What one step of the upsert demo did: a sync (each partition built or skipped, and why) or a rollback; then the table's rows. */
export interface UpsertDemoStep {
  readonly step: "first-delivery" | "second-delivery" | "rerun" | "rollback" | "redo";
  readonly description: string;
  /** The delivery file a sync read. */
  readonly delivery?: string;
  readonly syncId?: string;
  readonly partitions?: readonly { readonly partition: string; readonly action: string; readonly reason: string; readonly rows?: number; readonly run?: string }[];
  readonly rollback?: { readonly partition: string; readonly fromRunId: string; readonly toRunId: string };
  /** The table's rows after the step, by area and customer. */
  readonly rows: readonly DemoCustomer[];
}

/** The demo's folder: its lakeswap.yaml (the lake in `./lake` unless --lake names one) and its deliveries. */
export interface UpsertDemoWorkspace {
  readonly dir: string;
  readonly configFile: string;
  readonly config: PipelineConfig;
}

/** Writes the demo's pipeline and deliveries into a fresh temporary folder. */
export async function writeUpsertWorkspace(): Promise<UpsertDemoWorkspace> {
  const dir = await mkdtemp(path.join(tmpdir(), "lakeswap-upsert-"));
  await mkdir(path.join(dir, "deliveries"));
  const configFile = path.join(dir, "lakeswap.yaml");
  await writeFile(configFile, CONFIG);
  for (const delivery of DELIVERIES) await writeFile(path.join(dir, "deliveries", delivery.file), `${HEADER}\n${delivery.rows.join("\n")}\n`);
  return { dir, configFile, config: loadPipelineConfig(configFile) };
}

/**
 * Runs the upsert story on `lake`: a first delivery, a second one that updates,
 * moves, deletes, repeats and adds customers, the second again (nothing to
 * build), a rollback of one partition, and the next sync redoing it.
 */
export async function runUpsertDemo(lake: Lake, workspace: UpsertDemoWorkspace, onStep: (step: UpsertDemoStep) => void): Promise<UpsertDemoStep[]> {
  const steps: UpsertDemoStep[] = [];
  const record = async (step: Omit<UpsertDemoStep, "rows">): Promise<void> => {
    const done = { ...step, rows: await customers(lake) };
    steps.push(done);
    onStep(done);
  };
  const sync = async (step: UpsertDemoStep["step"], file: string, description: string): Promise<void> => {
    const report = await new Pipeline(lake, workspace.config, { inputs: [path.join(workspace.dir, "deliveries", file)] }).sync();
    await record({ step, description, delivery: file, ...summarize(report) });
  };
  const [first, second] = DELIVERIES;
  await sync(first.step, first.file, first.description);
  await sync(second.step, second.file, second.description);
  await sync("rerun", second.file, "the second delivery again: each partition it touches merges to what it holds, so nothing is built");
  const rollback = await rollbackPartition(lake, UPSERT_DEMO_TABLE, ROLLED_BACK);
  await record({
    step: "rollback",
    description: `rollback of ${ROLLED_BACK} to its previous run: Bob is Bo again, and Cy, who left south for north, is in no area until the next sync`,
    rollback: { partition: ROLLED_BACK, fromRunId: rollback.fromRunId, toRunId: rollback.toRunId },
  });
  await sync("redo", second.file, `the next sync (the second delivery again) redoes ${ROLLED_BACK}, which the rollback took back from the merge`);
  return steps;
}

function summarize(report: SyncReport): Pick<UpsertDemoStep, "syncId" | "partitions"> {
  return {
    syncId: report.syncId,
    partitions: report.partitions.map((p) => ({ partition: p.partition, action: p.action, reason: p.reason, rows: p.action === "build" ? p.rows : undefined, run: p.run })),
  };
}

async function customers(lake: Lake): Promise<DemoCustomer[]> {
  // Plain SQL that DuckDB and Athena (Trino) read alike.
  const result = await lake.query(
    `SELECT area, customer_id, name, region, CAST(CAST(updated_at AS DATE) AS VARCHAR) FROM ${UPSERT_DEMO_TABLE} ORDER BY area, customer_id`,
  );
  return result.rows.map(([area, id, name, region, updated]) => ({
    area: String(area),
    customer_id: Number(id),
    name: String(name),
    region: String(region),
    updated: String(updated),
  }));
}

/** The lines that show a step: what each partition got and why, then the rows a reader sees, by area. */
export function describeUpsertStep(step: UpsertDemoStep, index: number): string {
  const lines = [`${index}. ${step.description}`];
  if (step.rollback) lines.push(`   ${step.rollback.partition}: pointer moved back from run ${step.rollback.fromRunId} to run ${step.rollback.toRunId}`);
  const partitions = step.partitions ?? [];
  const width = Math.max(0, ...partitions.map((p) => p.partition.length));
  const reasonWidth = Math.max(0, ...partitions.map((p) => p.reason.length));
  for (const p of partitions) {
    const rows = p.rows === undefined ? "" : `${p.rows} row${p.rows === 1 ? "" : "s"}`;
    lines.push(`   ${p.action.padEnd(5)}  ${p.partition.padEnd(width)}  ${p.reason.padEnd(reasonWidth)}  ${rows}`.trimEnd());
  }
  lines.push("   a reader sees:");
  const areas = [...new Set(step.rows.map((r) => r.area))];
  const areaWidth = Math.max(0, ...areas.map((a) => a.length));
  for (const area of areas) {
    const names = step.rows.filter((r) => r.area === area).map((r) => `${r.customer_id} ${r.name}`);
    lines.push(`     ${area.padEnd(areaWidth)}  ${names.join(", ")}`);
  }
  return `${lines.join("\n")}\n`;
}
