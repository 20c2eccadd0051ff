import type { Catalog, Pointer, PointerMoveKind } from "../catalog/catalog.js";
import { runFolder } from "../catalog/catalog.js";
import type {
  Engine, LandRequest, LandedDelivery, PartitionMapRequest, PartitionSnapshot, QueryResult, TableSnapshot,
} from "../engine/engine.js";
import type { ObjectStore } from "../store/object-store.js";
import { AuditError, InvalidInputError, LakeswapError, NotFoundError, errorMessage } from "./errors.js";
import { faultPoint } from "./faults.js";
import { DEFAULT_LEASE_WAIT_MS, WriterLease, leaseKey, type LeaseRecord } from "./lease.js";
import { METADATA_PREFIX, manifestKey, manifestsPrefix, parseManifest, pinKey, pinsPrefix, type RunManifest } from "./manifest.js";
import { orderPartition, parsePartition, parsePartitionPath, partitionPath, type Partition } from "./partition.js";
import { DEFAULT_GRACE_MS, planRetention, type RetentionReason } from "./retention.js";
import { Outbox, type OutboxEntry } from "./outbox.js";
import { isRunId, newRunIdAfter, runIdTime } from "./run-id.js";
import { assertTableName } from "./sql.js";
import { SYNCS_PREFIX, parseSyncRecord, syncRecordKey, type SyncMove, type SyncRecord } from "./sync-record.js";
import type { TableDefinition } from "./table.js";

/** The ports a lake runs on. */
export interface LakePorts {
  readonly store: ObjectStore;
  readonly catalog: Catalog;
  readonly engine: Engine;
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
  /** The SELECT reads a landed delivery (raw layer). */
  readonly landed?: boolean;
  /** The lake tables the SELECT may read (default: every table); a pipeline's builds see only their declared inputs. */
  readonly readable?: readonly string[];
  /** Leave GC to the caller, who collects once for many replaces (a sync: `LakeWriter.collectGarbage`); `gc` is then empty. */
  readonly deferGc?: boolean;
  /** Told the move right before the pointer moves (after the build and its audit), so a sync can record its intent first. */
  readonly beforeSwap?: (move: { readonly runId: string; readonly previousRunId?: string }) => Promise<void>;
}

/** Writes to tables while holding their leases: several partitions may be replaced at once. */
export interface LakeWriter {
  replace(table: string, partition: PartitionInput, options: ReplaceOptions): Promise<ReplaceResult>;
  /** The current state of a table's partitions, read under its lease (empty for a table that does not exist yet). */
  partitionStates(table: string): Promise<Map<string, PartitionState>>;
  /** GC of the given partitions after their swaps, once for all of them (replaces with `deferGc`); a failure is reported, never thrown. */
  collectGarbage(table: string, partitions: readonly string[]): Promise<PartitionGcReport[]>;
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

/** One run in a partition's history. */
export interface RunHistoryEntry {
  readonly runId: string;
  readonly createdAt: string;
  readonly rows?: number;
  readonly bytes: number;
  readonly state: "current" | "previous" | "completed" | "incomplete";
  readonly signature?: string;
}

/** A partition's runs, newest first. */
export interface PartitionHistory {
  readonly table: string;
  readonly partition: string;
  readonly currentRunId?: string;
  readonly runs: readonly RunHistoryEntry[];
}

/** What GC decided (and, unless dry-run, did) for one partition. */
export interface PartitionGcReport {
  readonly table: string;
  readonly partition: string;
  readonly kept: readonly { runId: string; reason: RetentionReason }[];
  readonly removed: readonly { runId: string; reason: RetentionReason; bytes: number }[];
  /** Set when GC after a swap failed; the swap itself stands and a later GC retries. */
  readonly error?: string;
}

/** What a rollback did. */
export interface RollbackResult {
  readonly table: string;
  readonly partition: string;
  readonly fromRunId: string;
  readonly toRunId: string;
  readonly rows?: number;
}

/** What `rollbackSync` did to one partition the sync had moved. */
export interface SyncRollbackEntry {
  readonly table: string;
  readonly partition: string;
  /** `rolled back` to the run before the sync; `removed`: the sync created the partition; `skipped`: see `reason`. */
  readonly action: "rolled back" | "removed" | "skipped";
  /** The run the sync made current. */
  readonly fromRunId: string;
  readonly toRunId?: string;
  readonly reason?: string;
}

/** What `rollbackSync` did. */
export interface SyncRollbackResult {
  readonly syncId: string;
  readonly partitions: readonly SyncRollbackEntry[];
}

/** Progress of work that spans several partitions. */
export type ProgressListener = (event: { readonly done: number; readonly total: number; readonly label: string }) => void;

interface RunListing {
  readonly runId: string;
  readonly files: readonly { key: string; size: number }[];
  /** Folder markers of the run (`…/run=<id>/`): an empty run folder left by a build killed as it started. */
  readonly markers: readonly string[];
  readonly hasManifest: boolean;
}

/**
 * The lake: tables of Hive-style Parquet partitions whose pointers only ever
 * move to complete, audited runs. Every invariant of DESIGN.md lives here once;
 * the store, catalog and engine are ports.
 */
export class Lake {
  private readonly store: ObjectStore;
  private readonly catalog: Catalog;
  private readonly engine: Engine;
  private readonly graceMs: number;
  private readonly settings: LakeSettings;
  private readonly outbox: Outbox;
  /** The leases this lake holds right now, by table, so the swap can check its own. */
  private readonly leases = new Map<string, WriterLease>();

  private constructor(ports: LakePorts, settings: LakeSettings) {
    this.outbox = new Outbox(ports.store);
    this.store = ports.store;
    this.catalog = ports.catalog;
    this.engine = ports.engine;
    this.graceMs = settings.graceMs ?? DEFAULT_GRACE_MS;
    this.settings = settings;
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
    return (await this.outbox.pending()).map((entry) => ({ table: entry.table, partition: entry.partition, runId: entry.runId }));
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
        lease = await WriterLease.acquire(this.store, tableName, { waitMs: 0, command: `replay outbox of ${tableName}` });
      } catch {
        continue;
      }
      try {
        for (const entry of entries) {
          if (!table) {
            await this.outbox.acknowledge(entry);
            continue;
          }
          const partition = parsePartitionPath(entry.partition, table.partitionKeys);
          const current = await this.catalog.getPointer(table, partition);
          const runFilesExist = (await this.runFiles(table, partition, entry.runId)).length > 0;
          if (current?.runId !== entry.runId && current?.runId === entry.previousRunId && runFilesExist) {
            await this.catalog.movePointer(table, { partition, runId: entry.runId, previousRunId: entry.previousRunId, signature: entry.signature, kind: entry.kind });
          } else if (current?.runId !== entry.runId) {
            stale += 1;
            await this.outbox.acknowledge(entry);
            continue;
          }
          if (entry.manifest && !(await this.readManifest(table, partition, entry.runId))) {
            await this.store.put(manifestKey(table.name, partition, entry.runId), `${JSON.stringify(entry.manifest, null, 2)}\n`);
          }
          applied += 1;
          await this.outbox.acknowledge(entry);
        }
      } finally {
        await lease.release();
      }
    }
    return { applied, stale };
  }

  async close(): Promise<void> {
    await this.engine.close();
  }

  /** Removes the catalog's container when no table is left (the Glue database; the local metadata folder). */
  async removeCatalogIfEmpty(): Promise<boolean> {
    return this.catalog.removeIfEmpty();
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
      await this.catalog.removePointers(table, (await this.catalog.listPointers(table)).map((p) => p.partition));
      const objects = [
        ...(await this.store.list(this.catalog.runsPrefix(table))),
        ...(await this.store.list(manifestsPrefix(table.name))),
        ...(await this.store.list(pinsPrefix(table.name))),
        ...(await this.store.list(`${METADATA_PREFIX}/outbox/${table.name}/`)),
      ];
      await this.store.delete(objects.map((o) => o.key));
    });
    await this.catalog.dropTable(table.name);
  }

  /**
   * Replaces one partition: lease -> build into a fresh run prefix -> audit ->
   * move the pointer -> write the run's manifest -> GC -> release. A failure at
   * any step before the pointer moves leaves readers on the old run.
   */
  async replacePartition(tableName: string, partitionInput: PartitionInput, options: ReplaceOptions): Promise<ReplaceResult> {
    const table = await this.table(tableName);
    const partition = this.partitionOf(table, partitionInput);
    return this.withLease(table.name, `replace ${table.name}/${partitionPath(partition)}`, () => this.replaceHeld(table, partition, options));
  }

  /**
   * Takes the writer leases of several tables for `work` (in name order, so two
   * writers of overlapping sets never deadlock), which may then read their
   * state and replace partitions of them, concurrently. Every decision `work`
   * makes from that state is made under the leases (DESIGN.md invariant 7).
   * A table need not exist yet when its lease is taken.
   */
  async write<T>(tableNames: readonly string[], command: string, work: (writer: LakeWriter) => Promise<T>): Promise<T> {
    const names = [...new Set(tableNames.map((name) => assertTableName(name)))].sort();
    const held = (tableName: string): void => {
      if (!names.includes(tableName) || !this.leases.has(tableName)) {
        throw new LakeswapError("LEASE_LOST", `table '${tableName}' is not among the tables this writer holds (${names.join(", ")})`);
      }
    };
    const writer: LakeWriter = {
      replace: async (tableName, partitionInput, options) => {
        held(tableName);
        const table = await this.table(tableName);
        return this.replaceHeld(table, this.partitionOf(table, partitionInput), options);
      },
      partitionStates: async (tableName) => {
        held(tableName);
        return (await this.catalog.getTable(tableName)) ? this.partitionStates(tableName) : new Map();
      },
      collectGarbage: async (tableName, partitions) => {
        held(tableName);
        const table = await this.table(tableName);
        return this.collectAfterSwap(table, partitions.map((p) => parsePartitionPath(p, table.partitionKeys)));
      },
    };
    const hold = async (index: number): Promise<T> => {
      const name = names[index];
      return name === undefined ? work(writer) : this.withLease(name, command, () => hold(index + 1));
    };
    return hold(0);
  }

  private async replaceHeld(table: TableDefinition, partition: Partition, options: ReplaceOptions): Promise<ReplaceResult> {
    const label = `${table.name}/${partitionPath(partition)}`;
    faultPoint("lease-acquired");
    const started = Date.now();
    const current = await this.catalog.getPointer(table, partition);
    const currentManifest = current ? await this.ensureManifest(table, current) : undefined;

    const runs = await this.listRuns(table, partition);
    const runId = newRunIdAfter([current?.runId, runs.at(-1)?.runId].filter((id): id is string => id !== undefined).sort().at(-1));
    const runPrefix = `${this.catalog.runsPrefix(table, partition)}${runFolder(runId)}/`;
    // A build from a landed delivery reads no lake table; others read only what they may (their inputs, listed once here).
    const sources = options.landed ? [] : await this.snapshot({ tables: options.readable, partitions: options.inputPartitions });
    let build;
    try {
      build = await this.engine.build({
        table, partition, select: options.select, runId, runPrefix, sources, inputPartitions: options.inputPartitions, landed: options.landed,
      });
    } catch (error) {
      await this.discardRun(runPrefix);
      throw error;
    }
    faultPoint("after-build");

    let audited;
    try {
      audited = await this.auditRun(label, runPrefix, build.rows, {
        allowEmpty: options.allowEmpty ?? false,
        previousRows: currentManifest?.rows,
        currentRunId: current?.runId,
      });
    } catch (error) {
      await this.discardRun(runPrefix);
      throw error;
    }
    const previousRows = currentManifest?.rows;
    const { rows, files, bytes } = audited;
    const builtAt = new Date();
    const manifest: RunManifest = {
      format: 1,
      table: table.name,
      partition: partitionPath(partition),
      runId,
      rows,
      files,
      bytes,
      previousRunId: current?.runId,
      signature: options.signature,
      fingerprint: options.fingerprint,
      inputs: options.inputs,
      builtAt: new Date(started).toISOString(),
      swappedAt: builtAt.toISOString(),
      buildSeconds: (builtAt.getTime() - started) / 1000,
    };
    await options.beforeSwap?.({ runId, previousRunId: current?.runId });
    await this.leaseCheck(table.name);
    const move = { partition, runId, previousRunId: current?.runId, signature: options.signature, kind: "swap" as const };
    // Recorded before it is sent: a writer that dies from here on leaves a change the next process finishes.
    const entry = await this.outbox.record({ ...move, table: table.name, partition: partitionPath(partition), manifest });
    faultPoint("after-outbox");
    await this.catalog.movePointer(table, move);
    faultPoint("after-swap");

    await this.store.put(manifestKey(table.name, partition, runId), `${JSON.stringify(manifest, null, 2)}\n`);
    await this.outbox.acknowledge(entry);
    faultPoint("after-manifest");

    const gc = options.deferGc
      ? { table: table.name, partition: partitionPath(partition), kept: [], removed: [] }
      : (await this.collectAfterSwap(table, [partition]))[0]!;
    faultPoint("before-release");
    return {
      table: table.name,
      partition: partitionPath(partition),
      runId,
      previousRunId: current?.runId,
      rows,
      previousRows,
      bytes,
      seconds: (Date.now() - started) / 1000,
      gc,
    };
  }

  /**
   * The audit of a new run, from its own files (DESIGN.md invariant 1): the
   * run's files are listed and their rows counted from their Parquet footers;
   * no files, an unreadable footer, or a count that disagrees with the
   * engine's fails the build. So does an empty build, unless `allowEmpty` or
   * the partition was already empty.
   */
  private async auditRun(
    label: string,
    runPrefix: string,
    engineRows: number | undefined,
    context: { allowEmpty: boolean; previousRows?: number; currentRunId?: string },
  ): Promise<{ rows: number; files: { key: string; size: number }[]; bytes: number }> {
    const files = (await this.store.list(runPrefix)).filter((o) => !o.key.endsWith("/") && !isHiddenRunFile(o.key.slice(runPrefix.length)));
    const notMoved = "the pointer was not moved";
    if (files.length === 0 && !(context.allowEmpty && (engineRows ?? 0) === 0)) {
      throw new AuditError(
        `the build of ${label} wrote no data files under ${runPrefix}` +
          `${engineRows !== undefined ? ` although the engine reported ${engineRows} rows` : ""}; ${notMoved}. ` +
          `If the partition really is empty now, rerun with --allow-empty.`,
      );
    }
    const rows = files.length === 0 ? 0 : await this.engine.countFileRows(files);
    if (engineRows !== undefined && rows !== engineRows) {
      throw new AuditError(`the build of ${label} reported ${engineRows} rows, but its files hold ${rows}; ${notMoved}`);
    }
    if (rows === 0 && !context.allowEmpty) {
      const previous = context.previousRows;
      if (context.currentRunId === undefined) {
        throw new AuditError(`the build of ${label}, a new partition, produced 0 rows; ${notMoved}. If it really is empty, rerun with --allow-empty.`);
      }
      if ((previous ?? 0) > 0) {
        throw new AuditError(
          `the build of ${label} produced 0 rows, but the partition has ${previous} rows (run ${context.currentRunId}); ` +
            `${notMoved}. If the partition really is empty now, rerun with --allow-empty.`,
        );
      }
    }
    return { rows, files, bytes: files.reduce((sum, f) => sum + f.size, 0) };
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
    const pins = new Set((await this.store.list(prefix)).map((o) => o.key.slice(prefix.length).replace(/\.json$/, "")));
    const states = new Map<string, PartitionState>();
    for (const pointer of await this.catalog.listPointers(table)) {
      const path = partitionPath(pointer.partition);
      // The signature moves with the pointer (pointer state, Glue Parameters): a manifest is read only where it does not.
      const manifest = pointer.signature === undefined ? await this.readManifest(table, pointer.partition, pointer.runId) : undefined;
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
    return (await this.readManifest(table, this.partitionOf(table, partitionInput), runId))?.fingerprint;
  }

  /** Moves a partition's pointer back to the newest completed older run, or to `toRunId`. */
  async rollback(tableName: string, partitionInput: PartitionInput, options: { toRunId?: string } = {}): Promise<RollbackResult> {
    const table = await this.table(tableName);
    const partition = this.partitionOf(table, partitionInput);
    const label = `${table.name}/${partitionPath(partition)}`;
    if (options.toRunId !== undefined && !isRunId(options.toRunId)) {
      throw new InvalidInputError(`'${options.toRunId}' is not a run id (YYYYMMDDTHHMMSSZ-xxxxxx); see lakeswap history ${table.name} --partition ...`);
    }
    return this.withLease(table.name, `rollback ${label}`, async () => {
      const current = await this.catalog.getPointer(table, partition);
      if (!current) throw new NotFoundError(`partition ${label} has no current run, so there is nothing to roll back`);
      // A writer killed between swap and manifest left the current run without one; record it, so it can be rolled forward to.
      await this.ensureManifest(table, current);
      const runs = await this.listRuns(table, partition);
      const complete = runs.filter((run) => run.hasManifest && run.files.length > 0);
      let target: string;
      if (options.toRunId !== undefined) {
        if (options.toRunId === current.runId) throw new InvalidInputError(`run ${options.toRunId} is already the current run of ${label}`);
        if (!complete.some((run) => run.runId === options.toRunId)) {
          throw new NotFoundError(
            `run ${options.toRunId} of ${label} does not exist or never completed; runs to choose from: ${complete.map((r) => r.runId).join(", ") || "none"}`,
          );
        }
        target = options.toRunId;
      } else {
        const older = complete.filter((run) => run.runId < current.runId).map((run) => run.runId);
        const newest = older.at(-1);
        if (!newest) throw new NotFoundError(`partition ${label} has no older run to roll back to (current run ${current.runId})`);
        target = newest;
      }
      const manifest = await this.readManifest(table, partition, target);
      await this.leaseCheck(table.name);
      await this.catalog.movePointer(table, {
        partition,
        runId: target,
        previousRunId: current.runId,
        signature: manifest?.signature,
        kind: "rollback",
      });
      return { table: table.name, partition: partitionPath(partition), fromRunId: current.runId, toRunId: target, rows: manifest?.rows };
    });
  }

  /** Writes (or rewrites, as a sync goes) a sync's record of the pointers it moved. */
  async recordSync(record: SyncRecord): Promise<void> {
    await this.store.put(syncRecordKey(record.syncId), `${JSON.stringify(record, null, 2)}\n`);
  }

  /** The records of past syncs, newest first. */
  async syncs(options: { skipUnreadable?: boolean } = {}): Promise<SyncRecord[]> {
    const records: SyncRecord[] = [];
    for (const object of await this.store.list(SYNCS_PREFIX)) {
      try {
        const record = await this.syncRecord(object.key);
        if (record) records.push(record);
      } catch (error) {
        // A listing can go on without an unreadable record; deciding which sync is the last one cannot.
        if (!options.skipUnreadable) throw error;
        process.emitWarning(errorMessage(error));
      }
    }
    return records.sort((a, b) => (a.syncId < b.syncId ? 1 : a.syncId > b.syncId ? -1 : 0));
  }

  /**
   * Moves back every pointer one sync moved (`last`: the newest sync): each
   * partition to the run that was current before the sync, or, where the sync
   * created the partition, no run at all. A partition whose pointer moved
   * since (a later sync, a rollback) is left alone and reported. Downstream
   * layers go first; per table the moves are one batch under the table's
   * lease (Glue: 100 per call, every entry checked). As with a one-partition
   * rollback, the next sync rebuilds what was rolled back unless it is pinned.
   */
  async rollbackSync(syncId: string): Promise<SyncRollbackResult> {
    // `last`: the newest sync that moved (or was about to move) a pointer, finished or not.
    const record = syncId === "last" ? (await this.syncs()).find((r) => r.moves.length > 0) : await this.syncRecord(syncRecordKey(syncId));
    if (!record) {
      throw new NotFoundError(syncId === "last" ? "no sync has been recorded in this lake yet" : `no sync ${syncId} is recorded in this lake; lakeswap syncs lists them`);
    }
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
      entries.push(...(await this.withLease(table.name, `rollback sync ${record.syncId}`, () => this.rollbackMoves(table, moves))));
    }
    return { syncId: record.syncId, partitions: entries };
  }

  /** The sync record at `key` (record keys sort by sync id, so the last one listed is the newest). */
  private async syncRecord(key: string | undefined): Promise<SyncRecord | undefined> {
    const stored = key === undefined ? undefined : await this.store.get(key);
    return stored && key !== undefined ? parseSyncRecord(stored.body, key) : undefined;
  }

  /** One table's share of a sync rollback, under its lease. */
  private async rollbackMoves(table: TableDefinition, moves: readonly SyncMove[]): Promise<SyncRollbackEntry[]> {
    const entries: SyncRollbackEntry[] = [];
    const back: { partition: Partition; runId: string; previousRunId: string; signature?: string }[] = [];
    const removals: Partition[] = [];
    for (const move of moves) {
      const partition = parsePartitionPath(move.partition, table.partitionKeys);
      const skip = (reason: string): void => {
        entries.push({ table: table.name, partition: move.partition, action: "skipped", fromRunId: move.run, reason });
      };
      const current = await this.catalog.getPointer(table, partition);
      if (move.pending && current?.runId !== move.run && current?.runId === move.previousRun) {
        skip("the sync stopped before it moved this pointer");
        continue;
      }
      if (current?.runId !== move.run) {
        skip(current ? `moved since the sync: run ${current.runId} is current now` : "the partition has no current run any more");
        continue;
      }
      if (move.previousRun === undefined) {
        removals.push(partition);
        entries.push({ table: table.name, partition: move.partition, action: "removed", fromRunId: move.run });
        continue;
      }
      const manifest = await this.readManifest(table, partition, move.previousRun);
      const files = (await this.runFiles(table, partition, move.previousRun)).length;
      if (!manifest || files === 0) {
        skip(`run ${move.previousRun}, current before the sync, no longer exists (garbage-collected?); lakeswap history ${table.name} --partition ${move.partition}`);
        continue;
      }
      back.push({ partition, runId: move.previousRun, previousRunId: move.run, signature: manifest.signature });
      entries.push({ table: table.name, partition: move.partition, action: "rolled back", fromRunId: move.run, toRunId: move.previousRun });
    }
    await this.leaseCheck(table.name);
    if (back.length > 0) await this.catalog.movePointers(table, back.map((b) => ({ ...b, kind: "rollback" as const })));
    if (removals.length > 0) await this.catalog.removePointers(table, removals);
    return entries;
  }

  /** The runs of one partition, or of every partition of a table, newest first. */
  async history(tableName: string, partitionInput?: PartitionInput): Promise<PartitionHistory[]> {
    const table = await this.table(tableName);
    const partitions = partitionInput !== undefined ? [this.partitionOf(table, partitionInput)] : await this.knownPartitions(table);
    const histories: PartitionHistory[] = [];
    for (const partition of partitions) {
      const pointer = await this.catalog.getPointer(table, partition);
      const runs = await this.listRuns(table, partition);
      const entries: RunHistoryEntry[] = [];
      for (const run of [...runs].reverse()) {
        if (run.files.length === 0) continue;
        const manifest = run.hasManifest ? await this.readManifest(table, partition, run.runId) : undefined;
        const state =
          run.runId === pointer?.runId ? "current"
          : run.runId === pointer?.previousRunId ? "previous"
          : manifest ? "completed" : "incomplete";
        entries.push({
          runId: run.runId,
          createdAt: runIdTime(run.runId).toISOString(),
          rows: manifest?.rows,
          bytes: run.files.reduce((sum, f) => sum + f.size, 0),
          state,
          signature: manifest?.signature,
        });
      }
      if (partitionInput !== undefined && entries.length === 0) {
        throw new NotFoundError(`partition ${table.name}/${partitionPath(partition)} has no runs`);
      }
      histories.push({ table: table.name, partition: partitionPath(partition), currentRunId: pointer?.runId, runs: entries });
    }
    return histories;
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
        const partitions = await this.knownPartitions(table);
        for (const [index, partition] of partitions.entries()) {
          options.onProgress?.({ done: index, total: partitions.length, label: `${table.name}/${partitionPath(partition)}` });
          reports.push(
            await this.collectPartition(table, partition, { dryRun: options.dryRun ?? false, graceMs: options.graceMs ?? this.graceMs }),
          );
        }
      };
      if (options.dryRun) await collect();
      else await this.withLease(table.name, `gc ${table.name}`, collect);
    }
    return reports;
  }

  /** Lands a delivery's source files in the engine (raw layer); release it with `releaseDelivery`. */
  async landDelivery(request: LandRequest): Promise<LandedDelivery> {
    return this.engine.land(request);
  }

  async releaseDelivery(delivery: LandedDelivery): Promise<void> {
    await this.engine.releaseLanding(delivery);
  }

  /** Evaluates a derived layer's partition map over upstream partition values. */
  async mapPartitions(request: PartitionMapRequest): Promise<string[][]> {
    return this.engine.mapPartitions(request);
  }

  /** The tables a SELECT names (CTE names aside), by the engine's own parser; undefined when that parser cannot read it. */
  async tablesRead(select: string): Promise<string[] | undefined> {
    return this.engine.tablesRead(select);
  }

  /** Runs a query over the current runs of every lake table (tables visible by name). */
  async query(sql: string): Promise<QueryResult> {
    return this.engine.query(sql, await this.snapshot());
  }

  /** Row count of one partition's current run, or undefined when it has none. */
  async countPartition(tableName: string, partitionInput: PartitionInput): Promise<number | undefined> {
    const table = await this.table(tableName);
    const partition = this.partitionOf(table, partitionInput);
    const pointer = await this.catalog.getPointer(table, partition);
    if (!pointer) return undefined;
    return this.engine.countRows(table, { partition, runId: pointer.runId, files: await this.runFiles(table, partition, pointer.runId) });
  }

  /** Each table's current runs and their files, resolved once so a query reads one consistent state. */
  async snapshot(
    scope: {
      /** Only these tables (default: every table). */
      readonly tables?: readonly string[];
      /** Only these partitions of some tables (a derived partition's declared inputs). */
      readonly partitions?: readonly { readonly table: string; readonly partitions: readonly string[] }[];
    } = {},
  ): Promise<TableSnapshot[]> {
    // An engine that reads tables through the catalog (Athena) needs no file listing per partition.
    const withFiles = this.engine.capabilities.readsRunFiles;
    const snapshots: TableSnapshot[] = [];
    for (const table of await this.catalog.listTables()) {
      if (scope.tables !== undefined && !scope.tables.includes(table.name)) continue;
      const limit = scope.partitions?.find((l) => l.table === table.name);
      const wanted = limit ? new Set(limit.partitions) : undefined;
      const partitions: PartitionSnapshot[] = [];
      for (const pointer of await this.catalog.listPointers(table)) {
        if (wanted && !wanted.has(partitionPath(pointer.partition))) continue;
        if (!withFiles) {
          partitions.push({ partition: pointer.partition, runId: pointer.runId, files: [] });
          continue;
        }
        const files = await this.runFiles(table, pointer.partition, pointer.runId);
        if (files.length > 0) partitions.push({ partition: pointer.partition, runId: pointer.runId, files });
      }
      snapshots.push({ table, partitions });
    }
    return snapshots;
  }

  /** The current pointer of a partition (run id, previous run, signature). */
  async pointer(tableName: string, partitionInput: PartitionInput): Promise<Pointer | undefined> {
    const table = await this.table(tableName);
    return this.catalog.getPointer(table, this.partitionOf(table, partitionInput));
  }

  private partitionOf(table: TableDefinition, input: PartitionInput): Partition {
    return typeof input === "string" ? parsePartition(input, table.partitionKeys) : orderPartition(input, table.partitionKeys);
  }

  private async withLease<T>(table: string, command: string, work: () => Promise<T>): Promise<T> {
    const lease = await WriterLease.acquire(this.store, table, {
      waitMs: this.settings.leaseWaitMs ?? DEFAULT_LEASE_WAIT_MS,
      ttlMs: this.settings.leaseTtlMs,
      command,
      onWait: this.settings.onLeaseWait,
    });
    this.leases.set(table, lease);
    try {
      return await work();
    } finally {
      this.leases.delete(table);
      await lease.release();
    }
  }

  private async leaseCheck(table: string): Promise<void> {
    const lease = this.leases.get(table);
    if (!lease) throw new LakeswapError("LEASE_LOST", `no writer lease is held for table '${table}'`);
    await lease.assertHeld();
  }

  /** Partitions that have a pointer, runs or manifests. */
  private async knownPartitions(table: TableDefinition): Promise<Partition[]> {
    const paths = new Set<string>();
    for (const pointer of await this.catalog.listPointers(table)) paths.add(partitionPath(pointer.partition));
    const depth = table.partitionKeys.length;
    const collect = (prefix: string, keys: readonly { key: string }[]): void => {
      for (const { key } of keys) {
        const parts = key.slice(prefix.length).split("/");
        if (parts.length > depth) paths.add(parts.slice(0, depth).join("/"));
      }
    };
    const runsPrefix = this.catalog.runsPrefix(table);
    collect(runsPrefix, await this.store.list(runsPrefix));
    const manifests = manifestsPrefix(table.name);
    collect(manifests, await this.store.list(manifests));
    return [...paths].sort().map((path) => parsePartitionPath(path, table.partitionKeys));
  }

  /** Every run of a partition (folders and manifests), oldest first. */
  private async listRuns(table: TableDefinition, partition: Partition): Promise<RunListing[]> {
    const runs = new Map<string, { files: { key: string; size: number }[]; markers: string[]; hasManifest: boolean }>();
    const entry = (runId: string) => {
      let run = runs.get(runId);
      if (!run) runs.set(runId, (run = { files: [], markers: [], hasManifest: false }));
      return run;
    };
    const prefix = this.catalog.runsPrefix(table, partition);
    for (const object of await this.store.list(prefix)) {
      const folder = object.key.slice(prefix.length).split("/")[0] ?? "";
      const runId = folder.replace(/^run=/, "");
      if (!folder.startsWith("run=") || !isRunId(runId)) continue;
      if (object.key.endsWith("/")) entry(runId).markers.push(object.key);
      else entry(runId).files.push(object);
    }
    const manifests = manifestsPrefix(table.name, partition);
    for (const object of await this.store.list(manifests)) {
      const name = object.key.slice(manifests.length);
      const runId = name.replace(/\.json$/, "");
      if (!name.includes("/") && isRunId(runId)) entry(runId).hasManifest = true;
    }
    return [...runs.entries()]
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([runId, run]) => ({ runId, files: run.files, markers: run.markers, hasManifest: run.hasManifest }));
  }

  private async runFiles(table: TableDefinition, partition: Partition, runId: string): Promise<string[]> {
    const prefix = `${this.catalog.runsPrefix(table, partition)}${runFolder(runId)}/`;
    // Every data file of the run: DuckDB names them *.parquet, Athena's UNLOAD gives no extension; '_' and '.' files are hidden, as in Hive.
    return (await this.store.list(prefix)).map((o) => o.key).filter((key) => !key.endsWith("/") && !isHiddenRunFile(key.slice(prefix.length)));
  }

  private async readManifest(table: TableDefinition, partition: Partition, runId: string): Promise<RunManifest | undefined> {
    const key = manifestKey(table.name, partition, runId);
    const stored = await this.store.get(key);
    return stored ? parseManifest(stored.body, key) : undefined;
  }

  /** The manifest of the current run; rebuilt from its files if the process died between swap and manifest. */
  private async ensureManifest(table: TableDefinition, pointer: Pointer): Promise<RunManifest> {
    const existing = await this.readManifest(table, pointer.partition, pointer.runId);
    if (existing) return existing;
    const prefix = `${this.catalog.runsPrefix(table, pointer.partition)}${runFolder(pointer.runId)}/`;
    const files = (await this.store.list(prefix)).filter((o) => !o.key.endsWith("/") && !isHiddenRunFile(o.key.slice(prefix.length)));
    const now = new Date().toISOString();
    const manifest: RunManifest = {
      format: 1,
      table: table.name,
      partition: partitionPath(pointer.partition),
      runId: pointer.runId,
      rows: await this.engine.countRows(table, { partition: pointer.partition, runId: pointer.runId, files: files.map((f) => f.key) }),
      files,
      bytes: files.reduce((sum, f) => sum + f.size, 0),
      previousRunId: pointer.previousRunId,
      builtAt: runIdTime(pointer.runId).toISOString(),
      swappedAt: now,
      buildSeconds: 0,
      recovered: true,
    };
    await this.store.put(manifestKey(table.name, pointer.partition, pointer.runId), `${JSON.stringify(manifest, null, 2)}\n`);
    return manifest;
  }

  /** GC right after swaps: the swaps stand whatever happens here; what GC could not remove now, the next GC removes. */
  private async collectAfterSwap(table: TableDefinition, partitions: readonly Partition[]): Promise<PartitionGcReport[]> {
    const reports: PartitionGcReport[] = [];
    let pending: OutboxEntry[] | undefined;
    for (const partition of partitions) {
      try {
        pending ??= await this.outbox.pending(table.name);
        reports.push(await this.collectPartition(table, partition, { dryRun: false, graceMs: this.graceMs }, pending));
      } catch (error) {
        reports.push({ table: table.name, partition: partitionPath(partition), kept: [], removed: [], error: errorMessage(error) });
      }
    }
    return reports;
  }

  private async collectPartition(
    table: TableDefinition,
    partition: Partition,
    options: { dryRun: boolean; graceMs: number },
    pendingOfTable?: readonly OutboxEntry[],
  ): Promise<PartitionGcReport> {
    const pointer = await this.catalog.getPointer(table, partition);
    const runs = await this.listRuns(table, partition);
    const pending = (pendingOfTable ?? (await this.outbox.pending(table.name))).filter((entry) => entry.partition === partitionPath(partition));
    const decisions = planRetention({
      runs: runs.map((run) => ({ runId: run.runId, published: run.hasManifest, hasFiles: run.files.length > 0 })),
      currentRunId: pointer?.runId,
      previousRunId: pointer?.previousRunId,
      protectedRunIds: new Set(pending.flatMap((entry) => [entry.runId, entry.previousRunId ?? ""])),
      now: new Date(),
      graceMs: options.graceMs,
    });
    const byId = new Map(runs.map((run) => [run.runId, run]));
    const removed: PartitionGcReport["removed"][number][] = [];
    // Decided from what was read just now: delete only if no other writer took the table over meanwhile.
    if (!options.dryRun && decisions.some((d) => !d.keep)) await this.leaseCheck(table.name);
    for (const decision of decisions.filter((d) => !d.keep)) {
      const run = byId.get(decision.runId);
      const files = run?.files ?? [];
      if (!options.dryRun) {
        // Files first, manifest last: a run with a manifest but no files is only a leftover record.
        await this.store.delete([...files.map((f) => f.key), ...(run?.markers ?? [])]);
        faultPoint("during-gc");
        await this.store.delete([manifestKey(table.name, partition, decision.runId)]);
      }
      removed.push({ runId: decision.runId, reason: decision.reason, bytes: files.reduce((sum, f) => sum + f.size, 0) });
    }
    return {
      table: table.name,
      partition: partitionPath(partition),
      kept: decisions.filter((d) => d.keep).map(({ runId, reason }) => ({ runId, reason })),
      removed,
    };
  }

  /** Best-effort removal of a run that will never be current; GC removes it later if this fails. */
  private async discardRun(runPrefix: string): Promise<void> {
    try {
      const objects = await this.store.list(runPrefix);
      // The prefix itself too: where the store has folders, the run's empty folder goes with its files.
      await this.store.delete([...objects.map((o) => o.key), runPrefix]);
    } catch (error) {
      process.emitWarning(`could not remove the unused run ${runPrefix}: ${errorMessage(error)}; lakeswap gc will`);
    }
  }
}

/** A run's file that is not data: '_' and '.' files are hidden, as in Hive. */
function isHiddenRunFile(name: string): boolean {
  return /^[_.]/.test(name);
}

export { leaseKey };
