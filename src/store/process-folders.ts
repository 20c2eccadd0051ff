import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

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

/**
 * A new folder `<prefix><pid>-XXXXXX` in the machine's temporary folder (`prefix` is `lakeswap-<kind>-`). Each
 * process makes its own, so a leftover never stands in a later run's way; first, lakeswap's folders of every
 * kind whose process is gone (killed before it could remove its own: a landing's spill, a stage or run of an
 * S3 lake, a collector's segment copy) are removed, so that a kill -9 leaves nothing behind for long.
 */
export async function freshProcessFolder(prefix: string): Promise<string> {
  const parent = tmpdir();
  const names = await readdir(parent).catch(() => [] as string[]);
  for (const name of names) {
    const pid = PROCESS_FOLDER.exec(name)?.[1];
    if (pid !== undefined && Number(pid) !== process.pid && !processAlive(Number(pid))) {
      await rm(path.join(parent, name), { recursive: true, force: true }).catch(() => undefined);
    }
  }
  return mkdtemp(path.join(parent, `${prefix}${process.pid}-`));
}
