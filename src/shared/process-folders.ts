import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { InvalidInputError } from "../model/errors.js";

/** Whether a process with this id runs (or runs under another user, which we may not signal). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** lakeswap's scratch folders in the machine's temporary folder: `lakeswap-<kind>-<pid>-XXXXXX`. */
const PROCESS_FOLDER = /^lakeswap-[a-z]+-(\d+)-[^-]+$/;

/** How often one process looks for the folders of dead ones: a sync on S3 makes a folder per build. */
const SWEEP_INTERVAL_MS = 60_000;

/** When this process last looked in each temporary folder. */
const swept = new Map<string, number>();

/**
 * A new folder `<prefix><pid>-XXXXXX` in the machine's temporary folder (`prefix` is `lakeswap-<kind>-`). Each
 * process makes its own, so a leftover never stands in a later run's way. Before the first one, and then at most
 * once a minute, lakeswap's folders of every kind whose process is gone (killed before it could remove its own:
 * a landing's spill, a stage or run of an S3 lake, a collector's segment copy) are removed, so that a kill -9
 * leaves nothing behind for long.
 */
export async function freshProcessFolder(prefix: string): Promise<string> {
  const parent = tmpdir();
  const now = Date.now();
  if (now - (swept.get(parent) ?? -Infinity) >= SWEEP_INTERVAL_MS) {
    swept.set(parent, now);
    await removeDeadProcessFolders(parent);
  }
  try {
    return await mkdtemp(path.join(parent, `${prefix}${process.pid}-`));
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== "ENOENT" && code !== "ENOTDIR" && code !== "EACCES" && code !== "EPERM" && code !== "EROFS") throw error;
    const what = code === "ENOENT" || code === "ENOTDIR" ? "is not a folder" : "is not writable by this user";
    throw new InvalidInputError(
      `the temporary folder '${parent}' ${what} (${code}): lakeswap keeps scratch and spill files there; point TMPDIR at a writable folder with room for a delivery, or unset it`,
    );
  }
}

async function removeDeadProcessFolders(parent: string): Promise<void> {
  const names = await readdir(parent).catch(() => [] as string[]);
  for (const name of names) {
    const pid = PROCESS_FOLDER.exec(name)?.[1];
    if (pid !== undefined && Number(pid) !== process.pid && !processAlive(Number(pid))) {
      await rm(path.join(parent, name), { recursive: true, force: true }).catch(() => undefined);
    }
  }
}
