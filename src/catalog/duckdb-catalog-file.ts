import { randomBytes } from "node:crypto";
import { promises as fs } from "node:fs";
import path from "node:path";
import type { DuckDBConnection, DuckDBInstance } from "@duckdb/node-api";
import { duckdb } from "../duckdb/duckdb-module.js";
import { tableViewSelect } from "../engine/duckdb-run.js";
import { errorMessage, LakeswapError } from "../model/errors.js";
import { quoteFilePath, quoteIdentifier, quoteLiteral } from "../model/sql.js";
import { freshProcessFolder } from "../shared/process-folders.js";
import { fsyncPath, isCode } from "../store/local-files.js";
import type { ObjectStore, ProcessLock } from "../store/object-store.js";
import { pointersFingerprint, type CatalogFile, type CatalogFileHistory, type CatalogFileTable } from "./catalog-file.js";
import { changedPartitions, decodeDefinition, decodeShown, decodeState, encodeDefinition, encodeShown, frozenViewSelect, MAX_CHAIN, mergeOverrides, pastViewSelect, shownState, type ShownRun, type ShownState } from "./catalog-file-history.js";
import type { TableDefinition } from "../model/table.js";
import { copyRecords, RECORD_SCHEMA, recordViews, staleRecords } from "./catalog-file-records.js";

/** How long an update waits for another process's update of the same file (each takes milliseconds to a second). */
const LOCK_WAIT_MS = 60_000;

/** Updates of one file by this process, one after the other (the kernel lock orders them across processes). */
const queues = new Map<string, Promise<unknown>>();

/** Where the catalog file, its lock and its temporary copies live, as store keys. */
export interface CatalogFileKeys {
  /** The file readers open, `lake.duckdb` at the lake's root. */
  readonly file: string;
  /** The file whose kernel lock orders updates across processes. */
  readonly lock: string;
  /**
   * What the file shows of each table (its `lakeswap.tables` fingerprints), with the file's identity when that was
   * written: read instead of the file by a command that moved nothing, which then need not load DuckDB.
   */
  readonly states: string;
  /** The folder of temporary files (a killed writer's are removed when the lake is next opened). */
  readonly temp: string;
}

/**
 * The embedded lake's catalog file, a DuckDB database of views (./catalog-file.ts). An update copies the file,
 * replaces the views of the tables it was given in the copy (the others stay as they are), fsyncs it and renames it
 * over the file: a reader that opened the old file keeps reading it, one that opens the file afterwards reads the
 * new one, and no reader sees a file half written. Each view reads the absolute paths of its runs' immutable files
 * (never the pointers' paths, which move), so a view never changes under a reader; GC keeps those files for the
 * grace window after their runs stopped being current (../lake/retention.ts).
 */
export class DuckDbCatalogFile implements CatalogFile {
  readonly location: string;
  private readonly lockPath: string;
  private readonly statesPath: string;
  private readonly tempDir: string;

  constructor(
    private readonly store: ObjectStore,
    keys: CatalogFileKeys,
  ) {
    this.location = path.resolve(store.localPath(keys.file));
    this.lockPath = keys.lock;
    this.statesPath = path.resolve(store.localPath(keys.states));
    this.tempDir = path.resolve(store.localPath(keys.temp));
  }

  async tableStates(): Promise<Map<string, string>> {
    const identity = await fileIdentity(this.location);
    if (identity === undefined) return new Map();
    // Kept beside the file by the update that wrote it: valid only while the file is the very one it was written for
    // (an update killed between its rename and this record leaves the record of the file before: it is not used).
    const kept = await fs.readFile(this.statesPath, "utf8").then((text) => JSON.parse(text) as unknown, () => undefined);
    if (isKeptStates(kept) && kept.file === identity) return new Map(Object.entries(kept.tables));
    try {
      const states = await this.readFile((connection, alias) => shownStates(connection, alias));
      // Kept for the next command, where the file read is the one that was there before and after (a file of a lake
      // from before this record, or a record lost to a crash): the commands that move nothing then leave DuckDB unloaded.
      if ((await fileIdentity(this.location)) === identity) await this.keepStates(identity, states);
      return states;
    } catch {
      // A file that cannot be read (or one written before views had fingerprints) is rewritten by the next update.
      return new Map();
    }
  }

  async shownRuns(tables: readonly string[]): Promise<Map<string, ReadonlyMap<string, string>>> {
    const shown = new Map<string, ReadonlyMap<string, string>>();
    if (tables.length === 0 || (await fileIdentity(this.location)) === undefined) return shown;
    const reader = await this.readFile((connection, alias) =>
      connection.runAndReadAll(`SELECT table_name, state FROM ${alias}.${RECORD_SCHEMA}.tables WHERE table_name IN (${tables.map(quoteLiteral).join(", ")})`),
    );
    for (const [table, text] of reader.getRows()) {
      const state = decodeState(text);
      if (state) shown.set(String(table), new Map([...state].map(([partition, run]) => [partition, run.runId])));
    }
    return shown;
  }

  /** Runs `read` over the file attached read-only (as `alias`) to the instance that writes catalog files. */
  private async readFile<T>(read: (connection: DuckDBConnection, alias: string) => Promise<T>): Promise<T> {
    const connection = await (await writerInstance()).connect();
    const alias = `catalog_file_${randomBytes(6).toString("hex")}`;
    try {
      await connection.run(`ATTACH ${quoteLiteral(this.location)} AS ${alias} (READ_ONLY)`);
      try {
        return await read(connection, alias);
      } finally {
        await connection.run(`DETACH ${alias}`);
      }
    } finally {
      connection.closeSync();
    }
  }

  prepare(): void {
    // The instance that writes the file takes about 20 ms to start: started while the writer works, not after it.
    writerInstance().catch(() => undefined);
  }

  async update(tables: readonly CatalogFileTable[], fence?: () => Promise<void>, history?: CatalogFileHistory): Promise<void> {
    if (tables.length === 0) return;
    const previous = queues.get(this.location) ?? Promise.resolve();
    const next = previous.catch(() => undefined).then(() => this.locked(() => this.rewrite(tables, fence, history)));
    queues.set(this.location, next);
    try {
      await next;
    } finally {
      if (queues.get(this.location) === next) queues.delete(this.location);
    }
  }

  /** Runs `work` holding the kernel lock of the file's updates, waiting for another process's update to finish. */
  private async locked<T>(work: () => Promise<T>): Promise<T> {
    const deadline = Date.now() + LOCK_WAIT_MS;
    let lock: ProcessLock | undefined;
    for (let delayMs = 2; this.store.tryLock; delayMs = Math.min(delayMs * 2, 50)) {
      const answer = await this.store.tryLock(this.lockPath);
      if (answer !== "busy") {
        // Without kernel locks (unavailable here), updates by two processes may race: the last rename wins.
        lock = "unavailable" in answer ? undefined : answer;
        break;
      }
      if (Date.now() > deadline) throw new LakeswapError("LEASE_HELD", `another process has been updating ${this.location} for over ${LOCK_WAIT_MS / 1000} s`);
      await new Promise((resolve) => setTimeout(resolve, delayMs));
    }
    try {
      return await work();
    } finally {
      await lock?.release();
    }
  }

  /**
   * Copies the file beside it (the lake's temporary folder), replaces the given views in the copy, fsyncs it and
   * renames it over the file. DuckDB takes a '?' in a database's path for the start of options: where the lake's path
   * has one, the copy is worked on in a scratch folder of this process, then copied beside the file.
   */
  private async rewrite(tables: readonly CatalogFileTable[], fence: (() => Promise<void>) | undefined, history: CatalogFileHistory | undefined): Promise<void> {
    const temp = path.join(this.tempDir, `${process.pid}-catalog-${randomBytes(6).toString("hex")}.duckdb`);
    const scratch = temp.includes("?") ? await freshProcessFolder("lakeswap-catalogfile-") : undefined;
    const work = scratch === undefined ? temp : path.join(scratch, "lake.duckdb");
    try {
      if (scratch === undefined) await fs.mkdir(this.tempDir, { recursive: true });
      const copied = await fs.copyFile(this.location, work).then(
        () => true,
        (error: unknown) => {
          if (isCode(error, "ENOENT")) return false;
          throw error;
        },
      );
      const { views, states } = await this.writeViews(work, copied, tables, history);
      // The record of the file before is stale from the rename on: gone before it, written again after it.
      await fs.rm(this.statesPath, { force: true });
      if (views === 0) {
        // The last table was dropped: a lake without tables leaves no file of lakeswap's behind (a waiter on the
        // removed lock file may update a file of its own meanwhile: its views are rewritten by their next write).
        await fence?.();
        await fs.rm(this.location, { force: true });
        await fs.rm(this.store.localPath(this.lockPath), { force: true });
        return;
      }
      if (scratch !== undefined) {
        await fs.mkdir(this.tempDir, { recursive: true });
        await fs.copyFile(work, temp);
      }
      await fsyncPath(temp);
      await fence?.();
      // The copy's identity is the file's once renamed (the rename keeps its inode, size and modification time), and no
      // other writer's file can have it, whatever renamed what meanwhile.
      const identity = await fileIdentity(temp);
      await fs.rename(temp, this.location);
      await fsyncPath(path.dirname(this.location));
      if (identity !== undefined) await this.keepStates(identity, states);
    } finally {
      // A write-ahead log is left beside the copy only by a write that failed before the copy was detached.
      await Promise.all([scratch === undefined ? undefined : fs.rm(scratch, { recursive: true, force: true }), fs.rm(temp, { force: true }), fs.rm(`${work}.wal`, { force: true })]);
    }
  }

  /**
   * Records what the file now shows of each table, with its identity, beside it (`CatalogFileKeys.states`): written
   * whole by a rename, without an fsync (a record lost to a crash is only not used). One that cannot be written is
   * only not there: `tableStates` then reads the file.
   */
  private async keepStates(file: string, states: ReadonlyMap<string, string>): Promise<void> {
    const temp = path.join(this.tempDir, `${process.pid}-catalog-states-${randomBytes(6).toString("hex")}.json`);
    try {
      await fs.mkdir(this.tempDir, { recursive: true });
      await fs.writeFile(temp, JSON.stringify({ file, tables: Object.fromEntries(states) }));
      await fs.rename(temp, this.statesPath);
    } catch {
      await fs.rm(temp, { force: true });
    }
  }

  /**
   * Attaches `file` to the process's catalog file DuckDB (a copy that will not open is started afresh) and replaces the
   * views; how many views it then has, and what it then shows of each table (`lakeswap.tables`: name and fingerprint).
   */
  private async writeViews(
    file: string,
    copied: boolean,
    tables: readonly CatalogFileTable[],
    history: CatalogFileHistory | undefined,
  ): Promise<{ readonly views: number; readonly states: Map<string, string> }> {
    const connection = await (await writerInstance()).connect();
    const alias = `catalog_file_${randomBytes(6).toString("hex")}`;
    let written: { readonly views: number; readonly states: Map<string, string> };
    try {
      try {
        await connection.run(`ATTACH ${quoteLiteral(file)} AS ${alias}`);
      } catch (error) {
        if (!copied) throw error;
        process.emitWarning(`${this.location} could not be opened (${errorMessage(error)}): it is written afresh, with the views of ${tables.map((t) => t.name).join(", ")} only; other tables' views come back with their next write`, { code: "LAKESWAP_CATALOG_FILE" });
        await fs.rm(file, { force: true });
        await connection.run(`ATTACH ${quoteLiteral(file)} AS ${alias}`);
      }
      try {
        const views = await replaceViews(connection, alias, tables, (key) => path.resolve(this.store.localPath(key)), history);
        const states = await shownStates(connection, alias);
        // Checkpointed before it is detached, so that it is whole whatever the instance's settings (one that skips the
        // checkpoint on shutdown skips it on a DETACH too). In this module's own instance, never one the landing shares:
        // there, a connection listing every database's tables (`duckdb_tables()`, as a landing dropping its relations
        // does) holds each attached database's checkpoint lock for a moment, and the CHECKPOINT fails.
        await connection.run(`CHECKPOINT ${alias}`);
        written = { views, states };
      } finally {
        await connection.run(`DETACH ${alias}`);
      }
    } finally {
      connection.closeSync();
    }
    // Renamed into place only whole: never with the update left in a write-ahead log beside the copy.
    const log = await fs.stat(`${file}.wal`).catch(() => undefined);
    if (log !== undefined && log.size > 0) throw new Error(`the copy of ${this.location} was left with a write-ahead log of ${log.size} bytes`);
    return written;
  }
}

/** What the attached catalog file `alias` shows of each table: its name and the fingerprint of the pointers its view shows. */
async function shownStates(connection: DuckDBConnection, alias: string): Promise<Map<string, string>> {
  const reader = await connection.runAndReadAll(`SELECT table_name, pointers FROM ${alias}.${RECORD_SCHEMA}.tables`);
  return new Map(reader.getRows().map((row) => [String(row[0]), String(row[1] ?? "")]));
}

/**
 * A file's identity (device, inode, size, modification time), or undefined where there is none: a rewrite in place
 * moves the size or the modification time, a file put in its place has another inode.
 */
async function fileIdentity(file: string): Promise<string | undefined> {
  const stat = await fs.stat(file, { bigint: true }).catch(() => undefined);
  return stat && `${stat.dev}:${stat.ino}:${stat.size}:${stat.mtimeNs}`;
}

/** A record of the catalog file's table states as `keepStates` writes it. */
function isKeptStates(value: unknown): value is { readonly file: string; readonly tables: Record<string, string> } {
  if (typeof value !== "object" || value === null) return false;
  const { file, tables } = value as { file?: unknown; tables?: unknown };
  return typeof file === "string" && typeof tables === "object" && tables !== null && Object.values(tables).every((v) => typeof v === "string");
}

/** The in-memory DuckDB that writes catalog files, one thread, opened on first use and kept for the process (opening one costs ~20 ms). */
let writer: Promise<DuckDBInstance> | undefined;

function writerInstance(): Promise<DuckDBInstance> {
  writer ??= duckdb().then(({ DuckDBInstance }) => DuckDBInstance.create(":memory:", { threads: "1", autoinstall_known_extensions: "false", autoload_known_extensions: "false", checkpoint_threshold: "0b" }));
  writer.catch(() => (writer = undefined));
  return writer;
}

/** A past view's record, as the update reads it: those of views chained to newer ones (./catalog-file-history.ts). */
interface ChainedView {
  readonly view: string;
  readonly definition: TableDefinition | undefined;
  readonly overrides: Map<string, ShownRun | null> | undefined;
  readonly next: string | null;
}

/**
 * Replaces (or drops) each table's view in the attached file `alias`, and its row in `lakeswap.tables` (with the
 * state the view shows), in one transaction; with a sync id, also each table's `<table>__at_<sync id>` view
 * (`lakeswap.history`), and drops the past syncs' views whose state stopped being current more than the grace window
 * ago. A table's newest past view reads its view but for the partitions that changed since its sync
 * (./catalog-file-history.ts): each update of the table adds those to it, and a new sync's view takes its place. What
 * the statements need is read first; then the statements go to DuckDB in two calls (each call is a round trip to its
 * thread): the views and the records' copies, then the records' views with the commit and the count of the views the
 * file then has, which it returns.
 */
async function replaceViews(connection: DuckDBConnection, alias: string, tables: readonly CatalogFileTable[], pathOf: (key: string) => string, history?: CatalogFileHistory): Promise<number> {
  const copies = await copyRecords(connection, alias);
  const [record, past] = [copies.tables, copies.history];
  const now = new Date();
  const at = (date: Date) => `CAST(${quoteLiteral(date.toISOString().replace("T", " ").replace("Z", ""))} AS TIMESTAMP)`;
  const staleViews = await staleRecords(connection, past, tables, history && at(new Date(now.getTime() - history.graceMs)));
  const names = tables.map((t) => quoteLiteral(t.name)).join(", ");
  const shown = new Map((await connection.runAndReadAll(`SELECT table_name, state FROM ${record} WHERE table_name IN (${names})`)).getRows().map((row) => [String(row[0]), decodeState(row[1])]));
  const chained = new Map<string, ChainedView[]>();
  const rows = await connection.runAndReadAll(`SELECT table_name, view_name, definition, overrides, next_view FROM ${past} WHERE table_name IN (${names}) AND definition IS NOT NULL`);
  for (const row of rows.getRows()) {
    const [table, view] = [String(row[0]), String(row[1])];
    if (staleViews.includes(view)) continue;
    const chain = chained.get(table) ?? [];
    chain.push({ view, definition: decodeDefinition(row[2], table), overrides: decodeShown(row[3]), next: row[4] === null ? null : String(row[4]) });
    chained.set(table, chain);
  }
  // The records of every table in one statement each (each statement is a parse, a plan and a write of its own); the
  // state the tables' past views show ends now, before their new past views' rows go in.
  const statements = [
    `DELETE FROM ${record} WHERE table_name IN (${names});`,
    `UPDATE ${past} SET superseded_at = ${at(now)} WHERE table_name IN (${names}) AND superseded_at IS NULL;`,
  ];
  const records: string[] = [];
  const pastRows: string[] = [];
  const created = new Set<string>();
  const gone = new Set(staleViews);
  for (const { name, snapshot } of tables) {
    const view = `${alias}.main.${quoteIdentifier(name)}`;
    if (!snapshot) {
      statements.push(`DROP VIEW IF EXISTS ${view};`);
      continue;
    }
    // Emptied partitions (a run without files) hold no rows: a view over no file of theirs.
    const partitions = snapshot.partitions.filter((p) => p.files.length > 0);
    statements.push(`CREATE OR REPLACE VIEW ${view} AS ${tableViewSelect(snapshot.table, partitions, pathOf, quoteFilePath)};`);
    const files = partitions.reduce((sum, p) => sum + p.files.length, 0);
    const state = shownState(snapshot);
    const pastView = history?.syncId === undefined ? undefined : `${name}__at_${history.syncId.replace(/[^A-Za-z0-9]/g, "_")}`;
    // The state is kept for the past view that reads the table's (one there is, or the one made now): a table that no
    // sync wrote (an ingested one, one only replaced) keeps none.
    const kept = pastView !== undefined || (chained.get(name) ?? []).some((c) => c.next === null) ? quoteLiteral(encodeShown(state)) : "NULL";
    records.push(`(${quoteLiteral(name)}, ${partitions.length}, ${files}, ${at(now)}, ${quoteLiteral(pointersFingerprint(snapshot))}, ${kept})`);
    const columns = new Set(snapshot.table.columns.map((c) => c.name));
    if (pastView !== undefined) {
      created.add(pastView);
      const select = pastViewSelect(snapshot.table, { relation: quoteIdentifier(name), columns }, new Map(), pathOf, quoteFilePath);
      statements.push(`CREATE OR REPLACE VIEW ${alias}.main.${quoteIdentifier(pastView)} AS ${select};`);
      pastRows.push(`(${quoteLiteral(name)}, ${quoteLiteral(history?.syncId ?? "")}, ${quoteLiteral(pastView)}, ${at(now)}, NULL, ${quoteLiteral(encodeDefinition(snapshot.table))}, '[]', NULL)`);
    }
    const relinked = relinkPastView(chained.get(name) ?? [], pastView, shown.get(name), state, { alias, past, name, columns, keys: snapshot.table.partitionKeys, pathOf });
    statements.push(...relinked.statements);
    for (const view of relinked.gone) gone.add(view);
  }
  if (records.length > 0) statements.push(`INSERT INTO ${record} (table_name, partitions, files, updated_at, pointers, state) VALUES ${records.join(", ")};`);
  if (created.size > 0) {
    statements.push(`DELETE FROM ${past} WHERE view_name IN (${[...created].map(quoteLiteral).join(", ")});`);
    statements.push(`INSERT INTO ${past} (table_name, sync_id, view_name, created_at, superseded_at, definition, overrides, next_view) VALUES ${pastRows.join(", ")};`);
  }
  // A past view made again by this update (the same sync written twice) stays: its row was replaced above. The views
  // that go are the oldest of their chains (each reads a newer one), or whole chains.
  const dropped = [...gone].filter((name) => !created.has(name));
  for (const name of dropped) statements.push(`DROP VIEW IF EXISTS ${alias}.main.${quoteIdentifier(name)};`);
  if (dropped.length > 0) statements.push(`DELETE FROM ${past} WHERE view_name IN (${dropped.map(quoteLiteral).join(", ")});`);
  // One transaction: the views and the records' copies, then the records' views from the copies, and the count of views after it.
  try {
    await connection.run(["BEGIN TRANSACTION;", ...statements].join("\n"));
    const reader = await connection.runAndReadAll([...(await recordViews(connection, alias, copies)), "COMMIT;", `SELECT count(*) FROM ${record}`].join("\n"));
    return Number(reader.getRows()[0]?.[0] ?? 0);
  } catch (error) {
    await connection.run("ROLLBACK").catch(() => undefined);
    throw error;
  }
}

/**
 * The statements that keep the state of the past view reading the table's (`before`: what the table's view showed
 * until now; `after`: what it shows from now): the newest past view, or, where this sync wrote its own already, the
 * one before it. Or the views of a chain that cannot be kept (its state is missing: a file changed by hand), to drop.
 */
function relinkPastView(
  chain: readonly ChainedView[],
  pastView: string | undefined,
  before: ShownState | undefined,
  after: ShownState,
  at: { alias: string; past: string; name: string; columns: ReadonlySet<string>; keys: readonly string[]; pathOf: (key: string) => string },
): { statements: string[]; gone: string[] } {
  const head = chain.find((c) => c.next === null);
  const target = head !== undefined && head.view === pastView ? chain.find((c) => c.next === pastView) : head;
  if (!target) return { statements: [], gone: [] };
  // What changed since the target's state: now, and where the sync's own view is written again, since its last write.
  const since = head !== target ? head?.overrides : new Map<string, ShownRun | null>();
  if (!before || !target.definition || !target.overrides || !since) return { statements: [], gone: chain.map((c) => c.view) };
  // The partitions changed now read as they were, from the sync's view or the table's; or, as the MAX_CHAIN-th of
  // its chain behind a new sync's view, from its files alone.
  const overrides = mergeOverrides(target.overrides, mergeOverrides(since, changedPartitions(before, after)));
  // A state under other partition keys (the table switched to a new layout since) cannot read the table's view: its files alone.
  const relaid = target.definition.partitionKeys.join("/") !== at.keys.join("/");
  const frozen = relaid || (pastView !== undefined && target.next === null && chainBehind(chain, target.view) + 1 >= MAX_CHAIN);
  const select = frozen
    ? frozenViewSelect(target.definition, after, overrides, at.pathOf, quoteFilePath)
    : pastViewSelect(target.definition, { relation: quoteIdentifier(pastView ?? at.name), columns: at.columns }, overrides, at.pathOf, quoteFilePath);
  const link = frozen ? "''" : pastView === undefined ? "NULL" : quoteLiteral(pastView);
  return {
    statements: [
      `CREATE OR REPLACE VIEW ${at.alias}.main.${quoteIdentifier(target.view)} AS ${select};`,
      `UPDATE ${at.past} SET overrides = ${quoteLiteral(encodeShown(overrides))}, next_view = ${link} WHERE view_name = ${quoteLiteral(target.view)};`,
    ],
    gone: [],
  };
}

/** How many past views read `view` through their chain (each the next one's, `''` for a view that reads none). */
function chainBehind(chain: readonly ChainedView[], view: string): number {
  let count = 0;
  for (let at = view; ; count += 1) {
    const older = chain.find((c) => c.next === at);
    if (!older) return count;
    at = older.view;
  }
}
