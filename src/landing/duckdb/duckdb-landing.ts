import { isUtf8 } from "node:buffer";
import { open } from "node:fs/promises";
import type { DuckDBConnection } from "@duckdb/node-api";
import { InvalidInputError, LakeswapError, errorMessage } from "../../model/errors.js";
import { MAX_PARTITION_VALUE_LENGTH } from "../../model/partition.js";
import { FLAG_BITS, INFINITY_WORDS, flagWordCount, type KeyPair, laneKeys, wordKind } from "../../model/signature.js";
import { printable, quoteIdentifier, quoteLiteral, quoteRelation, relationParts } from "../../model/sql.js";
import type { SignatureForm } from "../../duckdb/duckdb-open.js";
import type { LandRequest } from "../landing.js";

/** The names of the engine tables that hold one landed delivery. */
export interface LandingTables {
  /** Good rows: the declared columns plus the partition keys. */
  readonly landed: string;
  /** Bad rows: file, line, reason, raw text. */
  readonly rejected: string;
}

const SAFE_PARTITION_VALUE = "^[A-Za-z0-9_][A-Za-z0-9_.-]*$";

/** A declared column of the delivery. */
type LandColumn = LandRequest["columns"][number];

/**
 * One format's reading of a delivery: a SELECT of `__file` (the file's place
 * in the delivery's list, from 1), `__line` (the line, or the Parquet row,
 * from 1), `__structural` (why the row cannot be read at all, or NULL) and one
 * source value per declared column (`__s0`, `__s1`, ...), whose types are
 * `types`. `rawTable` holds each row's original text (`__file`, `__line`,
 * `__raw`), for the dead letters.
 */
interface SourceRows {
  readonly select: string;
  readonly types: readonly string[];
  readonly rawTable?: string;
}

/**
 * Lands source files into engine tables: reads them, converts each value to
 * its declared type exactly (a value that would be rounded, cut or moved to
 * another zone is a bad row, never landed altered), normalizes null
 * spellings, evaluates the partition expressions, and splits the rows into
 * good ones and bad ones (file, line, reason and the original text).
 *
 * CSV and JSONL are read as text, line by line, so that every row keeps its
 * line number and its text (CSV records may span lines inside quotes); the
 * declared types are applied here, not by a reader's sniffer. Parquet is read
 * with its own types and row numbers. The session's time zone is UTC, so that
 * nothing depends on the machine's zone. The partition values are checked
 * once per distinct value, not per row.
 *
 * The delivery is never held whole outside DuckDB's tables, which DuckDB may
 * spill past its memory limit (./duckdb-open.ts): text files are streamed in
 * chunks of lines, and the rows are converted once, into the landed table
 * itself, from which the bad rows are then moved out.
 */
export async function landDelivery(connection: DuckDBConnection, request: LandRequest, tables: LandingTables): Promise<void> {
  const { lines, records, badKeys, badRows, typed } = landingScratch(tables.landed);
  // Parquet is typed and read in place: the landed rows are a view over the files (checked unchanged by the caller), so
  // a delivery is never copied; text formats are parsed once into the landed table.
  const inPlace = request.format === "parquet";
  // Bad keys stay while a view of the landed rows filters on them.
  const scratch = [lines, records, badRows, ...(inPlace ? [] : [badKeys])];
  const all = inPlace ? typed : tables.landed;
  const columns = request.columns;
  await connection.run(`SET TimeZone = 'UTC'`);
  try {
    // 1. The partition expressions are checked against the declared columns first, before anything is read.
    const shape =
      `SELECT ${columns.map((c) => `NULL::${c.type} AS ${quoteIdentifier(c.name)}`).join(", ")}, ` +
      `NULL::INTEGER AS __file, NULL::BIGINT AS __line, NULL::VARCHAR AS __problem`;
    for (const { key, expression } of request.partition) {
      try {
        await connection.run(`SELECT CAST((${expression}) AS VARCHAR) FROM (${shape}) LIMIT 0`);
      } catch (error) {
        throw new InvalidInputError(
          `the partition expression of key ${key}, ${printable(expression)}, does not work on the declared columns (${columns.map((c) => c.name).join(", ")}): ` +
            `${duckDbMessage(error)}. Fix it under partition: in the dataset's config`,
        );
      }
    }

    // 2. The source rows, by format.
    let source: SourceRows;
    try {
      if (request.format === "csv") source = await readCsv(connection, request, lines, records);
      else if (request.format === "jsonl") source = await readJsonl(connection, request, lines);
      else source = await readParquet(connection, request);
    } catch (error) {
      if (error instanceof InvalidInputError || outOfMemory(error)) throw error;
      throw new InvalidInputError(`reading ${fileList(request.files)} as ${request.format} failed: ${duckDbMessage(error)}`);
    }

    // 3. Exact conversion to the declared types; normalize null spellings (an empty string in a nullable text column is
    //    NULL; NaN is a bad row, never NULL), and add the partition keys. Every row, good or bad, is converted once, into the landed
    //    table itself: the bad ones are moved out of it below, so the delivery is never held twice.
    const converted = columns.map((column, i) => conversion(column, i, source.types[i] ?? "VARCHAR"));
    // Casts and zone checks are computed once, a level below the values and reasons that use them several times.
    const computed = converted.flatMap((c) => c.computed);
    const typed =
      `SELECT ${converted.map((c, i) => `${c.value} AS ${quoteIdentifier(columns[i]!.name)}`).join(", ")}, __file, __line, ` +
      `coalesce(__structural, ${converted.map((c) => c.problem).join(", ")}) AS __problem ` +
      `FROM (SELECT *${computed.map((c) => `, ${c}`).join("")} FROM (${source.select}))`;
    const normalized = columns.map((c) => {
      const name = quoteIdentifier(c.name);
      if (c.nullable && c.type === "VARCHAR") return `NULLIF(r.${name}, '') AS ${name}`;
      return `r.${name}`;
    });
    const keys = request.partition.map((p) => p.key);
    const landedSelect =
      `SELECT *${request.partition.map((p) => `, CAST((${p.expression}) AS VARCHAR) AS ${quoteIdentifier(p.key)}`).join("")} ` +
      `FROM (SELECT ${normalized.join(", ")}, r.__file, r.__line, r.__problem FROM (${typed}) r)`;
    try {
      await connection.run(`CREATE ${inPlace ? "VIEW" : "TABLE"} ${all} AS ${landedSelect}`);
      // A view is only bound here: a file that cannot be read fails below, on the first pass over it.
    } catch (error) {
      if (outOfMemory(error)) throw error;
      throw new InvalidInputError(`reading ${fileList(request.files)} as ${request.format} failed: ${duckDbMessage(error)}`);
    }
    if (request.format === "jsonl" && request.absentFields !== "null") await refuseAbsentFields(connection, request, all, lines);

    // 4. Partition values are checked once per distinct value: NULL, or unsafe in a path or a query.
    const keyChecks = request.partition.map(
      ({ key, expression }) =>
        `CASE WHEN ${quoteIdentifier(key)} IS NULL THEN ${quoteLiteral(`partition key ${key} is NULL: its expression ${printable(expression)} gives NULL for this row`)} ` +
        `WHEN NOT regexp_full_match(${quoteIdentifier(key)}, ${quoteLiteral(SAFE_PARTITION_VALUE)}) OR contains(${quoteIdentifier(key)}, '..') OR strlen(${quoteIdentifier(key)}) > ${MAX_PARTITION_VALUE_LENGTH} ` +
        `THEN ${quoteLiteral(`partition key ${key} has the unsafe value `)} || ${shown(quoteIdentifier(key))} END`,
    );
    const keyList = keys.map(quoteIdentifier).join(", ");
    await readingPass(request, () =>
      connection.run(
        keys.length === 0
          ? // A table without partition keys has no partition value to check.
            `CREATE TABLE ${badKeys} AS SELECT CAST(NULL AS VARCHAR) AS __key_problem WHERE false`
          : `CREATE TABLE ${badKeys} AS SELECT * FROM (SELECT ${keyList}, coalesce(${keyChecks.join(", ")}) AS __key_problem ` +
              `FROM (SELECT DISTINCT ${keyList} FROM ${all})) WHERE __key_problem IS NOT NULL`,
      ),
    );

    // 5. The bad rows: a value that did not convert, a NULL in a non-nullable column, or a bad partition value. A bad row
    //    keeps its original text (CSV, JSONL); a Parquet row has none: its values as read, where they converted.
    const keysMatch = keys.map((key) => `r.${quoteIdentifier(key)} IS NOT DISTINCT FROM b.${quoteIdentifier(key)}`).join(" AND ") || "true";
    const notNull = columns
      .filter((c) => !c.nullable)
      .map((c) => `CASE WHEN r.${quoteIdentifier(c.name)} IS NULL THEN ${quoteLiteral(`column ${c.name} is NULL but is declared not nullable (an empty field is NULL)`)} END`);
    const rowProblem = `coalesce(${["r.__problem", ...notNull].join(", ")})`;
    const reason = `coalesce(${["r.__problem", ...notNull, "b.__key_problem"].join(", ")})`;
    const values = `CASE WHEN r.__problem IS NULL THEN concat_ws(',', ${columns.map((c) => `coalesce(CAST(r.${quoteIdentifier(c.name)} AS VARCHAR), '')`).join(", ")}) END`;
    // A delivery read in place is first probed for a bad row (a pass that stops at the first one), so that a clean one
    // (the usual case) is not read once more to collect none.
    const probe = async (): Promise<boolean> => {
      const unsafe = (await connection.runAndReadAll(`SELECT count(*) FROM ${badKeys}`)).getRowsJS()[0]?.[0];
      if (Number(unsafe) > 0) return true;
      const found = await connection.runAndReadAll(`SELECT count(*) FROM (SELECT 1 FROM ${all} r WHERE ${rowProblem} IS NOT NULL LIMIT 1)`);
      return Number(found.getRowsJS()[0]?.[0]) > 0;
    };
    const anyBad = !inPlace || (await readingPass(request, probe));
    await readingPass(request, () =>
      connection.run(
        `CREATE TABLE ${badRows} AS SELECT r.__file, r.__line, ${reason} AS reason${source.rawTable ? "" : `, ${values} AS raw`} ` +
          `FROM ${all} r LEFT JOIN ${badKeys} b ON ${keysMatch} WHERE ${anyBad ? `${reason} IS NOT NULL` : "false"}`,
      ),
    );
    // The raw text is joined to the bad rows alone (a table whose size DuckDB knows), never the other way round.
    const raw = source.rawTable ? { join: `LEFT JOIN ${source.rawTable} t ON t.__file = r.__file AND t.__line = r.__line`, text: "t.__raw" } : { join: "", text: "r.raw" };
    await connection.run(
      `CREATE TABLE ${tables.rejected} AS SELECT ${sqlList(request.files)}[r.__file] AS file, r.__line AS line, r.reason, ${raw.text} AS raw ` +
        `FROM ${badRows} r ${raw.join}`,
    );
    for (const table of [lines, records, badRows]) await connection.run(`DROP TABLE IF EXISTS ${table}`);

    // 6. The bad rows leave the landed table, and so do the columns that only served to find them.
    const [rejected, unsafeKeys] = (
      await connection.runAndReadAll(`SELECT (SELECT count(*) FROM ${tables.rejected}), (SELECT count(*) FROM ${badKeys})`)
    ).getRowsJS()[0]!.map(Number) as [number, number];
    if (inPlace) {
      // A clean delivery (the probe found no bad row, and its files are checked unchanged before anything is kept)
      // needs no filter: its later passes (signature, runs) then skip computing every row's problems again.
      const good = [...(rejected > 0 ? [`${rowProblem} IS NULL`] : []), ...(unsafeKeys > 0 ? [`NOT EXISTS (SELECT 1 FROM ${badKeys} b WHERE ${keysMatch})`] : [])];
      const output = [...columns.map((c) => c.name), ...keys].map((name) => `r.${quoteIdentifier(name)}`).join(", ");
      await connection.run(`CREATE VIEW ${tables.landed} AS SELECT ${output} FROM ${all} r${good.length > 0 ? ` WHERE ${good.join(" AND ")}` : ""}`);
    } else {
      if (rejected > 0) await connection.run(`DELETE FROM ${tables.landed} r WHERE ${rowProblem} IS NOT NULL`);
      if (unsafeKeys > 0) await connection.run(`DELETE FROM ${tables.landed} r USING ${badKeys} b WHERE ${keysMatch}`);
      for (const column of ["__file", "__line", "__problem"]) await connection.run(`ALTER TABLE ${tables.landed} DROP COLUMN ${column}`);
    }
  } catch (error) {
    if (!outOfMemory(error)) throw error;
    const [limit, folder] = (await connection.runAndReadAll(`SELECT current_setting('memory_limit'), current_setting('temp_directory')`)).getRowsJS()[0]!.map(String);
    throw new LakeswapError(
      "NO_SPACE",
      `landing ${fileList(request.files)} ran out of room: DuckDB may use ${limit} of memory (LAKESWAP_MEMORY_LIMIT) and spills the rest to ${folder || "nowhere"} ` +
        `(in TMPDIR), and neither was enough (${duckDbMessage(error)}). Free space in TMPDIR or point it elsewhere, or raise LAKESWAP_MEMORY_LIMIT`,
      { cause: error },
    );
  } finally {
    for (const table of scratch) await connection.run(`DROP TABLE IF EXISTS ${table}`);
  }
}

/**
 * The names of the relations landing makes besides the landed and rejected ones: scratch tables, and (Parquet) the
 * view of every row typed, with its problems, that the landed view filters. `releaseLanding` drops them all.
 */
function landingScratch(landed: string): { lines: string; records: string; badKeys: string; badRows: string; typed: string } {
  return { lines: `${landed}_lines`, records: `${landed}_records`, badKeys: `${landed}_bad_keys`, badRows: `${landed}_bad_rows`, typed: `${landed}_typed` };
}

/** Drops every relation of one landed delivery (tables and views), those that exist. */
export async function dropLanding(connection: DuckDBConnection, tables: LandingTables): Promise<void> {
  const scratch = landingScratch(tables.landed);
  const names = [tables.landed, scratch.typed, tables.rejected, scratch.badKeys, scratch.badRows, scratch.records, scratch.lines];
  // The relations of one delivery are all in one catalog: the landing's in-memory one (`catalog.name`), or the default.
  const home = relationParts(tables.landed).catalog;
  const catalog = home === undefined ? "current_database()" : quoteLiteral(home);
  const bare = names.map((name) => relationParts(name).name);
  const list = bare.map(quoteLiteral).join(", ");
  const found = await connection.runAndReadAll(
    `SELECT view_name, 'VIEW' FROM duckdb_views() WHERE NOT internal AND database_name = ${catalog} AND view_name IN (${list}) ` +
      `UNION ALL SELECT table_name, 'TABLE' FROM duckdb_tables() WHERE database_name = ${catalog} AND table_name IN (${list})`,
  );
  // Views first: they read the tables. In the order of `names`, so the landed view goes before the typed one it reads.
  const relations = (found.getRowsJS() as [string, string][]).sort(
    (a, b) => (a[1] === b[1] ? bare.indexOf(a[0]) - bare.indexOf(b[0]) : a[1] === "VIEW" ? -1 : 1),
  );
  for (const [name, kind] of relations) await connection.run(`DROP ${kind} IF EXISTS ${quoteRelation(names[bare.indexOf(name)]!)}`);
}

/** A pass over a delivery read in place (Parquet): a file that cannot be read as the format is bad input naming it, as when it is copied in. */
async function readingPass<T>(request: LandRequest, pass: () => Promise<T>): Promise<T> {
  try {
    return await pass();
  } catch (error) {
    if (request.format !== "parquet" || outOfMemory(error) || error instanceof LakeswapError) throw error;
    throw new InvalidInputError(`reading ${fileList(request.files)} as ${request.format} failed: ${duckDbMessage(error)}`);
  }
}

/** DuckDB's error when its memory limit is reached and nothing more can be spilled (or the spill folder is full). */
export function outOfMemory(error: unknown): boolean {
  return /Out of Memory Error/.test(errorMessage(error));
}

/**
 * Bytes read from a text file at a time; a longer line is read whole, in as many reads as it takes. Binding a
 * chunk to the insert copies it on the JavaScript thread, which then answers nothing else (a collector's
 * requests wait): 1 MiB keeps that to about a millisecond, and lands as fast as larger chunks.
 */
const TEXT_CHUNK_BYTES = 1024 * 1024;

/**
 * Loads the lines of text files (UTF-8) into a new table `(__file, __line,
 * __raw, ...extra)`, numbered from 1, streamed in chunks of whole lines so that
 * no file is ever one string: a UTF-8 byte order mark at the start of a file,
 * the `\r` of a CRLF line end, and the empty lines at the end of a file are
 * dropped. `extra` are more columns computed from `__raw`. A file that is not
 * UTF-8 is refused, naming it.
 */
async function loadLines(connection: DuckDBConnection, request: LandRequest, table: string, extra: readonly string[] = []): Promise<void> {
  const computed = extra.map((column) => `, ${column}`).join("");
  await connection.run(`CREATE TABLE ${table} AS SELECT *${computed} FROM (SELECT NULL::INTEGER AS __file, NULL::BIGINT AS __line, NULL::VARCHAR AS __raw) WHERE false`);
  // generate_subscripts next to unnest: DuckDB numbers the list's elements without copying the list per row.
  const insert = await connection.prepare(
    `INSERT INTO ${table} SELECT *${computed} FROM (SELECT $1::INTEGER AS __file, __line, CASE WHEN ends_with(__raw, chr(13)) THEN rtrim(__raw, chr(13)) ELSE __raw END AS __raw ` +
      `FROM (SELECT $2::BIGINT + generate_subscripts(lines, 1) AS __line, unnest(lines) AS __raw FROM (SELECT string_split(decode($3::BLOB), chr(10)) AS lines)))`,
  );
  try {
    for (const [index, file] of request.files.entries()) {
      let lineCount = 0;
      // The last line with anything but line ends on it: empty lines after it are not rows.
      let lastLine = 0;
      const flush = async (chunk: Buffer): Promise<void> => {
        if (!isUtf8(chunk)) {
          throw new InvalidInputError(`${file} is not UTF-8 text: lakeswap reads ${request.format} files as UTF-8; convert it (e.g. iconv -f latin1 -t utf-8)`);
        }
        insert.bindInteger(1, index + 1);
        insert.bindBigInt(2, BigInt(lineCount));
        insert.bindBlob(3, chunk);
        const added = (await insert.run()).rowsChanged;
        let end = chunk.length;
        let emptyAtEnd = 0;
        while (end > 0 && (chunk[end - 1] === 10 || chunk[end - 1] === 13)) if (chunk[--end] === 10) emptyAtEnd++;
        if (end > 0) lastLine = lineCount + added - emptyAtEnd;
        lineCount += added;
      };
      const handle = await open(file, "r");
      try {
        let buffer = Buffer.alloc(TEXT_CHUNK_BYTES);
        let held = 0;
        // Where the text starts in the buffer: after a byte order mark at the start of the file.
        let start = -1;
        for (;;) {
          if (held === buffer.length) buffer = Buffer.concat([buffer, Buffer.alloc(buffer.length)]);
          const { bytesRead } = await handle.read(buffer, held, buffer.length - held);
          const end = held + bytesRead;
          if (start < 0) start = end >= 3 && buffer[0] === 0xef && buffer[1] === 0xbb && buffer[2] === 0xbf ? 3 : 0;
          if (bytesRead === 0) {
            if (end > start) await flush(buffer.subarray(start, end));
            break;
          }
          // Whole lines go to DuckDB; the rest of the last one waits for the next read. A line end is never inside a
          // UTF-8 character, so each chunk is whole characters too.
          const cut = buffer.lastIndexOf(10, end - 1);
          if (cut < start) {
            held = end;
            continue;
          }
          await flush(buffer.subarray(start, cut));
          buffer.copy(buffer, 0, cut + 1, end);
          held = end - cut - 1;
          start = 0;
        }
      } finally {
        await handle.close();
      }
      if (lastLine < lineCount) await connection.run(`DELETE FROM ${table} WHERE __file = ${index + 1} AND __line > ${lastLine}`);
    }
  } finally {
    insert.destroySync();
  }
}

/**
 * CSV, parsed here (RFC 4180: fields separated by the delimiter, quoted with
 * `"`, a quote inside a quoted field doubled), so that each record keeps its
 * first line's number and its text. A record spans lines while a quote is
 * open. An empty field and a quoted empty field are NULL. With a header, the
 * declared columns are found by name, case-insensitively, in each file's
 * header; without one, by position.
 */
async function readCsv(connection: DuckDBConnection, request: LandRequest, lines: string, records: string): Promise<SourceRows> {
  await loadLines(connection, request, lines, [`CASE WHEN contains(__raw, '"') THEN length(__raw) - length(replace(__raw, '"', '')) ELSE 0 END AS __quotes`]);
  // A line with an odd number of quotes opens (or closes) a quoted field across lines: only then are lines grouped into records.
  const spansLines = (await connection.runAndReadAll(`SELECT coalesce(bool_or(__quotes % 2 = 1), false) FROM ${lines}`)).getRowsJS()[0]?.[0] === true;
  let rawTable = lines;
  if (spansLines) {
    const open = `coalesce(sum(__quotes) OVER (PARTITION BY __file ORDER BY __line ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) % 2 = 1`;
    const start = `max(CASE WHEN __open THEN NULL ELSE __line END) OVER (PARTITION BY __file ORDER BY __line ROWS UNBOUNDED PRECEDING)`;
    await connection.run(
      `CREATE TABLE ${records} AS SELECT __file, __start AS __line, string_agg(__raw, chr(10) ORDER BY __line) AS __raw, sum(__quotes)::BIGINT AS __quotes ` +
        `FROM (SELECT *, ${start} AS __start FROM (SELECT *, ${open} AS __open FROM ${lines})) GROUP BY __file, __start`,
    );
    rawTable = records;
  }
  const delimiter = request.delimiter;
  const d = escapeRegex(delimiter);
  const quotedOrPlain = `("(?:[^"]|"")*"|[^${d}"]*)`;
  const fields = (raw: string): string =>
    `CASE WHEN NOT contains(${raw}, '"') THEN string_split(${raw}, ${quoteLiteral(delimiter)}) ` +
    `ELSE list_transform(regexp_extract_all(${quoteLiteral(delimiter)} || ${raw}, ${quoteLiteral(`${d}${quotedOrPlain}`)}, 1), ` +
    `f -> CASE WHEN starts_with(f, '"') THEN replace(f[2:-2], '""', '"') ELSE f END) END`;
  const malformed = (raw: string): string =>
    `contains(${raw}, '"') AND NOT regexp_full_match(${quoteLiteral(delimiter)} || ${raw}, ${quoteLiteral(`(?:${d}${quotedOrPlain})*`)})`;

  // Each file's first record: its header, or (without one) a check that the delimiter splits it. Usually line 1; a file
  // that starts with blank lines is searched whole.
  const firstRecords = async (where: string): Promise<[number, number | bigint, (string | null)[]][]> =>
    (
      await connection.runAndReadAll(
        `SELECT __file, __line, ${fields("__raw")} AS __fields FROM (SELECT __file, arg_min(__raw, __line) AS __raw, min(__line) AS __line ` +
          `FROM ${rawTable} WHERE __raw <> '' AND ${where} GROUP BY __file) ORDER BY __file`,
      )
    ).getRowsJS() as [number, number | bigint, (string | null)[]][];
  const firsts = await firstRecords("__line = 1");
  if (firsts.length < request.files.length) {
    const known = new Set(firsts.map(([file]) => file));
    firsts.push(...(await firstRecords(`__line > 1 AND __file NOT IN (SELECT __file FROM ${rawTable} WHERE __line = 1 AND __raw <> '')`)).filter(([file]) => !known.has(file)));
  }
  const columns = request.columns;
  const layouts = firsts.map(([file, line, header]) => ({
    file,
    headerLine: request.header ? Number(line) : 0,
    ...csvLayout(request, request.files[file - 1] ?? String(file), Number(line), header),
  }));
  if (layouts.length === 0) return { select: emptySource(columns.length), types: columns.map(() => "VARCHAR"), rawTable };
  // Where every file has the same layout (the usual case), it is spelled into the query; else each file's is joined.
  const shared = layouts.every((l) => l.width === layouts[0]!.width && l.positions.join() === layouts[0]!.positions.join());
  const layoutRows = layouts.map((l) => `(${[l.file, l.headerLine, l.width, ...l.positions].join(", ")})`).join(", ");
  const layoutColumns = ["__file", "__header_line", "__width", ...columns.map((_, i) => `__p${i}`)].join(", ");
  const layout = shared
    ? { width: String(layouts[0]!.width), position: (i: number) => String(layouts[0]!.positions[i]) }
    : { width: "h.__width", position: (i: number) => `h.__p${i}` };
  const widthProblem = request.header
    ? `'the line has ' || len(r.__fields) || ' fields, but the header of this file has ' || ${layout.width}`
    : `'the line has ' || len(r.__fields) || ' fields, but ' || ${layout.width} || ' columns are declared (header: false maps fields to the declared columns by position)'`;
  const structural =
    `CASE WHEN r.__quotes % 2 = 1 THEN 'unterminated quote: a field opened with " on this line is never closed, so the ' || r.__continued || ' line(s) after it ` +
    `were read into it (a quote inside a quoted field is written twice: "")' ` +
    `WHEN r.__malformed THEN 'malformed quoting: a quote inside an unquoted field, or text after a closing quote (quote the whole field, and write a quote inside it twice: "")' ` +
    `WHEN len(r.__fields) <> ${layout.width} THEN ${widthProblem} END`;
  const from =
    `FROM (SELECT __file, __line, __quotes, CASE WHEN __quotes > 0 THEN length(__raw) - length(replace(__raw, chr(10), '')) END AS __continued, ` +
    `${fields("__raw")} AS __fields, ${malformed("__raw")} AS __malformed FROM ${rawTable} WHERE __raw <> '') r`;
  const headerLines = layouts.filter((l) => l.headerLine > 0).map((l) => `(r.__file = ${l.file} AND r.__line = ${l.headerLine})`);
  const select =
    `SELECT r.__file, r.__line, ${structural} AS __structural, ${columns.map((_, i) => `nullif(r.__fields[${layout.position(i)}], '') AS __s${i}`).join(", ")} ` +
    (shared
      ? `${from}${headerLines.length > 0 ? ` WHERE NOT (${headerLines.join(" OR ")})` : ""}`
      : `${from} JOIN (VALUES ${layoutRows}) h(${layoutColumns}) ON r.__file = h.__file WHERE r.__line > h.__header_line`);
  return { select, types: columns.map(() => "VARCHAR"), rawTable };
}

/** Where each declared column is in one CSV file's records (1-based), and how many fields a record has; refuses a header that lacks a column. */
function csvLayout(request: LandRequest, file: string, line: number, first: (string | null)[]): { positions: number[]; width: number } {
  const columns = request.columns;
  const delimiterHint = (): string => {
    const text = first.join(request.delimiter);
    const other = [",", ";", "\t", "|"].find((d) => d !== request.delimiter && text.includes(d));
    return first.length === 1 && other ? ` The line is one field, and holds '${printable(other)}': is that the delimiter? Set source.delimiter: '${printable(other)}'.` : "";
  };
  if (!request.header) {
    if (first.length === 1 && columns.length > 1) {
      throw new InvalidInputError(`${file}:${line}: the line has 1 field, but ${columns.length} columns are declared (header: false).${delimiterHint()}`);
    }
    return { positions: columns.map((_, i) => i + 1), width: columns.length };
  }
  const names = first.map((name) => (name ?? "").trim().toLowerCase());
  const positions = columns.map((c) => names.indexOf(c.name.toLowerCase()) + 1);
  const missing = columns.filter((_, i) => positions[i] === 0).map((c) => c.name);
  const shownHeader = printable(first.map((n) => n ?? "").join(request.delimiter), 200);
  if (missing.length > 0) {
    throw new InvalidInputError(
      `${file}:${line}: the header has no column ${missing.join(", ")} (the header is '${shownHeader}').${delimiterHint()}` +
        `${delimiterHint() ? "" : " Name the columns in the header as declared (case does not matter), or set header: false to take them by position."}`,
    );
  }
  const twice = columns.filter((c) => names.filter((n) => n === c.name.toLowerCase()).length > 1).map((c) => c.name);
  if (twice.length > 0) {
    throw new InvalidInputError(`${file}:${line}: the header names column ${twice.join(", ")} more than once (case does not matter): '${shownHeader}'. Rename or remove one.`);
  }
  return { positions, width: first.length };
}

/**
 * JSONL: one JSON object per line; a line that is not one is a bad row with its number and text. Field names match
 * the declared columns case-insensitively, as CSV headers do (`Title` is column title); two fields of one object
 * whose names differ only in case are a bad row naming both.
 */
async function readJsonl(connection: DuckDBConnection, request: LandRequest, lines: string): Promise<SourceRows> {
  await loadLines(connection, request, lines);
  // Fields the columns do not declare (ingest): kept as one JSON object in the extra column, or the row is a bad one.
  const unknown = request.unknownFields;
  const declared = request.columns.filter((c) => c.name !== unknown?.column);
  // A valid JSON text is an object exactly when its first character past white space is '{': a pattern, where
  // json_type(__raw::JSON) would parse every line a second time.
  const invalid = `CASE WHEN NOT json_valid(__raw) THEN 'not valid JSON' WHEN NOT regexp_matches(__raw, '^[ \\t\\r\\n]*[{]') THEN 'not a JSON object' END`;
  // The object without its declared fields (a merge patch that sets them to null), for valid objects only. Most events
  // hold declared fields only: then it is '{}', known from the keys alone, at a fifth of the cost of the patch.
  const patch = quoteLiteral(JSON.stringify(Object.fromEntries(declared.map((c) => [c.name, null]))));
  const names = `[${declared.map((c) => quoteLiteral(c.name)).join(", ")}]::VARCHAR[]`;
  // An object that gives every declared field once and nothing else (the usual event) needs neither check below: known
  // at a tenth of their cost when its fields come in the declared order, at a third in another order.
  const exact = `(__keys = ${names} OR (len(__keys) = ${declared.length} AND list_has_all(__keys, ${names})))`;
  // Field names match the declared ones (lowercase identifiers) whatever their case: an object some of whose names
  // have a capital letter (one pattern over the names joined) has its names lowered once. It is `folded` when it spells
  // a declared field in another case, and is then read through its own spellings.
  const cased = `CASE WHEN __keys IS NULL OR __exact THEN false ELSE regexp_matches(array_to_string(__keys, ''), '[A-Z]') END`;
  const lowered = `CASE WHEN __cased THEN list_transform(__keys, k -> lower(k)) ELSE __keys END`;
  const folded = `CASE WHEN __cased THEN NOT list_has_all(__keys, list_intersect(__lower, ${names})) ELSE false END`;
  const foldedPatch = `'{' || array_to_string(list_transform(list_filter(__keys, k -> list_contains(${names}, lower(k))), k -> to_json(k)::VARCHAR || ':null'), ',') || '}'`;
  const rest = unknown
    ? `CASE WHEN __invalid0 IS NOT NULL THEN NULL WHEN __exact OR list_has_all(${names}, __keys) THEN '{}' ` +
      `WHEN __folded THEN json_merge_patch(__raw, ${foldedPatch})::VARCHAR ELSE json_merge_patch(__raw, ${patch})::VARCHAR END`
    : "NULL::VARCHAR";
  // A field given twice (or twice in different cases) is ambiguous: DuckDB reads the first value, JavaScript's and
  // Python's JSON readers the last. Such an event is a bad one, naming the fields (json_keys unescapes them, so "a"
  // and "\u0061" are the same).
  const twice = `list_position(__lower, __lower[i]) <> len(__lower) + 1 - list_position(list_reverse(__lower), __lower[i])`;
  const repeated =
    `CASE WHEN __exact THEN NULL WHEN len(__lower) <> len(list_distinct(__lower)) THEN 'fields given more than once: ' || ` +
    `array_to_string(list_sort(list_distinct(list_filter(__keys, (k, i) -> ${twice}))), ', ') || ` +
    `' (field names match the columns whatever their case, and JSON readers disagree on which value counts; send each field once)' END`;
  const unknownProblem =
    unknown?.mode === "deadletter"
      ? `CASE WHEN __rest <> '{}' THEN 'fields not declared: ' || array_to_string(json_keys(__rest::JSON), ', ') || ' (declare them as columns, or set unknown_fields: keep)' END`
      : "NULL::VARCHAR";
  // Each line is parsed once for all the columns. Extraction never sees a malformed line: it is NULL there, a level
  // above the check, never in the same expression.
  const paths = `[${declared.map((c) => quoteLiteral(`$."${c.name}"`)).join(", ")}]`;
  // A folded object's values are all read at once, in the order of its keys, and each declared field's is picked by
  // the position of its name among the lowered keys (0, no value, where it is not given).
  const positions = `[${declared.map((c) => `coalesce(list_position(__lower, ${quoteLiteral(c.name)}), 0)`).join(", ")}]`;
  const extracted =
    `CASE WHEN __folded AND __invalid IS NULL THEN list_select(json_extract_string(__raw, '$.*'), ${positions}) ` +
    `ELSE json_extract_string(CASE WHEN __invalid IS NULL THEN __raw END, ${paths}) END`;
  // A JSON "" is an empty value, like null, except in a non-nullable text column (docs/signatures.md, step 1).
  const values = request.columns.map((c, i) => {
    if (c.name === unknown?.column) return `CASE WHEN __invalid IS NULL THEN nullif(__rest, '{}') END AS __s${i}`;
    const at = declared.indexOf(c) + 1;
    return `${c.type === "VARCHAR" ? `__values[${at}]` : `nullif(__values[${at}], '')`} AS __s${i}`;
  });
  // A JSON object or array for a VARCHAR field would be stored as its JSON text, a value nobody sent as text: a bad
  // row. Only a value that starts like one (rare) is looked up again, by the object's own spelling of the field.
  const nested = declared.flatMap((c, i) => {
    if (c.type !== "VARCHAR") return [];
    const value = `__values[${i + 1}]`;
    const path = `'$."' || coalesce(__keys[list_position(__lower, ${quoteLiteral(c.name)})], ${quoteLiteral(c.name)}) || '"'`;
    const reason =
      `${quoteLiteral(`column ${c.name}: `)} || ${shown(value)} || ' is a JSON ' || lower(json_type(__raw, ${path})) || ` +
      `${quoteLiteral(", not text: send it as a JSON string, or leave the field undeclared (ingest keeps it in the extra column)")}`;
    return [`CASE WHEN starts_with(${value}, '{') OR starts_with(${value}, '[') THEN CASE WHEN json_type(__raw, ${path}) IN ('OBJECT', 'ARRAY') THEN ${reason} END END`];
  });
  const structural = nested.length === 0 ? "__invalid" : `coalesce(__invalid, ${nested.join(", ")})`;
  return {
    select:
      `SELECT __file, __line, ${structural} AS __structural, ${values.join(", ")} ` +
      `FROM (SELECT __file, __line, __raw, __invalid, __rest, __keys, __lower, ${extracted} AS __values ` +
      `FROM (SELECT __file, __line, __raw, __rest, __folded, __keys, __lower, coalesce(__invalid0, ${repeated}, ${unknownProblem}) AS __invalid ` +
      `FROM (SELECT __file, __line, __raw, __invalid0, __keys, __lower, __exact, __folded, ${rest} AS __rest ` +
      `FROM (SELECT *, ${folded} AS __folded FROM (SELECT *, ${lowered} AS __lower FROM (SELECT *, ${cased} AS __cased ` +
      `FROM (SELECT *, ${exact} AS __exact ` +
      // Each object's field names once, for the repeated ones and the undeclared ones.
      `FROM (SELECT __file, __line, __raw, __invalid0, CASE WHEN __invalid0 IS NULL THEN json_keys(__raw) END AS __keys ` +
      // Lines of spaces only are not rows (as empty lines are not); a pattern is ten times faster here than trim().
      `FROM (SELECT __file, __line, __raw, ${invalid} AS __invalid0 FROM ${lines} WHERE regexp_matches(__raw, '[^ ]'))))))))))`,
    types: request.columns.map(() => "VARCHAR"),
    rawTable: lines,
  };
}

/**
 * A JSONL delivery whose file never gives a declared field (in any line, in any case) is refused naming the file and
 * the field, as a CSV file whose header lacks a column: a misspelled declaration would otherwise land every value as
 * NULL. Found from the landed values first (a column with a value in a file is given there), so that the lines are
 * read again only for a column that is NULL throughout a file.
 */
async function refuseAbsentFields(connection: DuckDBConnection, request: LandRequest, landed: string, lines: string): Promise<void> {
  const fields = request.columns.filter((c) => c.name !== request.unknownFields?.column);
  if (fields.length === 0) return;
  const counts = (
    await connection.runAndReadAll(`SELECT __file, ${fields.map((c) => `count(${quoteIdentifier(c.name)})`).join(", ")} FROM ${landed} GROUP BY __file ORDER BY __file`)
  ).getRowsJS();
  const suspects = counts
    .map(([file, ...given]) => ({ file: Number(file), columns: fields.filter((_, i) => Number(given[i]) === 0).map((c) => c.name) }))
    .filter((s) => s.columns.length > 0);
  if (suspects.length === 0) return;
  const wanted = [...new Set(suspects.flatMap((s) => s.columns))];
  const objects =
    `SELECT __file, list_transform(json_keys(__raw), k -> lower(k)) AS __lower, json_keys(__raw) AS __keys FROM ${lines} ` +
    `WHERE __file IN (${suspects.map((s) => s.file).join(", ")}) AND json_valid(__raw) AND regexp_matches(__raw, '^[ \\t\\r\\n]*[{]')`;
  const found = (
    await connection.runAndReadAll(
      `SELECT __file, [${wanted.map((name) => `bool_or(list_contains(__lower, ${quoteLiteral(name)}))`).join(", ")}], list_sort(list_distinct(flatten(list(__keys))))[1:20] ` +
        `FROM (${objects}) GROUP BY __file ORDER BY __file`,
    )
  ).getRowsJS() as [number, boolean[], string[]][];
  // A file without one valid object has no fields to name: its lines are bad rows, reported as such.
  for (const [file, given, keys] of found) {
    const absent = suspects.find((s) => s.file === Number(file))!.columns.filter((name) => !given[wanted.indexOf(name)]);
    if (absent.length === 0) continue;
    const shownKeys = keys.length === 0 ? "none" : printable(keys.join(", "), 300);
    throw new InvalidInputError(
      `${request.files[Number(file) - 1]}: no line has a field ${absent.join(", ")} (the lines' fields are ${shownKeys}). ` +
        "Name the fields as the columns are declared (case does not matter), or remove the column from the dataset's columns",
    );
  }
}

/** Parquet: the declared columns by name (case-insensitively), with their types in the file, and each row's number in its file. */
async function readParquet(connection: DuckDBConnection, request: LandRequest): Promise<SourceRows> {
  const files = sqlList(request.files);
  const described = (await connection.runAndReadAll(`DESCRIBE SELECT * FROM read_parquet(${files}, hive_partitioning = false)`)).getRowsJS().map(([name, type]) => [String(name), String(type)] as const);
  const found = request.columns.map((c) => described.find(([name]) => name.toLowerCase() === c.name.toLowerCase()));
  await refuseCaseTwins(connection, request);
  const missing = request.columns.filter((_, i) => found[i] === undefined).map((c) => c.name);
  if (missing.length > 0) {
    throw new InvalidInputError(
      `${fileList(request.files)}: the Parquet source lacks declared column${missing.length > 1 ? "s" : ""} ${missing.join(", ")} (it has ${described.map(([n]) => n).join(", ")})`,
    );
  }
  const values = found.map((f, i) => `${quoteParquetName(f![0])} AS __s${i}`).join(", ");
  const types = found.map((f) => (f![1] === "TIMESTAMP WITH TIME ZONE" ? "TIMESTAMPTZ" : f![1]));
  // The reader's own file name column is named so that it cannot collide with a source column, and is kept as the file's
  // place in the list (the reader gives it once per chunk of rows, so this costs nothing per row); its row number column
  // cannot be renamed, so a file with a column of that name is numbered by reading it alone, in order.
  if (!described.some(([name]) => name.toLowerCase() === "file_row_number")) {
    return {
      select:
        `SELECT list_position(${files}, __lakeswap_file)::INTEGER AS __file, file_row_number + 1 AS __line, NULL::VARCHAR AS __structural, ${values} ` +
        `FROM read_parquet(${files}, filename = '__lakeswap_file', file_row_number = true, hive_partitioning = false)`,
      types,
    };
  }
  const perFile = request.files.map(
    (file, index) => `SELECT ${index + 1} AS __file, row_number() OVER () AS __line, NULL::VARCHAR AS __structural, ${values} FROM read_parquet(${quoteLiteral(file)}, hive_partitioning = false)`,
  );
  return { select: perFile.join(" UNION ALL "), types };
}

/**
 * Refuses a Parquet file with two top-level columns whose names differ only in case where one is a declared column:
 * both are that column, as a CSV header naming it twice (DuckDB's reader would rename the second, `ID_1`, and read
 * the first alone). The names are the files' own, from their schemas.
 */
async function refuseCaseTwins(connection: DuckDBConnection, request: LandRequest): Promise<void> {
  const schema = (await connection.runAndReadAll(`SELECT file_name, name, num_children FROM parquet_schema(${sqlList(request.files)})`)).getRowsJS();
  const declared = new Set(request.columns.map((c) => c.name.toLowerCase()));
  for (const file of request.files) {
    const elements = schema.filter(([name]) => name === file).map(([, name, children]) => ({ name: String(name), children: Number(children ?? 0) }));
    // The schema is a tree in pre-order: the root, then each top-level column followed by its nested fields.
    const topLevel: string[] = [];
    let skip = 0;
    for (const element of elements.slice(1)) {
      if (skip > 0) skip += element.children - 1;
      else {
        topLevel.push(element.name);
        skip = element.children;
      }
    }
    const twins = [...declared]
      .map((column) => topLevel.filter((name) => name.toLowerCase() === column))
      .filter((named) => named.length > 1);
    if (twins.length > 0) {
      throw new InvalidInputError(
        `${file}: the Parquet file has columns ${twins.map((named) => named.join(" and ")).join(", ")}, which name the same column (case does not matter): rename or remove one`,
      );
    }
  }
}

function quoteParquetName(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

function emptySource(count: number): string {
  return `SELECT NULL::INTEGER AS __file, NULL::BIGINT AS __line, NULL::VARCHAR AS __structural, ${Array.from({ length: count }, (_, i) => `NULL::VARCHAR AS __s${i}`).join(", ")} WHERE false`;
}

const INTEGER_TYPES = /^(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|UTINYINT|USMALLINT|UINTEGER|UBIGINT)$/;

/** Why a NaN is a bad row: DuckDB holds NaN equal to itself, Athena (Trino) does not, so one table would answer two ways. */
const NAN_REASON = "is NaN, which lakeswap does not store (DuckDB and Athena compare NaN differently): send null, or an empty field, for a missing value";

/** The widest HUGEINT lakeswap stores: its Parquet files hold it as DECIMAL(38,0) (./../model/column-types.ts). */
const HUGEINT_LIMIT = "99999999999999999999999999999999999999::HUGEINT";
const HUGEINT_RANGE = "is out of range for HUGEINT as lakeswap stores it (DECIMAL(38,0): at most 38 digits)";

/**
 * Number notations DuckDB's casts read that are no decimal number: hexadecimal (0x1F) and binary (0b101), which only
 * its integer casts read (so an integer text that is no DOUBLE is one), and digit separators (1_000), which every
 * number cast reads. Two cheap tests, where one pattern over every value would cost twice as much.
 */
function notDecimalNotation(text: string, integer: boolean): string {
  return integer ? `(contains(${text}, '_') OR TRY_CAST(${text} AS DOUBLE) IS NULL)` : `contains(${text}, '_')`;
}
const NOTATION_REASON = "is not written in decimal digits (hexadecimal, binary and '_' digit separators are not read as numbers)";

/** A fraction of a second finer than microseconds that is not zeros: the types keep microseconds, and cutting the rest would change the value. */
const BEYOND_MICROSECONDS = "[.][0-9]{6}[0-9]*[1-9]";

/** The event times an ingested row may have: its partition is named by the year (p_year), in four digits. */
const EVENT_TIME_RANGE = "is outside the years 0001 to 9999 that an event time may have (it names the event's partition)";

/** Why an event time sent as ISO 8601 text (time.format: iso8601, the default) does not read, with the other formats. */
const ISO_EVENT_TIME =
  "is not an ISO 8601 time such as 2025-03-04T10:15:00Z (time.format: iso8601; a number of seconds or milliseconds since 1970 needs time.format: epoch_s or epoch_ms)";

/** Each epoch format's unit in microseconds and the fraction digits it may have down to a microsecond. */
const EPOCH_UNITS = {
  epoch_ms: { micros: 1000, scale: 3, unit: "milliseconds", bound: "1e15" },
  epoch_s: { micros: 1_000_000, scale: 6, unit: "seconds", bound: "1e12" },
} as const;

/**
 * An event time sent as a number of milliseconds or seconds since 1970-01-01T00:00:00Z (a JSON number, or its
 * digits as text): exact to the microsecond, or a bad row naming the format. `roundedAway(scale)` is the text
 * conversion's check for digits a DECIMAL of that scale would round away.
 */
function epochConversion(
  column: LandColumn,
  index: number,
  says: (text: string, reason: string) => string,
  roundedAway: (scale: number) => string,
): { value: string; problem: string; computed: string[] } {
  const format = column.eventTime as keyof typeof EPOCH_UNITS;
  const { micros, scale, unit, bound } = EPOCH_UNITS[format];
  const s = `__s${index}`;
  const v = `__v${index}`;
  const since = `__u${index}`;
  // The instant's microseconds, where they are within the years 0001-9999 (make_timestamp takes no other); a number
  // far past them is not multiplied at all (a DECIMAL(38) product would overflow).
  const decimal = `TRY_CAST(${s} AS DECIMAL(38,${scale}))`;
  const computed = [`${decimal} AS ${v}`, `CASE WHEN abs(${decimal}) < ${bound} THEN CAST(${decimal} * ${micros} AS BIGINT) END AS ${since}`];
  const inRange = `${since} BETWEEN -62135596800000000 AND 253402300799999999`;
  const timestamp = `make_timestamp(CASE WHEN ${inRange} THEN ${since} END)`;
  const expected = `is not a number of ${unit} since 1970-01-01T00:00:00Z (time.format: ${format}; ISO 8601 text such as 2025-03-04T10:15:00Z needs time.format: iso8601)`;
  return {
    computed,
    value: column.type === "TIMESTAMPTZ" ? `CAST(${timestamp} AS TIMESTAMPTZ)` : timestamp,
    problem:
      `CASE WHEN ${s} IS NULL THEN NULL WHEN ${v} IS NULL OR ${notDecimalNotation(s, false)} THEN ${says(s, expected)} ` +
      `WHEN ${roundedAway(scale)} THEN ${says(s, `has a fraction finer than a microsecond (time.format: ${format})`)} ` +
      `WHEN ${since} IS NULL OR NOT (${inRange}) THEN ${says(s, EVENT_TIME_RANGE)} END`,
  };
}

/** The SQL condition that a time value is outside years 0001-9999 (±infinity included). */
function outsideEventYears(value: string, type: string): string {
  return `(${value} < CAST('0001-01-01' AS ${type}) OR ${value} >= CAST('10000-01-01' AS ${type}))`;
}

/**
 * How one source value becomes its declared type: the value (NULL where it
 * does not convert) and the reason it is a bad row (NULL when it is not). A
 * value converts only exactly: `1.7` is not an integer, `1.005` does not fit
 * DECIMAL(10,2), a date with a time of day is not a DATE, `1e300` overflows a
 * FLOAT, a TIMESTAMP text with an offset would lose it, a fraction finer than
 * microseconds would be cut, `0x1F` and `1_000` are no decimal numbers, NaN is
 * refused, a HUGEINT must fit the 38 digits it is stored in. FLOAT and DOUBLE
 * are approximate by declaration: rounding to the nearest one is their nature.
 * Zone-less TIMESTAMPTZ text is UTC. An event time (`eventTime`) is read in its
 * format and must be in years 0001-9999.
 */
function conversion(column: LandColumn, index: number, sourceType: string): { value: string; problem: string; computed: string[] } {
  const converted = valueConversion(column, index, sourceType);
  if (column.eventTime === undefined) return converted;
  // An event time names its partition (p_year=2026): ±infinity and years past 9999 or before 0001 would name one too.
  const says = `${quoteLiteral(`column ${column.name}: `)} || ${shown(`CAST(__s${index} AS VARCHAR)`)} || ${quoteLiteral(` ${EVENT_TIME_RANGE}`)}`;
  return {
    computed: converted.computed,
    value: converted.value,
    problem: `coalesce(${converted.problem}, CASE WHEN ${outsideEventYears(`(${converted.value})`, column.type)} THEN ${says} END)`,
  };
}

/** How one source value becomes its declared type (see conversion), the checks of every column. */
function valueConversion(column: LandColumn, index: number, sourceType: string): { value: string; problem: string; computed: string[] } {
  const type = column.type;
  const s = `__s${index}`;
  const prefix = quoteLiteral(`column ${column.name}: `);
  const says = (text: string, reason: string): string => `${prefix} || ${shown(text)} || ${quoteLiteral(` ${reason}`)}`;
  if (sourceType === type) return { value: s, problem: sameTypeProblem(column, s, says), computed: [] };
  if (sourceType !== "VARCHAR") return { ...typedConversion(column, s, sourceType, says), computed: [] };

  const v = `__v${index}`;
  const computed = [`TRY_CAST(${s} AS ${type}) AS ${v}`];
  const number = `TRY_CAST(${s} AS DOUBLE) IS NOT NULL`;
  // Times keep microseconds: DuckDB's cast cuts a finer fraction, which would change the value.
  const finer = `regexp_matches(${s}, '${BEYOND_MICROSECONDS}')`;
  const cut = `has a fraction of a second finer than microseconds, which ${type} does not keep: round it to 6 digits`;
  // A fraction that the type would round away: digits after the first `scale` that are not zeros. A number in exponent
  // form is checked through DOUBLE.
  const exponent = `(contains(${s}, 'e') OR contains(${s}, 'E')) AND NOT contains(lower(${s}), 'x')`;
  const roundedAway = (scale: number): string =>
    `CASE WHEN contains(${s}, '.') AND NOT (${exponent}) THEN length(${s}) - strpos(${s}, '.') > ${scale} AND length(rtrim(split_part(${s}, '.', 2), '0 ')) > ${scale} ` +
    `WHEN ${exponent} THEN TRY_CAST(${s} AS DOUBLE) <> CAST(${v} AS DOUBLE) ELSE false END`;
  if (column.eventTime === "epoch_ms" || column.eventTime === "epoch_s") return epochConversion(column, index, says, roundedAway);
  // A time field that does not read names the format it expects, and the other formats.
  const notATime = column.eventTime === undefined ? "is not a timestamp" : ISO_EVENT_TIME;
  if (INTEGER_TYPES.test(type)) {
    return {
      computed,
      value: v,
      problem:
        `CASE WHEN ${s} IS NULL THEN NULL WHEN ${v} IS NULL THEN CASE WHEN ${number} THEN ${says(s, `is out of range for ${type}`)} ELSE ${says(s, "is not an integer")} END ` +
        `WHEN ${notDecimalNotation(s, true)} THEN ${says(s, NOTATION_REASON)} ` +
        `WHEN ${roundedAway(0)} THEN ${says(s, "is not an integer")} ` +
        `${type === "HUGEINT" ? `WHEN ${v} NOT BETWEEN -${HUGEINT_LIMIT} AND ${HUGEINT_LIMIT} THEN ${says(s, HUGEINT_RANGE)} ` : ""}END`,
    };
  }
  const decimal = /^DECIMAL\((\d+),(\d+)\)$/.exec(type);
  if (decimal) {
    const scale = Number(decimal[2]);
    const tooPrecise = scale === 0 ? `is not a whole number (${type})` : `has more than ${scale} decimal place${scale > 1 ? "s" : ""} (${type})`;
    return {
      computed,
      value: v,
      problem:
        `CASE WHEN ${s} IS NULL THEN NULL WHEN ${v} IS NULL THEN CASE WHEN ${number} THEN ${says(s, `is out of range for ${type}`)} ELSE ${says(s, "is not a number")} END ` +
        `WHEN ${notDecimalNotation(s, false)} THEN ${says(s, NOTATION_REASON)} ` +
        `WHEN ${roundedAway(scale)} THEN ${says(s, tooPrecise)} END`,
    };
  }
  if (type === "FLOAT" || type === "DOUBLE") {
    return {
      computed,
      value: v,
      problem:
        `CASE WHEN ${s} IS NULL THEN NULL WHEN ${v} IS NULL THEN ${says(s, "is not a number")} ` +
        `WHEN ${notDecimalNotation(s, false)} THEN ${says(s, NOTATION_REASON)} WHEN isnan(${v}) THEN ${says(s, NAN_REASON)} ` +
        `WHEN isinf(${v}) AND NOT regexp_matches(${s}, '^\\s*[+-]?inf', 'i') THEN ${says(s, `is out of range for ${type}`)} END`,
    };
  }
  if (type === "TIMESTAMPTZ") {
    // An offset or zone in the text is honoured; text without one is UTC (the session's zone, set above), whatever the machine's zone.
    return {
      value: v,
      problem: `CASE WHEN ${s} IS NULL THEN NULL WHEN ${v} IS NULL THEN ${says(s, notATime)} WHEN ${finer} THEN ${says(s, cut)} END`,
      computed,
    };
  }
  if (type === "TIMESTAMP") {
    // A TIMESTAMP cast drops an offset: the text has one that matters where, read as an instant (zone-less text is UTC),
    // it is another time. A zero offset (`Z`, `+00`) changes nothing and is kept.
    const instant = `TRY_CAST(${s} AS TIMESTAMPTZ)`;
    const zoned = `__z${index}`;
    // Only a text with a sign or a letter after the date, or that does not end in a digit, can carry an offset.
    const mayHaveOffset = `(contains(${s}, '+') OR contains(${s}[11:], '-') OR NOT (right(${s}, 1) BETWEEN '0' AND '9'))`;
    const offset = `has a UTC offset or time zone, which column ${column.name} (TIMESTAMP, without time zone) cannot keep: declare it TIMESTAMPTZ, or drop the offset`;
    return {
      computed: [...computed, `CASE WHEN ${mayHaveOffset} THEN ${instant} IS DISTINCT FROM timezone('UTC', ${v}) ELSE false END AS ${zoned}`],
      value: `CASE WHEN ${zoned} THEN NULL ELSE ${v} END`,
      problem:
        `CASE WHEN ${s} IS NULL THEN NULL WHEN ${v} IS NULL THEN CASE WHEN ${instant} IS NOT NULL THEN ${says(s, offset)} ELSE ${says(s, notATime)} END ` +
        `WHEN ${zoned} THEN ${says(s, offset)} WHEN ${finer} THEN ${says(s, cut)} END`,
    };
  }
  if (type === "DATE") {
    return {
      computed,
      value: v,
      problem:
        `CASE WHEN ${s} IS NULL THEN NULL WHEN ${v} IS NULL THEN ${says(s, column.eventTime === undefined ? "is not a date (YYYY-MM-DD)" : ISO_EVENT_TIME)} ` +
        `WHEN contains(${s}, ':') AND TRY_CAST(${s} AS TIMESTAMP) IS DISTINCT FROM CAST(${v} AS TIMESTAMP) THEN ${says(s, "is not a date: it has a time of day")} END`,
    };
  }
  if (type === "VARCHAR") return { value: s, problem: "NULL::VARCHAR", computed: [] };
  if (type === "TIME") {
    return { value: v, problem: `CASE WHEN ${s} IS NULL THEN NULL WHEN ${v} IS NULL THEN ${says(s, "does not convert to TIME")} WHEN ${finer} THEN ${says(s, cut)} END`, computed };
  }
  const what = type === "BOOLEAN" ? "is not a boolean (true or false)" : `does not convert to ${type}`;
  return { value: v, problem: `CASE WHEN ${s} IS NOT NULL AND ${v} IS NULL THEN ${says(s, what)} END`, computed };
}

/** A typed source value (Parquet) of another type than declared: converted, and refused if the conversion is not exact (it must read back the same). */
function typedConversion(column: LandColumn, source: string, sourceType: string, says: (text: string, reason: string) => string): { value: string; problem: string } {
  const type = column.type;
  const s = source;
  const text = `CAST(${s} AS VARCHAR)`;
  const instant = sourceType === "TIMESTAMPTZ";
  const wallClock = /^TIMESTAMP(_S|_MS|_NS)?$/.test(sourceType);
  // Wall clock time and instants meet in UTC, never in the machine's zone.
  const value =
    type === "TIMESTAMPTZ" && wallClock ? `timezone('UTC', CAST(${s} AS TIMESTAMP))` : type === "TIMESTAMP" && instant ? `timezone('UTC', ${s})` : `TRY_CAST(${s} AS ${type})`;
  const unconverted = `CASE WHEN ${s} IS NOT NULL AND (${value}) IS NULL THEN ${says(text, `(${sourceType}) does not convert to ${type}`)} END`;
  // A nested value (struct, list, map) cast to text would be DuckDB's rendering of it, not a value that was sent.
  if (type === "VARCHAR" && /^(STRUCT|MAP|UNION)\(|\]$/.test(sourceType)) {
    return { value: "NULL::VARCHAR", problem: `CASE WHEN ${s} IS NOT NULL THEN ${says(text, `(${printable(sourceType, 60)}) is a nested value, not text: declare the column from its fields, or store it as text in the file`)} END` };
  }
  // Nanoseconds would be cut: the declared types keep microseconds.
  if ((type === "TIMESTAMPTZ" || type === "TIMESTAMP") && sourceType === "TIMESTAMP_NS") {
    return { value, problem: `coalesce(${unconverted}, CASE WHEN epoch_ns(${s}) % 1000 <> 0 THEN ${says(text, `has nanoseconds, which ${type} does not keep (it keeps microseconds)`)} END)` };
  }
  if (type === "VARCHAR" || type === "TIMESTAMPTZ" || (type === "TIMESTAMP" && instant)) return { value, problem: unconverted };
  if (type === "FLOAT" || type === "DOUBLE") {
    return {
      value,
      problem:
        `CASE WHEN ${s} IS NULL THEN NULL WHEN (${value}) IS NULL OR (isinf(${value}) AND NOT isinf(TRY_CAST(${s} AS DOUBLE))) THEN ${says(text, `is out of range for ${type}`)} ` +
        `WHEN isnan(${value}) THEN ${says(text, NAN_REASON)} END`,
    };
  }
  if (type === "HUGEINT") {
    const exact = `CASE WHEN ${s} IS NOT NULL AND TRY_CAST(${value} AS ${sourceType}) IS DISTINCT FROM ${s} THEN ${says(text, "is not an integer")} END`;
    return { value, problem: `coalesce(${unconverted}, ${exact}, CASE WHEN (${value}) NOT BETWEEN -${HUGEINT_LIMIT} AND ${HUGEINT_LIMIT} THEN ${says(text, HUGEINT_RANGE)} END)` };
  }
  const decimal = /^DECIMAL\((\d+),(\d+)\)$/.exec(type);
  const inexact = INTEGER_TYPES.test(type)
    ? "is not an integer"
    : decimal
      ? `has more than ${decimal[2]} decimal places (${type})`
      : type === "DATE"
        ? "is not a date: it has a time of day"
        : `does not convert exactly to ${type}`;
  return {
    value,
    problem: `coalesce(${unconverted}, CASE WHEN ${s} IS NOT NULL AND TRY_CAST(${value} AS ${sourceType}) IS DISTINCT FROM ${s} THEN ${says(text, inexact)} END)`,
  };
}

/** The checks of a typed source value (Parquet) already of the declared type: NaN, and a HUGEINT wider than it is stored. */
function sameTypeProblem(column: LandColumn, source: string, says: (text: string, reason: string) => string): string {
  const text = `CAST(${source} AS VARCHAR)`;
  if (column.type === "FLOAT" || column.type === "DOUBLE") return `CASE WHEN isnan(${source}) THEN ${says(text, NAN_REASON)} END`;
  if (column.type === "HUGEINT") return `CASE WHEN ${source} NOT BETWEEN -${HUGEINT_LIMIT} AND ${HUGEINT_LIMIT} THEN ${says(text, HUGEINT_RANGE)} END`;
  return "NULL::VARCHAR";
}

/** A value quoted in a reason, cut to 60 characters so that a huge field never makes a huge message. */
function shown(text: string): string {
  return `'''' || CASE WHEN length(${text}) > 60 THEN left(${text}, 57) || '...' ELSE ${text} END || ''''`;
}

function escapeRegex(text: string): string {
  return text.replace(/[\\^$.*+?()[\]{}|-]/g, "\\$&");
}

function sqlList(files: readonly string[]): string {
  return `[${files.map(quoteLiteral).join(", ")}]`;
}

function fileList(files: readonly string[]): string {
  return files.length > 3 ? `${files.slice(0, 3).join(", ")} and ${files.length - 3} more` : files.join(", ");
}

/** DuckDB's message on one line, without the SQL it quotes (lakeswap's, not the user's) and cut, so that a huge value never makes a huge message. */
function duckDbMessage(error: unknown): string {
  const message = errorMessage(error).replace(/\n\s*LINE \d+:[\s\S]*$/, "").replace(/^(Binder|Parser|Conversion|Invalid Input|IO) Error: /, "");
  return printable(message.replace(/\s+/g, " ").trim(), 300);
}

/**
 * The SQL of one signed column's canonical text (docs/signatures.md), or NULL.
 * The expression depends only on specified functions (strftime, printf %.17g, CAST of integers and decimals).
 * Only text kinds are signed by it; for integer kinds (DOUBLE and FLOAT among them since v3) it is informational.
 */
function canonicalExpression(name: string, type: string): string {
  const c = quoteIdentifier(name);
  if (/^(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|UTINYINT|USMALLINT|UINTEGER|UBIGINT|UHUGEINT)$/.test(type) || type.startsWith("DECIMAL(")) {
    return `CAST(${c} AS VARCHAR)`;
  }
  if (type === "DOUBLE" || type === "FLOAT") {
    const d = `CAST(${c} AS DOUBLE)`;
    return `CASE WHEN isnan(${d}) THEN NULL WHEN ${d} = 0 THEN '0' WHEN isinf(${d}) THEN CASE WHEN ${d} > 0 THEN 'inf' ELSE '-inf' END ELSE printf('%.17g', ${d}) END`;
  }
  if (type === "BOOLEAN") return `CASE WHEN ${c} THEN 'true' WHEN NOT ${c} THEN 'false' END`;
  if (type === "DATE") return `strftime(${c}, '%Y-%m-%d')`;
  if (type === "TIMESTAMP") return `strftime(${c}, '%Y-%m-%dT%H:%M:%S.%f')`;
  if (type === "TIMESTAMPTZ") return `strftime(timezone('UTC', ${c}), '%Y-%m-%dT%H:%M:%S.%f') || 'Z'`;
  if (type === "TIME") return `strftime(TIMESTAMP '1970-01-01' + ${c}, '%H:%M:%S.%f')`;
  if (type === "UUID") return `lower(CAST(${c} AS VARCHAR))`;
  if (type === "BLOB") return `lower(hex(${c}))`;
  return `CAST(${c} AS VARCHAR)`;
}

/** The SQL of a column's word (docs/signatures.md, step 3) for word kind `integer`: a BIGINT expression. */
function integerWordExpression(name: string, type: string): string {
  const c = quoteIdentifier(name);
  const decimal = /^DECIMAL\((\d+),(\d+)\)$/.exec(type);
  if (decimal) {
    const [width, scale] = [Number(decimal[1]), Number(decimal[2])];
    if (scale === 0) return `CAST(${c} AS BIGINT)`;
    // The exact unscaled value (below 10^18): DuckDB multiplies decimals in 64 bits while the result's
    // width stays within 18 digits, so a wider product is widened to DECIMAL(38,s) first.
    const value = width + scale + 1 <= 18 ? c : `CAST(${c} AS DECIMAL(38,${scale}))`;
    return `CAST(${value} * CAST(1${"0".repeat(scale)} AS DECIMAL(${scale + 1},0)) AS BIGINT)`;
  }
  // DOUBLE, and FLOAT widened exactly: the IEEE-754 bits of the double, -0 as 0, NaN as 0 (NULL: nullCondition flags it).
  // DuckDB casts a number to BIT as its bit pattern, most significant bit first, and 64 bits to BIGINT as two's
  // complement: an exact reinterpretation (the tests hold it to the reference on edge values and random bit patterns).
  if (type === "DOUBLE" || type === "FLOAT") {
    const d = `CAST(${c} AS DOUBLE)`;
    return `CASE WHEN isnan(${d}) OR ${d} = 0 THEN 0 ELSE CAST(CAST(${d} AS BIT) AS BIGINT) END`;
  }
  // DuckDB stores DATE ±infinity as ±(2^31 - 1) days, which this difference returns as is.
  if (type === "DATE") return `(${c} - DATE '1970-01-01')`;
  if (type === "TIME") return `epoch_us(${c})`;
  // epoch_us() is NULL for ±infinity: their words are the stored ±(2^63 - 1), as the native form reads them.
  if (type === "TIMESTAMP" || type === "TIMESTAMPTZ") {
    const infinity = INFINITY_WORDS[type];
    return `CASE WHEN isinf(${c}) THEN CASE WHEN ${c} > CAST('epoch' AS ${type}) THEN ${infinity} ELSE -${infinity} END ELSE epoch_us(${c}) END`;
  }
  return `CAST(${c} AS BIGINT)`;
}

/**
 * When a field is NULL for the signature (its flag is set), or undefined where it never is: NULL, and for
 * DOUBLE/FLOAT also NaN (landing makes NaN NULL; one that reaches the signature anyway signs as NULL, as in
 * the native form, whatever the column's declared nullability).
 */
function nullCondition(column: SignatureColumn): string | undefined {
  const c = quoteIdentifier(column.name);
  const nullable = column.nullable ?? true;
  if (column.type === "DOUBLE" || column.type === "FLOAT") return `${nullable ? `${c} IS NULL OR ` : ""}isnan(CAST(${c} AS DOUBLE))`;
  return nullable ? `${c} IS NULL` : undefined;
}

/** A signed column as the signature query needs it: a column declared not nullable is never NULL once landed. */
export interface SignatureColumn {
  readonly name: string;
  readonly type: string;
  readonly nullable?: boolean;
}

const LANE_MODULUS = "18446744073709551616::HUGEINT";

/** The widest row the extension's aggregate takes as separate arguments (MAX_DIRECT_FIELDS in native/lakeswap_signature.c). */
const NATIVE_DIRECT_FIELDS = 32;

/**
 * The per-partition signature query over a relation: for each partition, the
 * row count and the two lane sums of docs/signatures.md (v3), as text (exact
 * integers). `signed` must be in signature column order. Both forms give the
 * same numbers; `native` needs lakeswap's extension loaded (./duckdb-open.ts),
 * whose aggregate computes the lanes and their sums per partition.
 */
export function signatureQuery(relation: string, keys: readonly string[], signed: readonly SignatureColumn[], form: SignatureForm): string {
  // Each list of keys ends in ", " where there are keys: a table without partition keys is one group, the whole relation.
  const keyList = keys.map((key) => `${quoteIdentifier(key)}, `).join("");
  const rel = quoteRelation(relation);
  if (form === "native") {
    // The extension's aggregate: integer kinds as their declared type (it reads the stored integer, or the double's bits), text kinds as canonical text.
    const fields = signed.map((column) =>
      wordKind(column.type) === "integer" ? `CAST(${quoteIdentifier(column.name)} AS ${column.type})` : canonicalExpression(column.name, column.type),
    );
    // Up to 32 fields are arguments of their own (native/lakeswap_signature.c); a wider row goes as one struct.
    const args = fields.length <= NATIVE_DIRECT_FIELDS ? fields.join(", ") : `row(${fields.join(", ")})`;
    const digests = `SELECT ${keyList}lakeswap_signature(${args}) AS __s FROM ${rel} GROUP BY ALL`;
    return `SELECT ${keyList}__s.n AS n, CAST(__s.upper AS VARCHAR) AS upper, CAST(__s.lower AS VARCHAR) AS lower FROM (${digests}) ORDER BY ALL`;
  }
  // Lanes are signed here; the sums are taken modulo 2^64 as unsigned numbers (the mathematical modulus, never negative).
  const laneSum = (lane: string): string => `CAST(((sum(${lane}) % ${LANE_MODULUS}) + ${LANE_MODULUS}) % ${LANE_MODULUS} AS VARCHAR)`;
  return `SELECT ${keyList}count(*) AS n, ${laneSum("__a")} AS upper, ${laneSum("__b")} AS lower FROM (${sqlLanes(rel, keyList, signed)}) GROUP BY ALL ORDER BY ALL`;
}

/**
 * The lanes of each row in plain SQL. A stack of projections: fields to words
 * (one MD5 per text field, a cast through BIT per DOUBLE/FLOAT) and the null
 * flag word, MD5 digests to two words, words to their two factors, factors to
 * the two lanes, the finalizer round. Everything after the words is BIGINT:
 * each product is of a number below 2^32 and a signed 32-bit one, so it is
 * exact, and no per-row casts or 128-bit arithmetic are needed (in DuckDB those
 * cost more than the products).
 */
function sqlLanes(relation: string, keyList: string, signed: readonly SignatureColumn[]): string {
  const fields: string[] = [];
  const digests: string[] = [];
  const words: string[] = [];
  signed.forEach((column, j) => {
    const nullable = column.nullable ?? true;
    if (wordKind(column.type) === "integer") {
      const word = integerWordExpression(column.name, column.type);
      fields.push(`${nullable ? `coalesce(${word}, 0)` : word} AS __w${j}`);
      digests.push(`__w${j}`);
      words.push(`__w${j}`);
    } else {
      const digest = `md5_number(${canonicalExpression(column.name, column.type)})`;
      fields.push(`${nullable ? `coalesce(${digest}, 0::UHUGEINT)` : digest} AS __m${j}`);
      // md5_number is the digest read as a little-endian 128-bit integer: its bits 0-62 and 65-127.
      digests.push(`CAST(__m${j} & 9223372036854775807::UHUGEINT AS BIGINT) AS __w${j}_0`, `CAST(__m${j} >> 65 AS BIGINT) AS __w${j}_1`);
      words.push(`__w${j}_0`, `__w${j}_1`);
    }
  });
  // The null flags: flag j is set when column j is NULL or NaN (never, where it is declared not nullable and is no float).
  for (let q = 0; q < flagWordCount(signed.length); q++) {
    const bits = signed
      .map((column, j) => ({ condition: nullCondition(column), j }))
      .filter(({ condition, j }) => condition !== undefined && Math.floor(j / FLAG_BITS) === q)
      .map(({ condition, j }) => `CASE WHEN ${condition} THEN ${1n << BigInt(j % FLAG_BITS)} ELSE 0 END`);
    fields.push(`CAST(${bits.length === 0 ? "0" : bits.join(" | ")} AS BIGINT) AS __n${q}`);
    digests.push(`__n${q}`);
    words.push(`__n${q}`);
  }
  const factors = words.flatMap((word, i) => [`${word} & 4294967295 AS __x${i}`, `${word} >> 32 AS __y${i}`]);
  const lane = (index: 0 | 1): string =>
    laneKeys(index, words.length)
      .items.map(([k0, k1], i) => `(xor(__x${i}, ${k0}) * xor(__y${i}, ${k1}))`)
      .reduce((acc, product) => `xor(${acc}, ${product})`);
  const finalize = (s: string, [k0, k1]: KeyPair): string => `xor(${s}, xor(${s} & 4294967295, ${k0}) * xor(${s} >> 32, ${k1}))`;
  const fieldsToWords = `SELECT ${keyList}${fields.join(", ")} FROM ${relation}`;
  const digestsToWords = `SELECT ${keyList}${digests.join(", ")} FROM (${fieldsToWords})`;
  const wordsToFactors = `SELECT ${keyList}${factors.join(", ")} FROM (${digestsToWords})`;
  const factorsToLanes = `SELECT ${keyList}${lane(0)} AS __a, ${lane(1)} AS __b FROM (${wordsToFactors})`;
  return `SELECT ${keyList}${finalize("__a", laneKeys(0, 0).finalizer)} AS __a, ${finalize("__b", laneKeys(1, 0).finalizer)} AS __b FROM (${factorsToLanes})`;
}
