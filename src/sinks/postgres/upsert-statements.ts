import { LakeswapError } from "../../model/errors.js";
import type { SinkLayout } from "../sink.js";
import { ident, postgresType } from "./sql-names.js";

/** The column upsert stamps with the time a row last changed (its values, or its deletion mark). */
export const UPDATED_AT = "_lakeswap_updated_at";

/** The column upsert sets when a row's key left the lake (soft delete, the default); NULL while the lake holds it. */
export const DELETED_AT = "_lakeswap_deleted_at";

/** The stamp column of upsert targets made before `_lakeswap_updated_at` (kept working where the layer has no such column). */
const LEGACY_UPDATED_AT = "updated_at";

const TIMESTAMPTZ = "timestamp with time zone";

/**
 * The stamp column of an existing upsert target (its columns as `format_type` prints them): `_lakeswap_updated_at`, or
 * `updated_at` where an older lakeswap made the table (kept working while the layer has no column of that name; else
 * refused with the migration to run). `described` prefixes messages; `target` is `schema.table`.
 */
export function existingStamp(described: string, target: string, layout: SinkLayout, existing: ReadonlyMap<string, string>): string {
  if (existing.get(UPDATED_AT) === TIMESTAMPTZ) return UPDATED_AT;
  const sent = layout.columns.find((c) => c.name === LEGACY_UPDATED_AT);
  if (existing.get(UPDATED_AT) === undefined && existing.get(LEGACY_UPDATED_AT) === TIMESTAMPTZ) {
    if (!sent) return LEGACY_UPDATED_AT;
    throw new LakeswapError(
      "CONFLICT",
      `${described}: column 'updated_at' is ${TIMESTAMPTZ} in the existing table, but lake table ${layout.lakeTable} sends ${postgresType(sent)}: ` +
        `this table was made by an older lakeswap, whose upsert stamped updated_at; now the stamp is ${UPDATED_AT}: ` +
        `ALTER TABLE ${target} RENAME COLUMN updated_at TO ${UPDATED_AT}; ALTER TABLE ${target} ADD COLUMN updated_at ${postgresType(sent)}; then rerun the sync (it sends every partition again)`,
    );
  }
  throw new LakeswapError(
    "CONFLICT",
    `${described}: the existing table has no column ${UPDATED_AT} timestamptz, which upsert sets (the time a row last changed); ` +
      `add it (ALTER TABLE ${target} ADD COLUMN ${UPDATED_AT} timestamptz NOT NULL DEFAULT now())`,
  );
}

/**
 * The INSERT ... ON CONFLICT that merges the temporary table into the target; a row whose values did not change keeps
 * its stamp, unless it was marked deleted (its key is back in the lake: the mark is cleared).
 */
export function upsertStatement(target: string, temp: string, layout: SinkLayout, stampColumn: string): string {
  const columns = layout.columns.map((c) => ident(c.name));
  const key = layout.primaryKey.map(ident);
  const others = layout.columns.filter((c) => !layout.primaryKey.includes(c.name)).map((c) => ident(c.name));
  const insert = `INSERT INTO ${target} AS t (${columns.join(", ")}) SELECT ${columns.join(", ")} FROM ${temp} ON CONFLICT (${key.join(", ")})`;
  const stamp = `${ident(stampColumn)} = now(), ${ident(DELETED_AT)} = NULL`;
  const marked = `t.${ident(DELETED_AT)} IS NOT NULL`;
  if (others.length === 0) return `${insert} DO UPDATE SET ${stamp} WHERE ${marked}`;
  const set = others.map((c) => `${c} = EXCLUDED.${c}`).join(", ");
  const changed = `(${others.map((c) => `t.${c}`).join(", ")}) IS DISTINCT FROM (${others.map((c) => `EXCLUDED.${c}`).join(", ")})`;
  // ROW(...) of one column is needed for IS DISTINCT FROM to compare rows rather than a parenthesized value.
  const rowChanged = others.length === 1 ? `t.${others[0]} IS DISTINCT FROM EXCLUDED.${others[0]}` : changed;
  return `${insert} DO UPDATE SET ${set}, ${stamp} WHERE ${rowChanged} OR ${marked}`;
}

/**
 * The condition on target rows `t` that picks the live rows of one partition (its values as $1, $2, ...) whose key
 * the partition's rows (`temp`) no longer hold.
 */
export function goneKeysCondition(layout: SinkLayout, temp: string): string {
  const inPartition = layout.partitionKeys.map((key, i) => `t.${ident(key)} = $${i + 1}`);
  const stillThere = `EXISTS (SELECT 1 FROM ${temp} r WHERE ${layout.primaryKey.map((key) => `r.${ident(key)} = t.${ident(key)}`).join(" AND ")})`;
  return [...inPartition, `NOT ${stillThere}`, ...(layout.hardDelete ? [] : [`t.${ident(DELETED_AT)} IS NULL`])].join(" AND ");
}

/** What happens to the gone keys' rows: deleted (`hard_delete`) or marked, with the dataset's delete flag set true. */
export function goneKeysStatement(target: string, layout: SinkLayout, stampColumn: string, condition: string): string {
  if (layout.hardDelete) return `DELETE FROM ${target} t WHERE ${condition}`;
  const flag = layout.deleteFlag ? `, ${ident(layout.deleteFlag)} = true` : "";
  return `UPDATE ${target} t SET ${ident(DELETED_AT)} = now(), ${ident(stampColumn)} = now()${flag} WHERE ${condition}`;
}
