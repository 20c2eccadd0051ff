import { promises as fs } from "node:fs";
import { randomBytes } from "node:crypto";
import type { DuckDBConnection } from "@duckdb/node-api";
import { InvalidInputError } from "../../model/errors.js";
import { quoteFilePath, quoteIdentifier, quoteLiteral } from "../../model/sql.js";
import { duckdbStorageType } from "../../model/column-types.js";
import type { TableDefinition } from "../../model/table.js";
import { faultPoint } from "../../shared/faults.js";
import { mapLimited } from "../../shared/map-limited.js";
import type { ObjectStore } from "../../store/object-store.js";
import { cleanDuckDbMessage } from "../../duckdb/duckdb-text.js";
import { SharedDuckDb } from "../../duckdb/shared-duckdb.js";
import { fileAccessFor, type FileAccess } from "../../engine/duckdb-file-access.js";
import { buildRun } from "../../engine/duckdb-run.js";
import { assertOneExpression, assertOneSelect, serializedParseTree } from "../../engine/sql-guard.js";
import { deliveryFiles } from "../delivery-files.js";
import { compactRun } from "./compact-run.js";
import { isGzipFile, type GunzippedDelivery } from "./gunzipped-files.js";
import type {
  AuditRunsRequest, CompactRunRequest, DifferencePartsRequest, IdentifiedDelivery, IdentifiedFiles, LandRequest, LandedDelivery, LandedFile, LandedRun, LandedRunsRequest, Landing, MergeRequest, PartDifference, PartitionMapRequest, Signing, SplitPart, SplitPartsRequest, StagedCompaction,
} from "../landing.js";
import type { BuildRequest, BuildResult } from "../../model/build.js";
import { DeliveryIds, assertStillAsRead, fileStateTexts, sameStates, type ReadFiles } from "./delivery-identity.js";
import { streamedCsv, type StreamedCsv } from "./csv-stream.js";
import { tableShape, writeStage, type Stage, type StagedFile } from "./stage.js";
import { splitParts } from "./split-parts.js";
import { differenceParts } from "./difference-parts.js";
import { writeLandedFiles, writeRejected } from "./landed-output.js";
import { tablesOfParseTree } from "./landing-queries.js";
import { countFooterRows } from "../parquet-footers.js";
import { landAndSign, type WrittenAhead } from "./land-and-sign.js";
import { dropLanding } from "./landing-relations.js";
import type { AuditFinding } from "../../model/audit.js";
import { RunAuditor } from "./audit-runs.js";
import { dropMerge, mergeDelivery, mergeRelations, type MergeRelations } from "./duckdb-merge.js";

/** Scans read ahead and not (yet) taken that a landing keeps: a delivery known by its id is identified and never landed. */
const MAX_SCANS_AHEAD = 4;

/** What a CSV scan depends on (./csv-stream.ts): the files, and how their first lines are read. */
function scanKey(request: LandRequest): string {
  return JSON.stringify([request.files, request.header, request.delimiter, request.columns]);
}

/**
 * The landing with DuckDB, in process, for every lake (embedded or on AWS): a delivery is read, validated,
 * partitioned and signed once (./land-delivery.ts), and the runs of the partitions that changed are written from it
 * in one pass (./stage.ts), in place or uploaded (../../engine/duckdb-file-access.ts). It shares its DuckDB with the
 * embedded lake's engine; users' SQL (partition maps) runs in an instance that reaches no file.
 */
export class DuckDbLanding implements Landing {
  private readonly duckdb: SharedDuckDb;
  private readonly files: FileAccess;
  private readonly ids: DeliveryIds;
  /** The files each landed delivery was read with (by relation), checked again after every later pass over them. */
  private readonly landedFiles = new Map<string, ReadFiles>();
  /** The stages written while deliveries were landed (by relation, see `LandRequest.writeAhead`). */
  private readonly writtenAhead = new Map<string, WrittenAhead>();
  /** The merges made (by merged relation): their relations, and how to free the copies of an S3 lake's current files. */
  private readonly merges = new Map<string, { readonly relations: MergeRelations; release(): Promise<void> }>();
  /** CSV deliveries scanned while they were identified (`scanAhead`), by what the scan reads, with their files' states before it. */
  private readonly scans = new Map<string, { readonly states: readonly string[]; readonly scan: Promise<StreamedCsv | undefined> }>();
  /** The decompressed files of landed deliveries that came gzip-compressed (by relation), removed as they are released. */
  private readonly gunzipped = new Map<string, GunzippedDelivery>();
  /** The data audits of staged runs, made on first use. */
  private auditor: RunAuditor | undefined;

  /**
   * `options.duckdb`: the DuckDB shared with the lake's engine (../../engine/duckdb-engine.ts); by default one of its
   * own. `options.stagingPrefix`: where, in a store with local paths, runs are staged before each is renamed into
   * place (../../engine/duckdb-file-access.ts). `options.hashThreadMinBytes`: the size from which a delivery identified
   * with a read ahead is hashed on a thread of its own, where a test wants another than the default (./delivery-identity.ts).
   */
  constructor(
    private readonly store: ObjectStore,
    options: { readonly duckdb?: SharedDuckDb; readonly stagingPrefix?: string; readonly hashThreadMinBytes?: number } = {},
  ) {
    this.duckdb = options.duckdb ?? new SharedDuckDb();
    this.ids = new DeliveryIds(options.hashThreadMinBytes);
    this.files = fileAccessFor(store, { stagingPrefix: options.stagingPrefix });
  }

  async identify(patterns: readonly string[], known?: IdentifiedFiles, readAhead?: LandRequest): Promise<IdentifiedDelivery> {
    // A CSV delivery's scan (./csv-stream.ts) is what landing reads first; other formats have none to read ahead.
    return this.ids.identify(patterns, known, readAhead?.format === "csv" ? (files) => this.scanAhead({ ...readAhead, files }) : undefined);
  }

  /** Scans a CSV delivery as landing it begins with (./csv-stream.ts), for `land` to take; its files' states first. */
  private async scanAhead(request: LandRequest): Promise<void> {
    // A compressed delivery is scanned once it is decompressed, as it is landed.
    if (request.files.some(isGzipFile)) return;
    const states = await fileStateTexts(request.files);
    const scan = streamedCsv(request);
    // Its failure is landing's to report, if the delivery is landed at all (a known one is not).
    const settled = scan.then(() => undefined, () => undefined);
    this.scans.set(scanKey(request), { states, scan });
    for (const key of this.scans.keys()) if (this.scans.size > MAX_SCANS_AHEAD) this.scans.delete(key);
    await settled;
  }

  /** The scan read ahead of `request`'s files (taken once), if they are as they were before it. */
  private takeScan(request: LandRequest, read: ReadFiles): Promise<StreamedCsv | undefined> | undefined {
    const key = scanKey(request);
    const ahead = this.scans.get(key);
    this.scans.delete(key);
    return ahead && sameStates(ahead.states, read.states) ? ahead.scan : undefined;
  }

  async land(request: LandRequest): Promise<LandedDelivery> {
    const relationId = randomBytes(6).toString("hex");
    // Partition expressions are users' SQL run where the delivery is read: exactly one expression each, no subquery.
    const partition: LandRequest["partition"][number][] = [];
    for (const { key, expression } of request.partition) {
      partition.push({ key, expression: await assertOneExpression(expression, `partition expression of '${key}'`) });
    }
    const files = await deliveryFiles(request.files);
    const catalog = await this.landingCatalog(request.format, files);
    const tables = { landed: `${catalog}landed_${relationId}`, rejected: `${catalog}rejected_${relationId}` };
    // Every partition of a relation into a stage, on `writer`: written ahead (a connection of its own), or first (the landing's).
    const stageAll = async (writer: DuckDBConnection, table: TableDefinition, relation: string): Promise<Stage> =>
      writeStage(writer, this.files, table, relation, "all", await this.duckdb.memoryLimitBytes());
    return this.duckdb.withConnection(async (connection) => {
      try {
        const { delivery, read, gunzipped } = await landAndSign(connection, { ...request, partition, files }, tables, {
          ids: this.ids,
          signing: () => this.duckdb.signing(),
          writeAhead: (table) => this.duckdb.withConnection((writer) => stageAll(writer, table, tables.landed)),
          writeFirst: stageAll,
          wroteAhead: (ahead) => this.writtenAhead.set(tables.landed, ahead),
          scanned: (landed, read) => this.takeScan(landed, read),
        });
        this.landedFiles.set(tables.landed, read);
        if (gunzipped) this.gunzipped.set(tables.landed, gunzipped);
        return delivery;
      } catch (error) {
        await this.dropWrittenAhead(tables.landed);
        await dropLanding(connection, tables);
        throw error;
      }
    });
  }

  async mergeLanded(request: MergeRequest): Promise<LandedDelivery> {
    const relations = mergeRelations(randomBytes(6).toString("hex"));
    const keys = request.current.flatMap((run) => run.files);
    // DuckDB reads local files: an S3 lake's current runs are copied to a temporary folder first (every partition: a key may move).
    const readable = await this.files.readable(keys, "merge");
    try {
      const localFiles = new Map(keys.map((key, index) => [key, readable.paths[index] ?? key]));
      const form = (await this.duckdb.signing()).form;
      const partitions = await this.duckdb.withConnection(async (connection) => {
        try {
          return await mergeDelivery(connection, request, relations, localFiles, form);
        } catch (error) {
          await dropMerge(connection, relations);
          throw error;
        }
      });
      // The delivery, where it is read in place, was read again: what was merged is what was signed only if its files did not change.
      const landed = this.landedFiles.get(request.delivery.relation);
      if (landed) await assertStillAsRead(landed, "after it was landed, while it was merged");
      this.merges.set(relations.merged, { relations, release: readable.release });
      return { ...request.delivery, relation: relations.merged, partitions };
    } catch (error) {
      await readable.release();
      throw error;
    }
  }

  async splitParts(request: SplitPartsRequest): Promise<SplitPart[]> {
    return this.duckdb.withConnection((connection) => splitParts(connection, request, request.delivery.signing, request.keys));
  }

  async differenceParts(request: DifferencePartsRequest): Promise<PartDifference[]> {
    const keys = [...new Set(request.parts.flatMap((p) => p.current))];
    // DuckDB reads local files: an S3 lake's current runs are copied to a temporary folder first (as a merge reads them).
    const readable = await this.files.readable(keys, "difference");
    try {
      const localFiles = new Map(keys.map((key, index) => [key, readable.paths[index] ?? key]));
      return await this.duckdb.withConnection((connection) => differenceParts(connection, request, localFiles));
    } finally {
      await readable.release();
    }
  }

  async releaseLanding(delivery: LandedDelivery): Promise<void> {
    const merge = this.merges.get(delivery.relation);
    if (merge) {
      this.merges.delete(delivery.relation);
      await this.duckdb.withConnection((connection) => dropMerge(connection, merge.relations));
      await merge.release();
      return;
    }
    this.landedFiles.delete(delivery.relation);
    await this.dropWrittenAhead(delivery.relation);
    await this.duckdb.withConnection((connection) => dropLanding(connection, { landed: delivery.relation, rejected: delivery.rejectedRelation }));
    // The decompressed files go once nothing reads them (a landed CSV may be a view over them).
    const gunzipped = this.gunzipped.get(delivery.relation);
    this.gunzipped.delete(delivery.relation);
    await gunzipped?.remove();
  }

  async writeLandedRuns(request: LandedRunsRequest): Promise<BuildResult[]> {
    const { table, delivery, runs } = request;
    if (runs.length === 0) return [];
    const ahead = this.writtenAhead.get(delivery.relation);
    this.writtenAhead.delete(delivery.relation);
    // Written ahead for this table as it is now (the stage holds every partition of the delivery), or written here.
    const usable = ahead !== undefined && ahead.definition === tableShape(table) && runs.every((run) => run.files === undefined);
    if (ahead && !usable) await ahead.stage.remove();
    const memoryLimit = usable ? 0 : await this.duckdb.memoryLimitBytes();
    const stage = usable
      ? ahead.stage
      : await this.duckdb.withConnection((connection) =>
          writeStage(connection, this.files, table, delivery.relation, { partitions: runs.map((run) => run.partition), ofDelivery: delivery.partitions.length, files: filePositions(delivery, runs) }, memoryLimit),
        );
    try {
      // A delivery read in place was read again: the runs hold what was signed only if its files did not change since.
      const landed = this.landedFiles.get(delivery.relation);
      if (landed) await assertStillAsRead(landed, "after it was landed, before its runs were written");
      faultPoint("during-build");
      return await mapLimited(runs, this.files.placeConcurrency, (run) => this.files.placeRun(stage.folderOf(run.partition), run));
    } finally {
      await stage.remove();
    }
  }

  async writeLandedFiles(request: { readonly table: TableDefinition; readonly delivery: LandedDelivery; readonly dir: string }): Promise<LandedFile[]> {
    return this.duckdb.withConnection((connection) => writeLandedFiles(connection, request));
  }

  async writeRejected(request: Parameters<Landing["writeRejected"]>[0]): Promise<number> {
    if (request.delivery.rowsRejected === 0) return 0;
    return this.duckdb.withConnection((connection) => writeRejected(connection, request));
  }

  /** Builds from a landed delivery's relations, which live in the landing instance. */
  async buildLanded(request: BuildRequest): Promise<BuildResult> {
    return this.duckdb.withConnection((connection) => buildRun(connection, request, this.files));
  }

  async mapPartitions(request: PartitionMapRequest): Promise<string[][]> {
    if (request.values.length === 0) return [];
    const rows = request.values.map((values) => `(${values.map(quoteLiteral).join(", ")})`).join(", ");
    const columns = request.fromKeys.map(quoteIdentifier).join(", ");
    const expressions: string[] = [];
    for (const { key, expression } of request.map) expressions.push(`CAST((${await assertOneExpression(expression, `inputs.map expression of '${key}'`)}) AS VARCHAR) AS ${quoteIdentifier(key)}`);
    const select = expressions.join(", ");
    // Users' expressions, over the rows given here: in an instance that runs users' SQL.
    return this.duckdb.withConnection(async (connection) => {
      try {
        const reader = await connection.runAndReadAll(`SELECT ${select} FROM (VALUES ${rows}) AS upstream(${columns})`);
        return reader.getRowsJS().map((row) => row.map((value) => (value === null ? "" : String(value))));
      } catch (error) {
        throw new InvalidInputError(`a partition map expression failed: ${cleanDuckDbMessage(error)}`);
      }
    }, "expressions");
  }

  async tablesRead(select: string): Promise<string[] | undefined> {
    // Exactly one SELECT first (InvalidInputError otherwise), so a pipeline refuses it before it builds anything.
    select = await assertOneSelect(select, "the SQL");
    return tablesOfParseTree(await serializedParseTree(select));
  }

  async countFileRows(files: readonly { readonly key: string; readonly size: number }[]): Promise<number[]> {
    return countFooterRows(this.store, files);
  }

  async compactFiles(request: { readonly table: TableDefinition; readonly files: readonly string[]; readonly targetKey: string }): Promise<{ readonly key: string; readonly size: number }> {
    const { table } = request;
    const sources = await this.files.readable(request.files, "compact");
    try {
      const target = await this.files.newFile(request.targetKey);
      const projection = table.columns.map((c) => `CAST(${quoteIdentifier(c.name)} AS ${duckdbStorageType(c.type)}) AS ${quoteIdentifier(c.name)}`).join(", ");
      try {
        await this.duckdb.withConnection((connection: DuckDBConnection) =>
          connection.run(
            `COPY (SELECT ${projection} FROM read_parquet([${sources.paths.map(quoteFilePath).join(", ")}], hive_partitioning = false)) TO ${quoteLiteral(target.path)} ` +
              `(FORMAT PARQUET, COMPRESSION ${table.compression === "zstd" ? "zstd" : "snappy"})`,
          ),
        );
        const { size } = await fs.stat(target.path);
        await target.publish();
        return { key: request.targetKey, size };
      } catch (error) {
        await target.discard();
        throw error;
      }
    } finally {
      await sources.release();
    }
  }

  async compactRun(request: CompactRunRequest): Promise<StagedCompaction> {
    return compactRun({ withConnection: (work) => this.duckdb.withConnection(work), files: this.files, signing: () => this.signing() }, request);
  }

  /** How this landing computes content signatures, and why in the SQL form when it does (../../duckdb/duckdb-open.ts). */
  async signing(): Promise<Signing> {
    return this.duckdb.signing();
  }

  async auditRuns(request: AuditRunsRequest): Promise<AuditFinding[]> {
    this.auditor ??= new RunAuditor(this.duckdb, this.files);
    return this.auditor.audit(request);
  }

  prepare(partitionExpressions: readonly string[] = []): void {
    this.duckdb.prepareLanding();
    // Checked once a process (the answer is kept): `land` then finds them checked rather than wait for the parser.
    for (const expression of partitionExpressions) assertOneExpression(expression, "a partition expression").catch(() => undefined);
  }

  /** Stops queries in flight and closes the DuckDB (shared with the engine: closing it twice is harmless). */
  async close(): Promise<void> {
    await this.auditor?.close();
    await this.duckdb.close();
  }

  /** Removes the files written ahead for a landed delivery that no run took. */
  private async dropWrittenAhead(relation: string): Promise<void> {
    const ahead = this.writtenAhead.get(relation);
    this.writtenAhead.delete(relation);
    await ahead?.stage.remove();
  }

  /**
   * Where a delivery's landed tables go, as a prefix of their names: the landing's in-memory database when the
   * delivery fits well within the memory limit (a text delivery of at most a quarter of it; a Parquet delivery is
   * read in place, its tables hold only its bad rows), else the database file, which keeps big tables compressed on
   * disk. Both spill past the limit; the in-memory one costs no write to the file and its log.
   */
  private async landingCatalog(format: LandRequest["format"], files: readonly string[]): Promise<string> {
    const memoryCatalog = await this.duckdb.memoryCatalog();
    if (memoryCatalog === undefined) return "";
    if (format === "parquet") return `${memoryCatalog}.`;
    const limit = await this.duckdb.memoryLimitBytes();
    // A compressed file's size says little of its rows: it is landed where DuckDB may spill.
    const sizes = await Promise.all(files.map(async (file) => (isGzipFile(file) ? Infinity : ((await fs.stat(file).catch(() => undefined))?.size ?? Infinity))));
    return sizes.reduce((sum, size) => sum + size, 0) <= limit / 4 ? `${memoryCatalog}.` : "";
  }
}

/**
 * The files each run takes rows from, as positions in the delivery's files (from 1), where some run takes only some
 * (`LandedRun.files`: an append of a delivery some of whose files a partition holds already); undefined where every run
 * takes every file's rows.
 */
function filePositions(delivery: LandedDelivery, runs: readonly LandedRun[]): StagedFile[][] | undefined {
  if (runs.every((run) => run.files === undefined)) return undefined;
  const every = delivery.files.map((_, index) => ({ file: index + 1 }));
  return runs.map((run) =>
    run.files === undefined
      ? every
      : run.files.map((file) => {
          const position = delivery.files.indexOf(file);
          if (position < 0) throw new Error(`the file ${file} is not one of delivery ${delivery.id}'s`);
          const after = run.after?.[file];
          const retaken = run.retaken?.[file];
          return after === undefined ? { file: position + 1 } : { file: position + 1, after, ...(retaken ? { retaken } : {}) };
        }),
  );
}
