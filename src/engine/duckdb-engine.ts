import { promises as fs } from "node:fs";
import path from "node:path";
import type { DuckDBConnection, DuckDBInstance } from "@duckdb/node-api";
import { createHash, randomBytes } from "node:crypto";
import { AuditError, BuildError, InvalidInputError, LakeswapError, errorMessage, isNoSpace } from "../model/errors.js";
import { faultPoint } from "../shared/faults.js";
import { partitionOfValues, partitionPath, partitionValue, type Partition } from "../model/partition.js";
import { mapLimited } from "../shared/map-limited.js";
import { finishRawSignature, signatureColumnOrder } from "../model/signature.js";
import { quoteIdentifier, quoteLiteral, quoteRelation } from "../model/sql.js";
import { freshProcessFolder } from "../shared/process-folders.js";
import { duckdbStorageType } from "../model/column-types.js";
import type { TableDefinition } from "../model/table.js";
import type { ObjectStore } from "../store/object-store.js";
import { isCode } from "../store/local-store.js";
import { checkOutputColumns, partitionRowsCheck } from "./build-checks.js";
import { dropLanding, landDelivery, outOfMemory, signatureQuery } from "../landing/duckdb/duckdb-landing.js";
import { dropMerge, mergeDelivery, mergeRelations, type MergeRelations } from "../landing/duckdb/duckdb-merge.js";
import { openDuckDb, openRestrictedDuckDb, type OpenedDuckDb, type RestrictedDuckDb } from "../duckdb/duckdb-open.js";
import { duckdb } from "../duckdb/duckdb-module.js";
import { exactValueConverter } from "../duckdb/duckdb-values.js";
import { deliveryFiles } from "../landing/delivery-files.js";
import type {
  FileState, IdentifiedDelivery, IdentifiedFiles, LandRequest, LandedDelivery, LandedFile, LandedPartition, LandedRunsRequest, Landing,
  MergeRequest, PartitionMapRequest, RejectedRow, Signing,
} from "../landing/landing.js";
import { assertOneExpression, assertOneSelect } from "./sql-guard.js";
import type { BuildRequest, BuildResult, Engine, PartitionSnapshot, QueryResult, TableSnapshot } from "./engine.js";
import { now as clockNow } from "../shared/clock.js";

/** The block DuckDB allocates per open partition and column while it writes them (256 KiB). */
const WRITE_BUFFER_BYTES = 256 * 1024;

/** Column buffers one partitioned write may hold open at once: three quarters of the instance's memory limit. */
async function writeBufferBudget(connection: DuckDBConnection): Promise<number> {
  const reader = await connection.runAndReadAll(`SELECT current_setting('memory_limit')`);
  const limit = parseByteSize(String(reader.getRows()[0]?.[0] ?? "")) ?? 1024 ** 3;
  return Math.max(16, Math.floor((limit * 3) / 4 / WRITE_BUFFER_BYTES));
}

/** Bytes of a size as DuckDB prints it (`976.5 MiB`, `1.0 GiB`, `512MB`), or undefined. */
export function parseByteSize(text: string): number | undefined {
  const match = /^\s*([\d.]+)\s*(bytes?|[KMGT]i?B)?\s*$/i.exec(text);
  if (!match) return undefined;
  const unit = (match[2] ?? "bytes").toUpperCase();
  const power = { B: 0, BYTE: 0, BYTES: 0, KB: 1, KIB: 1, MB: 2, MIB: 2, GB: 3, GIB: 3, TB: 4, TIB: 4 }[unit] ?? 0;
  const base = unit.includes("I") || power === 0 ? 1024 : 1000;
  return Number(match[1]) * base ** power;
}

/**
 * The name of the one Parquet file of a run written by DuckDB. It is unique
 * per run: a reader that listed a partition just before a swap and opens the
 * file just after gets "file not found" and can retry, never the bytes of
 * another run under a name it already read the footer of.
 */
function runFileName(runId: string): string {
  return `part-${runId}.parquet`;
}

/**
 * The embedded engine: DuckDB in process. A run is one `COPY (SELECT …) TO …
 * (FORMAT PARQUET)`; lake tables are views over the files of their current runs,
 * with partition columns taken from the pointer, as Hive does.
 */
export class DuckDbEngine implements Engine, Landing {
  readonly capabilities = { readsRunFiles: true } as const;
  private readonly store: ObjectStore;
  private instance: Promise<OpenedDuckDb> | undefined;
  /** The instances that run users' SQL, by the table folders they may reach (one per set: a layer's inputs and table, a query's tables). */
  private readonly restricted = new Map<string, Promise<RestrictedDuckDb>>();
  /** The landing instance's memory limit in bytes, read once. */
  private memoryLimit: Promise<number> | undefined;
  private readonly connections = new Set<DuckDBConnection>();
  /** The last deliveries identified: their files' states and ids, so that landing one of them does not read it twice to name it. */
  private readonly identified = new Map<string, { readonly states: readonly string[]; readonly id: string; readonly hashedAt: number }>();
  /** The files' states each landed delivery was read with (by relation), checked again after every later pass over them. */
  private readonly landedStates = new Map<string, { readonly files: readonly string[]; readonly states: readonly string[] }>();
  /** The stages written while deliveries were landed (by relation, see `LandRequest.writeAhead`), with the table shape they were written for. */
  private readonly writtenAhead = new Map<string, { readonly definition: string; readonly stage: Stage }>();
  /** The merges made (by merged relation): their relations, and the folder an S3 lake's current files were copied to. */
  private readonly merges = new Map<string, { readonly relations: MergeRelations; readonly scratch?: string }>();

  /**
   * With a local store, runs are written in place and lake tables are views over
   * their files. With a remote store (AWS mode, where DuckDB lands raw files),
   * a run is written to a temporary folder and uploaded, and only landed
   * deliveries are readable: the lake's tables are Athena's to read.
   * `options.nativeSignatures: false` keeps signatures in the SQL form even where
   * the native extension is built (the signatures are the same).
   */
  /**
   * `stagingPrefix`: where, in a store with local paths, runs are staged before each is renamed into place (the lake's
   * temporary folder, from its layout; default `.lakeswap-staging`, which a lake opened by lakeswap never uses).
   */
  constructor(store: ObjectStore, private readonly options: { readonly nativeSignatures?: boolean; readonly stagingPrefix?: string } = {}) {
    this.store = store;
  }

  /** Builds from users' SQL, in the instance that reaches only the lake. */
  async build(request: BuildRequest): Promise<BuildResult> {
    return this.withConnection((connection) => this.buildWith(connection, request), { user: [...request.sources.map((s) => s.table.name), request.table.name] });
  }

  /** Builds from a landed delivery's relations, which live in the landing instance. */
  async buildLanded(request: BuildRequest): Promise<BuildResult> {
    return this.withConnection((connection) => this.buildWith(connection, request), "landing");
  }

  private async buildWith(connection: DuckDBConnection, request: BuildRequest): Promise<BuildResult> {
    await this.registerViews(connection, request.sources);
    const select = await checkedSelect(request.select);
    const outputColumns = await this.describe(connection, select);
    const { table, partition } = request;

    checkOutputColumns(table, partition, outputColumns, true);
    // Partition columns are not stored; if the SELECT returns them, every row must belong here.
    const where = partitionRowsCheck(table, partition, outputColumns, (message) => `error(${message})`);
    const projection = table.columns
      .map((c) => `CAST(q.${quoteIdentifier(c.name)} AS ${duckdbStorageType(c.type)}) AS ${quoteIdentifier(c.name)}`)
      .join(", ");

    const local = this.store.capabilities.localPaths;
    const runDir = local ? this.store.localPath(request.runPrefix) : await freshProcessFolder("lakeswap-run-");
    if (local) {
      await fs.mkdir(path.dirname(runDir), { recursive: true });
      // Exclusive: a run prefix is fresh or the build stops.
      await fs.mkdir(runDir);
    }
    const fileName = runFileName(request.runId);
    const fileKey = `${request.runPrefix}${fileName}`;
    const filePath = path.join(runDir, fileName);
    let rows: number;
    try {
      faultPoint("build-write");
      const reader = await connection.runAndReadAll(
        `COPY (SELECT ${projection} FROM (${select}) AS q${where}) TO ${quoteLiteral(filePath)} ` +
          `(FORMAT PARQUET, COMPRESSION ${table.compression === "zstd" ? "zstd" : "snappy"})`,
      );
      rows = Number(reader.getRows()[0]?.[0] ?? 0);
    } catch (error) {
      // This build made the folder; a failed build leaves nothing behind, not even an empty folder.
      await fs.rm(runDir, { recursive: true, force: true });
      if (isNoSpace(error)) {
        throw new LakeswapError(
          "NO_SPACE",
          `building ${table.name}/${partitionPath(partition)} ran out of disk space writing '${filePath}' (${cleanDuckDbMessage(error)}): ` +
            "the run was removed and the pointer did not move. Free space in the lake's folder and rerun",
          { cause: error },
        );
      }
      throw new BuildError(`building ${table.name}/${partitionPath(partition)} failed: ${cleanDuckDbMessage(error)}`, error);
    }
    faultPoint("during-build");
    const stat = await fs.stat(filePath);
    if (!local) {
      try {
        await this.store.putFile(fileKey, filePath);
      } finally {
        await fs.rm(runDir, { recursive: true, force: true });
      }
    }
    return { rows, files: [{ key: fileKey, size: stat.size }] };
  }

  async query(sql: string, sources: readonly TableSnapshot[]): Promise<QueryResult> {
    const select = await assertOneSelect(sql, "the query");
    return this.withConnection(async (connection) => {
      await this.registerViews(connection, sources);
      try {
        const reader = await connection.runAndReadAll(select);
        return { columns: reader.columnNames(), rows: reader.convertRows(exactValueConverter(await duckdb())) };
      } catch (error) {
        throw new InvalidInputError(`query failed: ${cleanDuckDbMessage(error)}`);
      }
    }, { user: sources.map((s) => s.table.name) });
  }

  async tablesRead(select: string): Promise<string[] | undefined> {
    // Exactly one SELECT first (InvalidInputError otherwise), so a pipeline refuses it before it builds anything.
    select = await assertOneSelect(select, "the SQL");
    const serialized = await this.withConnection(async (connection) => {
      const reader = await connection.runAndReadAll(`SELECT json_serialize_sql(${quoteLiteral(select)})`);
      return String(reader.getRows()[0]?.[0] ?? "");
    });
    let tree: unknown;
    try {
      tree = JSON.parse(serialized);
    } catch {
      return undefined;
    }
    if (typeof tree !== "object" || tree === null || (tree as { error?: unknown }).error === true) return undefined;
    const tables = new Set<string>();
    const cteNames = new Set<string>();
    const walk = (node: unknown): void => {
      if (Array.isArray(node)) {
        for (const item of node) walk(item);
        return;
      }
      if (typeof node !== "object" || node === null) return;
      const record = node as Record<string, unknown>;
      if (record.type === "BASE_TABLE" && typeof record.table_name === "string") tables.add(record.table_name);
      const cteMap = record.cte_map as { map?: { key?: unknown }[] } | undefined;
      for (const entry of cteMap?.map ?? []) if (typeof entry.key === "string") cteNames.add(entry.key.toLowerCase());
      for (const value of Object.values(record)) walk(value);
    };
    walk(tree);
    return [...tables].filter((name) => !cteNames.has(name.toLowerCase())).sort();
  }

  async compactFiles(request: { readonly table: TableDefinition; readonly files: readonly string[]; readonly targetKey: string }): Promise<{ readonly key: string; readonly size: number }> {
    const { table } = request;
    const local = this.store.capabilities.localPaths;
    const scratch = local ? undefined : await freshProcessFolder("lakeswap-compact-");
    try {
      const sources = await mapLimited(request.files, 8, async (key, index) => {
        if (!scratch) return this.store.localPath(key);
        const object = await this.store.get(key);
        if (!object) throw new AuditError(`the run file ${key} is missing from the store; nothing was compacted`);
        const file = path.join(scratch, `${index}.parquet`);
        await fs.writeFile(file, object.body);
        return file;
      });
      const target = scratch ? path.join(scratch, "compacted.parquet") : this.store.localPath(request.targetKey);
      const projection = table.columns.map((c) => `CAST(${quoteIdentifier(c.name)} AS ${duckdbStorageType(c.type)}) AS ${quoteIdentifier(c.name)}`).join(", ");
      await this.withConnection((connection) =>
        connection.run(
          `COPY (SELECT ${projection} FROM read_parquet([${sources.map(quoteLiteral).join(", ")}], hive_partitioning = false)) TO ${quoteLiteral(target)} ` +
            `(FORMAT PARQUET, COMPRESSION ${table.compression === "zstd" ? "zstd" : "snappy"})`,
        ),
      );
      const { size } = await fs.stat(target);
      if (scratch) await this.store.putFile(request.targetKey, target);
      return { key: request.targetKey, size };
    } finally {
      if (scratch) await fs.rm(scratch, { recursive: true, force: true });
    }
  }

  async countFileRows(files: readonly { readonly key: string; readonly size: number }[]): Promise<number[]> {
    if (files.length === 0) return [];
    const local = this.store.capabilities.localPaths;
    // A remote file is not downloaded: its footer is fetched into a sparse local file of the same size, which is all
    // DuckDB reads of it for the metadata.
    const folder = local ? undefined : await freshProcessFolder("lakeswap-footers-");
    try {
      const paths = local
        ? files.map((file) => this.store.localPath(file.key))
        : await mapLimited(files, 16, (file, index) => this.fetchFooter(file, path.join(folder as string, `${index}.parquet`)));
      return await this.withConnection(async (connection) => {
        const footerRows = async (list: readonly string[]): Promise<Map<string, number>> => {
          const reader = await connection.runAndReadAll(
            `SELECT file_name, num_rows FROM parquet_file_metadata([${list.map(quoteLiteral).join(", ")}])`,
          );
          return new Map(reader.getRowsJS().map(([name, rows]) => [String(name), Number(rows ?? 0)]));
        };
        let counted: Map<string, number>;
        try {
          counted = await footerRows(paths);
        } catch {
          // Find the file to name: one at a time.
          for (const [index, file] of paths.entries()) {
            try {
              await footerRows([file]);
            } catch (error) {
              throw new AuditError(`the run file ${files[index]?.key} is not readable Parquet (${cleanDuckDbMessage(error)}); the pointer was not moved`);
            }
          }
          throw new AuditError(`the run files ${files.map((f) => f.key).join(", ")} could not be read together; the pointer was not moved`);
        }
        return paths.map((file, index) => {
          const rows = counted.get(file);
          if (rows === undefined) throw new AuditError(`the footer of run file ${files[index]?.key} was not read; the pointer was not moved`);
          return rows;
        });
      });
    } finally {
      if (folder) await fs.rm(folder, { recursive: true, force: true });
    }
  }

  async writeLandedFiles(request: { readonly table: TableDefinition; readonly delivery: LandedDelivery; readonly dir: string }): Promise<LandedFile[]> {
    const { table, delivery, dir } = request;
    const keys = table.partitionKeys;
    const projection = table.columns.map((c) => `CAST(${quoteIdentifier(c.name)} AS ${duckdbStorageType(c.type)}) AS ${quoteIdentifier(c.name)}`).join(", ");
    const compression = `COMPRESSION ${table.compression === "zstd" ? "zstd" : "snappy"}`;
    return this.withConnection(async (connection) => {
      const files: LandedFile[] = [];
      for (const [index, landed] of delivery.partitions.entries()) {
        const file = path.join(dir, `part-${index}.parquet`);
        const where = keys.map((key) => `${quoteIdentifier(key)} = ${quoteLiteral(partitionValue(landed.partition, key))}`).join(" AND ") || "true";
        // In landed order (insertion order is kept), so a retry of the same segment writes the same rows in the same order.
        await connection.run(`COPY (SELECT ${projection} FROM ${delivery.relation} WHERE ${where}) TO ${quoteLiteral(file)} (FORMAT parquet, ${compression})`);
        files.push({ partition: landed.partition, file, rows: landed.rows, bytes: (await fs.stat(file)).size });
      }
      return files;
    });
  }

  async writeRejected(request: Parameters<Landing["writeRejected"]>[0]): Promise<number> {
    const { delivery, file, receivedAt } = request;
    const fields = Object.entries(request.fields ?? {}).map(([name, value]) => `${quoteLiteral(value)} AS ${quoteIdentifier(name)}, `).join("");
    if (delivery.rowsRejected === 0) return 0;
    return this.withConnection(async (connection) => {
      const times = `times_${randomBytes(6).toString("hex")}`;
      await connection.run(`CREATE TEMP TABLE ${times} (first_line BIGINT, received_ms BIGINT)`);
      try {
        for (let start = 0; start < receivedAt.length; start += 1000) {
          const values = receivedAt.slice(start, start + 1000).map(([line, ms]) => `(${Math.trunc(line)}, ${Math.trunc(ms)})`);
          await connection.run(`INSERT INTO ${times} VALUES ${values.join(", ")}`);
        }
        // Each bad line takes the receive time of the request it came in: the last one that starts at or before it.
        await connection.run(
          `COPY (SELECT ${fields}r.line, r.reason, r.raw, strftime(make_timestamp(t.received_ms * 1000), '%Y-%m-%dT%H:%M:%S.%gZ') AS received_at ` +
            `FROM ${delivery.rejectedRelation} r ASOF LEFT JOIN ${times} t ON r.line >= t.first_line ORDER BY r.line) TO ${quoteLiteral(file)} (FORMAT json)`,
        );
      } finally {
        await connection.run(`DROP TABLE IF EXISTS ${times}`);
      }
      return delivery.rowsRejected;
    });
  }

  async writeLandedRuns(request: LandedRunsRequest): Promise<BuildResult[]> {
    const { table, delivery, runs } = request;
    if (runs.length === 0) return [];
    const ahead = this.writtenAhead.get(delivery.relation);
    this.writtenAhead.delete(delivery.relation);
    // Written ahead for this table as it is now (the stage holds every partition of the delivery), or written here.
    const usable = ahead !== undefined && ahead.definition === tableShape(table);
    if (ahead && !usable) await ahead.stage.remove();
    const stage = usable
      ? ahead.stage
      : await this.withConnection((connection) =>
          this.writeStage(connection, table, delivery.relation, { partitions: runs.map((run) => run.partition), ofDelivery: delivery.partitions.length }),
        );
    try {
      // A delivery read in place was read again: the runs hold what was signed only if its files did not change since.
      const landed = this.landedStates.get(delivery.relation);
      if (landed) assertUnchanged(landed.files, landed.states, (await fileStates(landed.files)).map(stateText), "after it was landed, before its runs were written");
      faultPoint("during-build");
      return await mapLimited(runs, this.store.capabilities.localPaths ? 8 : 4, (run) => this.placeRun(stage.folderOf(run.partition), run));
    } finally {
      await stage.remove();
    }
  }

  /**
   * Writes the good rows of a landed relation into a stage, one folder of
   * Parquet files per partition: the given partitions (of the delivery's
   * `ofDelivery`) in one pass, or one per group for more partitions than the
   * memory limit keeps open at once; or every partition, in one pass whose
   * files DuckDB closes and reopens (one more file) when more partitions than
   * that come, as it does when written ahead, before the partitions are known.
   */
  private async writeStage(
    connection: DuckDBConnection,
    table: TableDefinition,
    relation: string,
    which: { readonly partitions: readonly Partition[]; readonly ofDelivery: number } | "all",
  ): Promise<Stage> {
    const local = this.store.capabilities.localPaths;
    const id = randomBytes(6).toString("hex");
    // Staged where the runs go (the lake's own temporary folder, so each run folder is one rename away), or in the
    // machine's temporary folder when the runs are uploaded. A killed process's stage is removed by the next open
    // (locally) or by the next scratch folder any lakeswap process makes on the machine (lakeswap-stage-<pid>-…).
    const stageParent = local ? this.store.localPath(this.options.stagingPrefix ?? ".lakeswap-staging") : await freshProcessFolder("lakeswap-stage-");
    const dir = path.join(stageParent, `${process.pid}-stage-${id}`);
    const remove = () => fs.rm(local ? dir : stageParent, { recursive: true, force: true });
    const runsTable = `runs_${id}`;
    const keys = table.partitionKeys;
    try {
      await fs.mkdir(dir, { recursive: true });
      const projection = table.columns
        .map((c) => `CAST(l.${quoteIdentifier(c.name)} AS ${duckdbStorageType(c.type)}) AS ${quoteIdentifier(c.name)}`)
        .join(", ");
      const keyList = keys.map(quoteIdentifier).join(", ");
      // DuckDB buffers every open partition's columns while it writes (a block of 256 KiB each): partitions go in
      // groups small enough that a group's buffers stay well inside the landing's memory limit, whatever N is.
      const perGroup = Math.max(4, Math.floor((await writeBufferBudget(connection)) / (table.columns.length + keys.length)));
      const partitions = which === "all" ? [] : which.partitions;
      const groups = which === "all" ? 1 : Math.ceil(partitions.length / perGroup);
      // Every partition of a group stays open to the end of its pass, so each run is one file (DuckDB's default, 100
      // open files, would close and reopen the files of a larger group: several files per run, each a footer to audit).
      await connection.run(`SET partitioned_write_max_open_files = ${(which === "all" ? perGroup : Math.min(perGroup, partitions.length)) + 1}`);
      // Every partition of the delivery in one group (a first load of a few partitions) needs no filter.
      const paths = partitions.map(partitionPath);
      const all = which === "all" || (groups === 1 && new Set(paths).size === which.ofDelivery);
      if (!all) {
        await connection.run(`CREATE TEMP TABLE ${runsTable} (__group INTEGER, ${keys.map((k) => `${quoteIdentifier(k)} VARCHAR`).join(", ")})`);
        for (let start = 0; start < partitions.length; start += 1000) {
          const values = partitions
            .slice(start, start + 1000)
            .map((partition, i) => `(${Math.floor((start + i) / perGroup)}, ${keys.map((key) => quoteLiteral(partitionValue(partition, key))).join(", ")})`);
          await connection.run(`INSERT INTO ${runsTable} VALUES ${values.join(", ")}`);
        }
      }
      try {
        for (let group = 0; group < groups; group += 1) {
          const where = all ? "" : ` WHERE (${keys.map((k) => `l.${quoteIdentifier(k)}`).join(", ")}) IN (SELECT (${keyList}) FROM ${runsTable} WHERE __group = ${group})`;
          try {
            // One pass over the delivery per group (one for most deliveries), each partition's files in its own Hive
            // folder (`day=2026-11-01/`; partition values were checked when landed: letters, digits, '_', '.', '-', so
            // the folder name is the value as it is).
            const compression = `COMPRESSION ${table.compression === "zstd" ? "zstd" : "snappy"}`;
            if (keys.length === 0) {
              // A table without partition keys: the whole relation is its one run, one file.
              await fs.mkdir(path.join(dir, "g0"));
              await connection.run(
                `COPY (SELECT ${projection} FROM ${quoteRelation(relation)} AS l) TO ${quoteLiteral(path.join(dir, "g0", "data_0.parquet"))} (FORMAT PARQUET, ${compression})`,
              );
              continue;
            }
            await connection.run(
              `COPY (SELECT ${projection}, ${keys.map((k) => `l.${quoteIdentifier(k)}`).join(", ")} FROM ${quoteRelation(relation)} AS l${where}) ` +
                `TO ${quoteLiteral(path.join(dir, `g${group}`))} (FORMAT PARQUET, PARTITION_BY (${keyList}), ${compression})`,
            );
          } catch (error) {
            throw new BuildError(`writing ${partitions.length} run(s) of ${table.name} failed: ${cleanDuckDbMessage(error)}`, error);
          }
        }
      } finally {
        await connection.run(`DROP TABLE IF EXISTS ${runsTable}`);
      }
      const groupOf = new Map(paths.map((p, index) => [p, Math.floor(index / perGroup)]));
      const folderOf = (partition: Partition): string => {
        const p = partitionPath(partition);
        return path.join(dir, `g${groupOf.get(p) ?? 0}`, ...p.split("/"));
      };
      return { folderOf, remove };
    } catch (error) {
      await remove();
      throw error;
    }
  }

  /** Moves one staged run folder's files into the run's own prefix: renamed into a fresh folder locally, uploaded otherwise. */
  private async placeRun(staged: string, run: LandedRunsRequest["runs"][number]): Promise<BuildResult> {
    const entries = await fs.readdir(staged).catch(() => [] as string[]);
    const names = entries.filter((name) => name.endsWith(".parquet")).sort();
    const fileNameOf = (index: number) => (names.length === 1 ? runFileName(run.runId) : runFileName(run.runId).replace(/\.parquet$/, `-${index}.parquet`));
    const local = this.store.capabilities.localPaths;
    const runDir = local ? this.store.localPath(run.runPrefix) : undefined;
    const files: { key: string; size: number }[] = [];
    if (runDir) {
      await fs.mkdir(path.dirname(runDir), { recursive: true });
      // A staged folder that holds only the run's files becomes the run's folder: no folder to make, none to remove
      // (on ext4, every new inode costs more while many were just freed). Exclusive, as a new folder is: a rename
      // would replace an empty folder, so the run's must not exist (run ids are fresh, and this writer holds the lease).
      if (names.length > 0 && names.length === entries.length) {
        const taken = await fs.lstat(runDir).then(() => true, (error: unknown) => !isCode(error, "ENOENT"));
        if (taken) throw new BuildError(`the run folder ${runDir} exists already; nothing was written into it`);
        for (const [index, name] of names.entries()) {
          const { size } = await fs.stat(path.join(staged, name));
          await fs.rename(path.join(staged, name), path.join(staged, fileNameOf(index)));
          files.push({ key: `${run.runPrefix}${fileNameOf(index)}`, size });
        }
        await fs.rename(staged, runDir);
        return { files };
      }
      // Exclusive: a run prefix is fresh or the build stops.
      await fs.mkdir(runDir);
    }
    for (const [index, name] of names.entries()) {
      const fileName = fileNameOf(index);
      const source = path.join(staged, name);
      const key = `${run.runPrefix}${fileName}`;
      const { size } = await fs.stat(source);
      if (runDir) await fs.rename(source, path.join(runDir, fileName));
      else await this.store.putFile(key, source);
      files.push({ key, size });
    }
    return { files };
  }

  /** Writes the footer of a remote Parquet file at its offset in a sparse local file of the file's size. */
  private async fetchFooter(file: { readonly key: string; readonly size: number }, localPath: string): Promise<string> {
    const trailer = 8; // footer length (4 bytes, little-endian) + "PAR1"
    if (file.size < 12) throw new AuditError(`the run file ${file.key} has ${file.size} bytes: too small to be Parquet; the pointer was not moved`);
    let length = Math.min(file.size, 64 * 1024);
    let tail = await this.store.getRange(file.key, file.size - length, length);
    const footer = Buffer.from(tail.subarray(tail.length - trailer));
    if (footer.subarray(4).toString("latin1") !== "PAR1") {
      throw new AuditError(`the run file ${file.key} does not end in a Parquet footer; the pointer was not moved`);
    }
    const needed = footer.readUInt32LE(0) + trailer;
    if (needed > file.size - 4) throw new AuditError(`the run file ${file.key} has a footer longer than the file; the pointer was not moved`);
    if (needed > length) {
      length = needed;
      tail = await this.store.getRange(file.key, file.size - length, length);
    }
    const handle = await fs.open(localPath, "w");
    try {
      await handle.truncate(file.size);
      await handle.write(Buffer.from("PAR1"), 0, 4, 0);
      await handle.write(tail, 0, tail.length, file.size - tail.length);
    } finally {
      await handle.close();
    }
    return localPath;
  }

  async countRows(_table: TableDefinition, run: PartitionSnapshot): Promise<number> {
    if (run.files.length === 0) return 0;
    if (!this.store.capabilities.localPaths) {
      throw new InvalidInputError("the DuckDB engine counts rows of a local lake only; in AWS mode Athena counts them");
    }
    const list = run.files.map((key) => quoteLiteral(this.store.localPath(key))).join(", ");
    return this.withConnection(async (connection) => {
      const reader = await connection.runAndReadAll(`SELECT count(*) FROM read_parquet([${list}], hive_partitioning = false)`);
      return Number(reader.getRows()[0]?.[0] ?? 0);
    });
  }

  async identify(patterns: readonly string[], known?: IdentifiedFiles): Promise<IdentifiedDelivery> {
    // Expanded without DuckDB: a resend of a known delivery may not need the engine at all.
    const files = await deliveryFiles(patterns);
    const states = await fileStates(files);
    if (known && settledAndUnchanged(known, files, states)) {
      this.identified.set(JSON.stringify(files), { states: states.map(stateText), id: known.id, hashedAt: known.hashedAt });
      return { files, id: known.id, identified: known, hashed: false };
    }
    // Hashed anew (not taken from this process's earlier hash): what is kept records when the files were read.
    const { id, hashedAt } = await this.deliveryId(files, true);
    return { files, id, identified: { files, states, id, hashedAt }, hashed: true };
  }

  /**
   * A delivery's id: a digest of its files' names and bytes, read once while
   * the files stay as they were (same inode, size, modification and change
   * times), however often it is asked for.
   */
  private async deliveryId(files: readonly string[], fresh = false): Promise<{ readonly id: string; readonly hashedAt: number }> {
    const states = (await fileStates(files)).map(stateText);
    const key = JSON.stringify(files);
    const known = this.identified.get(key);
    if (!fresh && known && sameStates(known.states, states)) return known;
    const hashedAt = clockNow();
    const id = await deliveryIdOf(files);
    const after = (await fileStates(files)).map(stateText);
    assertUnchanged(files, states, after, "while its id was computed");
    this.identified.set(key, { states, id, hashedAt });
    return { id, hashedAt };
  }

  async land(request: LandRequest): Promise<LandedDelivery> {
    const id = randomBytes(6).toString("hex");
    // Partition expressions are users' SQL run where the delivery is read: exactly one expression each, no subquery.
    const partition: LandRequest["partition"][number][] = [];
    for (const { key, expression } of request.partition) {
      partition.push({ key, expression: await assertOneExpression(expression, `partition expression of '${key}'`) });
    }
    const files = await deliveryFiles(request.files);
    const catalog = await this.landingCatalog(request.format, files);
    const tables = { landed: `${catalog}landed_${id}`, rejected: `${catalog}rejected_${id}` };
    return this.withConnection(async (connection) => {
      try {
        // Named before it is read, and checked unchanged after: the id then names exactly the rows landed.
        const id = request.id ?? (await this.deliveryId(files)).id;
        const states = (await fileStates(files)).map(stateText);
        await landDelivery(connection, { ...request, partition, files }, tables);
        const keys = request.partition.map((p) => p.key);
        const signed = signatureColumnOrder(request.columns.filter((c) => request.signatureColumns.includes(c.name)));
        const signing = await this.signing();
        // The bad rows are few and already apart: counted first, so that a clean delivery's runs can be written ahead.
        const rejected = Number((await connection.runAndReadAll(`SELECT count(*) FROM ${tables.rejected}`)).getRowsJS()[0]?.[0] ?? 0);
        const writeAhead = request.writeAhead && rejected === 0 ? request.writeAhead : undefined;
        const sign = () => connection.runAndReadAll(signatureQuery(tables.landed, keys, signed, signing.form));
        // Signed and, written ahead, written at once, on two connections: the write alone leaves cores idle.
        const [signature, written] = await Promise.allSettled([
          writeAhead ? Promise.resolve().then(() => faultPoint("signing-beside-write-ahead")).then(sign) : sign(),
          writeAhead ? this.withConnection((writer) => this.writeStage(writer, writeAhead, tables.landed, "all")) : undefined,
        ]);
        if (written.status === "fulfilled" && written.value && writeAhead) {
          this.writtenAhead.set(tables.landed, { definition: tableShape(writeAhead), stage: written.value });
        }
        // A write ahead that failed (out of memory beside the signature, say) is only not used: the runs are then
        // written when they are built, where a failure is the build's. The two share the memory limit, and the write
        // of thousands of partitions holds most of it: a signature that ran out of memory beside it is taken again,
        // alone (a delivery of 2,500 partitions at 32 MB failed so about one time in four).
        if (signature.status === "rejected" && !(writeAhead && outOfMemory(signature.reason))) throw signature.reason;
        const reader = signature.status === "fulfilled" ? signature.value : await sign();
        // (A table without partition keys is one group, which has a row even for an empty delivery: it then has no partition.)
        const partitions: LandedPartition[] = reader.getRowsJS().filter((row) => Number(row[keys.length]) > 0).map((row) => {
          const rows = Number(row[keys.length]);
          return {
            partition: partitionOfValues(keys, row),
            rows,
            signature: finishRawSignature(signed, rows, BigInt(String(row[keys.length + 1])), BigInt(String(row[keys.length + 2]))),
            lanes: { upper: laneText(row[keys.length + 1]), lower: laneText(row[keys.length + 2]) },
          };
        });
        // The good rows are the partitions' rows (no second pass over a delivery read in place); the bad ones are few.
        const loaded = partitions.reduce((sum, p) => sum + p.rows, 0);
        const first = await connection.runAndReadAll(`SELECT file, line, reason, raw FROM ${tables.rejected} ORDER BY file, line LIMIT 5`);
        const firstRejects: RejectedRow[] = first.getRowsJS().map(([file, line, reason, raw]) => ({
          file: String(file),
          line: line === null ? null : Number(line),
          reason: String(reason),
          raw: raw === null ? null : String(raw),
        }));
        assertUnchanged(files, states, (await fileStates(files)).map(stateText), "while it was landed");
        this.landedStates.set(tables.landed, { files, states });
        return {
          files,
          id,
          relation: tables.landed,
          rejectedRelation: tables.rejected,
          rowsRead: loaded + rejected,
          rowsLoaded: loaded,
          rowsRejected: rejected,
          firstRejects,
          partitions,
          signing,
        };
      } catch (error) {
        await this.dropWrittenAhead(tables.landed);
        await dropLanding(connection, tables);
        throw error;
      }
    });
  }

  async mergeLanded(request: MergeRequest): Promise<LandedDelivery> {
    const relations = mergeRelations(randomBytes(6).toString("hex"));
    const keysOf = request.current.flatMap((run) => run.files);
    // DuckDB reads local files: an S3 lake's current runs are copied to a temporary folder first (every partition: a key may move).
    const scratch = this.store.capabilities.localPaths ? undefined : await freshProcessFolder("lakeswap-merge-");
    const localFiles = new Map<string, string>();
    try {
      await mapLimited(keysOf, 8, async (key, index) => {
        if (!scratch) return void localFiles.set(key, this.store.localPath(key));
        const object = await this.store.get(key);
        if (!object) throw new AuditError(`the run file ${key} is missing from the store; nothing was merged`);
        const local = path.join(scratch, `${index}.parquet`);
        await fs.writeFile(local, object.body);
        localFiles.set(key, local);
      });
      const partitions = await this.withConnection(async (connection) => {
        try {
          return await mergeDelivery(connection, request, relations, localFiles, (await this.signing()).form);
        } catch (error) {
          await dropMerge(connection, relations);
          throw error;
        }
      });
      // The delivery, where it is read in place, was read again: what was merged is what was signed only if its files did not change.
      const landed = this.landedStates.get(request.delivery.relation);
      if (landed) assertUnchanged(landed.files, landed.states, (await fileStates(landed.files)).map(stateText), "after it was landed, while it was merged");
      this.merges.set(relations.merged, { relations, scratch });
      return { ...request.delivery, relation: relations.merged, partitions };
    } catch (error) {
      if (scratch) await fs.rm(scratch, { recursive: true, force: true });
      throw error;
    }
  }

  async releaseLanding(delivery: LandedDelivery): Promise<void> {
    const merge = this.merges.get(delivery.relation);
    if (merge) {
      this.merges.delete(delivery.relation);
      await this.withConnection((connection) => dropMerge(connection, merge.relations));
      if (merge.scratch) await fs.rm(merge.scratch, { recursive: true, force: true });
      return;
    }
    this.landedStates.delete(delivery.relation);
    await this.dropWrittenAhead(delivery.relation);
    await this.withConnection((connection) => dropLanding(connection, { landed: delivery.relation, rejected: delivery.rejectedRelation }));
  }

  /** Removes the files written ahead for a landed delivery that no run took. */
  private async dropWrittenAhead(relation: string): Promise<void> {
    const ahead = this.writtenAhead.get(relation);
    this.writtenAhead.delete(relation);
    await ahead?.stage.remove();
  }

    async mapPartitions(request: PartitionMapRequest): Promise<string[][]> {
    if (request.values.length === 0) return [];
    const rows = request.values.map((values) => `(${values.map(quoteLiteral).join(", ")})`).join(", ");
    const columns = request.fromKeys.map(quoteIdentifier).join(", ");
    const expressions: string[] = [];
    for (const { key, expression } of request.map) expressions.push(`CAST((${await assertOneExpression(expression, `inputs.map expression of '${key}'`)}) AS VARCHAR) AS ${quoteIdentifier(key)}`);
    const select = expressions.join(", ");
    return this.withConnection(async (connection) => {
      try {
        const reader = await connection.runAndReadAll(`SELECT ${select} FROM (VALUES ${rows}) AS upstream(${columns})`);
        return reader.getRowsJS().map((row) => row.map((value) => (value === null ? "" : String(value))));
      } catch (error) {
        throw new InvalidInputError(`a partition map expression failed: ${cleanDuckDbMessage(error)}`);
      }
    }, { user: [] });
  }

  /** How this engine computes content signatures, and why in the SQL form when it does (./duckdb-open.ts). */
  async signing(): Promise<Signing> {
    return (await this.opened()).signing;
  }

  async close(): Promise<void> {
    // Stop queries in flight first (Ctrl-C): closing an instance waits for them.
    for (const connection of this.connections) connection.interrupt();
    const instance = this.instance;
    const restricted = [...this.restricted.values()];
    this.instance = undefined;
    this.memoryLimit = undefined;
    this.restricted.clear();
    // An instance that failed to open has nothing to close (its error was thrown where it was first needed).
    if (instance) await (await instance.catch(() => undefined))?.close();
    await Promise.all(restricted.map(async (opened) => (await opened.catch(() => undefined))?.close()));
  }

  /**
   * Where a delivery's landed tables go, as a prefix of their names: the landing's in-memory database when the
   * delivery fits well within the memory limit (a text delivery of at most a quarter of it; a Parquet delivery is
   * read in place, its tables hold only its bad rows), else the database file, which keeps big tables compressed on
   * disk. Both spill past the limit; the in-memory one costs no write to the file and its log.
   */
  private async landingCatalog(format: LandRequest["format"], files: readonly string[]): Promise<string> {
    const { memoryCatalog } = await this.opened();
    if (memoryCatalog === undefined) return "";
    if (format === "parquet") return `${memoryCatalog}.`;
    this.memoryLimit ??= this.withConnection(async (connection) => {
      const reader = await connection.runAndReadAll(`SELECT current_setting('memory_limit')`);
      return parseByteSize(String(reader.getRows()[0]?.[0] ?? "")) ?? 0;
    });
    const limit = await this.memoryLimit;
    const sizes = await Promise.all(files.map(async (file) => (await fs.stat(file).catch(() => undefined))?.size ?? Infinity));
    return sizes.reduce((sum, size) => sum + size, 0) <= limit / 4 ? `${memoryCatalog}.` : "";
  }

  private opened(): Promise<OpenedDuckDb> {
    this.instance ??= openDuckDb({ native: this.options.nativeSignatures ?? true, spill: true });
    return this.instance;
  }

  /**
   * The instance that runs users' SQL over these tables: it reads and writes only their folders in
   * the lake (not the lake's metadata, not other tables, not the working folder; ./duckdb-open.ts).
   * Opened once per set of tables and kept until close.
   */
  private restrictedInstance(tables: readonly string[]): Promise<DuckDBInstance> {
    const folders = this.store.capabilities.localPaths ? [...new Set(tables)].sort().map((table) => this.store.localPath(`${table}/`)) : [];
    const key = folders.join("\n");
    let opened = this.restricted.get(key);
    if (!opened) {
      opened = openRestrictedDuckDb(folders);
      this.restricted.set(key, opened);
    }
    return opened.then((restricted) => restricted.instance);
  }

  /**
   * Runs `work` on a connection of its own, so builds of several partitions can run at once: of the
   * landing instance (lakeswap's own SQL: landing, signatures, landed builds, counts), or with
   * `"user"`, of the restricted instance that runs users' SQL.
   */
  private async withConnection<T>(work: (connection: DuckDBConnection) => Promise<T>, instance: "landing" | { readonly user: readonly string[] } = "landing"): Promise<T> {
    const connection = await (instance === "landing" ? (await this.opened()).instance : await this.restrictedInstance(instance.user)).connect();
    this.connections.add(connection);
    try {
      return await work(connection);
    } finally {
      this.connections.delete(connection);
      connection.closeSync();
    }
  }

  private async describe(connection: DuckDBConnection, select: string): Promise<string[]> {
    try {
      const reader = await connection.runAndReadAll(`SELECT * FROM (${select}) AS q LIMIT 0`);
      return reader.columnNames();
    } catch (error) {
      throw new BuildError(`the SELECT failed: ${cleanDuckDbMessage(error)}`, error);
    }
  }

  /** Makes every lake table a view over the files of its current runs, partition columns last. */
  private async registerViews(connection: DuckDBConnection, sources: readonly TableSnapshot[]): Promise<void> {
    if (!this.store.capabilities.localPaths) return;
    for (const { table, partitions } of sources) {
      const sql = partitions.length === 0 ? emptyView(table) : partitions
        .map((p) => {
          const files = p.files.map((key) => quoteLiteral(this.store.localPath(key))).join(", ");
          const columns = table.columns.map((c) => quoteIdentifier(c.name)).join(", ");
          const keys = table.partitionKeys
            .map((key) => `, CAST(${quoteLiteral(partitionValue(p.partition, key))} AS VARCHAR) AS ${quoteIdentifier(key)}`)
            .join("");
          return `SELECT ${columns}${keys} FROM read_parquet([${files}], hive_partitioning = false)`;
        })
        .join(" UNION ALL ");
      await connection.run(`CREATE OR REPLACE TEMP VIEW ${quoteIdentifier(table.name)} AS ${sql}`);
    }
  }
}


/** Bytes read at a time to hash a delivery. */
const HASH_CHUNK_BYTES = 4 * 1024 * 1024;

/** A delivery's id: a digest of its files' names and contents, so a rerun of the same delivery gets the same id. */
/** Files written in a stage folder, one folder per partition, removed once their runs are placed. */
interface Stage {
  /** The folder of a partition's files (perhaps none, for a partition without rows). */
  folderOf(partition: Partition): string;
  remove(): Promise<void>;
}

/** What a stage's files were written for: a table's columns, partition keys and compression. */
function tableShape(table: TableDefinition): string {
  return JSON.stringify([table.columns.map((c) => [c.name, duckdbStorageType(c.type)]), table.partitionKeys, table.compression ?? ""]);
}

async function deliveryIdOf(files: readonly string[]): Promise<string> {
  const hash = createHash("sha256");
  const buffer = Buffer.allocUnsafe(HASH_CHUNK_BYTES);
  for (const file of [...files].sort()) {
    hash.update(`${path.basename(file)}\n`);
    const handle = await fs.open(file, "r");
    try {
      for (;;) {
        const { bytesRead } = await handle.read(buffer, 0, buffer.length, null);
        if (bytesRead === 0) break;
        hash.update(buffer.subarray(0, bytesRead));
      }
    } finally {
      await handle.close();
    }
    hash.update("\n");
  }
  return `d${hash.digest("hex").slice(0, 16)}`;
}

/**
 * What tells a file's contents unchanged without reading them: its device and
 * inode, size, and modification and change times in nanoseconds (a write
 * moves both times; a file replaced by another has another inode).
 */
async function fileStates(files: readonly string[]): Promise<FileState[]> {
  return Promise.all(
    files.map(async (file) => {
      const s = await fs.stat(file, { bigint: true }).catch(() => undefined);
      if (!s) return { dev: "", ino: "", size: "missing", mtimeNs: "", ctimeNs: "" };
      return { dev: String(s.dev), ino: String(s.ino), size: String(s.size), mtimeNs: String(s.mtimeNs), ctimeNs: String(s.ctimeNs) };
    }),
  );
}

function stateText(state: FileState): string {
  return `${state.dev}:${state.ino}:${state.size}:${state.mtimeNs}:${state.ctimeNs}`;
}

/**
 * How long before it was hashed a file must have last changed for its id to be
 * reused on its states alone: longer than any file system's timestamp
 * granularity (FAT: 2 s), so that a write after the hash moves the change time.
 */
const SETTLED_MS = 3000;

/** Whether `known` names these very files, unchanged since they were hashed, and settled when they were. */
function settledAndUnchanged(known: IdentifiedFiles, files: readonly string[], states: readonly FileState[]): boolean {
  if (!Array.isArray(known.files) || !Array.isArray(known.states) || typeof known.id !== "string" || typeof known.hashedAt !== "number") return false;
  if (known.files.length !== files.length || known.files.some((file, i) => file !== files[i])) return false;
  return states.every((state, i) => {
    const before = known.states[i];
    if (!before || stateText(before) !== stateText(state) || state.size === "missing") return false;
    const changedMs = Number(BigInt(state.ctimeNs) / 1_000_000n);
    const modifiedMs = Number(BigInt(state.mtimeNs) / 1_000_000n);
    return Math.max(changedMs, modifiedMs) < known.hashedAt - SETTLED_MS;
  });
}

function sameStates(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((state, i) => state === b[i]);
}

/** Refuses a delivery whose files changed between two reads: what was read may mix two versions of a file. */
function assertUnchanged(files: readonly string[], before: readonly string[], after: readonly string[], when: string): void {
  const changed = files.filter((_, i) => before[i] !== after[i]);
  if (changed.length === 0) return;
  throw new InvalidInputError(
    `the delivery file ${changed.slice(0, 3).join(", ")}${changed.length > 3 ? ` and ${changed.length - 3} more` : ""} changed ${when}; ` +
      "nothing of it was loaded. Deliver files by writing them elsewhere and moving them into place when complete, then rerun",
  );
}

function emptyView(table: TableDefinition): string {
  const columns = table.columns.map((c) => `CAST(NULL AS ${duckdbStorageType(c.type)}) AS ${quoteIdentifier(c.name)}`);
  const keys = table.partitionKeys.map((key) => `CAST(NULL AS VARCHAR) AS ${quoteIdentifier(key)}`);
  return `SELECT ${[...columns, ...keys].join(", ")} WHERE false`;
}

/** A user's SELECT, refused when it is empty or is several statements. */
async function checkedSelect(select: string): Promise<string> {
  return assertOneSelect(select, "the SQL");
}

function cleanDuckDbMessage(error: unknown): string {
  return errorMessage(error).replace(/\s+/g, " ").trim();
}

/** A lane sum as decimal text, modulo 2^64 (as `finishRawSignature` reduces it). */
function laneText(value: unknown): string {
  return (BigInt(String(value)) % (1n << 64n)).toString();
}
