// Vitest global setup: the run's temporary folder (TMPDIR, which every test's lakes, emulators' data, PostgreSQL
// cluster and child processes use) on a memory file system where the machine has one with room to spare. The tests
// exercise the same code either way: no test relies on bytes surviving a power loss (durability is asserted by
// counting and ordering fsync calls, test/support/fsync-spy.ts), and kill -9 leaves a tmpfs exactly as it leaves a
// disk. What changes is time: an fsync on ext4 waits for the disk, and the suite makes tens of thousands of them.
// LAKESWAP_TEST_TMPDIR=disk keeps the machine's own TMPDIR (e.g. to run the suite on a real disk); any other value
// is a folder to use.
import { chmodSync, mkdtempSync, rmSync, statfsSync } from "node:fs";
import { freemem, tmpdir } from "node:os";
import path from "node:path";

const SHM = "/dev/shm";
/** Room the memory file system must have free, and memory the machine must have free, to be used (bytes). */
const MIN_SHM_FREE = 4 * 1024 ** 3;
const MIN_MEMORY_FREE = 6 * 1024 ** 3;

/** Points TMPDIR at a fresh folder for the run; the teardown removes it and restores TMPDIR. */
export default function testTmpdir(): () => void {
  const chosen = process.env.LAKESWAP_TEST_TMPDIR;
  if (chosen === "disk") return () => undefined;
  const parent = chosen ?? (memoryFileSystemFits() ? SHM : undefined);
  if (parent === undefined) return () => undefined;
  const dir = mkdtempSync(path.join(parent, "lakeswap-tests-"));
  // Like /tmp: the PostgreSQL cluster's folder inside it belongs to another user where the tests run as root.
  chmodSync(dir, 0o1777);
  const before = process.env.TMPDIR;
  // The test workers and every process they start inherit it (they start after the global setup).
  process.env.TMPDIR = dir;
  return () => {
    if (before === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = before;
    rmSync(dir, { recursive: true, force: true });
  };
}

function memoryFileSystemFits(): boolean {
  try {
    const stats = statfsSync(SHM);
    return stats.bavail * stats.bsize >= MIN_SHM_FREE && freemem() >= MIN_MEMORY_FREE && path.resolve(tmpdir()) !== path.resolve(SHM);
  } catch {
    return false;
  }
}
