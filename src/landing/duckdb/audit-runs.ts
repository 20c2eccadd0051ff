import { promises as fs } from "node:fs";
import type { DuckDBConnection } from "@duckdb/node-api";
import { AUDIT_SAMPLE_ROWS, type AuditCheck, type AuditFinding, type AuditSpec, type AuditValue } from "../../model/audit.js";
import { duckdbStorageType } from "../../model/column-types.js";
import { tableViewSelect } from "../../engine/duckdb-run.js";
import { InvalidInputError } from "../../model/errors.js";
import { partitionPath } from "../../model/partition.js";
import { renderSql } from "../../model/render-sql.js";
import { quoteIdentifier, quoteLiteral } from "../../model/sql.js";
import { storageName, type TableDefinition } from "../../model/table.js";
import type { PartitionSnapshot } from "../../model/build.js";
import { freshProcessFolder } from "../../shared/process-folders.js";
import { duckdb } from "../../duckdb/duckdb-module.js";
import { cleanDuckDbMessage } from "../../duckdb/duckdb-text.js";
import { exactValueConverter } from "../../duckdb/duckdb-values.js";
import type { SharedDuckDb } from "../../duckdb/shared-duckdb.js";
import type { FileAccess } from "../../engine/duckdb-file-access.js";
import { assertOneSelect } from "../../engine/sql-guard.js";
import type { AuditRunsRequest } from "../landing.js";

/** The views the checks read: the staged runs, and the table as it will be after the swap (staged + other partitions). */
const STAGED = "__lakeswap_staged";
const AFTER = "__lakeswap_after";
/** Each view row's partition path (no table column can be named so: table columns start with a letter). */
const PART = "__lakeswap_partition";

/** A run with the local paths of its files. */
interface LocalRun {
  readonly partition: PartitionSnapshot["partition"];
  readonly paths: readonly string[];
}

/**
 * The data audits of staged runs, with DuckDB over the runs' files (read in place in an embedded lake, copies of
 * an S3 lake's). The checks lakeswap writes run in the landing instance, one query per check for every staged
 * partition at once (grouped by partition), and sample rows only where a partition failed; a `sql:` audit, users'
 * SQL, runs per partition in an instance that reaches only the table's folder (or the copies).
 */
export class RunAuditor {
  private folder: Promise<string> | undefined;

  constructor(
    private readonly duckdb: SharedDuckDb,
    private readonly files: FileAccess,
  ) {}

  async audit(request: AuditRunsRequest): Promise<AuditFinding[]> {
    const audits = request.audits.filter((a) => a.check.kind !== "row_count");
    if (audits.length === 0 || request.staged.length === 0) return [];
    const needsTable = audits.some((a) => (a.check.kind === "unique" && a.check.scope === "table") || a.check.kind === "freshness");
    const runs = [...request.staged, ...(needsTable ? request.others : [])];
    // Copies of an S3 lake's files go where the instance that runs `sql:` audits may read them.
    const under = this.files.pathInPlace ? undefined : await this.scratch();
    const local = await this.files.readable(runs.flatMap((r) => r.files), "audit", under);
    try {
      let next = 0;
      const localRuns = runs.map((run): LocalRun => ({ partition: run.partition, paths: run.files.map(() => local.paths[next++] as string) }));
      const staged = localRuns.slice(0, request.staged.length);
      const findings: AuditFinding[] = [];
      const builtIn = audits.filter((a) => a.check.kind !== "sql");
      if (builtIn.length > 0) {
        findings.push(
          ...(await this.duckdb.withConnection(async (connection) => {
            await connection.run(`CREATE OR REPLACE TEMP VIEW ${STAGED} AS ${runsView(request.table, staged, true)}`);
            if (needsTable) await connection.run(`CREATE OR REPLACE TEMP VIEW ${AFTER} AS ${runsView(request.table, localRuns, true)}`);
            const found: AuditFinding[] = [];
            for (const audit of builtIn) found.push(...(await runCheck(connection, request, audit, staged)));
            return found;
          })),
        );
      }
      const folders = under === undefined ? this.files.tableFolders([storageName(request.table)]) : [under];
      for (const audit of audits.filter((a) => a.check.kind === "sql")) {
        findings.push(...(await this.duckdb.withConnection((connection) => runSqlAudit(connection, request.table, audit, staged), { folders })));
      }
      return findings;
    } finally {
      await local.release();
    }
  }

  /** Removes the folder of copies, if one was made. */
  async close(): Promise<void> {
    const folder = this.folder;
    this.folder = undefined;
    if (folder) await fs.rm(await folder, { recursive: true, force: true }).catch(() => undefined);
  }

  private scratch(): Promise<string> {
    this.folder ??= freshProcessFolder("lakeswap-audit-");
    return this.folder;
  }
}

/**
 * A view over runs, as a lake table's view is made (../../engine/duckdb-run.ts `tableViewSelect`: the table's
 * columns, then its partition keys as VARCHAR), with each row's partition path added where `withPath`. Runs without
 * files add nothing.
 */
function runsView(table: TableDefinition, runs: readonly LocalRun[], withPath: boolean): string {
  const snapshots = runs.filter((run) => run.paths.length > 0).map((run) => ({ partition: run.partition, runId: "", files: run.paths }));
  const select = tableViewSelect(table, snapshots, (file) => file, quoteLiteral);
  if (!withPath) return select;
  // Partition values are plain (letters, digits, '-', '_', '.'): the path is the keys and values joined, as partitionPath does.
  const path = table.partitionKeys.length === 0 ? "''" : `concat_ws('/', ${table.partitionKeys.map((key) => `${quoteLiteral(`${key}=`)} || ${quoteIdentifier(key)}`).join(", ")})`;
  return `SELECT *, ${path} AS ${PART} FROM (${select}) AS v`;
}

/** A built-in check's queries: the failing count per partition, the sample rows of failing partitions, and the words for a count. */
interface CheckQueries {
  /** `SELECT <partition path>, <failing> ...`, one row per failing partition. */
  readonly counts: string;
  /** Failing rows (or keys) with the partition path, at most AUDIT_SAMPLE_ROWS per partition. */
  readonly samples: string;
  readonly detail: (failing: number) => string;
}

async function runCheck(connection: DuckDBConnection, request: AuditRunsRequest, audit: AuditSpec, staged: readonly LocalRun[]): Promise<AuditFinding[]> {
  const { table } = request;
  try {
    const check = audit.check;
    if (check.kind === "freshness") return await freshness(connection, request, audit, check, staged);
    if (check.kind === "row_count" || check.kind === "sql") return [];
    const queries = checkQueries(table, check);
    const counts = new Map((await rows(connection, queries.counts)).map((row) => [String(row[PART]), Number(row.failing)]));
    if (counts.size === 0) return [];
    const samples = await rows(connection, queries.samples);
    return [...counts].map(([partition, failing]) => ({
      audit: audit.name,
      severity: audit.severity,
      partition,
      failing,
      detail: queries.detail(failing),
      samples: samples.filter((row) => row[PART] === partition).map(withoutPath),
    }));
  } catch (error) {
    if (error instanceof InvalidInputError) throw error;
    throw new InvalidInputError(`audit ${audit.name} of table ${table.name} could not run: ${cleanDuckDbMessage(error)}; fix the audit in lakeswap.yaml`);
  }
}

function checkQueries(table: TableDefinition, check: Exclude<AuditCheck, { kind: "row_count" | "freshness" | "sql" }>): CheckQueries {
  const sampleOf = (from: string, order: string) => `SELECT * FROM (${from}) AS f QUALIFY row_number() OVER (PARTITION BY ${PART} ORDER BY ${order}) <= ${AUDIT_SAMPLE_ROWS}`;
  const rowCheck = (where: string, detail: (n: number) => string): CheckQueries => ({
    counts: `SELECT ${PART}, count(*) AS failing FROM ${STAGED} WHERE ${where} GROUP BY ${PART}`,
    samples: sampleOf(`SELECT * FROM ${STAGED} WHERE ${where}`, table.columns.map((c) => quoteIdentifier(c.name)).join(", ")),
    detail,
  });
  switch (check.kind) {
    case "not_null":
      return rowCheck(check.columns.map((c) => `${quoteIdentifier(c)} IS NULL`).join(" OR "), (n) => `${plural(n, "row")} with NULL in ${check.columns.join(" or ")}`);
    case "accepted_values": {
      const column = quoteIdentifier(check.column);
      const values = check.values.map((v) => literal(table, check.column, v)).join(", ");
      return rowCheck(`${column} IS NOT NULL AND ${column} NOT IN (${values})`, (n) => `${plural(n, "row")} whose ${check.column} is not one of ${check.values.map(shown).join(", ")}`);
    }
    case "range": {
      const column = quoteIdentifier(check.column);
      const outside = [
        ...(check.min === undefined ? [] : [`${column} < ${literal(table, check.column, check.min)}`]),
        ...(check.max === undefined ? [] : [`${column} > ${literal(table, check.column, check.max)}`]),
      ].join(" OR ");
      const bounds = [...(check.min === undefined ? [] : [`>= ${shown(check.min)}`]), ...(check.max === undefined ? [] : [`<= ${shown(check.max)}`])].join(" and ");
      return rowCheck(`${column} IS NOT NULL AND (${outside})`, (n) => `${plural(n, "row")} whose ${check.column} is not ${bounds}`);
    }
    case "unique": {
      const columns = check.columns.map(quoteIdentifier);
      const present = columns.map((c) => `${c} IS NOT NULL`).join(" AND ");
      const order = columns.join(", ");
      if (check.scope === "partition") {
        const duplicated = `SELECT ${PART}, ${order}, count(*) AS rows FROM ${STAGED} WHERE ${present} GROUP BY ${PART}, ${order} HAVING count(*) > 1`;
        return {
          counts: `SELECT ${PART}, count(*) AS failing FROM (${duplicated}) AS d GROUP BY ${PART}`,
          samples: sampleOf(duplicated, order),
          detail: (n) => `${plural(n, "value")} of (${check.columns.join(", ")}) held by more than one row of the partition`,
        };
      }
      const duplicated = `SELECT ${order}, count(*) AS rows_in_table FROM ${AFTER} WHERE ${present} GROUP BY ${order} HAVING count(*) > 1`;
      const match = columns.map((c) => `s.${c} = d.${c}`).join(" AND ");
      const held = `SELECT s.${PART}, ${columns.map((c) => `d.${c}`).join(", ")}, d.rows_in_table FROM (SELECT DISTINCT ${PART}, ${order} FROM ${STAGED} WHERE ${present}) AS s JOIN (${duplicated}) AS d ON ${match}`;
      return {
        counts: `SELECT ${PART}, count(*) AS failing FROM (${held}) AS h GROUP BY ${PART}`,
        samples: sampleOf(held, order),
        detail: (n) => `${plural(n, "value")} of (${check.columns.join(", ")}) held by more than one row of the table as it would be after the swap`,
      };
    }
  }
}

/** Freshness, over the table as it would be after the swap: when it fails, it fails every staged partition. */
async function freshness(
  connection: DuckDBConnection,
  request: AuditRunsRequest,
  audit: AuditSpec,
  check: Extract<AuditCheck, { kind: "freshness" }>,
  staged: readonly LocalRun[],
): Promise<AuditFinding[]> {
  const threshold = new Date(request.now.getTime() - check.maxAgeMs);
  const type = request.table.columns.find((c) => c.name === check.column)?.type.toUpperCase() ?? "VARCHAR";
  // A zoned column is compared as an instant; any other as a UTC wall-clock time (how lakeswap lands text times).
  const zoned = /WITH TIME ZONE|TIMESTAMPTZ/.test(type);
  const iso = threshold.toISOString();
  const limit = zoned ? `CAST(${quoteLiteral(iso)} AS TIMESTAMPTZ)` : `CAST(${quoteLiteral(iso.slice(0, 23).replace("T", " "))} AS TIMESTAMP)`;
  const newest = `max(${quoteIdentifier(check.column)})`;
  const [row] = await rows(connection, `SELECT CAST(${newest} AS VARCHAR) AS newest, ${newest} IS NULL OR CAST(${newest} AS ${zoned ? "TIMESTAMPTZ" : "TIMESTAMP"}) < ${limit} AS stale FROM ${AFTER}`);
  if (!row?.stale) return [];
  const newestText = row.newest === null ? "no value" : String(row.newest);
  return staged.map((run) => ({
    audit: audit.name,
    severity: audit.severity,
    partition: partitionPath(run.partition),
    failing: 1,
    detail: `the newest ${check.column} in ${request.table.name} would be ${newestText}, older than max_age ${check.maxAge} (before ${iso})`,
    samples: [{ [check.column]: row.newest }],
  }));
}

/** A `sql:` audit: per staged partition, the table's name is a view over that partition's rows; the SELECT's rows fail it. */
async function runSqlAudit(connection: DuckDBConnection, table: TableDefinition, audit: AuditSpec, staged: readonly LocalRun[]): Promise<AuditFinding[]> {
  const check = audit.check as Extract<AuditCheck, { kind: "sql" }>;
  const where = `audit ${audit.name} of table ${table.name}`;
  const findings: AuditFinding[] = [];
  for (const run of staged) {
    const select = await assertOneSelect(renderSql(check.sql, run.partition, where), `the SQL of ${where}`);
    await connection.run(`CREATE OR REPLACE TEMP VIEW ${quoteIdentifier(table.name)} AS ${runsView(table, [run], false)}`);
    let failing: number;
    let samples: Record<string, unknown>[];
    try {
      samples = await rows(connection, `SELECT * FROM (${select}) AS q LIMIT ${AUDIT_SAMPLE_ROWS}`);
      failing = samples.length < AUDIT_SAMPLE_ROWS ? samples.length : Number((await rows(connection, `SELECT count(*) AS n FROM (${select}) AS q`))[0]?.n ?? 0);
    } catch (error) {
      throw new InvalidInputError(`${where} failed: ${cleanDuckDbMessage(error)}; it may read only ${table.name} (the staged partition's rows); fix its sql: in lakeswap.yaml`);
    }
    if (failing > 0) {
      findings.push({ audit: audit.name, severity: audit.severity, partition: partitionPath(run.partition), failing, detail: `${plural(failing, "row")} returned by its SELECT`, samples });
    }
  }
  return findings;
}

/** A query's rows as objects, values JSON-safe. */
async function rows(connection: DuckDBConnection, sql: string): Promise<Record<string, unknown>[]> {
  const reader = await connection.runAndReadAll(sql);
  const names = reader.columnNames();
  return reader.convertRows(exactValueConverter(await duckdb())).map((row) => Object.fromEntries(names.map((name, i) => [name, row[i]])));
}

function withoutPath(row: Record<string, unknown>): Record<string, unknown> {
  const { [PART]: _path, ...rest } = row;
  return rest;
}

/** An audit's value as a literal of the column's type (a partition key's is text). */
function literal(table: TableDefinition, column: string, value: AuditValue): string {
  const type = table.columns.find((c) => c.name === column)?.type;
  const text = typeof value === "string" ? quoteLiteral(value) : typeof value === "boolean" ? String(value) : Number.isFinite(value) ? String(value) : "NULL";
  return `CAST(${text} AS ${type === undefined ? "VARCHAR" : duckdbStorageType(type)})`;
}

function shown(value: AuditValue): string {
  return typeof value === "string" ? `'${value}'` : String(value);
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}
