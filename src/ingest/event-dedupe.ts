import path from "node:path";
import type { IngestNamespaceConfig } from "../config/ingest-types.js";
import { Remembered, RememberedFile } from "./remembered.js";

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
  /** Id -> when it was taken (ms). */
  private readonly ids: Remembered<number>;

  private constructor(
    private readonly file: RememberedFile<number>,
    readonly config: DedupeConfig,
  ) {
    this.ids = new Remembered(config.windowMs, config.maxIds, (at) => at);
  }

  /** Reads the ids of landed segments from the namespace's file in `dir`, keeping those still in the window. */
  static async open(dir: string, namespace: string, config: DedupeConfig): Promise<SeenIds> {
    const seen = new SeenIds(new RememberedFile(path.join(dir, `dedupe-${namespace}.jsonl`), ID_LINES), config);
    await seen.file.load(seen.ids);
    return seen;
  }

  get size(): number {
    return this.ids.size;
  }

  get evictions(): number {
    return this.ids.evictions;
  }

  /** Remembers ids found in the log (any order), as of their own time. */
  restore(entries: readonly (readonly [string, number])[]): void {
    this.ids.restore(entries);
  }

  /**
   * Splits `lines` into the events to store (an id not taken within the window, or no id) and the duplicates, and
   * takes the new ids as of `at`; `taken` is what `forget` gives back if the events are not stored after all.
   */
  filter(lines: readonly Buffer[], at: number): { kept: Buffer[]; duplicates: number; taken: string[] } {
    const kept: Buffer[] = [];
    const taken: string[] = [];
    let duplicates = 0;
    for (const line of lines) {
      const id = eventId(line, this.config.field);
      if (id !== undefined && this.ids.get(id) !== undefined) {
        duplicates += 1;
        continue;
      }
      if (id !== undefined) {
        this.ids.set(id, at);
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

  /** Writes the ids of a segment about to leave the log to the namespace's file, durably. */
  async persist(entries: readonly (readonly [string, number])[]): Promise<void> {
    await this.file.append(entries, this.ids);
  }
}

/** An id file line: `[id, time]`. */
const ID_LINES = {
  format: (id: string, at: number) => [id, at],
  parse: (line: unknown): [string, number] | undefined => (Array.isArray(line) && typeof line[0] === "string" && typeof line[1] === "number" ? [line[0], line[1]] : undefined),
};
