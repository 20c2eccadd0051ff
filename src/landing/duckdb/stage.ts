import { promises as fs } from "node:fs";
import path from "node:path";
import { randomBytes } from "node:crypto";
import type { DuckDBConnection } from "@duckdb/node-api";
import { BuildError } from "../../model/errors.js";
import { partitionPath, partitionValue, type Partition } from "../../model/partition.js";
import { quoteIdentifier, quoteLiteral, quoteRelation } from "../../model/sql.js";
import { duckdbStorageType } from "../../model/column-types.js";
import type { TableDefinition } from "../../model/table.js";
import { cleanDuckDbMessage } from "../../duckdb/duckdb-text.js";
import type { FileAccess } from "../../engine/duckdb-file-access.js";

/** Files written in a stage folder, one folder per partition, removed once their runs are placed. */
export interface Stage {
  /** The folder of a partition's files (perhaps none, for a partition without rows). */
  folderOf(partition: Partition): string;
  /** A glob of every Parquet file written, each under its partition's Hive folders (`key=value/`). */
  readonly files: string;
  remove(): Promise<void>;
}

/**
 * Which partitions a stage holds: the given ones (of the delivery's `ofDelivery`), or every one of the relation. With
 * `files`, one list per partition: only its rows from those files (positions in the delivery's files, from 1; the
 * relation has them as `__file`), of a file with `after` only its rows after that line (`__line`).
 */
export type StagedPartitions =
  | { readonly partitions: readonly Partition[]; readonly ofDelivery: number; readonly files?: readonly (readonly StagedFile[])[] }
  | "all";

/** A file a partition's run takes rows from: its position in the delivery's files (from 1), and the line its rows follow. */
export interface StagedFile {
  readonly file: number;
  readonly after?: number;
  /** Lines at or before `after` whose rows are taken too (`LandedRun.retaken`). */
  readonly retaken?: readonly number[];
}

/** What a stage's files were written for: a table's columns, partition keys and compression. */
export function tableShape(table: TableDefinition): string {
  return JSON.stringify([table.columns.map((c) => [c.name, duckdbStorageType(c.type)]), table.partitionKeys, table.compression ?? ""]);
}

/** The block DuckDB allocates per open partition and column while it writes them (256 KiB). */
const WRITE_BUFFER_BYTES = 256 * 1024;

/** Column buffers one partitioned write may hold open at once: three quarters of the instance's memory limit (bytes; 0 when unknown: 1 GiB). */
function writeBufferBudget(memoryLimitBytes: number): number {
  const limit = memoryLimitBytes > 0 ? memoryLimitBytes : 1024 ** 3;
  return Math.max(16, Math.floor((limit * 3) / 4 / WRITE_BUFFER_BYTES));
}

/**
 * Writes the good rows of a landed relation into a stage, one folder of
 * Parquet files per partition: the given partitions (of the delivery's
 * `ofDelivery`) in one pass, or one per group for more partitions than the
 * memory limit keeps open at once; or every partition, in one pass whose
 * files DuckDB closes and reopens (one more file) when more partitions than
 * that come, as it does when written ahead, before the partitions are known.
 */
export async function writeStage(connection: DuckDBConnection, files: FileAccess, table: TableDefinition, relation: string, which: StagedPartitions, memoryLimitBytes: number): Promise<Stage> {
  const id = randomBytes(6).toString("hex");
  // Staged where the runs go (a store with local paths: the lake's own temporary folder, so each run folder is one
  // rename away), or in the machine's temporary folder when the runs are uploaded.
  const { dir, remove } = await files.stage(id);
  const runsTable = `runs_${id}`;
  try {
    // DuckDB buffers every open partition's columns while it writes (a block of 256 KiB each): partitions go in
    // groups small enough that a group's buffers stay well inside the landing's memory limit, whatever N is.
    const perGroup = Math.max(4, Math.floor(writeBufferBudget(memoryLimitBytes) / (table.columns.length + table.partitionKeys.length)));
    const partitions = which === "all" ? [] : which.partitions;
    const groups = which === "all" ? 1 : Math.ceil(partitions.length / perGroup);
    // Every partition of a group stays open to the end of its pass, so each run is one file (DuckDB's default, 100
    // open files, would close and reopen the files of a larger group: several files per run, each a footer to audit).
    await connection.run(`SET partitioned_write_max_open_files = ${(which === "all" ? perGroup : Math.min(perGroup, partitions.length)) + 1}`);
    // Every partition of the delivery in one group (a first load of a few partitions) needs no filter.
    const paths = partitions.map(partitionPath);
    const files = which === "all" ? undefined : which.files;
    const all = which === "all" || (groups === 1 && new Set(paths).size === which.ofDelivery && !files);
    const linesTable = `${runsTable}_lines`;
    // A few partitions of one group (a day added to a month) are named in the query itself: no table of them to make.
    const inline = !all && !files && groups === 1 && partitions.length <= INLINE_PARTITIONS ? partitions : undefined;
    const lines = all || inline ? false : await groupTable(connection, { name: runsTable, linesTable }, table.partitionKeys, partitions, perGroup, files);
    try {
      for (let group = 0; group < groups; group += 1) {
        await writeGroup(connection, {
          table, relation, dir, group, runsTable: all || inline ? undefined : runsTable, ...(inline ? { inline } : {}), ...(lines ? { linesTable } : {}), count: partitions.length, byFile: files !== undefined,
        });
      }
    } finally {
      await connection.run(`DROP TABLE IF EXISTS ${runsTable}`);
      await connection.run(`DROP TABLE IF EXISTS ${linesTable}`);
    }
    const groupOf = new Map(paths.map((p, index) => [p, Math.floor(index / perGroup)]));
    const folderOf = (partition: Partition): string => {
      const p = partitionPath(partition);
      return path.join(dir, `g${groupOf.get(p) ?? 0}`, ...p.split("/"));
    };
    return { folderOf, files: path.join(dir, "g*", "**", "*.parquet"), remove };
  } catch (error) {
    await remove();
    throw error;
  }
}

/** At most this many partitions of one group are named in the write's query rather than in a table of them. */
const INLINE_PARTITIONS = 64;

/**
 * A table of the partitions to write, each with its group (`perGroup` partitions a group, in order); with `files`, a
 * row per partition and file it takes rows from (`__file`), and a table of the lines at or before a file's `after`
 * whose rows are taken too (`linesTable`, a row per line: joined by equality, where a list per file was searched once
 * per row, 167 s for 10,000 such lines of a 1,000,000-row file). True when that table has rows.
 */
async function groupTable(
  connection: DuckDBConnection,
  tables: { readonly name: string; readonly linesTable: string },
  keys: readonly string[],
  partitions: readonly Partition[],
  perGroup: number,
  files: readonly (readonly StagedFile[])[] | undefined,
): Promise<boolean> {
  const columns = ["__group INTEGER", ...keys.map((k) => `${quoteIdentifier(k)} VARCHAR`)];
  await connection.run(`CREATE TEMP TABLE ${tables.name} (${[...columns, ...(files ? ["__file INTEGER", "__after BIGINT"] : [])].join(", ")})`);
  const lines: string[] = [];
  const rows = partitions.flatMap((partition, index) => {
    const row = [String(Math.floor(index / perGroup)), ...keys.map((key) => quoteLiteral(partitionValue(partition, key)))];
    if (!files) return [`(${row.join(", ")})`];
    return (files[index] ?? []).map((f) => {
      for (const line of f.retaken ?? []) if (Number.isSafeInteger(line)) lines.push(`(${[...row, String(f.file), String(line)].join(", ")})`);
      return `(${[...row, String(f.file), f.after === undefined ? "NULL" : String(f.after)].join(", ")})`;
    });
  });
  await insertValues(connection, tables.name, rows);
  if (lines.length === 0) return false;
  await connection.run(`CREATE TEMP TABLE ${tables.linesTable} (${[...columns, "__file INTEGER", "__line BIGINT"].join(", ")})`);
  await insertValues(connection, tables.linesTable, lines);
  return true;
}

/** Inserts rows (SQL tuples) into a table, a thousand at a time. */
async function insertValues(connection: DuckDBConnection, table: string, rows: readonly string[]): Promise<void> {
  for (let start = 0; start < rows.length; start += 1000) await connection.run(`INSERT INTO ${table} VALUES ${rows.slice(start, start + 1000).join(", ")}`);
}

/**
 * One pass over the delivery for one group (one for most deliveries), each partition's files in its own Hive folder
 * under `g<group>` (`day=2026-11-01/`; partition values were checked when landed: letters, digits, '_', '.', '-', so
 * the folder name is the value as it is). Without `runsTable`, every partition of the relation.
 */
async function writeGroup(
  connection: DuckDBConnection,
  pass: {
    readonly table: TableDefinition;
    readonly relation: string;
    readonly dir: string;
    readonly group: number;
    readonly runsTable?: string;
    /** The partitions to write, named in the query (no runs table). */
    readonly inline?: readonly Partition[];
    /** Lines at or before a file's `after` whose rows are taken too (`groupTable`). */
    readonly linesTable?: string;
    readonly count: number;
    /** The runs table names the files each partition takes rows from. */
    readonly byFile: boolean;
  },
): Promise<void> {
  const { table, relation, dir, group, runsTable } = pass;
  const keys = table.partitionKeys;
  const keyList = keys.map(quoteIdentifier).join(", ");
  const matched = keys.map((k) => `l.${quoteIdentifier(k)}`).join(", ");
  const projection = table.columns.map((c) => `CAST(l.${quoteIdentifier(c.name)} AS ${duckdbStorageType(c.type)}) AS ${quoteIdentifier(c.name)}`).join(", ");
  const compression = `COMPRESSION ${table.compression === "zstd" ? "zstd" : "snappy"}`;
  // By file: a partition's rows of the files it takes, of a file that grew only those after the line it was taken to
  // (and those at lines that were bad rows then, fixed since).
  const sameFile = [`g.__group = ${group}`, ...keys.map((k) => `g.${quoteIdentifier(k)} = l.${quoteIdentifier(k)}`), "g.__file = l.__file"];
  const retaken = pass.linesTable ? ` OR EXISTS (SELECT 1 FROM ${pass.linesTable} g WHERE ${[...sameFile, "g.__line = l.__line"].join(" AND ")})` : "";
  const named = pass.inline?.map((partition) => `(${keys.map((key) => quoteLiteral(partitionValue(partition, key))).join(", ")})`);
  const where = named
    ? ` WHERE (${matched}) IN (SELECT (${keyList}) FROM (VALUES ${named.join(", ")}) AS g(${keyList}))`
    : !runsTable
    ? ""
    : pass.byFile
      ? ` WHERE EXISTS (SELECT 1 FROM ${runsTable} g WHERE ${[...sameFile, "(g.__after IS NULL OR l.__line > g.__after)"].join(" AND ")})${retaken}`
      : ` WHERE (${matched}) IN (SELECT (${keyList}) FROM ${runsTable} WHERE __group = ${group})`;
  try {
    if (keys.length === 0) {
      // A table without partition keys: the whole relation is its one run (its rows of some files only), one file.
      await fs.mkdir(path.join(dir, "g0"));
      await connection.run(
        `COPY (SELECT ${projection} FROM ${quoteRelation(relation)} AS l${pass.byFile ? where : ""}) TO ${quoteLiteral(path.join(dir, "g0", "data_0.parquet"))} (FORMAT PARQUET, ${compression})`,
      );
      return;
    }
    await connection.run(
      `COPY (SELECT ${projection}, ${keys.map((k) => `l.${quoteIdentifier(k)}`).join(", ")} FROM ${quoteRelation(relation)} AS l${where}) ` +
        `TO ${quoteLiteral(path.join(dir, `g${group}`))} (FORMAT PARQUET, PARTITION_BY (${keyList}), ${compression})`,
    );
  } catch (error) {
    throw new BuildError(`writing ${pass.count} run(s) of ${table.name} failed: ${cleanDuckDbMessage(error)}`, error);
  }
}
