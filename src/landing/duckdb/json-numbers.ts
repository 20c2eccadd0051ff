import { quoteLiteral } from "../../model/sql.js";
import { fieldKey } from "./field-names.js";
import { shown, type LandColumn } from "./landing-sql.js";

/*
 * DuckDB's JSON reader reads a number with a fraction or an exponent as a double, and gives back its text as the
 * double writes it: `1.10` as `1.1`, `1e2` as `100.0`, `9007199254740993.0` as `9007199254740992.0`,
 * `1.000000000000000001` as `1.0`, `1e-400` as `0.0`. Every column is converted from its text (./value-conversion.ts:
 * exactly, or the row is bad), so such a number is converted from its text as written in the line instead, as a CSV
 * field is: a DECIMAL or integer column gets every digit or a bad row, a VARCHAR column the number as sent, an epoch
 * time its own fraction.
 */

/** The JSON path of column `c`'s field in a line, by the line's own spelling of its name (`__keys`, any case). */
export function fieldPath(c: LandColumn): string {
  return `'$."' || coalesce(__keys[list_position(__lower, ${quoteLiteral(fieldKey(c))})], ${quoteLiteral(fieldKey(c))}) || '"'`;
}

/** A double's text as DuckDB's JSON reader writes it: a fraction, an exponent, or both. */
const DOUBLE_TEXT = "-?[0-9]+(\\.[0-9]+([eE][+-]?[0-9]+)?|[eE][+-]?[0-9]+)";

/** The column's numbers as written in the line (`"amount": 1.10`, its name in any case; nested fields of that name too). */
function writtenNumbers(c: LandColumn): string {
  const name = fieldKey(c).replace(/[\\^$.|?*+()[\]{}]/g, "\\$&");
  return `regexp_extract_all(__raw, ${quoteLiteral(`(?i)"${name}"\\s*:\\s*(-?[0-9][0-9.eE+-]*)`)}, 1)`;
}

/**
 * Whether the line plainly holds the double's text `value` as a field's whole number (after `:` or `: `, before `,`
 * or `}`): most doubles are written as they read back (`12.5`), and this costs a substring search. A line with a run
 * of 17 digits is looked at closely anyway: a number that long may read back as another field's number.
 */
function plainlyWritten(value: string): string {
  const forms = [": %,", ":%,", ": %}", ":%}", ": %\n", ": %\r"].map((form) => {
    const [before, after] = form.split("%") as [string, string];
    return `contains(__raw, ${quoteLiteral(before)} || ${value} || ${quoteLiteral(after)})`;
  });
  return `((${forms.join(" OR ")}) AND NOT regexp_matches(__raw, '[0-9][0-9.]{16}'))`;
}

/**
 * For each declared column (`__values[i]` the reader's text), NULL where the value is as written (a string, an
 * integer, a double that reads back as written), else the numbers under its name in the line that are that double
 * (a nested field of the same name holds another, as a rule), each once: the field's own is the one of them, if
 * there is one. Computed once per line (`__n<i>`), for `numberAsWritten` and `numberProblems`.
 */
export function writtenForms(declared: readonly LandColumn[]): string[] {
  return declared.map((c, i) => {
    const value = `__values[${i + 1}]`;
    const path = fieldPath(c);
    const written = writtenNumbers(c);
    return (
      `CASE WHEN regexp_full_match(${value}, '${DOUBLE_TEXT}') AND NOT ${plainlyWritten(value)} ` +
      `AND NOT list_contains(${written}, ${value}) AND json_type(__raw, ${path}) = 'DOUBLE' ` +
      `THEN list_distinct(list_filter(${written}, t -> TRY_CAST(t AS DOUBLE) = TRY_CAST(${value} AS DOUBLE))) END AS __n${i}`
    );
  });
}

/** Column `c`'s text (the `index`th declared, `value`), a JSON double's taken as written in the line (NULL where that is not one number: `numberProblems`). */
export function numberAsWritten(index: number, value: string): string {
  return `CASE WHEN __n${index} IS NULL THEN ${value} WHEN len(__n${index}) = 1 THEN __n${index}[1] END`;
}

/**
 * The rows whose JSON double for a column cannot be told as written: no number under that name in the line is that
 * double (a name written with JSON escapes, which the pattern does not read), or several are (nested fields of the
 * same name, written otherwise). Such a row is bad, asking for the number as a JSON string.
 */
export function numberProblems(declared: readonly LandColumn[]): string[] {
  return declared.map((c, i) => {
    const reason =
      `${quoteLiteral(`column ${c.name}: `)} || ${shown(`__values[${i + 1}]`)} || ${quoteLiteral(
        " is how JSON readers keep this number (as a double), and the line does not show which number it was written as: send it as a JSON string (\"12345678901234567.89\") to keep it as written",
      )}`;
    return `CASE WHEN __n${i} IS NOT NULL AND len(__n${i}) <> 1 THEN ${reason} END`;
  });
}
