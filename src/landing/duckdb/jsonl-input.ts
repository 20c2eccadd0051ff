import type { DuckDBConnection } from "@duckdb/node-api";
import { InvalidInputError } from "../../model/errors.js";
import { printable, quoteIdentifier, quoteLiteral } from "../../model/sql.js";
import type { LandRequest } from "../landing.js";
import { shown, sqlList, type LandColumn, type SourceRows } from "./landing-sql.js";
import { loadLines, numberedLines } from "./text-lines.js";
import { dropUnterminated, type HeldLines } from "./unterminated-lines.js";
import { fieldKey, fieldsHint, namedFields } from "./field-names.js";
import { fieldPath, numberAsWritten, numberProblems, writtenForms } from "./json-numbers.js";

/**
 * JSONL: one JSON object per line; a line that is not one is a bad row with its number and text. Field names match
 * the declared columns (or the names `source.fields` gives) case-insensitively, as CSV headers do (`Title` is column
 * title); two fields of one object whose names differ only in case are a bad row naming both.
 */
export async function readJsonl(connection: DuckDBConnection, request: LandRequest, lines: string, held?: HeldLines): Promise<SourceRows> {
  await loadLines(connection, request, lines, [], false, held?.tails);
  // The unterminated last line of a held file is not read (`LandRequest.holdUnterminatedSince`).
  await dropUnterminated(connection, lines, held);
  return jsonlRows(request, lines);
}

/**
 * The rows of a JSONL delivery (see readJsonl) from the relation of its lines `lines` (`__file`, `__line`, `__raw`): a
 * table, or DuckDB's line reader over the files (./text-lines.ts, `streamedLines`), whose rows are then `fingerprinted`
 * (each with a hash of its line, by which `locateBadLines` finds a bad one in its file).
 */
export function jsonlRows(request: LandRequest, lines: string, options: { readonly fingerprinted?: boolean } = {}): SourceRows {
  // Fields the columns do not declare (ingest): kept as one JSON object in the extra column, or the row is a bad one.
  const unknown = request.unknownFields;
  const declared = request.columns.filter((c) => c.name !== unknown?.column);
  // A valid JSON text is an object exactly when its first character past white space is '{': a pattern, where
  // json_type(__raw::JSON) would parse every line a second time.
  const invalid = `CASE WHEN NOT json_valid(__raw) THEN 'not valid JSON' WHEN NOT regexp_matches(__raw, '^[ \\t\\r\\n]*[{]') THEN 'not a JSON object' END`;
  // The object without its declared fields (a merge patch that sets them to null), for valid objects only. Most events
  // hold declared fields only: then it is '{}', known from the keys alone, at a fifth of the cost of the patch.
  // Each column by its name in the files (source.fields), else its own; lowercase, as the names are matched.
  const patch = quoteLiteral(JSON.stringify(Object.fromEntries(declared.map((c) => [fieldKey(c), null]))));
  const names = `[${declared.map((c) => quoteLiteral(fieldKey(c))).join(", ")}]::VARCHAR[]`;
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
  const paths = `[${declared.map((c) => quoteLiteral(`$."${fieldKey(c)}"`)).join(", ")}]`;
  // A folded object's values are all read at once, in the order of its keys, and each declared field's is picked by
  // the position of its name among the lowered keys (0, no value, where it is not given).
  const positions = `[${declared.map((c) => `coalesce(list_position(__lower, ${quoteLiteral(fieldKey(c))}), 0)`).join(", ")}]`;
  const extracted =
    `CASE WHEN __folded AND __invalid IS NULL THEN list_select(json_extract_string(__raw, '$.*'), ${positions}) ` +
    `ELSE json_extract_string(CASE WHEN __invalid IS NULL THEN __raw END, ${paths}) END`;
  // A JSON "" is an empty value, like null, except in a non-nullable text column (docs/signatures.md, step 1).
  const values = request.columns.map((c, i) => {
    if (c.name === unknown?.column) return `CASE WHEN __invalid IS NULL THEN nullif(__rest, '{}') END AS __s${i}`;
    const at = declared.indexOf(c) + 1;
    // A JSON double is read as written in the line (./json-numbers.ts).
    const value = numberAsWritten(at - 1, `__values[${at}]`);
    return `${c.type === "VARCHAR" ? value : `nullif(${value}, '')`} AS __s${i}`;
  });
  const nested = [...nestedValueProblems(declared), ...numberProblems(declared)];
  const structural = nested.length === 0 ? "__invalid" : `coalesce(__invalid, ${nested.join(", ")})`;
  return {
    select:
      `SELECT __file, __line, ${structural} AS __structural, ${values.join(", ")}${options.fingerprinted ? `, ${fingerprint()} AS __fingerprint` : ""} ` +
      `FROM (SELECT *${writtenForms(declared).map((form) => `, ${form}`).join("")} ` +
      `FROM (SELECT __file, __line, __raw, __invalid, __rest, __keys, __lower, ${extracted} AS __values ` +
      `FROM (SELECT __file, __line, __raw, __rest, __folded, __keys, __lower, coalesce(__invalid0, ${repeated}, ${unknownProblem}) AS __invalid ` +
      `FROM (SELECT __file, __line, __raw, __invalid0, __keys, __lower, __exact, __folded, ${rest} AS __rest ` +
      `FROM (SELECT *, ${folded} AS __folded FROM (SELECT *, ${lowered} AS __lower FROM (SELECT *, ${cased} AS __cased ` +
      `FROM (SELECT *, ${exact} AS __exact ` +
      // Each object's field names once, for the repeated ones and the undeclared ones.
      `FROM (SELECT __file, __line, __raw, __invalid0, CASE WHEN __invalid0 IS NULL THEN json_keys(__raw) END AS __keys ` +
      // Lines of spaces only are not rows (as empty lines are not); a pattern is ten times faster here than trim().
      `FROM (SELECT __file, __line, __raw, ${invalid} AS __invalid0 FROM ${lines} WHERE regexp_matches(__raw, '[^ ]')))))))))))`,
    types: request.columns.map(() => "VARCHAR"),
    rawTable: lines,
    fingerprinted: options.fingerprinted ?? false,
  };
}

/** A line's fingerprint (of its text `raw`): DuckDB's 64-bit hash. Lines of one file that share it are told apart by count. */
function fingerprint(raw = "__raw"): string {
  return `hash(${raw})`;
}

/**
 * The bad rows of a JSONL delivery read without line numbers (its rows `fingerprinted`), found again in their files:
 * the bad rows of `landed` (by `checks`, its bad partition values in `badKeys`) go into `badRows`; the lines of each
 * file that holds one are read in order, numbered, and those with a bad row's fingerprint kept in `found`; then each
 * bad row, with its file, line, reason and text, goes into the new table `rejected`. Lines of the same text are rows of
 * the same verdict, so each fingerprint must be found in its file exactly as many times as it has bad rows, with one
 * reason: false (nothing kept) where it is not (a good line that shares a bad one's hash), and the exact path then
 * reads the delivery.
 */
export async function locateBadLines(
  connection: DuckDBConnection,
  request: LandRequest,
  tables: { readonly landed: string; readonly badKeys: string; readonly badRows: string; readonly found: string; readonly rejected: string },
  checks: { readonly reason: string; readonly keysMatch: string },
): Promise<boolean> {
  const { badRows, found, rejected } = tables;
  await connection.run(
    `CREATE TABLE ${badRows} AS SELECT r.__file, r.__fingerprint, ${checks.reason} AS reason ` +
      `FROM ${tables.landed} r LEFT JOIN ${tables.badKeys} b ON ${checks.keysMatch} WHERE ${checks.reason} IS NOT NULL`,
  );
  // The lines are numbered in the order the reader gives them (a streamed landing may have turned that off).
  await connection.run("RESET SESSION preserve_insertion_order");
  const bad = `(SELECT __file, __fingerprint, count(*) AS n, count(DISTINCT reason) AS reasons, any_value(reason) AS reason FROM ${badRows} GROUP BY ALL)`;
  const files = (await connection.runAndReadAll(`SELECT DISTINCT __file FROM ${badRows} ORDER BY 1`)).getRowsJS().map(([file]) => Number(file));
  await connection.run(`CREATE TABLE ${found} (__file INTEGER, __line BIGINT, __raw VARCHAR)`);
  for (const file of files) {
    await connection.run(
      `INSERT INTO ${found} SELECT * FROM ${numberedLines(request.files[file - 1]!, file - 1)} ` +
        `WHERE ${fingerprint()} IN (SELECT __fingerprint FROM ${badRows} WHERE __file = ${file})`,
    );
  }
  const lines = `(SELECT __file, ${fingerprint()} AS __fingerprint, count(*) AS n FROM ${found} GROUP BY ALL)`;
  const disagreeing = await connection.runAndReadAll(
    `SELECT count(*) FROM ${bad} b FULL JOIN ${lines} l ON b.__file = l.__file AND b.__fingerprint = l.__fingerprint WHERE b.n IS DISTINCT FROM l.n OR b.reasons > 1`,
  );
  if (Number(disagreeing.getRowsJS()[0]?.[0]) > 0) return false;
  await connection.run(
    `CREATE TABLE ${rejected} AS SELECT ${sqlList(request.files)}[f.__file] AS file, f.__line AS line, b.reason, f.__raw AS raw ` +
      `FROM ${found} f JOIN ${bad} b ON b.__file = f.__file AND b.__fingerprint = ${fingerprint("f.__raw")} ORDER BY f.__file, f.__line`,
  );
  return true;
}

/**
 * A JSON object or array for a VARCHAR field would be stored as its JSON text, a value nobody sent as text: a bad
 * row. Only a value that starts like one (rare) is looked up again, by the object's own spelling of the field.
 */
function nestedValueProblems(declared: readonly LandColumn[]): string[] {
  return declared.flatMap((c, i) => {
    if (c.type !== "VARCHAR") return [];
    const value = `__values[${i + 1}]`;
    const path = fieldPath(c);
    const reason =
      `${quoteLiteral(`column ${c.name}: `)} || ${shown(value)} || ' is a JSON ' || lower(json_type(__raw, ${path})) || ` +
      `${quoteLiteral(", not text: send it as a JSON string, or leave the field undeclared (ingest keeps it in the extra column)")}`;
    return [`CASE WHEN starts_with(${value}, '{') OR starts_with(${value}, '[') THEN CASE WHEN json_type(__raw, ${path}) IN ('OBJECT', 'ARRAY') THEN ${reason} END END`];
  });
}

/**
 * A JSONL delivery whose file never gives a declared field (in any line, in any case) is refused naming the file and
 * the field, as a CSV file whose header lacks a column: a misspelled declaration would otherwise land every value as
 * NULL (a column added in place excepted). Found from the landed values first (a column with a value in a file is given there), so that the lines are
 * read again only for a column that is NULL throughout a file.
 */
export async function refuseAbsentFields(connection: DuckDBConnection, request: LandRequest, landed: string, lines: string): Promise<void> {
  // A column added to the table in place may be absent from a delivery exported before it (NULL there).
  const fields = request.columns.filter((c) => c.name !== request.unknownFields?.column && !c.added);
  if (fields.length === 0) return;
  const counts = (
    await connection.runAndReadAll(`SELECT __file, ${fields.map((c) => `count(${quoteIdentifier(c.name)})`).join(", ")} FROM ${landed} GROUP BY __file ORDER BY __file`)
  ).getRowsJS();
  const suspects = counts
    .map(([file, ...given]) => ({ file: Number(file), columns: fields.filter((_, i) => Number(given[i]) === 0).map((c) => c.name) }))
    .filter((s) => s.columns.length > 0);
  if (suspects.length === 0) return;
  const wanted = [...new Set(suspects.flatMap((s) => s.columns))];
  const fieldOfColumn = new Map(fields.map((c) => [c.name, fieldKey(c)]));
  const objects =
    `SELECT __file, list_transform(json_keys(__raw), k -> lower(k)) AS __lower, json_keys(__raw) AS __keys FROM ${lines} ` +
    `WHERE __file IN (${suspects.map((s) => s.file).join(", ")}) AND json_valid(__raw) AND regexp_matches(__raw, '^[ \\t\\r\\n]*[{]')`;
  const found = (
    await connection.runAndReadAll(
      `SELECT __file, [${wanted.map((name) => `bool_or(list_contains(__lower, ${quoteLiteral(fieldOfColumn.get(name)!)}))`).join(", ")}], list_sort(list_distinct(flatten(list(__keys))))[1:20] ` +
        `FROM (${objects}) GROUP BY __file ORDER BY __file`,
    )
  ).getRowsJS() as [number, boolean[], string[]][];
  // A file without one valid object has no fields to name: its lines are bad rows, reported as such.
  for (const [file, given, keys] of found) {
    const absentNames = suspects.find((s) => s.file === Number(file))!.columns.filter((name) => !given[wanted.indexOf(name)]);
    if (absentNames.length === 0) continue;
    const absent = fields.filter((c) => absentNames.includes(c.name));
    const shownKeys = keys.length === 0 ? "none" : printable(keys.join(", "), 300);
    const hint = fieldsHint(absent, keys);
    throw new InvalidInputError(
      `${request.files[Number(file) - 1]}: no line has a field ${namedFields(absent)} (the lines' fields are ${shownKeys}).` +
        (hint || " Name the fields as the columns are declared (case does not matter), map them with source.fields, or remove the column from the dataset's columns"),
    );
  }
}
