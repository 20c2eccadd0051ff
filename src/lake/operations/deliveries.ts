import { createHash } from "node:crypto";
import type { IdentifiedFiles, LandRequest, LandingSummary } from "../../landing/landing.js";
import { errorMessage } from "../../model/errors.js";
import { assertTableName } from "../../model/sql.js";
import { deliveryFilesKey, deliveryKey } from "../layout.js";
import type { HasLakeParts } from "../parts.js";

/**
 * The files a delivery's paths name and its id (a digest of their names and
 * bytes), without landing it. With the raw table it is for, what was found
 * out about the same paths last time is kept in the lake, so that the same
 * files, unchanged, are named without being read again (`IdentifiedFiles`).
 * `readAhead`: the request it is to be landed with (`Landing.identify`).
 */
export async function identifyDelivery(
  lake: HasLakeParts,
  files: readonly string[],
  table?: string,
  readAhead?: LandRequest,
): Promise<{ readonly files: readonly string[]; readonly id: string; readonly hashed: boolean }> {
  const { store, landing } = lake.parts;
  const key = table === undefined ? undefined : deliveryFilesKey(assertTableName(table), createHash("sha256").update(JSON.stringify(files)).digest("hex").slice(0, 32));
  let known: IdentifiedFiles | undefined;
  if (key !== undefined) {
    const stored = await store.get(key).catch(() => undefined);
    try {
      known = stored ? (JSON.parse(Buffer.from(stored.body).toString("utf8")) as IdentifiedFiles) : undefined;
    } catch {
      // Unreadable: the files are read again to name them, and it is written anew.
    }
  }
  const identified = await landing.identify(files, known, readAhead);
  if (key !== undefined && identified.hashed) {
    // Only saves a read of the delivery next time: failing to keep it is not the sync's failure.
    await store.put(key, JSON.stringify(identified.identified)).catch((error: unknown) => {
      process.emitWarning(`could not keep what identifies delivery ${identified.id} (${errorMessage(error)}); its next sync reads it again`);
    });
  }
  return { files: identified.files, id: identified.id, hashed: identified.hashed };
}

/** The landing summary kept for a delivery of a raw table under `key`, if one was kept (and is readable). */
export async function landingSummary(lake: HasLakeParts, table: string, key: string): Promise<LandingSummary | undefined> {
  const stored = await lake.parts.store.get(deliveryKey(assertTableName(table), key));
  if (!stored) return undefined;
  try {
    const summary = JSON.parse(Buffer.from(stored.body).toString("utf8")) as LandingSummary;
    return Array.isArray(summary.partitions) && typeof summary.id === "string" ? summary : undefined;
  } catch {
    // An unreadable summary only costs a landing: the delivery is read again.
    return undefined;
  }
}

/** Keeps what landing a delivery found, under `key` (the delivery's digest and the dataset's declaration). */
export async function keepLandingSummary(lake: HasLakeParts, table: string, key: string, summary: LandingSummary): Promise<void> {
  const { id, files, rowsRead, rowsLoaded, rowsRejected, partitions, signing } = summary;
  const kept: LandingSummary = { id, files, rowsRead, rowsLoaded, rowsRejected, partitions, signing };
  await lake.parts.store.put(deliveryKey(assertTableName(table), key), JSON.stringify(kept));
}
