import type { Lake } from "../lake/lake.js";
import type { HeldSync, SchemaChangeRecord, SyncMove, SyncRecord } from "../lake/sync-record.js";
import type { RunManifest } from "../lake/manifest.js";
import type { AuditFinding } from "../model/audit.js";
import { claimSyncId, forgetSync, recordSync } from "../lake/operations/syncs.js";

/**
 * The running record of one sync. A move is written as intended before its
 * pointer moves (so a sync killed at any moment leaves a record of every
 * pointer it may have moved: `lakeswap syncs` lists it as unfinished and
 * `rollback --sync` undoes it), and confirmed with the next write once moved. Writes are
 * serialized: the stored record only ever grows, but for a schema change withdrawn
 * because nothing of it was made (`withdrawSchemaChange`). The sync's id is issued
 * when it first records, under the leases of the tables it writes, after the
 * newest recorded sync: ids sort in the order syncs moved pointers, so `last`
 * is the sync that ran last, also when two started in the same second or one
 * waited for the other's leases.
 */
export class SyncLog {
  private readonly moves = new Map<string, SyncMove>();
  private readonly snapshots = new Map<string, number>();
  private readonly schemaChanges: SchemaChangeRecord[] = [];
  private readonly rebuiltPartitions = new Map<string, number>();
  /** What the sync staged without moving (`--hold`, `publish: all_or_nothing`), while it is held. */
  private held: { -readonly [K in keyof HeldSync]: HeldSync[K] } | undefined;
  /** Audit findings of staging builds from before the first staged run (kept with the held sync once there is one). */
  private readonly findingsBeforeStaging: HeldSync["audits"][number][] = [];
  private written: Promise<void> = Promise.resolve();
  private recorded = false;
  /** The sync's own lease, held from its first record to its end: a `rollback --sync` of it waits for it. */
  private lease: Promise<{ release(): Promise<void> }> | undefined;

  private id: string;

  constructor(
    private readonly lake: Lake,
    private readonly record: Pick<SyncRecord, "syncId" | "config" | "startedAt">,
  ) {
    this.id = record.syncId;
  }

  /** The sync's id: provisional (the start's) until its first record, which issues the one it is recorded under. */
  get syncId(): string {
    return this.id;
  }

  /** Records moves before their pointers move (a batch: one write); resolves once the record is stored. */
  async intend(moves: readonly SyncMove[]): Promise<void> {
    for (const move of moves) {
      const earlier = this.moves.get(moveKey(move));
      // A partition moved twice by one sync (rebuilt by swap, then built): it goes back to where it was before the sync.
      const twice = earlier !== undefined && earlier.run !== move.run;
      const through = twice ? [...(earlier.through ?? []), earlier.run] : earlier?.through;
      this.moves.set(moveKey(move), { ...move, ...(twice ? { previousRun: earlier.previousRun } : {}), ...(through ? { through } : {}), pending: true });
    }
    await this.write();
  }

  /** Records a schema change in place before the catalog's definition is written (one write); resolves once stored. */
  async changeSchema(change: SchemaChangeRecord): Promise<void> {
    this.schemaChanges.push(change);
    await this.write();
  }

  /**
   * The last schema change recorded for `table` was refused before anything of it was made (a rebuild by swap that
   * met a value its new type cannot hold): it leaves the record (one write), which lists only what the sync made.
   */
  async withdrawSchemaChange(table: string): Promise<void> {
    const index = this.schemaChanges.map((c) => c.table).lastIndexOf(table);
    if (index < 0) return;
    this.schemaChanges.splice(index, 1);
    await this.write();
  }

  /** The schema changes recorded so far. */
  schemaChangesMade(): readonly SchemaChangeRecord[] {
    return this.schemaChanges;
  }

  /** A rebuild by swap of `table` moved these pointers (recorded as the sync's moves): counted for the report. */
  rebuilt(table: string, moves: readonly SyncMove[]): void {
    for (const move of moves) this.confirm(move);
    this.rebuiltPartitions.set(table, (this.rebuiltPartitions.get(table) ?? 0) + moves.length);
  }

  /** How many partitions a rebuild by swap of `table` rewrote in this sync. */
  rebuiltCount(table: string): number {
    return this.rebuiltPartitions.get(table) ?? 0;
  }

  /** The pointer moved: the move is no longer only intended (stored with the next write: the next intent, or the finish). */
  confirm(move: SyncMove): void {
    const stored = this.moves.get(moveKey(move));
    // Where the sync moved the pointer before (`intend`), it keeps where it was before the sync and the runs on the way.
    const kept = stored?.run === move.run && stored.through ? { previousRun: stored.previousRun, through: stored.through } : {};
    this.moves.set(moveKey(move), { ...move, ...kept, pending: undefined });
  }

  /** The sync committed Iceberg snapshot `snapshotId` in `table`: stored with the next write (the finish, at the latest). */
  snapshot(table: string, snapshotId: number): void {
    this.snapshots.set(table, snapshotId);
  }

  /**
   * Runs staged (built and audited, their pointers not moved) for a later publication, with their audit findings:
   * stored with the next write. Their intents stay pending until they are published.
   */
  stage(table: string, layer: string, runs: readonly RunManifest[], audits: readonly AuditFinding[]): void {
    const findings = audits.map((f) => ({ ...f, table }));
    // A sync that staged nothing (every build failed, or found nothing to build) is not held: nothing waits for a
    // publication, and what it changed in place (schemas) stands as any sync's does.
    if (!this.held && runs.length === 0) {
      this.findingsBeforeStaging.push(...findings);
      return;
    }
    this.held ??= { status: "held", tables: [], audits: this.findingsBeforeStaging.splice(0), reason: "" };
    if (runs.length > 0) this.held.tables = [...this.held.tables, { table, layer, runs }];
    this.held.audits = [...this.held.audits, ...findings];
  }

  /** Whether the sync is held, and why (undefined when it staged nothing, or published what it staged). */
  heldState(): { readonly status: HeldSync["status"]; readonly reason: string } | undefined {
    return this.held && this.held.status !== "published" ? { status: this.held.status, reason: this.held.reason } : undefined;
  }

  /** The runs staged so far, by table. */
  stagedTables(): HeldSync["tables"] {
    return this.held?.tables ?? [];
  }

  /** Why the staged runs are held (stored with the next write, the finish at the latest). */
  hold(reason: string): void {
    if (this.held) this.held.reason = reason;
  }

  /** The commit of the staged runs' publication: the record says `publishing` once this resolves (../lake/commit/publish.ts). */
  async publishing(): Promise<void> {
    if (this.held) this.held.status = "publishing";
    await this.write();
  }

  /**
   * The publication of the staged runs of `tables` ended: `moved` are the sync's moves now; the others never moved
   * (`refused`, with why). The sync stays held while runs of other tables (another dataset's) are staged.
   */
  published(moved: readonly Omit<SyncMove, "pending">[], refused: NonNullable<HeldSync["refused"]>, tables: ReadonlySet<string>): void {
    for (const move of moved) this.confirm(move);
    for (const r of refused) this.abandon(r);
    if (!this.held) return;
    const rest = this.held.tables.filter((t) => !tables.has(t.table));
    const all = [...(this.held.refused ?? []), ...refused];
    Object.assign(this.held, { tables: rest, status: rest.length > 0 ? "held" : "published", ...(rest.length > 0 ? {} : { publishedAt: new Date().toISOString() }), ...(all.length > 0 ? { refused: all } : {}) });
  }

  /** The pointer did not move after all (the build failed between its intent and the move). */
  abandon(move: Pick<SyncMove, "table" | "partition">): void {
    this.moves.delete(moveKey(move));
  }

  /**
   * Marks the sync finished (with the error that stopped it, if one did). A sync that moved nothing leaves no record:
   * also one whose intended moves were all abandoned (their builds failed), whose record is removed.
   */
  async finish(error?: string): Promise<void> {
    if (!this.recorded && this.moves.size === 0) return;
    try {
      if (this.moves.size === 0 && this.schemaChanges.length === 0) await this.forget();
      else await this.write({ finishedAt: new Date().toISOString(), ...(error !== undefined ? { error } : {}) });
    } finally {
      const lease = await this.lease?.catch(() => undefined);
      await lease?.release();
    }
  }

  /** Removes the stored record, after the writes before it. */
  private forget(): Promise<void> {
    return this.afterWrites(() => forgetSync(this.lake, this.id));
  }

  private write(extra: Pick<SyncRecord, "finishedAt" | "error"> = {}): Promise<void> {
    this.recorded = true;
    // Taken before the record is first written, so whoever finds the record finds the lease held while the sync runs.
    if (!this.lease) {
      this.lease = (async () => {
        const claimed = await claimSyncId(this.lake, `sync ${this.record.config}`);
        this.id = claimed.syncId;
        return claimed;
      })();
      // Its failure is the write's (awaited below), never an unhandled rejection meanwhile.
      this.lease.catch(() => undefined);
    }
    const held = this.held ? { held: { ...this.held } } : {};
    return this.afterWrites(() => recordSync(this.lake, { format: 1, ...this.record, syncId: this.id, ...extra, moves: [...this.moves.values()].map(stripPending), ...this.snapshotList(), ...held, ...(this.schemaChanges.length > 0 ? { schemaChanges: [...this.schemaChanges] } : {}) }));
  }

  private snapshotList(): Pick<SyncRecord, "snapshots"> {
    if (this.snapshots.size === 0) return {};
    return { snapshots: [...this.snapshots].sort(([a], [b]) => (a < b ? -1 : 1)).map(([table, snapshotId]) => ({ table, snapshotId })) };
  }

  /** Runs `store` once the sync's lease is held and the write before it has ended, failed or not: the newest state is stored last. */
  private afterWrites(store: () => Promise<void>): Promise<void> {
    const lease = this.lease;
    const run = async (): Promise<void> => {
      await lease;
      await store();
    };
    this.written = this.written.then(run, run);
    return this.written;
  }
}

function moveKey(move: Pick<SyncMove, "table" | "partition">): string {
  return `${move.table}\n${move.partition}`;
}

function stripPending(move: SyncMove): SyncMove {
  if (move.pending) return move;
  const { pending: _pending, ...rest } = move;
  return rest;
}
