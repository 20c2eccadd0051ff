import { promises as fs } from "node:fs";
import type { DuckDBConnection, DuckDBPreparedStatement } from "@duckdb/node-api";
import { BuildError, LakeswapError, isNoSpace } from "../model/errors.js";
import { partitionPath, partitionValue, type Partition } from "../model/partition.js";
import { quoteIdentifier, quoteLiteral } from "../model/sql.js";
import { duckdbStorageType } from "../model/column-types.js";
import { readsByName, type TableDefinition } from "../model/table.js";
import type { BuildRequest, BuildResult, PartitionSnapshot, TableSnapshot } from "../model/build.js";
import { faultPoint } from "../shared/faults.js";
import { cleanDuckDbMessage } from "../duckdb/duckdb-text.js";
import { checkOutputColumns, outputValue, partitionRowsCheck, selectShape } from "./build-checks.js";
import { runFileName, type FileAccess } from "./duckdb-file-access.js";
import { assertOneSelect } from "./sql-guard.js";

/** What a build's SELECT is called in messages. */
const BUILD_SQL = "the SQL";

/**
 * Builds one run with DuckDB: one `COPY (SELECT …) TO …(FORMAT PARQUET)` of the checked SELECT into the run's one
 * file, the lake tables it reads given by name as views of their current runs (`inputsClause`). The engine's builds
 * (users' SQL) and the landing's (a landed delivery's dead letters) are the same but for the instance `connection`
 * belongs to.
 */
export async function buildRun(connection: DuckDBConnection, request: BuildRequest, files: FileAccess): Promise<BuildResult> {
  const select = await assertOneSelect(request.select, BUILD_SQL);
  const inputs = inputsClause(request.sources, files);
  const outputColumns = await describeShape(connection, inputsClause(request.sources, files, "shape"), select, request.partition);
  const { table, partition } = request;

  checkOutputColumns(table, partition, outputColumns, true);
  // Partition columns are not stored; if the SELECT returns them, every row must belong here.
  const where = partitionRowsCheck(table, partition, outputColumns, (message) => `error(${message})`);
  const projection = table.columns
    .map((c) => `CAST(${outputValue(c, outputColumns)} AS ${duckdbStorageType(c.type)}) AS ${quoteIdentifier(c.name)}`)
    .join(", ");

  const fileName = runFileName(request.runId);
  const target = await files.newRunFile(request.runPrefix, fileName);
  let rows: number;
  try {
    faultPoint("build-write");
    const reader = await connection.runAndReadAll(
      `COPY (${inputs}SELECT ${projection} FROM (${select}) AS q${where}) TO ${quoteLiteral(target.path)} ` +
        `(FORMAT PARQUET, COMPRESSION ${table.compression === "zstd" ? "zstd" : "snappy"})`,
    );
    rows = Number(reader.getRows()[0]?.[0] ?? 0);
  } catch (error) {
    await target.discard();
    if (isNoSpace(error)) {
      throw new LakeswapError(
        "NO_SPACE",
        `building ${table.name}/${partitionPath(partition)} ran out of disk space writing '${target.path}' (${cleanDuckDbMessage(error)}): ` +
          "the run was removed and the pointer did not move. Free space in the lake's folder and rerun",
        { cause: error },
      );
    }
    throw new BuildError(`building ${table.name}/${partitionPath(partition)} failed: ${usersLines(cleanDuckDbMessage(error), inputs)}`, error);
  }
  faultPoint("during-build");
  const stat = await fs.stat(target.path);
  await target.publish();
  return { rows, files: [{ key: `${request.runPrefix}${fileName}`, size: stat.size }] };
}

/**
 * The lake tables a build reads, each by its name as a view over the files of its current runs (`tableViewSelect`),
 * as a WITH clause put before the build's SELECT on a line of its own: `WITH "t" AS NOT MATERIALIZED (…), …` and a new
 * line, or "" where the store's files are not local. DuckDB binds a query over these once where temporary views would
 * be bound twice more (made, then read); NOT MATERIALIZED keeps them read as a view is, never held whole in memory. The
 * SELECT's own WITH and its names shadow these, as they would shadow views. With `shape`, each is its table's columns
 * without a row (`emptyView`: what its view gives, names and types, without a file): what the SELECT's output columns
 * are decided by, bound without reading the footers of every file of the inputs.
 */
function inputsClause(sources: readonly TableSnapshot[], files: FileAccess, shape?: "shape"): string {
  const pathOf = files.pathInPlace;
  if (!pathOf || sources.length === 0) return "";
  const views = sources.map(({ table, partitions }) => `${quoteIdentifier(table.name)} AS NOT MATERIALIZED (${shape ? emptyView(table) : tableViewSelect(table, partitions, pathOf, quoteLiteral)})`);
  return `WITH ${views.join(", ")}\n`;
}

/**
 * A DuckDB message about a query that starts with `inputs` (`inputsClause`), its `LINE n:` counted in the lines of the
 * user's SELECT, as a message about the SELECT alone would: the inputs take lines of their own before it.
 */
function usersLines(message: string, inputs: string): string {
  const before = inputs.split("\n").length - 1;
  if (before === 0) return message;
  return message.replace(/\bLINE (\d+):/g, (_, line: string) => `LINE ${Math.max(1, Number(line) - before)}:`);
}

/**
 * Makes every lake table a view over the files of its current runs, partition columns last (the pointer's values, as
 * Hive does: read off the runs' paths by one scan of every file where that gives exactly them, else one scan per
 * partition with its values as constants). None where the store's files are not local: DuckDB does not read an S3
 * lake's tables (Athena does).
 *
 * The paths are quoted as they are, not as `quoteFilePath` writes them: the instance that runs users' SQL checks each
 * path against its allowed folders as written, before it is taken as a glob. Only the lake's own folder may hold glob
 * characters (table names, partition values and run ids are checked), and a run's path, with its random run id, is
 * matched by no other file, so DuckDB reads the file itself (it takes a glob that matches nothing as a path).
 */
export async function registerViews(connection: DuckDBConnection, sources: readonly TableSnapshot[], files: FileAccess): Promise<void> {
  const pathOf = files.pathInPlace;
  if (!pathOf) return;
  for (const { table, partitions } of sources) {
    const sql = tableViewSelect(table, partitions, pathOf, quoteLiteral);
    await connection.run(`CREATE OR REPLACE TEMP VIEW ${quoteIdentifier(table.name)} AS ${sql}`);
  }
}

/**
 * The SELECT of a table's view over the files of its current runs (`partitions`, each with files), declared columns
 * then partition columns (VARCHAR, the pointer's values). `pathOf` gives a file's path; `quotePath` quotes it for SQL
 * (as is for the instance that checks paths as written, `quoteFilePath` where a path must never be taken as a glob).
 */
export function tableViewSelect(table: TableDefinition, partitions: readonly PartitionSnapshot[], pathOf: (key: string) => string, quotePath: (path: string) => string): string {
  const paths = partitions.map((p) => p.files.map(pathOf));
  const columns = table.columns.map((c) => quoteIdentifier(c.name)).join(", ");
  if (partitions.length === 0) return emptyView(table);
  if (partitions.length > 1 && namedByPaths(table, partitions, paths)) {
    // A scan per partition costs several times as much: its own bind, footer reads and pipeline, for a few rows each.
    const keys = table.partitionKeys.map((key) => `, CAST(${quoteIdentifier(key)} AS VARCHAR) AS ${quoteIdentifier(key)}`).join("");
    return `SELECT ${columns}${keys} FROM ${readFiles(table, `[${paths.flat().map(quotePath).join(", ")}]`, "hive_partitioning = true, hive_types_autocast = false")}`;
  }
  return partitions
    .map((p, i) => {
      const keys = table.partitionKeys
        .map((key) => `, CAST(${quoteLiteral(partitionValue(p.partition, key))} AS VARCHAR) AS ${quoteIdentifier(key)}`)
        .join("");
      return `SELECT ${columns}${keys} FROM ${readFiles(table, `[${(paths[i] ?? []).map(quotePath).join(", ")}]`, "hive_partitioning = false")}`;
    })
    .join(" UNION ALL ");
}

/**
 * Whether DuckDB's Hive partitioning reads each file's partition off its path exactly: every folder of the form
 * `name=value` in the paths (the run's `day=…` and `run=…`, and any above the lake) appears once in each path, the same
 * ones in every path, none of them names a column of the table (DuckDB would put the folder's value in place of the
 * file's column), and each partition key's folder holds that file's partition value. Anything unusual (a name or value
 * with another '=', a '%' DuckDB might decode, a '?' or '\\') reads partition by partition instead.
 */
function namedByPaths(table: TableDefinition, partitions: readonly PartitionSnapshot[], paths: readonly (readonly string[])[]): boolean {
  const columns = new Set(table.columns.map((c) => c.name.toLowerCase()));
  let layout: string | undefined;
  return partitions.every((partition, i) =>
    (paths[i] ?? []).every((file) => {
      const parts = file.split("/");
      if (/[=%?\\]/.test(parts.at(-1) ?? "")) return false;
      const folders = parts.slice(0, -1).filter((part) => part.includes("=")).map((part) => part.split("="));
      if (folders.some((folder) => folder.length !== 2 || /[%?\\]/.test(folder.join("")))) return false;
      const names = folders.map(([name]) => (name as string).toLowerCase());
      if (new Set(names).size !== names.length || names.some((name) => columns.has(name))) return false;
      if ((layout ??= names.join("/")) !== names.join("/")) return false;
      return table.partitionKeys.every((key) => folders.some(([name, value]) => name === key && value === partitionValue(partition.partition, key)));
    }),
  );
}

/**
 * The rows of some files of a table. A table whose schema changed in place (an ingested table gains columns as its
 * namespace does) keeps files written with the columns of their time: once it has (`readsByName`), they are matched
 * by name, a column a file lacks (or every file lacks, until a run carries it) is NULL of its declared type, and a
 * column written narrower (INTEGER before a widening to BIGINT) is read as the declared type. That costs a read of
 * every file's schema before the query runs, so a table whose files all hold every column is read as written.
 */
export function readFiles(table: TableDefinition, files: string, options: string): string {
  if (!readsByName(table)) return `read_parquet(${files}, ${options})`;
  // A rebuild by swap in progress (model/table.ts `rebuilding`): a renamed column is read from a run not rewritten yet under its old name.
  const renames = Object.entries(table.rebuilding?.renames ?? {});
  const old = renames.map(([to, from]) => `CAST(NULL AS ${duckdbStorageType(table.columns.find((c) => c.name === to)?.type ?? "VARCHAR")}) AS ${quoteIdentifier(from)}`);
  const declared = [...table.columns.map((c) => `CAST(NULL AS ${duckdbStorageType(c.type)}) AS ${quoteIdentifier(c.name)}`), ...old].join(", ");
  const union = `(SELECT ${declared} WHERE false UNION ALL BY NAME SELECT * FROM read_parquet(${files}, ${options}, union_by_name = true))`;
  if (renames.length === 0) return union;
  const coalesced = renames.map(([to, from]) => `COALESCE(${quoteIdentifier(to)}, ${quoteIdentifier(from)}) AS ${quoteIdentifier(to)}`).join(", ");
  return `(SELECT * REPLACE (${coalesced}) FROM ${union})`;
}

function emptyView(table: TableDefinition): string {
  const columns = table.columns.map((c) => `CAST(NULL AS ${duckdbStorageType(c.type)}) AS ${quoteIdentifier(c.name)}`);
  const keys = table.partitionKeys.map((key) => `CAST(NULL AS VARCHAR) AS ${quoteIdentifier(key)}`);
  return `SELECT ${[...columns, ...keys].join(", ")} WHERE false`;
}

/** Output columns by the shape of a build's query (`describeShape`), for the process: a few hundred at most. */
const columnsByShape = new Map<string, readonly string[]>();
const MAX_SHAPES = 512;

/**
 * The output columns of `select` over the inputs' shapes, bound once per shape in the process: the SELECT with the
 * partition's values taken out (the partitions of a layer differ only in them; as the Athena engine remembers them),
 * over the inputs' columns and types. A sync of many partitions binds its layer's SELECT once, and a month's build
 * that runs every sync binds it once a process.
 */
async function describeShape(connection: DuckDBConnection, inputs: string, select: string, partition: Partition): Promise<readonly string[]> {
  const key = `${inputs}\u0000${selectShape(select, partition)}`;
  const known = columnsByShape.get(key);
  if (known) return known;
  const columns = await describe(connection, inputs, select);
  // A column named after a partition value (an unaliased literal) is this partition's own: not remembered.
  if (columns.some((name) => partition.values.some((value) => value !== "" && name.includes(value)))) return columns;
  if (columnsByShape.size >= MAX_SHAPES) columnsByShape.clear();
  columnsByShape.set(key, columns);
  return columns;
}

/**
 * The SELECT's output columns, from its prepared (bound, never run) statement over `inputs` (the inputs' shape: see
 * `inputsClause`): an aggregate is not computed twice, nor an input's files read for it.
 */
async function describe(connection: DuckDBConnection, inputs: string, select: string): Promise<string[]> {
  let prepared: DuckDBPreparedStatement;
  try {
    prepared = await connection.prepare(`${inputs}SELECT * FROM (${select}) AS q`);
  } catch (error) {
    throw new BuildError(`the SELECT failed: ${usersLines(cleanDuckDbMessage(error), inputs)}`, error);
  }
  try {
    return Array.from({ length: prepared.columnCount }, (_, i) => prepared.columnName(i));
  } finally {
    prepared.destroySync();
  }
}
