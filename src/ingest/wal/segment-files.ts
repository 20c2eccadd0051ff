import fs from "node:fs";
import path from "node:path";
import { LakeswapError, NotFoundError } from "../../model/errors.js";
import { call } from "./wal-sync.js";

/** Digits of a segment's sequence number: ids sort by age as text, for a segment a second for 3,000 years. */
const SEQ_DIGITS = 12;
const SEGMENT_FILE = /^(\d{12})\.(open|sealed)$/;

/** A segment's file in the log's folder: its sequence number, and whether it is still open or sealed. */
export interface SegmentFile {
  readonly seq: number;
  readonly state: "open" | "sealed";
}

/** The id of segment `seq` of the log `id`: `<id>-<seq, 12 digits>`. */
export function segmentIdOf(id: string, seq: number): string {
  return `${id}-${String(seq).padStart(SEQ_DIGITS, "0")}`;
}

/** The path of segment `seq`'s file in `state`. */
export function segmentFile(dir: string, seq: number, state: "open" | "sealed"): string {
  return path.join(dir, `${String(seq).padStart(SEQ_DIGITS, "0")}.${state}`);
}

/** The segment files in the log's folder, oldest first; refuses a segment found both open and sealed. */
export async function listSegments(dir: string): Promise<SegmentFile[]> {
  const files: SegmentFile[] = [];
  for (const name of await call<string[]>((done) => fs.readdir(dir, done))) {
    const match = SEGMENT_FILE.exec(name);
    if (match) files.push({ seq: Number(match[1]), state: match[2] as "open" | "sealed" });
  }
  files.sort((a, b) => a.seq - b.seq);
  for (let i = 1; i < files.length; i += 1) {
    const [before, file] = [files[i - 1] as SegmentFile, files[i] as SegmentFile];
    if (before.seq === file.seq) {
      throw new LakeswapError("STORE_ERROR", `the write-ahead log in '${dir}' has segment ${file.seq} both open and sealed: it was changed by hand; keep the sealed file`);
    }
  }
  return files;
}

/** The whole of a segment's file, read into `allocate(size)` (which may be larger: the view returned is `size` long). */
export async function readSegmentFile(file: string, segment: string, dir: string, allocate: (size: number) => Buffer): Promise<Buffer> {
  let fd: number;
  try {
    fd = await call<number>((done) => fs.open(file, "r", done));
  } catch (error) {
    if (isCode(error, "ENOENT")) throw new NotFoundError(`segment '${segment}' of the write-ahead log in '${dir}' was removed`);
    throw error;
  }
  try {
    const size = (await call<fs.Stats>((done) => fs.fstat(fd, done))).size;
    const buffer = allocate(size);
    let read = 0;
    while (read < size) {
      const bytes = await call<number>((done) => fs.read(fd, buffer, read, size - read, read, done));
      if (bytes === 0) throw new LakeswapError("STORE_ERROR", `segment '${segment}' of the write-ahead log in '${dir}' ended at ${read} of its ${size} bytes while it was read`);
      read += bytes;
    }
    return buffer.subarray(0, size);
  } finally {
    await call((done) => fs.close(fd, done)).catch(() => undefined);
  }
}

/** Cuts a file to `size` bytes and fsyncs it. */
export async function truncateDurably(file: string, size: number): Promise<void> {
  const fd = await call<number>((done) => fs.open(file, "r+", done));
  try {
    await call((done) => fs.ftruncate(fd, size, done));
    await call((done) => fs.fsync(fd, done));
  } finally {
    await call((done) => fs.close(fd, done));
  }
}

/** Makes `dir` and fsyncs the parent of each folder made, so the folder itself survives a power loss. */
export async function makeFolder(dir: string): Promise<void> {
  const first = await fs.promises.mkdir(dir, { recursive: true });
  if (first === undefined) return;
  for (let folder = dir; ; folder = path.dirname(folder)) {
    await fsyncPath(path.dirname(folder));
    if (folder === first || folder === path.dirname(folder)) break;
  }
}

/** A file's text, or undefined when there is no such file. */
export async function readOptional(file: string): Promise<string | undefined> {
  try {
    return await call<string>((done) => fs.readFile(file, "utf8", done));
  } catch (error) {
    if (isCode(error, "ENOENT")) return undefined;
    throw error;
  }
}

/** fsyncs a file or a folder (a folder: so the entries made, renamed or deleted in it survive a power loss). */
export async function fsyncPath(target: string): Promise<void> {
  const fd = await call<number>((done) => fs.open(target, "r", done));
  try {
    await call((done) => fs.fsync(fd, done));
  } finally {
    await call((done) => fs.close(fd, done));
  }
}

/** Whether `error` is a system error with `code` (ENOENT, ENOSPC, ...). */
export function isCode(error: unknown, code: string): boolean {
  return typeof error === "object" && error !== null && (error as { code?: unknown }).code === code;
}
