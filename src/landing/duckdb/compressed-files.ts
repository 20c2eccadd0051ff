import { closeSync, openSync, readSync } from "node:fs";
import { InvalidInputError } from "../../model/errors.js";

/** Compressed formats by their first bytes, and the command that decompresses each. */
const COMPRESSED: readonly { readonly kind: string; readonly magic: readonly number[]; readonly command: string }[] = [
  { kind: "zstd", magic: [0x28, 0xb5, 0x2f, 0xfd], command: "zstd -d" },
  { kind: "bzip2", magic: [0x42, 0x5a, 0x68], command: "bunzip2 -k" },
  { kind: "xz", magic: [0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00], command: "unxz -k" },
  { kind: "zip", magic: [0x50, 0x4b, 0x03, 0x04], command: "unzip" },
];

/**
 * The error for a delivery file that is compressed in a format lakeswap does not decompress (zstd, bzip2, xz or zip, by
 * its first bytes; gzip is decompressed: ./gunzipped-files.ts): named with the command that decompresses it. Undefined for any other file. Asked only once a file
 * failed to read (its text is not UTF-8, its header lacks the columns, DuckDB refused it), so a delivery that reads
 * costs no more.
 */
export function compressedFileError(file: string, format: string): InvalidInputError | undefined {
  let head: Buffer;
  try {
    const fd = openSync(file, "r");
    try {
      head = Buffer.alloc(6);
      head = head.subarray(0, readSync(fd, head, 0, 6, 0));
    } finally {
      closeSync(fd);
    }
  } catch {
    return undefined;
  }
  const found = COMPRESSED.find(({ magic }) => head.length >= magic.length && magic.every((byte, i) => head[i] === byte));
  if (!found) return undefined;
  return new InvalidInputError(
    `${file} is ${found.kind}-compressed: lakeswap reads ${format} files as they are, not compressed whole; decompress it first (e.g. ${found.command} '${file}') and deliver the decompressed file`,
  );
}
