import { createHash } from "node:crypto";
import type { Catalog, Pointer, PointerMoveKind } from "../catalog/catalog.js";
import type { Engine, PartitionSnapshot, QueryResult, TableSnapshot } from "../engine/engine.js";
import type {
  IdentifiedFiles, LandRequest, LandedDelivery, Landing, LandedFile, LandingSummary, MergeRequest, PartitionMapRequest,
} from "../landing/landing.js";
import type { ObjectStore } from "../store/object-store.js";
import { IngestFileConflictError, InvalidInputError, LakeswapError, NotFoundError, errorMessage } from "../model/errors.js";
import { faultPoint } from "../shared/faults.js";
import { collectAfterSwap, collectPartition, gcState, type PartitionGcReport } from "./operations/gc.js";
import { knownPartitions, partitionHistories, type PartitionHistory } from "./operations/history.js";
import { registerSegment, type RegisteredPartition, type SegmentContribution, type SegmentId } from "./operations/register-segment.js";
import { ingestPartitionPrefix, runsPrefix, leaseLockKey, syncLeaseName, ingestTalliesPrefix, pinnedPartition, deliveriesPrefix, deliveryFilesKey, deliveryKey, manifestsPrefix, outboxPrefix, pinKey, pinsPrefix, syncRecordKey, SYNCS_PREFIX } from "./layout.js";
import { DEFAULT_LEASE_WAIT_MS, WriterLease, leaseKey, removeAbandonedLease, type LeaseRecord } from "./lease.js";
import { orderPartition, parsePartition, parsePartitionPath, partitionPath, type Partition } from "../model/partition.js";
import { DEFAULT_GRACE_MS } from "./retention.js";
import { isRunId } from "../model/run-id.js";
import { Outbox, type OutboxEntry } from "./outbox.js";
import {
  checkRunId, rollbackMoves, rollbackPartition, type RollbackResult, type SyncRollbackEntry, type SyncRollbackResult,
} from "./operations/rollback.js";
import { readManifest, runFiles } from "./runs.js";
import { mapLimited } from "../shared/map-limited.js";
import { assertTableName } from "../model/sql.js";
import { removePointers } from "./commit/move.js";
import { replayEntry, swapBatch, type SnapshotScope, type SwapContext, type SwapItem, type SwapOptions, type SwapOutcome } from "./commit/swap.js";
import { parseSyncRecord, type SyncMove, type SyncRecord } from "./sync-record.js";
import type { TableDefinition } from "../model/table.js";

export type { PartitionGcReport } from "./operations/gc.js";
export type { PartitionHistory, RunHistoryEntry } from "./operations/history.js";
export type { RollbackResult, SyncRollbackEntry, SyncRollbackResult } from "./operations/rollback.js";
export type { SwapBuild, SwapItem } from "./commit/swap.js";

/** The ports a lake runs on. */
export interface LakePorts {
  readonly store: ObjectStore;
  readonly catalog: Catalog;
  /** Runs users' SQL: layer builds, replaces, queries. */
  readonly engine: Engine;
  /** lakeswap's own local work: landing deliveries, writing their runs, footers, partition maps. */
  readonly landing: Landing;
}

/** Settings shared by every operation of one lake. */
export interface LakeSettings {
  /** Runs younger than this are never garbage-collected (default 6h). */
  readonly graceMs?: number;
  /** How long a writer waits for another writer's lease (default 2 minutes; 0 = fail at once). */
  readonly leaseWaitMs?: number;
  readonly leaseTtlMs?: number;
  /** Told when this writer has to wait for another one. */
  readonly onLeaseWait?: (holder: LeaseRecord) => void;
  /**
   * For commands that only read (history, tables, query, syncs, plan): the
   * lake is opened without replaying the outbox, so reading never moves a
   * pointer; `pendingChanges()` tells what a writer left unconfirmed.
   */
  readonly readOnly?: boolean;
}

/** A partition named by the user: parsed text (`day=2026-11-01`) or a partition. */
export type PartitionInput = string | Partition;

/** What one partition replace did. */
export interface ReplaceResult {
  readonly table: string;
  readonly partition: string;
  readonly runId: string;
  readonly previousRunId?: string;
  readonly rows: number;
  readonly previousRows?: number;
  readonly bytes: number;
  readonly seconds: number;
  readonly gc: PartitionGcReport;
}

/** Options of one partition replace. */
export interface ReplaceOptions {
  readonly select: string;
  /** Accept a build of 0 rows for a partition that has rows (default false). */
  readonly allowEmpty?: boolean;
  /** Recorded with the run and moved with the pointer. */
  readonly signature?: string;
  /** The transform's fingerprint, recorded with the run (derived layers). */
  readonly fingerprint?: string;
  /** The signed inputs, recorded with the run (`table/partition=signature`). */
  readonly inputs?: readonly string[];
  /** Restricts what the SELECT sees of some tables to the given partitions (a derived partition's declared inputs). */
  readonly inputPartitions?: readonly { readonly table: string; readonly partitions: readonly string[] }[];
  /** The SELECT reads a landed delivery (raw layer, dead letters). */
  readonly landed?: boolean;
  /** The lake tables the SELECT may read (default: every table). */
  readonly readable?: readonly string[];
  /** Leave GC to the caller, who collects once for many replaces (`LakeWriter.collectGarbage`); `gc` is then empty. */
  readonly deferGc?: boolean;
  /** Told the move right before the pointer moves (after the build and its audit), so a sync can record its intent first. */
  readonly beforeSwap?: (move: { readonly runId: string; readonly previousRunId?: string }) => Promise<void>;
}

/** Writes to tables while holding their leases. */
export interface LakeWriter {
  /** Replaces one partition (a batch of one), with GC after it unless deferred. */
  replace(table: string, partition: PartitionInput, options: ReplaceOptions): Promise<ReplaceResult>;
  /** Replaces many partitions of one table as one batch (./swap.ts); a partition that fails is reported in its outcome. */
  replaceBatch(table: string, items: readonly SwapItem[], options: SwapOptions): Promise<SwapOutcome[]>;
  /** The current state of a table's partitions, read under its lease (empty for a table that does not exist yet). */
  partitionStates(table: string): Promise<Map<string, PartitionState>>;
  /** GC of the given partitions after their swaps, once for all of them; a failure is reported, never thrown. */
  collectGarbage(table: string, partitions: readonly string[]): Promise<PartitionGcReport[]>;
  /** Every partition's current run and its files (store keys), read under the lease: what an upsert merges into. */
  currentRuns(table: string): Promise<PartitionSnapshot[]>;
}

/** What a sync needs to know about a partition's current run (fingerprint, inputs and rows only where its manifest was read: a pointer without a signature). */
export interface PartitionState {
  readonly partition: string;
  readonly runId: string;
  readonly signature?: string;
  readonly fingerprint?: string;
  readonly inputs?: readonly string[];
  readonly rows?: number;
  readonly movedBy?: PointerMoveKind;
  readonly pinned: boolean;
}

/** Progress of work that spans several partitions. */
export type ProgressListener = (event: { readonly done: number; readonly total: number; readonly label: string }) => void;

/**
 * The lake: tables of Hive-style Parquet partitions whose pointers only ever
 * move to complete, audited runs. A thin facade: the invariants live in the
 * modules beside it (swap, gc, rollback, history, runs, lease), written once
 * over the ports.
 */
/** Files of one ingested segment stored at the same time. */
const INGEST_FILES_AT_ONCE = 64;

export class Lake {
  private readonly store: ObjectStore;
  private readonly catalog: Catalog;
  private readonly engine: Engine;
  /** The Landing port this lake was opened with, which the pipeline and the collector call directly (reading, signing and writing deliveries). */
  readonly landing: Landing;
  private readonly graceMs: number;
  private readonly settings: LakeSettings;
  private readonly outbox: Outbox;
  private readonly ctx: SwapContext;
  /** The leases this lake holds right now, by table, so the swap can check its own. */
  private readonly leases = new Map<string, WriterLease>();

  private constructor(ports: LakePorts, settings: LakeSettings) {
    this.outbox = new Outbox(ports.store);
    this.store = ports.store;
    this.catalog = ports.catalog;
    this.engine = ports.engine;
    this.landing = ports.landing;
    this.graceMs = settings.graceMs ?? DEFAULT_GRACE_MS;
    this.settings = settings;
    this.ctx = {
      store: this.store,
      catalog: this.catalog,
      engine: this.engine,
      landing: this.landing,
      graceMs: this.graceMs,
      outbox: this.outbox,
      leaseCheck: (table) => this.leaseCheck(table),
      snapshot: (scope) => this.snapshot(scope),
    };
  }

  /** Opens a lake, cleaning what a killed process left in the catalog and replaying pending catalog changes first (unless read-only). */
  static async open(ports: LakePorts, settings: LakeSettings = {}): Promise<Lake> {
    await ports.catalog.open();
    const lake = new Lake(ports, settings);
    if (!settings.readOnly) await lake.replayOutbox();
    return lake;
  }

  /** Catalog changes a writer recorded but never confirmed (`table/partition -> run`); the next writing command finishes them. */
  async pendingChanges(): Promise<{ table: string; partition: string; runId: string }[]> {
    return (await this.outbox.pending()).flatMap((entry) => entry.moves.map((move) => ({ table: entry.table, partition: move.partition, runId: move.runId })));
  }

  /**
   * Finishes catalog changes a dead writer recorded but never confirmed. A
   * change is applied only if the pointer is still where the writer left it;
   * if it moved on since, the change is stale and dropped. Tables whose lease
   * is held by a live writer are left to it.
   */
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
        for (const entry of entries) {
          const result = await replayEntry(this.ctx, table, entry);
          applied += result.applied;
          stale += result.stale;
        }
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

  async close(): Promise<void> {
    await this.engine.close();
    if ((this.landing as unknown) !== this.engine) await this.landing.close();
  }

  /** Declares a table (idempotent for the same definition). */
  async createTable(table: TableDefinition): Promise<void> {
    await this.catalog.createTable(table);
  }

  /** A table's definition, or a NotFoundError that lists the tables there are. */
  async table(name: string): Promise<TableDefinition> {
    assertTableName(name);
    const table = await this.catalog.getTable(name);
    if (table) return table;
    const names = (await this.catalog.listTables()).map((t) => t.name);
    const known = names.length > 0 ? `tables here: ${names.join(", ")}` : "this lake has no tables yet (lakeswap create-table)";
    throw new NotFoundError(`table '${name}' does not exist in ${this.store.description}; ${known}`);
  }

  async listTables(): Promise<TableDefinition[]> {
    return this.catalog.listTables();
  }

  /** Removes a table: pointers first (readers stop seeing it), then its runs and records. */
  async dropTable(name: string): Promise<void> {
    const table = await this.table(name);
    await this.withLease(table.name, `drop-table ${table.name}`, async () => {
      await removePointers(this.catalog, table, (await this.catalog.listPointers(table)).map((p) => p.partition), () => this.leaseCheck(table.name));
      const objects = [
        ...(await this.store.list(table.ingest ? `${table.name}/` : runsPrefix(this.catalog, table))),
        ...(table.ingest ? await this.store.list(ingestTalliesPrefix(table.name)) : []),
        ...(await this.store.list(manifestsPrefix(table.name))),
        ...(await this.store.list(pinsPrefix(table.name))),
        ...(await this.store.list(outboxPrefix(table.name))),
        ...(await this.store.list(deliveriesPrefix(table.name))),
      ];
      await this.store.delete(objects.map((o) => o.key));
      // Last, while this writer still holds its kernel lock: a table dropped leaves nothing behind.
      if (this.store.tryLock) await this.store.delete([leaseLockKey(table.name)]);
    });
    await this.catalog.dropTable(table.name);
  }

  /**
   * Replaces one partition: lease -> build into a fresh run prefix -> audit ->
   * move the pointer -> write the run's manifest -> GC -> release. A failure at
   * any step before the pointer moves leaves readers on the old run.
   */
  async replacePartition(tableName: string, partitionInput: PartitionInput, options: ReplaceOptions): Promise<ReplaceResult> {
    const table = notIngested(await this.table(tableName), "replaced");
    const partition = this.partitionOf(table, partitionInput);
    return this.withLease(table.name, `replace ${table.name}/${partitionPath(partition)}`, () => this.replaceOne(table, partition, options));
  }

  /**
   * Takes the writer leases of several tables for `work` (in name order, so two
   * writers of overlapping sets never deadlock), which may then read their
   * state and replace partitions of them. Every decision `work` makes from
   * that state is made under the leases (DESIGN.md invariant 7). A table need
   * not exist yet when its lease is taken.
   */
  async write<T>(tableNames: readonly string[], command: string, work: (writer: LakeWriter) => Promise<T>): Promise<T> {
    const names = [...new Set(tableNames.map((name) => assertTableName(name)))].sort();
    const assertHeld = (tableName: string): void => {
      if (!names.includes(tableName) || !this.leases.has(tableName)) {
        throw new LakeswapError("LEASE_LOST", `table '${tableName}' is not among the tables this writer holds (${names.join(", ")})`);
      }
    };
    const held = async (tableName: string): Promise<TableDefinition> => {
      assertHeld(tableName);
      return this.table(tableName);
    };
    const writer: LakeWriter = {
      replace: async (tableName, partitionInput, options) => {
        const table = notIngested(await held(tableName), "replaced");
        return this.replaceOne(table, this.partitionOf(table, partitionInput), options);
      },
      replaceBatch: async (tableName, items, options) => swapBatch(this.ctx, notIngested(await held(tableName), "replaced"), items, options),
      partitionStates: async (tableName) => {
        // A table may not exist yet (its first sync): it then has no partitions.
        assertHeld(tableName);
        return (await this.catalog.getTable(tableName)) ? this.partitionStates(tableName) : new Map();
      },
      collectGarbage: async (tableName, partitions) => {
        const table = await held(tableName);
        return collectAfterSwap(this.ctx, table, partitions.map((p) => parsePartitionPath(p, table.partitionKeys)));
      },
      currentRuns: async (tableName) => {
        assertHeld(tableName);
        return (await this.catalog.getTable(tableName)) ? this.currentRuns(tableName) : [];
      },
    };
    return this.withLeases(names, command, () => work(writer));
  }

  /** Holds the leases of `names` (taken in name order, so two writers of overlapping sets never deadlock) while `work` runs. */
  private async withLeases<T>(names: readonly string[], command: string, work: () => Promise<T>): Promise<T> {
    const sorted = [...new Set(names)].sort();
    const hold = async (index: number): Promise<T> => {
      const name = sorted[index];
      return name === undefined ? work() : this.withLease(name, command, () => hold(index + 1));
    };
    return hold(0);
  }

  /** One partition as a batch of one, under the lease the caller holds. */
  private async replaceOne(table: TableDefinition, partition: Partition, options: ReplaceOptions): Promise<ReplaceResult> {
    const [outcome] = await swapBatch(
      this.ctx,
      table,
      [{ partition, signature: options.signature, fingerprint: options.fingerprint, inputs: options.inputs, select: options.select, inputPartitions: options.inputPartitions }],
      {
        build: { kind: "select", landed: options.landed, readable: options.readable },
        allowEmpty: options.allowEmpty,
        previousRows: true,
        beforeSwap: options.beforeSwap ? async ([move]) => move && options.beforeSwap?.(move) : undefined,
      },
    );
    if (!outcome || outcome.error !== undefined || outcome.runId === undefined) throw outcome?.error ?? new Error("the replace did not run");
    const gc = options.deferGc
      ? { table: table.name, partition: outcome.partition, kept: [], removed: [] }
      : ((await collectAfterSwap(this.ctx, table, [partition]))[0] as PartitionGcReport);
    faultPoint("before-release");
    return {
      table: table.name,
      partition: outcome.partition,
      runId: outcome.runId,
      previousRunId: outcome.previousRunId,
      rows: outcome.rows ?? 0,
      previousRows: outcome.previousRows,
      bytes: outcome.bytes ?? 0,
      seconds: outcome.seconds,
      gc,
    };
  }

  /**
   * Stores the files of one segment of an ingested table, one per partition at `<table>/<partition>/<fileId>.parquet`,
   * each exactly once and a few at a time (on S3 the store's upload limit decides how many requests are in flight):
   * a retry after a crash finds an object there and checks that it holds the same rows (its footer's count).
   */
  async storeIngestedFiles(tableName: string, files: readonly { readonly partition: Partition; readonly fileId: string; readonly file: string; readonly rows: number }[]): Promise<void> {
    const table = await this.table(tableName);
    if (!table.ingest) throw new LakeswapError("CONFLICT", `table '${table.name}' is not an ingested table; events cannot be written to it`);
    await mapLimited(files, INGEST_FILES_AT_ONCE, async ({ partition, fileId, file, rows }) => {
      if (!/^[A-Za-z0-9_-]{1,128}$/.test(fileId)) throw new InvalidInputError(`'${fileId}' is not a segment file id (letters, digits, '_', '-')`);
      const key = `${ingestPartitionPrefix(table, partition)}${fileId}.parquet`;
      if (await this.store.putFileIfAbsent(key, file)) return;
      const [existing] = await this.store.list(key);
      const [found] = existing ? await this.landing.countFileRows([{ key, size: existing.size }]) : [undefined];
      if (found !== rows) {
        throw new IngestFileConflictError(
          `${this.store.description}/${key} already exists with ${found ?? "unreadable"} rows, not the ${rows} this segment holds; two collectors may share one write-ahead log id`,
          `${this.store.description}/${key}`,
        );
      }
    });
  }

  /** Registers what one segment added to an ingested table (tallies, then pointers with signatures), under the table's lease. */
  async registerIngested(tableName: string, segment: SegmentId, contributions: readonly SegmentContribution[]): Promise<RegisteredPartition[]> {
    const table = await this.table(tableName);
    return this.withLease(table.name, `ingest ${table.name}`, () => registerSegment(this.ctx, table, segment, contributions));
  }

  /** Marks a partition pinned: syncs leave it as it is (e.g. after a deliberate rollback). */
  async pin(tableName: string, partitionInput: PartitionInput, reason = ""): Promise<void> {
    const table = await this.table(tableName);
    const partition = this.partitionOf(table, partitionInput);
    await this.store.put(pinKey(table.name, partition), JSON.stringify({ pinnedAt: new Date().toISOString(), reason }));
  }

  /** Removes a partition's pin; the next sync decides about it again. */
  async unpin(tableName: string, partitionInput: PartitionInput): Promise<boolean> {
    const table = await this.table(tableName);
    const key = pinKey(table.name, this.partitionOf(table, partitionInput));
    const existed = (await this.store.get(key)) !== undefined;
    await this.store.delete([key]);
    return existed;
  }

  /** The current run of every partition of a table, with what a sync compares: signature, fingerprint, inputs, how the pointer moved, pins. */
  async partitionStates(tableName: string): Promise<Map<string, PartitionState>> {
    const table = await this.table(tableName);
    const prefix = pinsPrefix(table.name);
    const pins = new Set((await this.store.list(prefix)).map((o) => pinnedPartition(o.key.slice(prefix.length))));
    const states = new Map<string, PartitionState>();
    for (const pointer of await this.catalog.listPointers(table)) {
      const path = partitionPath(pointer.partition);
      // The signature moves with the pointer (pointer state, Glue Parameters): a manifest is read only where it does not.
      const manifest = pointer.signature === undefined ? await readManifest(this.store, table, pointer.partition, pointer.runId) : undefined;
      states.set(path, {
        partition: path,
        runId: pointer.runId,
        signature: pointer.signature ?? manifest?.signature,
        fingerprint: manifest?.fingerprint,
        inputs: manifest?.inputs,
        rows: manifest?.rows,
        movedBy: pointer.movedBy,
        pinned: pins.has(path),
      });
    }
    for (const path of pins) {
      if (!states.has(path)) states.set(path, { partition: path, runId: "", pinned: true });
    }
    return states;
  }

  /** The transform fingerprint a run was built with (from its manifest), or undefined. */
  async runFingerprint(tableName: string, partitionInput: PartitionInput, runId: string): Promise<string | undefined> {
    const table = await this.table(tableName);
    return (await readManifest(this.store, table, this.partitionOf(table, partitionInput), runId))?.fingerprint;
  }

  /** The delivery parts appended into a run so far (`write: append`, from its manifest); empty for a run that was not appended to. */
  async appendedTo(tableName: string, partitionInput: PartitionInput, runId: string): Promise<readonly string[]> {
    const table = await this.table(tableName);
    return (await readManifest(this.store, table, this.partitionOf(table, partitionInput), runId))?.appended ?? [];
  }

  /** Merges a landed delivery into a table's current rows by key (`write: upsert`); release the result with `releaseDelivery`, before the delivery. */
  async mergeDelivery(request: MergeRequest): Promise<LandedDelivery> {
    return this.landing.mergeLanded(request);
  }

  /** Moves a partition's pointer back to the newest completed older run, or to `toRunId`. */
  async rollback(tableName: string, partitionInput: PartitionInput, options: { toRunId?: string } = {}): Promise<RollbackResult> {
    const table = notIngested(await this.table(tableName), "rolled back");
    const partition = this.partitionOf(table, partitionInput);
    checkRunId(table, options.toRunId);
    return this.withLease(table.name, `rollback ${table.name}/${partitionPath(partition)}`, () => rollbackPartition(this.ctx, table, partition, options.toRunId));
  }

  /** Writes (or rewrites, as a sync goes) a sync's record of the pointers it moved. */
  async recordSync(record: SyncRecord): Promise<void> {
    await this.store.put(syncRecordKey(record.syncId), `${JSON.stringify(record, null, 2)}\n`);
  }

  /** The id of the newest recorded sync (record keys sort by sync id), from one listing; undefined in a lake without syncs. */
  async latestSyncId(): Promise<string | undefined> {
    const ids = (await this.store.list(SYNCS_PREFIX)).map((object) => object.key.slice(SYNCS_PREFIX.length).replace(/\.json$/, "")).filter(isRunId);
    return ids.sort().at(-1);
  }

  /**
   * The records of past syncs, newest first. An unreadable record stops the listing (a STORE_ERROR naming it),
   * unless `skipUnreadable`: then it is left out and handed to `onUnreadable` (lakeswap syncs reports it).
   */
  async syncs(options: { skipUnreadable?: boolean; onUnreadable?: (error: unknown) => void } = {}): Promise<SyncRecord[]> {
    const records: SyncRecord[] = [];
    for (const object of await this.store.list(SYNCS_PREFIX)) {
      try {
        const record = await this.syncRecord(object.key);
        if (record) records.push(record);
      } catch (error) {
        // A listing can go on without an unreadable record; deciding which sync is the last one cannot.
        if (!options.skipUnreadable) throw error;
        options.onUnreadable?.(error);
      }
    }
    return records.sort((a, b) => (a.syncId < b.syncId ? 1 : a.syncId > b.syncId ? -1 : 0));
  }

  /**
   * Moves back every pointer one sync moved (`last`: the newest sync): each
   * partition to the run that was current before the sync, or, where the sync
   * created the partition, no run at all. A sync still running is waited for
   * (its own lease, held from its first record to its end), and then the
   * leases of every table it moved are taken together, in name order, as a
   * sync takes them: the rollback undoes the sync's whole result, never a part
   * of it while the rest is still moving. A partition whose pointer moved
   * since (a later sync, a rollback) is left alone and reported. Per table the
   * moves are one batch (Glue: 100 per call, every entry checked). As with a
   * one-partition rollback, the next sync rebuilds what was rolled back unless
   * it is pinned.
   */
  async rollbackSync(syncId: string): Promise<SyncRollbackResult> {
    for (;;) {
      const record = await this.findSync(syncId);
      const command = `rollback sync ${record.syncId}`;
      // Waits for a sync that is still running (or takes over the lease of one that died), then for its tables.
      const result = await this.withLease(syncLeaseName(record.syncId), command, async () => {
        const tables = [...new Set((await this.findSync(record.syncId)).moves.map((move) => move.table))];
        return this.withLeases(tables, command, async () => {
          // Read again under every lease: nothing can add to the record now. `last` may name a newer sync by now (one
          // that recorded while this rollback waited), and a sync that moved one more table than was locked is locked again.
          const final = await this.findSync(syncId);
          if (final.syncId !== record.syncId || final.moves.some((move) => !tables.includes(move.table))) return undefined;
          return { syncId: final.syncId, partitions: await this.rollbackRecorded(final) };
        });
      }, { kernelLock: false });
      if (result) return result;
    }
  }

  /** Rolls back the moves of a finished (or dead) sync, under the leases of its tables: downstream layers first. */
  private async rollbackRecorded(record: SyncRecord): Promise<SyncRollbackEntry[]> {
    const byTable = new Map<string, SyncMove[]>();
    for (const move of record.moves) byTable.set(move.table, [...(byTable.get(move.table) ?? []), move]);
    const entries: SyncRollbackEntry[] = [];
    // Tables in the reverse order the sync reached them: a derived layer is rolled back before its inputs.
    for (const [tableName, moves] of [...byTable].reverse()) {
      const table = await this.catalog.getTable(tableName);
      if (!table) {
        entries.push(...moves.map((m): SyncRollbackEntry => ({ table: tableName, partition: m.partition, action: "skipped", fromRunId: m.run, reason: "the table no longer exists" })));
        continue;
      }
      entries.push(...(await rollbackMoves(this.ctx, table, moves)));
    }
    return entries;
  }

  /** The record of sync `syncId` (`last`: the newest sync that moved, or was about to move, a pointer, finished or not). */
  private async findSync(syncId: string): Promise<SyncRecord> {
    const record = syncId === "last" ? (await this.syncs()).find((r) => r.moves.length > 0) : await this.syncRecord(syncRecordKey(syncId));
    if (!record) {
      throw new NotFoundError(syncId === "last" ? "no sync has been recorded in this lake yet" : `no sync ${syncId} is recorded in this lake; lakeswap syncs lists them`);
    }
    return record;
  }

  /**
   * Takes the lease of a sync that is about to record its first move, held until `release` (its end): a
   * `rollback --sync` of it waits for it. Taken once its record exists, so whoever finds the record finds
   * the lease held while the sync runs; a sync killed leaves it to the next taker (same host: at once).
   */
  async holdSyncLease(syncId: string, command: string): Promise<{ release(): Promise<void> }> {
    // No kernel lock: the table leases it is taken under keep a stalled sync's tables; this one only tells that it runs.
    return WriterLease.acquire(this.store, syncLeaseName(syncId), { waitMs: 0, ttlMs: this.settings.leaseTtlMs, command, kernelLock: false });
  }

  /** The sync record at `key` (record keys sort by sync id, so the last one listed is the newest). */
  private async syncRecord(key: string | undefined): Promise<SyncRecord | undefined> {
    const stored = key === undefined ? undefined : await this.store.get(key);
    return stored && key !== undefined ? parseSyncRecord(stored.body, key) : undefined;
  }

  /** The runs of one partition, or of every partition of a table, newest first. */
  async history(tableName: string, partitionInput?: PartitionInput): Promise<PartitionHistory[]> {
    const table = await this.table(tableName);
    const partitions = partitionInput !== undefined ? [this.partitionOf(table, partitionInput)] : await knownPartitions(this.ctx, table);
    return partitionHistories(this.ctx, table, partitions, partitionInput !== undefined);
  }

  /** Garbage-collects runs outside the retention rule, in one table or in all. */
  async gc(
    tableName: string | undefined,
    options: { dryRun?: boolean; graceMs?: number; onProgress?: ProgressListener } = {},
  ): Promise<PartitionGcReport[]> {
    const tables = tableName !== undefined ? [await this.table(tableName)] : await this.catalog.listTables();
    const reports: PartitionGcReport[] = [];
    for (const table of tables) {
      const collect = async (): Promise<void> => {
        const partitions = await knownPartitions(this.ctx, table);
        const state = await gcState(this.ctx, table);
        for (const [index, partition] of partitions.entries()) {
          options.onProgress?.({ done: index, total: partitions.length, label: `${table.name}/${partitionPath(partition)}` });
          reports.push(await collectPartition(this.ctx, table, partition, state, { dryRun: options.dryRun ?? false, graceMs: options.graceMs ?? this.graceMs }));
        }
      };
      if (options.dryRun) await collect();
      else await this.withLease(table.name, `gc ${table.name}`, collect);
    }
    return reports;
  }

  /**
   * The files a delivery's paths name and its id (a digest of their names and
   * bytes), without landing it. With the raw table it is for, what was found
   * out about the same paths last time is kept in the lake, so that the same
   * files, unchanged, are named without being read again (`IdentifiedFiles`).
   */
  async identifyDelivery(files: readonly string[], table?: string): Promise<{ readonly files: readonly string[]; readonly id: string; readonly hashed: boolean }> {
    const key = table === undefined ? undefined : deliveryFilesKey(assertTableName(table), createHash("sha256").update(JSON.stringify(files)).digest("hex").slice(0, 32));
    let known: IdentifiedFiles | undefined;
    if (key !== undefined) {
      const stored = await this.store.get(key).catch(() => undefined);
      try {
        known = stored ? (JSON.parse(Buffer.from(stored.body).toString("utf8")) as IdentifiedFiles) : undefined;
      } catch {
        // Unreadable: the files are read again to name them, and it is written anew.
      }
    }
    const identified = await this.landing.identify(files, known);
    if (key !== undefined && identified.hashed) {
      // Only saves a read of the delivery next time: failing to keep it is not the sync's failure.
      await this.store.put(key, JSON.stringify(identified.identified)).catch((error: unknown) => {
        process.emitWarning(`could not keep what identifies delivery ${identified.id} (${errorMessage(error)}); its next sync reads it again`);
      });
    }
    return { files: identified.files, id: identified.id, hashed: identified.hashed };
  }

  /** The landing summary kept for a delivery of a raw table under `key`, if one was kept (and is readable). */
  async landingSummary(table: string, key: string): Promise<LandingSummary | undefined> {
    const stored = await this.store.get(deliveryKey(assertTableName(table), key));
    if (!stored) return undefined;
    try {
      const summary = JSON.parse(Buffer.from(stored.body).toString("utf8")) as LandingSummary;
      return Array.isArray(summary.partitions) && typeof summary.id === "string" ? summary : undefined;
    } catch {
      // An unreadable summary only costs a landing: the delivery is read again.
      return undefined;
    }
  }

  /** Keeps what landing a delivery found, under `key` (the delivery's digest and the dataset's declaration). */
  async keepLandingSummary(table: string, key: string, summary: LandingSummary): Promise<void> {
    const { id, files, rowsRead, rowsLoaded, rowsRejected, partitions, signing } = summary;
    const kept: LandingSummary = { id, files, rowsRead, rowsLoaded, rowsRejected, partitions, signing };
    await this.store.put(deliveryKey(assertTableName(table), key), JSON.stringify(kept));
  }

  /** Lands a delivery's source files in the engine (raw layer); release it with `releaseDelivery`. */
  async landDelivery(request: LandRequest): Promise<LandedDelivery> {
    return this.landing.land(request);
  }

  /** Writes each partition of a landed delivery into a local Parquet file of its own (an ingested segment's files). */
  async writeLandedFiles(request: { readonly table: TableDefinition; readonly delivery: LandedDelivery; readonly dir: string }): Promise<LandedFile[]> {
    return this.landing.writeLandedFiles(request);
  }

  /** Writes a landed delivery's bad rows as JSONL to a local file (ingest dead letters). */
  async writeRejected(request: Parameters<Landing["writeRejected"]>[0]): Promise<number> {
    return this.landing.writeRejected(request);
  }

  async releaseDelivery(delivery: LandedDelivery): Promise<void> {
    await this.landing.releaseLanding(delivery);
  }

  /** Evaluates a derived layer's partition map over upstream partition values. */
  async mapPartitions(request: PartitionMapRequest): Promise<string[][]> {
    return this.landing.mapPartitions(request);
  }

  /** The tables a SELECT names (CTE names aside), by the engine's own parser; undefined when that parser cannot read it. */
  async tablesRead(select: string): Promise<string[] | undefined> {
    return this.landing.tablesRead(select);
  }

  /** Runs a query over the current runs of every lake table (tables visible by name). */
  async query(sql: string): Promise<QueryResult> {
    return this.engine.query(sql, await this.snapshot(await this.queryScope(sql)));
  }

  /**
   * The tables a query names, when the parser can tell (so that `SELECT 1` reads no table definition, and an
   * unreadable definition of another table stops only the commands that need it); every table otherwise.
   */
  private async queryScope(sql: string): Promise<SnapshotScope> {
    // SQL the parser refuses is the engine's to refuse (Athena's Trino SQL is not always DuckDB's): every table, then.
    const read = await this.tablesRead(sql).catch(() => undefined);
    if (read === undefined) return {};
    return { tables: [...new Set(read.map((name) => name.toLowerCase()).filter((name) => /^[a-z][a-z0-9_]{0,127}$/.test(name)))] };
  }

  /** Row count of one partition's current run, or undefined when it has none. */
  async countPartition(tableName: string, partitionInput: PartitionInput): Promise<number | undefined> {
    const table = await this.table(tableName);
    const partition = this.partitionOf(table, partitionInput);
    const pointer = await this.catalog.getPointer(table, partition);
    if (!pointer) return undefined;
    return this.engine.countRows(table, { partition, runId: pointer.runId, files: await runFiles(this.ctx, table, partition, pointer.runId) });
  }

  /** The definitions of the named tables that exist, read one by one (never another table's definition). */
  private async tablesNamed(names: readonly string[]): Promise<TableDefinition[]> {
    const tables: TableDefinition[] = [];
    for (const name of [...new Set(names)].sort()) {
      const table = await this.catalog.getTable(name);
      if (table) tables.push(table);
    }
    return tables;
  }

  /** Each table's current runs and their files, resolved once so a query reads one consistent state. */
  async snapshot(scope: SnapshotScope = {}): Promise<TableSnapshot[]> {
    // An engine that reads tables through the catalog (Athena) needs no file listing per partition.
    const withFiles = this.engine.capabilities.readsRunFiles;
    const snapshots: TableSnapshot[] = [];
    for (const table of scope.tables !== undefined ? await this.tablesNamed(scope.tables) : await this.catalog.listTables()) {
      const limit = scope.partitions?.find((l) => l.table === table.name);
      const wanted = limit ? new Set(limit.partitions) : undefined;
      const pointers = (await this.catalog.listPointers(table)).filter((pointer) => !wanted || wanted.has(partitionPath(pointer.partition)));
      const partitions: PartitionSnapshot[] = [];
      for (const pointer of pointers) {
        if (!withFiles) {
          partitions.push({ partition: pointer.partition, runId: pointer.runId, files: [] });
          continue;
        }
        const files = await runFiles(this.ctx, table, pointer.partition, pointer.runId);
        if (files.length > 0) partitions.push({ partition: pointer.partition, runId: pointer.runId, files });
      }
      snapshots.push({ table, partitions });
    }
    return snapshots;
  }

  /**
   * The current runs of some partitions of a table with their files as local paths, for a sink to read;
   * undefined when the store keeps no local files (S3): a sink then cannot read the runs itself.
   */
  async localRuns(tableName: string, partitions: readonly string[]): Promise<PartitionSnapshot[] | undefined> {
    if (!this.store.capabilities.localPaths) return undefined;
    const [snapshot] = await this.snapshot({ tables: [tableName], partitions: [{ table: tableName, partitions }] });
    return (snapshot?.partitions ?? []).map((p) => ({ ...p, files: p.files.map((key) => this.store.localPath(key)) }));
  }

  /** The current runs of some partitions of a table (default: all), their files as store keys (a sink reads an S3 lake's runs by key). */
  async currentRuns(tableName: string, partitions?: readonly string[]): Promise<PartitionSnapshot[]> {
    const table = await this.table(tableName);
    const wanted = partitions && new Set(partitions);
    const pointers = (await this.catalog.listPointers(table)).filter((pointer) => !wanted || wanted.has(partitionPath(pointer.partition)));
    return mapLimited(pointers, 8, async (pointer) => ({
      partition: pointer.partition,
      runId: pointer.runId,
      files: await runFiles(this.ctx, table, pointer.partition, pointer.runId),
    }));
  }

  /** The bytes of one run file, by store key. */
  async readRunFile(key: string): Promise<Uint8Array> {
    const object = await this.store.get(key);
    if (!object) throw new NotFoundError(`the run file ${key} is missing from the store`);
    return object.body;
  }

  /** The current pointer of a partition (run id, previous run, signature). */
  async pointer(tableName: string, partitionInput: PartitionInput): Promise<Pointer | undefined> {
    const table = await this.table(tableName);
    return this.catalog.getPointer(table, this.partitionOf(table, partitionInput));
  }

  private partitionOf(table: TableDefinition, input: PartitionInput): Partition {
    if (input === "" && table.partitionKeys.length > 0) {
      throw new InvalidInputError(`table '${table.name}' is partitioned by ${table.partitionKeys.join(", ")}: name a partition, e.g. --partition ${table.partitionKeys.map((k) => `${k}=...`).join(",")}`);
    }
    if (input !== "" && typeof input === "string" && table.partitionKeys.length === 0) {
      throw new InvalidInputError(`table '${table.name}' has no partition keys (it is replaced as a whole): leave out --partition '${input}'`);
    }
    return typeof input === "string" ? parsePartition(input, table.partitionKeys) : orderPartition(input, table.partitionKeys);
  }

  private async withLease<T>(table: string, command: string, work: () => Promise<T>, options: { kernelLock?: boolean } = {}): Promise<T> {
    const lease = await WriterLease.acquire(this.store, table, {
      waitMs: this.settings.leaseWaitMs ?? DEFAULT_LEASE_WAIT_MS,
      ttlMs: this.settings.leaseTtlMs,
      command,
      onWait: this.settings.onLeaseWait,
      kernelLock: options.kernelLock,
    });
    this.leases.set(table, lease);
    try {
      return await work();
    } finally {
      this.leases.delete(table);
      await lease.release();
    }
  }

  /** The fence of every pointer move (./lease.ts `fence`): throws LEASE_LOST unless this lake still holds the table's lease. */
  private async leaseCheck(table: string): Promise<void> {
    const lease = this.leases.get(table);
    if (!lease) throw new LakeswapError("LEASE_LOST", `no writer lease is held for table '${table}'`);
    await lease.fence();
  }
}

/** An ingested table is append-only (`lakeswap serve` / `lakeswap ingest` add to it): it is never replaced or rolled back. */
function notIngested(table: TableDefinition, what: string): TableDefinition {
  if (table.ingest) {
    throw new InvalidInputError(
      `table '${table.name}' is an ingested table (events appended by lakeswap serve / lakeswap ingest); it cannot be ${what}. ` +
        "Build a derived layer from it instead, and replace or roll back that layer's partitions",
    );
  }
  return table;
}
