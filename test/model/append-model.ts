// The append dataset of the model test, as the reference model knows it (docs/write-modes.md, "append"): `clicks`, whose
// source is a glob over a folder of its own (`clicks/*`) that accumulates files, written with `write: append`, by day.
// Each file of a delivery is its own part of each day it has rows for; a sync appends to a day the parts its current
// run does not hold yet, a part being known by its content (its rows as a multiset: the same file again, or the same
// rows in another file, is held), so that a glob that matches files appended before and new ones appends only the new
// files' rows. Pure: no I/O, written from the docs with no lakeswap code.
import type { Day, ModelRun, RowText } from "./model.js";

/** The append dataset's raw table (dataset `clicks`, in the workspace's clicks.yaml). */
export const CLICKS = "clicks_raw";

/** One row of a click file: an id, a time (its day is the partition) and a page. */
export interface ClickRow {
  readonly id: number;
  readonly ts: string;
  readonly page: string;
}

/** A click row as the model compares it: `id|ts|page`. */
const clickText = (row: ClickRow): RowText => `${row.id}|${row.ts}|${row.page}`;

/** A file of the clicks folder: its name (they sort in the order they were added) and its rows. */
export interface ClickFile {
  readonly name: string;
  readonly rows: readonly ClickRow[];
}

/** The variants of one day's rows in a click file. */
export const CLICK_VARIANTS = 5;

/**
 * The rows of `day` in variant `variant` (ids `100 * day of month + i`, so that files of the same variant hold the same
 * rows): 0 two rows; 1 one other row; 2 one row twice (a duplicate row is a row); 3 variant 0's rows and one more;
 * 4 one of variant 0's rows alone (each of the last two holds rows another variant holds, and is still another part).
 */
export function clickVariantRows(day: Day, variant: number): ClickRow[] {
  const base = 100 * Number(day.slice(-2));
  const row = (i: number, time: string, page: string): ClickRow => ({ id: base + i, ts: `${day} ${time}`, page });
  const first = [row(1, "10:00:00", "home"), row(2, "11:00:00", "cart")];
  switch (variant) {
    case 0: return first;
    case 1: return [row(3, "09:30:00", "home")];
    case 2: return [row(4, "12:00:00", "pay"), row(4, "12:00:00", "pay")];
    case 3: return [...first, row(5, "13:00:00", "home")];
    default: return [first[0]!];
  }
}

/** `rows` in an order given by `order` (the same rows, another file's bytes). */
export function shuffled<T>(rows: readonly T[], order: number): T[] {
  let state = order + 1;
  const random = () => (state = (state * 1664525 + 1013904223) >>> 0) / 2 ** 32;
  return rows.map((row) => [random(), row] as const).sort((a, b) => a[0] - b[0]).map(([, row]) => row);
}

/** The model's stand-in for the signature of a part or of a day's rows: the rows, as a multiset. */
const contentSignature = (rows: readonly RowText[]): string => `clicks:${[...rows].sort().join(",")}`;

/** What a sync of the clicks folder does to one day (src/pipeline/plan.ts planRaw and freshParts, as the docs say). */
export interface AppendDecision {
  /** `build: new`, `build: appended`, `skip: already appended` or `skip: pinned`. */
  readonly action: string;
  /** When built: the new run's rows, signature and parts (its manifest's `appended`). */
  readonly run?: { readonly rows: RowText[]; readonly signature?: string; readonly appended: string[] };
}

/**
 * A sync of the clicks folder's `files` (in name order) for `day`, whose current run is `current`: undefined when no
 * file has rows of that day. The day's parts are the files' rows of it, one per file that has some. The current run
 * holds the parts it was appended from; the new run takes the others, a copy of one of them once (all of them with
 * `allowDuplicates`), in file order, and is signed by chaining each part's signature onto the current one (a new day
 * of every part: the signature of its rows).
 */
export function planAppendDay(files: readonly ClickFile[], day: Day, current: ModelRun | undefined, pinned: boolean, allowDuplicates: boolean): AppendDecision | undefined {
  const parts = files
    .map((file) => file.rows.filter((row) => row.ts.startsWith(day)).map(clickText).sort())
    .filter((rows) => rows.length > 0)
    .map((rows) => ({ rows, signature: contentSignature(rows) }));
  if (parts.length === 0) return undefined;
  if (pinned) return { action: "skip: pinned" };
  const whole = contentSignature(parts.flatMap((p) => p.rows));
  const before = current?.appended ?? [];
  // A part is held when the current run holds its content, or an earlier file of this sync brings the same (a copy).
  const held = new Set(before);
  const fresh = allowDuplicates ? parts : held.has(whole) ? [] : parts.filter((p) => !held.has(p.signature) && held.add(p.signature));
  if (fresh.length === 0) return { action: "skip: already appended" };
  const rows = [...(current?.rows ?? []), ...fresh.flatMap((p) => p.rows)].sort();
  const appended = [...before, ...fresh.map((p) => p.signature)];
  if (!current) {
    // A new day of every part signs as its rows; of some (a copy left out), as the parts appended one by one.
    const first = fresh.length === parts.length ? whole : fresh[0]!.signature;
    const signature = fresh.slice(fresh.length === parts.length ? fresh.length : 1).reduce((s, p) => `append(${s}, ${p.signature})`, first);
    return { action: "build: new", run: { rows, signature, appended } };
  }
  const signature = current.signature === undefined ? undefined : fresh.reduce((s, p) => `append(${s}, ${p.signature})`, current.signature);
  return { action: "build: appended", run: { rows, signature, appended } };
}
