import { randomBytes } from "node:crypto";
import type { PointerMoveKind } from "../catalog/catalog.js";
import type { ObjectStore } from "../store/object-store.js";
import { METADATA_PREFIX, type RunManifest } from "./manifest.js";

/** One catalog change that was decided and recorded, but not yet confirmed. */
export interface OutboxEntry {
  readonly id: string;
  readonly table: string;
  readonly partition: string;
  readonly runId: string;
  readonly previousRunId?: string;
  readonly signature?: string;
  readonly kind: PointerMoveKind;
  readonly recordedAt: string;
  /** The run's manifest, written once the pointer has moved. */
  readonly manifest?: RunManifest;
}

/**
 * The durable catalog outbox. Every pointer move is recorded here before it is
 * sent to the catalog and acknowledged (deleted) once confirmed; a process
 * that dies in between leaves the entry, and the next process that opens the
 * lake replays it. It lives in the lake's own store, under
 * `_lakeswap/outbox/`, so a runner without a persistent disk (a container, a
 * CI job) loses nothing: the entry is as durable as the run it points to.
 */
export class Outbox {
  /**
   * `warn` is told of an entry that cannot be read and was moved to `_lakeswap/quarantine/`
   * (default: a line on stderr).
   */
  constructor(
    private readonly store: ObjectStore,
    private readonly warn: (message: string) => void = (message) => process.stderr.write(`lakeswap: warning: ${message}\n`),
  ) {}

  /** Records a change before it is sent; returns the entry. */
  async record(change: Omit<OutboxEntry, "id" | "recordedAt">): Promise<OutboxEntry> {
    const recordedAt = new Date().toISOString();
    // Ids sort by time, so replay keeps the order the changes were decided in.
    const id = `${recordedAt.replace(/[-:.]/g, "")}-${randomBytes(4).toString("hex")}`;
    const entry: OutboxEntry = { ...change, id, recordedAt };
    await this.store.put(entryKey(change.table, id), JSON.stringify(entry));
    return entry;
  }

  /** Marks a change confirmed. */
  async acknowledge(entry: OutboxEntry): Promise<void> {
    await this.store.delete([entryKey(entry.table, entry.id)]);
  }

  /** The pending changes of one table, or of every table, oldest first. */
  async pending(table?: string): Promise<OutboxEntry[]> {
    const prefix = table ? `${METADATA_PREFIX}/outbox/${table}/` : `${METADATA_PREFIX}/outbox/`;
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
    const target = `${QUARANTINE_PREFIX}${key.slice(METADATA_PREFIX.length + 1)}`;
    await this.store.put(target, body);
    await this.store.delete([key]);
    this.warn(
      `outbox entry '${key}' cannot be read (${why}); it was moved to '${target}' and is not replayed. ` +
        "If a pointer move was pending in it, check that partition with lakeswap history and rerun its sync",
    );
  }
}

/** Where unreadable metadata files are moved, under their own path: `_lakeswap/quarantine/outbox/<table>/<id>.json`. */
export const QUARANTINE_PREFIX = `${METADATA_PREFIX}/quarantine/`;

/** Parses a stored outbox entry, or says why it is not one. */
export function parseOutboxEntry(body: Uint8Array): OutboxEntry | string {
  let value: Partial<OutboxEntry> | null;
  try {
    value = JSON.parse(Buffer.from(body).toString("utf8")) as Partial<OutboxEntry> | null;
  } catch (error) {
    return `not valid JSON: ${error instanceof Error ? error.message : String(error)}`;
  }
  if (typeof value !== "object" || value === null) return "not a JSON object";
  const missing = (["id", "table", "partition", "runId", "kind"] as const).filter((field) => typeof value[field] !== "string");
  return missing.length > 0 ? `no ${missing.join(", ")}` : (value as OutboxEntry);
}

function entryKey(table: string, id: string): string {
  return `${METADATA_PREFIX}/outbox/${table}/${id}.json`;
}
