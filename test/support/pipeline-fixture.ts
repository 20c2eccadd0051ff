import { mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { parse } from "yaml";
import { loadPipelineConfig, resolvePipelineConfig, type PipelineConfig } from "../../src/config/pipeline-config.js";
import type { Lake } from "../../src/lake/lake.js";
import { Pipeline, type PipelineOptions, type SyncReport } from "../../src/pipeline/pipeline.js";
import { BACKEND_FACTORIES, tempDir } from "./lake-fixture.js";
import { runMain } from "./main-cli.js";

export const STAGE_SQL = `SELECT order_id, customer_id, amount, order_ts FROM orders_raw WHERE day = {{ day }} AND status = 'completed'\n`;
export const MONTHLY_SQL = `SELECT day AS order_day, count(*) AS orders, sum(amount) AS revenue FROM orders_stage GROUP BY day\n`;

/** The pipeline of the month-to-date story: raw orders by day, stage by day, analytics by month. */
export function pipelineYaml(extra: { deadLetter?: boolean; concurrency?: number; iceberg?: boolean } = {}): string {
  const yaml = `concurrency: ${extra.concurrency ?? 3}
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
      order_ts: TIMESTAMP
      updated_at: TIMESTAMP
    partition:
      day: strftime(order_ts, '%Y-%m-%d')
    signature:
      ignore: [updated_at]
${extra.deadLetter ? "    dead_letter: orders_rejected\n" : ""}    layers:
      - name: stage
        sql: sql/stage.sql
        columns: {order_id: BIGINT, customer_id: BIGINT, amount: "DECIMAL(10,2)", order_ts: TIMESTAMP}
      - name: analytics
        table: orders_monthly
        sql: sql/monthly.sql
        columns: {order_day: VARCHAR, orders: BIGINT, revenue: "DECIMAL(18,2)"}
        inputs:
          map: {month: "substr(day, 1, 7)"}
`;
  // `iceberg`: the raw table and the stage layer published as Iceberg too (not the monthly one).
  return extra.iceberg ? yaml.replace("    layers:\n", "    iceberg: true\n    layers:\n").replace("      - name: stage\n", "      - name: stage\n        iceberg: true\n") : yaml;
}

/** One order row of a delivery CSV. */
export interface OrderRow {
  id: number;
  customer: number;
  amount: string;
  status: string;
  ts: string;
  updatedAt: string;
}

/** `perDay` orders on each of `days` days of November 2026. */
export function orders(days: number, perDay = 10): OrderRow[] {
  const rows: OrderRow[] = [];
  for (let day = 1; day <= days; day += 1) {
    for (let i = 0; i < perDay; i += 1) {
      rows.push({
        id: day * 100 + i,
        customer: (day * 7 + i) % 13,
        amount: `${(day * 10 + i).toFixed(0)}.${String(i * 7 % 100).padStart(2, "0")}`,
        status: i % 5 === 4 ? "cancelled" : "completed",
        ts: `2026-11-${String(day).padStart(2, "0")} ${String(8 + (i % 10)).padStart(2, "0")}:15:00`,
        updatedAt: "2026-11-10 06:00:00",
      });
    }
  }
  return rows;
}

export function toCsv(rows: readonly OrderRow[]): string {
  return `order_id,customer_id,amount,status,order_ts,updated_at\n${rows.map((r) => `${r.id},${r.customer},${r.amount},${r.status},${r.ts},${r.updatedAt}`).join("\n")}\n`;
}

/** A pipeline workspace in a temp folder: config, SQL files, deliveries, and an embedded lake. */
export class PipelineWorkspace {
  readonly dir: string;
  readonly configFile: string;
  readonly lakeDir: string;
  private readonly cleanupDir: () => void;
  private counter = 0;

  constructor(options: { deadLetter?: boolean; concurrency?: number } = {}) {
    const { dir, cleanup } = tempDir("lakeswap-pipeline-");
    this.dir = dir;
    this.cleanupDir = cleanup;
    this.configFile = path.join(dir, "lakeswap.yaml");
    this.lakeDir = path.join(dir, "lake");
    mkdirSync(path.join(dir, "sql"));
    mkdirSync(path.join(dir, "deliveries"));
    writeFileSync(this.configFile, pipelineYaml(options));
    this.writeSql("stage.sql", STAGE_SQL);
    this.writeSql("monthly.sql", MONTHLY_SQL);
  }

  /** Rewrites the config file's text. */
  editConfig(edit: (yaml: string) => string): void {
    writeFileSync(this.configFile, edit(readFileSync(this.configFile, "utf8")));
  }

  writeSql(name: string, sql: string): void {
    writeFileSync(path.join(this.dir, "sql", name), sql);
  }

  /** Writes a delivery file and returns its path. */
  delivery(content: string | readonly OrderRow[]): string {
    const file = path.join(this.dir, "deliveries", `delivery-${String(this.counter++).padStart(3, "0")}.csv`);
    writeFileSync(file, typeof content === "string" ? content : toCsv(content));
    return file;
  }

  /** Replaces the delivery folder's files with one delivery of `rows`; returns its path. */
  redeliver(rows: readonly OrderRow[]): string {
    const folder = path.join(this.dir, "deliveries");
    for (const name of readdirSync(folder)) rmSync(path.join(folder, name));
    return this.delivery(rows);
  }

  pipeline(lake: Lake, options: PipelineOptions = {}): Pipeline {
    return new Pipeline(lake, loadPipelineConfig(this.configFile), options);
  }

  cleanup(): void {
    this.cleanupDir();
  }
}

/** Shuffles deterministically. */
export function shuffled<T>(items: readonly T[], seed = 1): T[] {
  let state = seed;
  const random = () => ((state = (state * 1664525 + 1013904223) >>> 0) / 2 ** 32);
  return [...items].map((item) => [random(), item] as const).sort((a, b) => a[0] - b[0]).map(([, item]) => item);
}

/** Resolves the fixture's config next to its SQL files, after `edit` changed the parsed YAML; the workspace is removed after. */
export function resolveEdited(edit: (config: Record<string, any>) => void): () => PipelineConfig {
  const ws = new PipelineWorkspace();
  const config = parse(pipelineYaml()) as Record<string, any>;
  edit(config);
  return () => {
    try {
      return resolvePipelineConfig(config, ws.configFile);
    } finally {
      ws.cleanup();
    }
  };
}

/**
 * A lake of `backendName` (no grace window, no waiting for leases) and a folder to sync it from (`deliveries/`,
 * `sql/`, `lakeswap.yaml`): what the tests of a table whose declaration changes between syncs work with. `deliver`
 * writes the next delivery file, `sync` syncs one with the config as it is now; `cleanups` gets what ends them.
 */
export async function declarationWorkspace(backendName: string, prefix: string, cleanups: (() => Promise<void> | void)[]) {
  const backend = await BACKEND_FACTORIES[backendName]!();
  cleanups.push(() => backend.cleanup());
  const lake = await backend.open({ graceMs: 0, leaseWaitMs: 0 });
  cleanups.push(() => lake.close());
  const { dir, cleanup } = tempDir(prefix);
  cleanups.push(cleanup);
  mkdirSync(path.join(dir, "deliveries"));
  mkdirSync(path.join(dir, "sql"));
  const configFile = path.join(dir, "lakeswap.yaml");
  let counter = 0;
  return {
    backend,
    lake,
    dir,
    configFile,
    deliver(text: string): string {
      const file = path.join(dir, "deliveries", `delivery-${counter++}.csv`);
      writeFileSync(file, text);
      return file;
    },
    sync(file: string, options: PipelineOptions = {}, on: Lake = lake): Promise<SyncReport> {
      return new Pipeline(on, loadPipelineConfig(configFile), { inputs: [file], ...options }).sync();
    },
    cli: (args: readonly string[]) => runMain([...backend.cliArgs, ...args], backend.cliEnv),
  };
}

/** One read of a reader that read all along a command: which reader, the rows it saw (sorted), or its error. */
export interface ReadAlong {
  readonly reader: string;
  readonly rows?: string[];
  readonly error?: string;
}

/**
 * Runs `work` while each reader of `readers` (by name: a read giving its rows as text) reads again and again, each in
 * a loop of its own, and returns what `work` returned with every read: what readers saw all along a command.
 */
export async function readAlong<T>(readers: Readonly<Record<string, () => Promise<string[]>>>, work: () => Promise<T>): Promise<{ readonly result: T; readonly reads: ReadAlong[] }> {
  let reading = true;
  const reads: ReadAlong[] = [];
  const loops = Object.entries(readers).map(async ([reader, read]) => {
    while (reading) reads.push(await read().then((rows) => ({ reader, rows: [...rows].sort() }), (error: unknown) => ({ reader, error: String(error) })));
  });
  let result: T;
  try {
    result = await work();
  } finally {
    reading = false;
    await Promise.all(loops);
  }
  return { result, reads };
}
