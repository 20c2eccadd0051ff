// The reference model of the model test: what each table of a small pipeline must hold after each command, written
// from the README's rules (Pipelines, rollback, replace, pin, Retention), with no lakeswap code. Pure: no I/O.
import { CLICKS, planAppendDay, type ClickFile } from "./append-model.js";

/**
 * The tables of the pipeline: raw (landed deliveries, by day) and stage (a filter + project of raw, by day); and the
 * append dataset's table (./append-model.ts), synced by a config of its own.
 */
export const RAW = "items_raw";
export const STAGE = "items_stage";
export type TableName = typeof RAW | typeof STAGE | typeof CLICKS;
export const TABLES: readonly TableName[] = [RAW, STAGE, CLICKS];

/** The days of the pool deliveries are drawn from. */
export const DAYS = ["2026-11-01", "2026-11-02", "2026-11-03"] as const;
export type Day = (typeof DAYS)[number];

/** How deliveries are written to raw (README 'Write modes'): replace each day delivered, or merge by key `k` with deletes. */
export type WriteMode = "partition_replace" | "upsert";

/** One raw row as delivered: key, date (the partition), value, category (stage keeps category 'a'); upsert: the delete flag. */
export interface RawRow {
  readonly k: number;
  readonly d: Day;
  readonly v: number;
  readonly cat: "a" | "b";
  readonly del?: boolean;
}

/** A row as the model compares it: its values joined by '|' (raw `k|d|v|cat`, stage `k|v10`). */
export type RowText = string;

/** A raw row as the lake holds it (upsert tables also hold the delete flag column, false for every row kept). */
export const rawText = (r: RawRow, mode: WriteMode = "partition_replace"): RowText =>
  `${r.k}|${r.d}|${r.v}|${r.cat}${mode === "upsert" ? `|${r.del === true}` : ""}`;

/** The stage layer's SQL, as the model computes it: `SELECT k, v * 10 AS v10 FROM items_raw WHERE day = {{ day }} AND cat = 'a'`. */
function stageOf(raw: readonly RowText[]): RowText[] {
  return raw
    .map((text) => text.split("|"))
    .filter(([, , , cat]) => cat === "a")
    .map(([k, , v]) => `${k}|${Number(v) * 10}`);
}

/** The variants of one day's content in the pool: a delivery gives each of its days one of them. */
export const VARIANTS = 5;
export const UPSERT_VARIANTS = 7;

/**
 * Upsert: the rows of `day` in variant `variant`, keys `10 * (day's index + 1) + i` (so that days do not share keys
 * unless a variant says so): 0 the base; 1 one value changed; 2 a key added; 3 key 1 deleted; 4 the next day's key 1
 * moved here; 5 a delete of the next day's key 2 naming this day (where it does not live); 6 two different rows of
 * key 1 (refused: nothing is loaded).
 */
export function upsertVariantRows(day: Day, variant: number): RawRow[] {
  const index = DAYS.indexOf(day);
  const key = (dayIndex: number, i: number) => 10 * (dayIndex + 1) + i;
  const next = (index + 1) % DAYS.length;
  const row = (k: number, v: number, cat: "a" | "b", del = false): RawRow => ({ k, d: day, v, cat, del });
  const base = [row(key(index, 1), key(index, 1), "a"), row(key(index, 2), key(index, 2), "a"), row(key(index, 3), key(index, 3), "b")];
  switch (variant) {
    case 0: return base;
    case 1: return [base[0]!, row(key(index, 2), 99, "a"), base[2]!];
    case 2: return [...base, row(key(index, 4), key(index, 4), "a")];
    case 3: return [row(key(index, 1), 0, "a", true), base[1]!];
    case 4: return [row(key(next, 1), 55, "a")];
    case 5: return [row(key(next, 2), 0, "b", true)];
    default: return [base[0]!, row(key(index, 1), 77, "a")];
  }
}

/**
 * The rows of `day` in variant `variant`: 0 the base; 1 one value changed; 2 a row added; 3 only category 'b'
 * (stage would be empty); 4 the base with one row twice (a duplicate row is a row: signatures count it).
 */
export function variantRows(day: Day, variant: number): RawRow[] {
  const base = 10 * (DAYS.indexOf(day) + 1);
  const row = (k: number, v: number, cat: "a" | "b"): RawRow => ({ k, d: day, v: base + v, cat });
  const rows = [row(1, 1, "a"), row(2, 2, "a"), row(3, 3, "b")];
  switch (variant) {
    case 0: return rows;
    case 1: return [row(1, 1, "a"), row(2, 9, "a"), row(3, 3, "b")];
    case 2: return [...rows, row(4, 4, "a")];
    case 3: return [row(5, 5, "b"), row(6, 6, "b")];
    default: return [...rows, row(1, 1, "a")];
  }
}

/**
 * The ingest pipeline as the model knows it (README 'Event ingest'): its tables exist once an ingest opened them; the
 * namespace table holds every good event of every batch exactly once (appended), the dead-letter table every bad one,
 * by its original line.
 */
export interface IngestState {
  opened: boolean;
  readonly events: RowText[];
  readonly deadLetters: string[];
  /** The event ids namespace ev2 took (its `dedupe: {field: id}`): an event sent again with one is dropped. */
  readonly ev2Ids: string[];
}

/** A run as the model knows it: its id (a placeholder `?N` until the lake names it), rows, and signature (unsigned: undefined). */
export interface ModelRun {
  id: string;
  readonly rows: readonly RowText[];
  /** The model's stand-in for the lake's signature: equal iff the lake's must be equal. */
  readonly signature?: string;
  /**
   * Whether the run has data files: a run of rows does; whether an empty run (--allow-empty) has an empty file or
   * none is the engine's business, so the model learns it from the lake when it names the run. A run without files
   * is no rollback target (README 'rollback': the newest older *complete* run).
   */
  hasFiles?: boolean;
  /** Staged by a held sync and not published (yet): no manifest, never current, no rollback target (docs/audits.md). */
  staged?: boolean;
  /** `write: append` (./append-model.ts): the parts the run was appended from, oldest first (its manifest's `appended`). */
  readonly appended?: readonly string[];
}

/** A partition: its runs (kept until GC), the pointer (current, previous, how it moved), and the pin. */
export interface ModelPartition {
  readonly runs: ModelRun[];
  current?: string;
  previous?: string;
  movedBy?: "swap" | "rollback";
  pinned: boolean;
}

/** One pointer a sync moved (its record, for rollback --sync). */
export interface ModelMove {
  readonly table: TableName;
  readonly day: Day;
  run: string;
  previousRun?: string;
}

/** A run a held sync staged: where, and the run its partition was at then (the one publish checks it is still at). */
interface ModelStaged {
  readonly table: TableName;
  readonly day: Day;
  run: string;
  against?: string;
}

/** A held sync (`sync --hold` that staged runs): its id (a placeholder `?hN` until the lake names it) and staged runs. */
export interface ModelHeldSync {
  id: string;
  readonly staged: ModelStaged[];
}

/** The raw layer's `error` audit of the model test's config: `range: {v: {max: AUDIT_MAX_V}}` (docs/audits.md). */
export const AUDIT_MAX_V = 1000;

/** A sync record as the model reads it: moves, and its held state (`held`, `discarded`, `published`) if it was held. */
interface RecordLike {
  readonly syncId: string;
  readonly moves: readonly { table: string; partition: string; run: string; previousRun?: string }[];
  readonly held?: { readonly status: string };
}

/** Whether a sync record counts as a sync that moved pointers (README 'rollback --sync'): a held or discarded one moved none. */
export const movedPointers = (r: RecordLike): boolean => r.moves.length > 0 && r.held?.status !== "held" && r.held?.status !== "discarded";

/** What a command must report: its exit code and, per partition it names, the action and reason. */
export interface Expected {
  readonly exitCode: number;
  /** `table/day=…` -> `action: reason`, for the commands that report partitions (sync). */
  readonly actions?: ReadonlyMap<string, string>;
}

/** The reference model of the whole lake. */
export class LakeModel {
  constructor(readonly mode: WriteMode = "partition_replace") {}

  tablesExist = false;
  /** The ingest pipeline's namespace table (./ingest.ts): its rows (`id|amt|u|h|x`, sorted), once an ingest opened it. */
  readonly ingest: IngestState = { opened: false, events: [], deadLetters: [], ev2Ids: [] };
  readonly tables: Record<TableName, Map<Day, ModelPartition>> = { [RAW]: new Map(), [STAGE]: new Map(), [CLICKS]: new Map() };
  /** The append dataset's folder (./append-model.ts): its files, in the order they were added (their names' order). */
  readonly clickFiles: ClickFile[] = [];
  /** The syncs that moved a pointer, oldest first (sync id order), and their ids (undefined until the lake's records name them). */
  readonly syncs: ModelMove[][] = [];
  readonly syncIds: (string | undefined)[] = [];
  /** The held syncs not yet published or discarded, oldest first. */
  readonly held: ModelHeldSync[] = [];
  /** Each past sync's view of lake.duckdb (`<table>__at_<sync id>`) as first read: it shows the same rows until it goes. */
  readonly pastViews = new Map<string, string>();
  /**
   * The views of lake.duckdb a killed sync left behind (docs/lake.md, "Never in the way"), with the rows (./check.ts
   * viewText) each showed before that sync: a command other than a sync of the dataset leaves them as they are.
   */
  readonly heldBackViews = new Map<TableName, string>();
  private placeholders = 0;

  /** A deep copy (the model of one possible outcome of a command). */
  clone(): LakeModel {
    const copy = new LakeModel(this.mode);
    copy.restore(this);
    return copy;
  }

  /** Takes every field of `other` (a deep copy), so the model passed around by fast-check stays the same object. */
  restore(other: LakeModel): void {
    this.tablesExist = other.tablesExist;
    this.ingest.opened = other.ingest.opened;
    this.ingest.events.splice(0, this.ingest.events.length, ...other.ingest.events);
    this.ingest.deadLetters.splice(0, this.ingest.deadLetters.length, ...other.ingest.deadLetters);
    this.ingest.ev2Ids.splice(0, this.ingest.ev2Ids.length, ...other.ingest.ev2Ids);
    for (const table of TABLES) this.tables[table] = structuredClone(other.tables[table]);
    this.syncs.splice(0, this.syncs.length, ...structuredClone(other.syncs));
    this.syncIds.splice(0, this.syncIds.length, ...other.syncIds);
    this.held.splice(0, this.held.length, ...structuredClone(other.held));
    this.clickFiles.splice(0, this.clickFiles.length, ...other.clickFiles);
    this.pastViews.clear();
    for (const [name, rows] of other.pastViews) this.pastViews.set(name, rows);
    this.heldBackViews.clear();
    for (const [table, rows] of other.heldBackViews) this.heldBackViews.set(table, rows);
    this.placeholders = other.placeholders;
  }

  /** Takes the syncs that moved a pointer from the lake's records (after a killed sync, whose record the model cannot know). */
  adoptSyncs(records: readonly RecordLike[]): void {
    const moved = records.filter(movedPointers).sort((a, b) => (a.syncId < b.syncId ? -1 : 1));
    this.syncIds.splice(0, this.syncIds.length, ...moved.map((r) => r.syncId));
    this.syncs.splice(
      0,
      this.syncs.length,
      ...moved.map((r) => r.moves.map((m) => ({ table: m.table as TableName, day: m.partition.replace(/^day=/, "") as Day, run: m.run, previousRun: m.previousRun }))),
    );
  }

  /** The partition, made empty (no runs, no pointer) when it is not there yet. */
  partition(table: TableName, day: Day): ModelPartition {
    let p = this.tables[table].get(day);
    if (!p) this.tables[table].set(day, (p = { runs: [], pinned: false }));
    return p;
  }

  currentRun(table: TableName, day: Day): ModelRun | undefined {
    const p = this.tables[table].get(day);
    return p?.current === undefined ? undefined : p.runs.find((r) => r.id === p.current);
  }

  /** The placeholders of runs made by the last command, with their partitions: the caller names them from the lake. */
  unnamedRuns(): { table: TableName; day: Day; run: ModelRun }[] {
    const found: { table: TableName; day: Day; run: ModelRun }[] = [];
    for (const table of TABLES) {
      for (const [day, p] of this.tables[table]) for (const run of p.runs) if (run.id.startsWith("?") && !run.staged) found.push({ table, day, run });
    }
    return found;
  }

  /** Replaces a placeholder id by the run id the lake gave it, everywhere the model holds it. */
  nameRun(table: TableName, day: Day, placeholder: string, runId: string, hasFiles: boolean): void {
    const p = this.partition(table, day);
    for (const run of p.runs) {
      if (run.id !== placeholder) continue;
      run.id = runId;
      run.hasFiles = run.rows.length > 0 || hasFiles;
    }
    if (p.current === placeholder) p.current = runId;
    if (p.previous === placeholder) p.previous = runId;
    for (const moves of this.syncs) {
      for (const move of moves) {
        if (move.table !== table || move.day !== day) continue;
        if (move.run === placeholder) move.run = runId;
        if (move.previousRun === placeholder) move.previousRun = runId;
      }
    }
    for (const s of this.held.flatMap((h) => h.staged)) if (s.table === table && s.day === day && s.run === placeholder) s.run = runId;
  }

  /**
   * `lakeswap sync --input <delivery>`: raw per the write mode, then every stage day of a raw day, per the plan rules.
   * A raw partition with a value over the audit's max fails (its pointer stays; stage reads the old run). `hold`
   * (`sync --hold`, docs/audits.md): every build is staged instead of moved, stage built from the staged raw runs.
   */
  sync(delivered: readonly RawRow[], options: { allowEmpty?: boolean; hold?: boolean } = {}): Expected {
    this.tablesExist = true;
    const actions = new Map<string, string>();
    const moves: ModelMove[] = [];
    const staged: ModelStaged[] = [];
    const stagedRaw = new Map<Day, ModelRun>();
    const put = (table: TableName, day: Day, rows: readonly RowText[], signature: string | undefined): void => {
      if (!options.hold) return void moves.push(this.swapIn(table, day, rows, signature));
      const run: ModelRun = { id: `?${++this.placeholders}`, rows, signature, staged: true };
      const p = this.partition(table, day);
      p.runs.push(run);
      staged.push({ table, day, run: run.id, against: p.current });
      if (table === RAW) stagedRaw.set(day, run);
    };
    const raw = this.mode === "upsert" ? this.mergeByKey(delivered) : this.replaceDays(delivered);
    if (raw === "refused") return { exitCode: 2 };
    let failed = 0;
    for (const [day, rows] of [...raw.entries()].sort(([a], [b]) => (a < b ? -1 : 1))) {
      const signature = `raw:${rows.join(",")}`;
      const decision = this.decide(RAW, day, signature, "content changed");
      const refused = decision.startsWith("build") && rows.some((text) => Number(text.split("|")[2]) > AUDIT_MAX_V);
      actions.set(`${RAW}/day=${day}`, refused ? decision.replace(/^build/, "failed") : decision);
      failed += refused ? 1 : 0;
      if (decision.startsWith("build") && !refused) put(RAW, day, rows, signature);
    }
    for (const day of [...this.tables[RAW].keys()].sort()) {
      const raw = stagedRaw.get(day) ?? this.currentRun(RAW, day);
      if (!raw) continue;
      const expected = raw.signature === undefined ? undefined : `stage:${day}:${raw.signature}`;
      const decision = this.decide(STAGE, day, expected, "upstream changed");
      if (!decision.startsWith("build")) {
        actions.set(`${STAGE}/day=${day}`, decision);
        continue;
      }
      const rows = stageOf(raw.rows).sort();
      const current = this.currentRun(STAGE, day);
      // The audit refuses a build of 0 rows for a new partition or one that has rows, unless --allow-empty.
      if (rows.length === 0 && !options.allowEmpty && (current === undefined || current.rows.length > 0)) {
        actions.set(`${STAGE}/day=${day}`, decision.replace(/^build/, "failed"));
        failed += 1;
        continue;
      }
      actions.set(`${STAGE}/day=${day}`, decision);
      put(STAGE, day, rows, expected);
    }
    if (moves.length > 0) this.pushSync(moves);
    if (staged.length > 0) this.held.push({ id: `?h${++this.placeholders}`, staged });
    return { exitCode: failed > 0 ? 7 : 0, actions };
  }

  /**
   * `lakeswap publish <held sync>` (docs/audits.md): each staged partition still at the run it was staged against,
   * whose staged run is still there (gc may have removed it), moves to it; the others are refused (exit 7). The moves
   * are the sync's own, in its place among the syncs by id (for rollback --sync).
   */
  publish(heldSync: ModelHeldSync): Expected {
    this.held.splice(this.held.indexOf(heldSync), 1);
    const actions = new Map<string, string>();
    const moves: ModelMove[] = [];
    for (const s of heldSync.staged) {
      const p = this.partition(s.table, s.day);
      const run = p.runs.find((r) => r.id === s.run);
      const published = run !== undefined && p.current === s.against;
      actions.set(`${s.table}/day=${s.day}`, published ? "published" : "refused");
      if (!published || !run) continue;
      run.staged = false;
      moves.push({ table: s.table, day: s.day, run: run.id, previousRun: p.current });
      this.move(p, run.id, "swap");
    }
    if (moves.length > 0) {
      const at = this.syncIds.filter((id) => id !== undefined && id < heldSync.id).length;
      this.syncs.splice(at, 0, moves);
      this.syncIds.splice(at, 0, heldSync.id);
    }
    return { exitCode: moves.length === heldSync.staged.length ? 0 : 7, actions };
  }

  /** `lakeswap discard <held sync>`: nothing moves; its staged runs stay until gc. */
  discard(heldSync: ModelHeldSync): Expected {
    this.held.splice(this.held.indexOf(heldSync), 1);
    return { exitCode: 0 };
  }

  private pushSync(moves: ModelMove[]): void {
    this.syncs.push(moves);
    this.syncIds.push(undefined);
  }

  /** partition_replace: each day delivered is its rows; the others are left alone. */
  private replaceDays(delivered: readonly RawRow[]): Map<Day, RowText[]> {
    const days = new Map<Day, RowText[]>();
    for (const row of delivered) days.set(row.d, [...(days.get(row.d) ?? []), rawText(row)]);
    for (const rows of days.values()) rows.sort();
    return days;
  }

  /**
   * upsert (README 'Write modes'): one row per key (the same row twice is one; two different rows refuse the
   * delivery); the touched days are the delivery's and those holding one of its keys now; each becomes its rows whose
   * key the delivery does not hold plus the delivery's rows of that day that are not deletes.
   */
  private mergeByKey(delivered: readonly RawRow[]): Map<Day, RowText[]> | "refused" {
    const winners = new Map<number, RawRow>();
    for (const row of delivered) {
      const seen = winners.get(row.k);
      if (seen && rawText(seen, "upsert") !== rawText(row, "upsert")) return "refused";
      winners.set(row.k, row);
    }
    const keyOf = (text: RowText) => Number(text.split("|")[0]);
    const touched = new Set<Day>([...winners.values()].map((w) => w.d));
    for (const day of DAYS) if (this.currentRun(RAW, day)?.rows.some((t) => winners.has(keyOf(t)))) touched.add(day);
    const merged = new Map<Day, RowText[]>();
    for (const day of touched) {
      const kept = (this.currentRun(RAW, day)?.rows ?? []).filter((t) => !winners.has(keyOf(t)));
      const incoming = [...winners.values()].filter((w) => w.d === day && !w.del).map((w) => rawText(w, "upsert"));
      merged.set(day, [...kept, ...incoming].sort());
    }
    return merged;
  }

  /**
   * `lakeswap sync -c clicks.yaml [--allow-duplicates]` (./append-model.ts): each day some file of the clicks folder has
   * rows of gets the parts its current run does not hold. A folder without files is refused (exit 2).
   */
  syncAppend(allowDuplicates: boolean): Expected {
    if (this.clickFiles.length === 0) return { exitCode: 2 };
    const actions = new Map<string, string>();
    const moves: ModelMove[] = [];
    for (const day of DAYS) {
      const p = this.tables[CLICKS].get(day);
      const decision = planAppendDay(this.clickFiles, day, this.currentRun(CLICKS, day), p?.pinned === true, allowDuplicates);
      if (!decision) continue;
      actions.set(`${CLICKS}/day=${day}`, decision.action);
      if (decision.run) moves.push(this.swapIn(CLICKS, day, decision.run.rows, decision.run.signature, decision.run.appended));
    }
    if (moves.length > 0) this.pushSync(moves);
    return { exitCode: 0, actions };
  }

  /** `lakeswap rollback <table> --partition day=…`: back to the newest older run. */
  rollbackPartition(table: TableName, day: Day): Expected {
    if (!this.tablesExist && table !== CLICKS) return { exitCode: 3 };
    const p = this.tables[table].get(day);
    if (p?.current === undefined) return { exitCode: 3 };
    const current = p.current;
    const target = rollbackTarget(p, current);
    if (target === undefined) return { exitCode: 3 };
    this.move(p, target, "rollback");
    return { exitCode: 0 };
  }

  /** `lakeswap rollback --sync last`: every pointer the newest sync moved goes back, downstream first. */
  rollbackSync(): Expected {
    const moves = this.syncs.at(-1);
    if (!moves) return { exitCode: 3 };
    const actions = new Map<string, string>();
    for (const table of [STAGE, RAW, CLICKS] as const) {
      for (const move of moves.filter((m) => m.table === table)) {
        const key = `${table}/day=${move.day}`;
        const p = this.partition(table, move.day);
        if (p.current !== move.run) {
          actions.set(key, "skipped");
        } else if (move.previousRun === undefined) {
          p.current = undefined;
          p.previous = undefined;
          p.movedBy = undefined;
          actions.set(key, "removed");
        } else if (!p.runs.some((r) => r.id === move.previousRun && r.hasFiles !== false)) {
          actions.set(key, "skipped");
        } else {
          this.move(p, move.previousRun, "rollback");
          actions.set(key, "rolled back");
        }
      }
    }
    // Not one pointer moved back: exit 3 (nothing was rolled back), the partitions still reported.
    return { exitCode: actions.size > 0 && [...actions.values()].every((a) => a === "skipped") ? 3 : 0, actions };
  }

  /** `lakeswap replace <table> --partition day=… --sql …`: a new, unsigned run of these rows. */
  replace(table: TableName, day: Day, rows: readonly RowText[]): Expected {
    if (!this.tablesExist) return { exitCode: 3 };
    this.swapIn(table, day, [...rows].sort(), undefined);
    return { exitCode: 0 };
  }

  /** `lakeswap pin` / `unpin`. */
  pin(table: TableName, day: Day, pinned: boolean): Expected {
    if (!this.tablesExist) return { exitCode: 3 };
    this.partition(table, day).pinned = pinned;
    return { exitCode: 0 };
  }

  /**
   * `lakeswap gc --grace 0`: per partition only the current, previous and rollback-target runs stay. Each table under
   * its own lease, one after another (`tables`: those of them collected).
   */
  gc(tables: readonly TableName[] = TABLES): Expected {
    for (const table of tables) {
      for (const p of this.tables[table].values()) {
        const current = p.current;
        const keep = new Set<string>();
        if (current !== undefined) {
          keep.add(current);
          if (p.previous !== undefined) keep.add(p.previous);
          const target = rollbackTarget(p, current);
          if (target !== undefined) keep.add(target);
        }
        const kept = p.runs.filter((r) => keep.has(r.id));
        p.runs.splice(0, p.runs.length, ...kept);
      }
    }
    return { exitCode: 0 };
  }

  /** The plan rule (README 'plan'): pinned, new, rolled back, never signed, changed, or unchanged. */
  private decide(table: TableName, day: Day, expected: string | undefined, changed: string): string {
    const p = this.tables[table].get(day);
    if (p?.pinned) return "skip: pinned";
    const current = this.currentRun(table, day);
    if (!current) return "build: new";
    if (p?.movedBy === "rollback") return "build: rolled back";
    if (expected === undefined || current.signature === undefined) return "build: never signed";
    if (current.signature !== expected) return `build: ${changed}`;
    return "skip: unchanged";
  }

  /** A new run of `rows` becomes current (its id named from the lake after the command). */
  private swapIn(table: TableName, day: Day, rows: readonly RowText[], signature: string | undefined, appended?: readonly string[]): ModelMove {
    const p = this.partition(table, day);
    const run: ModelRun = { id: `?${++this.placeholders}`, rows, signature, ...(appended ? { appended } : {}) };
    p.runs.push(run);
    const previousRun = p.current;
    this.move(p, run.id, "swap");
    return { table, day, run: run.id, previousRun };
  }

  private move(p: ModelPartition, runId: string, kind: "swap" | "rollback"): void {
    p.previous = p.current;
    p.current = runId;
    p.movedBy = kind;
  }
}

/** The newest complete run older than `current` (README 'rollback', 'Retention'): one with data files. */
function rollbackTarget(p: ModelPartition, current: string): string | undefined {
  return p.runs.filter((r) => r.hasFiles !== false && !r.staged && r.id < current).map((r) => r.id).sort().at(-1);
}
