import { randomBytes } from "node:crypto";
import type { PointerMoveKind } from "../catalog/catalog.js";
import type { ObjectStore } from "../store/object-store.js";
import { outboxEntryKey, outboxPrefix, quarantineKey } from "./layout.js";
import type { RunManifest } from "./manifest.js";
import type { TableDefinition } from "../model/table.js";

/** One pointer move of an outbox entry. */
export interface OutboxMove {
  readonly partition: string;
  readonly runId: string;
  readonly previousRunId?: string;
  readonly signature?: string;
  readonly kind: PointerMoveKind;
  /** The run's manifest, written once the pointer has moved. */
  readonly manifest?: RunManifest;
}

/** A batch of pointer moves of one table that was decided and recorded, but not yet confirmed. */
export interface OutboxEntry {
  readonly id: string;
  readonly table: string;
  /**
   * The layout the moves were made in, where the table's partition keys changed (model/table.ts `layout`): replayed only
   * while the table reads it (a new layout whose writer died before switching to it is never switched to).
   */
  readonly layout?: string;
  readonly recordedAt: string;
  readonly moves: readonly OutboxMove[];
  /**
   * The held sync whose publication this entry is part of (../commit/publish.ts). A publication records one entry
   * per table, then commits by marking the sync's record `publishing`; an entry whose sync never got that far is
   * dropped on replay, not applied, so a publication killed before its commit moves no pointer.
   */
  readonly publish?: string;
}

/**
 * The durable catalog outbox. Every pointer move is recorded here before it is
 * sent to the catalog and acknowledged (deleted) once confirmed; a process
 * that dies in between leaves the entry, and the next process that opens the
 * lake replays it. It lives in the lake's own store, under
 * its metadata folder (`outboxPrefix`, ./layout.ts), so a runner without a persistent disk (a container, a
 * CI job) loses nothing: the entry is as durable as the run it points to.
 */
export class Outbox {
  /**
   * `warn` is told of an entry that cannot be read and was moved to quarantine (`quarantineKey`, ./layout.ts)
   * (default: a line on stderr).
   */
  constructor(
    private readonly store: ObjectStore,
    private readonly warn: (message: string) => void = (message) => process.stderr.write(`lakeswap: warning: ${message}\n`),
  ) {}

  /** Records a batch of moves of one table before they are sent (one object, one write); returns the entry. */
  async record(table: Pick<TableDefinition, "name" | "layout">, moves: readonly OutboxMove[], publish?: string): Promise<OutboxEntry> {
    const recordedAt = new Date().toISOString();
    // Ids sort by time, so replay keeps the order the changes were decided in.
    const id = `${recordedAt.replace(/[-:.]/g, "")}-${randomBytes(4).toString("hex")}`;
    const layout = table.layout !== undefined ? { layout: table.layout } : {};
    const entry: OutboxEntry = { id, table: table.name, ...layout, recordedAt, moves, ...(publish !== undefined ? { publish } : {}) };
    // Fresh: no pointer moves before this resolves, so its content and its name are made durable in one round (a power
    // loss before then may leave it torn: `pending` quarantines it, and nothing of it had moved).
    await this.store.put(outboxEntryKey(table.name, id), JSON.stringify(entry), { fresh: true });
    return entry;
  }

  /** Marks a batch confirmed. */
  async acknowledge(entry: OutboxEntry): Promise<void> {
    await this.store.delete([outboxEntryKey(entry.table, entry.id)]);
  }

  /** The ids of one table's pending entries, oldest first, from one listing (no entry read): whether its pointers are moving. */
  async pendingIds(table: string): Promise<string[]> {
    const prefix = outboxPrefix(table);
    return (await this.store.list(prefix)).map((o) => o.key.slice(prefix.length).replace(/\.json$/, "")).sort();
  }

  /** The pending changes of one table, or of every table, oldest first. */
  async pending(table?: string): Promise<OutboxEntry[]> {
    const prefix = outboxPrefix(table);
    const entries: OutboxEntry[] = [];
    for (const object of await this.store.list(prefix)) {
      const stored = await this.store.get(object.key);
      if (!stored) continue;
      const entry = parseOutboxEntry(stored.body);
      if (typeof entry === "string") await this.quarantine(object.key, stored.body, entry);
      else entries.push(entry);
    }
    return entries.sort((a, b) => (a.id < b.id ? -1 : 1));
  }

  /**
   * Moves an unreadable entry out of the outbox, so one bad file does not stop every command: it
   * cannot be replayed anyway (nothing in it can be trusted), and its bytes are kept for a look.
   */
  private async quarantine(key: string, body: Uint8Array, why: string): Promise<void> {
    const target = quarantineKey(key);
    await this.store.put(target, body);
    await this.store.delete([key]);
    this.warn(
      `outbox entry '${key}' cannot be read (${why}); it was moved to '${target}' and is not replayed. ` +
        "If a pointer move was pending in it, check that partition with lakeswap history and rerun its sync",
    );
  }
}

/**
 * Parses a stored outbox entry, or says why it is not one. An entry of one
 * move, as lakeswap wrote them before moves were batched, reads as a batch of one.
 */
export function parseOutboxEntry(body: Uint8Array): OutboxEntry | string {
  let value: Record<string, unknown> | null;
  try {
    value = JSON.parse(Buffer.from(body).toString("utf8")) as Record<string, unknown> | null;
  } catch (error) {
    return `not valid JSON: ${error instanceof Error ? error.message : String(error)}`;
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return "not a JSON object";
  const missing = (["id", "table"] as const).filter((field) => typeof value[field] !== "string");
  if (missing.length > 0) return `no ${missing.join(", ")}`;
  const batch = Array.isArray(value.moves);
  const moves = batch ? (value.moves as unknown[]) : [value];
  for (const [index, move] of moves.entries()) {
    const fields = typeof move === "object" && move !== null ? (move as Record<string, unknown>) : {};
    const absent = (["partition", "runId", "kind"] as const).filter((field) => typeof fields[field] !== "string");
    if (absent.length > 0) return `${batch ? `move ${index + 1} has ` : ""}no ${absent.join(", ")}`;
  }
  const recordedAt = typeof value.recordedAt === "string" ? value.recordedAt : "";
  const publish = typeof value.publish === "string" ? { publish: value.publish } : {};
  const layout = typeof value.layout === "string" ? { layout: value.layout } : {};
  return { id: value.id as string, table: value.table as string, ...layout, recordedAt, moves: moves as OutboxMove[], ...publish };
}
