import fs from "node:fs";
import { vi } from "vitest";

/**
 * Records the path of every fsync(2) the local adapters make (they fsync through the callback API, `fs.fsync`, a
 * descriptor opened with `fs.openSync` or `fs.open`), so a test can count how often each file and folder was made durable.
 */
export function recordFsyncs(): { readonly paths: string[]; count(path: string): number; restore(): void } {
  const realOpen = fs.open;
  const realOpenSync = fs.openSync;
  const realFsync = fs.fsync;
  const opened = new Map<number, string>();
  const paths: string[] = [];
  const open = vi.spyOn(fs, "open").mockImplementation(((...args: unknown[]) => {
    const done = args.pop() as (error: NodeJS.ErrnoException | null, fd?: number) => void;
    (realOpen as (...a: unknown[]) => void)(...args, (error: NodeJS.ErrnoException | null, fd?: number) => {
      if (!error && fd !== undefined) opened.set(fd, String(args[0]));
      done(error, fd);
    });
  }) as typeof fs.open);
  const openSync = vi.spyOn(fs, "openSync").mockImplementation(((...args: Parameters<typeof fs.openSync>) => {
    const fd = realOpenSync(...args);
    opened.set(fd, String(args[0]));
    return fd;
  }) as typeof fs.openSync);
  const fsync = vi.spyOn(fs, "fsync").mockImplementation(((fd: number, done: (error: NodeJS.ErrnoException | null) => void) => {
    paths.push(opened.get(fd) ?? `fd ${fd}`);
    realFsync(fd, done);
  }) as typeof fs.fsync);
  return {
    paths,
    count: (path) => paths.filter((p) => p === path).length,
    restore: () => {
      open.mockRestore();
      openSync.mockRestore();
      fsync.mockRestore();
    },
  };
}
