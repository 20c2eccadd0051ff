import type { DuckDBConnection } from "@duckdb/node-api";
import { InvalidInputError } from "../../model/errors.js";
import { printable, quoteLiteral } from "../../model/sql.js";
import type { LandRequest } from "../landing.js";
import type { SourceRows } from "./landing-sql.js";
import { loadLines } from "./text-lines.js";
import { dropUnterminated, holdOpenQuotes, type HeldLines } from "./unterminated-lines.js";
import { fieldKey, fieldsHint, namedFields } from "./field-names.js";
import { compressedFileError } from "./compressed-files.js";

/**
 * CSV, parsed here (RFC 4180: fields separated by the delimiter, quoted with
 * `"`, a quote inside a quoted field doubled), so that each record keeps its
 * first line's number and its text. A record spans lines while a quote is
 * open. An empty field and a quoted empty field are NULL. With a header, the
 * declared columns are found by name (or by the name `source.fields` gives),
 * case-insensitively, in each file's header; without one, by position. `held`: the files whose last record may be
 * held back (`LandRequest.holdUnterminatedSince`).
 */
export async function readCsv(connection: DuckDBConnection, request: LandRequest, lines: string, records: string, held?: HeldLines): Promise<SourceRows> {
  await loadLines(connection, request, lines, [`CASE WHEN contains(__raw, '"') THEN length(__raw) - length(replace(__raw, '"', '')) ELSE 0 END AS __quotes`], true, held?.tails);
  // A line with an odd number of quotes opens (or closes) a quoted field across lines: only then are lines grouped into records.
  const spansLines = (await connection.runAndReadAll(`SELECT coalesce(bool_or(__quotes % 2 = 1), false) FROM ${lines}`)).getRowsJS()[0]?.[0] === true;
  let rawTable = lines;
  if (spansLines) {
    const open = `coalesce(sum(__quotes) OVER (PARTITION BY __file ORDER BY __line ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) % 2 = 1`;
    const start = `max(CASE WHEN __open THEN NULL ELSE __line END) OVER (PARTITION BY __file ORDER BY __line ROWS UNBOUNDED PRECEDING)`;
    // A line end inside a quoted field (the quote still open after the line) is the field's: its CRs are kept, as
    // DuckDB's reader keeps them ("a\r\nb" is a, CR, LF, b); only the record's own line end drops them.
    const line = `CASE WHEN __crs > 0 AND __open <> (__quotes % 2 = 1) THEN __raw || repeat(chr(13), __crs) ELSE __raw END`;
    await connection.run(
      `CREATE TABLE ${records} AS SELECT __file, __start AS __line, string_agg(${line}, chr(10) ORDER BY __line) AS __raw, sum(__quotes)::BIGINT AS __quotes ` +
        `FROM (SELECT *, ${start} AS __start FROM (SELECT *, ${open} AS __open FROM ${lines})) GROUP BY __file, __start`,
    );
    rawTable = records;
  }
  // A file's last record that its writer is halfway through is held back, its lines with it (./unterminated-lines.ts):
  // one whose last line has no line end, or (lines with a quote inside) one that leaves a quote open.
  if (spansLines) await holdOpenQuotes(connection, lines, held);
  await dropUnterminated(connection, rawTable, held);
  const fields = (raw: string): string => recordFields(raw, request.delimiter);

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
  const structural = `CASE ${recordProblems(request, "r", layout.width)} END`;
  const from =
    `FROM (SELECT __file, __line, __quotes, CASE WHEN __quotes > 0 THEN length(__raw) - length(replace(__raw, chr(10), '')) END AS __continued, ` +
    `${fields("__raw")} AS __fields, ${malformed("__raw", request.delimiter)} AS __malformed FROM ${rawTable} WHERE __raw <> '') r`;
  const headerLines = layouts.filter((l) => l.headerLine > 0).map((l) => `(r.__file = ${l.file} AND r.__line = ${l.headerLine})`);
  const select =
    `SELECT r.__file, r.__line, ${structural} AS __structural, ${columns.map((_, i) => `nullif(r.__fields[${layout.position(i)}], '') AS __s${i}`).join(", ")} ` +
    (shared
      ? `${from}${headerLines.length > 0 ? ` WHERE NOT (${headerLines.join(" OR ")})` : ""}`
      : `${from} JOIN (VALUES ${layoutRows}) h(${layoutColumns}) ON r.__file = h.__file WHERE r.__line > h.__header_line`);
  return { select, types: columns.map(() => "VARCHAR"), rawTable };
}

/** Where each declared column is in one CSV file's records (1-based), and how many fields a record has; refuses a header that lacks a column. */
export function csvLayout(request: LandRequest, file: string, line: number, first: (string | null)[]): { positions: number[]; width: number } {
  const columns = request.columns;
  const delimiterHint = (): string => {
    const text = first.join(request.delimiter);
    const other = [",", ";", "\t", "|"].find((d) => d !== request.delimiter && text.includes(d));
    return first.length === 1 && other ? ` The line is one field, and holds '${printable(other)}': is that the delimiter? Set source.delimiter: '${printable(other)}'.` : "";
  };
  if (!request.header) {
    if (first.length === 1 && columns.length > 1) {
      const compressed = compressedFileError(file, "csv");
      if (compressed) throw compressed;
      throw new InvalidInputError(`${file}:${line}: the line has 1 field, but ${columns.length} columns are declared (header: false).${delimiterHint()}`);
    }
    return { positions: columns.map((_, i) => i + 1), width: columns.length };
  }
  const names = first.map((name) => (name ?? "").trim().toLowerCase());
  // Each column by its name in the files (source.fields), else its own.
  const positions = columns.map((c) => names.indexOf(fieldKey(c)) + 1);
  // A column added to the table in place may be absent from a delivery exported before: position 0, NULL there.
  const missing = columns.filter((c, i) => positions[i] === 0 && !c.added);
  const shownHeader = printable(first.map((n) => n ?? "").join(request.delimiter), 200);
  if (missing.length > 0) {
    const compressed = compressedFileError(file, "csv");
    if (compressed) throw compressed;
    const hint = delimiterHint() || fieldsHint(missing, first.map((n) => n ?? ""));
    throw new InvalidInputError(
      `${file}:${line}: the header has no column ${namedFields(missing)} (the header is '${shownHeader}').${hint}` +
        `${hint ? "" : " Name the columns in the header as declared (case does not matter), map them with source.fields, or set header: false to take them by position."}`,
    );
  }
  const twice = columns.filter((c) => names.filter((n) => n === fieldKey(c)).length > 1);
  if (twice.length > 0) {
    throw new InvalidInputError(`${file}:${line}: the header names column ${namedFields(twice)} more than once (case does not matter): '${shownHeader}'. Rename or remove one.`);
  }
  return { positions, width: first.length };
}

/**
 * Why a record is bad, or NULL, as the exact reader judges its text (SQL `raw`: its lines, joined by line feeds), for a
 * record that DuckDB's reader refused (./csv-records.ts). `width` is the file's record width.
 */
export function recordProblem(request: LandRequest, raw: string, width: number): string {
  const quotes = `length(${raw}) - length(replace(${raw}, '"', ''))`;
  const continued = `length(${raw}) - length(replace(${raw}, chr(10), ''))`;
  return (
    `(SELECT CASE ${recordProblems(request, "r", width)} END FROM (SELECT ${recordFields(raw, request.delimiter)} AS __fields, ` +
    `${malformed(raw, request.delimiter)} AS __malformed, ${quotes} AS __quotes, ${continued} AS __continued) r)`
  );
}

/**
 * The WHEN branches of a record's problems (`alias`: __quotes, __continued, __fields, __malformed): a quote left open,
 * malformed quoting, then too many or too few fields.
 */
function recordProblems(request: LandRequest, alias: string, width: number | string): string {
  const count = `len(${alias}.__fields)`;
  const widthProblem = request.header
    ? `'the line has ' || ${count} || ' fields, but the header of this file has ' || ${width}`
    : `'the line has ' || ${count} || ' fields, but ' || ${width} || ' columns are declared (header: false maps fields to the declared columns by position)'`;
  return (
    `WHEN ${alias}.__quotes % 2 = 1 THEN 'unterminated quote: a field opened with " on this line is never closed, so the ' || ${alias}.__continued || ' line(s) after it ` +
    `were read into it (a quote inside a quoted field is written twice: "")' ` +
    `WHEN ${alias}.__malformed THEN 'malformed quoting: a quote inside an unquoted field, or text after a closing quote (quote the whole field, and write a quote inside it twice: "")' ` +
    `WHEN ${count} <> ${width} THEN ${widthProblem}`
  );
}

/** A quoted field, or a plain one, after its delimiter (a regular expression). */
function quotedOrPlain(delimiter: string): string {
  return `("(?:[^"]|"")*"|[^${escapeRegex(delimiter)}"]*)`;
}

/** A record's fields (SQL over its text `raw`): a quoted field unquoted, its doubled quotes single. */
function recordFields(raw: string, delimiter: string): string {
  return (
    `CASE WHEN NOT contains(${raw}, '"') THEN string_split(${raw}, ${quoteLiteral(delimiter)}) ` +
    `ELSE list_transform(regexp_extract_all(${quoteLiteral(delimiter)} || ${raw}, ${quoteLiteral(`${escapeRegex(delimiter)}${quotedOrPlain(delimiter)}`)}, 1), ` +
    `f -> CASE WHEN starts_with(f, '"') THEN replace(f[2:-2], '""', '"') ELSE f END) END`
  );
}

/** Whether a record's quoting is malformed (SQL over its text `raw`): a quote inside an unquoted field, or text after a closing quote. */
function malformed(raw: string, delimiter: string): string {
  return `contains(${raw}, '"') AND NOT regexp_full_match(${quoteLiteral(delimiter)} || ${raw}, ${quoteLiteral(`(?:${escapeRegex(delimiter)}${quotedOrPlain(delimiter)})*`)})`;
}

function escapeRegex(text: string): string {
  return text.replace(/[\\^$.*+?()[\]{}|-]/g, "\\$&");
}

function emptySource(count: number): string {
  return `SELECT NULL::INTEGER AS __file, NULL::BIGINT AS __line, NULL::VARCHAR AS __structural, ${Array.from({ length: count }, (_, i) => `NULL::VARCHAR AS __s${i}`).join(", ")} WHERE false`;
}
