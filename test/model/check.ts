// The comparison of a lake (as a plain reader sees it) with the reference model, after every command: rows of every
// partition, pointers and their state, runs kept, manifests and signatures, pins, sync records, nothing pending.
import { DAYS, TABLES, movedPointers, type Day, type LakeModel, type RowText, type TableName } from "./model.js";
import type { LakeView } from "./lake-view.js";

/** Signatures seen so far, both ways: equal model signatures must be equal lake signatures, and different ones different. */
export class SignatureMap {
  private readonly toLake = new Map<string, string>();
  private readonly toModel = new Map<string, string>();

  clone(): SignatureMap {
    const copy = new SignatureMap();
    for (const [model, lake] of this.toLake) copy.match(model, lake);
    return copy;
  }

  restore(other: SignatureMap): void {
    this.toLake.clear();
    this.toModel.clear();
    for (const [model, lake] of other.toLake) this.match(model, lake);
  }

  match(model: string, lake: string): string | undefined {
    const seenLake = this.toLake.get(model);
    if (seenLake !== undefined && seenLake !== lake) return `the same content was signed ${seenLake} before and ${lake} now`;
    const seenModel = this.toModel.get(lake);
    if (seenModel !== undefined && seenModel !== model) return `signature ${lake} stands for two different contents: ${seenModel} and ${model}`;
    this.toLake.set(model, lake);
    this.toModel.set(lake, model);
    return undefined;
  }
}

/** What the lake must hold besides the model's tables. */
export interface CheckOptions {
  /** Runs that may be left by a killed build (no manifest), per `table/day`: allowed on disk beside the model's. */
  readonly allowLeftovers?: boolean;
  /** Leave the sync records out (after a killed command, the model takes them from the lake). */
  readonly skipSyncRecords?: boolean;
}

/**
 * Names the model's new runs from the lake's pointers, then lists every difference between the lake and the model
 * (empty: they agree).
 */
export function compare(model: LakeModel, view: LakeView, signatures: SignatureMap, options: CheckOptions = {}): string[] {
  const problems: string[] = [];
  nameHeldSyncs(model, view, problems);
  nameNewRuns(model, view, problems);
  for (const table of TABLES) {
    const tableView = view.tables[table];
    for (const day of DAYS) {
      const where = `${table}/day=${day}`;
      const p = model.tables[table].get(day);
      const current = model.currentRun(table, day);
      const pointer = tableView.pointers.get(day);
      const rows = tableView.rows.get(day) ?? [];
      if (!current) {
        if (pointer) problems.push(`${where}: expected no pointer, found one on run ${pointer.run}`);
        if (rows.length > 0) problems.push(`${where}: expected no rows, a plain reader sees ${rows.length}: ${rows.join(" ")}`);
      } else if (!pointer) {
        problems.push(`${where}: expected the pointer on run ${current.id}, found no pointer`);
      } else {
        if (pointer.run !== current.id) problems.push(`${where}: expected the pointer on run ${current.id}, found run ${pointer.run}`);
        const want = [...current.rows].sort();
        if (want.join(" ") !== rows.join(" ")) problems.push(`${where}: expected rows [${want.join(" ")}], a plain reader sees [${rows.join(" ")}]`);
        if ((pointer.previous ?? "") !== (p?.previous ?? "")) problems.push(`${where}: the pointer's previous run is ${pointer.previous ?? "(none)"}, expected ${p?.previous ?? "(none)"}`);
        if (pointer.movedBy !== p?.movedBy) problems.push(`${where}: the pointer was moved by ${pointer.movedBy ?? "(unknown)"}, expected ${p?.movedBy}`);
        const manifest = tableView.manifests.get(day)?.get(pointer.run);
        if (!manifest) {
          problems.push(`${where}: the current run ${pointer.run} has no manifest`);
        } else {
          if (manifest.rows !== rows.length) problems.push(`${where}: the manifest of run ${pointer.run} says ${manifest.rows} rows, its files hold ${rows.length}`);
          if (manifest.signature !== pointer.signature) problems.push(`${where}: the pointer carries signature ${pointer.signature ?? "(none)"}, the manifest of its run ${manifest.signature ?? "(none)"}`);
        }
        if ((current.signature === undefined) !== (pointer.signature === undefined)) {
          problems.push(`${where}: expected the run ${current.signature === undefined ? "unsigned" : "signed"}, its pointer carries ${pointer.signature ?? "no signature"}`);
        } else if (current.signature !== undefined && pointer.signature !== undefined) {
          const clash = signatures.match(current.signature, pointer.signature);
          if (clash) problems.push(`${where}: ${clash}`);
        }
      }
      const expectedRuns = (p?.runs ?? []).map((r) => r.id).sort();
      const onDisk = [...(tableView.runs.get(day) ?? [])].sort();
      const manifests = tableView.manifests.get(day) ?? new Map();
      const extra = onDisk.filter((id) => !expectedRuns.includes(id) && !(options.allowLeftovers && !manifests.has(id)));
      // A staged run of no rows has no files and no manifest (yet): nothing of it to find on disk.
      const emptyStaged = new Set((p?.runs ?? []).filter((r) => r.staged && r.rows.length === 0).map((r) => r.id));
      const missing = expectedRuns.filter((id) => !onDisk.includes(id) && !emptyStaged.has(id));
      if (extra.length > 0) problems.push(`${where}: runs in the lake the model does not hold (GC should have removed them, or a build left them): ${extra.join(", ")}`);
      if (missing.length > 0) problems.push(`${where}: runs the model holds are gone from the lake: ${missing.join(", ")}`);
      const pinned = view.pins.has(where);
      if (pinned !== (p?.pinned ?? false)) problems.push(`${where}: expected ${p?.pinned ? "pinned" : "not pinned"}, the lake says ${pinned ? "pinned" : "not pinned"}`);
    }
  }
  problems.push(...compareIngest(model, view), ...compareCatalogFile(model, view), ...comparePastViews(model, view));
  if (view.outbox.length > 0) problems.push(`catalog changes still pending in the outbox: ${view.outbox.join(", ")}`);
  if (view.leases.length > 0) problems.push(`writer leases still held after the command: ${view.leases.join(", ")}`);
  if (options.skipSyncRecords) return problems;
  const recorded = view.syncs.filter(movedPointers).sort((a, b) => (a.syncId < b.syncId ? -1 : 1));
  const moveText = (m: { table: string; partition: string; run: string; previousRun?: string }) => `${m.table}/${m.partition}:${m.previousRun ?? "-"}->${m.run}`;
  // In sync id order: a sync's id is issued under its tables' leases, after the newest recorded sync, so ids sort in
  // the order the syncs moved pointers (before issue 25's model test found it, two processes could record out of order).
  const lakeSyncs = recorded.map((s) => s.moves.map(moveText).sort().join(" "));
  const modelSyncs = model.syncs.map((moves) => moves.map((m) => moveText({ table: m.table, partition: `day=${m.day}`, run: m.run, previousRun: m.previousRun })).sort().join(" "));
  if (lakeSyncs.join("\n") !== modelSyncs.join("\n")) {
    problems.push(`sync records differ from the syncs run (in sync id order):\n    lake:  ${lakeSyncs.join("\n           ")}\n    model: ${modelSyncs.join("\n           ")}`);
  }
  return problems;
}

/**
 * Names the model's new runs (placeholders, in the order the model made them) by the complete runs the lake has that
 * the model does not know yet, in run id order (the order they were swapped in); reports a run that was not built, and
 * one that sorts before a run swapped in before it.
 */
function nameNewRuns(model: LakeModel, view: LakeView, problems: string[]): void {
  const byPartition = new Map<string, { table: TableName; day: Day; placeholders: string[] }>();
  for (const { table, day, run } of model.unnamedRuns()) {
    const key = `${table}/day=${day}`;
    const entry = byPartition.get(key) ?? { table, day, placeholders: [] };
    entry.placeholders.push(run.id);
    byPartition.set(key, entry);
  }
  for (const [where, { table, day, placeholders }] of byPartition) {
    const known = model.partition(table, day).runs.map((r) => r.id).filter((id) => !id.startsWith("?"));
    const fresh = [...(view.tables[table].manifests.get(day)?.keys() ?? [])].filter((id) => !known.includes(id)).sort();
    if (fresh.length !== placeholders.length) {
      const pointer = view.tables[table].pointers.get(day)?.run;
      problems.push(
        `${where}: expected ${placeholders.length} new run(s), the lake has ${fresh.length} new complete run(s)${fresh.length > 0 ? ` (${fresh.join(", ")})` : ""}` +
          `${pointer !== undefined && known.includes(pointer) ? `; the pointer is still on run ${pointer}, which it had before (nothing was built)` : ""}`,
      );
    }
    // Run order is swap order: a held sync's staged run, never swapped in (yet), has no place in it. Its id was issued
    // when it was staged, before a run another sync swaps in meanwhile, which need not sort after it (nor can: the staged
    // run, if ever published, is swapped in after that one).
    const stagedRuns = new Set(model.partition(table, day).runs.filter((r) => r.staged).map((r) => r.id));
    const older = known.filter((id) => !stagedRuns.has(id) && fresh.some((f) => f < id));
    if (older.length > 0) problems.push(`${where}: new run(s) ${fresh.join(", ")} sort before older run(s) ${older.join(", ")} of the partition`);
    const withFiles = view.tables[table].withFiles.get(day) ?? new Set<string>();
    placeholders.forEach((placeholder, i) => model.nameRun(table, day, placeholder, fresh[i] ?? `(missing ${placeholder})`, withFiles.has(fresh[i] ?? "")));
  }
}

/**
 * Names the model's new held syncs (in the order it made them) by the lake's held records it does not know yet (in
 * sync id order), and their staged runs by the runs those records list; then compares every held sync: the same
 * syncs held, each with the same partitions staged against the same runs.
 */
function nameHeldSyncs(model: LakeModel, view: LakeView, problems: string[]): void {
  const lakeHeld = view.syncs.filter((s) => s.held?.status === "held").sort((a, b) => (a.syncId < b.syncId ? -1 : 1));
  const known = new Set(model.held.map((h) => h.id));
  const fresh = lakeHeld.filter((s) => !known.has(s.syncId));
  const unnamed = model.held.filter((h) => h.id.startsWith("?"));
  if (fresh.length !== unnamed.length) problems.push(`expected ${unnamed.length} new held sync(s), the lake has ${fresh.length}${fresh.length > 0 ? ` (${fresh.map((s) => s.syncId).join(", ")})` : ""}`);
  unnamed.forEach((held, i) => {
    const record = fresh[i];
    held.id = record?.syncId ?? `(missing ${held.id})`;
    for (const staged of held.staged) {
      const run = record?.held?.runs.find((r) => r.table === staged.table && r.partition === `day=${staged.day}`)?.runId;
      if (run !== undefined) model.nameRun(staged.table, staged.day, staged.run, run, (view.tables[staged.table].withFiles.get(staged.day) ?? new Set()).has(run));
    }
  });
  const text = (runs: readonly { table: string; partition: string; runId: string; against?: string }[]) => runs.map((r) => `${r.table}/${r.partition}:${r.against ?? "-"}->${r.runId}`).sort().join(" ");
  const lakeText = lakeHeld.map((s) => `${s.syncId}: ${text((s.held?.runs ?? []).map((r) => ({ ...r, against: r.previousRunId })))}`);
  const modelText = model.held.map((h) => `${h.id}: ${text(h.staged.map((s) => ({ table: s.table, partition: `day=${s.day}`, runId: s.run, against: s.against })))}`);
  if (lakeText.join("\n") !== modelText.join("\n")) problems.push(`held syncs differ:\n    lake:  ${lakeText.join("\n           ")}\n    model: ${modelText.join("\n           ")}`);
}

/** A table's rows, every day of the pool, as one text (`rows(day)`: sorted row texts). */
export function viewText(rows: (day: Day) => readonly RowText[] | undefined): string {
  return DAYS.map((day) => `${day}: ${(rows(day) ?? []).join(" ")}`).join("; ");
}

/**
 * The catalog file (lake.duckdb, embedded lakes) must show each table's rows as the glob over the pointers does; a
 * view held back by a killed sync (`model.heldBackViews`) shows the rows it showed before that sync, until a command
 * rewrites it (then it shows the glob's, and is no longer held back).
 */
function compareCatalogFile(model: LakeModel, view: LakeView): string[] {
  const problems: string[] = [];
  if (!view.catalogFile) return problems;
  const catalogFile = view.catalogFile;
  for (const table of TABLES) {
    const heldBack = model.heldBackViews.get(table);
    if (heldBack !== undefined) {
      const glob = viewText((day) => view.tables[table].rows.get(day));
      const file = viewText((day) => catalogFile[table].get(day));
      if (file === glob) model.heldBackViews.delete(table);
      else if (file !== heldBack) problems.push(`${table}: lake.duckdb's view shows [${file}], neither the glob over the pointers [${glob}] nor what it showed before a killed sync [${heldBack}]`);
      continue;
    }
    for (const day of DAYS) {
      const glob = (view.tables[table].rows.get(day) ?? []).join(" ");
      const file = (view.catalogFile[table].get(day) ?? []).join(" ");
      if (glob !== file) problems.push(`${table}/day=${day}: lake.duckdb's view shows [${file}], the glob over the pointers [${glob}]`);
    }
  }
  return problems;
}

/**
 * Each past sync's view in lake.duckdb shows the rows it showed when first read, whatever commands ran since (syncs,
 * rollbacks, replaces, gc, killed ones), until it goes; a held sync's may change with its publication.
 */
function comparePastViews(model: LakeModel, view: LakeView): string[] {
  const problems: string[] = [];
  const held = new Set(view.syncs.filter((s) => s.held !== undefined).map((s) => s.syncId.replace(/[^A-Za-z0-9]/g, "_")));
  for (const [name, rows] of view.pastViews ?? []) {
    const before = model.pastViews.get(name);
    const sync = name.slice(name.indexOf("__at_") + "__at_".length);
    if (before !== undefined && before !== rows && !held.has(sync)) problems.push(`lake.duckdb's past view ${name} showed [${before}], now [${rows}]`);
    model.pastViews.set(name, rows);
  }
  return problems;
}

/** The ingest pipeline's tables: every good event of every batch exactly once, every bad one dead-lettered by its line. */
function compareIngest(model: LakeModel, view: LakeView): string[] {
  const problems: string[] = [];
  const differ = (what: string, want: readonly string[], got: readonly string[]) => {
    const missing = want.filter((row, i) => want.indexOf(row) === i && want.filter((r) => r === row).length > got.filter((r) => r === row).length);
    const extra = got.filter((row, i) => got.indexOf(row) === i && got.filter((r) => r === row).length > want.filter((r) => r === row).length);
    if (missing.length > 0 || extra.length > 0) {
      problems.push(`${what}: ${got.length} rows where the model has ${want.length}; missing (or too few times): [${missing.join(" ; ")}]; extra (or too many times): [${extra.join(" ; ")}]`);
    }
  };
  differ("ingested table ev", model.ingest.events, view.ingest.events);
  differ("dead-letter table events", model.ingest.deadLetters, view.ingest.deadLetters);
  if (problems.length > 0 && view.ingest.reasons.length > 0) problems.push(`the dead letters' reasons: ${view.ingest.reasons.join(" ; ")}`);
  return problems;
}
