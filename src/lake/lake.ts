import type { Catalog, Pointer } from "../catalog/catalog.js";
import { pointersFingerprint, type CatalogFile } from "../catalog/catalog-file.js";
import { CatalogFileDeferral } from "./catalog-file-deferral.js";
import type { Engine, QueryResult, TableSnapshot } from "../engine/engine.js";
import type { Landing } from "../landing/landing.js";
import type { ObjectStore } from "../store/object-store.js";
import { LakeswapError, NotFoundError, TableCreatedMeanwhileError, errorMessage } from "../model/errors.js";
import { collectAfterSwap, type PartitionGcReport } from "./operations/gc.js";
import { HeldStates, partitionStates, type PartitionState } from "./operations/partition-states.js";
import { AfterMoves } from "./commit/after-moves.js";
import { replaceOne, type ReplaceOptions, type ReplaceResult } from "./operations/replace.js";
import { syncLeaseName } from "./layout.js";
import { DEFAULT_LEASE_WAIT_MS, WriterLease, leaseKey, removeAbandonedLease } from "./lease.js";
import { parsePartitionPath } from "../model/partition.js";
import { DEFAULT_GRACE_MS } from "./retention.js";
import { Outbox, type OutboxEntry } from "./outbox.js";
import { snapshotsAsOf } from "./operations/iceberg-as-of.js";
import { currentRuns, engineSnapshot, type SnapshotScope } from "./runs.js";
import { assertTableName } from "../model/sql.js";
import { isScratchTable, lakeTables } from "./scratch-tables.js";
import { replayEntries } from "./commit/replay.js";
import { waitingForRerun, warnHeldBack } from "./unfinished-syncs.js";
import { beginIcebergCommand, endIcebergCommand } from "./commit/iceberg-pending.js";
import { FileFacts } from "./commit/file-facts.js";
import { swapBatch, type SwapItem, type SwapOptions, type SwapOutcome } from "./commit/swap.js";
import { publishStaged } from "./commit/publish.js";
import type { RunManifest } from "./manifest.js";
import { notIngested, partitionOf, type LakeParts, type LeaseOptions, type LakePorts, type LakeSettings, type PartitionInput } from "./parts.js";
import type { TableDefinition } from "../model/table.js";
import type { SchemaChange } from "../model/schema-change.js";
import { changeHeldSchema, type SchemaRebuild } from "./operations/change-schema.js";
import { declareTable } from "./operations/declare-table.js";
import { PendingLayouts } from "./operations/relayout.js";

export type { PartitionGcReport } from "./operations/gc.js";
export type { PartitionHistory, RunHistoryEntry } from "./operations/history.js";
export type { RollbackResult } from "./operations/rollback.js";
export type { SwapBuild, SwapItem } from "./commit/swap.js";
export type { LakePorts, LakeSettings, PartitionInput } from "./parts.js";
export type { PartitionState } from "./operations/partition-states.js";
export type { ReplaceOptions, ReplaceResult } from "./operations/replace.js";
export type { SchemaRebuild } from "./operations/change-schema.js";

/** Writes to tables while holding their leases. */
export interface LakeWriter {
  /** Replaces one partition (a batch of one), with GC after it unless deferred. */
  replace(table: string, partition: PartitionInput, options: ReplaceOptions): Promise<ReplaceResult>;
  /** Replaces many partitions of one table as one batch (./commit/swap.ts); a partition that fails is reported in its outcome. */
  replaceBatch(table: string, items: readonly SwapItem[], options: SwapOptions): Promise<SwapOutcome[]>;
  /** The current state of a table's partitions, read under its lease (empty for a table that does not exist yet). */
  partitionStates(table: string): Promise<Map<string, PartitionState>>;
  /** GC of the given partitions after their swaps, once for all of them; a failure is reported, never thrown. */
  collectGarbage(table: string, partitions: readonly string[]): Promise<PartitionGcReport[]>;
  /** Every partition's (or `partitions`') current run and its files (store keys), under the lease: what an upsert merges into. */
  currentRuns(table: string, partitions?: readonly string[]): Promise<TableSnapshot>;
  /** A hint that builds reading these tables are likely to follow (`Engine.prepare`); it never fails. */
  prepareBuilds(builds: readonly (readonly string[])[]): void;
  /**
   * Changes a held table's schema in place as declared (model/schema-change.ts), judged against its definition as it
   * is now; `record` is called with the change and the definition before it, before the catalog is written (a sync
   * records it, so that `rollback --sync` restores the definition). Undefined where the table already is as declared.
   * With `rebuild` (`sync --rebuild-schema`), a change that cannot be made in place is made by rewriting every current
   * run under the new definition and moving the pointers to them before the definition (./operations/rebuild-schema.ts);
   * a change of partition keys builds the table in a new layout that this writer reads and writes from then on, and
   * that every other reader is switched to when the writer's work ends without an error (./operations/relayout.ts).
   */
  changeSchema(wanted: TableDefinition, record: (change: SchemaChange, previous: TableDefinition) => Promise<void>, rebuild?: SchemaRebuild): Promise<SchemaChange | undefined>;
  /** Publishes runs staged by `replaceBatch` (`stage`) as one decision, committed by `commit` (./commit/publish.ts). */
  publishStaged(staged: readonly { readonly table: string; readonly runs: readonly RunManifest[] }[], syncId: string, commit: () => Promise<void>): ReturnType<typeof publishStaged>;
}

/**
 * The lake: tables of Hive-style Parquet partitions whose pointers only ever
 * move to complete, audited runs. A thin facade: it opens the lake (replaying
 * what a dead writer left), declares and reads tables, takes writer leases,
 * and answers queries; every other operation is a function of its `parts` in
 * ./operations/ (replace, rollback, gc, history, pin, drop-table,
 * register-segment, syncs, deliveries, partition-states), and the invariants
 * live in the modules beside it (commit/, runs, lease, outbox), written once
 * over the ports.
 */
export class Lake {
  /** What the operations in ./operations/ work with: the ports, the outbox, the leases this lake holds. */
  readonly parts: LakeParts;
  /** The Landing port this lake was opened with, which the pipeline and the collector call directly (reading, signing and writing deliveries). */
  readonly landing: Landing;
  private readonly store: ObjectStore;
  private readonly catalog: Catalog;
  private readonly engine: Engine;
  private readonly settings: LakeSettings;
  private readonly outbox: Outbox;
  private readonly catalogFile: CatalogFile | undefined;
  /**
   * Fences per table (each pointer move is fenced first), and their count when this lake took the table's lease: a
   * table fenced since (by the holder of its lease, which this lake is) may have moved, and its catalog file view is
   * rewritten.
   */
  private readonly fences = new Map<string, number>();
  private readonly fencesAtLease = new Map<string, number>();
  /** Their count once the lease's replay of a dead writer's moves was done: the moves past it are the command's own. */
  private readonly fencesAfterReplay = new Map<string, number>();
  /** The tables the catalog file has views of, read once and then kept up to date by this lake's own updates. */
  private inCatalogFile: Promise<Map<string, string>> | undefined;
  /** The leases this lake holds right now, by table, so the swap can check its own. */
  private readonly leases = new Map<string, WriterLease>();
  /** Catalog file rewrites put off while a run of writes goes on (`parts.deferCatalogFile`). */
  private readonly deferral = new CatalogFileDeferral();

  private constructor(ports: LakePorts, settings: LakeSettings) {
    this.outbox = new Outbox(ports.store);
    this.store = ports.store;
    this.catalog = ports.catalog;
    this.engine = ports.engine;
    this.landing = ports.landing;
    this.catalogFile = ports.catalogFile;
    this.settings = settings;
    this.parts = {
      ...ports,
      graceMs: settings.graceMs ?? DEFAULT_GRACE_MS,
      settings,
      outbox: this.outbox,
      fileFacts: new FileFacts(),
      leaseCheck: (table) => this.leaseCheck(table),
      table: (name) => this.table(name),
      withLease: (table, command, work, options) => this.withLeases([table], command, work, options),
      withLeases: (names, command, work, options) => this.withLeases(names, command, work, options),
      deferCatalogFile: (work, maxLagMs) =>
        this.catalogFile && !settings.readOnly ? this.deferral.run(work, maxLagMs, (tables) => this.catchUpCatalogFile(tables)) : work(),
    };
  }

  /** Opens a lake, cleaning what a killed process left in the catalog and replaying pending catalog changes first (unless read-only). */
  static async open(ports: LakePorts, settings: LakeSettings = {}): Promise<Lake> {
    await ports.catalog.open({ readOnly: settings.readOnly });
    const lake = new Lake(ports, settings);
    if (!settings.readOnly) await lake.replayOutbox();
    return lake;
  }

  /** Catalog changes a writer recorded but never confirmed (`table/partition -> run`); the next writing command finishes them. */
  async pendingChanges(): Promise<{ table: string; partition: string; runId: string }[]> {
    return (await this.outbox.pending()).flatMap((entry) => entry.moves.map((move) => ({ table: entry.table, partition: move.partition, runId: move.runId })));
  }

  /** Finishes a dead writer's unconfirmed catalog changes where the pointer is still as it left it (others are stale, dropped); a live writer's tables are left to it. */
  async replayOutbox(): Promise<{ applied: number; stale: number }> {
    let applied = 0;
    let stale = 0;
    const byTable = new Map<string, OutboxEntry[]>();
    for (const entry of await this.outbox.pending()) byTable.set(entry.table, [...(byTable.get(entry.table) ?? []), entry]);
    for (const [tableName, entries] of byTable) {
      const table = await this.catalog.getTable(tableName);
      let lease: WriterLease;
      try {
        lease = await WriterLease.acquire(this.store, tableName, { waitMs: 0, ttlMs: this.settings.leaseTtlMs, command: `replay outbox of ${tableName}` });
      } catch {
        continue;
      }
      // In the lake's leases: the replay's pointer moves are fenced like any writer's.
      this.leases.set(tableName, lease);
      try {
        const result = await replayEntries(this.parts, table, entries);
        applied += result.applied;
        stale += result.stale;
        // Not where the moves finished are part of a killed sync's: its dataset's views wait for its rerun.
        if (result.applied > 0 && (await waitingForRerun(this, [tableName], this.catalogFile)).size === 0) await this.updateCatalogFile([tableName]);
      } finally {
        this.leases.delete(tableName);
        await lease.release();
      }
    }
    await this.removeDeadSyncLeases();
    return { applied, stale };
  }

  /** A sync killed leaves its own lease behind (nothing else would take it unless it is rolled back): removed once its holder is gone. */
  private async removeDeadSyncLeases(): Promise<void> {
    for (const object of await this.store.list(leaseKey(syncLeaseName("")).replace(/\.json$/, ""))) {
      if (object.key.endsWith(".json")) await removeAbandonedLease(this.store, object.key).catch(() => false);
    }
  }

  /** A hint, which never fails: a write whose builds read these tables follows (`Engine.prepare`, `CatalogFile.prepare`). */
  prepareWrite(builds: readonly (readonly string[])[]): void {
    this.engine.prepare?.(builds);
    if (!this.settings.readOnly) this.catalogFile?.prepare?.();
  }

  /** Closes the engine and the landing (adapters that share a DuckDB close it once: closing it again does nothing). */
  async close(): Promise<void> {
    await this.engine.close();
    await this.landing.close();
  }

  /**
   * Declares a table (idempotent for the same definition), and returns the definition it has: an ingested table that
   * exists already keeps the layout its files were written in (model/table.ts `keepIngestLayout`); one declared with
   * compatible schema changes is changed in place under its lease (./operations/change-schema.ts). A table another
   * writer created meanwhile with another definition is judged again against that one.
   */
  async createTable(wanted: TableDefinition, read?: { readonly existing: TableDefinition | undefined }): Promise<TableDefinition> {
    return declareTable(this, wanted, read).catch((error: unknown) => (error instanceof TableCreatedMeanwhileError ? declareTable(this, wanted) : Promise.reject(error)));
  }

  /** A table's definition, or a NotFoundError that lists the tables there are. */
  async table(name: string): Promise<TableDefinition> {
    assertTableName(name);
    const table = isScratchTable(name) ? undefined : await this.catalog.getTable(name);
    if (table) return table;
    const names = (await lakeTables(this.catalog)).map((t) => t.name);
    const known = names.length > 0 ? `tables here: ${names.join(", ")}` : "this lake has no tables yet (lakeswap create-table)";
    throw new NotFoundError(`table '${name}' does not exist in ${this.store.description}; ${known}`);
  }

  /** Every table's definition, by name (a held sync's scratch tables are not the lake's: ./scratch-tables.ts). */
  async listTables(): Promise<TableDefinition[]> {
    return lakeTables(this.catalog);
  }

  /**
   * Takes the writer leases of several tables for `work` (in name order, so two writers of overlapping sets never
   * deadlock), which may then read their state and replace partitions of them. Every decision `work` makes from that
   * state is made under the leases (DESIGN.md invariant 7). A table need not exist yet when its lease is taken.
   */
  async write<T>(tableNames: readonly string[], command: string, work: (writer: LakeWriter) => Promise<T>, options: LeaseOptions = {}): Promise<T> {
    const names = [...new Set(tableNames.map((name) => assertTableName(name)))].sort();
    if (!this.settings.readOnly) this.catalogFile?.prepare?.();
    const assertHeld = (tableName: string): void => {
      if (!names.includes(tableName) || !this.leases.has(tableName)) {
        throw new LakeswapError("LEASE_LOST", `table '${tableName}' is not among the tables this writer holds (${names.join(", ")})`);
      }
    };
    // Tables whose partition keys this writer changes: their new layouts, which its parts read in place of the
    // catalog's, and which it switches to when its work ends (./operations/relayout.ts).
    const layouts = new PendingLayouts();
    const parts: LakeParts = { ...this.parts, catalog: layouts.catalog(this.catalog) };
    const lake = { parts };
    const held = async (tableName: string): Promise<TableDefinition> => {
      assertHeld(tableName);
      return layouts.get(tableName) ?? this.table(tableName);
    };
    // A held table's states, read once: only this writer moves its pointers while it holds the lease, so its own moves
    // are all that change them (a sync's layers read the table they just wrote as their upstream).
    const states = new HeldStates();
    // A batch's manifests and acknowledgement, written while the writer goes on with other tables (a sync's next layer).
    const afterMoves = new AfterMoves();
    const writer: LakeWriter = {
      replace: async (tableName, partitionInput, options) => {
        const table = notIngested(await held(tableName), "replaced");
        states.forget(tableName);
        await afterMoves.settled(tableName);
        return replaceOne(parts, table, partitionOf(table, partitionInput), options);
      },
      replaceBatch: async (tableName, items, options) => {
        const table = notIngested(await held(tableName), "replaced");
        await afterMoves.settled(tableName);
        const afterMove = (step: Promise<void>) => afterMoves.add(tableName, step);
        return states.afterBatch(tableName, items, () => swapBatch(parts, table, items, { ...options, afterMove }));
      },
      partitionStates: async (tableName) => {
        assertHeld(tableName);
        // Kept states are the writer's own moves, in memory: they wait for no batch's manifests (only a read of the catalog does).
        return states.read(tableName, () => afterMoves.settled(tableName).then(() => partitionStates(lake, tableName)));
      },
      collectGarbage: async (tableName, partitions) => {
        const table = await held(tableName);
        await afterMoves.settled(tableName);
        return collectAfterSwap(parts, table, partitions.map((p) => parsePartitionPath(p, table.partitionKeys)));
      },
      currentRuns: async (tableName, partitions) => {
        assertHeld(tableName);
        await afterMoves.settled(tableName);
        // With the definition its runs are read under (a new layout's, where this writer changes the partition keys).
        return (await currentRuns(parts, { tables: [tableName], ...(partitions ? { partitions: [{ table: tableName, partitions }] } : {}) }))[0] ?? { table: await held(tableName), partitions: [] };
      },
      prepareBuilds: (builds) => this.engine.prepare?.(builds),
      changeSchema: async (wanted, record, rebuild) => {
        assertHeld(wanted.name);
        await afterMoves.settled(wanted.name);
        return changeHeldSchema(this, wanted, { record, rebuild, layouts, moved: (name) => states.forget(name) });
      },
      publishStaged: async (staged, syncId, commit) => {
        const tables = await Promise.all(staged.map(async (t) => ({ table: await held(t.table), runs: t.runs })));
        await afterMoves.settled(...staged.map((t) => t.table));
        return publishStaged(parts, tables, syncId, commit);
      },
    };
    return this.withLeases(
      names,
      command,
      async () => {
        const result = await work(writer).catch(async (error: unknown) => {
          await afterMoves.all().catch(() => undefined);
          throw error;
        });
        await afterMoves.all();
        await layouts.switchAll(this.parts);
        return result;
      },
      options,
    );
  }

  /**
   * Runs a query over the current runs of every lake table (tables visible by name), or, `asOf` a sync, a moment or
   * a snapshot id, over the Iceberg snapshots of `iceberg: true` tables then (./operations/iceberg-as-of.ts).
   */
  async query(sql: string, options: { readonly asOf?: string } = {}): Promise<QueryResult> {
    const scope = await this.queryScope(sql);
    return this.engine.query(sql, options.asOf === undefined ? await engineSnapshot(this.parts, scope) : await snapshotsAsOf(this, scope, options.asOf));
  }

  /**
   * The tables a query names, when the parser can tell (so that `SELECT 1` reads no table definition, and an
   * unreadable definition of another table stops only the commands that need it); every table otherwise.
   */
  private async queryScope(sql: string): Promise<SnapshotScope> {
    // SQL the parser refuses is the engine's to refuse (Athena's Trino SQL is not always DuckDB's): every table, then.
    const read = await this.landing.tablesRead(sql).catch(() => undefined);
    if (read === undefined) return {};
    return { tables: [...new Set(read.map((name) => name.toLowerCase()).filter((name) => /^[a-z][a-z0-9_]{0,127}$/.test(name)))] };
  }

  /**
   * The current run of every partition of the scope's tables (default: all), with its files as store keys unless
   * `files: false`; runs without files (an emptied partition) included. The one listing of current runs.
   */
  async snapshot(scope: SnapshotScope = {}): Promise<TableSnapshot[]> {
    return currentRuns(this.parts, scope);
  }

  /** The current pointer of a partition (run id, previous run, signature). */
  async pointer(tableName: string, partitionInput: PartitionInput): Promise<Pointer | undefined> {
    const table = await this.table(tableName);
    return this.catalog.getPointer(table, partitionOf(table, partitionInput, true));
  }

  private async withLease<T>(table: string, command: string, work: () => Promise<T>, options: LeaseOptions = {}): Promise<T> {
    const lease = await WriterLease.acquire(this.store, table, {
      waitMs: this.settings.leaseWaitMs ?? DEFAULT_LEASE_WAIT_MS,
      ttlMs: this.settings.leaseTtlMs,
      command,
      onWait: this.settings.onLeaseWait,
      kernelLock: options.kernelLock,
    });
    this.leases.set(table, lease);
    this.fencesAtLease.set(table, this.fences.get(table) ?? 0);
    // Only this writer changes the table's definition now: the catalog may keep it once read.
    const release = this.catalog.holdTable?.(table);
    try {
      // A writer that held the table since this lake was opened (the open's replay left its entries to it) may have died
      // after recording a move and before making it: finished now, before this writer decides anything (invariant 6).
      const pending = await this.outbox.pending(table);
      if (pending.length > 0) await replayEntries(this.parts, await this.catalog.getTable(table), pending);
      this.fencesAfterReplay.set(table, this.fences.get(table) ?? 0);
      // Only where Iceberg is supported (a local folder, a catalog with Iceberg tables): elsewhere no table has it, and the catalog is not asked.
      const icebergHere = this.store.capabilities.localPaths || this.catalog.iceberg !== undefined;
      const definition = icebergHere && /^[a-z][a-z0-9_]*$/.test(table) ? await this.catalog.getTable(table) : undefined;
      // The Iceberg view follows the pointers (a writer killed between its moves and its commit left it behind), and
      // then commits once what this command moved: one snapshot per command, after every pointer move of it.
      const beganMs = definition?.iceberg ? await beginIcebergCommand(this.parts, definition) : 0;
      const commit = async (): Promise<void> => {
        // Read again: the command may have changed the table's schema in place, which the snapshot's schema follows.
        const now = definition?.iceberg ? ((await this.catalog.getTable(table)) ?? definition) : undefined;
        const committed = now?.iceberg ? await endIcebergCommand(this.parts, now, { "lakeswap.command": command, ...options.summary?.() }, beganMs) : undefined;
        if (committed) options.onSnapshot?.(committed);
      };
      let result: T;
      try {
        result = await work();
      } catch (error) {
        await commit().catch(() => undefined);
        throw error;
      }
      await commit();
      return result;
    } finally {
      release?.();
      this.leases.delete(table);
      await lease.release();
    }
  }

  /**
   * Holds the leases of `names` (taken in name order, so two writers of overlapping sets never deadlock) while `work`
   * runs, then, still holding them, updates the catalog file's views of those tables (whether `work` succeeded or not:
   * a failed command may have moved some pointers).
   */
  private async withLeases<T>(names: readonly string[], command: string, work: () => Promise<T>, options: LeaseOptions = {}, own: readonly string[] = []): Promise<T> {
    const sorted = [...new Set(names)].sort();
    const hold = async (index: number): Promise<T> => {
      const name = sorted[index];
      if (name !== undefined) return this.withLease(name, command, () => hold(index + 1), options);
      try {
        return await work();
      } finally {
        const remove = options.catalogFile === "remove";
        if (remove || !this.deferral.putsOff(sorted, sorted.filter((table) => this.movedUnderLease(table)))) {
          const syncId = options.summary?.()["lakeswap.sync-id"];
          const settled = options.catalogFile === "settled" && syncId === undefined;
          await this.updateCatalogFile(await this.viewsToWrite(sorted, { remove, bySync: syncId !== undefined, own, settled, movesNone: options.catalogFile === "stale" }), remove, syncId);
        }
      }
    };
    return hold(0);
  }

  /**
   * The held tables whose catalog file views are rewritten: those whose pointers may have moved (every move is
   * fenced first), and those the file has no view of yet (a new table, a lake from before the file). A command that
   * moved nothing of a table the file shows leaves the file alone. A view behind its pointers for moves not this
   * command's (`own`: this lake's, put off by a deferral) that include a killed sync's is left as it is, unless this is
   * a sync (`bySync`, the killed one's rerun): the dataset's tables then change together, when a sync of it finishes.
   */
  private async viewsToWrite(held: readonly string[], at: { remove: boolean; bySync: boolean; own: readonly string[]; settled?: boolean; movesNone?: boolean }): Promise<string[]> {
    if (!this.catalogFile || this.settings.readOnly) return [];
    if (at.remove) return [...held];
    const catalogFile = this.catalogFile;
    const state = async (table: string): Promise<"moved" | "behind" | "shown"> => {
      // A table this command moved is rewritten: the file is read (once a process) only for the tables that did not move.
      // A command that moves no pointer (gc, whose lease checks are no moves) finds views behind, never its own moves.
      if ((!at.movesNone && this.movedByCommand(table)) || at.own.includes(table)) return "moved";
      // Only the lease's replay of a dead writer's moves moved it.
      if (this.movedUnderLease(table)) return "behind";
      this.inCatalogFile ??= catalogFile.tableStates().catch(() => new Map<string, string>());
      const known = await this.inCatalogFile;
      if (!known.has(table)) return "behind";
      // Nothing of it moved now, but a writer killed after its moves and before its rewrite may have left the view behind.
      const snapshot = (await currentRuns(this.parts, { tables: [table], files: false }))[0];
      return snapshot !== undefined && pointersFingerprint(snapshot) !== known.get(table) ? "behind" : "shown";
    };
    const tables = /^[a-z][a-z0-9_]*$/;
    const states = await Promise.all(held.map(async (table) => (tables.test(table) ? await state(table) : "shown")));
    const behind = held.filter((_, i) => states[i] === "behind");
    // A command outside syncs (replace, rollback of a partition) holds back the views of the tables it moved, too.
    const moved = at.settled ? held.filter((_, i) => states[i] === "moved") : [];
    // The normal path (a command's own moves, a sync) reads no sync record.
    const heldBack = at.bySync || behind.length + moved.length === 0 ? new Set<string>() : await waitingForRerun(this, [...behind, ...moved], this.catalogFile);
    const movedHeld = moved.filter((table) => heldBack.has(table));
    if (movedHeld.length > 0) warnHeldBack(catalogFile.location, movedHeld);
    return held.filter((table, i) => (states[i] === "moved" && !movedHeld.includes(table)) || (states[i] === "behind" && !heldBack.has(table)));
  }

  /**
   * Rewrites the catalog file's views of `names` (tables whose leases this lake holds) from their current runs, read
   * now, under the leases: a view only ever shows a state a writer finished. It never fails the command: a file that
   * cannot be written is left as it was, with a warning, and the next command that writes these tables rewrites it.
   */
  private async updateCatalogFile(names: readonly string[], remove = false, syncId?: string): Promise<void> {
    const file = this.catalogFile;
    if (!file || this.settings.readOnly) return;
    // Leases that are not tables' (a sync's own, `sync-<id>`) have no view.
    const tables = names.filter((name) => /^[a-z][a-z0-9_]*$/.test(name));
    if (tables.length === 0) return;
    try {
      const snapshots = await Promise.all(
        tables.map(async (name) => ({ name, snapshot: !remove && (await this.catalog.getTable(name)) ? (await currentRuns(this.parts, { tables: [name] }))[0] : undefined })),
      );
      const history = { syncId, graceMs: this.settings.graceMs ?? DEFAULT_GRACE_MS };
      await file.update(snapshots, async () => {
        for (const name of tables) await this.leaseCheck(name);
      }, history);
      const known = await this.inCatalogFile;
      for (const { name, snapshot } of snapshots) {
        if (snapshot) known?.set(name, pointersFingerprint(snapshot));
        else known?.delete(name);
      }
    } catch (error) {
      process.emitWarning(
        `${file.location} was not updated for ${tables.join(", ")} (${errorMessage(error)}): plain readers of it still see the state before this command; the next command that writes ${tables.length > 1 ? "these tables" : "this table"} rewrites it`,
        { code: "LAKESWAP_CATALOG_FILE" },
      );
    }
  }

  /** Whether this lake fenced a move of `table` since it took the table's lease (it may have moved a pointer). */
  private movedUnderLease(table: string): boolean {
    return (this.fences.get(table) ?? 0) > (this.fencesAtLease.get(table) ?? 0);
  }

  /** Whether the command fenced a move of `table` itself: after the lease's replay of a dead writer's moves. */
  private movedByCommand(table: string): boolean {
    return (this.fences.get(table) ?? 0) > (this.fencesAfterReplay.get(table) ?? this.fencesAtLease.get(table) ?? 0);
  }

  /** At the end of a deferral: the views it left behind, rewritten under their tables' leases (a failure is only a warning). */
  private async catchUpCatalogFile(tables: readonly string[]): Promise<void> {
    await this.withLeases(tables, "update the catalog file", async () => undefined, {}, tables).catch((error: unknown) => {
      process.emitWarning(`${this.catalogFile?.location} was not brought up to date for ${tables.join(", ")} (${errorMessage(error)}); the next command that writes them does it`, { code: "LAKESWAP_CATALOG_FILE" });
    });
  }

  /** The fence of every pointer move (./lease.ts `fence`): throws LEASE_LOST unless this lake still holds the table's lease. */
  private async leaseCheck(table: string): Promise<void> {
    const lease = this.leases.get(table);
    if (!lease) throw new LakeswapError("LEASE_LOST", `no writer lease is held for table '${table}'`);
    this.fences.set(table, (this.fences.get(table) ?? 0) + 1);
    await lease.fence();
  }
}
