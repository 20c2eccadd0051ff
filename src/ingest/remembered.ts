import { promises as fs } from "node:fs";
import path from "node:path";
import { now } from "../shared/clock.js";
import { fsyncPath, isCode } from "./wal/segment-files.js";

/**
 * What a collector remembers for a while, by name (idempotency keys, event ids): each value as of a time (ms), kept
 * for `windowMs` from it and at most `max` at once; past that the oldest are forgotten first (`evictions`). Oldest
 * first: a name remembered again moves to the end.
 */
export class Remembered<V> {
  private readonly values = new Map<string, V>();
  evictions = 0;

  constructor(
    readonly windowMs: number,
    private readonly max: number,
    private readonly timeOf: (value: V) => number,
  ) {}

  get size(): number {
    return this.values.size;
  }

  /** The value remembered for `name` within the window (one past it is forgotten now), else undefined. */
  get(name: string): V | undefined {
    const value = this.values.get(name);
    if (value === undefined) return undefined;
    if (this.timeOf(value) >= now() - this.windowMs) return value;
    this.values.delete(name);
    return undefined;
  }

  /** Remembers `value` for `name`; forgets what is past the window, then the oldest past `max`. */
  set(name: string, value: V): void {
    this.values.delete(name);
    this.values.set(name, value);
    const oldest = now() - this.windowMs;
    for (const [first, held] of this.values) {
      const inWindow = this.timeOf(held) >= oldest;
      if (inWindow && this.values.size <= this.max) break;
      // Past the window it is forgotten as it should be; within it, forgetting is an eviction.
      if (inWindow) this.evictions += 1;
      this.values.delete(first);
    }
  }

  /** Remembers values found in a file or a log, in any order, as of their own times. */
  restore(entries: Iterable<readonly [string, V]>): void {
    for (const [name, value] of [...entries].sort((a, b) => this.timeOf(a[1]) - this.timeOf(b[1]))) this.set(name, value);
  }

  delete(name: string): void {
    this.values.delete(name);
  }

  entries(): IterableIterator<[string, V]> {
    return this.values.entries();
  }
}

/**
 * The file in a write-ahead log's folder that keeps what a `Remembered` holds for the landed segments (their
 * records, which held it, are gone): JSON lines, appended (and fdatasynced) before a landed segment is removed, and
 * rewritten (aside, then renamed over it) at start and whenever it holds far more lines than is remembered. A line
 * torn by a crash is skipped: its segment was not removed, so the log still holds what it said.
 */
export class RememberedFile<V> {
  private lines = 0;

  constructor(
    private readonly file: string,
    private readonly codec: { readonly format: (name: string, value: V) => unknown; readonly parse: (line: unknown) => [string, V] | undefined },
  ) {}

  /** Restores what the file holds into `remembered` (what is past its window is dropped), then writes the file anew with what is kept. */
  async load(remembered: Remembered<V>): Promise<void> {
    const kept = await this.read();
    remembered.restore(kept);
    if (kept.length > 0) await this.rewrite(remembered);
  }

  /** What the file holds (nothing when there is no file yet). */
  private async read(): Promise<[string, V][]> {
    let text = "";
    try {
      text = await fs.readFile(this.file, "utf8");
    } catch (error) {
      if (!isCode(error, "ENOENT")) throw error;
    }
    const entries: [string, V][] = [];
    for (const line of text.split("\n")) {
      if (line === "") continue;
      try {
        const entry = this.codec.parse(JSON.parse(line));
        if (entry !== undefined) entries.push(entry);
      } catch {
        // A torn line.
      }
    }
    this.lines = entries.length;
    return entries;
  }

  /** Appends `entries` durably; or rewrites the file with `remembered` when it would hold more than twice as many lines. */
  async append(entries: readonly (readonly [string, V])[], remembered: Remembered<V>): Promise<void> {
    if (entries.length === 0) return;
    if (this.lines + entries.length > 2 * Math.max(remembered.size, 1) + 1024) return this.rewrite(remembered);
    const handle = await fs.open(this.file, "a");
    try {
      await handle.appendFile(this.text(entries));
      await handle.datasync();
    } finally {
      await handle.close();
    }
    this.lines += entries.length;
  }

  /** Replaces the file with what `remembered` holds now (written aside, fdatasynced, renamed over it). */
  async rewrite(remembered: Remembered<V>): Promise<void> {
    const entries = [...remembered.entries()];
    const temporary = `${this.file}.${process.pid}.tmp`;
    const handle = await fs.open(temporary, "w");
    try {
      await handle.writeFile(this.text(entries));
      await handle.datasync();
    } finally {
      await handle.close();
    }
    await fs.rename(temporary, this.file);
    await fsyncPath(path.dirname(this.file));
    this.lines = entries.length;
  }

  private text(entries: readonly (readonly [string, V])[]): string {
    return entries.map(([name, value]) => `${JSON.stringify(this.codec.format(name, value))}\n`).join("");
  }
}
