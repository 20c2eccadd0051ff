import { promises as fs } from "node:fs";
import path from "node:path";
import type { IngestNamespaceConfig } from "../config/ingest-types.js";
import { now } from "../shared/clock.js";
import { fsyncPath, isCode } from "./wal/segment-files.js";

/** A namespace's `dedupe:`: the event field that identifies an event, how long an id is remembered, and how many at most. */
type DedupeConfig = NonNullable<IngestNamespaceConfig["dedupe"]>;

/** A body's events, one line each (blank lines dropped), as the landing reads them. */
export function eventLines(body: Buffer): Buffer[] {
  const lines: Buffer[] = [];
  let start = 0;
  while (start < body.length) {
    let end = body.indexOf(10, start);
    if (end < 0) end = body.length;
    const line = body.subarray(start, end);
    if (line.some((byte) => byte !== 32 && byte !== 9 && byte !== 13)) lines.push(line);
    start = end + 1;
  }
  return lines;
}

/**
 * The id of an event line: its `field` as text when the line is a JSON object whose field is a string or a number;
 * undefined otherwise (no such field, null, or not JSON: the event goes on to the landing, which dead-letters it if it
 * must).
 */
export function eventId(line: Buffer, field: string): string | undefined {
  let value: unknown;
  try {
    value = JSON.parse(line.toString("utf8"));
  } catch {
    return undefined;
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) return undefined;
  const id = (value as Record<string, unknown>)[field];
  return typeof id === "string" || typeof id === "number" ? String(id) : undefined;
}

/**
 * The event ids one namespace has taken within its window (`dedupe: {field, window}`): those of the events in the
 * write-ahead log (read back from its records when the collector starts) and of landed segments (kept in
 * `dedupe-<namespace>.jsonl` in the log's folder, written before a landed segment is removed). At most `maxIds` are
 * remembered; past that the oldest are forgotten first (`evictions`).
 */
export class SeenIds {
  /** Id -> when it was taken (ms), oldest first. */
  private readonly ids = new Map<string, number>();
  private linesInFile = 0;
  evictions = 0;

  private constructor(
    private readonly file: string,
    readonly config: DedupeConfig,
  ) {}

  /** Reads the ids of landed segments from the namespace's file in `dir`, keeping those still in the window. */
  static async open(dir: string, namespace: string, config: DedupeConfig): Promise<SeenIds> {
    const seen = new SeenIds(path.join(dir, `dedupe-${namespace}.jsonl`), config);
    let text = "";
    try {
      text = await fs.readFile(seen.file, "utf8");
    } catch (error) {
      if (!isCode(error, "ENOENT")) throw error;
    }
    const kept: [string, number][] = [];
    for (const line of text.split("\n")) {
      const entry = parseLine(line);
      if (entry !== undefined) kept.push(entry);
    }
    seen.restore(kept);
    if (kept.length > 0) await seen.rewrite();
    return seen;
  }

  get size(): number {
    return this.ids.size;
  }

  /** Remembers ids found in the log or the file (any order), as of their own time. */
  restore(entries: readonly (readonly [string, number])[]): void {
    for (const [id, at] of [...entries].sort((a, b) => a[1] - b[1])) this.take(id, at);
  }

  /**
   * Splits `lines` into the events to store (an id not taken within the window, or no id) and the duplicates, and
   * takes the new ids as of `at`; `taken` is what `forget` gives back if the events are not stored after all.
   */
  filter(lines: readonly Buffer[], at: number): { kept: Buffer[]; duplicates: number; taken: string[] } {
    const kept: Buffer[] = [];
    const taken: string[] = [];
    let duplicates = 0;
    const oldest = now() - this.config.windowMs;
    for (const line of lines) {
      const id = eventId(line, this.config.field);
      const when = id === undefined ? undefined : this.ids.get(id);
      if (id !== undefined && when !== undefined && when >= oldest) {
        duplicates += 1;
        continue;
      }
      if (id !== undefined) {
        this.take(id, at);
        taken.push(id);
      }
      kept.push(line);
    }
    return { kept, duplicates, taken };
  }

  /** Forgets ids taken by a request whose events were not stored (its append failed). */
  forget(ids: readonly string[]): void {
    for (const id of ids) this.ids.delete(id);
  }

  /** Writes the ids of a segment about to leave the log to the namespace's file, durably (or rewrites the file when it has grown). */
  async persist(entries: readonly (readonly [string, number])[]): Promise<void> {
    if (entries.length === 0) return;
    if (this.linesInFile + entries.length > 2 * Math.max(this.ids.size, 1) + 1024) return this.rewrite();
    const handle = await fs.open(this.file, "a");
    try {
      await handle.appendFile(entries.map(([id, at]) => `${JSON.stringify([id, at])}\n`).join(""));
      await handle.datasync();
    } finally {
      await handle.close();
    }
    this.linesInFile += entries.length;
  }

  private take(id: string, at: number): void {
    this.ids.delete(id);
    this.ids.set(id, at);
    const oldest = now() - this.config.windowMs;
    for (const [first, when] of this.ids) {
      if (when >= oldest && this.ids.size <= this.config.maxIds) break;
      if (when >= oldest) this.evictions += 1;
      this.ids.delete(first);
    }
  }

  private async rewrite(): Promise<void> {
    const temporary = `${this.file}.${process.pid}.tmp`;
    const handle = await fs.open(temporary, "w");
    try {
      await handle.writeFile([...this.ids].map(([id, at]) => `${JSON.stringify([id, at])}\n`).join(""));
      await handle.datasync();
    } finally {
      await handle.close();
    }
    await fs.rename(temporary, this.file);
    await fsyncPath(path.dirname(this.file));
    this.linesInFile = this.ids.size;
  }
}

function parseLine(line: string): [string, number] | undefined {
  if (line === "") return undefined;
  try {
    const entry = JSON.parse(line) as unknown;
    if (Array.isArray(entry) && typeof entry[0] === "string" && typeof entry[1] === "number") return [entry[0], entry[1]];
  } catch {
    // A line torn by a crash while it was appended: its segment was not removed, so its ids are still in the log.
  }
  return undefined;
}
