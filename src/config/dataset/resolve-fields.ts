import { InvalidInputError } from "../../model/errors.js";
import { printable } from "../../model/sql.js";
import type { PipelineColumn } from "../ingest-types.js";

/**
 * `fields` of a file source (`source.fields`) or of an ingest namespace, `at` its key: each declared column it names
 * is read from the delivery's header, field or column of that name (`field`). Refused: a name no column is declared
 * under, a name with control characters or spaces around it, two columns read from one name (case does not matter, as
 * it does not when names are matched), and in JSONL a name a JSON path cannot spell (`"`, `\`, `*`).
 */
export function resolveFields(
  columns: readonly PipelineColumn[],
  fields: Readonly<Record<string, string>> | undefined,
  source: { readonly format: "csv" | "jsonl" | "parquet"; readonly header: boolean },
  at: string,
  /** ` (did you mean 'x'?)` for a name close to a known one (config-messages.ts, handed in: ingest-config.ts may not load it). */
  didYouMean: (value: string, known: readonly string[]) => string,
): PipelineColumn[] {
  if (fields === undefined) return [...columns];
  const format = source.format;
  if (format === "csv" && !source.header) {
    throw new InvalidInputError(`${at}: with header: false a CSV file's fields are the declared columns in order, and have no names to map: remove fields (or header: false)`);
  }
  const names = columns.map((c) => c.name);
  for (const [column, field] of Object.entries(fields)) {
    const where = `${at}.${column}`;
    if (!names.includes(column)) {
      throw new InvalidInputError(`${where}: no column ${column} is declared${didYouMean(column, names)}; fields maps declared columns to the names they have in the files`);
    }
    if (/\p{Cc}/u.test(field)) throw new InvalidInputError(`${where}: '${printable(field, 80)}' holds a control character; name the field as its file spells it`);
    if (field.trim() !== field) {
      throw new InvalidInputError(`${where}: '${printable(field, 80)}' has spaces around it; write the name without them (a CSV header's names are read without the spaces around them)`);
    }
    if (format === "jsonl" && /["\\*]/.test(field)) {
      throw new InvalidInputError(`${where}: '${printable(field, 80)}' holds '"', '\\' or '*', which lakeswap cannot read a JSONL field by; rename the field where the files are written`);
    }
  }
  const mapped = columns.map((c) => (fields[c.name] !== undefined ? { ...c, field: fields[c.name] } : c));
  const readers = new Map<string, string[]>();
  for (const c of mapped) {
    const key = (c.field ?? c.name).toLowerCase();
    readers.set(key, [...(readers.get(key) ?? []), c.name]);
  }
  const shared = [...readers].find(([, readBy]) => readBy.length > 1);
  if (shared) {
    const [field, readBy] = shared;
    throw new InvalidInputError(
      `${at}: columns ${readBy.join(" and ")} would both be read from '${printable(field, 80)}' (case does not matter); map each column to a field of its own`,
    );
  }
  return mapped;
}
