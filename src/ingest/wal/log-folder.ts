import { randomBytes } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { LakeswapError, LeaseHeldError } from "../../model/errors.js";
import { processAlive } from "../../shared/process-folders.js";
import { fsyncPath, isCode, readOptional } from "./segment-files.js";
import { call } from "./wal-sync.js";

const LOG_ID = /^[0-9a-z]{8,64}$/;

/** The log's id, made and stored (temp file, fsync, rename, folder fsync) the first time the folder is used. */
export async function logId(dir: string, hasSegments: boolean): Promise<string> {
  const file = path.join(dir, "id");
  const stored = await readOptional(file);
  if (stored !== undefined) {
    const id = stored.trim();
    if (LOG_ID.test(id)) return id;
    throw new LakeswapError("STORE_ERROR", `'${file}' holds '${id.slice(0, 80)}', not a write-ahead log id (8 to 64 lowercase letters and digits): restore it from a backup`);
  }
  if (hasSegments) {
    throw new LakeswapError(
      "STORE_ERROR",
      `the write-ahead log in '${dir}' has segments but no 'id' file: restore it (a new id would rename segments that may already be uploaded)`,
    );
  }
  const id = randomBytes(12).toString("hex");
  const temp = `${file}.tmp`;
  await call((done) => fs.writeFile(temp, `${id}\n`, done));
  await fsyncPath(temp);
  await call((done) => fs.rename(temp, file, done));
  await fsyncPath(dir);
  return id;
}

/**
 * Takes the folder's `lock` file, holding this process's id. The file appears whole (hard link of a written
 * temp file, which fails if it exists). A lock whose process is gone is moved aside by rename, so of two
 * processes taking it over only one wins; a lock moved aside that turns out to be a live one is put back.
 */
export async function takeLock(dir: string): Promise<void> {
  const lock = path.join(dir, "lock");
  const temp = path.join(dir, `lock.${process.pid}-${randomBytes(4).toString("hex")}.tmp`);
  await call((done) => fs.writeFile(temp, `${process.pid}\n`, { flag: "wx" }, done));
  try {
    for (let attempt = 0; attempt < 20; attempt += 1) {
      try {
        await call((done) => fs.link(temp, lock, done));
        return;
      } catch (error) {
        if (!isCode(error, "EEXIST")) throw error;
      }
      const held = await readOptional(lock);
      if (held === undefined) continue;
      await takeOverIfDead(dir, lock, held);
    }
    throw new LakeswapError("CONFLICT", `could not take the lock of the write-ahead log in '${dir}': other processes keep taking it over`, { retryable: true });
  } finally {
    await call((done) => fs.unlink(temp, done)).catch(() => undefined);
  }
}

/** Moves aside a lock (holding `held`) whose process is gone; refuses one held by a live process, or that holds no process id. */
async function takeOverIfDead(dir: string, lock: string, held: string): Promise<void> {
  const pid = /^\d+\n?$/.test(held) ? Number(held) : undefined;
  if (pid === undefined) {
    throw new LakeswapError("STORE_ERROR", `the lock file '${lock}' holds '${held.slice(0, 80)}', not a process id: if no collector uses '${dir}', delete it`);
  }
  if (processAlive(pid)) {
    throw new LeaseHeldError(
      `the write-ahead log in '${dir}' is in use by process ${pid}${pid === process.pid ? " (this process)" : ""}: stop it, or give this collector its own WAL folder`,
    );
  }
  const aside = path.join(dir, `lock.${process.pid}-${randomBytes(4).toString("hex")}.stale`);
  try {
    await call((done) => fs.rename(lock, aside, done));
  } catch (error) {
    if (isCode(error, "ENOENT")) return;
    throw error;
  }
  if ((await readOptional(aside)) !== held) await call((done) => fs.link(aside, lock, done)).catch(() => undefined);
  await call((done) => fs.unlink(aside, done));
}

/** Deletes the temporary files of lock attempts by processes that are gone (killed between two steps of `takeLock`). */
export async function removeLeftoverLockFiles(dir: string): Promise<void> {
  for (const name of await call<string[]>((done) => fs.readdir(dir, done))) {
    const match = /^lock\.(\d+)-[0-9a-f]+\.(tmp|stale)$/.exec(name);
    if (match && Number(match[1]) !== process.pid && !processAlive(Number(match[1]))) {
      await call((done) => fs.unlink(path.join(dir, name), done)).catch(() => undefined);
    }
  }
}

/** Removes the folder's lock file if this process holds it. */
export async function releaseLock(dir: string): Promise<void> {
  const lock = path.join(dir, "lock");
  if ((await readOptional(lock)) === `${process.pid}\n`) await call((done) => fs.unlink(lock, done)).catch(() => undefined);
}
