import { createWriteStream } from "node:fs";
import { rm, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import { pipeline } from "node:stream/promises";
import type pg from "pg";
import { LakeswapError } from "../../model/errors.js";
import { faultPoint } from "../../shared/faults.js";
import type { Partition } from "../../model/partition.js";
import { quoteLiteral } from "../../model/sql.js";
import { freshProcessFolder } from "../../shared/process-folders.js";
import type { Sink, SinkLayout, SinkPartitionWrite, SinkSpec, SinkState } from "../sink.js";
import { RowExport, type RowSplit, type StagedRows } from "./row-export.js";
import { PartitionSwap } from "./partition-swap.js";
import { SinkSession, type PostgresClient, type SessionTarget } from "./sink-session.js";
import { ident, postgresType, sqlState, targetLockKey } from "./sql-names.js";
import { createIfAbsent, forgetState, readState, recordState, type StateEntry, type StateScope, type StateSource } from "./state-table.js";
import { followLayout, planTargetChange, readTargetColumns, type TargetNames } from "./target-schema.js";
import { DELETED_AT, UPDATED_AT, existingStamp, goneKeysCondition, goneKeysStatement, upsertStatement } from "./upsert-statements.js";

/** The source `layout`'s rows come from, as the state table records it. */
function sourceOf(layout: SinkLayout): StateSource {
  return { lakeId: layout.source.lakeId, location: layout.source.location, lakeTable: layout.lakeTable };
}

/** PostgreSQL's SQLSTATE for a duplicate key: the only error after which an upsert's straight COPY is retried by merge. */
const UNIQUE_VIOLATION = "23505";

/** PostgreSQL's SQLSTATE for a transaction it aborted to break a deadlock: the only error after which a partition's transaction is run again. */
const DEADLOCK_DETECTED = "40P01";

/**
 * Partitions in their transactions at once, each on a connection of its own. Most of a partition's time is the
 * server's (COPY, index inserts, the merge), on one backend per connection: two backends use the two cores of a
 * small machine, while DuckDB exports the next partition.
 */
const WRITERS = 2;

/**
 * Attempts of a partition's transaction that PostgreSQL aborts as a deadlock (40P01). Two upsert transactions of one
 * target deadlock when keys move both ways between their partitions: each marks its gone keys first, then merges
 * keys the other has marked. PostgreSQL aborts one; run again at once it would take the same rows in the same order
 * while the other is still in its merge, and deadlock again (it did, four times in a row, on a busy machine). So an
 * attempt after a deadlock runs alone: it takes the target's lock exclusively, waiting for every lakeswap
 * transaction of the target to end and keeping new ones out until it commits. The bound is for a session outside
 * lakeswap that keeps taking the same rows.
 */
const DEADLOCK_ATTEMPTS = 4;

/**
 * The PostgreSQL sink: each partition goes in one transaction, by COPY
 * (rows read out of the run's Parquet files by DuckDB in COPY's text format, streamed),
 * with its signature in `lakeswap_state`. `partition_replace` COPYs the
 * partition's rows into a fresh leaf table and swaps it for the old one (a
 * target partitioned by its partition columns: `PartitionSwap`, the layout it
 * creates by default), or deletes the partition's rows and COPYs the new ones
 * in (a plain table: `partitioning: index`, or one made before); `upsert` COPYs the rows whose
 * key the target does not hold straight into it (the server's fastest insert)
 * and merges the others by primary key (`INSERT ... ON CONFLICT ... DO
 * UPDATE`, one statement) from a temporary table; should a key it took for
 * new be there after all, the partition is merged whole. Two partitions are
 * in their transactions at once, on two connections (`concurrentWrites`);
 * meanwhile the next ones' rows are exported, divided by the keys the target
 * holds (read on a connection of their own).
 */
export class PostgresSink implements Sink {
  readonly description: string;
  readonly concurrentWrites = WRITERS;
  /** The first connection: `prepare` runs on it, and it is the first to take a partition's transaction. */
  private readonly session: SinkSession;
  /** Every connection opened for writes (`session` first), at most WRITERS; `idle` those free, `waiting` writes queued for one. */
  private readonly sessions: SinkSession[] = [];
  private readonly idle: SinkSession[] = [];
  private readonly waiting: ((session: SinkSession) => void)[] = [];
  /** partition_replace into a partitioned target: each connection's `PartitionSwap` (it holds that session's template leaf). */
  private readonly swaps = new Map<SinkSession, PartitionSwap>();
  private readonly rowExport: RowExport;
  /** A connection of its own that reads the target's keys of a partition about to be exported (never in a transaction). */
  private keyReader?: Promise<SinkSession>;
  /** The last key read given to the key reader's connection (see split), settled. */
  private keyReads: Promise<unknown> = Promise.resolve();
  /** Partitions exported ahead (the `upcoming` of a write), by `stagedKey`, until their own write takes them or `close` removes them. */
  private readonly staged = new Map<string, { readonly layout: SinkLayout; readonly rows: Promise<StagedRows> }>();
  /** Upsert: the partitions `lakeswap_state` records for this table, as `prepare` read them. */
  private held?: ReadonlySet<string>;
  /** Upsert: whether a COPY into the target does what the merge's INSERT would, so a new partition may go straight in (`allowsPlainCopy`). */
  private plainCopyAllowed = false;
  /** partition_replace into a target partitioned by its partition columns: those columns (each partition's leaf is swapped, PartitionSwap). */
  private partitionedBy?: readonly string[];
  /** Upsert: the target's stamp column, `_lakeswap_updated_at` (or `updated_at` in a target an older lakeswap made). */
  private stampColumn = UPDATED_AT;

  constructor(
    private readonly spec: SinkSpec,
    client?: PostgresClient,
  ) {
    this.description = `postgres ${spec.maskedUrl} ${spec.schema}.${spec.table}`;
    this.rowExport = new RowExport(this.description);
    this.session = client ? new SinkSession(this.sessionTarget(), client) : SinkSession.open(this.sessionTarget());
    this.sessions.push(this.session);
    this.idle.push(this.session);
  }

  private sessionTarget(): SessionTarget {
    return { description: this.description, url: this.spec.url, maskedUrl: this.spec.maskedUrl };
  }

  async prepare(layout: SinkLayout): Promise<SinkState> {
    await this.session.connect();
    const schema = ident(this.spec.schema);
    const exists = await this.query<{ n: number }>("SELECT 1 AS n FROM pg_namespace WHERE nspname = $1", [this.spec.schema]);
    if (exists.rows.length === 0) await createIfAbsent(this.session.query, `CREATE SCHEMA IF NOT EXISTS ${schema}`);
    const existing = await readTargetColumns(this.session.query, this.targetName());
    if (existing.size === 0) await this.createTarget(layout);
    else {
      if (layout.mode === "upsert") this.stampColumn = existingStamp(this.description, `${this.spec.schema}.${this.spec.table}`, layout, existing);
      // A layer whose schema changed in place (columns added, types widened): the table follows, before any partition.
      if (planTargetChange(this.targetNames(), layout, existing)) await followLayout(this.session.query, this.targetNames(), layout);
    }
    if (layout.mode === "upsert") {
      // A nullable column without default: added without rewriting the table (its identity, see below, stays).
      if (existing.size > 0 && !existing.has(DELETED_AT)) await this.query(`ALTER TABLE ${this.targetName()} ADD COLUMN IF NOT EXISTS ${ident(DELETED_AT)} timestamptz`);
      await this.checkKey(layout);
      this.plainCopyAllowed = await this.allowsPlainCopy();
    } else {
      const partitioned = await PartitionSwap.isPartitioned(this.session.query, this.targetName(), layout.partitionKeys);
      this.partitionedBy = partitioned ? layout.partitionKeys : undefined;
    }
    // The state rows of another target identity (dropped and recreated, truncated) are gone: those partitions go in full.
    const state = await readState(this.session.query, this.stateScope(), sourceOf(layout));
    this.held = new Set(state.recorded.keys());
    return state;
  }

  /** `query` on the first connection (prepare's statements). */
  private query<Row extends pg.QueryResultRow = pg.QueryResultRow>(sql: string, values?: unknown[]): Promise<pg.QueryResult<Row>> {
    return this.session.query<Row>(sql, values);
  }

  /** How `session` swaps a partition's leaf (partition_replace into a partitioned target); undefined for other targets. */
  private swapOf(session: SinkSession): PartitionSwap | undefined {
    if (!this.partitionedBy) return undefined;
    let swap = this.swaps.get(session);
    if (!swap) {
      swap = new PartitionSwap(session.query, this.spec.schema, this.spec.table, this.partitionedBy);
      this.swaps.set(session, swap);
    }
    return swap;
  }

  /** The target as messages and statements name it, with its state rows. */
  private targetNames(): TargetNames {
    return { described: this.description, quoted: this.targetName(), plain: `${this.spec.schema}.${this.spec.table}`, scope: this.stateScope() };
  }

  /** Where this target's state rows live. */
  private stateScope(): StateScope {
    return { schema: this.spec.schema, table: this.spec.table, target: this.targetName() };
  }

  async write(layout: SinkLayout, part: SinkPartitionWrite): Promise<{ rows: number }> {
    await this.session.connect();
    const staging = this.takeStaged(layout, part) ?? this.stage(layout, part);
    // The next partitions are exported (after this one, DuckDB runs one at a time) while this one's transaction runs.
    for (const next of part.upcoming ?? []) this.stageAhead(layout, next);
    const staged = await staging;
    try {
      return await this.withSession(async (session) => {
        const swap = this.swapOf(session);
        await swap?.prepareSession();
        const entry = { partition: part.path, signature: part.signature, runId: part.runId, columns: layout.columns.map((column) => column.name) };
        return this.transaction(session, layout, part.path, entry, async () => {
          if (layout.mode === "upsert") return { rows: await this.upsert(session, layout, part, staged) };
          // FREEZE: the leaf was made in this transaction, so its rows go in frozen and all-visible (no later VACUUM
          // or reader rewrites its pages to set hint bits), and a snapshot older than the swap sees them rather than none.
          if (swap) return swap.replace(part.partition, (leaf) => session.copy(this.copyInto(leaf, staged, "FREEZE"), staged.fresh));
          await this.deletePartition(session, layout, part.partition);
          return { rows: await session.copy(this.copyInto(this.targetName(), staged), staged.fresh) };
        });
      });
    } finally {
      await rm(staged.folder, { recursive: true, force: true });
    }
  }

  /**
   * Runs `work` on a connection no other write is using: a free one, else a new one while fewer than WRITERS are
   * open, else the first to be freed. The connection is freed when `work` ends, whatever its outcome.
   */
  private async withSession<T>(work: (session: SinkSession) => Promise<T>): Promise<T> {
    const session = await this.acquire();
    try {
      await session.connect();
      return await work(session);
    } finally {
      const next = this.waiting.shift();
      if (next) next(session);
      else this.idle.push(session);
    }
  }

  private acquire(): Promise<SinkSession> {
    const free = this.idle.shift();
    if (free) return Promise.resolve(free);
    if (this.sessions.length < WRITERS) {
      const opened = SinkSession.open(this.sessionTarget());
      this.sessions.push(opened);
      return Promise.resolve(opened);
    }
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  /** `COPY <table> (<the staged columns>) FROM STDIN (FORMAT text)`, with `FREEZE` for a table made in the running transaction. */
  private copyInto(table: string, staged: StagedRows, freeze?: "FREEZE"): string {
    return `COPY ${table} (${staged.columns.map(ident).join(", ")}) FROM STDIN (FORMAT text${freeze ? ", FREEZE" : ""})`;
  }

  /**
   * Upsert of one partition, in its transaction: the known rows COPYed into a temporary table, the keys the partition
   * lost removed or marked, the fresh rows COPYed straight into the target (what the merge's INSERT would do, without
   * its per-row speculative insert), then one INSERT ... ON CONFLICT merges the temporary table. A key the fresh rows
   * share with the target (it moved from another partition, or came after the keys were read) stops their COPY with a
   * duplicate key: everything since the savepoint is rolled back, and the fresh rows are merged too. Returns the rows.
   */
  private async upsert(session: SinkSession, layout: SinkLayout, part: SinkPartitionWrite, staged: StagedRows): Promise<number> {
    const target = this.targetName();
    const temp = await this.rowsTable(session, layout);
    let rows = (await hasRows(staged.known)) ? await session.copy(this.copyInto(temp, staged), staged.known) : 0;
    if (await hasRows(staged.fresh)) {
      await session.query("SAVEPOINT lakeswap_copy");
      try {
        // Before the fresh rows are in: their keys are not in the temporary table, and must not count as gone.
        await this.removeGoneKeys(session, layout, part.partition, temp);
        const fresh = await session.copy(this.copyInto(target, staged), staged.fresh);
        await session.query(`RELEASE SAVEPOINT lakeswap_copy${rows > 0 ? `; ${upsertStatement(target, temp, layout, this.stampColumn)}` : ""}`);
        return rows + fresh;
      } catch (error) {
        if (sqlState(error) !== UNIQUE_VIOLATION) throw error;
        await session.query("ROLLBACK TO SAVEPOINT lakeswap_copy");
      }
      rows += await session.copy(this.copyInto(temp, staged), staged.fresh);
    }
    await this.removeGoneKeys(session, layout, part.partition, temp);
    await session.query(upsertStatement(target, temp, layout, this.stampColumn));
    return rows;
  }

  /** Reads a partition's rows out of its run into files of its own temporary folder; the folder is removed if that fails. */
  private async stage(layout: SinkLayout, part: SinkPartitionWrite): Promise<StagedRows> {
    const folder = await freshProcessFolder("lakeswap-sink-");
    try {
      // An S3 lake's run: its files copied into the folder first, one at a time.
      const files: string[] = part.remote ? [] : [...part.files];
      for (const [index, key] of (part.remote?.keys ?? []).entries()) {
        const local = path.join(folder, `run-${index}.parquet`);
        await writeFile(local, await part.remote!.read(key));
        files.push(local);
      }
      // A leaf that PartitionSwap makes supplies the partition's values itself: the lines need not carry them.
      const partitionValues = this.partitionedBy ? "left out" : "sent";
      return await this.rowExport.export(layout, { ...part, files }, folder, await this.split(layout, part, folder), partitionValues);
    } catch (error) {
      await rm(folder, { recursive: true, force: true });
      throw error;
    }
  }

  /**
   * How an upsert's rows are divided: merged whole where a COPY into the target would not do what the merge's INSERT
   * does (see allowsPlainCopy); fresh whole for a partition the target never held; else by the keys the target holds
   * in the partition now. Keys that cannot be read only cost speed: every row is merged.
   */
  private async split(layout: SinkLayout, part: SinkPartitionWrite, folder: string): Promise<RowSplit> {
    if (layout.mode === "partition_replace") return { all: "fresh" };
    if (!this.plainCopyAllowed) return { all: "known" };
    if (this.held?.has(part.path) === false) return { all: "fresh" };
    // A key of partition columns alone (one row per partition): nothing to tell rows apart by.
    const key = layout.primaryKey.filter((name) => !part.partition.keys.includes(name));
    if (key.length === 0) return { all: "known" };
    const keysCsv = path.join(folder, "target-keys.csv");
    try {
      const reader = await this.openKeyReader();
      const where = part.partition.keys.map((name, i) => `${ident(name)} = ${quoteLiteral(part.partition.values[i] as string)}`).join(" AND ") || "true";
      const select = `SELECT ${key.map(ident).join(", ")} FROM ${this.targetName()} WHERE ${where}`;
      // Partitions staged ahead read their keys on the one connection one after the other: a pg client runs one query
      // at a time (a second one given while the first runs is queued, which pg 9 will refuse).
      const read = this.keyReads.then(() => pipeline(reader.copyOut(`COPY (${select}) TO STDOUT (FORMAT csv)`), createWriteStream(keysCsv)));
      this.keyReads = read.catch(() => undefined);
      await read;
      return { keysCsv };
    } catch {
      return { all: "known" };
    }
  }

  /** The key reader's connection, opened once (a failure only costs speed: every row is merged). */
  private openKeyReader(): Promise<SinkSession> {
    this.keyReader ??= (async () => {
      const session = SinkSession.open(this.sessionTarget());
      await session.connect();
      return session;
    })();
    return this.keyReader;
  }

  /** Starts exporting a partition the sync writes next; its write takes the result (or the error). */
  private stageAhead(layout: SinkLayout, part: SinkPartitionWrite): void {
    const key = stagedKey(part);
    if (this.staged.has(key)) return;
    const rows = this.stage(layout, part);
    // Awaited by the partition's own write or by close; until then a failure must not surface as an unhandled rejection.
    rows.catch(() => undefined);
    this.staged.set(key, { layout, rows });
  }

  /** The rows staged ahead for this partition and layout, if any (taken: its write now removes them). */
  private takeStaged(layout: SinkLayout, part: SinkPartitionWrite): Promise<StagedRows> | undefined {
    const key = stagedKey(part);
    const staged = this.staged.get(key);
    if (staged?.layout !== layout) return undefined;
    this.staged.delete(key);
    return staged.rows;
  }

  async remove(layout: SinkLayout, partition: Partition, statePath: string): Promise<{ rows: number }> {
    await this.session.connect();
    return this.withSession((session) =>
      this.transaction(session, layout, statePath, undefined, async () => {
        const swap = this.swapOf(session);
        if (swap) return { rows: await swap.remove(partition) };
        if (layout.mode === "partition_replace") return { rows: await this.deletePartition(session, layout, partition) };
        // Upsert: every key of the partition left the lake; an empty rows table says so.
        return { rows: await this.removeGoneKeys(session, layout, partition, await this.rowsTable(session, layout)) };
      }),
    );
  }

  /** Upsert: the transaction's temporary table of the partition's rows, empty. */
  private async rowsTable(session: SinkSession, layout: SinkLayout): Promise<string> {
    const temp = ident("lakeswap_rows");
    const definitions = layout.columns.map((c) => `${ident(c.name)} ${postgresType(c)}`).join(", ");
    await session.query(`CREATE TEMPORARY TABLE ${temp} (${definitions}) ON COMMIT DROP`);
    return temp;
  }

  /**
   * Upsert: the target rows of this partition whose key the partition no longer holds (deleted in the lake, moved to
   * another partition, rolled back) are deleted with `hard_delete`, or else marked: `_lakeswap_deleted_at` (and the
   * dataset's delete flag) set. A key that moved is written again by its new partition's merge. Returns the rows.
   */
  private async removeGoneKeys(session: SinkSession, layout: SinkLayout, partition: Partition, temp: string): Promise<number> {
    const target = this.targetName();
    const condition = goneKeysCondition(layout, temp);
    // Usually nothing left: counted first, so that no UPDATE or DELETE statement (and its statement triggers) runs for
    // nothing. A count, not EXISTS: EXISTS is planned for its first row, and may pick a nested loop over the unindexed rows table.
    const found = await session.query<{ n: string }>(`SELECT count(*) AS n FROM ${target} t WHERE ${condition}`, [...partition.values]);
    if (Number(found.rows[0]?.n ?? 0) === 0) return 0;
    return (await session.query(goneKeysStatement(target, layout, this.stampColumn, condition), [...partition.values])).rowCount ?? 0;
  }

  /** The target table, quoted: `"schema"."table"`. */
  private targetName(): string {
    return `${ident(this.spec.schema)}.${ident(this.spec.table)}`;
  }

  /**
   * Runs `work` in one transaction of `session` with the partition's state row: written (`entry`: signature, run and
   * columns, with the storage of the leaf `work` names, else the target's) or, without an entry, deleted; where
   * another source holds the row, neither, and `work` is rolled back (OtherSourceError). Anything that fails rolls
   * the whole transaction back; one that PostgreSQL aborted as a deadlock runs again (DEADLOCK_ATTEMPTS in all).
   * Returns the rows `work` counted.
   */
  private async transaction(
    session: SinkSession,
    layout: SinkLayout,
    statePath: string,
    entry: StateEntry | undefined,
    work: () => Promise<{ rows: number; leaf?: string }>,
  ): Promise<{ rows: number }> {
    // Writers of one target (this sink's connections, two lakes, two processes) take turns per partition. They hold
    // the table's lock shared, which a lakeswap before per-partition turns holds alone, so that one still takes turns
    // with all. What may now interleave are transactions of different partitions: partition_replace's touch disjoint
    // rows (or leaves); upsert's may touch the same rows where keys move between partitions, which row locks order
    // (a deadlock is run again). One round trip with BEGIN: each costs milliseconds on a busy machine.
    const table = targetLockKey(this.spec.schema, this.spec.table);
    const partition = `pg_advisory_xact_lock(${table}, hashtext(${quoteLiteral(statePath)}))`;
    for (let attempt = 1; ; attempt += 1) {
      // After a deadlock, alone (DEADLOCK_ATTEMPTS): the table's lock exclusive, taken before any row.
      const turn = `SELECT ${attempt === 1 ? `pg_advisory_xact_lock_shared(${table})` : `pg_advisory_xact_lock(${table})`}, ${partition}`;
      try {
        await session.query(`BEGIN; ${turn}`);
        const { rows, leaf } = await work();
        if (entry) await recordState(session.query, this.stateScope(), sourceOf(layout), entry, leaf);
        else await forgetState(session.query, this.stateScope(), sourceOf(layout), statePath);
        faultPoint("sink-before-commit");
        await session.query("COMMIT");
        return { rows };
      } catch (error) {
        await session.query("ROLLBACK").catch(() => undefined);
        if (sqlState(error) !== DEADLOCK_DETECTED || attempt >= DEADLOCK_ATTEMPTS) throw error;
      }
    }
  }

  /** `DELETE FROM t WHERE <partition columns = values>`, values as parameters; returns the rows deleted. */
  private async deletePartition(session: SinkSession, layout: SinkLayout, partition: Partition): Promise<number> {
    // A table without partition keys (write: replace) is one unit: all of its rows.
    const where = layout.partitionKeys.map((key, i) => `${ident(key)} = $${i + 1}`).join(" AND ") || "true";
    const result = await session.query(`DELETE FROM ${this.targetName()} WHERE ${where}`, [...partition.values]);
    return result.rowCount ?? 0;
  }

  async close(): Promise<void> {
    // Partitions staged ahead that no write took (the sync stopped early): their exports finish, then their files go.
    const pending = [...this.staged.values()];
    this.staged.clear();
    await Promise.all(pending.map((staged) => discard(staged.rows)));
    await this.rowExport.close();
    const keyReader = this.keyReader;
    this.keyReader = undefined;
    if (keyReader) await (await keyReader.catch(() => undefined))?.end();
    this.swaps.clear();
    await Promise.all(this.sessions.map((session) => session.end()));
  }

  private async createTarget(layout: SinkLayout): Promise<void> {
    const definitions = layout.columns.map((c) => `${ident(c.name)} ${postgresType(c)}${c.nullable && !layout.primaryKey.includes(c.name) ? "" : " NOT NULL"}`);
    if (layout.mode === "upsert") {
      definitions.push(`${ident(UPDATED_AT)} timestamptz NOT NULL DEFAULT now()`, `${ident(DELETED_AT)} timestamptz`);
      definitions.push(`PRIMARY KEY (${layout.primaryKey.map(ident).join(", ")})`);
    }
    if (layout.mode === "partition_replace" && layout.partitionKeys.length > 0 && this.spec.partitioning !== "index") {
      // Each partition a leaf table of its own, swapped whole: no index to maintain, no row to delete (PartitionSwap).
      await createIfAbsent(this.session.query, PartitionSwap.createStatement(this.targetName(), definitions, layout.partitionKeys));
      return;
    }
    await createIfAbsent(this.session.query, `CREATE TABLE IF NOT EXISTS ${ident(this.spec.schema)}.${ident(this.spec.table)} (${definitions.join(", ")})`);
    // Every write finds its partition's rows (partition_replace's DELETE, upsert's keys that left the lake): without an
    // index, each partition would scan the whole table.
    if (layout.partitionKeys.length > 0) {
      const index = ident(`${this.spec.table.slice(0, 40)}_lakeswap_partition`);
      await createIfAbsent(this.session.query, `CREATE INDEX IF NOT EXISTS ${index} ON ${this.targetName()} (${layout.partitionKeys.map(ident).join(", ")})`);
    }
  }

  /**
   * Whether a COPY into the target has the effect of the merge's INSERT for rows whose keys are new: only for
   * a plain table (not a partitioned one) without rules (COPY ignores them), user triggers (ON CONFLICT DO
   * UPDATE also fires UPDATE statement triggers) or row security (COPY FROM refuses it).
   */
  private async allowsPlainCopy(): Promise<boolean> {
    const result = await this.query<{ plain: boolean }>(
      "SELECT c.relkind = 'r' AND NOT c.relhasrules AND NOT c.relrowsecurity " +
        "AND NOT EXISTS (SELECT 1 FROM pg_trigger t WHERE t.tgrelid = c.oid AND NOT t.tgisinternal) AS plain " +
        "FROM pg_class c WHERE c.oid = to_regclass($1)",
      [`${ident(this.spec.schema)}.${ident(this.spec.table)}`],
    );
    return result.rows[0]?.plain === true;
  }

  /** Upsert needs a unique index on exactly the primary key: ON CONFLICT names it. */
  private async checkKey(layout: SinkLayout): Promise<void> {
    const result = await this.query<{ columns: string[] }>(
      "SELECT array_agg(a.attname::text ORDER BY a.attname) AS columns FROM pg_index i " +
        "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) " +
        "WHERE i.indrelid = to_regclass($1) AND i.indisunique AND i.indpred IS NULL GROUP BY i.indexrelid",
      [`${ident(this.spec.schema)}.${ident(this.spec.table)}`],
    );
    const key = [...layout.primaryKey].sort().join(",");
    if (!result.rows.some((row) => row.columns.join(",") === key)) {
      throw new LakeswapError(
        "CONFLICT",
        `${this.description}: the existing table has no primary key or unique index on exactly (${layout.primaryKey.join(", ")}), which upsert merges on; ` +
          // A unique index can be added whatever key the table has already (a second primary key cannot).
          `add one: CREATE UNIQUE INDEX ON ${this.spec.schema}.${this.spec.table} (${layout.primaryKey.join(", ")})`,
      );
    }
  }
}

/** Whether a file of rows holds any (the export writes no header). */
async function hasRows(rowsFile: string): Promise<boolean> {
  return (await stat(rowsFile)).size > 0;
}

/** Names a partition's run among the partitions staged ahead. */
function stagedKey(part: SinkPartitionWrite): string {
  return `${part.path}\n${part.runId}`;
}

/** Waits for rows staged ahead to be exported (or to fail), then removes their folder. */
async function discard(rows: Promise<StagedRows>): Promise<void> {
  const staged = await rows.catch(() => undefined);
  if (staged) await rm(staged.folder, { recursive: true, force: true });
}
