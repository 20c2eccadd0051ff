import { InvalidInputError, LakeswapError } from "./errors.js";
import { assertPartitionKey } from "./partition.js";
import { assertIdentifier, nameWithRoom, printable } from "./sql.js";
import { isRunId } from "./run-id.js";

/** Parquet compression codecs a table may use; Snappy is the default (what Athena writes). */
export type Compression = "snappy" | "zstd";

/** One declared column of a table. */
export interface Column {
  readonly name: string;
  readonly type: string;
  /**
   * The type the column's values are signed as (docs/signatures.md, "Schema changes"): its type before it was first
   * widened in place, kept across later widenings, so that no signature changes. Absent: `type`.
   */
  readonly signedAs?: string;
  /** Added in place after the table's first runs were written: runs written before lack it (NULL), and it is signed only where it holds a value. */
  readonly added?: true;
}

/** A Hive-style Parquet table: its columns, its partition keys (none: the whole table is one unit, replaced as a whole), and how its files are written. */
export interface TableDefinition {
  readonly name: string;
  readonly columns: readonly Column[];
  readonly partitionKeys: readonly string[];
  readonly compression: Compression;
  /**
   * An ingested table (`lakeswap serve` / `lakeswap ingest`): append-only, its files written straight into each
   * partition's folder (`<table>/p_year=…/p_month=…/p_day=…/<segment id>.parquet`, the Athena sink's layout) rather
   * than into runs. Its pointers are registrations: they carry the partition's signature, and never move its files.
   */
  readonly ingest?: true;
  /**
   * An ingested table whose partitions keep their files in runs, as every other table's do
   * (`<table>/_runs/<partition>/run=<id>/` embedded, `<table>/<partition>/run=<id>/` on S3): segments add files to the
   * partition's current run, and `lakeswap compact` rewrites a run of many small files into a new run and moves the
   * pointer to it. Absent on tables ingested before lakeswap kept runs for them (their files sit in the partition's
   * folder itself, and stay there).
   */
  readonly ingestRuns?: true;
  /**
   * An ingested table that gained columns after files were written: its files differ in columns, and are read by
   * column name (a column a file lacks is NULL). Absent: every file holds every column, read as written.
   */
  readonly columnsAdded?: true;
  /**
   * Published as an Iceberg table too (`iceberg: true`): every command that moves its pointers commits one Iceberg
   * snapshot over the current runs' files, beside the Hive view (on AWS, a Glue table `<name>_iceberg` of type ICEBERG). Default: absent.
   */
  readonly iceberg?: true;
  /** The name of its Iceberg table where a catalog keeps one by name (Glue); absent: `<name>_iceberg`. Only with `iceberg`. */
  readonly icebergTable?: string;
  /**
   * How many times its columns changed in place (model/schema-change.ts): runs written before a change keep the
   * columns they were written with, so its files are read by column name and cast to the declared types. Absent: never.
   */
  readonly schemaVersion?: number;
  /**
   * A run id issued when its schema last changed in place, after every run current then: every run written since sorts
   * after it (./../lake/commit/swap.ts), so a rollback can tell the runs written under the new schema. Absent: never.
   */
  readonly schemaChangedAt?: string;
  /**
   * A rebuild by swap in progress (`sync --rebuild-schema` where the definition moves before the pointers: the embedded
   * lake): the runs written before `schemaChangedAt` are still the old ones, read by name under this definition, a
   * renamed column (new name to old name) from either name. The next sync that declares the table finishes it.
   */
  readonly rebuilding?: { readonly renames: Readonly<Record<string, string>> };
  /**
   * The `schemaChangedAt` of the last rebuild by swap: a run written before it holds columns the table no longer
   * reads (a wider type, a column renamed since), so no pointer is moved back to one (roll the rebuild back instead).
   */
  readonly rebuiltAt?: string;
  /**
   * The schema changes `rollback --sync` undid, each as the run ids between which runs were written under it (`from`:
   * the change's `schemaChangedAt`; `to`: issued when it was undone, after every run written then): such a run holds
   * columns as that definition declared them (a column the table no longer has, or has again as another column), so
   * no pointer is moved to one (./../lake/operations/rollback.ts). Absent: none.
   */
  readonly undoneSchemas?: readonly UndoneSchema[];
  /**
   * Where the table's partitions live since its partition keys changed (`sync --rebuild-schema`, docs/lake.md
   * "Changing partition keys"): a layout of its own, `<table>__layout_<6 hex digits>`, built aside and then made the
   * table's in one write of this definition. Its pointers, runs and manifests are kept under that name; absent: under
   * the table's own name (the layout the table was created with).
   */
  readonly layout?: string;
  /**
   * The storage name of the layout this one replaced when the partition keys last changed (the table's own name for
   * the layout it was created with): the target of `rollback --sync` of that change, kept by GC while this layout is
   * current. Absent: the partition keys never changed.
   */
  readonly replacedLayout?: string;
}

/** A schema change that `rollback --sync` undid: the runs written under it sort between `from` and `to`. */
export interface UndoneSchema {
  readonly from: string;
  readonly to: string;
  /** The sync (or create-table) that made the change. */
  readonly syncId: string;
}

/** The undone schema change `runId` was written under, if any (model/table.ts `undoneSchemas`). */
export function undoneSchemaOf(table: Pick<TableDefinition, "undoneSchemas">, runId: string): UndoneSchema | undefined {
  return table.undoneSchemas?.find((undone) => runId > undone.from && runId < undone.to);
}

/**
 * The newest run id at which the table's schema changed: its last change, or the last undoing of one. Every run
 * written from now on sorts after it (./../lake/commit/swap.ts), so it was written under the definition as it is.
 */
export function schemaMark(table: Pick<TableDefinition, "schemaChangedAt" | "undoneSchemas">): string | undefined {
  return [table.schemaChangedAt, ...(table.undoneSchemas ?? []).map((undone) => undone.to)].filter((id): id is string => id !== undefined).sort().at(-1);
}

/** What ends the storage name of a table's layout after a change of partition keys: `__layout_` and 6 hex digits. */
const LAYOUT_SUFFIX = /__layout_[0-9a-f]{6}$/;

/** A layout's storage name is an identifier, as a table's is: it reaches paths, store keys and SQL. */
const IDENTIFIER_LIKE = /^[a-z][a-z0-9_]{0,127}$/;

/** The length of that suffix. */
const LAYOUT_SUFFIX_LENGTH = "__layout_000000".length;

/**
 * The name a table's partitions are kept under (pointers, runs, manifests): its layout's where its partition keys
 * changed, else its own.
 */
export function storageName(table: Pick<TableDefinition, "name" | "layout">): string {
  return table.layout ?? table.name;
}

/**
 * The storage name of a new layout of `table` (`token`: 6 hex digits): `<table>__layout_<token>`, the table's name
 * shortened where the whole would pass 128 characters. The suffix is reserved: no table may end with it.
 */
export function layoutName(table: string, token: string): string {
  return `${layoutBase(table)}__layout_${token}`;
}

/** What a table's layouts' names begin with (two long names alike at the start never share layouts). */
function layoutBase(table: string): string {
  return nameWithRoom(table, LAYOUT_SUFFIX_LENGTH);
}

/** Whether `name` is a layout's storage name (reserved: never a table's name). */
function isLayoutName(name: string): boolean {
  return LAYOUT_SUFFIX.test(name);
}

/** The table as the layout stored under `storage` reads it (the table's own name: the layout it was created with). */
export function inLayout(table: TableDefinition, storage: string, partitionKeys: readonly string[] = table.partitionKeys): TableDefinition {
  return defineTable({ ...table, partitionKeys, layout: storage === table.name ? undefined : storage, replacedLayout: undefined });
}

/** Whether `name` is the storage name of a layout of `table`. */
export function isLayoutOf(name: string, table: string): boolean {
  return isLayoutName(name) && name.slice(0, -LAYOUT_SUFFIX_LENGTH) === layoutBase(table);
}

/** A table's definition as declared: without what lakeswap records about its changes (columns' `signedAs` and `added`, `schemaVersion`). */
export function declaredShape(table: TableDefinition): string {
  return JSON.stringify({
    ...table,
    columns: table.columns.map((c) => ({ name: c.name, type: c.type })),
    schemaVersion: undefined,
    schemaChangedAt: undefined,
    rebuilding: undefined,
    rebuiltAt: undefined,
    undoneSchemas: undefined,
    layout: undefined,
    replacedLayout: undefined,
  });
}

/**
 * Whether a table's files may differ from its declared columns (an ingested table that gained columns, a table whose
 * schema changed in place): they are then read by column name, a column a file lacks is NULL, and every column is
 * cast to its declared type.
 */
export function readsByName(table: TableDefinition): boolean {
  return table.columnsAdded === true || (table.schemaVersion ?? 0) > 0;
}

const SIMPLE_TYPES = new Set([
  "BOOLEAN", "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT",
  "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT",
  "FLOAT", "REAL", "DOUBLE", "VARCHAR", "TEXT", "STRING", "BLOB",
  "DATE", "TIME", "TIMESTAMP", "TIMESTAMPTZ", "UUID", "INT", "LONG",
]);
const TYPE_ALIASES: Record<string, string> = { TEXT: "VARCHAR", STRING: "VARCHAR", REAL: "FLOAT", INT: "INTEGER", LONG: "BIGINT" };

/** Normalizes a declared column type, allowing only plain scalar types and DECIMAL(p,s). */
export function normalizeColumnType(column: string, type: string): string {
  const upper = type.trim().toUpperCase().replace(/\s+/g, " ");
  if (SIMPLE_TYPES.has(upper)) return TYPE_ALIASES[upper] ?? upper;
  const decimal = /^(?:DECIMAL|NUMERIC) ?\( ?(\d{1,2}) ?(?:, ?(\d{1,2}) ?)?\)$/.exec(upper);
  if (decimal) {
    const precision = Number(decimal[1]);
    const scale = Number(decimal[2] ?? 0);
    if (precision >= 1 && precision <= 38 && scale <= precision) return `DECIMAL(${precision},${scale})`;
  }
  throw new InvalidInputError(
    `column '${column}' has type '${printable(type)}', which lakeswap does not accept: use one of BOOLEAN, INTEGER, BIGINT, DOUBLE, DECIMAL(p,s), VARCHAR, DATE, TIMESTAMP, TIMESTAMPTZ, BLOB (or another plain scalar type)`,
  );
}

/** Parses `id BIGINT, amount DECIMAL(10,2), name VARCHAR` into checked columns. */
export function parseColumns(spec: string): Column[] {
  const parts: string[] = [];
  let depth = 0;
  let current = "";
  for (const char of spec) {
    if (char === "(") depth += 1;
    if (char === ")") depth -= 1;
    if (char === "," && depth === 0) {
      parts.push(current);
      current = "";
    } else {
      current += char;
    }
  }
  parts.push(current);
  return parts
    .map((part) => part.trim())
    .filter((part) => part.length > 0)
    .map((part) => {
      const match = /^(\S+)\s+(.+)$/.exec(part);
      if (!match) {
        throw new InvalidInputError(`column '${printable(part)}' needs a name and a type, for example 'id BIGINT'`);
      }
      const name = assertIdentifier("column name", match[1] as string);
      return { name, type: normalizeColumnType(name, match[2] as string) };
    });
}

/** A table definition to check: as TableDefinition, with the compression a name and the flags booleans. */
interface DefinitionInput {
  name: string;
  columns: readonly Column[];
  partitionKeys: readonly string[];
  compression?: string;
  ingest?: boolean;
  ingestRuns?: boolean;
  columnsAdded?: boolean;
  iceberg?: boolean;
  icebergTable?: string;
  schemaVersion?: number;
  schemaChangedAt?: string;
  rebuilding?: { readonly renames: Readonly<Record<string, string>> };
  rebuiltAt?: string;
  undoneSchemas?: readonly UndoneSchema[];
  layout?: string;
  replacedLayout?: string;
}

/** Checks a whole table definition: names, types, no duplicate or overlapping columns. */
export function defineTable(input: DefinitionInput): TableDefinition {
  const name = assertIdentifier("table name", input.name);
  checkLayouts(name, input);
  if (input.columns.length === 0) {
    throw new InvalidInputError(`table '${name}' needs at least one column, for example --columns 'id BIGINT'`);
  }
  const seen = new Set<string>();
  for (const key of input.partitionKeys) {
    assertPartitionKey(key);
    if (seen.has(key)) throw new InvalidInputError(`partition key '${key}' is declared twice in table '${name}'`);
    seen.add(key);
  }
  const columns = input.columns.map((column) => {
    assertIdentifier("column name", column.name);
    if (seen.has(column.name)) {
      const what = input.partitionKeys.includes(column.name) ? "is a partition key (its value comes from the path, not the files)" : "is declared twice";
      throw new InvalidInputError(`column '${column.name}' of table '${name}' ${what}`);
    }
    seen.add(column.name);
    return {
      name: column.name,
      type: normalizeColumnType(column.name, column.type),
      ...(column.signedAs !== undefined ? { signedAs: normalizeColumnType(column.name, column.signedAs) } : {}),
      ...(column.added ? { added: true as const } : {}),
    };
  });
  if (input.schemaChangedAt !== undefined && !isRunId(input.schemaChangedAt)) {
    throw new InvalidInputError(`table '${name}' has schemaChangedAt '${printable(input.schemaChangedAt)}', which is not a run id (YYYYMMDDTHHMMSSZ-xxxxxx)`);
  }
  if (input.rebuiltAt !== undefined && !isRunId(input.rebuiltAt)) {
    throw new InvalidInputError(`table '${name}' has rebuiltAt '${printable(input.rebuiltAt)}', which is not a run id (YYYYMMDDTHHMMSSZ-xxxxxx)`);
  }
  for (const undone of input.undoneSchemas ?? []) {
    if (![undone.from, undone.to].every((id) => isRunId(id)) || !isRunId(undone.syncId) || undone.from >= undone.to) {
      throw new InvalidInputError(`table '${name}' has an undone schema change ${printable(JSON.stringify(undone))} that is not {from, to, syncId} of run ids, from before to`);
    }
  }
  if (input.schemaVersion !== undefined && !(Number.isSafeInteger(input.schemaVersion) && input.schemaVersion >= 0)) {
    throw new InvalidInputError(`table '${name}' has schema version ${printable(String(input.schemaVersion))}: it must be a whole number, 0 or more`);
  }
  const compression = (input.compression ?? "snappy").toLowerCase();
  if (compression !== "snappy" && compression !== "zstd") {
    throw new InvalidInputError(`compression '${printable(compression)}' is not supported: use snappy (default) or zstd`);
  }
  if (input.iceberg && input.ingest) {
    throw new InvalidInputError(`table '${name}' is an ingested table: it cannot be published as Iceberg yet; leave out iceberg: true (or --iceberg)`);
  }
  if (input.icebergTable !== undefined) {
    assertIdentifier("Iceberg table name", input.icebergTable);
    if (!input.iceberg) throw new InvalidInputError(`table '${name}' names an Iceberg table ('${input.icebergTable}') but is not published as Iceberg: add iceberg: true (or --iceberg), or leave out iceberg_table`);
    if (input.icebergTable === name) throw new InvalidInputError(`table '${name}' names its Iceberg table '${input.icebergTable}', its own name: the Hive table has it; choose another (default ${name}_iceberg)`);
  }
  return {
    name,
    columns,
    partitionKeys: [...input.partitionKeys],
    compression,
    ...(input.ingest ? { ingest: true as const } : {}),
    ...(input.ingest && input.ingestRuns ? { ingestRuns: true as const } : {}),
    ...(input.ingest && input.columnsAdded ? { columnsAdded: true as const } : {}),
    ...(input.iceberg ? { iceberg: true as const } : {}),
    ...(input.iceberg && input.icebergTable !== undefined ? { icebergTable: input.icebergTable } : {}),
    ...(input.schemaVersion ? { schemaVersion: input.schemaVersion } : {}),
    ...(input.schemaChangedAt !== undefined ? { schemaChangedAt: input.schemaChangedAt } : {}),
    ...(input.rebuiltAt !== undefined ? { rebuiltAt: input.rebuiltAt } : {}),
    ...(input.undoneSchemas !== undefined && input.undoneSchemas.length > 0 ? { undoneSchemas: input.undoneSchemas.map((u) => ({ from: u.from, to: u.to, syncId: u.syncId })) } : {}),
    ...(input.rebuilding !== undefined ? { rebuilding: { renames: checkedRenames(name, columns, input.rebuilding.renames) } } : {}),
    ...(input.layout !== undefined ? { layout: input.layout } : {}),
    ...(input.replacedLayout !== undefined ? { replacedLayout: input.replacedLayout } : {}),
  };
}

/** Refuses a table named like a layout, and a layout (or replaced layout) that is not one of the table's. */
function checkLayouts(name: string, input: { readonly layout?: string; readonly replacedLayout?: string }): void {
  if (isLayoutName(name)) {
    throw new InvalidInputError(`table name '${name}' is reserved: lakeswap keeps a table's partitions under <table>__layout_<6 hex digits> once its partition keys change; choose another name`);
  }
  const ofTable = (storage: string): boolean => IDENTIFIER_LIKE.test(storage) && isLayoutOf(storage, name);
  if (input.layout !== undefined && !ofTable(input.layout)) {
    throw new InvalidInputError(`table '${name}' has layout '${printable(input.layout)}', which is not a layout of it (${name}__layout_<6 hex digits>)`);
  }
  if (input.replacedLayout !== undefined && input.replacedLayout !== name && !ofTable(input.replacedLayout)) {
    throw new InvalidInputError(`table '${name}' records a replaced layout '${printable(input.replacedLayout)}', which is not a layout of it`);
  }
}

/** A rebuild's renames: each from a name no column has to a column's name. */
function checkedRenames(table: string, columns: readonly Column[], renames: Readonly<Record<string, string>>): Record<string, string> {
  const checked: Record<string, string> = {};
  for (const [to, from] of Object.entries(renames)) {
    if (typeof from !== "string" || !columns.some((c) => c.name === to) || columns.some((c) => c.name === from)) {
      throw new InvalidInputError(`table '${table}' records a rename of '${printable(String(from))}' to '${printable(to)}' that its columns do not allow`);
    }
    checked[to] = assertIdentifier("column name", from);
  }
  return checked;
}

/**
 * An ingested table whose files sit in its partitions' own folders (tables ingested before lakeswap kept runs for
 * them): its pointers are registrations only, and its partitions cannot be compacted by swap.
 */
export function ingestedInPlace(table: TableDefinition): boolean {
  return table.ingest === true && table.ingestRuns !== true;
}

/**
 * The definition to declare for an ingested table that may exist already: an existing table keeps the layout its
 * files were written in (an ingested table from before runs keeps writing into its partitions' folders), and one that
 * gains columns (now or before) is read by column name from then on.
 */
export function keepIngestLayout(existing: TableDefinition | undefined, wanted: TableDefinition): TableDefinition {
  if (!existing?.ingest || !wanted.ingest) return wanted;
  const columnsAdded = existing.columnsAdded === true || wanted.columns.some((c) => !existing.columns.some((e) => e.name === c.name));
  if (existing.ingestRuns === wanted.ingestRuns && (wanted.columnsAdded === true) === columnsAdded) return wanted;
  return defineTable({ ...wanted, ingestRuns: existing.ingestRuns === true, columnsAdded });
}

/** Whether a declaration is the table as it is (declaring it again changes nothing). */
export function sameDeclaration(existing: TableDefinition, wanted: TableDefinition): boolean {
  return JSON.stringify(existing) === JSON.stringify(wanted) || declaredShape(existing) === declaredShape(wanted);
}

/**
 * How a declared table relates to the one the catalog holds: the same, the same with `iceberg: true` added (the
 * catalog rewrites the definition), or (an ingested table only) the same with columns added (anywhere: readers match by name), which the
 * catalog applies in place. Anything else is refused, naming what
 * differs: a column whose type changed, a column that is gone, other partition keys, another kind of table.
 */
export function tableChange(existing: TableDefinition, wanted: TableDefinition): "same" | "columns added" | "iceberg added" {
  if (sameDeclaration(existing, wanted)) return "same";
  const fix = `drop it first (lakeswap drop-table ${wanted.name}) or declare it as it is`;
  if (existing.iceberg && wanted.iceberg && existing.icebergTable !== wanted.icebergTable && JSON.stringify({ ...existing, icebergTable: undefined }) === JSON.stringify({ ...wanted, icebergTable: undefined })) {
    const name = (t: TableDefinition): string => t.icebergTable ?? `${t.name}_iceberg`;
    throw new LakeswapError(
      "CONFLICT",
      `table '${wanted.name}' is published as the Iceberg table '${name(existing)}', and the declaration names '${name(wanted)}': an Iceberg table is not renamed; ` +
        `declare iceberg_table: ${name(existing)} again, or ${fix}`,
    );
  }
  const publishing = (t: TableDefinition): string => JSON.stringify({ ...t, iceberg: undefined, icebergTable: undefined });
  if (existing.iceberg !== wanted.iceberg && publishing(existing) === publishing(wanted)) {
    // Publishing as Iceberg too changes no data: the next command under the table's lease commits its current runs.
    if (wanted.iceberg) return "iceberg added";
    throw new LakeswapError(
      "CONFLICT",
      `table '${wanted.name}' is published as Iceberg (iceberg: true), and the declaration no longer says so; keep iceberg: true, ` +
        `or ${fix} (its Iceberg metadata in ${wanted.name}/metadata/ would otherwise stop following the table)`,
    );
  }
  if (!existing.ingest || !wanted.ingest) {
    throw new LakeswapError("CONFLICT", `table '${wanted.name}' already exists with a different definition; ${fix}`);
  }
  if (existing.partitionKeys.join(",") !== wanted.partitionKeys.join(",")) {
    throw new LakeswapError(
      "CONFLICT",
      `ingested table '${wanted.name}' is partitioned by (${existing.partitionKeys.join(", ")}), not (${wanted.partitionKeys.join(", ")}); ${fix}`,
    );
  }
  for (const column of existing.columns) {
    const now = wanted.columns.find((c) => c.name === column.name);
    if (!now) throw new LakeswapError("CONFLICT", `ingested table '${wanted.name}' has column '${column.name}' (${column.type}), which the config no longer declares; declare it again (columns are only ever added)`);
    if (now.type !== column.type) {
      throw new LakeswapError(
        "CONFLICT",
        `column '${column.name}' of ingested table '${wanted.name}' is ${column.type}, and the config now declares ${now.type}; a column's type never changes in place: declare it as ${column.type}, or add a new column`,
      );
    }
  }
  if (existing.compression !== wanted.compression) {
    throw new LakeswapError("CONFLICT", `ingested table '${wanted.name}' is written with ${existing.compression}, not ${wanted.compression}; ${fix}`);
  }
  return "columns added";
}

/**
 * A stored table definition (a definition file of the embedded lake, a Glue table's parameter), checked whole: any
 * JSON of the wrong shape (`{}`, `null`, a column without a type, a definition of another table) or that defineTable
 * refuses is a STORE_ERROR (exit 8) naming `source` and the fix, never a TypeError deep in a command. The one place a
 * stored definition is read.
 */
export function parseTableDefinition(value: unknown, source: string, expectedName?: string): TableDefinition {
  const fix = "restore it from a backup, or move it away (lakeswap then no longer knows the table; its runs stay) and rerun";
  const refuse = (why: string): never => {
    throw new LakeswapError("STORE_ERROR", `table definition ${source} is not a lakeswap table definition: ${why}; ${fix}`);
  };
  if (typeof value !== "object" || value === null || Array.isArray(value)) refuse(`it holds ${value === null ? "null" : Array.isArray(value) ? "an array" : typeof value}, not an object`);
  const record = value as Record<string, unknown>;
  if (typeof record.name !== "string") refuse("it has no 'name'");
  if (expectedName !== undefined && record.name !== expectedName) refuse(`it names table '${printable(String(record.name))}', not '${expectedName}'`);
  const columns = record.columns;
  const column = (c: unknown): c is Column =>
    typeof c === "object" && c !== null && typeof (c as Column).name === "string" && typeof (c as Column).type === "string" &&
    ["string", "undefined"].includes(typeof (c as Column).signedAs) && [true, undefined].includes((c as Column).added);
  if (!Array.isArray(columns) || !columns.every(column)) refuse("'columns' is not a list of {name, type}");
  if (record.schemaVersion !== undefined && typeof record.schemaVersion !== "number") refuse("'schemaVersion' is not a number");
  if (record.schemaChangedAt !== undefined && typeof record.schemaChangedAt !== "string") refuse("'schemaChangedAt' is not a run id");
  if (record.rebuiltAt !== undefined && typeof record.rebuiltAt !== "string") refuse("'rebuiltAt' is not a run id");
  const undone = record.undoneSchemas;
  const undoneEntry = (u: unknown): u is UndoneSchema =>
    typeof u === "object" && u !== null && ["from", "to", "syncId"].every((k) => typeof (u as Record<string, unknown>)[k] === "string");
  if (undone !== undefined && !(Array.isArray(undone) && undone.every(undoneEntry))) refuse("'undoneSchemas' is not a list of {from, to, syncId}");
  const rebuilding = record.rebuilding as { renames?: unknown } | undefined;
  if (rebuilding !== undefined && (typeof rebuilding !== "object" || rebuilding === null || typeof rebuilding.renames !== "object" || rebuilding.renames === null)) refuse("'rebuilding' is not {renames}");
  const keys = record.partitionKeys;
  if (!Array.isArray(keys) || keys.some((key) => typeof key !== "string")) refuse("'partitionKeys' is not a list of names");
  if (record.compression !== undefined && typeof record.compression !== "string") refuse("'compression' is not a name");
  if (record.ingest !== undefined && typeof record.ingest !== "boolean") refuse("'ingest' is not true or false");
  if (record.ingestRuns !== undefined && typeof record.ingestRuns !== "boolean") refuse("'ingestRuns' is not true or false");
  if (record.columnsAdded !== undefined && typeof record.columnsAdded !== "boolean") refuse("'columnsAdded' is not true or false");
  if (record.iceberg !== undefined && typeof record.iceberg !== "boolean") refuse("'iceberg' is not true or false");
  if (record.icebergTable !== undefined && typeof record.icebergTable !== "string") refuse("'icebergTable' is not a name");
  if (record.layout !== undefined && typeof record.layout !== "string") refuse("'layout' is not a name");
  if (record.replacedLayout !== undefined && typeof record.replacedLayout !== "string") refuse("'replacedLayout' is not a name");
  try {
    return defineTable({
      name: record.name as string,
      columns: columns as Column[],
      partitionKeys: keys as string[],
      ...(record.compression !== undefined ? { compression: record.compression as string } : {}),
      ...(record.ingest === true ? { ingest: true } : {}),
      ...(record.ingestRuns === true ? { ingestRuns: true } : {}),
      ...(record.columnsAdded === true ? { columnsAdded: true } : {}),
      ...(record.iceberg === true ? { iceberg: true } : {}),
      ...(typeof record.icebergTable === "string" ? { icebergTable: record.icebergTable } : {}),
      ...(typeof record.schemaVersion === "number" ? { schemaVersion: record.schemaVersion } : {}),
      ...(typeof record.schemaChangedAt === "string" ? { schemaChangedAt: record.schemaChangedAt } : {}),
      ...(rebuilding !== undefined ? { rebuilding: { renames: rebuilding.renames as Record<string, string> } } : {}),
      ...(typeof record.rebuiltAt === "string" ? { rebuiltAt: record.rebuiltAt } : {}),
      ...(Array.isArray(undone) ? { undoneSchemas: undone as UndoneSchema[] } : {}),
      ...(typeof record.layout === "string" ? { layout: record.layout } : {}),
      ...(typeof record.replacedLayout === "string" ? { replacedLayout: record.replacedLayout } : {}),
    });
  } catch (error) {
    if (error instanceof InvalidInputError) return refuse(error.message);
    throw error;
  }
}
