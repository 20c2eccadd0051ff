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
  constructor(private readonly store: ObjectStore) {}

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
      if (stored) entries.push(JSON.parse(Buffer.from(stored.body).toString("utf8")) as OutboxEntry);
    }
    return entries.sort((a, b) => (a.id < b.id ? -1 : 1));
  }
}

function entryKey(table: string, id: string): string {
  return `${METADATA_PREFIX}/outbox/${table}/${id}.json`;
}
