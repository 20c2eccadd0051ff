import { createHash } from "node:crypto";

/**
 * Content signatures, version 1 (specified in docs/signatures.md).
 *
 * Raw layer: every row of the signed columns (sorted by name) is written in a
 * canonical text form; each row's MD5 digest gives two 64-bit lanes (its first
 * and last 8 bytes, little-endian); the lanes are summed over all rows modulo
 * 2^64. Summing makes the digest order-insensitive and duplicate-sensitive.
 * The signature is `v1:` + sha256 over the version, the columns with their
 * types, the row count and the two sums.
 *
 * Derived layers: `v1:` + sha256 over the sorted input signatures, the
 * transform's fingerprint and the partition.
 */
export const SIGNATURE_VERSION = "v1";

const LANE = 1n << 64n;

/** A signed column: its name and declared (normalized) type. */
export interface SignedColumn {
  readonly name: string;
  readonly type: string;
}

/** The columns of a signature in their canonical order (by name, bytewise). */
export function signatureColumnOrder<T extends SignedColumn>(columns: readonly T[]): T[] {
  return [...columns].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/** The text of one canonical row: `N` for NULL, else `<UTF-8 byte length>:<canonical value>`, joined by `|`. */
export function canonicalRow(values: readonly (string | null)[]): string {
  return values.map((value) => (value === null ? "N" : `${Buffer.byteLength(value, "utf8")}:${value}`)).join("|");
}

/** The two 64-bit lanes of one canonical row: MD5 bytes 0-7 and 8-15, each little-endian. */
export function rowLanes(row: string): readonly [bigint, bigint] {
  const digest = createHash("md5").update(row, "utf8").digest();
  return [digest.readBigUInt64LE(0), digest.readBigUInt64LE(8)];
}

/** The final raw signature from the row count and the two lane sums (already reduced modulo 2^64). */
export function finishRawSignature(columns: readonly SignedColumn[], rows: bigint | number, upper: bigint, lower: bigint): string {
  const header = signatureColumnOrder(columns).map((c) => `${c.name} ${c.type}`).join(",");
  const text = [`lakeswap-signature ${SIGNATURE_VERSION}`, header, String(rows), hex64(upper % LANE), hex64(lower % LANE)].join("\n");
  return `${SIGNATURE_VERSION}:${sha256(text)}`;
}

/**
 * The reference implementation of the raw signature, over rows whose values
 * are already canonical text (see `canonicalValue`), columns in `columns` order.
 * The engine computes the same thing in SQL; tests hold the two together.
 */
export function rawSignature(columns: readonly SignedColumn[], rows: readonly (readonly (string | null)[])[]): string {
  const order = signatureColumnOrder(columns.map((column, index) => ({ ...column, index })));
  let upper = 0n;
  let lower = 0n;
  for (const row of rows) {
    const [hi, lo] = rowLanes(canonicalRow(order.map((column) => row[column.index] ?? null)));
    upper = (upper + hi) % LANE;
    lower = (lower + lo) % LANE;
  }
  return finishRawSignature(columns, rows.length, upper, lower);
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
 * implementation for the types test vectors use). Integers in base 10;
 * DECIMAL(p,s) with exactly s fraction digits, rounded half away from zero;
 * DOUBLE/FLOAT as C's `%.17g`, with NaN as NULL, -0 as `0`, infinities as
 * `inf`/`-inf`; BOOLEAN as `true`/`false`; DATE as `YYYY-MM-DD`; TIMESTAMP as
 * `YYYY-MM-DDTHH:MM:SS.ffffff`; VARCHAR as is.
 */
export function canonicalValue(type: string, value: string | number | bigint | boolean | null): string | null {
  if (value === null) return null;
  const kind = type.toUpperCase();
  if (/INT$|^HUGEINT$|^UHUGEINT$/.test(kind)) return BigInt(typeof value === "number" ? Math.trunc(value) : String(value).trim()).toString();
  const decimal = /^DECIMAL\((\d+),(\d+)\)$/.exec(kind);
  if (decimal) return canonicalDecimal(String(value), Number(decimal[2]));
  if (kind === "DOUBLE" || kind === "FLOAT") {
    const number = Number(value);
    if (kind === "FLOAT") return formatG17(Math.fround(number));
    return formatG17(number);
  }
  if (kind === "BOOLEAN") return value === true || /^(true|t|1|yes|y)$/i.test(String(value)) ? "true" : "false";
  if (kind === "DATE") return String(value).slice(0, 10);
  if (kind === "TIMESTAMP") return canonicalTimestamp(String(value));
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

/** C's printf("%.17g") for a double, with NaN as NULL-like null handled by the caller. */
export function formatG17(value: number): string | null {
  if (Number.isNaN(value)) return null;
  if (value === 0) return "0";
  if (!Number.isFinite(value)) return value > 0 ? "inf" : "-inf";
  const [mantissa = "", exponentText = "0"] = value.toExponential(16).split("e");
  const exponent = Number(exponentText);
  const negative = mantissa.startsWith("-");
  const digits = mantissa.replace("-", "").replace(".", "");
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

function canonicalTimestamp(text: string): string {
  const match = /^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}:\d{2})(?:\.(\d{1,6}))?/.exec(text.trim());
  if (!match) throw new Error(`'${text}' is not a timestamp`);
  return `${match[1]}T${match[2]}.${(match[3] ?? "").padEnd(6, "0")}`;
}

function hex64(value: bigint): string {
  return value.toString(16).padStart(16, "0");
}

function sha256(data: Uint8Array | string): string {
  return createHash("sha256").update(data).digest("hex");
}
