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

/**
 * A new folder `<prefix><pid>-XXXXXX` in the machine's temporary folder. Each process makes its own, so a leftover
 * never stands in a later run's way; the folders with this prefix of processes that are gone (killed before they
 * could remove theirs) are removed first.
 */
export async function freshProcessFolder(prefix: string): Promise<string> {
  const parent = tmpdir();
  const names = await readdir(parent).catch(() => [] as string[]);
  for (const name of names) {
    if (!name.startsWith(prefix)) continue;
    const pid = /^(\d+)-/.exec(name.slice(prefix.length))?.[1];
    if (pid !== undefined && Number(pid) !== process.pid && !processAlive(Number(pid))) {
      await rm(path.join(parent, name), { recursive: true, force: true }).catch(() => undefined);
    }
  }
  return mkdtemp(path.join(parent, `${prefix}${process.pid}-`));
}
