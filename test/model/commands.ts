// The model test's commands: each one runs a CLI command against the lake, applies the same command to the model,
// compares what the command said (exit code, actions) and then what the lake holds with the model.
import fc from "fast-check";
import { compare, type SignatureMap } from "./check.js";
import { viewEmbeddedLake } from "./lake-view.js";
import { DAYS, RAW, STAGE, VARIANTS, rawText, variantRows, type Day, type Expected, type LakeModel, type RawRow, type TableName } from "./model.js";
import type { CommandResult, Workspace } from "./workspace.js";

/** The system under test as the commands see it. */
export interface Real {
  readonly ws: Workspace;
  readonly signatures: SignatureMap;
  /** What ran so far, with what each command printed: shown with a failure. */
  readonly log: string[];
}

export type LakeCommand = fc.AsyncCommand<LakeModel, Real, false>;

/** Fails the command with what differs, the command's output, and the commands before it. */
function fail(real: Real, command: string, problems: readonly string[], result?: CommandResult): never {
  const output = result ? `\n  exit ${result.code}${result.signal ? ` (${result.signal})` : ""}\n  stdout: ${result.stdout.trim().slice(0, 3000)}\n  stderr: ${result.stderr.trim().slice(0, 3000)}` : "";
  throw new Error(`after \`${command}\`:\n  - ${problems.join("\n  - ")}${output}\n  commands run: ${real.log.join(" ; ")}`);
}

/** Compares a command's exit code and reported actions with the model's, then the lake with the model. */
async function verify(model: LakeModel, real: Real, command: string, expected: Expected, result: CommandResult, reported?: (json: unknown) => Map<string, string>): Promise<void> {
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
  problems.push(...compare(model, await viewEmbeddedLake(real.ws.lakeDir), real.signatures));
  if (problems.length > 0) fail(real, command, problems, result);
}

/** A delivery: some days of the pool, each in one variant, its rows in a shuffled order. */
export interface Delivery {
  readonly days: readonly (readonly [Day, number])[];
  readonly order: number;
}

export function deliveryRows(delivery: Delivery): RawRow[] {
  const rows = delivery.days.flatMap(([day, variant]) => variantRows(day, variant));
  let state = delivery.order + 1;
  const random = () => (state = (state * 1664525 + 1013904223) >>> 0) / 2 ** 32;
  return rows.map((row) => [random(), row] as const).sort((a, b) => a[0] - b[0]).map(([, row]) => row);
}

export const deliveryText = (delivery: Delivery): string =>
  `<${delivery.days.map(([day, variant]) => `${day.slice(-2)}:v${variant}`).join(",") || "empty"} order#${delivery.order}>`;

const syncActions = (json: unknown): Map<string, string> =>
  new Map(((json as { partitions: { table: string; partition: string; action: string; reason: string }[] }).partitions ?? []).map((p) => [`${p.table}/${p.partition}`, `${p.action}: ${p.reason}`]));

/** `lakeswap sync -c lakeswap.yaml --input <delivery>`. */
export class SyncCommand implements LakeCommand {
  constructor(readonly delivery: Delivery) {}
  check = () => true;
  async run(model: LakeModel, real: Real): Promise<void> {
    const rows = deliveryRows(this.delivery);
    const file = real.ws.delivery(rows);
    const byDay = new Map<Day, RawRow[]>();
    for (const row of rows) byDay.set(row.d, [...(byDay.get(row.d) ?? []), row]);
    const expected = model.sync(byDay);
    const result = await real.ws.run(["sync", "-c", real.ws.configFile, "--input", file, "--json"]);
    await verify(model, real, this.toString(), expected, result, syncActions);
  }
  toString(): string {
    return `sync --input ${deliveryText(this.delivery)}`;
  }
}

/** `lakeswap rollback <table> --partition day=…`. */
export class RollbackPartitionCommand implements LakeCommand {
  constructor(readonly table: TableName, readonly day: Day) {}
  check = () => true;
  async run(model: LakeModel, real: Real): Promise<void> {
    const expected = model.rollbackPartition(this.table, this.day);
    const result = await real.ws.run(["rollback", this.table, "--partition", `day=${this.day}`]);
    await verify(model, real, this.toString(), expected, result);
  }
  toString(): string {
    return `rollback ${this.table} --partition day=${this.day}`;
  }
}

const rollbackActions = (json: unknown): Map<string, string> =>
  new Map(((json as { partitions: { table: string; partition: string; action: string }[] }).partitions ?? []).map((p) => [`${p.table}/${p.partition}`, p.action]));

/** `lakeswap rollback --sync last`. */
export class RollbackSyncCommand implements LakeCommand {
  check = () => true;
  async run(model: LakeModel, real: Real): Promise<void> {
    const expected = model.rollbackSync();
    const result = await real.ws.run(["rollback", "--sync", "last", "--json"]);
    await verify(model, real, this.toString(), expected, result, rollbackActions);
  }
  toString(): string {
    return "rollback --sync last";
  }
}

/** The rows a replace writes: one row, key 7, value `value`. */
function replaceSelect(table: TableName, day: Day, value: number): { sql: string; rows: string[] } {
  if (table === RAW) {
    const row: RawRow = { k: 7, d: day, v: value, cat: "a" };
    return { sql: `SELECT 7::BIGINT AS k, DATE '${day}' AS d, ${value}::BIGINT AS v, 'a' AS cat`, rows: [rawText(row)] };
  }
  return { sql: `SELECT 7::BIGINT AS k, ${value}::BIGINT AS v10`, rows: [`7|${value}`] };
}

/** `lakeswap replace <table> --partition day=… --sql "SELECT …"`. */
export class ReplaceCommand implements LakeCommand {
  constructor(readonly table: TableName, readonly day: Day, readonly value: number) {}
  check = () => true;
  async run(model: LakeModel, real: Real): Promise<void> {
    const { sql, rows } = replaceSelect(this.table, this.day, this.value);
    const expected = model.replace(this.table, this.day, rows);
    const result = await real.ws.run(["replace", this.table, "--partition", `day=${this.day}`, "--sql", sql]);
    await verify(model, real, this.toString(), expected, result);
  }
  toString(): string {
    return `replace ${this.table} --partition day=${this.day} --sql "${replaceSelect(this.table, this.day, this.value).sql}"`;
  }
}

/** `lakeswap pin|unpin <table> --partition day=…`. */
export class PinCommand implements LakeCommand {
  constructor(readonly table: TableName, readonly day: Day, readonly pinned: boolean) {}
  check = () => true;
  async run(model: LakeModel, real: Real): Promise<void> {
    const expected = model.pin(this.table, this.day, this.pinned);
    const result = await real.ws.run([this.pinned ? "pin" : "unpin", this.table, "--partition", `day=${this.day}`]);
    await verify(model, real, this.toString(), expected, result);
  }
  toString(): string {
    return `${this.pinned ? "pin" : "unpin"} ${this.table} --partition day=${this.day}`;
  }
}

/** `lakeswap gc --grace 0`. */
export class GcCommand implements LakeCommand {
  check = () => true;
  async run(model: LakeModel, real: Real): Promise<void> {
    const expected = model.gc();
    const result = await real.ws.run(["gc", "--grace", "0"]);
    await verify(model, real, this.toString(), expected, result);
  }
  toString(): string {
    return "gc --grace 0";
  }
}

const day = fc.constantFrom(...DAYS);
const table = fc.constantFrom<TableName>(RAW, STAGE);

/** A delivery of 1 to 3 distinct days of the pool, each in a variant, in a random order. */
export const deliveryArbitrary: fc.Arbitrary<Delivery> = fc.record({
  days: fc.uniqueArray(fc.tuple(day, fc.integer({ min: 0, max: VARIANTS - 1 })), { minLength: 1, maxLength: 3, selector: ([d]) => d }),
  order: fc.nat({ max: 99 }),
});

/** The commands of group (a) and (b): syncs weigh most, as they are where the features meet. */
export function ordinaryCommands(): fc.Arbitrary<LakeCommand>[] {
  return [
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
