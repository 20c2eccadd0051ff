import { createHash } from "node:crypto";
import { promises as fs } from "node:fs";
import path from "node:path";
import { canonicalValue, finishRawSignature, rawSignature, signatureColumnOrder } from "../src/model/signature.js";
import { quoteIdentifier, quoteLiteral } from "../src/model/sql.js";
import { DuckDbLanding } from "../src/landing/duckdb/duckdb-landing.js";
import { signatureQuery } from "../src/landing/duckdb/signature-sql.js";
import type { SignatureForm } from "../src/duckdb/duckdb-open.js";
import type { Signing } from "../src/model/signature.js";
import type { LandRequest } from "../src/landing/landing.js";
import { LocalStore } from "../src/store/local-store.js";
import { BenchDuck } from "./duck.js";
import { median, summarize, timeMs, type Timing } from "./stats.js";
import { METADATA_FOLDERS } from "../src/lake/layout.js";

/*
 * The content-signature benchmark. On one 3M-row, 180-day Parquet file it times:
 *
 * - lakeswap's DuckDbLanding.land(): what a delivery really costs (read the file
 *   with the declared types, split good and bad rows, partition, sign);
 * - lakeswap's signature query alone (the GROUP BY of land() that computes the
 *   lane sums, docs/signatures.md), over the rows already loaded in a DuckDB
 *   table, as land() runs it over the table it just loaded: in the form the
 *   engine uses, native (lakeswap's DuckDB extension) where it is built;
 * - the same query in its plain-SQL form (the fallback without the extension),
 *   over the same table: context, not judged;
 * - the straightforward method, "per partition: sort by all columns, CSV, sha256",
 *   over the same loaded table, in the two ways a data engineer would write it:
 *   (a) in Node: fetch each partition's rows sorted by all columns, build the CSV
 *       text in Node, sha256 with node:crypto (the faithful reading of the method);
 *   (b) via COPY: let DuckDB sort and write each partition's CSV file, sha256 the
 *       file with node:crypto (same bytes as (a), checked).
 *   Both are written efficiently (prepared statement, column-wise fetch, rows
 *   clustered by day so a partition's read skips the other days). The target is
 *   judged against the faster of the two, so it cannot be met against a slow baseline.
 *
 * Throughput is rows / median wall time; CPU time is shown too, as this may run on
 * a machine busy with other work.
 */

/** Rows of the signature benchmark's table. */
const SIGNATURE_ROWS = 3_000_000;

/** Days (partitions) the rows spread over. */
const SIGNATURE_DAYS = 180;

/** The target: lakeswap's signature at least this many times the straightforward method's throughput. */
const SIGNATURE_TARGET = 25;

/** Timed rounds of each method, interleaved (the sample checks run every method first, as a warm-up). */
const SIGNATURE_ROUNDS = 3;

/** Every SAMPLE_EVERY-th row goes into the small sample the order-insensitivity checks use. */
const SAMPLE_EVERY = 100;

/** Days of the sample whose signatures are recomputed with the reference implementation in src/model/signature.ts. */
const REFERENCE_DAYS = 3;

const COLUMNS = [
  { name: "order_id", type: "BIGINT", nullable: false },
  { name: "customer_id", type: "BIGINT", nullable: true },
  { name: "amount", type: "DECIMAL(10,2)", nullable: true },
  { name: "status", type: "VARCHAR", nullable: true },
  { name: "order_ts", type: "TIMESTAMP", nullable: false },
] as const;

const DAY_EXPRESSION = "strftime(order_ts, '%Y-%m-%d')";

/** One measured method: its timings and its throughput at the median. */
export interface MethodFigures {
  readonly timing: Timing;
  readonly rowsPerSecond: number;
  /** Median CPU time of the process (Node and DuckDB's threads) during the method: steadier than wall time on a busy machine. */
  readonly cpuMedianMs: number;
}

/** What the signature benchmark measured. */
export interface SignatureFigures {
  readonly rows: number;
  readonly partitions: number;
  readonly fileBytes: number;
  readonly rounds: number;
  /** Loading the Parquet file into the DuckDB table the isolated query and the baselines read (once, untimed in them). */
  readonly loadMs: number;
  /** DuckDbLanding.land() on the Parquet file: read, type-check, split good/bad rows, partition and sign. */
  readonly land: MethodFigures;
  /** The form of the signature query the engine uses here (native where the extension is built), and why not native. */
  readonly signing: Signing;
  /** The GROUP BY signature query of land() alone, over the already-loaded table, in the engine's form. */
  readonly signatureQuery: MethodFigures;
  /** The same query in the plain-SQL form over the same table. Context, not judged. */
  readonly signatureQuerySql: MethodFigures;
  /** Straightforward: per partition, rows fetched sorted by all columns, CSV built in Node, sha256 in Node. */
  readonly straightforwardNode: MethodFigures;
  /** Straightforward, all in DuckDB: per partition, COPY (sorted by all columns) TO a CSV file, then sha256 of the file. */
  readonly straightforwardCopy: MethodFigures;
  /** Which straightforward variant was faster, the one the target is judged against. */
  readonly baseline: "straightforwardNode" | "straightforwardCopy";
  readonly ratios: {
    /** Throughput of the signature query alone / throughput of the faster straightforward variant. */
    readonly signatureQuery: number;
    /** Throughput of land() (load and validation included) / throughput of the faster straightforward variant. */
    readonly land: number;
    readonly signatureQueryVsNode: number;
    readonly signatureQueryVsCopy: number;
  };
  /** The same ratios from CPU time (the method's CPU time over lakeswap's), for a machine busy with other work. */
  readonly cpuRatios: SignatureFigures["ratios"];
  /** The target is judged on the signature query alone; land() also reads and validates the file, and is context. */
  readonly target: { readonly ratio: number; readonly signatureQueryMet: boolean };
  readonly checks: SignatureChecks;
}

/** The correctness checks run before timing (the benchmark stops if one fails). */
interface SignatureChecks {
  readonly sampleRows: number;
  readonly samplePartitions: number;
  /** land() and the isolated query (both forms) give the same signature for every partition of the big file. */
  readonly queryMatchesLand: boolean;
  /** Same signatures over two differently ordered copies of the sample. */
  readonly lakeswapOrderInsensitive: boolean;
  readonly straightforwardOrderInsensitive: boolean;
  /** A one-row change alters exactly one partition's signature, for each method. */
  readonly oneChangeOnePartition: boolean;
  /** Both straightforward variants hash byte-identical CSV text. */
  readonly straightforwardVariantsAgree: boolean;
  /** The engine's signatures of the first sample days equal src/model/signature.ts's rawSignature. */
  readonly referencePartitions: number;
}

type Signatures = Map<string, string>;

/**
 * Times lakeswap's content signature against the straightforward "sort, CSV,
 * sha256 per partition" method, on the same 3M-row, 180-day Parquet file.
 */
export async function benchSignature(workDir: string, progress: (message: string) => void): Promise<SignatureFigures> {
  const dir = path.join(workDir, "signature");
  await fs.mkdir(dir, { recursive: true });
  const file = path.join(dir, "orders.parquet");
  const duck = await BenchDuck.open();
  const engine = new DuckDbLanding(new LocalStore(path.join(dir, "store"), { folders: METADATA_FOLDERS }));
  try {
    const signing = await engine.signing();
    if (signing.form !== duck.signatureForm) throw new Error(`the engine signs in the ${signing.form} form, the bench's DuckDB could use only the ${duck.signatureForm} form`);
    progress(`signature: generating ${SIGNATURE_ROWS.toLocaleString("en-US")} rows over ${SIGNATURE_DAYS} days into Parquet`);
    await duck.run(`COPY (${generatingSelect(SIGNATURE_ROWS, SIGNATURE_DAYS)}) TO ${quoteLiteral(file)} (FORMAT PARQUET, COMPRESSION snappy)`);
    const fileBytes = (await fs.stat(file)).size;

    progress("signature: correctness checks on a sample (order-insensitivity, one-row change, reference implementation)");
    const sample = await checkSample(duck, engine, file, dir);

    progress("signature: loading the file into a DuckDB table (clustered by day) for the isolated query and the straightforward method");
    // Clustered by day, as a partitioned table's rows are: the straightforward method's
    // per-partition reads then skip other days' row groups instead of scanning all 3M rows.
    const loadSql = (table: string): string =>
      `CREATE TABLE ${table} AS SELECT ${columnList()}, CAST(${DAY_EXPRESSION} AS VARCHAR) AS day FROM read_parquet(${quoteLiteral(file)}) ORDER BY day`;
    const loadMs = await timeMs(() => duck.run(loadSql("loaded")));
    const rows = await duck.number("SELECT count(*) FROM loaded");
    if (rows !== SIGNATURE_ROWS) throw new Error(`the loaded table has ${rows} rows, expected ${SIGNATURE_ROWS}`);

    const land = (): Promise<Signatures> => landSignatures(engine, file);
    const query = (): Promise<Signatures> => querySignatures(duck, "loaded", signing.form);
    const querySql = (): Promise<Signatures> => querySignatures(duck, "loaded", "sql");
    const node = (): Promise<Signatures> => straightforwardNode(duck, "loaded");
    let copies = 0;
    const copy = (): Promise<Signatures> => straightforwardCopy(duck, "loaded", path.join(dir, `csv-${copies++}`));

    const samples = { land: [] as number[], query: [] as number[], sql: [] as number[], node: [] as number[], copy: [] as number[] };
    const cpu = { land: [] as number[], query: [] as number[], sql: [] as number[], node: [] as number[], copy: [] as number[] };
    const outputs: { land?: Signatures; query?: Signatures; sql?: Signatures; node?: Signatures; copy?: Signatures } = {};
    // Each round must give the same signatures as the first one.
    const timed = async (key: keyof typeof samples, work: () => Promise<Signatures>): Promise<void> => {
      let result: Signatures | undefined;
      const cpuBefore = process.cpuUsage();
      samples[key].push(await timeMs(async () => (result = await work())));
      const cpuUsed = process.cpuUsage(cpuBefore);
      cpu[key].push((cpuUsed.user + cpuUsed.system) / 1000);
      const first = outputs[key];
      if (first === undefined) outputs[key] = result;
      else if (!sameSignatures(first, result as Signatures)) throw new Error(`the ${key} method gave different signatures in two rounds`);
    };
    // No separate warm-up: the sample checks above already ran every method and opened both DuckDB instances.
    // Interleaved, so drift of the machine weighs on every method alike.
    for (let round = 1; round <= SIGNATURE_ROUNDS; round++) {
      progress(`signature: round ${round}/${SIGNATURE_ROUNDS} (land, signature query, its SQL form, straightforward in Node, straightforward via COPY)`);
      await timed("land", land);
      await timed("query", query);
      await timed("sql", querySql);
      await timed("node", node);
      await timed("copy", copy);
    }
    const landed = outputs.land as Signatures;
    const queryMatchesLand = sameSignatures(landed, outputs.query as Signatures) && sameSignatures(landed, outputs.sql as Signatures);
    if (!queryMatchesLand) throw new Error("the isolated signature query disagrees with land() on the big file");
    if (landed.size !== SIGNATURE_DAYS) throw new Error(`land() found ${landed.size} partitions, expected ${SIGNATURE_DAYS}`);
    const variantsAgree = sameSignatures(outputs.node as Signatures, outputs.copy as Signatures);
    if (!variantsAgree) throw new Error("the two straightforward variants hash different CSV text");

    const figures = (key: keyof typeof samples): MethodFigures => {
      const timing = summarize(samples[key]);
      return { timing, rowsPerSecond: rows / (timing.medianMs / 1000), cpuMedianMs: median(cpu[key]) };
    };
    const result = {
      land: figures("land"),
      signatureQuery: figures("query"),
      signatureQuerySql: figures("sql"),
      straightforwardNode: figures("node"),
      straightforwardCopy: figures("copy"),
    };
    const baseline = result.straightforwardNode.rowsPerSecond >= result.straightforwardCopy.rowsPerSecond ? "straightforwardNode" : "straightforwardCopy";
    const base = result[baseline].rowsPerSecond;
    const ratios = {
      signatureQuery: result.signatureQuery.rowsPerSecond / base,
      land: result.land.rowsPerSecond / base,
      signatureQueryVsNode: result.signatureQuery.rowsPerSecond / result.straightforwardNode.rowsPerSecond,
      signatureQueryVsCopy: result.signatureQuery.rowsPerSecond / result.straightforwardCopy.rowsPerSecond,
    };
    const cpuOf = (m: MethodFigures): number => m.cpuMedianMs;
    const cpuRatios = {
      signatureQuery: cpuOf(result[baseline]) / cpuOf(result.signatureQuery),
      land: cpuOf(result[baseline]) / cpuOf(result.land),
      signatureQueryVsNode: cpuOf(result.straightforwardNode) / cpuOf(result.signatureQuery),
      signatureQueryVsCopy: cpuOf(result.straightforwardCopy) / cpuOf(result.signatureQuery),
    };
    return {
      rows,
      partitions: landed.size,
      fileBytes,
      rounds: SIGNATURE_ROUNDS,
      loadMs,
      signing,
      ...result,
      baseline,
      ratios,
      cpuRatios,
      target: { ratio: SIGNATURE_TARGET, signatureQueryMet: ratios.signatureQuery >= SIGNATURE_TARGET },
      checks: { ...sample, queryMatchesLand, straightforwardVariantsAgree: variantsAgree },
    };
  } finally {
    await engine.close();
    duck.close();
  }
}

/** `rows` orders spread evenly over `days` days from 2026-01-01, days interleaved in the file (not sorted). */
function generatingSelect(rows: number, days: number): string {
  const seconds = days * 86_400;
  return [
    "SELECT range::BIGINT AS order_id,",
    "  CASE WHEN range % 97 = 0 THEN NULL ELSE (range * 7919) % 100000 END::BIGINT AS customer_id,",
    "  CAST(((range * 37) % 100000) / 100 AS DECIMAL(10,2)) AS amount,",
    "  CASE range % 20 WHEN 0 THEN 'cancelled' WHEN 1 THEN 'refunded' WHEN 2 THEN NULL ELSE 'completed' END AS status,",
    // 104729 is prime, so prime to the seconds of the period: every row gets its own second, days interleave.
    `  TIMESTAMP '2026-01-01' + to_seconds((range * 104729) % ${seconds}) + to_microseconds((range % 1000) * 1000) AS order_ts`,
    `FROM range(${rows})`,
  ].join("\n");
}

function columnList(): string {
  return COLUMNS.map((c) => quoteIdentifier(c.name)).join(", ");
}

function landRequest(file: string): LandRequest {
  return {
    files: [file],
    format: "parquet",
    header: true,
    delimiter: ",",
    columns: COLUMNS,
    partition: [{ key: "day", expression: DAY_EXPRESSION }],
    signatureColumns: COLUMNS.map((c) => c.name),
  };
}

/** lakeswap's landing path: DuckDbLanding.land() (read, validate, partition, sign), then releaseLanding() (drops its two tables). */
async function landSignatures(engine: DuckDbLanding, file: string): Promise<Signatures> {
  const delivery = await engine.land(landRequest(file));
  try {
    if (delivery.rowsRejected > 0) throw new Error(`land() rejected ${delivery.rowsRejected} rows of ${file}`);
    return new Map(delivery.partitions.map((p) => [`day=${p.partition.values[0]}`, p.signature]));
  } finally {
    await engine.releaseLanding(delivery);
  }
}

/**
 * The signature query of DuckDbLanding.land() (signatureQuery in src/landing/duckdb/duckdb-landing.ts),
 * over an already-loaded table; the benchmark checks that both give the same signatures.
 */
async function querySignatures(duck: BenchDuck, table: string, form: SignatureForm): Promise<Signatures> {
  const signed = signatureColumnOrder(COLUMNS.map((c) => ({ name: c.name, type: c.type, nullable: c.nullable })));
  const rows = await duck.rows(signatureQuery(table, ["day"], signed, form));
  return new Map(
    rows.map(([day, n, upper, lower]) => [`day=${String(day)}`, finishRawSignature(signed, Number(n), BigInt(String(upper)), BigInt(String(lower)))]),
  );
}

const ORDER_BY_ALL_COLUMNS = COLUMNS.map((c) => quoteIdentifier(c.name)).join(", ");

/**
 * The straightforward method as a data engineer writes it in Node: for each
 * partition, fetch its rows sorted by all columns, write them as CSV (header,
 * RFC 4180 quoting of text fields, NULL as an empty field) and sha256 the text
 * with node:crypto. Done efficiently: one prepared statement run once per
 * partition, values fetched as DuckDB's text (no per-value conversion in JS),
 * column-wise (getColumns: no array per row), CSV lines built with one template each.
 */
async function straightforwardNode(duck: BenchDuck, table: string): Promise<Signatures> {
  const days = await partitionsOf(duck, table);
  const texts = COLUMNS.map((c) => `CAST(${quoteIdentifier(c.name)} AS VARCHAR)`).join(", ");
  const statement = await duck.connection.prepare(`SELECT ${texts} FROM ${table} WHERE day = $1 ORDER BY ${ORDER_BY_ALL_COLUMNS}`);
  const header = COLUMNS.map((c) => c.name).join(",");
  const signatures: Signatures = new Map();
  try {
    for (const day of days) {
      statement.bindVarchar(1, day);
      const reader = await statement.runAndReadAll();
      const [orderId, customerId, amount, status, orderTs] = reader.getColumns() as (string | null)[][] as [
        (string | null)[], (string | null)[], (string | null)[], (string | null)[], (string | null)[],
      ];
      const rows = reader.currentRowCount;
      const lines = new Array<string>(rows + 2);
      lines[0] = header;
      // Numbers and timestamps never need quoting; the text column gets the CSV check.
      for (let i = 0; i < rows; i++) {
        lines[i + 1] = `${orderId[i] ?? ""},${customerId[i] ?? ""},${amount[i] ?? ""},${csvText(status[i] ?? null)},${orderTs[i] ?? ""}`;
      }
      lines[rows + 1] = "";
      signatures.set(`day=${day}`, createHash("sha256").update(lines.join("\n")).digest("hex"));
    }
  } finally {
    statement.destroySync();
  }
  return signatures;
}

/** A text field of CSV: empty for NULL, quoted when it holds a comma, quote or line break. */
function csvText(value: string | null): string {
  if (value === null) return "";
  return /[",\r\n]/.test(value) ? `"${value.replace(/"/g, '""')}"` : value;
}

/**
 * The straightforward method with the sort and the CSV left to DuckDB: for each
 * partition, `COPY (SELECT … ORDER BY all columns) TO day.csv (HEADER)`, then
 * sha256 of the file's bytes with node:crypto. The files are removed afterwards.
 */
async function straightforwardCopy(duck: BenchDuck, table: string, dir: string): Promise<Signatures> {
  await fs.mkdir(dir, { recursive: true });
  try {
    const days = await partitionsOf(duck, table);
    const signatures: Signatures = new Map();
    for (const day of days) {
      const file = path.join(dir, `${day}.csv`);
      await duck.run(
        `COPY (SELECT ${columnList()} FROM ${table} WHERE day = ${quoteLiteral(day)} ORDER BY ${ORDER_BY_ALL_COLUMNS}) ` +
          `TO ${quoteLiteral(file)} (FORMAT CSV, HEADER true)`,
      );
      signatures.set(`day=${day}`, createHash("sha256").update(await fs.readFile(file)).digest("hex"));
    }
    return signatures;
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}

async function partitionsOf(duck: BenchDuck, table: string): Promise<string[]> {
  return (await duck.rows(`SELECT DISTINCT day FROM ${table} ORDER BY day`)).map((row) => String(row[0]));
}

/**
 * Checks both methods on a sample of the file: the same rows in two orders give
 * the same signatures; one changed row changes exactly one partition's signature;
 * and the engine agrees with the reference implementation in src/model/signature.ts.
 */
async function checkSample(
  duck: BenchDuck,
  engine: DuckDbLanding,
  file: string,
  dir: string,
): Promise<Omit<SignatureChecks, "queryMatchesLand" | "straightforwardVariantsAgree">> {
  const source = `SELECT ${columnList()} FROM read_parquet(${quoteLiteral(file)}) WHERE order_id % ${SAMPLE_EVERY} = 0`;
  const changedId = SAMPLE_EVERY * 5;
  const changed = `SELECT order_id, customer_id, CASE WHEN order_id = ${changedId} THEN amount + 0.01 ELSE amount END AS amount, status, order_ts FROM (${source})`;
  const copies = {
    shuffled: `${source} ORDER BY hash(order_id)`,
    reversed: `${source} ORDER BY order_ts DESC, order_id DESC`,
    changed: `${changed} ORDER BY hash(order_id)`,
  };
  const lakeswap = new Map<string, Signatures>();
  const straight = new Map<string, Signatures>();
  const straightCopy = new Map<string, Signatures>();
  const get = (map: Map<string, Signatures>, name: string): Signatures => map.get(name) as Signatures;
  for (const [name, select] of Object.entries(copies)) {
    const copyFile = path.join(dir, `sample-${name}.parquet`);
    await duck.run(`COPY (${select}) TO ${quoteLiteral(copyFile)} (FORMAT PARQUET)`);
    lakeswap.set(name, await landSignatures(engine, copyFile));
    const table = `sample_${name}`;
    await duck.run(`CREATE TABLE ${table} AS SELECT *, CAST(${DAY_EXPRESSION} AS VARCHAR) AS day FROM read_parquet(${quoteLiteral(copyFile)})`);
    straight.set(name, await straightforwardNode(duck, table));
    straightCopy.set(name, await straightforwardCopy(duck, table, path.join(dir, `sample-csv-${name}`)));
    for (const form of new Set<SignatureForm>([duck.signatureForm, "sql"])) {
      if (!sameSignatures(await querySignatures(duck, table, form), get(lakeswap, name))) {
        throw new Error(`the isolated signature query (${form} form) disagrees with land() on sample ${name}`);
      }
    }
    if (!sameSignatures(get(straight, name), get(straightCopy, name))) throw new Error(`the two straightforward variants disagree on sample ${name}`);
  }
  const lakeswapOrderInsensitive = sameSignatures(get(lakeswap, "shuffled"), get(lakeswap, "reversed"));
  const straightforwardOrderInsensitive =
    sameSignatures(get(straight, "shuffled"), get(straight, "reversed")) && sameSignatures(get(straightCopy, "shuffled"), get(straightCopy, "reversed"));
  if (!lakeswapOrderInsensitive) throw new Error("lakeswap's signatures differ between two orders of the same rows");
  if (!straightforwardOrderInsensitive) throw new Error("the straightforward signatures differ between two orders of the same rows");
  const oneChange = differing(get(lakeswap, "shuffled"), get(lakeswap, "changed")) === 1 && differing(get(straight, "shuffled"), get(straight, "changed")) === 1;
  if (!oneChange) throw new Error("a one-row change did not alter exactly one partition's signature");

  // The reference implementation, on values DuckDB prints, made canonical by canonicalValue.
  const signed = get(lakeswap, "shuffled");
  const days = (await duck.rows(`SELECT DISTINCT day FROM sample_shuffled ORDER BY day LIMIT ${REFERENCE_DAYS}`)).map((row) => String(row[0]));
  for (const day of days) {
    const texts = COLUMNS.map((c) => `CAST(${quoteIdentifier(c.name)} AS VARCHAR)`).join(", ");
    const rows = (await duck.rows(`SELECT ${texts} FROM sample_shuffled WHERE day = ${quoteLiteral(day)}`)).map((row) =>
      row.map((value, i) => canonicalValue((COLUMNS[i] as (typeof COLUMNS)[number]).type, value === null ? null : String(value))),
    );
    const reference = rawSignature(COLUMNS, rows);
    if (signed.get(`day=${day}`) !== reference) throw new Error(`the engine's signature of day=${day} differs from the reference implementation`);
  }
  return {
    sampleRows: await duck.number("SELECT count(*) FROM sample_shuffled"),
    samplePartitions: signed.size,
    lakeswapOrderInsensitive,
    straightforwardOrderInsensitive,
    oneChangeOnePartition: oneChange,
    referencePartitions: days.length,
  };
}

function sameSignatures(a: Signatures, b: Signatures): boolean {
  return a.size === b.size && [...a].every(([key, value]) => b.get(key) === value);
}

function differing(a: Signatures, b: Signatures): number {
  const keys = new Set([...a.keys(), ...b.keys()]);
  return [...keys].filter((key) => a.get(key) !== b.get(key)).length;
}
