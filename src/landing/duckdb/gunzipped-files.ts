import { closeSync, createReadStream, createWriteStream, openSync, readSync } from "node:fs";
import { mkdir, rm } from "node:fs/promises";
import path from "node:path";
import { pipeline } from "node:stream/promises";
import { createGunzip } from "node:zlib";
import { InvalidInputError, LakeswapError } from "../../model/errors.js";
import { freshProcessFolder } from "../../shared/process-folders.js";

/** The first two bytes of every gzip member (RFC 1952). */
const GZIP_MAGIC = [0x1f, 0x8b] as const;

/** Whether `file` starts as a gzip file does (by its bytes, whatever its name). */
export function isGzipFile(file: string): boolean {
  try {
    const fd = openSync(file, "r");
    try {
      const head = Buffer.alloc(2);
      return readSync(fd, head, 0, 2, 0) === 2 && head[0] === GZIP_MAGIC[0] && head[1] === GZIP_MAGIC[1];
    } finally {
      closeSync(fd);
    }
  } catch {
    return false;
  }
}

/**
 * A delivery whose gzip-compressed files were decompressed into a scratch folder: `files` are what landing reads
 * (each decompressed file in place of its original, the others as they are), in the delivery's order.
 */
export interface GunzippedDelivery {
  readonly files: readonly string[];
  /** `text` with every decompressed file's path replaced by its original's: what a user is shown (errors, dead letters). */
  originalNames(text: string): string;
  /** Pairs of (decompressed file, original file). */
  readonly renamed: readonly (readonly [string, string])[];
  /** Removes the decompressed files. */
  remove(): Promise<void>;
}

/**
 * Decompresses a delivery's gzip-compressed files (`orders.csv.gz`, or any file whose bytes are gzip) into a scratch
 * folder of this process (removed by `remove`, or after a kill by the next lakeswap process), streamed, so that every
 * reader of a delivery (DuckDB's and lakeswap's own line numbering) reads plain text. Undefined when no file is
 * compressed. A file compressed of several gzip members (as `cat a.gz b.gz` makes) is read whole. The delivery's id
 * stays the digest of the files as delivered.
 */
export async function gunzipDelivery(files: readonly string[]): Promise<GunzippedDelivery | undefined> {
  const compressed = files.map(isGzipFile);
  if (!compressed.includes(true)) return undefined;
  const folder = await freshProcessFolder("lakeswap-gunzip-");
  const remove = (): Promise<void> => rm(folder, { recursive: true, force: true });
  const renamed: [string, string][] = [];
  try {
    const read: string[] = [];
    for (const [index, file] of files.entries()) {
      if (!compressed[index]) {
        read.push(file);
        continue;
      }
      // A folder per file keeps each name (its `.gz` cut) without two files of one name meeting.
      const target = path.join(folder, String(index), path.basename(file).replace(/\.gz(ip)?$/i, "") || "data");
      await mkdir(path.dirname(target));
      await gunzipFile(file, target);
      renamed.push([target, file]);
      read.push(target);
    }
    const originalNames = (text: string): string => renamed.reduce((shown, [target, original]) => shown.split(target).join(original), text);
    return { files: read, originalNames, renamed, remove };
  } catch (error) {
    await remove();
    throw error;
  }
}

async function gunzipFile(file: string, target: string): Promise<void> {
  try {
    await pipeline(createReadStream(file), createGunzip(), createWriteStream(target, { flags: "wx" }));
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOSPC") {
      throw new LakeswapError(
        "NO_SPACE",
        `decompressing ${file} filled the temporary folder ${path.dirname(path.dirname(target))}: lakeswap gunzips a compressed delivery there before reading it; ` +
          "point TMPDIR at a folder with room for the decompressed files, or deliver them decompressed",
        { cause: error },
      );
    }
    if (code?.startsWith("Z_") || code === "ERR_ZLIB_INITIALIZATION_FAILED") {
      throw new InvalidInputError(
        `${file} is not a whole gzip file (${(error as Error).message}): it may be truncated or damaged; deliver it again, complete (gzip -t '${file}' checks it)`,
      );
    }
    throw error;
  }
  if (isGzipFile(target)) {
    throw new InvalidInputError(`${file} is gzip-compressed twice: lakeswap decompresses a delivery file once; gunzip -k '${file}' leaves it compressed once, which lakeswap reads`);
  }
}
