import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { loadPipelineConfig } from "../config/pipeline-config.js";
import type { Lake } from "../lake/lake.js";
import { Pipeline, type SyncReport } from "../pipeline/pipeline.js";

/** The month-to-date story: which layers each delivery built and skipped. */
export interface MtdDeliveryResult {
  readonly delivery: string;
  readonly description: string;
  readonly layers: readonly { readonly layer: string; readonly built: number; readonly skipped: number; readonly failed: number; readonly builtPartitions: readonly string[] }[];
  readonly rowsRead: number;
}

const CONFIG = `# The month-to-date demo pipeline: raw orders by day, a cleaned stage by day, monthly analytics.
datasets:
  orders:
    source:
      format: csv
      path: deliveries/*.csv
    columns:
      order_id: {type: BIGINT, nullable: false}
      customer_id: BIGINT
      amount: DECIMAL(10,2)
      status: VARCHAR
      order_ts: {type: TIMESTAMP, nullable: false}
      updated_at: TIMESTAMP
    partition:
      day: strftime(order_ts, '%Y-%m-%d')
    signature:
      ignore: [updated_at]
    layers:
      - name: stage
        sql: sql/orders_stage.sql
        columns:
          order_id: BIGINT
          customer_id: BIGINT
          amount: DECIMAL(10,2)
          order_ts: TIMESTAMP
      - name: analytics
        table: orders_monthly
        sql: sql/orders_monthly.sql
        columns:
          order_day: VARCHAR
          orders: BIGINT
          revenue: DECIMAL(18,2)
        inputs:
          map:
            month: substr(day, 1, 7)
`;

const STAGE_SQL = `-- One day of completed orders; the view orders_raw holds exactly this partition's input.
SELECT order_id, customer_id, amount, order_ts
FROM orders_raw
WHERE day = {{ day }} AND status = 'completed'
`;

const MONTHLY_SQL = `-- Revenue per day of one month; orders_stage holds the month's days.
SELECT day AS order_day, count(*) AS orders, sum(amount) AS revenue
FROM orders_stage
WHERE substr(day, 1, 7) = {{ month }}
GROUP BY day
`;

/**
 * Writes the month-to-date pipeline (lakeswap.yaml and its SQL files) into `dir`:
 * raw orders by day, a stage of completed orders by day, revenue by month.
 */
export async function writeMtdPipeline(dir: string, options: { concurrency?: number } = {}): Promise<string> {
  await mkdir(path.join(dir, "deliveries"), { recursive: true });
  await mkdir(path.join(dir, "sql"), { recursive: true });
  const file = path.join(dir, "lakeswap.yaml");
  await writeFile(file, options.concurrency !== undefined ? `concurrency: ${options.concurrency}\n${CONFIG}` : CONFIG);
  await writeFile(path.join(dir, "sql", "orders_stage.sql"), STAGE_SQL);
  await writeFile(path.join(dir, "sql", "orders_monthly.sql"), MONTHLY_SQL);
  return file;
}

/** A deterministic pseudo-random generator, so every run of the demo shows the same story. */
function generator(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state * 1664525 + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
}

interface Order {
  readonly id: number;
  readonly customer: number;
  readonly amount: string;
  readonly status: string;
  readonly ts: string;
}

/** 40 orders a day for November 2026. */
function monthOfOrders(): Order[] {
  const random = generator(2026_11);
  const orders: Order[] = [];
  for (let day = 1; day <= 30; day += 1) {
    for (let i = 0; i < 40; i += 1) {
      const id = day * 1000 + i;
      const hour = String(Math.floor(random() * 24)).padStart(2, "0");
      const minute = String(Math.floor(random() * 60)).padStart(2, "0");
      orders.push({
        id,
        customer: 1 + Math.floor(random() * 200),
        amount: (5 + random() * 200).toFixed(2),
        status: random() < 0.9 ? "completed" : "cancelled",
        ts: `2026-11-${String(day).padStart(2, "0")} ${hour}:${minute}:00`,
      });
    }
  }
  return orders;
}

/** A cumulative delivery: every order up to `lastDay`, in shuffled order, with a fresh updated_at on every row. */
function deliveryCsv(orders: readonly Order[], lastDay: number, exportedAt: string, seed: number): string {
  const random = generator(seed);
  const rows = orders.filter((o) => Number(o.ts.slice(8, 10)) <= lastDay);
  const shuffled = [...rows].sort(() => random() - 0.5);
  const lines = shuffled.map((o) => `${o.id},${o.customer},${o.amount},${o.status},${o.ts},${exportedAt}`);
  return `order_id,customer_id,amount,status,order_ts,updated_at\n${lines.join("\n")}\n`;
}

/** Runs the month-to-date demo on `lake`: deliveries on day 5 and day 6, a late correction of day 2, and a rerun. */
export async function runMtdDemo(lake: Lake, onDelivery: (result: MtdDeliveryResult) => void): Promise<MtdDeliveryResult[]> {
  const workspace = await mkdtemp(path.join(tmpdir(), "lakeswap-mtd-"));
  try {
    const config = loadPipelineConfig(await writeMtdPipeline(workspace));

    const orders = monthOfOrders();
    const corrected = orders.map((o) => (o.id === 2003 ? { ...o, amount: "999.99" } : o.id === 2017 ? { ...o, status: "cancelled" } : o));
    const deliveries = [
      { name: "orders_2026-11-05.csv", description: "delivery of day 5: days 1-5", csv: deliveryCsv(orders, 5, "2026-11-05 06:00:00", 5) },
      { name: "orders_2026-11-06.csv", description: "delivery of day 6: days 1-6, reshuffled, every updated_at new", csv: deliveryCsv(orders, 6, "2026-11-06 06:00:00", 6) },
      { name: "orders_2026-11-06b.csv", description: "late correction: day 2 changed (one amount, one cancellation)", csv: deliveryCsv(corrected, 6, "2026-11-06 18:00:00", 7) },
      { name: "orders_2026-11-06b.csv", description: "the same delivery again: nothing to do", csv: deliveryCsv(corrected, 6, "2026-11-06 18:00:00", 7) },
    ];
    const results: MtdDeliveryResult[] = [];
    for (const delivery of deliveries) {
      const file = path.join(workspace, "deliveries", delivery.name);
      await writeFile(file, delivery.csv);
      const report = await new Pipeline(lake, config, { inputs: [file] }).sync();
      const result = summarize(delivery.name, delivery.description, report);
      results.push(result);
      onDelivery(result);
    }
    return results;
  } finally {
    await rm(workspace, { recursive: true, force: true });
  }
}

function summarize(delivery: string, description: string, report: SyncReport): MtdDeliveryResult {
  return {
    delivery,
    description,
    rowsRead: report.loads.reduce((sum, l) => sum + l.rowsRead, 0),
    layers: report.layers.map((layer) => ({
      layer: layer.layer,
      built: layer.built,
      skipped: layer.skipped,
      failed: layer.failed,
      builtPartitions: report.partitions.filter((p) => p.layer === layer.layer && p.action === "build").map((p) => `${p.partition} (${p.reason})`),
    })),
  };
}

/** The tables the month-to-date demo creates, for teardown. */
export const MTD_TABLES = ["orders_raw", "orders_stage", "orders_monthly"] as const;
