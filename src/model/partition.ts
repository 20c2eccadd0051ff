import { InvalidInputError } from "./errors.js";
import { assertIdentifier, printable } from "./sql.js";

/** One value of a table's partition keys, keys in the table's declared order. */
export interface Partition {
  readonly keys: readonly string[];
  readonly values: readonly string[];
}

/**
 * The one unit of a table without partition keys (`write: replace`): the
 * whole table. Its path is empty; its pointer is the table's own.
 */
export const WHOLE_TABLE: Partition = Object.freeze({ keys: Object.freeze([]) as readonly string[], values: Object.freeze([]) as readonly string[] });

/** Whether a partition is the whole table (a table without partition keys). */
export function isWholeTable(partition: Partition): boolean {
  return partition.keys.length === 0;
}

/** The longest partition value accepted (Hive and Glue allow more; paths and SQL stay readable). */
export const MAX_PARTITION_VALUE_LENGTH = 128;

/** The longest name of one path component (a file or folder name) on the filesystems lakeswap writes to. */
const MAX_PATH_COMPONENT_BYTES = 255;

/**
 * The longest partition key name: `<key>=<value>.json` (a partition's pointer state file, with a value of
 * the longest allowed length) must fit in one path component, so a valid value can never fail at replace time.
 */
export const MAX_PARTITION_KEY_LENGTH = MAX_PATH_COMPONENT_BYTES - "=".length - MAX_PARTITION_VALUE_LENGTH - ".json".length;

const SAFE_VALUE = /^[A-Za-z0-9_][A-Za-z0-9_.-]*$/;

/**
 * Values that readers take for a NULL partition value rather than text: DuckDB's hive reader (lakeswap query, the
 * catalog file, a plain glob) reads a folder `key=null` in any case as NULL, and Hive, Athena and Spark write and read
 * a NULL value as `__HIVE_DEFAULT_PARTITION__`. Such a partition would hold text that no reader sees (`WHERE pc =
 * 'null'` finds nothing, and the values merge into one NULL group), so they are refused as a NULL value is. Compared
 * in lower case.
 */
export const NULL_PARTITION_SPELLINGS = ["null", "__hive_default_partition__"] as const;

/** What a partition value may hold (it names a folder and appears in queries), as messages say it. */
export const PARTITION_VALUE_RULE =
  `use letters, digits, '_', '-' and '.' (a '-' or '.' not first, no '..'), at most ${MAX_PARTITION_VALUE_LENGTH} characters, ` +
  `not null or __HIVE_DEFAULT_PARTITION__ in any case (readers read those as NULL)`;

/** Why a partition value that readers read as NULL is refused (see NULL_PARTITION_SPELLINGS). */
export const NULL_SPELLING_REASON = "which readers read as a NULL partition value, not as text";

/**
 * Checks one partition value: letters, digits, '-', '_', '.', not starting with
 * '.' or '-', no '..', at most 128 characters, not a spelling of NULL. Everything
 * else (path separators, quotes, NUL, control characters) is refused with a
 * message naming key and value. `stored`: a value the lake already holds (a
 * partition folder, a Glue partition, a manifest), where a spelling of NULL is
 * let through: a lakeswap before they were refused may have written one, and its
 * table must still be listed, rolled back, dropped and collected.
 */
export function assertPartitionValue(key: string, value: string, stored = false): string {
  const allowed = PARTITION_VALUE_RULE;
  if (value.length === 0) {
    throw new InvalidInputError(`partition value for key '${key}' is empty: ${allowed}`);
  }
  if (value.length > MAX_PARTITION_VALUE_LENGTH) {
    throw new InvalidInputError(
      `partition value '${printable(value, 40)}' for key '${key}' is ${value.length} characters long: ${allowed}`,
    );
  }
  if (!stored && (NULL_PARTITION_SPELLINGS as readonly string[]).includes(value.toLowerCase())) {
    throw new InvalidInputError(`partition value '${value}' for key '${key}' is not allowed, ${NULL_SPELLING_REASON}: ${allowed}`);
  }
  if (!SAFE_VALUE.test(value) || value.includes("..")) {
    throw new InvalidInputError(`partition value '${printable(value)}' for key '${key}' is not allowed: ${allowed}`);
  }
  return value;
}

/**
 * Checks a partition key name: an identifier of at most 121 characters, so that every path component
 * made of it and a value of up to 128 characters (`key=value.json`) stays within 255 bytes.
 */
export function assertPartitionKey(key: string): string {
  assertIdentifier("partition key", key);
  if (key.length > MAX_PARTITION_KEY_LENGTH) {
    throw new InvalidInputError(
      `partition key '${printable(key, 40)}' is ${key.length} characters long: use at most ${MAX_PARTITION_KEY_LENGTH}, ` +
        `so that '<key>=<value>' with a value of up to ${MAX_PARTITION_VALUE_LENGTH} characters fits in one ${MAX_PATH_COMPONENT_BYTES}-byte file name`,
    );
  }
  return key;
}

/** The partition of a table's keys (in order) with these values, checked; the whole table where there are no keys. */
export function partitionOfValues(keys: readonly string[], values: readonly unknown[]): Partition {
  return keys.length === 0 ? WHOLE_TABLE : makePartition(keys.map((key, i) => [key, String(values[i])] as const));
}

/** Builds a partition from key/value pairs, checking every key and value (`stored`: see assertPartitionValue). */
export function makePartition(pairs: ReadonlyArray<readonly [string, string]>, stored = false): Partition {
  if (pairs.length === 0) throw new InvalidInputError("a partition needs at least one key=value pair");
  const keys: string[] = [];
  const values: string[] = [];
  for (const [key, value] of pairs) {
    assertPartitionKey(key);
    if (keys.includes(key)) throw new InvalidInputError(`partition key '${key}' is given twice`);
    keys.push(key);
    values.push(assertPartitionValue(key, value, stored));
  }
  return { keys, values };
}

/**
 * Parses `day=2026-11-01`, `p_year=2025,p_month=03,p_day=04`, or the path form a report prints,
 * `p_year=2025/p_month=03/p_day=04`. With `declaredKeys`, the keys must be exactly
 * the table's partition keys; they are put in the declared order.
 */
export function parsePartition(spec: string, declaredKeys?: readonly string[], stored = false): Partition {
  // A table without partition keys has one unit, the whole table, named by the empty path.
  if (spec === "" && declaredKeys?.length === 0) return WHOLE_TABLE;
  // The path form only where every segment is `key=`: a value with a '/' in it is refused below, naming it.
  const segments = spec.split("/");
  const pathForm = segments.length > 1 && segments.every((segment) => /^[A-Za-z_][A-Za-z0-9_]*=/.test(segment));
  const pairs = (pathForm ? segments : spec.split(",")).map((part): [string, string] => {
    const eq = part.indexOf("=");
    if (eq <= 0) {
      throw new InvalidInputError(
        `partition '${printable(spec)}' is not of the form key=value[,key2=value2] (for example day=2026-11-01)`,
      );
    }
    return [part.slice(0, eq).trim(), part.slice(eq + 1)];
  });
  const partition = makePartition(pairs, stored);
  return declaredKeys ? orderPartition(partition, declaredKeys, stored) : partition;
}

/** Puts a partition's keys in the table's declared order, refusing missing or unknown keys. */
export function orderPartition(partition: Partition, declaredKeys: readonly string[], stored = false): Partition {
  if (declaredKeys.length === 0 && partition.keys.length === 0) return WHOLE_TABLE;
  const unknown = partition.keys.filter((key) => !declaredKeys.includes(key));
  const missing = declaredKeys.filter((key) => !partition.keys.includes(key));
  if (unknown.length > 0 || missing.length > 0) {
    const parts = [
      unknown.length > 0 ? `unknown key${unknown.length > 1 ? "s" : ""} ${unknown.map((k) => `'${k}'`).join(", ")}` : "",
      missing.length > 0 ? `missing key${missing.length > 1 ? "s" : ""} ${missing.map((k) => `'${k}'`).join(", ")}` : "",
    ].filter(Boolean);
    throw new InvalidInputError(
      `partition '${partitionSpec(partition)}' does not match the table's partition keys (${declaredKeys.join(", ")}): ${parts.join("; ")}`,
    );
  }
  // A partition built by hand (library callers) gets the same checks as parsed text: its values become paths.
  const values = declaredKeys.map((key) => assertPartitionValue(key, String(partition.values[partition.keys.indexOf(key)]), stored));
  return { keys: [...declaredKeys], values };
}

/** The Hive path of a partition: `day=2026-11-01` or `p_year=2025/p_month=03/p_day=04`. */
export function partitionPath(partition: Partition): string {
  return partition.keys.map((key, i) => `${key}=${partition.values[i]}`).join("/");
}

/** The command-line form of a partition: `p_year=2025,p_month=03,p_day=04`. */
export function partitionSpec(partition: Partition): string {
  return partition.keys.map((key, i) => `${key}=${partition.values[i]}`).join(",");
}

/** Parses a Hive partition path (as written by `partitionPath`: a path the lake holds), checking every part (as `stored`). */
export function parsePartitionPath(path: string, declaredKeys: readonly string[]): Partition {
  return parsePartition(path.split("/").join(","), declaredKeys, true);
}

/** The value of one key of a partition. */
export function partitionValue(partition: Partition, key: string): string {
  const index = partition.keys.indexOf(key);
  if (index < 0) throw new InvalidInputError(`partition '${partitionSpec(partition)}' has no key '${key}'`);
  return partition.values[index] as string;
}

/** The partition keys of a partition path (`day=2026-11-01/hour=03`: day, hour; "": none). */
export function keysOfPath(path: string): string[] {
  return path === "" ? [] : path.split("/").map((part) => part.slice(0, part.indexOf("=")));
}
