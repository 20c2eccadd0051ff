import { createRequire } from "node:module";

/**
 * CRC-32C (Castagnoli, the iSCSI/ext4/LevelDB checksum: reflected polynomial 0x82F63B78). Computed by
 * `@node-rs/crc32` (the CPU's CRC32 instruction: about 5 GB/s here) when its prebuilt binary loads; else by the
 * table-driven slicing-by-8 below, in plain JavaScript (about 0.8 GB/s), which gives the same values (see
 * test/ingest/wal.test.ts for the check value and the comparison of the two).
 */
const POLYNOMIAL = 0x82f63b78;

type NativeCrc = (input: Buffer, initialState?: number) => number;

/** The native CRC-32C, or undefined where its binary is missing (a platform without a prebuilt one, `npm ci --omit=optional`). */
export const nativeCrc32c: NativeCrc | undefined = (() => {
  try {
    return (createRequire(import.meta.url)("@node-rs/crc32") as { crc32c: NativeCrc }).crc32c;
  } catch {
    return undefined;
  }
})();

/** Eight 256-entry tables in one array: table k at [k * 256, k * 256 + 256) advances the CRC over k more zero bytes. */
const TABLES = buildTables();

function buildTables(): Int32Array {
  const tables = new Int32Array(8 * 256);
  for (let byte = 0; byte < 256; byte += 1) {
    let crc = byte;
    for (let bit = 0; bit < 8; bit += 1) crc = crc & 1 ? (crc >>> 1) ^ POLYNOMIAL : crc >>> 1;
    tables[byte] = crc;
  }
  for (let byte = 0; byte < 256; byte += 1) {
    let crc = tables[byte] as number;
    for (let k = 1; k < 8; k += 1) {
      crc = (tables[crc & 0xff] as number) ^ (crc >>> 8);
      tables[k * 256 + byte] = crc;
    }
  }
  return tables;
}

/**
 * The CRC-32C of `bytes[start, end)`, continuing from `previous` (the CRC of the bytes before them; 0 to start),
 * so `crc32c(b, crc32c(a))` is the CRC of a followed by b. Returned as an unsigned 32-bit number.
 */
export function crc32c(bytes: Uint8Array, previous = 0, start = 0, end = bytes.length): number {
  if (nativeCrc32c !== undefined) return nativeCrc32c(Buffer.from(bytes.buffer, bytes.byteOffset + start, end - start), previous) >>> 0;
  return crc32cPortable(bytes, previous, start, end);
}

/** The CRC-32C in plain JavaScript (slicing-by-8); `crc32c` uses it where the native one is missing. */
export function crc32cPortable(bytes: Uint8Array, previous = 0, start = 0, end = bytes.length): number {
  const t = TABLES;
  let crc = ~previous;
  let i = start;
  for (const last = end - 8; i <= last; i += 8) {
    const low = crc ^ (bytes[i]! | (bytes[i + 1]! << 8) | (bytes[i + 2]! << 16) | (bytes[i + 3]! << 24));
    crc =
      t[1792 + (low & 0xff)]! ^
      t[1536 + ((low >>> 8) & 0xff)]! ^
      t[1280 + ((low >>> 16) & 0xff)]! ^
      t[1024 + (low >>> 24)]! ^
      t[768 + bytes[i + 4]!]! ^
      t[512 + bytes[i + 5]!]! ^
      t[256 + bytes[i + 6]!]! ^
      t[bytes[i + 7]!]!;
  }
  for (; i < end; i += 1) crc = t[(crc ^ bytes[i]!) & 0xff]! ^ (crc >>> 8);
  return ~crc >>> 0;
}
