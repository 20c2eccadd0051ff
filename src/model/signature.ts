import { createHash } from "node:crypto";

/**
 * Content signatures, version 3 (specified in docs/signatures.md).
 *
 * Raw layer: every field of the signed columns (sorted by name) becomes one or
 * two signed 64-bit words: integers, decimals, dates, times and timestamps as
 * the exact integer of their declared type, DOUBLE and FLOAT as the bits of
 * their IEEE-754 double; every other type as 126 bits of the MD5 digest of its
 * canonical text. A flag word records which fields are NULL. Per lane, each
 * word is split into its low 32 bits and its high 32 bits (signed), each
 * factor is XORed with a key, and the XOR of the exact products is finalized
 * by one multiply-fold round, with independent keys for the two lanes. The
 * lanes are summed over all rows modulo 2^64, which makes the digest
 * order-insensitive and duplicate-sensitive. The signature is `v3:` + sha256
 * over the version, the columns with their types, the row count and the two sums.
 *
 * Every step is 64-bit integer arithmetic that DuckDB runs without strings,
 * casts or 128-bit math (a product of an unsigned and a signed 32-bit number
 * fits a signed 64-bit integer): version 1 built a canonical text of each whole
 * row and hashed it with MD5, several times slower; version 2 still hashed
 * DOUBLE and FLOAT as the MD5 of their printf("%.17g") text. A partition
 * signed with an older version compares unequal to its v3 signature, so it is
 * rebuilt once.
 *
 * Derived layers: `v3:` + sha256 over the sorted input signatures, the
 * transform's fingerprint and the partition.
 */
export const SIGNATURE_VERSION = "v3";

const LANE = 1n << 64n;
const MASK64 = LANE - 1n;
const MASK32 = (1n << 32n) - 1n;
const MASK31 = (1n << 31n) - 1n;
const MASK63 = (1n << 63n) - 1n;

/** Bits of a flag word that carry flags: 63, so a flag word is a non-negative signed 64-bit integer. */
export const FLAG_BITS = 63;

/**
 * A signed column: its name and declared (normalized) type; `signedAs`, the type the signature's header names (its
 * type before a widening in place, which changes no word); `added`, a column added in place, signed apart and only
 * where it holds a value (docs/signatures.md, "Schema changes").
 */
export interface SignedColumn {
  readonly name: string;
  readonly type: string;
  readonly signedAs?: string;
  readonly added?: true;
}

/**
 * The signed columns split as a signature reads them: `base`, the columns every row is signed over (the header's),
 * and `added`, each signed apart over the rows where it holds a value, after the base columns. Where every signed
 * column was added, they are all base.
 */
export function signatureParts<T extends SignedColumn>(columns: readonly T[]): { readonly base: T[]; readonly added: T[] } {
  const ordered = signatureColumnOrder(columns);
  const base = ordered.filter((c) => !c.added);
  return base.length === 0 ? { base: ordered, added: [] } : { base, added: ordered.filter((c) => c.added) };
}

/** The lane sums of an added column's rows (those where it holds a value): absent or 0 rows where it holds none. */
export interface AddedSums {
  readonly rows: bigint | number;
  readonly upper: bigint;
  readonly lower: bigint;
}

/** The columns of a signature in their canonical order (by name, bytewise). */
export function signatureColumnOrder<T extends SignedColumn>(columns: readonly T[]): T[] {
  return [...columns].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/** How a declared type becomes words: `integer` is one exact signed 64-bit word; `text` is the MD5 of the canonical text, two words. */
export type WordKind = "integer" | "text";

const INTEGER_TYPES = /^(TINYINT|SMALLINT|INTEGER|BIGINT|UTINYINT|USMALLINT|UINTEGER|BOOLEAN|DATE|TIME|TIMESTAMP|TIMESTAMPTZ|DOUBLE|FLOAT)$/;

/**
 * The word kind of a declared type (docs/signatures.md, step 3): every type
 * whose values map exactly, one to one, onto signed 64-bit integers. DECIMAL(p,s)
 * is an integer (its unscaled value) up to p = 18; DOUBLE and FLOAT are the bits
 * of the double; UBIGINT, HUGEINT and wider decimals are text.
 */
export function wordKind(type: string): WordKind {
  const kind = type.toUpperCase();
  if (INTEGER_TYPES.test(kind)) return "integer";
  const decimal = /^DECIMAL\((\d+),(\d+)\)$/.exec(kind);
  if (decimal && Number(decimal[1]) <= 18) return "integer";
  return "text";
}

/**
 * The words of one field (signed 64-bit integers), from its canonical text (see
 * `canonicalValue`), or zeros for NULL. Integer kinds are the exact value:
 * integers as they are, BOOLEAN 1/0, DECIMAL(p,s) its value times 10^s, DATE
 * days since 1970-01-01, TIME microseconds since midnight, TIMESTAMP and
 * TIMESTAMPTZ microseconds since 1970-01-01T00:00:00 (UTC), DOUBLE and FLOAT
 * the IEEE-754 bits of the double (`doubleWord`). Text kinds are the
 * MD5 digest of the canonical text: bytes 0-7 read as a little-endian
 * unsigned 64-bit integer with its top bit cleared, and bytes 8-15 read the
 * same way, shifted right by one bit (126 of the digest's 128 bits).
 */
function fieldWords(type: string, canonical: string | null): bigint[] {
  if (wordKind(type) === "text") {
    if (canonical === null) return [0n, 0n];
    const digest = createHash("md5").update(canonical, "utf8").digest();
    return [digest.readBigUInt64LE(0) & MASK63, digest.readBigUInt64LE(8) >> 1n];
  }
  if (canonical === null) return [0n];
  return [BigInt.asIntN(64, integerValue(type.toUpperCase(), canonical))];
}

/**
 * The stored integers of ±infinity (docs/signatures.md, step 3): DuckDB keeps
 * DATE infinity as the largest 32-bit day count and TIMESTAMP/TIMESTAMPTZ
 * infinity as the largest 64-bit microsecond count; -infinity is their negation.
 */
export const INFINITY_WORDS: Readonly<Record<"DATE" | "TIMESTAMP" | "TIMESTAMPTZ", bigint>> = {
  DATE: 2_147_483_647n,
  TIMESTAMP: 9_223_372_036_854_775_807n,
  TIMESTAMPTZ: 9_223_372_036_854_775_807n,
};

/**
 * The word of a DOUBLE, or of a FLOAT widened (exactly) to a double: its
 * IEEE-754 binary64 bit pattern read as a signed 64-bit integer, with -0 as +0
 * (word 0). Injective on values, as the %.17g text of version 2 was. NaN has
 * no word: it is NULL (landing makes it NULL; `canonicalValue` gives null).
 */
function doubleWord(value: number): bigint {
  if (Number.isNaN(value)) throw new Error("NaN has no signature word: it is NULL");
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, value === 0 ? 0 : value);
  return view.getBigInt64(0);
}

function integerValue(kind: string, text: string): bigint {
  if (kind === "BOOLEAN") return text === "true" ? 1n : 0n;
  // The canonical text (%.17g) reads back to the same double: 17 significant digits round-trip.
  if (kind === "DOUBLE" || kind === "FLOAT") return doubleWord(parseDouble(text));
  if ((kind === "DATE" || kind === "TIMESTAMP" || kind === "TIMESTAMPTZ") && /^-?infinity$/.test(text)) {
    return text.startsWith("-") ? -INFINITY_WORDS[kind] : INFINITY_WORDS[kind];
  }
  if (kind.startsWith("DECIMAL(")) return BigInt(text.replace(".", ""));
  if (kind === "DATE") return daysFromCivil(Number(text.slice(0, 4)), Number(text.slice(5, 7)), Number(text.slice(8, 10)));
  if (kind === "TIME") return timeOfDayMicros(text);
  if (kind === "TIMESTAMP" || kind === "TIMESTAMPTZ") {
    const days = integerValue("DATE", text.slice(0, 10));
    return days * 86_400_000_000n + timeOfDayMicros(text.slice(11).replace(/Z$/, ""));
  }
  return BigInt(text);
}

/** Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil), exact for any year. */
function daysFromCivil(year: number, month: number, day: number): bigint {
  const y = BigInt(month <= 2 ? year - 1 : year);
  const era = (y >= 0n ? y : y - 399n) / 400n;
  const yearOfEra = y - era * 400n;
  const m = BigInt(month);
  const dayOfYear = (153n * (m > 2n ? m - 3n : m + 9n) + 2n) / 5n + BigInt(day) - 1n;
  const dayOfEra = yearOfEra * 365n + yearOfEra / 4n - yearOfEra / 100n + dayOfYear;
  return era * 146_097n + dayOfEra - 719_468n;
}

/** `HH:MM:SS.ffffff` as microseconds since midnight. */
function timeOfDayMicros(text: string): bigint {
  const [hours = 0, minutes = 0, seconds = 0] = text.slice(0, 8).split(":").map(Number);
  const micros = Number((text.slice(9) || "0").padEnd(6, "0").slice(0, 6));
  return BigInt(((hours * 60 + minutes) * 60 + seconds) * 1_000_000 + micros);
}

/** How many flag words hold `count` flags (at least one). */
export function flagWordCount(count: number): number {
  return Math.max(1, Math.ceil(count / FLAG_BITS));
}

/** Flags packed into words: flag i is bit (i mod 63) of word floor(i / 63). */
function flagWords(flags: readonly boolean[]): bigint[] {
  const words = new Array<bigint>(flagWordCount(flags.length)).fill(0n);
  flags.forEach((set, i) => {
    if (set) words[Math.floor(i / FLAG_BITS)]! |= 1n << BigInt(i % FLAG_BITS);
  });
  return words;
}

/** A row as the row hash reads it (docs/signatures.md, step 4). */
export interface RowItems {
  /** Data words, columns in name order. */
  readonly words: readonly bigint[];
  /** Flag words: a null flag per column, in name order. */
  readonly flags: readonly bigint[];
}

/** The data words and flag words of one row, columns in name order, values as canonical text (or null). */
export function rowItems(columns: readonly SignedColumn[], values: readonly (string | null)[]): RowItems {
  return {
    words: columns.flatMap((column, i) => fieldWords(column.type, values[i] ?? null)),
    flags: flagWords(columns.map((_, i) => (values[i] ?? null) === null)),
  };
}

/** The splitmix64 sequence: the keys of the row hash are drawn from it (docs/signatures.md, step 5). */
export function splitmix64(seed: bigint, count: number): bigint[] {
  const out: bigint[] = [];
  let state = seed & MASK64;
  for (let i = 0; i < count; i++) {
    state = (state + 0x9e3779b97f4a7c15n) & MASK64;
    let z = state;
    z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK64;
    z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & MASK64;
    out.push(z ^ (z >> 31n));
  }
  return out;
}

/** The seed of lane 0 ("lakeswap" in ASCII, big-endian); lane 1's is one more. */
const LANE_SEED = 0x6c616b6573776170n;

/** One product's keys: the first below 2^32, the second below 2^31 (so XOR keeps the signed high half in range). */
export type KeyPair = readonly [bigint, bigint];

/** The keys of one lane for rows of `items` items: the finalizer's key pair, then one key pair per item. */
export function laneKeys(lane: 0 | 1, items: number): { readonly finalizer: KeyPair; readonly items: readonly KeyPair[] } {
  const cacheKey = `${lane}/${items}`;
  const known = laneKeyCache.get(cacheKey);
  if (known) return known;
  const raw = splitmix64(LANE_SEED + BigInt(lane), 2 * (1 + items));
  const pairs: KeyPair[] = [];
  for (let i = 0; i < raw.length; i += 2) pairs.push([raw[i]! & MASK32, raw[i + 1]! & MASK31]);
  const keys = { finalizer: pairs[0]!, items: pairs.slice(1) };
  laneKeyCache.set(cacheKey, keys);
  return keys;
}

/** Keys depend only on the lane and the row's word count: derived once per shape, not once per row. */
const laneKeyCache = new Map<string, { readonly finalizer: KeyPair; readonly items: readonly KeyPair[] }>();

/**
 * One product of the row hash, for a signed 64-bit word w: (w mod 2^32, in
 * [0, 2^32), XOR k0) times (floor(w / 2^32), in [-2^31, 2^31), XOR k1): exact,
 * and within the signed 64-bit range. BigInt's XOR is two's complement, as SQL's.
 */
function product(word: bigint, [k0, k1]: KeyPair): bigint {
  return ((word & MASK32) ^ k0) * ((word >> 32n) ^ k1);
}

/**
 * The two lanes of one row, as unsigned 64-bit values: per lane, the XOR of one
 * product per word (data words, then flag words), then s ^= product(s,
 * finalizer keys), all as signed 64-bit integers.
 */
export function rowLanes(items: RowItems): readonly [bigint, bigint] {
  const all = [...items.words, ...items.flags];
  const lane = (index: 0 | 1): bigint => {
    const keys = laneKeys(index, all.length);
    let s = 0n;
    all.forEach((value, i) => {
      s ^= product(value, keys.items[i]!);
    });
    return BigInt.asUintN(64, s ^ product(s, keys.finalizer));
  };
  return [lane(0), lane(1)];
}

/** The final raw signature from the row count and the two lane sums (reduced modulo 2^64 here). */
export function finishRawSignature(columns: readonly SignedColumn[], rows: bigint | number, upper: bigint, lower: bigint, added: readonly (AddedSums | undefined)[] = []): string {
  const parts = signatureParts(columns);
  const header = parts.base.map((c) => `${c.name} ${c.signedAs ?? c.type}`).join(",");
  // An added column adds a line only where it holds a value: a partition without one signs as before the column was added.
  const addedLines = parts.added.flatMap((c, i) => {
    const sums = added[i];
    if (!sums || BigInt(sums.rows) === 0n) return [];
    return [`+${c.name} ${c.signedAs ?? c.type},${sums.rows},${hex64(sums.upper % LANE)},${hex64(sums.lower % LANE)}`];
  });
  const text = [`lakeswap-signature ${SIGNATURE_VERSION}`, header, String(rows), hex64(upper % LANE), hex64(lower % LANE), ...addedLines].join("\n");
  return `${SIGNATURE_VERSION}:${sha256(text)}`;
}

/**
 * The reference implementation of the raw signature, over rows whose values
 * are already canonical text (see `canonicalValue`), columns in `columns` order.
 * The engine computes the same thing in SQL; tests hold the two together.
 */
export function rawSignature(columns: readonly SignedColumn[], rows: readonly (readonly (string | null)[])[]): string {
  const { base, added } = signatureParts(columns.map((column, index) => ({ ...column, index })));
  const sums = (over: readonly (SignedColumn & { index: number })[], chosen: readonly (readonly (string | null)[])[]): AddedSums => {
    let [upper, lower] = [0n, 0n];
    for (const row of chosen) {
      const [a, b] = rowLanes(rowItems(over, over.map((column) => row[column.index] ?? null)));
      upper = (upper + a) % LANE;
      lower = (lower + b) % LANE;
    }
    return { rows: chosen.length, upper, lower };
  };
  const all = sums(base, rows);
  // Each added column over the rows where it holds a value, its words after the base columns' (its flag always clear).
  const apart = added.map((column) => sums([...base, column], rows.filter((row) => (row[column.index] ?? null) !== null)));
  return finishRawSignature(columns, rows.length, all.upper, all.lower, apart);
}

/**
 * The signature of a partition after a delivery part was appended to it
 * (`write: append`): the partition's signature before, and the part's. The
 * same appends in the same order give the same signature.
 */
export function appendSignature(before: string, appended: string): string {
  return `${SIGNATURE_VERSION}:${sha256([`lakeswap-append ${SIGNATURE_VERSION}`, before, appended].join("\n"))}`;
}

/** A derived partition's signature: its sorted input signatures, its transform's fingerprint, and the partition. */
export function chainSignature(inputSignatures: readonly string[], fingerprint: string, partition: string): string {
  const text = [`lakeswap-chain ${SIGNATURE_VERSION}`, ...[...inputSignatures].sort(), `transform ${fingerprint}`, `partition ${partition}`].join("\n");
  return `${SIGNATURE_VERSION}:${sha256(text)}`;
}

/** A transform's fingerprint: sha256 of the SQL file's bytes. */
export function transformFingerprint(sql: Uint8Array | string): string {
  return `sha256:${sha256(sql)}`;
}

/**
 * The canonical text of one value of a declared type, or null (reference
 * implementation for the types the tests use). Integers in base 10;
 * DECIMAL(p,s) with exactly s fraction digits, rounded half away from zero;
 * DOUBLE/FLOAT as C's `%.17g` (informational since v3: `fieldWords` reads it
 * back to the double, whose bits are the word), with NaN as NULL, -0 as `0`,
 * infinities as `inf`/`-inf`; BOOLEAN as `true`/`false`; DATE as
 * `YYYY-MM-DD`; TIMESTAMP as `YYYY-MM-DDTHH:MM:SS.ffffff`; TIMESTAMPTZ the same in UTC, then `Z` (a text
 * without a zone is UTC); ±infinity of DATE, TIMESTAMP and TIMESTAMPTZ as
 * `infinity`/`-infinity`; TIME as `HH:MM:SS.ffffff`; VARCHAR as is.
 * Integer-kind types are then read back into words by `fieldWords`.
 */
export function canonicalValue(type: string, value: string | number | bigint | boolean | null): string | null {
  if (value === null) return null;
  const kind = type.toUpperCase();
  if (/INT$|^HUGEINT$|^UHUGEINT$/.test(kind)) return BigInt(typeof value === "number" ? Math.trunc(value) : String(value).trim()).toString();
  const decimal = /^DECIMAL\((\d+),(\d+)\)$/.exec(kind);
  if (decimal) return canonicalDecimal(String(value), Number(decimal[2]));
  if (kind === "DOUBLE" || kind === "FLOAT") {
    const number = typeof value === "number" ? value : parseDouble(String(value));
    if (kind === "FLOAT") return formatG17(Math.fround(number));
    return formatG17(number);
  }
  if (kind === "BOOLEAN") return value === true || /^(true|t|1|yes|y)$/i.test(String(value)) ? "true" : "false";
  if ((kind === "DATE" || kind === "TIMESTAMP" || kind === "TIMESTAMPTZ") && /^\s*[+-]?infinity\s*$/i.test(String(value))) {
    return String(value).trim().toLowerCase().replace(/^\+/, "");
  }
  if (kind === "DATE") return String(value).slice(0, 10);
  if (kind === "TIMESTAMP") return canonicalTimestamp(String(value));
  if (kind === "TIMESTAMPTZ") return canonicalInstant(String(value));
  if (kind === "TIME") return canonicalTimestamp(`1970-01-01 ${String(value)}`).slice(11);
  return String(value);
}

function canonicalDecimal(text: string, scale: number): string {
  const match = /^\s*([+-])?(\d*)(?:\.(\d*))?\s*$/.exec(text);
  if (!match) throw new Error(`'${text}' is not a decimal number`);
  const negative = match[1] === "-";
  const whole = match[2] || "0";
  const fraction = match[3] ?? "";
  let units = BigInt(whole + fraction.padEnd(scale, "0").slice(0, scale));
  if ((fraction[scale] ?? "0") >= "5") units += 1n;
  if (units === 0n) return scale > 0 ? `0.${"0".repeat(scale)}` : "0";
  const digits = units.toString().padStart(scale + 1, "0");
  const body = scale > 0 ? `${digits.slice(0, -scale)}.${digits.slice(-scale)}` : digits;
  return negative ? `-${body}` : body;
}

/** A double from its text: a decimal number, or (any case) `inf`, `infinity`, `nan`, with an optional sign. */
function parseDouble(text: string): number {
  const trimmed = text.trim();
  const special = /^([+-]?)(inf|infinity|nan)$/i.exec(trimmed);
  if (special) return special[2]!.toLowerCase() === "nan" ? NaN : special[1] === "-" ? -Infinity : Infinity;
  const value = Number(trimmed);
  if (trimmed === "" || Number.isNaN(value)) throw new Error(`'${text}' is not a number`);
  return value;
}

/** C's printf("%.17g") for a double; null for NaN (NULL). */
export function formatG17(value: number): string | null {
  if (Number.isNaN(value)) return null;
  if (value === 0) return "0";
  if (!Number.isFinite(value)) return value > 0 ? "inf" : "-inf";
  const negative = value < 0;
  const [digits, exponent] = seventeenDigits(Math.abs(value));
  let body: string;
  if (exponent < -4 || exponent >= 17) {
    const fraction = digits.slice(1).replace(/0+$/, "");
    const sign = exponent < 0 ? "-" : "+";
    body = `${digits[0]}${fraction ? `.${fraction}` : ""}e${sign}${String(Math.abs(exponent)).padStart(2, "0")}`;
  } else if (exponent >= 0) {
    const whole = digits.slice(0, exponent + 1);
    const fraction = digits.slice(exponent + 1).replace(/0+$/, "");
    body = fraction ? `${whole}.${fraction}` : whole;
  } else {
    body = `0.${"0".repeat(-exponent - 1)}${digits.replace(/0+$/, "")}`;
  }
  return negative ? `-${body}` : body;
}

/**
 * A positive finite double rounded to 17 significant digits as C's printf does
 * it: from the exact binary value, ties to even (JavaScript's toExponential
 * breaks ties upward, which differs on values like the FLOAT 256.666656494140625).
 * Returns the 17 digits and the decimal exponent of the first one.
 */
function seventeenDigits(value: number): [string, number] {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, value);
  const bits = view.getBigUint64(0);
  const biased = Number((bits >> 52n) & 0x7ffn);
  const fraction = bits & ((1n << 52n) - 1n);
  const mantissa = biased === 0 ? fraction : fraction | (1n << 52n);
  const power = (biased === 0 ? 1 : biased) - 1075;
  // value = mantissa * 2^power = exact / 10^scale, with exact an integer.
  const [exact, scale] = power >= 0 ? [mantissa << BigInt(power), 0] : [mantissa * 5n ** BigInt(-power), -power];
  const text = exact.toString();
  const exponent = text.length - 1 - scale;
  if (text.length <= 17) return [text.padEnd(17, "0"), exponent];
  let kept = BigInt(text.slice(0, 17));
  const rest = text.slice(17);
  const half = `5${"0".repeat(rest.length - 1)}`;
  if (rest > half || (rest === half && kept % 2n === 1n)) kept += 1n;
  const rounded = kept.toString();
  // A carry to 18 digits (99…9 rounding up) moves the exponent.
  return rounded.length > 17 ? [rounded.slice(0, 17), exponent + 1] : [rounded, exponent];
}

function canonicalTimestamp(text: string): string {
  const match = /^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}:\d{2})(?:\.(\d{1,6}))?/.exec(text.trim());
  if (!match) throw new Error(`'${text}' is not a timestamp`);
  return `${match[1]}T${match[2]}.${(match[3] ?? "").padEnd(6, "0")}`;
}

/** A timestamp with a UTC offset (`+01`, `-05:30`, `Z`, or none for UTC) as the UTC canonical timestamp, then `Z`. */
function canonicalInstant(text: string): string {
  const match = /^(.*?)(Z|[+-]\d{2}(?::?\d{2})?)?$/.exec(text.trim());
  const local = canonicalTimestamp(match?.[1] ?? text);
  const offset = match?.[2] ?? "Z";
  if (offset === "Z") return `${local}Z`;
  const sign = offset.startsWith("-") ? -1 : 1;
  const digits = offset.slice(1).replace(":", "");
  const minutes = sign * (Number(digits.slice(0, 2)) * 60 + Number(digits.slice(2, 4) || "0"));
  const micros = BigInt(Date.parse(`${local.slice(0, 19)}Z`)) * 1000n + BigInt(local.slice(20, 26)) - BigInt(minutes) * 60_000_000n;
  const fraction = ((micros % 1_000_000n) + 1_000_000n) % 1_000_000n;
  const utc = new Date(Number((micros - fraction) / 1000n)).toISOString().slice(0, 19);
  return `${utc}.${String(fraction).padStart(6, "0")}Z`;
}

function hex64(value: bigint): string {
  return value.toString(16).padStart(16, "0");
}

function sha256(data: Uint8Array | string): string {
  return createHash("sha256").update(data).digest("hex");
}

/**
 * How raw signatures are computed (docs/signatures.md, "Two forms, one
 * algorithm"): `native` with lakeswap's DuckDB extension, `sql` in plain DuckDB
 * SQL. The signatures are the same either way; the native form is faster.
 */
export interface Signing {
  readonly form: "native" | "sql";
  /** Why the form is not native, when it is not (not built, switched off, failed its check). */
  readonly reason?: string;
}
