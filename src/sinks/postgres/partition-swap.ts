import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import type { Partition } from "../../model/partition.js";
import { quoteLiteral } from "../../model/sql.js";
import { ident, sqlState, targetLockKey } from "./sql-names.js";
import type { Query } from "./state-table.js";

/** PostgreSQL's SQLSTATE for a lock not granted within `lock_timeout`. */
const LOCK_NOT_AVAILABLE = "55P03";

/** How long one attempt at the swap's lock waits, and how many attempts run before the last one waits without limit. */
const LOCK_ATTEMPT = "100ms";
const LOCK_ATTEMPTS = 50;

/** The name (at most 63 bytes) the CHECK constraint that lets ATTACH skip its validation scan carries until the attach. */
const BOUND_CHECK = "lakeswap_bound";

/** The session's temporary copy of the parent's definition, which new leaves are made like. */
const LEAF_TEMPLATE = "lakeswap_leaf_template";

/**
 * The `partitioned` layout of a partition_replace target: the table is partitioned by LIST on its first partition
 * column (and each level below by the next), one leaf table per lake partition. A partition is replaced by building
 * its rows in a fresh table (COPY without index maintenance beyond the indexes the parent declares), then, at the
 * end of the same transaction, detaching the old leaf, attaching the new one (a CHECK constraint matching the bound
 * spares ATTACH its validation scan) and dropping the old: the server writes the rows once, deletes nothing row by
 * row, and a reader sees the old leaf or the new one, whole.
 *
 * One instance per connection. Transactions of other partitions run at the same time on other connections, so a
 * transaction takes no lock on the parent before its swap: the leaf is made like a temporary copy of the parent
 * (`prepareSession`), not like the parent, whose ACCESS SHARE lock would be held to the end of the transaction and
 * make two swaps wait for each other. The parent's locks come last (the swap, then COMMIT): two connections take
 * turns there for milliseconds, and never each hold what the other waits for.
 */
export class PartitionSwap {
  /** The session's `lock_timeout`, restored after each attempt at the swap's lock (read once). */
  private sessionLockTimeout?: Promise<string>;
  /** Whether this session holds the template of new leaves. */
  private templated = false;

  constructor(
    private readonly query: Query,
    private readonly schema: string,
    private readonly table: string,
    private readonly keys: readonly string[],
  ) {}

  /** `CREATE TABLE` of the partitioned parent from its column definitions. */
  static createStatement(target: string, definitions: readonly string[], keys: readonly string[]): string {
    return `CREATE TABLE IF NOT EXISTS ${target} (${definitions.join(", ")}) PARTITION BY LIST (${ident(keys[0]!)})`;
  }

  /**
   * Whether an existing target has this layout: partitioned by LIST on exactly its first partition column, without a
   * default partition (made by hand: its rows of a value would make ATTACH fail, so such a table keeps DELETE + COPY).
   */
  static async isPartitioned(query: Query, target: string, keys: readonly string[]): Promise<boolean> {
    if (keys.length === 0) return false;
    const result = await query<{ fits: boolean }>(
      "SELECT p.partstrat = 'l' AND p.partnatts = 1 AND p.partdefid = 0 AND a.attname = $2 AS fits FROM pg_partitioned_table p " +
        "JOIN pg_attribute a ON a.attrelid = p.partrelid AND a.attnum = p.partattrs[0] WHERE p.partrelid = to_regclass($1)",
      [target, keys[0]],
    );
    return result.rows[0]?.fits === true;
  }

  /**
   * Makes this session's template of new leaves, outside any transaction (the parent is locked only while it is
   * copied): a temporary table like the parent, with its defaults, constraints and indexes. A change to the parent
   * later in the sync is not in it: the ATTACH then builds an index the leaf lacks, or refuses a leaf without a new
   * column or constraint (the partition fails, whole; the next sync takes the new definition).
   */
  async prepareSession(): Promise<void> {
    if (this.templated) return;
    await this.query(`CREATE TEMPORARY TABLE ${ident(LEAF_TEMPLATE)} (LIKE ${this.target()} INCLUDING ALL)`);
    this.templated = true;
  }

  /**
   * Replaces a partition's rows, in the caller's transaction (after `prepareSession`): a new leaf is made like the
   * parent (its template), `load` fills it (returns the rows), then it takes the old leaf's place. While `load` runs,
   * the leaf's partition columns default to the partition's values, so the rows it COPYs need not carry them (the
   * server then parses 0.89x as much); the defaults go at the swap. Returns the rows and the new leaf (quoted), whose storage the state row records.
   */
  async replace(partition: Partition, load: (leaf: string) => Promise<number>): Promise<{ rows: number; leaf: string }> {
    const parent = (await this.parentOf(partition, true))!;
    const value = partition.values[this.keys.length - 1]!;
    // The partition's advisory lock keeps other lakeswap writers of it out until COMMIT: the old leaf stays the old leaf.
    const old = await this.childFor(parent, value);
    const leaf = `${ident(this.schema)}.${ident(this.tableName(partition.values))}`;
    const bound = this.keys.map((key, i) => `${ident(key)} IS NOT NULL AND ${ident(key)} = ${quoteLiteral(partition.values[i]!)}`).join(" AND ");
    // INCLUDING ALL: the parent's defaults, constraints and indexes, so that ATTACH finds every index it needs built.
    const defaults = (set: boolean): string =>
      this.keys.map((key, i) => `ALTER COLUMN ${ident(key)} ${set ? `SET DEFAULT ${quoteLiteral(partition.values[i]!)}` : "DROP DEFAULT"}`).join(", ");
    await this.query(
      `CREATE TABLE ${leaf} (LIKE ${ident(LEAF_TEMPLATE)} INCLUDING ALL, CONSTRAINT ${ident(BOUND_CHECK)} CHECK (${bound})); ALTER TABLE ${leaf} ${defaults(true)}`,
    );
    const rows = await load(leaf);
    await this.lockForSwap(parent);
    // One round trip: detach the old leaf, attach the new one (its CHECK implies the bound: no scan), drop the old.
    const swap = [
      ...(old ? [`ALTER TABLE ${parent} DETACH PARTITION ${old}`] : []),
      `ALTER TABLE ${parent} ATTACH PARTITION ${leaf} FOR VALUES IN (${quoteLiteral(value)})`,
      `ALTER TABLE ${leaf} DROP CONSTRAINT ${ident(BOUND_CHECK)}, ${defaults(false)}`,
      ...(old ? [`DROP TABLE ${old}`] : []),
    ];
    await this.query(swap.join("; "));
    return { rows, leaf };
  }

  /** Removes a partition's leaf (detached, dropped), in the caller's transaction; returns the rows it held. */
  async remove(partition: Partition): Promise<number> {
    const parent = await this.parentOf(partition, false);
    if (!parent) return 0;
    await this.lockForSwap(parent);
    const old = await this.childFor(parent, partition.values[this.keys.length - 1]!);
    if (!old) return 0;
    const counted = await this.query<{ n: string }>(`SELECT count(*) AS n FROM ${old}`);
    await this.query(`ALTER TABLE ${parent} DETACH PARTITION ${old}`);
    await this.query(`DROP TABLE ${old}`);
    return Number(counted.rows[0]?.n ?? 0);
  }

  /** The table the partition's leaf hangs from: the parent, or the level above the leaf (made if missing, when `create`). */
  private async parentOf(partition: Partition, create: boolean): Promise<string | undefined> {
    let parent = this.target();
    for (let level = 0; level < this.keys.length - 1; level += 1) {
      const value = partition.values[level]!;
      const child = await this.childFor(parent, value);
      if (child) {
        parent = child;
        continue;
      }
      if (!create) return undefined;
      // Another connection may be making the same level: one at a time, and the second finds the first's once it commits.
      await this.query(`SELECT pg_advisory_xact_lock(${targetLockKey(this.schema, this.table)}, hashtext(${quoteLiteral(`level:${partition.values.slice(0, level + 1).join("/")}`)}))`);
      const madeMeanwhile = await this.childFor(parent, value);
      if (madeMeanwhile) {
        parent = madeMeanwhile;
        continue;
      }
      const made = `${ident(this.schema)}.${ident(this.tableName(partition.values.slice(0, level + 1)))}`;
      await this.query(`CREATE TABLE ${made} PARTITION OF ${parent} FOR VALUES IN (${quoteLiteral(value)}) PARTITION BY LIST (${ident(this.keys[level + 1]!)})`);
      parent = made;
    }
    return parent;
  }

  /** The partition of `parent` that holds `value` (schema-qualified, quoted), if any. */
  private async childFor(parent: string, value: string): Promise<string | undefined> {
    const result = await this.query<{ name: string }>(
      "SELECT format('%I.%I', n.nspname, c.relname) AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid " +
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE i.inhparent = to_regclass($1) AND pg_get_expr(c.relpartbound, c.oid) = format('FOR VALUES IN (%L)', $2::text)",
      [parent, value],
    );
    return result.rows[0]?.name;
  }

  /**
   * Takes the lock DETACH needs (ACCESS EXCLUSIVE on the leaf's parent) in short attempts: a request that waits
   * behind a long reader queues every later reader of the table behind it, so each attempt gives up after
   * LOCK_ATTEMPT and lets the queue drain before the next; the last attempt waits as long as the session allows.
   */
  private async lockForSwap(parent: string): Promise<void> {
    this.sessionLockTimeout ??= this.query<{ timeout: string }>("SELECT current_setting('lock_timeout') AS timeout").then((result) => result.rows[0]!.timeout);
    const restore = `SET LOCAL lock_timeout = ${quoteLiteral(await this.sessionLockTimeout)}`;
    const lock = `LOCK TABLE ONLY ${parent} IN ACCESS EXCLUSIVE MODE`;
    for (let attempt = 1; attempt <= LOCK_ATTEMPTS; attempt += 1) {
      try {
        // One round trip; a timeout aborts it at the LOCK, and the savepoint takes the transaction back to before it.
        await this.query(`SAVEPOINT lakeswap_lock; SET LOCAL lock_timeout = ${quoteLiteral(LOCK_ATTEMPT)}; ${lock}; RELEASE SAVEPOINT lakeswap_lock; ${restore}`);
        return;
      } catch (error) {
        if (sqlState(error) !== LOCK_NOT_AVAILABLE) throw error;
        await this.query(`ROLLBACK TO SAVEPOINT lakeswap_lock; ${restore}`);
        await sleep(50 * Math.min(attempt, 10));
      }
    }
    await this.query(lock);
  }

  /** The quoted parent. */
  private target(): string {
    return `${ident(this.schema)}.${ident(this.table)}`;
  }

  /**
   * A new table's name, `<table>_<values>_<random>` in at most 63 bytes: readable in psql, unique (the old leaf
   * of the same values lives on until the swap).
   */
  private tableName(values: readonly string[]): string {
    const readable = `${this.table}_${values.join("_").toLowerCase().replace(/[^a-z0-9]+/g, "_")}`.slice(0, 54);
    return `${readable}_${randomBytes(4).toString("hex")}`;
  }
}

