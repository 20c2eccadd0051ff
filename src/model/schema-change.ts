import { LakeswapError } from "./errors.js";
import { declaredShape, defineTable, type Column, type TableDefinition } from "./table.js";
import { wordKind } from "./signature.js";

/**
 * Schema changes in place (docs/lake.md, "Schema changes"). A table declared with other columns than the catalog
 * holds is changed in place where every run written before stays readable as the new schema and keeps its content
 * signature: columns added (anywhere: readers match files by column name, and a column a run lacks is NULL), an
 * integer or float widened, a DECIMAL's precision widened with the same scale, the compression of new runs changed.
 * Anything else (a column dropped, renamed or narrowed, a scale changed, other partition keys) would change what the
 * runs already written mean, and is refused naming each change, unless the sync rebuilds the table by swap
 * (`--rebuild-schema`: every run rewritten, then moved to; under other partition keys, a new layout built aside and
 * switched to in one step).
 */

/** The types each integer and float type widens to in place: every value converts exactly, and signs as the same word. */
const WIDENS_TO: Readonly<Record<string, readonly string[]>> = {
  TINYINT: ["SMALLINT", "INTEGER", "BIGINT"],
  SMALLINT: ["INTEGER", "BIGINT"],
  INTEGER: ["BIGINT"],
  UTINYINT: ["USMALLINT", "UINTEGER", "SMALLINT", "INTEGER", "BIGINT"],
  USMALLINT: ["UINTEGER", "INTEGER", "BIGINT"],
  UINTEGER: ["BIGINT"],
  FLOAT: ["DOUBLE"],
};

/**
 * Why a column's type cannot change from `from` to `to` in place, or undefined where it can: a widening whose values
 * all convert exactly and keep their signature words (docs/signatures.md, step 3). A DECIMAL keeps its words while its
 * precision stays on one side of 18 (an integer word up to 18 digits, the canonical text above), so a widening
 * across 18 digits would change every signature of the column.
 */
function wideningRefusal(from: string, to: string): string | undefined {
  if (WIDENS_TO[from]?.includes(to)) return undefined;
  const decimal = (type: string) => /^DECIMAL\((\d+),(\d+)\)$/.exec(type);
  const [a, b] = [decimal(from), decimal(to)];
  if (a && b) {
    if (a[2] !== b[2]) return "its scale changes (values would be rescaled)";
    if (Number(b[1]) < Number(a[1])) return "its precision narrows (values may no longer fit)";
    if (wordKind(from) !== wordKind(to)) return "its precision crosses 18 digits, which changes how its values are signed";
    return undefined;
  }
  const order = ["TINYINT", "SMALLINT", "INTEGER", "BIGINT"];
  if (order.includes(from) && order.includes(to) && order.indexOf(to) < order.indexOf(from)) return "it narrows (values may no longer fit)";
  if (from === "DOUBLE" && to === "FLOAT") return "it narrows (values would lose precision)";
  return "it is not a widening lakeswap applies in place (integers and floats widen, DECIMAL(p,s) to a larger p with the same s)";
}

/**
 * A change: the definition to write, and each change in words (`column coupon VARCHAR added`). `rebuild`: a change
 * that cannot be made in place, made by `sync --rebuild-schema` (every current run rewritten under the new definition,
 * then the pointers and the definition moved: lake/operations/rebuild-schema.ts), with the columns renamed (new name
 * to old) that the rewrite reads under their old names.
 */
export interface SchemaChange {
  readonly table: TableDefinition;
  readonly changes: readonly string[];
  readonly rebuild?: {
    readonly renames: Readonly<Record<string, string>>;
    /** The rebuild of an earlier sync that stopped before its end (model/table.ts `rebuilding`): its runs not rewritten yet are. */
    readonly finishing?: true;
  };
  /**
   * The partition keys change (`sync --rebuild-schema`): the table is built aside in a layout of its own under the new
   * keys (model/table.ts `layout`, named when the change is made), from its current rows, and the sync switches the
   * table to it in one write of its definition once every partition of it is built (lake/operations/relayout.ts).
   */
  readonly relayout?: { readonly from: readonly string[] };
}

/** How a change that cannot be made in place is treated: refused (the default), or planned as a rebuild by swap. */
export interface SchemaChangeOptions {
  /** `sync --rebuild-schema`: rebuild every partition under the new definition instead of refusing. */
  readonly rebuild?: boolean;
  /** Columns declared with `renamed_from:` (new name to old name): a rename, not a column dropped and one added. */
  readonly renames?: Readonly<Record<string, string>>;
}

/**
 * How a declared table changes the one the catalog holds, for tables written in runs (an ingested table's columns
 * are added by its own rule, model/table.ts `keepIngestLayout`): undefined where the declaration is the table as it
 * is (or differs only in whether it is published as Iceberg, which `tableChange` judges); a change in place; a
 * rebuild (`options.rebuild`); or a CONFLICT naming every change that cannot be made in place and how to make it.
 */
export function planSchemaChange(existing: TableDefinition, wanted: TableDefinition, options: SchemaChangeOptions = {}): SchemaChange | undefined {
  if (existing.ingest || wanted.ingest) return undefined;
  if (existing.rebuilding) {
    if (declaredShape(existing) !== declaredShape(wanted)) {
      throw new LakeswapError("CONFLICT", `table '${wanted.name}' is being rebuilt by swap to other columns than declared (a sync stopped before its end): declare it as it is (${existing.columns.map((c) => `${c.name} ${c.type}`).join(", ")}) and sync to finish the rebuild, then change it`);
    }
    const renames = existing.rebuilding.renames;
    return { table: defineTable({ ...existing, rebuilding: undefined }), changes: ["the rebuild by swap of an earlier sync finished"], rebuild: { renames, finishing: true } };
  }
  const renames = renamesOf(existing, wanted, options.renames ?? {});
  const changes: string[] = [];
  const refused: string[] = [];
  if (existing.partitionKeys.join(",") !== wanted.partitionKeys.join(",")) {
    refused.push(`its partition keys change from (${existing.partitionKeys.join(", ") || "none"}) to (${wanted.partitionKeys.join(", ") || "none"})`);
  }
  for (const column of existing.columns) {
    const renamedTo = Object.keys(renames).find((name) => renames[name] === column.name);
    const now = wanted.columns.find((c) => c.name === (renamedTo ?? column.name));
    if (!now) refused.push(`column ${column.name} (${column.type}) is no longer declared (dropped, or renamed: declare renamed_from: ${column.name} on its new name)`);
    else if (renamedTo !== undefined) refused.push(`column ${column.name} renamed to ${renamedTo}${now.type !== column.type ? ` (${column.type} to ${now.type})` : ""}`);
    else if (now.type !== column.type) {
      const why = wideningRefusal(column.type, now.type);
      if (why) refused.push(`column ${column.name} changes from ${column.type} to ${now.type}: ${why}`);
      else changes.push(`column ${column.name} widened from ${column.type} to ${now.type}`);
    }
  }
  const added = wanted.columns.filter((c) => !existing.columns.some((e) => e.name === c.name) && renames[c.name] === undefined);
  changes.push(...added.map((c) => `column ${c.name} ${c.type} added`));
  const columnsChanged = changes.length > 0;
  if (existing.compression !== wanted.compression) changes.push(`compression of new runs changed from ${existing.compression} to ${wanted.compression}`);
  const keys = existing.partitionKeys.join(",") !== wanted.partitionKeys.join(",");
  if (refused.length > 0) {
    if (options.rebuild && !keys) return rebuilt(existing, wanted, [...refused, ...changes], renames);
    if (options.rebuild && keys && refused.length > 1) {
      throw new LakeswapError(
        "CONFLICT",
        `table '${wanted.name}' cannot change its partition keys and rebuild its columns in one sync: ${refused.slice(1).join("; ")}. ` +
          `Change the partition keys in a sync of its own (columns added or widened may come along), then the columns with another lakeswap sync --rebuild-schema`,
      );
    }
    if (!options.rebuild) {
      throw new LakeswapError(
        "CONFLICT",
        `table '${wanted.name}' cannot change in place: ${refused.join("; ")}. Only adding columns, widening integer and float types, widening a DECIMAL's ` +
          `precision with the same scale and changing the compression apply in place; ` +
          (keys
            ? `run lakeswap sync --rebuild-schema to build the table aside under the new partition keys and switch to it in one step (lakeswap plan --rebuild-schema shows it), or declare the table as it is`
            : `run lakeswap sync --rebuild-schema to rewrite every partition under the new columns by swap (lakeswap plan --rebuild-schema shows which), or declare the table as it is`),
      );
    }
  }
  if (changes.length === 0 && !keys) return undefined;
  const columns: Column[] = wanted.columns.map((c) => {
    const before = existing.columns.find((e) => e.name === c.name);
    if (!before) return { ...c, added: true };
    return {
      ...c,
      ...(before.type !== c.type || before.signedAs !== undefined ? { signedAs: before.signedAs ?? before.type } : {}),
      ...(before.added ? { added: true as const } : {}),
    };
  });
  const table = defineTable({
    ...wanted,
    columns,
    ...(columnsChanged ? { schemaVersion: (existing.schemaVersion ?? 0) + 1 } : existing.schemaVersion !== undefined ? { schemaVersion: existing.schemaVersion } : {}),
    ...(existing.rebuiltAt !== undefined ? { rebuiltAt: existing.rebuiltAt } : {}),
    // Runs written under a change undone since stay unreadable under any later definition (model/table.ts).
    ...(existing.undoneSchemas !== undefined ? { undoneSchemas: existing.undoneSchemas } : {}),
    // The layout the table is in, until a change of its partition keys names a new one (lake/operations/change-schema.ts),
    // which records the one it replaces.
    ...(keys ? { replacedLayout: existing.layout ?? existing.name } : layoutOf(existing)),
  });
  if (!keys) return { table, changes };
  return { table, changes: [...refused, ...changes], relayout: { from: existing.partitionKeys } };
}

/** An integer type: its values sign as themselves in any other (docs/signatures.md), so an integer retyped to another signs as before. */
export function isIntegerType(type: string): boolean {
  return /^U?(TINYINT|SMALLINT|INTEGER|BIGINT)$/.test(type);
}

/**
 * A rebuild: every run is rewritten under the new definition and signed under it, so a column keeps what lakeswap
 * recorded of its past only where its values are read and signed as before (same name, and the same type or an
 * integer narrowed: an earlier widening's `signedAs`, an `added` column's signing of NULL as absent); a renamed or
 * otherwise retyped column signs as declared.
 */
function rebuilt(existing: TableDefinition, wanted: TableDefinition, changes: readonly string[], renames: Readonly<Record<string, string>>): SchemaChange {
  const columns: Column[] = wanted.columns.map((c) => {
    const before = existing.columns.find((e) => e.name === c.name);
    if (!before) return renames[c.name] === undefined ? { ...c, added: true } : { name: c.name, type: c.type };
    // An integer narrowed signs its values as the same words: its header keeps the type it was signed as, so no
    // signature changes (a delivery sent before builds nothing, an appended one is still recognised).
    if (before.type !== c.type && isIntegerType(before.type) && isIntegerType(c.type)) return { name: c.name, type: c.type, signedAs: before.signedAs ?? before.type, ...(before.added ? { added: true as const } : {}) };
    if (before.type !== c.type) return { name: c.name, type: c.type };
    return { ...c, ...(before.signedAs !== undefined ? { signedAs: before.signedAs } : {}), ...(before.added ? { added: true as const } : {}) };
  });
  // Rewritten in the layout the table is in (a rebuild keeps the partition keys).
  const table = defineTable({ ...wanted, columns, schemaVersion: (existing.schemaVersion ?? 0) + 1, undoneSchemas: existing.undoneSchemas, ...layoutOf(existing) });
  return { table, changes, rebuild: { renames } };
}

/**
 * The renames a declaration makes of the table it changes: `renamed_from` of a column the table does not hold yet,
 * naming one it holds that the declaration no longer does (a rename already made, or declared again, is no rename).
 */
function renamesOf(existing: TableDefinition, wanted: TableDefinition, declared: Readonly<Record<string, string>>): Record<string, string> {
  const renames: Record<string, string> = {};
  for (const [to, from] of Object.entries(declared)) {
    if (existing.columns.some((c) => c.name === to)) continue;
    if (!existing.columns.some((c) => c.name === from)) {
      throw new LakeswapError("CONFLICT", `table '${wanted.name}': column ${to} is declared renamed_from: ${from}, but the table has no column ${from} (it has ${existing.columns.map((c) => c.name).join(", ")})`);
    }
    if (wanted.columns.some((c) => c.name === from)) {
      throw new LakeswapError("CONFLICT", `table '${wanted.name}': column ${to} is declared renamed_from: ${from}, and ${from} is still declared: a renamed column is declared under its new name only`);
    }
    if (Object.values(renames).includes(from)) throw new LakeswapError("CONFLICT", `table '${wanted.name}': two columns are declared renamed_from: ${from}`);
    renames[to] = from;
  }
  return renames;
}

/**
 * The definition a declaration stands for where the catalog holds the table: the catalog's own (with what lakeswap
 * recorded about the table's changes) where the declaration is the table as it is, else the declaration.
 */
export function asDeclared(existing: TableDefinition | undefined, wanted: TableDefinition): TableDefinition {
  if (!existing) return wanted;
  if (declaredShape(existing) === declaredShape(wanted)) return existing;
  // Published as Iceberg too (or no longer: the catalog judges it): the rest of the definition is the catalog's.
  const publishing = (t: TableDefinition) => declaredShape({ ...t, iceberg: undefined, icebergTable: undefined });
  if (publishing(existing) === publishing(wanted)) return defineTable({ ...existing, iceberg: wanted.iceberg === true, icebergTable: wanted.icebergTable });
  return wanted;
}

/** The layout a table is in (model/table.ts `layout`) and the one it replaced, for a definition that keeps its partition keys. */
function layoutOf(existing: TableDefinition): Pick<TableDefinition, "layout" | "replacedLayout"> {
  if (existing.layout === undefined) return {};
  return { layout: existing.layout, ...(existing.replacedLayout !== undefined ? { replacedLayout: existing.replacedLayout } : {}) };
}
