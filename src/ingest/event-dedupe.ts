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
 * The id of an event line, as the landing reads its `field`: the field matched whatever its case (as the landing matches
 * it to the column); a string's value, or a number's own text (`1234567890123456789` and `1234567890123456788` are two
 * ids, though they are one double). Undefined (the event goes on to the landing, which dead-letters it if it must)
 * where the line is not a JSON object, has no such field or gives it more than once (in one case or two: the landing
 * refuses that), or its value is not a string or a number.
 */
function eventId(line: Buffer, field: string): string | undefined {
  const text = line.toString("utf8");
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) return undefined;
  const name = field.toLowerCase();
  const keys = Object.keys(value).filter((key) => key.toLowerCase() === name);
  if (keys.length !== 1) return undefined;
  const id = (value as Record<string, unknown>)[keys[0] as string];
  if (typeof id !== "string" && typeof id !== "number") return undefined;
  // The usual event: a string id under a name its text spells once (JSON.parse keeps the last of a name given twice).
  const spelled = JSON.stringify(keys[0]);
  if (typeof id === "string" && text.indexOf(spelled) >= 0 && text.indexOf(spelled) === text.lastIndexOf(spelled)) return id;
  // A number's own digits, and a name given twice (or spelled with escapes), from the text.
  const given = memberTexts(text, name);
  if (given.length !== 1) return undefined;
  const token = given[0] as string;
  if (token.startsWith('"')) return JSON.parse(token) as string;
  return /^-?\d/.test(token) ? token : undefined;
}

/**
 * The text of each value of `text`'s top-level members whose name, lowercased, is `name`. `text` is one JSON object
 * (JSON.parse read it): its members are walked once, nested values skipped by their brackets, strings by their quotes.
 */
function memberTexts(text: string, name: string): string[] {
  const found: string[] = [];
  let at = skipSpace(text, text.indexOf("{") + 1);
  while (text[at] === '"') {
    const keyEnd = stringEnd(text, at);
    // A name without escapes is its text between the quotes (most are): JSON.parse only for the others.
    const quoted = text.slice(at + 1, keyEnd - 1);
    const key = quoted.includes("\\") ? (JSON.parse(text.slice(at, keyEnd)) as string) : quoted;
    const start = skipSpace(text, skipSpace(text, keyEnd) + 1);
    const end = valueEnd(text, start);
    if (key.toLowerCase() === name) found.push(text.slice(start, end));
    at = skipSpace(text, end);
    if (text[at] === ",") at = skipSpace(text, at + 1);
  }
  return found;
}

function skipSpace(text: string, at: number): number {
  while (at < text.length && (text[at] === " " || text[at] === "\t" || text[at] === "\r" || text[at] === "\n")) at++;
  return at;
}

/** Where the string that opens at `at` ends (past its closing quote). */
function stringEnd(text: string, at: number): number {
  let i = at + 1;
  while (text[i] !== '"') i += text[i] === "\\" ? 2 : 1;
  return i + 1;
}

/** Where the value that starts at `at` ends: a string, an object or array (to its closing bracket), or a number or literal. */
function valueEnd(text: string, at: number): number {
  const first = text[at];
  if (first === '"') return stringEnd(text, at);
  if (first === "{" || first === "[") {
    let depth = 0;
    for (let i = at; ; i++) {
      const c = text[i];
      if (c === '"') i = stringEnd(text, i) - 1;
      else if (c === "{" || c === "[") depth++;
      else if ((c === "}" || c === "]") && --depth === 0) return i + 1;
    }
  }
  let i = at;
  while (i < text.length && !",}] \t\r\n".includes(text[i] as string)) i++;
  return i;
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
  /** The ids taken by requests whose events are being written, and their writes. */
  private readonly writing = new Map<string, Promise<unknown>>();

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

  /** Remembers ids found in the log (any order), as of their own time. */
  restore(entries: readonly (readonly [string, number])[]): void {
    this.ids.restore(entries);
  }

  /**
   * Splits `lines` into the events to store (an id not taken within the window, or no id) and the duplicates, and
   * takes the new ids as of `at`; `taken` is what `hold` is given next. When a duplicate's id was taken by a request
   * whose events are not durable yet, nothing is taken: `wait` settles when that request's write has, and the
   * caller filters again (had the write failed, its events were not stored, and these are not duplicates).
   */
  filter(lines: readonly Buffer[], at: number): { kept: Buffer[]; duplicates: number; taken: string[]; wait?: Promise<unknown> } {
    const ids = lines.map((line) => eventId(line, this.config.field));
    const writing = ids.flatMap((id) => (id === undefined ? [] : (this.writing.get(id) ?? [])));
    if (writing.length > 0) return { kept: [], duplicates: 0, taken: [], wait: Promise.allSettled(writing) };
    const kept: Buffer[] = [];
    const taken: string[] = [];
    let duplicates = 0;
    lines.forEach((line, i) => {
      const id = ids[i];
      if (id !== undefined && this.ids.get(id) !== undefined) {
        duplicates += 1;
        return;
      }
      if (id !== undefined) {
        this.ids.set(id, at);
        taken.push(id);
      }
      kept.push(line);
    });
    return { kept, duplicates, taken };
  }

  /** Holds the ids `filter` took while their events are written: durable once `write` resolves, given back if it fails. */
  hold(taken: readonly string[], write: Promise<unknown>): void {
    for (const id of taken) this.writing.set(id, write);
    const release = (): void => {
      for (const id of taken) if (this.writing.get(id) === write) this.writing.delete(id);
    };
    write.then(release, () => {
      release();
      for (const id of taken) this.ids.delete(id);
    });
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

/** A write-ahead log record as the dedupe reads it: its namespace, receive time and events. */
interface EventsRecord {
  readonly namespace: string;
  readonly receivedAt: number;
  readonly body: Buffer;
}

/** Ids by namespace: `[id, time taken]`. */
type IdsByNamespace = Map<string, [string, number][]>;

/**
 * One pipeline's dedupe: the `SeenIds` of each namespace with `dedupe:`, and, for each segment this process appended
 * to, how many records it appended and the ids their events took, so that a landing segment's ids are written down
 * without parsing its events again. That is used only when it counts every record the segment holds (a segment of an
 * earlier process, or one whose last append has not been counted yet, is parsed instead).
 */
export class PipelineDedupe {
  private readonly appendedTo = new Map<string, { records: number; readonly ids: IdsByNamespace }>();

  private constructor(private readonly seen: ReadonlyMap<string, SeenIds>) {}

  static async open(dir: string, namespaces: readonly IngestNamespaceConfig[]): Promise<PipelineDedupe> {
    const seen = new Map<string, SeenIds>();
    for (const ns of namespaces) if (ns.dedupe) seen.set(ns.name, await SeenIds.open(dir, ns.name, ns.dedupe));
    return new PipelineDedupe(seen);
  }

  /** The namespace's ids, when it dedupes. */
  of(namespace: string): SeenIds | undefined {
    return this.seen.get(namespace);
  }

  /** Remembers the ids of records found in the log (when the collector starts). */
  restore(records: readonly EventsRecord[]): void {
    for (const [namespace, ids] of this.idsOf(records)) this.seen.get(namespace)!.restore(ids);
  }

  /** Counts a record appended to `segment`, with the ids its events took, for when the segment lands. */
  appended(segment: string, namespace: string, taken: readonly string[], at: number): void {
    if (this.seen.size === 0) return;
    const appended = this.appendedTo.get(segment) ?? { records: 0, ids: new Map() };
    this.appendedTo.set(segment, appended);
    appended.records += 1;
    if (taken.length === 0) return;
    const ids = appended.ids.get(namespace) ?? [];
    appended.ids.set(namespace, ids);
    for (const id of taken) ids.push([id, at]);
  }

  /** Writes down the ids of a segment about to leave the log (`records`: all it holds), durably. */
  async persist(segment: string, records: readonly EventsRecord[]): Promise<void> {
    const appended = this.appendedTo.get(segment);
    const ids = appended !== undefined && appended.records === records.length ? appended.ids : this.idsOf(records);
    for (const [namespace, taken] of ids) await this.seen.get(namespace)!.persist(taken);
    this.appendedTo.delete(segment);
  }

  /** Forgets what was counted for a segment that left the log without landing (quarantined). */
  drop(segment: string): void {
    this.appendedTo.delete(segment);
  }

  private idsOf(records: readonly EventsRecord[]): IdsByNamespace {
    const byNamespace: IdsByNamespace = new Map();
    if (this.seen.size === 0) return byNamespace;
    for (const read of records) {
      const field = this.seen.get(read.namespace)?.config.field;
      if (field === undefined) continue;
      const ids = byNamespace.get(read.namespace) ?? [];
      for (const line of eventLines(read.body)) {
        const id = eventId(line, field);
        if (id !== undefined) ids.push([id, read.receivedAt]);
      }
      byNamespace.set(read.namespace, ids);
    }
    return byNamespace;
  }
}
