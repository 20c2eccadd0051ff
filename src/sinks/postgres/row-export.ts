import { stat, writeFile } from "node:fs/promises";
import path from "node:path";
import type { DuckDBConnection, DuckDBInstance } from "@duckdb/node-api";
import { setClock } from "../../duckdb/session-clock.js";
import { duckdbStorageType } from "../../model/column-types.js";
import { LakeswapError } from "../../model/errors.js";
import { quoteFilePath, quoteLiteral } from "../../model/sql.js";
import type { SinkColumn, SinkLayout, SinkPartitionWrite } from "../sink.js";
import { ident } from "./sql-names.js";

/**
 * One partition's rows read out of the lake as files for COPY (its text format), in its own temporary folder: `fresh` holds the rows
 * that may go straight into the target (a partition_replace's rows; an upsert's rows whose key the target did not hold
 * when they were read), `known` the rows an upsert merges. Either file may be empty (no rows).
 */
export interface StagedRows {
  readonly folder: string;
  readonly fresh: string;
  readonly known: string;
  /** The columns each line holds, in order: every column of the layout, or those that are not partition columns. */
  readonly columns: readonly string[];
}

/** How an upsert's rows are divided: all merged, all fresh, or by the target's keys (a CSV file that PostgreSQL wrote). */
export type RowSplit = { readonly all: "fresh" | "known" } | { readonly keysCsv: string };

/**
 * Reads partitions' rows out of their runs' Parquet files with DuckDB and writes them in the text format of
 * PostgreSQL's `COPY ... FROM STDIN` (its default; the server parses it in 0.84x the CPU of quoted CSV, measured on the
 * sink bench's rows): tab-separated, NULL as `\N`, text with its backslashes, tabs and line ends escaped by DuckDB's
 * `replace` (so no line can read as the end marker `\.`), other values as DuckDB prints them (no character there needs
 * escaping), the partition's values added. DuckDB's CSV writer does the writing, with quoting turned off. One export at
 * a time; no per-row work in JavaScript.
 */
export class RowExport {
  private duckdb?: Promise<{ instance: DuckDBInstance; connection: DuckDBConnection }>;
  /** DuckDB runs one export at a time: the one a write waits for, then the one staged ahead. */
  private queue: Promise<unknown> = Promise.resolve();

  constructor(
    /** Prefixes messages (the sink's description). */
    private readonly described: string,
  ) {}

  /**
   * Writes the partition's rows into `folder` (fresh.txt, known.txt), divided as `split` says; without the partition
   * columns, whose value is the same on every line, where `partitionValues` is `"left out"` (the table they go into
   * supplies them).
   */
  async export(layout: SinkLayout, part: SinkPartitionWrite, folder: string, split: RowSplit, partitionValues: "sent" | "left out"): Promise<StagedRows> {
    const columns = layout.columns.filter((column) => partitionValues === "sent" || !part.partition.keys.includes(column.name));
    const staged = { folder, fresh: path.join(folder, "fresh.txt"), known: path.join(folder, "known.txt"), columns: columns.map((column) => column.name) };
    const exported = this.queue.then(() => this.run(layout, part, staged, split, columns));
    this.queue = exported.catch(() => undefined);
    await exported;
    return staged;
  }

  private async run(layout: SinkLayout, part: SinkPartitionWrite, staged: StagedRows, split: RowSplit, columns: readonly SinkColumn[]): Promise<void> {
    // A run without files (a partition emptied in the lake): no rows, sent as such.
    if (part.files.length === 0) {
      await Promise.all([writeFile(staged.fresh, ""), writeFile(staged.known, "")]);
      return;
    }
    const { connection } = await this.open();
    const select = columns
      .map((column) => {
        const index = part.partition.keys.indexOf(column.name);
        const value = index >= 0 ? quoteLiteral(part.partition.values[index] as string) : `r.${ident(column.name)}`;
        return `${column.type === "VARCHAR" ? copyTextEscaped(value) : value} AS ${ident(column.name)}`;
      })
      .join(", ");
    const rows = byName(layout, part);
    if (layout.mode === "upsert") await this.checkUniqueKeys(connection, layout, part, rows);
    const options = "FORMAT CSV, HEADER false, DELIMITER E'\\t', QUOTE '', ESCAPE '', NULLSTR '\\N'";
    const key = layout.primaryKey.filter((name) => !part.partition.keys.includes(name));
    // An upsert's rows in key order: PostgreSQL then inserts into (and probes) the key's index page after page. Out of
    // order, 900,000 rows into a table of 1,000,000 cost the server 1.4-1.6x the CPU with the primary key alone, and
    // 1.0-1.4x with the partition index beside it; a sort of one partition here costs DuckDB little.
    const order = layout.mode === "upsert" && key.length > 0 ? ` ORDER BY ${key.map((name) => `r.${ident(name)}`).join(", ")}` : "";
    const write = (where: string, file: string): Promise<unknown> =>
      connection.run(`COPY (SELECT ${select} FROM ${rows} r${where}${order}) TO ${quoteLiteral(file)} (${options})`);
    const keys = "keysCsv" in split && key.length > 0 && (await stat(split.keysCsv)).size > 0 ? split.keysCsv : undefined;
    if (keys === undefined) {
      // Without keys of the target in this partition every row is fresh; without a key to tell rows apart, merged.
      const all = "all" in split ? split.all : key.length > 0 ? "fresh" : "known";
      await write("", all === "fresh" ? staged.fresh : staged.known);
      await writeFile(all === "fresh" ? staged.known : staged.fresh, "");
      return;
    }
    // The target's keys as PostgreSQL prints them, cast to the types the lake stores; a value that does not cast matches
    // nothing, so its row counts as fresh (a COPY of it into the target finds the key there, and the partition is merged).
    const keyColumns = key.map((_, i) => `'k${i}': 'VARCHAR'`).join(", ");
    const cast = key.map((name, i) => `TRY_CAST(k${i} AS ${duckdbStorageType(layout.columns.find((c) => c.name === name)!.type)}) AS k${i}`).join(", ");
    await connection.run(
      `CREATE OR REPLACE TEMP TABLE lakeswap_target_keys AS SELECT DISTINCT ${cast} FROM read_csv(${quoteFilePath(keys)}, ` +
        `header = false, auto_detect = false, delim = ',', quote = '"', escape = '"', columns = {${keyColumns}})`,
    );
    try {
      const held = `EXISTS (SELECT 1 FROM lakeswap_target_keys k WHERE ${key.map((name, i) => `k.k${i} = r.${ident(name)}`).join(" AND ")})`;
      await write(` WHERE NOT ${held}`, staged.fresh);
      await write(` WHERE ${held}`, staged.known);
    } finally {
      await connection.run("DROP TABLE IF EXISTS lakeswap_target_keys");
    }
  }

  /**
   * An upsert partition must hold each key once. PostgreSQL's ON CONFLICT refuses a key twice only when both rows
   * would change the target row; when the first equals what the target holds, the second silently wins, so the
   * result would depend on the order the rows come in. Checked here, before anything is sent.
   */
  private async checkUniqueKeys(connection: DuckDBConnection, layout: SinkLayout, part: SinkPartitionWrite, rows: string): Promise<void> {
    // Partition columns are constant within the partition (and not in the run's files): the rest of the key decides.
    const key = layout.primaryKey.filter((name) => !part.partition.keys.includes(name));
    const grouped = key.length === 0 ? `SELECT count(*) AS n FROM ${rows} HAVING count(*) > 1` : `SELECT ${key.map(ident).join(", ")}, count(*) AS n FROM ${rows} GROUP BY ALL HAVING count(*) > 1 LIMIT 1`;
    const reader = await connection.runAndReadAll(grouped);
    const duplicate = reader.getRowObjectsJson()[0];
    if (!duplicate) return;
    const values = layout.primaryKey.map((name) => {
      const index = part.partition.keys.indexOf(name);
      return `${name} = ${JSON.stringify(index >= 0 ? part.partition.values[index] : duplicate[name])}`;
    });
    throw new LakeswapError(
      "INVALID_INPUT",
      `${this.described}: partition ${part.path || "(whole table)"} of lake table ${layout.lakeTable} holds the key (${values.join(", ")}) ${String(duplicate.n)} times, ` +
        `and upsert needs each key (${layout.primaryKey.join(", ")}) once; change the layer's SQL to give one row per key, or the sink's primary_key; nothing of this partition was sent`,
    );
  }

  private open(): Promise<{ instance: DuckDBInstance; connection: DuckDBConnection }> {
    this.duckdb ??= (async () => {
      const { DuckDBInstance } = await import("@duckdb/node-api");
      // One thread: a partition's export runs while the one before is in PostgreSQL, so it is not on the critical path;
      // a second thread cost 2.3x the CPU for 33,000-row partitions and 1.5x for 1,000,000 rows, for no shorter wall.
      const instance = await DuckDBInstance.create(":memory:", { threads: "1" });
      const connection = await instance.connect();
      // Instants as UTC text with their offset and Gregorian dates, so PostgreSQL reads the same values whatever the
      // machine's zone and locale.
      await setClock(connection, "SESSION");
      return { instance, connection };
    })();
    return this.duckdb;
  }

  /** Closes DuckDB (after the exports under way). */
  async close(): Promise<void> {
    const duckdb = this.duckdb;
    this.duckdb = undefined;
    if (!duckdb) return;
    await this.queue;
    const { instance, connection } = await duckdb.catch(() => ({ instance: undefined, connection: undefined }));
    connection?.closeSync();
    instance?.closeSync();
  }
}

/**
 * The run's rows, matched to the layout's columns by name: files written before a schema change in place lack a column
 * added since (it reads as NULL of its declared type) or hold a column narrower than declared (read as the declared
 * type), and a run may mix files of both (append). Each value reads as the lake's own readers read it
 * (engine/duckdb-run.ts `readFiles`); a file that holds every column reads as written.
 */
function byName(layout: SinkLayout, part: SinkPartitionWrite): string {
  const files = `[${part.files.map((file) => quoteFilePath(file)).join(", ")}]`;
  const declared = layout.columns
    .filter((column) => !part.partition.keys.includes(column.name))
    .map((column) => `CAST(NULL AS ${duckdbStorageType(column.type)}) AS ${ident(column.name)}`);
  if (declared.length === 0) return `read_parquet(${files}, hive_partitioning = false)`;
  return `(SELECT ${declared.join(", ")} WHERE false UNION ALL BY NAME SELECT * FROM read_parquet(${files}, hive_partitioning = false, union_by_name = true))`;
}

/** A text expression escaped for COPY's text format: backslash first, then the characters that end a field or a line. */
function copyTextEscaped(expression: string): string {
  return `replace(replace(replace(replace(${expression}, '\\', '\\\\'), chr(9), '\\t'), chr(10), '\\n'), chr(13), '\\r')`;
}
