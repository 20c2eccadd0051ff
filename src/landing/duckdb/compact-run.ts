import { randomBytes } from "node:crypto";
import { promises as fs } from "node:fs";
import path from "node:path";
import type { DuckDBConnection } from "@duckdb/node-api";
import type { FileAccess } from "../../engine/duckdb-file-access.js";
import { duckdbStorageType } from "../../model/column-types.js";
import { printable, quoteFilePath, quoteIdentifier, quoteLiteral } from "../../model/sql.js";
import { signatureColumnOrder, type Signing } from "../../model/signature.js";
import type { CompactRunRequest, SignedRows, StagedCompaction } from "../landing.js";
import { LakeswapError } from "../../model/errors.js";
import type { TableDefinition } from "../../model/table.js";
import { signatureOfRow, signatureQuery } from "./signature-sql.js";
import { storedConversion } from "./value-conversion.js";

/** What compacting a run needs of the landing: its DuckDB, how it reaches store files, and how it signs. */
export interface CompactRunParts {
  withConnection<T>(work: (connection: DuckDBConnection) => Promise<T>): Promise<T>;
  readonly files: FileAccess;
  signing(): Promise<Signing>;
}

/**
 * Rewrites a run's Parquet files into files of about `fileBytes` each (the table's codec), staged beside the lake, and
 * signs what was written, read back from the staged files themselves: the caller compares it with the partition's
 * signature before it places them as the new run. Columns a file lacks (added to the table after it was written) are
 * NULL, as a reader of the run sees them.
 */
export async function compactRun(parts: CompactRunParts, request: CompactRunRequest): Promise<StagedCompaction> {
  const { table } = request;
  const sources = await parts.files.readable(request.files, "compact");
  let stage: { readonly dir: string; remove(): Promise<void> } | undefined;
  try {
    stage = await parts.files.stage(`compact-${request.runId}`);
    const dir = stage.dir;
    const signing = await parts.signing();
    const signed = signatureColumnOrder(table.columns.filter((c) => request.signatureColumns?.includes(c.name) ?? true));
    const { rows, upper, lower, signature } = await parts.withConnection(async (connection) => {
      const list = `[${sources.paths.map(quoteFilePath).join(", ")}]`;
      const described = (await connection.runAndReadAll(`DESCRIBE SELECT * FROM read_parquet(${list}, hive_partitioning = false, union_by_name = true)`)).getRowsJS();
      // DESCRIBE spells two types otherwise than lakeswap's storage types do.
      const spelled: Readonly<Record<string, string>> = { "TIMESTAMP WITH TIME ZONE": "TIMESTAMPTZ", "TIME WITH TIME ZONE": "TIMETZ" };
      const types = new Map(described.map((row) => [String(row[0]), spelled[String(row[1])] ?? String(row[1])]));
      const present = new Set(types.keys());
      const source = (c: { name: string }): string | undefined => {
        const renamed = request.renames?.[c.name];
        if (renamed === undefined || !present.has(renamed)) return present.has(c.name) ? c.name : undefined;
        // Files of both names (a rewrite of runs written before and after the rename): whichever each file holds.
        return present.has(c.name) ? `COALESCE(${quoteIdentifier(c.name)}, ${quoteIdentifier(renamed)})` : quoteIdentifier(renamed);
      };
      const from = (c: { name: string }): string => {
        const found = source(c);
        return found === undefined ? "NULL" : found === c.name ? quoteIdentifier(c.name) : found;
      };
      // The type a column's values have in the files (a renamed one's under its old name where the new one is absent).
      const typeOf = (c: { name: string }): string | undefined => types.get(c.name) ?? types.get(request.renames?.[c.name] ?? "");
      const rows = await convertedRows(connection, request, list, from, typeOf);
      const projection = table.columns.map((c, i) => `CAST(${rows.converted[i]?.value ?? from(c)} AS ${duckdbStorageType(c.type)}) AS ${quoteIdentifier(c.name)}`).join(", ");
      await connection.run(
        `COPY (SELECT ${projection} FROM ${rows.relation}) TO ${quoteLiteral(dir)} ` +
          `(FORMAT PARQUET, COMPRESSION ${table.compression === "zstd" ? "zstd" : "snappy"}, FILE_SIZE_BYTES ${Math.max(1, Math.floor(request.fileBytes))})`,
      );
      // A file DuckDB began just as the rows ran out holds none: it is not part of the run.
      const written = (await fs.readdir(dir)).filter((name) => name.endsWith(".parquet")).map((name) => path.join(dir, name));
      const counts = await connection.runAndReadAll(`SELECT file_name, num_rows FROM parquet_file_metadata([${written.map(quoteFilePath).join(", ")}])`);
      for (const [file, count] of counts.getRowsJS()) if (Number(count) === 0 && written.length > 1) await fs.rm(String(file));
      const relation = `compacted_${request.runId.replace(/[^A-Za-z0-9]/g, "_")}`;
      // Signed as their declared types, as landing signs them (a TIME is stored as its text: ../../model/column-types.ts).
      const declared = table.columns.map((c) => `CAST(${quoteIdentifier(c.name)} AS ${c.type}) AS ${quoteIdentifier(c.name)}`).join(", ");
      await connection.run(`CREATE OR REPLACE TEMP VIEW ${relation} AS SELECT ${declared} FROM read_parquet(${quoteLiteral(path.join(dir, "*.parquet"))}, hive_partitioning = false)`);
      try {
        const [row] = (await connection.runAndReadAll(signatureQuery(relation, [], signed, signing.form))).getRowsJS();
        return { rows: Number(row?.[0] ?? 0), upper: lane(row?.[1]), lower: lane(row?.[2]), signature: signatureOfRow(signed, row ?? [], 0).signature };
      } finally {
        await connection.run(`DROP VIEW IF EXISTS ${relation}`);
      }
    });
    const staged = stage;
    return {
      rows,
      lanes: { upper, lower },
      signature,
      signSources: () => signSources(parts, table, request.files, signing),
      place: async () => {
        try {
          return (await parts.files.placeRun(dir, { runId: request.runId, runPrefix: request.runPrefix })).files;
        } finally {
          // Embedded, the staged folder became the run's (nothing left to remove); on S3 its files were uploaded from it.
          await staged.remove();
        }
      },
      discard: () => staged.remove(),
    };
  } catch (error) {
    await stage?.remove();
    throw error;
  } finally {
    await sources.release();
  }
}

/** A type DuckDB describes a column of lakeswap's files as: a name, with a DECIMAL's precision and scale. */
const STORED_TYPE = /^[A-Z][A-Z0-9_]*(\(\d+,\d+\))?$/;

/**
 * The rows of a rewrite, each column whose type changes converted to its new declared type (./value-conversion.ts
 * `storedConversion`: `converted[i].value`, over `relation`); and first, a rewrite in which a value does not convert
 * exactly is refused: the first such value of each column, named with its column and its type, before anything is
 * written. A rebuild never changes a value silently. A column is converted where its files hold another type than the
 * column is stored as, or where its declared type changes (`request.previousTypes`), also between types stored alike
 * (SMALLINT and UTINYINT, VARCHAR and TIME): a compaction changes none, and scans nothing.
 */
async function convertedRows(
  connection: DuckDBConnection,
  request: CompactRunRequest,
  list: string,
  from: (c: { name: string }) => string,
  typeOf: (c: { name: string }) => string | undefined,
): Promise<{ relation: string; converted: ({ value: string } | undefined)[] }> {
  const files = `read_parquet(${list}, hive_partitioning = false, union_by_name = true)`;
  const converted = request.table.columns.map((c, i) => {
    const stored = typeOf(c);
    const before = request.previousTypes?.[c.name];
    if (from(c) === "NULL" || stored === undefined || (stored === duckdbStorageType(c.type) && (before === undefined || before === c.type))) return undefined;
    if (!STORED_TYPE.test(stored)) throw new LakeswapError("BUILD_FAILED", `column ${c.name} is stored as ${printable(stored, 60)}, which a rewrite does not convert`);
    return { column: c, index: i, ...storedConversion(c, i, stored) };
  });
  const checked = converted.filter((c) => c !== undefined);
  if (checked.length === 0) return { relation: files, converted };
  const sources = checked.map((c) => `${from(c.column)} AS __s${c.index}`).join(", ");
  const computed = checked.flatMap((c) => c.computed);
  const relation = `(SELECT *${computed.length > 0 ? `, ${computed.join(", ")}` : ""} FROM (SELECT *, ${sources} FROM ${files}))`;
  const checks = checked.map(
    (c) => `(SELECT ${quoteLiteral(c.column.name)} AS col, ${quoteLiteral(c.column.type)} AS type, CAST(__s${c.index} AS VARCHAR) AS value FROM rows WHERE (${c.problem}) IS NOT NULL LIMIT 1)`,
  );
  const failed = (await connection.runAndReadAll(`WITH rows AS (SELECT * FROM ${relation}) ${checks.join(" UNION ALL ")}`)).getRowsJS();
  if (failed.length === 0) return { relation, converted };
  const named = failed.map(([column, type, value]) => `column ${String(column)} holds ${String(value)}, which ${String(type)} cannot hold exactly`).join("; ");
  // The run read, never the new one's id (no run has it: the rewrite stops here).
  throw new LakeswapError("CONFLICT", `${request.from !== undefined ? `its run ${request.from}` : "its rows"} cannot be rewritten under the new columns: ${named}; declare a type that holds it`);
}

/** The lane sums are taken modulo 2^64, as `finishRawSignature` reduces them. */
const LANE = 1n << 64n;

/** A lane sum as the tally keeps it: decimal text, modulo 2^64, never negative. */
function lane(value: unknown): string {
  return (((BigInt(String(value ?? "0")) % LANE) + LANE) % LANE).toString();
}

/**
 * A run's files signed each under the columns it has (its segment's columns when it was counted), summed, and all of
 * them under the table's columns (a column a file lacks is NULL), as the compacted files are signed.
 */
async function signSources(parts: CompactRunParts, table: TableDefinition, keys: readonly string[], signing: Signing): Promise<{ asWritten: SignedRows; asDeclared: SignedRows }> {
  const sources = await parts.files.readable(keys, "compact");
  try {
    return await parts.withConnection(async (connection) => {
      const paths = sources.paths;
      const list = (files: readonly string[]) => `[${files.map(quoteFilePath).join(", ")}]`;
      const schemas = await connection.runAndReadAll(`SELECT file_name, list(name ORDER BY name) FROM parquet_schema(${list(paths)}) WHERE num_children IS NULL GROUP BY file_name`);
      const groups = new Map<string, string[]>();
      for (const [file, names] of schemas.getRowsJS()) {
        const key = (names as string[]).filter((name) => table.columns.some((c) => c.name === name)).join(",");
        groups.set(key, [...(groups.get(key) ?? []), String(file)]);
      }
      const sign = async (files: readonly string[], columns: readonly string[]): Promise<SignedRows> => {
        const present = table.columns.filter((c) => columns.includes(c.name));
        const projection = table.columns.map((c) => `CAST(${present.includes(c) ? quoteIdentifier(c.name) : "NULL"} AS ${c.type}) AS ${quoteIdentifier(c.name)}`).join(", ");
        const relation = `compact_sources_${randomBytes(6).toString("hex")}`;
        await connection.run(`CREATE TEMP VIEW ${relation} AS SELECT ${projection} FROM read_parquet(${list(files)}, hive_partitioning = false, union_by_name = true)`);
        try {
          const [row] = (await connection.runAndReadAll(signatureQuery(relation, [], signatureColumnOrder(present), signing.form))).getRowsJS();
          return { rows: Number(row?.[0] ?? 0), upper: lane(row?.[1]), lower: lane(row?.[2]) };
        } finally {
          await connection.run(`DROP VIEW IF EXISTS ${relation}`);
        }
      };
      let asWritten: SignedRows = { rows: 0, upper: "0", lower: "0" };
      for (const [columns, files] of groups) {
        const part = await sign(files, columns.split(","));
        asWritten = {
          rows: asWritten.rows + part.rows,
          upper: ((BigInt(asWritten.upper) + BigInt(part.upper)) % LANE).toString(),
          lower: ((BigInt(asWritten.lower) + BigInt(part.lower)) % LANE).toString(),
        };
      }
      return { asWritten, asDeclared: await sign(paths, table.columns.map((c) => c.name)) };
    });
  } finally {
    await sources.release();
  }
}
