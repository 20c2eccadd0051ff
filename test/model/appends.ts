// The model test's commands of the append dataset (./append-model.ts): files added to the clicks folder (one or two:
// days of the pool in a variant each, or the rows of an earlier file under a new name; shuffled, sometimes gzip),
// `sync -c clicks.yaml` (sometimes with --allow-duplicates), rollback of a clicks partition; the same sync or rollback
// killed at a fault point, and a clicks sync beside another command. `rollback --sync last` and `gc` (./commands.ts)
// take the clicks syncs and partitions as the others. The lake's clicks_raw must hold, per day, the multiset of rows
// the model says: each distinct part (a file's rows of the day) once, whatever was killed, rolled back or run at once.
import fc from "fast-check";
import { CLICK_VARIANTS, CLICKS, clickVariantRows, shuffled, type ClickFile, type ClickRow } from "./append-model.js";
import {
  ConcurrentCommand,
  FAULTS,
  GcCommand,
  KillCommand,
  PlannedCommand,
  RollbackPartitionCommand,
  RollbackSyncCommand,
  SyncCommand,
  deliveryArbitrary,
  syncActions,
  type LakeCommand,
  type Real,
  type Step,
} from "./commands.js";
import { DAYS, type Day, type LakeModel } from "./model.js";

/** `lakeswap sync -c clicks.yaml [--allow-duplicates]`: the clicks folder's files, as a glob, appended (once there are some). */
export class AppendSyncCommand extends PlannedCommand {
  constructor(readonly allowDuplicates = false) {
    super();
  }
  override check(model: Readonly<LakeModel>): boolean {
    return model.clickFiles.length > 0;
  }
  plan(model: LakeModel, real: Real): Step {
    const args = ["sync", "-c", real.ws.appendConfigFile, "--json", ...(this.allowDuplicates ? ["--allow-duplicates"] : [])];
    return { args, expected: model.syncAppend(this.allowDuplicates), reported: syncActions, writes: [CLICKS] };
  }
  toString(): string {
    return `sync -c clicks.yaml${this.allowDuplicates ? " --allow-duplicates" : ""}`;
  }
}

/** A file to add to the clicks folder: days of the pool, each in a variant; or (`copyOf`) an earlier file's rows. */
interface ClickFileSpec {
  readonly days: readonly (readonly [Day, number])[];
  /** The rows of the earlier file number `copyOf` (modulo how many there are), when there is one. */
  readonly copyOf?: number;
  /** The rows' order in the file. */
  readonly order: number;
  readonly gzip: boolean;
}

/**
 * Adds one or two files to the clicks folder (the model's folder too), then runs `then` (a clicks sync: plain, killed
 * at a fault point, or beside another command).
 */
export class AddClickFilesCommand implements LakeCommand {
  /** What was added, once run: `c003.csv <01:v2,03:v0 order#5>`. */
  private added: string[] = [];
  constructor(readonly files: readonly ClickFileSpec[], readonly then: LakeCommand) {}
  /**
   * Not where a new file's first row of a day is another file's first row of that day while their rows of it differ:
   * lakeswap takes such a file for the other continued (copied or renamed, then grown: docs/write-modes.md), and
   * appends by difference what this model would append whole. That rule has its own property test
   * (test/pipeline/append-growth-property.test.ts); this model keeps to distinct parts, each once.
   */
  check(model: Readonly<LakeModel>): boolean {
    const files = [...model.clickFiles];
    for (const spec of this.files) files.push({ name: "", rows: fileRows(spec, files) });
    const heads = new Map<string, string>();
    for (const file of files) {
      for (const day of DAYS) {
        const rows = file.rows.filter((row) => row.ts.startsWith(day));
        if (rows.length === 0) continue;
        const head = `${day}\0${JSON.stringify(rows[0])}`;
        const content = rows.map((row) => JSON.stringify(row)).sort().join("\n");
        if ((heads.get(head) ?? content) !== content) return false;
        heads.set(head, content);
      }
    }
    return true;
  }
  async run(model: LakeModel, real: Real): Promise<void> {
    this.added = [];
    for (const spec of this.files) {
      const earlier = spec.copyOf === undefined || model.clickFiles.length === 0 ? undefined : model.clickFiles[spec.copyOf % model.clickFiles.length]!;
      // In the file's order: the first row of each day is what lakeswap knows a file by (AddClickFilesCommand.check).
      const rows = fileRows(spec, model.clickFiles);
      const name = real.ws.clickFileName(model.clickFiles.length, spec.gzip);
      real.ws.clickFile(name, rows);
      model.clickFiles.push({ name, rows });
      const what = earlier ? `the rows of ${earlier.name}` : spec.days.map(([day, variant]) => `${day.slice(-2)}:v${variant}`).join(",");
      this.added.push(`${name} <${what} order#${spec.order}>`);
    }
    real.log.push(`add ${this.added.join(" ")} to clicks/`);
    await this.then.run(model, real);
  }
  toString(): string {
    const files = this.added.length > 0 ? this.added.join(" ") : `${this.files.length} file(s)`;
    return `add ${files} to clicks/ ; ${this.then}`;
  }
}

/** The rows of a file `spec` adds beside `earlier` files, in the file's order. */
function fileRows(spec: ClickFileSpec, earlier: readonly ClickFile[]): ClickRow[] {
  const copied = spec.copyOf === undefined || earlier.length === 0 ? undefined : earlier[spec.copyOf % earlier.length]!;
  return shuffled(copied ? copied.rows : spec.days.flatMap(([day, variant]) => clickVariantRows(day, variant)), spec.order);
}

const day = fc.constantFrom(...DAYS);
const weighted = <T>(common: T, rare: T, weight: number) => fc.oneof({ arbitrary: fc.constant(common), weight }, { arbitrary: fc.constant(rare), weight: 1 });

const clickFileArbitrary: fc.Arbitrary<ClickFileSpec> = fc.record({
  days: fc.uniqueArray(fc.tuple(day, fc.integer({ min: 0, max: CLICK_VARIANTS - 1 })), { minLength: 1, maxLength: 2, selector: ([d]) => d }),
  copyOf: fc.oneof({ arbitrary: fc.constant(undefined), weight: 3 }, { arbitrary: fc.nat({ max: 5 }), weight: 1 }),
  order: fc.nat({ max: 99 }),
  gzip: weighted(false, true, 2),
});

/** `lakeswap rollback clicks_raw --partition day=…` of a partition that has a pointer: its last append is undone. */
export class AppendRollbackCommand extends RollbackPartitionCommand {
  override check(model: Readonly<LakeModel>): boolean {
    return model.currentRun(CLICKS, this.day) !== undefined;
  }
}

const appendSync = weighted(false, true, 4).map((allowDuplicates): PlannedCommand => new AppendSyncCommand(allowDuplicates));
const rollbackClicks = day.map((d): PlannedCommand => new AppendRollbackCommand(CLICKS, d));
const newFiles = fc.array(clickFileArbitrary, { minLength: 1, maxLength: 2 });
const addFiles = fc.tuple(newFiles, appendSync).map(([files, then]) => new AddClickFilesCommand(files, then));

/**
 * Files added then synced, twice; a clicks sync or a rollback of a clicks partition: three draws of a
 * sequence's list (a command whose check fails, a sync before any file or a rollback of a partition without a
 * pointer, is left out of the sequence).
 */
export function appendCommands(): fc.Arbitrary<LakeCommand>[] {
  return [addFiles, addFiles, fc.oneof(appendSync, rollbackClicks)];
}

/** Files added, then a clicks sync (mostly) or a rollback of a clicks partition killed at a random fault point. */
export function killedAppendCommands(): fc.Arbitrary<LakeCommand>[] {
  const inner = fc.oneof({ arbitrary: appendSync, weight: 3 }, { arbitrary: day.map((d): PlannedCommand => new RollbackPartitionCommand(CLICKS, d)), weight: 1 });
  const killed = fc.tuple(inner, fc.constantFrom(...FAULTS), fc.integer({ min: 1, max: 2 })).map(([c, point, nth]) => new KillCommand(c, point, nth));
  return [fc.tuple(newFiles, killed).map(([files, then]) => new AddClickFilesCommand(files, then))];
}

/** Files added, then a clicks sync beside another clicks sync, an items sync, a rollback (of a clicks partition, --sync last) or gc. */
export function concurrentAppendCommands(): fc.Arbitrary<LakeCommand>[] {
  const other = fc.oneof(
    { arbitrary: appendSync, weight: 2 },
    deliveryArbitrary.map((d): PlannedCommand => new SyncCommand(d)),
    day.map((d): PlannedCommand => new RollbackPartitionCommand(CLICKS, d)),
    fc.constant<PlannedCommand>(new RollbackSyncCommand()),
    fc.constant<PlannedCommand>(new GcCommand()),
  );
  const both = fc.tuple(appendSync, other).map(([a, b]) => new ConcurrentCommand(a, b));
  return [fc.tuple(newFiles, both).map(([files, then]) => new AddClickFilesCommand(files, then))];
}
