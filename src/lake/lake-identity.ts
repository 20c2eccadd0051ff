import { randomUUID } from "node:crypto";
import { LakeswapError } from "../model/errors.js";
import type { ObjectStore } from "../store/object-store.js";
import { LAKE_ID_KEY } from "./layout.js";

/** Which lake this is, for records kept outside it: its id, and where it is (for messages only: a lake may move). */
export interface LakeIdentity {
  readonly id: string;
  /** The lake's folder or `s3://bucket/prefix` as this process opened it. */
  readonly location: string;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * The lake's identity (LAKE_ID_KEY): read, or made on first use. Two processes that make it at once both end with
 * the one that was written first (a conditional create), so a lake never has two ids.
 */
export async function lakeIdentity(store: ObjectStore): Promise<LakeIdentity> {
  for (let attempt = 1; ; attempt += 1) {
    const stored = await store.get(LAKE_ID_KEY);
    if (stored) return { id: parseId(stored.body, store.uri(LAKE_ID_KEY)), location: store.description };
    const made = randomUUID();
    if (await store.putIfAbsent(LAKE_ID_KEY, `${JSON.stringify({ id: made, created_at: new Date().toISOString() })}\n`)) return { id: made, location: store.description };
    // Another process wrote it first: its id is the lake's. A second miss means the store does not keep what it said it had.
    if (attempt >= 2) throw new LakeswapError("STORE_ERROR", `${store.uri(LAKE_ID_KEY)} was written by another process but cannot be read back; run the command again`);
  }
}

function parseId(body: Uint8Array, uri: string): string {
  let id: unknown;
  try {
    id = (JSON.parse(new TextDecoder().decode(body)) as { id?: unknown }).id;
  } catch {
    id = undefined;
  }
  if (typeof id === "string" && UUID.test(id)) return id;
  throw new LakeswapError(
    "INVALID_INPUT",
    `${uri} does not hold the lake's id ({"id": "<uuid>"}): it was changed by hand or damaged. Restore it from a backup of the lake, ` +
      `or, if the lake never sent to a PostgreSQL target, delete it (a new id is made)`,
  );
}
