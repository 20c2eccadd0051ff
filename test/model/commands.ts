// The model test's commands: each one runs a CLI command against the lake, applies the same command to the model,
// compares what the command said (exit code, actions) and then what the lake holds with the model.
import fc from "fast-check";
import { CLICKS } from "./append-model.js";
import { compare, viewText, type SignatureMap } from "./check.js";
import { icebergProblems } from "./lake-view.js";
import {
  AUDIT_MAX_V,
  DAYS,
  RAW,
  STAGE,
  TABLES,
  UPSERT_VARIANTS,
  VARIANTS,
  rawText,
  upsertVariantRows,
  variantRows,
  type Day,
  type Expected,
  type LakeModel,
  type RawRow,
  type TableName,
  type WriteMode,
} from "./model.js";
import { Child } from "../support/crash-kit.js";
import type { CliResult } from "../support/lake-fixture.js";
import type { CommandResult, DeliveryFormat, Workspace } from "./workspace.js";

/** The system under test as the commands see it. */
export interface Real {
  readonly ws: Workspace;
  readonly signatures: SignatureMap;
  /** What ran so far, with what each command printed: shown with a failure. */
  readonly log: string[];
  /** A killed build may have left runs without a manifest, until `gc --grace 0` removes them. */
  leftovers: boolean;
  /** With a PostgreSQL sink of the stage layer (and maybe of raw): the rows its tables hold, per day (sorted row texts). */
  readonly sinkRows?: () => Promise<Partial<Record<TableName, Map<string, string[]>>>>;
  /** With a PostgreSQL sink: drops the target table of `table` (psql's DROP TABLE). */
  readonly dropSinkTable?: (table: TableName) => Promise<void>;
}

/**
 * After a sync ran to its end (exit 0 or 7), the sink's table must hold exactly the stage rows of the lake's
 * current runs (DESIGN.md invariant 10; README 'PostgreSQL sink').
 */
async function verifySink(real: Real, command: string, result: CommandResult): Promise<void> {
  if (!real.sinkRows || (result.code !== 0 && result.code !== 7)) return;
  const view = await real.ws.view();
  const targets = await real.sinkRows();
  const problems: string[] = [];
  for (const table of [RAW, STAGE] as const) {
    const target = targets[table];
    if (!target) continue;
    const lake = view.tables[table].rows;
    for (const day of DAYS) {
      const want = (lake.get(day) ?? []).join(" ");
      const got = (target.get(day) ?? []).join(" ");
      if (want !== got) problems.push(`the sink's table of ${table}, day=${day}: holds [${got}], the lake [${want}]`);
    }
    for (const day of target.keys()) if (!(DAYS as readonly string[]).includes(day)) problems.push(`the sink's table of ${table} holds a day the lake never had: ${day}`);
  }
  if (problems.length > 0) fail(real, command, problems, result);
}

export type LakeCommand = fc.AsyncCommand<LakeModel, Real, false>;

/** Fails the command with what differs, the command's output, and the commands before it. */
function fail(real: Real, command: string, problems: readonly string[], result?: CommandResult): never {
  const output = result ? `\n  exit ${result.code}${result.signal ? ` (${result.signal})` : ""}\n  stdout: ${result.stdout.trim().slice(0, 3000)}\n  stderr: ${result.stderr.trim().slice(0, 3000)}` : "";
  throw new Error(`after \`${command}\`:\n  - ${problems.join("\n  - ")}${output}\n  commands run: ${real.log.join(" ; ")}`);
}

/** Compares a command's exit code and reported actions with the model's, then the lake with the model. */
export async function verify(
  model: LakeModel,
  real: Real,
  command: string,
  expected: Expected,
  result: CommandResult,
  reported: ((json: unknown) => Map<string, string>) | undefined,
  allowLeftovers: boolean,
): Promise<void> {
  real.log.push(command);
  const problems: string[] = [];
  if (result.code !== expected.exitCode) problems.push(`expected exit ${expected.exitCode}, got ${result.code}`);
  if (expected.actions && reported && result.code === expected.exitCode) {
    let actual: Map<string, string> | undefined;
    try {
      actual = reported(JSON.parse(result.stdout));
    } catch (error) {
      problems.push(`the --json report is not readable: ${String(error)}`);
    }
    if (actual) {
      const keys = [...new Set([...expected.actions.keys(), ...actual.keys()])].sort();
      for (const key of keys) {
        if (expected.actions.get(key) !== actual.get(key)) problems.push(`${key}: expected ${expected.actions.get(key) ?? "(not reported)"}, reported ${actual.get(key) ?? "(not reported)"}`);
      }
    }
  }
  const view = await real.ws.view();
  problems.push(...compare(model, view, real.signatures, { allowLeftovers }));
  // A sync that ran to its end (its leases held over both tables) leaves each table's Iceberg view on its current runs.
  if (real.ws.iceberg && !real.ws.aws && command.startsWith("sync") && !result.signal && (result.code === 0 || result.code === 7)) {
    for (const table of [RAW, STAGE]) problems.push(...(await icebergProblems(real.ws.lakeDir, table)));
  }
  if (problems.length > 0) fail(real, command, problems, result);
  // The records were just compared in sync id order; the model takes the lake's records (with their ids) as its own.
  model.adoptSyncs(view.syncs);
}

/** A delivery: some days of the pool, each in one variant, its rows in a shuffled order. */
export interface Delivery {
  readonly days: readonly (readonly [Day, number])[];
  readonly order: number;
  /** Column names in upper case in the file (CSV header, JSONL fields). */
  readonly upperCase?: boolean;
  /** A JSONL delivery written as one JSON array of the objects (the same rows, the same content). */
  readonly array?: boolean;
  /** The file gzip-compressed (`.gz`): the same rows, the same content. */
  readonly gzip?: boolean;
  /** `sync --allow-empty`: stage builds of 0 rows are accepted (a day whose rows are all category 'b'). */
  readonly allowEmpty?: boolean;
  /** Its first day also holds a row whose v is over the raw audit's max (./model.ts AUDIT_MAX_V): that day fails. */
  readonly bad?: boolean;
  /** `sync --hold` (./held.ts). */
  readonly hold?: boolean;
}

export function deliveryRows(delivery: Delivery, mode: WriteMode): RawRow[] {
  const rows = delivery.days.flatMap(([day, variant]) => (mode === "upsert" ? upsertVariantRows(day, variant) : variantRows(day, variant % VARIANTS)));
  const first = delivery.days[0]?.[0];
  if (delivery.bad && first) rows.push({ k: 10 * (DAYS.indexOf(first) + 1) + 9, d: first, v: 10 * AUDIT_MAX_V, cat: "a" });
  let state = delivery.order + 1;
  const random = () => (state = (state * 1664525 + 1013904223) >>> 0) / 2 ** 32;
  return rows.map((row) => [random(), row] as const).sort((a, b) => a[0] - b[0]).map(([, row]) => row);
}

const deliveryText = (delivery: Delivery, mode: WriteMode = "partition_replace"): string =>
  `<${delivery.days.map(([day, variant]) => `${day.slice(-2)}:v${mode === "upsert" ? variant : variant % VARIANTS}`).join(",") || "empty"} order#${delivery.order}${delivery.upperCase ? " UPPER" : ""}${delivery.array ? " ARRAY" : ""}${delivery.gzip ? " GZ" : ""}${delivery.bad ? " BAD" : ""}>${delivery.allowEmpty ? " --allow-empty" : ""}`;

export const syncActions = (json: unknown): Map<string, string> =>
  new Map(((json as { partitions: { table: string; partition: string; action: string; reason: string }[] }).partitions ?? []).map((p) => [`${p.table}/${p.partition}`, `${p.action}: ${p.reason}`]));

/** What a command runs and what the model says it must do: its CLI arguments, exit code, actions, the tables it writes in order. */
export interface Step {
  readonly args: readonly string[];
  readonly expected: Expected;
  readonly reported?: (json: unknown) => Map<string, string>;
  /** The tables the command moves pointers of, in the order it moves them (a kill may stop it between two). */
  readonly writes: readonly TableName[];
}

/** A command of the lake that can also be run in a child process (and killed there, or run beside another). */
export abstract class PlannedCommand implements LakeCommand {
  /** Applies the command to `model` and says what to run. */
  abstract plan(model: LakeModel, real: Real): Step;
  abstract toString(): string;
  check(_model: Readonly<LakeModel>): boolean {
    return true;
  }
  async run(model: LakeModel, real: Real): Promise<void> {
    const step = this.plan(model, real);
    const result = await real.ws.run(step.args);
    await verify(model, real, this.toString(), step.expected, result, step.reported, real.leftovers);
    if (step.args[0] === "sync") await verifySink(real, this.toString(), result);
  }
}

/** `lakeswap sync -c lakeswap.yaml --input <delivery>`. */
export class SyncCommand extends PlannedCommand {
  private mode: WriteMode = "partition_replace";
  private format: DeliveryFormat = "csv";
  constructor(readonly delivery: Delivery) {
    super();
  }
  plan(model: LakeModel, real: Real): Step {
    this.mode = model.mode;
    this.format = real.ws.format;
    const rows = deliveryRows(this.delivery, model.mode);
    const file = real.ws.delivery(rows, this.delivery.upperCase, this.delivery.array, this.delivery.gzip);
    const allowEmpty = this.delivery.allowEmpty === true;
    const hold = this.delivery.hold === true;
    const expected = model.sync(rows, { allowEmpty, hold });
    // A run an audit refused is kept (no manifest) until gc --grace 0.
    if ([...(expected.actions?.values() ?? [])].some((action) => action.startsWith("failed"))) real.leftovers = true;
    return {
      args: ["sync", "-c", real.ws.configFile, "--input", file, "--json", ...(allowEmpty ? ["--allow-empty"] : []), ...(hold ? ["--hold"] : [])],
      expected,
      reported: syncActions,
      writes: [RAW, STAGE],
    };
  }
  toString(): string {
    return `sync ${this.delivery.hold ? "--hold " : ""}--input ${deliveryText(this.delivery, this.mode)}${this.format === "jsonl" ? " (JSONL)" : ""}`;
  }
}

/** `lakeswap rollback <table> --partition day=…`. */
export class RollbackPartitionCommand extends PlannedCommand {
  constructor(readonly table: TableName, readonly day: Day) {
    super();
  }
  plan(model: LakeModel): Step {
    return { args: ["rollback", this.table, "--partition", `day=${this.day}`], expected: model.rollbackPartition(this.table, this.day), writes: [this.table] };
  }
  toString(): string {
    return `rollback ${this.table} --partition day=${this.day}`;
  }
}

const rollbackActions = (json: unknown): Map<string, string> =>
  new Map(((json as { partitions: { table: string; partition: string; action: string }[] }).partitions ?? []).map((p) => [`${p.table}/${p.partition}`, p.action]));

/** `lakeswap rollback --sync last` (of an items sync, or of a clicks sync: ./appends.ts). */
export class RollbackSyncCommand extends PlannedCommand {
  plan(model: LakeModel): Step {
    return { args: ["rollback", "--sync", "last", "--json"], expected: model.rollbackSync(), reported: rollbackActions, writes: [STAGE, RAW, CLICKS] };
  }
  toString(): string {
    return "rollback --sync last";
  }
}

/** The rows a replace writes: one row, key 7, value `value`. */
function replaceSelect(table: TableName, day: Day, value: number, mode: WriteMode): { sql: string; rows: string[] } {
  if (table === RAW) {
    const row: RawRow = { k: 7, d: day, v: value, cat: "a", del: false };
    const del = mode === "upsert" ? ", false AS del" : "";
    return { sql: `SELECT CAST(7 AS BIGINT) AS k, DATE '${day}' AS d, CAST(${value} AS BIGINT) AS v, 'a' AS cat${del}`, rows: [rawText(row, mode)] };
  }
  return { sql: `SELECT CAST(7 AS BIGINT) AS k, CAST(${value} AS BIGINT) AS v10`, rows: [`7|${value}`] };
}

/** `lakeswap replace <table> --partition day=… --sql "SELECT …"`. */
export class ReplaceCommand extends PlannedCommand {
  private mode: WriteMode = "partition_replace";
  constructor(readonly table: TableName, readonly day: Day, readonly value: number) {
    super();
  }
  plan(model: LakeModel): Step {
    this.mode = model.mode;
    const { sql, rows } = replaceSelect(this.table, this.day, this.value, model.mode);
    return { args: ["replace", this.table, "--partition", `day=${this.day}`, "--sql", sql], expected: model.replace(this.table, this.day, rows), writes: [this.table] };
  }
  toString(): string {
    return `replace ${this.table} --partition day=${this.day} --sql "${replaceSelect(this.table, this.day, this.value, this.mode).sql}"`;
  }
}

/** `lakeswap pin|unpin <table> --partition day=…`. */
class PinCommand extends PlannedCommand {
  constructor(readonly table: TableName, readonly day: Day, readonly pinned: boolean) {
    super();
  }
  plan(model: LakeModel): Step {
    return { args: [this.pinned ? "pin" : "unpin", this.table, "--partition", `day=${this.day}`], expected: model.pin(this.table, this.day, this.pinned), writes: [] };
  }
  toString(): string {
    return `${this.pinned ? "pin" : "unpin"} ${this.table} --partition day=${this.day}`;
  }
}

/** `lakeswap gc --grace 0`: also removes what killed builds left. */
export class GcCommand extends PlannedCommand {
  plan(model: LakeModel, real: Real): Step {
    real.leftovers = false;
    return { args: ["gc", "--grace", "0"], expected: model.gc(), writes: [] };
  }
  toString(): string {
    return "gc --grace 0";
  }
}

/**
 * `LAKESWAP_FAULT=<point>:kill@<n> lakeswap <command>` in a child process, then `lakeswap gc` (any writing command
 * replays what the killed one left pending). Unless the point was never reached (then the command ran whole), the lake
 * must hold, per table, the old or the new whole result; tables in the order the command writes them (a sync: raw
 * new and stage old is a legal stop; stage new and raw old is not); nothing pending; the sync's record of what it moved.
 */
export class KillCommand implements LakeCommand {
  constructor(readonly inner: PlannedCommand, readonly point: string, readonly nth: number) {}
  check(): boolean {
    return true;
  }
  async run(model: LakeModel, real: Real): Promise<void> {
    const before = model.clone();
    const signaturesBefore = real.signatures.clone();
    const step = this.inner.plan(model, real);
    const after = model.clone();
    const result = await real.ws.spawn(step.args, { LAKESWAP_FAULT: `${this.point}:kill@${this.nth}` });
    if (result.signal !== "SIGKILL") {
      await verify(model, real, this.toString(), step.expected, result, step.reported, real.leftovers);
      return;
    }
    real.leftovers = true;
    // The recovering gc holds each table's lease: a view of lake.duckdb the killed command left stale is rewritten
    // (compared below with the rest; this model found that it was not, test/lake/catalog-file.test.ts). A killed sync's
    // are the exception (docs/lake.md, "Never in the way"): where its runs are current, the views stay as they were
    // until a sync of the dataset finishes (or a command moves the table), so the dataset is never shown half synced.
    const killedSync = step.args[0] === "sync";
    const recovery = await real.ws.run(["gc"]);
    real.log.push(`${this.toString()} (killed)`, "gc");
    if (recovery.code !== 0) fail(real, `${this.toString()} ; gc`, [`the recovering gc exited ${recovery.code}`], recovery);
    const view = await real.ws.view();
    const outcomes: { name: string; problems: string[] }[] = [];
    // A first sync declares its tables once its deliveries have landed: killed before, it leaves none.
    const tablesExist = before.tablesExist || (after.tablesExist && (await declaredTables(real)).includes(RAW));
    for (let moved = 0; moved <= step.writes.length; moved += 1) {
      const candidate = before.clone();
      candidate.tablesExist = tablesExist;
      for (const table of step.writes.slice(0, moved)) candidate.tables[table] = after.clone().tables[table];
      for (const table of killedSync ? step.writes : []) {
        candidate.heldBackViews.set(table, before.heldBackViews.get(table) ?? viewText((day) => [...(before.currentRun(table, day)?.rows ?? [])].sort()));
      }
      const signatures = signaturesBefore.clone();
      const problems = compare(candidate, view, signatures, { allowLeftovers: true, skipSyncRecords: true });
      const name = moved === 0 ? "the old state" : moved === step.writes.length ? "the new state" : `${step.writes.slice(0, moved).join(", ")} new, the rest old`;
      if (problems.length === 0) {
        model.restore(candidate);
        model.adoptSyncs(view.syncs);
        real.signatures.restore(signatures);
        return;
      }
      outcomes.push({ name, problems });
    }
    fail(real, `${this.toString()} ; gc`, outcomes.map((o) => `not ${o.name}:\n      ${o.problems.join("\n      ")}`), result);
  }
  toString(): string {
    return `LAKESWAP_FAULT=${this.point}:kill@${this.nth} ${this.inner.toString()}`;
  }
}

/** The tables the lake declares (`lakeswap tables --json`). */
async function declaredTables(real: Real): Promise<string[]> {
  const listed = await real.ws.run(["tables", "--json"]);
  if (listed.code !== 0) fail(real, "tables --json", [`exited ${listed.code}`], listed);
  return (JSON.parse(listed.stdout) as { name: string }[]).map((t) => t.name);
}

const day = fc.constantFrom(...DAYS);
const table = fc.constantFrom<TableName>(RAW, STAGE);

/** A delivery of 1 to 3 distinct days of the pool, each in a variant, in a random order. */
export const deliveryArbitrary: fc.Arbitrary<Delivery> = fc.record({
  days: fc.uniqueArray(fc.tuple(day, fc.integer({ min: 0, max: UPSERT_VARIANTS - 1 })), { minLength: 1, maxLength: 3, selector: ([d]) => d }),
  order: fc.nat({ max: 99 }),
  upperCase: fc.boolean(),
  array: fc.boolean(),
  gzip: fc.oneof({ arbitrary: fc.constant(false), weight: 3 }, { arbitrary: fc.constant(true), weight: 1 }),
  allowEmpty: fc.oneof({ arbitrary: fc.constant(false), weight: 3 }, { arbitrary: fc.constant(true), weight: 1 }),
  bad: fc.oneof({ arbitrary: fc.constant(false), weight: 4 }, { arbitrary: fc.constant(true), weight: 1 }),
});

/**
 * A column added to the raw table's declaration (issue 31): the next sync changes its schema in place. The model does
 * not see it: every later command must do exactly what it would have done without it (no rebuild, no other
 * signature, the same rows, sinks and rollbacks), with deliveries that lack the column (NULL there) and runs written
 * before it. Once per sequence; a second one changes nothing. Only once the tables exist: a column declared when the
 * table is created is not an added one, and a delivery must hold it.
 */
class AddColumnCommand implements LakeCommand {
  check(model: Readonly<LakeModel>): boolean {
    return model.tablesExist;
  }
  async run(_model: LakeModel, real: Real): Promise<void> {
    real.ws.addRawColumn("note VARCHAR");
    real.log.push("(config: the raw table gains column note VARCHAR)");
  }
  toString(): string {
    return "add column note VARCHAR to the raw table's declaration";
  }
}

/** The commands of group (a) and (b): syncs weigh most, as they are where the features meet. */
export function ordinaryCommands(): fc.Arbitrary<LakeCommand>[] {
  return [
    fc.constant(new AddColumnCommand()),
    deliveryArbitrary.map((d) => new SyncCommand(d)),
    deliveryArbitrary.map((d) => new SyncCommand(d)),
    deliveryArbitrary.map((d) => new SyncCommand(d)),
    fc.tuple(table, day).map(([t, d]) => new RollbackPartitionCommand(t, d)),
    fc.constant(new RollbackSyncCommand()),
    fc.tuple(table, day, fc.integer({ min: 1, max: 3 })).map(([t, d, v]) => new ReplaceCommand(t, d, v)),
    fc.tuple(table, day, fc.boolean()).map(([t, d, p]) => new PinCommand(t, d, p)),
    fc.constant(new GcCommand()),
  ];
}

/** Runs two commands, each in a child process, and waits for both. */
async function runBoth(real: Real, a: Step, b: Step): Promise<[CliResult, CliResult]> {
  return Promise.all([real.ws.spawn(a.args), real.ws.spawn(b.args)]);
}

/**
 * Two commands at once from two processes: the lake must end as one of the two serial orders (exit codes included),
 * every decision made under the leases (README 'Two syncs at once', DESIGN.md invariant 7).
 */
export class ConcurrentCommand implements LakeCommand {
  constructor(readonly first: PlannedCommand, readonly second: PlannedCommand) {}
  check(): boolean {
    return true;
  }
  async run(model: LakeModel, real: Real): Promise<void> {
    const orders = [
      { name: `${this.first} then ${this.second}`, model: model.clone() },
      { name: `${this.second} then ${this.first}`, model: model.clone() },
    ];
    const [a1, b1] = [this.first.plan(orders[0]!.model, real), this.second.plan(orders[0]!.model, real)];
    const [b2, a2] = [this.second.plan(orders[1]!.model, real), this.first.plan(orders[1]!.model, real)];
    const steps: (readonly [Step, Step])[] = [[a1, b1], [a2, b2]];
    // gc collects each table under its own lease, one after another: beside a command that writes several tables, it
    // may collect the first ones before that command and the rest after it (each table still one of the serial orders).
    const [gc, other] = this.first instanceof GcCommand ? [this.first, this.second] : [this.second, this.first];
    if (gc instanceof GcCommand && !(other instanceof GcCommand)) {
      for (let split = 1; split < TABLES.length; split += 1) {
        const order = { name: `gc --grace 0 of ${TABLES.slice(0, split).join(", ")}, then ${other}, then gc --grace 0 of the rest`, model: model.clone() };
        order.model.gc(TABLES.slice(0, split));
        const otherStep = other.plan(order.model, real);
        const gcStep = { args: ["gc", "--grace", "0"], expected: order.model.gc(TABLES.slice(split)), writes: [] };
        orders.push(order);
        steps.push(gc === this.first ? [gcStep, otherStep] : [otherStep, gcStep]);
      }
    }
    const results = await runBoth(real, a1, b1);
    real.log.push(this.toString());
    const view = await real.ws.view();
    const outcomes: string[] = [];
    for (const [index, order] of orders.entries()) {
      const [stepA, stepB] = steps[index]!;
      const problems: string[] = [];
      if (results[0].code !== stepA.expected.exitCode) problems.push(`${this.first}: expected exit ${stepA.expected.exitCode}, got ${results[0].code}`);
      if (results[1].code !== stepB.expected.exitCode) problems.push(`${this.second}: expected exit ${stepB.expected.exitCode}, got ${results[1].code}`);
      const signatures = real.signatures.clone();
      problems.push(...compare(order.model, view, signatures, { allowLeftovers: real.leftovers }));
      if (problems.length === 0) {
        model.restore(order.model);
        model.adoptSyncs(view.syncs);
        real.signatures.restore(signatures);
        if (this.first instanceof SyncCommand && this.second instanceof SyncCommand) await verifySink(real, this.toString(), results[1]);
        return;
      }
      outcomes.push(`not as ${order.name}:\n      ${problems.join("\n      ")}`);
    }
    const output = results.map((r, i) => `${i === 0 ? this.first : this.second}: exit ${r.code}${r.signal ? ` (${r.signal})` : ""}; stderr: ${r.stderr.trim().slice(0, 1500)}`);
    fail(real, this.toString(), [...outcomes, ...output]);
  }
  toString(): string {
    return `{ ${this.first} & ${this.second} }`;
  }
}

/**
 * `rollback --sync last` started while a sync runs (issue 25 item 1): the sync stops itself (SIGSTOP) at its first
 * `after-manifest` (its raw pointers moved and recorded, its stage not yet) and says so on stderr, the handshake; the
 * rollback is started and given the time to read the record and either wait for a lease (its "waiting for table"
 * line) or end; then the sync goes on. The lake must end as the sync then the rollback (a rollback that waits for
 * every table the sync writes), or as the sync alone with the rollback refused (non-zero exit): never a mix.
 */
export class RollbackDuringSyncCommand implements LakeCommand {
  constructor(readonly delivery: Delivery) {}
  check(): boolean {
    return true;
  }
  async run(model: LakeModel, real: Real): Promise<void> {
    const syncOnly = model.clone();
    const sync = new SyncCommand(this.delivery).plan(syncOnly, real);
    const both = syncOnly.clone();
    const rollback = new RollbackSyncCommand().plan(both);
    const syncChild = new Child(real.ws.start(sync.args, { LAKESWAP_FAULT: "after-manifest:stop@1" }));
    let rollbackResult: CliResult | undefined;
    try {
      // The handshake: the sync has stopped at its first after-manifest (or ended without reaching one).
      await syncChild.untilStopped("after-manifest", 60_000, true);
      const rollbackChild = new Child(real.ws.start(rollback.args));
      await rollbackChild.until("the rollback waits for a lease or ends", () => /waiting for (table|sync)/.test(rollbackChild.stderr) || rollbackChild.process.exitCode !== null, 60_000).catch(() => undefined);
      syncChild.process.kill("SIGCONT");
      const [, exit] = await Promise.all([syncChild.exited, rollbackChild.exited]);
      rollbackResult = { code: exit.code, signal: exit.signal, stdout: rollbackChild.lines.join("\n"), stderr: rollbackChild.stderr };
    } finally {
      syncChild.process.kill("SIGCONT");
    }
    const syncExit = await syncChild.exited;
    real.log.push(this.toString());
    const view = await real.ws.view();
    const outcomes: string[] = [];
    const candidates = [
      { name: "the sync, then the rollback of it", model: both, rollbackExit: (code: number | null) => code === rollback.expected.exitCode },
      { name: "the sync alone, the rollback refused", model: syncOnly, rollbackExit: (code: number | null) => code !== 0 },
    ];
    for (const candidate of candidates) {
      const problems: string[] = [];
      if (syncExit.code !== sync.expected.exitCode) problems.push(`the sync: expected exit ${sync.expected.exitCode}, got ${syncExit.code}`);
      if (!candidate.rollbackExit(rollbackResult.code)) problems.push(`the rollback exited ${rollbackResult.code}`);
      const signatures = real.signatures.clone();
      problems.push(...compare(candidate.model, view, signatures, { allowLeftovers: real.leftovers }));
      if (problems.length === 0) {
        model.restore(candidate.model);
        model.adoptSyncs(view.syncs);
        real.signatures.restore(signatures);
        return;
      }
      outcomes.push(`not ${candidate.name}:\n      ${problems.join("\n      ")}`);
    }
    fail(real, this.toString(), [...outcomes, `the sync: exit ${syncExit.code}; stderr: ${syncChild.stderr.trim().slice(0, 1500)}`], rollbackResult);
  }
  toString(): string {
    return `{ sync --input ${deliveryText(this.delivery)} & (once its record shows moves) rollback --sync last }`;
  }
}

/**
 * Group (d): two syncs, or a sync and a rollback (--sync last, or of a partition), a replace, `gc --grace 0` or a pin, at once;
 * and `rollback --sync last` started while a sync runs (issue 25 item 1).
 */
export function concurrentCommands(): fc.Arbitrary<LakeCommand>[] {
  const sync = deliveryArbitrary.map((d) => new SyncCommand(d));
  const other = fc.oneof(
    sync,
    fc.constant<PlannedCommand>(new RollbackSyncCommand()),
    fc.tuple(table, day).map(([t, d]): PlannedCommand => new RollbackPartitionCommand(t, d)),
    fc.tuple(table, day, fc.integer({ min: 1, max: 3 })).map(([t, d, v]): PlannedCommand => new ReplaceCommand(t, d, v)),
    fc.constant<PlannedCommand>(new GcCommand()),
    fc.tuple(table, day, fc.boolean()).map(([t, d, pinned]): PlannedCommand => new PinCommand(t, d, pinned)),
  );
  return [
    fc.tuple(sync, other).map(([a, b]) => new ConcurrentCommand(a, b)),
    deliveryArbitrary.map((d) => new RollbackDuringSyncCommand(d)),
  ];
}

/** Fault points a command may be killed at (src/shared/faults.ts), and how many times one is passed before the kill. */
export const FAULTS = ["lease-acquired", "schema-after-record", "schema-after-change", "during-build", "after-build", "after-outbox", "before-swap-rename", "during-batch-swap", "after-swap", "after-manifest", "before-release", "signing-beside-write-ahead"];

/** Group (c): a sync, a rollback (partition or --sync) or a replace killed at a random fault point. */
export function killedCommands(): fc.Arbitrary<LakeCommand>[] {
  const inner = fc.oneof(
    { arbitrary: deliveryArbitrary.map((d): PlannedCommand => new SyncCommand(d)), weight: 3 },
    fc.tuple(table, day).map(([t, d]): PlannedCommand => new RollbackPartitionCommand(t, d)),
    fc.constant<PlannedCommand>(new RollbackSyncCommand()),
    fc.tuple(table, day, fc.integer({ min: 1, max: 3 })).map(([t, d, v]): PlannedCommand => new ReplaceCommand(t, d, v)),
  );
  return [fc.tuple(inner, fc.constantFrom(...FAULTS), fc.integer({ min: 1, max: 2 })).map(([c, point, nth]) => new KillCommand(c, point, nth))];
}
