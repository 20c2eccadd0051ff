// The system under test of the model test: a pipeline workspace (config, stage SQL, deliveries) and its lake, driven
// through the CLI: in-process `main(argv)` for ordinary steps, a child process where a step is killed or runs beside another.
import { mkdirSync, promises as fs, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { gzipSync } from "node:zlib";
import { main } from "../../src/cli/main.js";
import { runCli, spawnCli, tempDir, type CliResult } from "../support/lake-fixture.js";
import type { ClickRow } from "./append-model.js";
import { awsSyncRecords, embeddedSyncRecords, readAwsText, viewAwsLake, viewEmbeddedLake, type AwsLakeLocation, type LakeView } from "./lake-view.js";
import { AUDIT_MAX_V, type RawRow, type WriteMode } from "./model.js";

/** An AWS lake for a workspace: the environment that names it (for the CLI) and where a plain reader finds it. */
export interface AwsWorkspaceTarget {
  readonly env: Readonly<Record<string, string>>;
  readonly location: AwsLakeLocation;
}

/** The pipeline's config; with `sink`, the stage layer is also sent to that PostgreSQL table (partition_replace). */
function pipelineYaml(sink?: PostgresTarget, format: DeliveryFormat = "csv", write: WriteMode = "partition_replace", iceberg = false, mapped = false): string {
  const fields = mapped ? `      fields: {${DELIVERY_NAMES.slice(0, write === "upsert" ? 5 : 4).map((name, i) => `${COLUMN_NAMES[i]}: "${name}"`).join(", ")}}\n` : "";
  const publish = iceberg ? "    iceberg: true\n" : "";
  const publishLayer = iceberg ? "        iceberg: true\n" : "";
  const upsert = write === "upsert" ? "    write: upsert\n    primary_key: [k]\n    delete_flag: del\n" : "";
  const deleteFlag = write === "upsert" ? "      del: BOOLEAN\n" : "";
  const sinks = sink ? `        sinks:\n          postgres:\n            url: ${sink.url}\n            table: ${sink.table}\n` : "";
  const rawSinks = sink?.rawTable ? `    sinks:\n      postgres:\n        url: ${sink.url}\n        table: ${sink.rawTable}\n` : "";
  return `concurrency: 2
datasets:
  items:
    source:
      format: ${format}
      path: deliveries/*.${format}
${fields}${upsert}${publish}${rawSinks}    columns:
      k: {type: BIGINT, nullable: false}
      d: {type: DATE, nullable: false}
      v: BIGINT
      cat: VARCHAR
${deleteFlag}    partition:
      day: strftime(d, '%Y-%m-%d')
    audits:
      - range: {v: {max: ${AUDIT_MAX_V}}}
    layers:
      - name: stage
        sql: sql/stage.sql
        columns: {k: BIGINT, v10: BIGINT}
${publishLayer}${sinks}${INGEST_YAML}`;
}

/**
 * The append dataset's config (./append-model.ts), apart from lakeswap.yaml, whose syncs name each delivery with
 * `--input` (which would name this dataset's delivery too): its source is every file of the clicks folder, as added.
 */
function appendYaml(format: DeliveryFormat): string {
  return `datasets:
  clicks:
    source: {format: ${format}, path: "clicks/*"}
    write: append
    columns: {id: BIGINT, ts: TIMESTAMP, page: VARCHAR}
    partition: {day: "strftime(ts, '%Y-%m-%d')"}
`;
}

/** One namespace of the event pipeline: its columns and time field (ev and ev2 alike). */
const NAMESPACE_YAML = `
        columns:
          id: {type: BIGINT, nullable: false}
          ts: {type: TIMESTAMPTZ, nullable: false}
          amt: DECIMAL(18,2)
          u: UBIGINT
          h: HUGEINT
          x: DOUBLE
        time: {field: ts}`;
/**
 * The event pipeline of the ingest commands (./ingest.ts): namespaces `ev` and `ev2` (tables ev and ev2, `serve` posts
 * to both; ev2 drops an event whose id it took before, `dedupe: {field: id}`) with the exact-digit types of issue 25 item 9, their dead letters in table `events`; on the embedded lake it lands in the workspace's lake (./lake).
 */
const INGEST_YAML = `pipelines:
  events:
    namespaces:
      ev:${NAMESPACE_YAML}
      ev2:${NAMESPACE_YAML}
        dedupe: {field: id}
    wal: {dir: ./wal}
`;

/** The raw columns, and the names a mapped workspace's deliveries give them (`source.fields`). */
const COLUMN_NAMES = ["k", "d", "v", "cat", "del"];
const DELIVERY_NAMES = ["Item Key", "Day Date", "Value ($)", "Category", "Deleted?"];

/** How many workspaces were made: every third reads its deliveries through source.fields. */
let workspacesMade = 0;

/** JSON objects as JSON Lines, or as one JSON array, an element a line. */
function jsonRows(objects: readonly string[], array: boolean): string {
  if (!array) return objects.map((o) => `${o}\n`).join("");
  return `[\n${objects.map((o) => `  ${o}`).join(",\n")}\n]\n`;
}

/** How deliveries are written: CSV, or JSONL (whose field names match the columns in any case, as CSV headers do). */
export type DeliveryFormat = "csv" | "jsonl";

/** A PostgreSQL table the stage layer is sent to: the server's URL and `schema.table`. */
export interface PostgresTarget {
  readonly url: string;
  readonly table: string;
  /** Also send the raw layer to this `schema.table`. */
  readonly rawTable?: string;
}

const STAGE_SQL = "SELECT k, v * 10 AS v10 FROM items_raw WHERE day = {{ day }} AND cat = 'a'\n";

/** What one CLI command did. */
export interface CommandResult {
  readonly code: number | null;
  readonly signal?: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * The machines child processes run on, in turn: this one (UTC), one in Tokyo, and one in Los Angeles with a Thai locale
 * (whose calendar is the Buddhist one). A lake is written from several machines; what it holds must not depend on which.
 */
const MACHINES: readonly Readonly<Record<string, string>>[] = [{}, { TZ: "Asia/Tokyo" }, { TZ: "America/Los_Angeles", LANG: "th_TH.UTF-8", LC_ALL: "th_TH.UTF-8" }];
let processes = 0;

/** The next child process's machine (MACHINES, in turn). */
function nextMachine(): Readonly<Record<string, string>> {
  return MACHINES[processes++ % MACHINES.length]!;
}

/** A workspace in a temporary folder, with its embedded lake. */
export class Workspace {
  readonly dir: string;
  readonly configFile: string;
  /** The append dataset's config (clicks.yaml), synced on its own. */
  readonly appendConfigFile: string;
  readonly lakeDir: string;
  private readonly removeDir: () => void;
  private deliveries = 0;
  /** Its deliveries name the columns otherwise (`Item Key`, `Value ($)`, ...), read through `source.fields`. */
  readonly mapped: boolean;

  constructor(
    readonly aws?: AwsWorkspaceTarget,
    readonly sink?: PostgresTarget,
    readonly format: DeliveryFormat = "csv",
    readonly write: WriteMode = "partition_replace",
    /** Raw and stage are published as Iceberg too (embedded lake): after each sync, both views must agree. */
    readonly iceberg = false,
  ) {
    const { dir, cleanup } = tempDir("lakeswap-model-");
    this.dir = dir;
    this.removeDir = cleanup;
    this.configFile = path.join(dir, "lakeswap.yaml");
    this.lakeDir = path.join(dir, "lake");
    this.appendConfigFile = path.join(dir, "clicks.yaml");
    mkdirSync(path.join(dir, "sql"));
    mkdirSync(path.join(dir, "deliveries"));
    mkdirSync(path.join(dir, "clicks"));
    this.mapped = workspacesMade++ % 3 === 2;
    writeFileSync(this.configFile, pipelineYaml(sink, format, write, iceberg, this.mapped));
    writeFileSync(path.join(dir, "sql", "stage.sql"), STAGE_SQL);
    writeFileSync(this.appendConfigFile, appendYaml(format));
  }

  /** The name the clicks folder's file number `index` gets (names sort in the order files are added). */
  clickFileName(index: number, gzip: boolean): string {
    return `c${String(index).padStart(3, "0")}.${this.format}${gzip ? ".gz" : ""}`;
  }

  /** Adds a file of these rows, in this order, to the clicks folder (CSV or JSONL, as the workspace's deliveries; maybe gzip). */
  clickFile(name: string, rows: readonly ClickRow[]): void {
    const text = this.format === "csv"
      ? `id,ts,page\n${rows.map((r) => `${r.id},${r.ts},${r.page}\n`).join("")}`
      : rows.map((r) => `${JSON.stringify(r)}\n`).join("");
    writeFileSync(path.join(this.dir, "clicks", name), name.endsWith(".gz") ? gzipSync(text) : text);
  }

  /**
   * Writes a delivery of these rows, in this order, and returns its path; with `upperCase` its header (CSV) or field
   * names (JSONL) are upper case (`K`, `D`, `V`, `CAT`): the columns are matched in any case. With `array`, a JSONL
   * delivery is one pretty-printed JSON array of the same objects: the same content; so is, with `gzip`, the file
   * gzip-compressed.
   */
  delivery(rows: readonly RawRow[], upperCase = false, array = false, gzip = false): string {
    const file = path.join(this.dir, "deliveries", `d${String(this.deliveries++).padStart(3, "0")}.${this.format}${gzip ? ".gz" : ""}`);
    const [k, d, v, cat, del] = (this.mapped ? DELIVERY_NAMES : COLUMN_NAMES).map((name) => (upperCase ? name.toUpperCase() : name));
    const upsert = this.write === "upsert";
    const text = this.format === "csv"
      ? `${k},${d},${v},${cat}${upsert ? `,${del}` : ""}\n${rows.map((r) => `${r.k},${r.d},${r.v},${r.cat}${upsert ? `,${r.del === true}` : ""}`).join("\n")}\n`
      : jsonRows(rows.map((r) => JSON.stringify({ [k!]: r.k, [d!]: r.d, [v!]: r.v, [cat!]: r.cat, ...(upsert ? { [del!]: r.del === true } : {}) })), array);
    writeFileSync(file, gzip ? gzipSync(text) : text);
    return file;
  }

  /** Writes a batch of events (NDJSON lines) for `lakeswap ingest` and returns its path. */
  events(lines: readonly string[]): string {
    const file = path.join(this.dir, "deliveries", `e${String(this.deliveries++).padStart(3, "0")}.ndjson`);
    writeFileSync(file, lines.map((line) => `${line}\n`).join(""));
    return file;
  }

  /** Arguments that name this workspace's lake (and config, for the commands that take one). */
  lakeArgs(): string[] {
    return this.aws ? [] : ["--lake", this.lakeDir];
  }

  /** Runs `lakeswap <args>` in this process (src/cli/main.ts), capturing stdout and stderr; on AWS with its environment set meanwhile. */
  /** Declares one more raw column (`name TYPE`), after `cat`, unless the config has it already (a schema change in place). */
  addRawColumn(column: string): void {
    const [name, type] = column.split(" ");
    const text = readFileSync(this.configFile, "utf8");
    if (!text.includes(`      ${name}: ${type}\n`)) writeFileSync(this.configFile, text.replace("      cat: VARCHAR\n", `      cat: VARCHAR\n      ${name}: ${type}\n`));
  }

  async run(args: readonly string[]): Promise<CommandResult> {
    const saved = Object.fromEntries(Object.keys(this.aws?.env ?? {}).map((name) => [name, process.env[name]]));
    Object.assign(process.env, this.aws?.env ?? {});
    try {
      return await runInProcess([...this.lakeArgs(), ...args]);
    } finally {
      for (const [name, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
  }

  /** Runs `lakeswap <args>` in a child process (on the next of MACHINES), with extra environment (e.g. LAKESWAP_FAULT). */
  async spawn(args: readonly string[], env: Record<string, string> = {}): Promise<CliResult> {
    return runCli([...this.lakeArgs(), ...args], { ...nextMachine(), ...this.aws?.env, ...env }, { cwd: this.dir });
  }

  /** Starts `lakeswap <args>` in a child process (on the next of MACHINES) without waiting. */
  start(args: readonly string[], env: Record<string, string> = {}): ReturnType<typeof spawnCli> {
    return spawnCli([...this.lakeArgs(), ...args], { ...nextMachine(), ...this.aws?.env, ...env }, { cwd: this.dir });
  }

  /** When the writer lease of `table` expires, as its lease object says (undefined: no lease is held). */
  async leaseExpiry(table: string): Promise<number | undefined> {
    const key = `_lakeswap/leases/${table}.json`;
    const text = this.aws ? await readAwsText(this.aws.location, key) : await fs.readFile(path.join(this.lakeDir, key), "utf8").catch(() => undefined);
    return text === undefined ? undefined : Date.parse((JSON.parse(text) as { expiresAt: string }).expiresAt);
  }

  /** The lake's sync records, read without the data files (safe while a writer swaps and collects runs). */
  syncRecords(): Promise<LakeView["syncs"]> {
    return this.aws ? awsSyncRecords(this.aws.location) : embeddedSyncRecords(this.lakeDir);
  }

  /** The lake as a plain reader sees it (a plain glob: read it only while no writer runs). */
  view(): Promise<LakeView> {
    return this.aws ? viewAwsLake(this.aws.location, this.write) : viewEmbeddedLake(this.lakeDir, this.write);
  }

  cleanup(): void {
    this.removeDir();
  }
}

/** Runs the CLI's `main` in this process with stdout and stderr captured; the listeners it adds are removed after. */
async function runInProcess(argv: readonly string[]): Promise<CommandResult> {
  const stdout: string[] = [];
  const stderr: string[] = [];
  const writes = { out: process.stdout.write, err: process.stderr.write };
  const sigint = new Set(process.listeners("SIGINT"));
  const stdoutErrors = new Set(process.stdout.listeners("error"));
  const capture = (into: string[]) =>
    ((chunk: string | Uint8Array, ...rest: unknown[]) => {
      into.push(typeof chunk === "string" ? chunk : Buffer.from(chunk).toString("utf8"));
      const callback = rest.find((r) => typeof r === "function") as (() => void) | undefined;
      callback?.();
      return true;
    }) as typeof process.stdout.write;
  process.stdout.write = capture(stdout);
  process.stderr.write = capture(stderr);
  let code: number;
  try {
    code = await main(["node", "lakeswap", ...argv]);
  } finally {
    process.stdout.write = writes.out;
    process.stderr.write = writes.err;
    for (const listener of process.listeners("SIGINT")) if (!sigint.has(listener)) process.removeListener("SIGINT", listener);
    for (const listener of process.stdout.listeners("error")) if (!stdoutErrors.has(listener)) process.stdout.removeListener("error", listener as never);
  }
  return { code, stdout: stdout.join(""), stderr: stderr.join("") };
}

