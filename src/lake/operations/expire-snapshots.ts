import { readContainerFile } from "../../catalog/iceberg/manifest-files.js";
import type { TableMetadata } from "../../catalog/iceberg/table-metadata.js";
import { inLayout, type TableDefinition } from "../../model/table.js";
import { snapshotFiles, type IcebergContext } from "../commit/iceberg-commit.js";
import { commitMetadata, fileUrl, keyOfUrl, latestMetadata } from "../commit/iceberg-pointer.js";
import { icebergMetadataPrefix, runsPrefix } from "../layout.js";

/**
 * The Iceberg side of GC (an `iceberg: true` table), under the table's lease: the history kept is the snapshots
 * whose data files are all still there. Before GC deletes runs (`removedRuns`, their store key prefixes), every
 * snapshot that names a file in them, or a file already gone, is dropped from the metadata (one new metadata
 * version, committed as any other: embedded or on Glue), then its manifest list and manifests are deleted. The
 * current snapshot names only current runs, which GC never deletes, so it always stays. So do the metadata files: an
 * older metadata file written before the oldest kept snapshot (its current snapshot is one of the expired) leaves the
 * metadata log and is deleted; the others stay in the log. Returns how many snapshots expired; an expiry that lost
 * a race to another writer of the Iceberg table deletes nothing, and the next GC expires them.
 */
export async function expireSnapshots(ctx: IcebergContext, table: TableDefinition, removedRuns: readonly string[]): Promise<number> {
  if (!table.iceberg) return 0;
  const latest = await latestMetadata(ctx, table);
  if (!latest) return 0;
  // The runs of the table's layout, and of the one it replaced (its partition keys changed: ./relayout.ts), which GC
  // keeps as the change's rollback target: a snapshot from before the change reads them.
  const replaced = table.replacedLayout === undefined ? [] : [inLayout(table, table.replacedLayout)];
  const listed = await Promise.all([table, ...replaced].map((t) => ctx.store.list(runsPrefix(ctx.catalog, t))));
  const present = new Set(listed.flat().map((o) => o.key));
  const gone = (url: string): boolean => {
    const key = keyOfUrl(ctx.store, url);
    return key === undefined || !present.has(key) || removedRuns.some((prefix) => key.startsWith(prefix));
  };
  const current = latest.metadata["current-snapshot-id"];
  const kept: TableMetadata["snapshots"][number][] = [];
  const expired: TableMetadata["snapshots"][number][] = [];
  for (const snapshot of latest.metadata.snapshots) {
    const keep = snapshot["snapshot-id"] === current || !(await snapshotFiles(ctx.store, snapshot)).some((file) => gone(file.filePath));
    (keep ? kept : expired).push(snapshot);
  }
  if (expired.length === 0) return 0;
  const keptIds = new Set(kept.map((s) => s["snapshot-id"]));
  const now = Date.now();
  const oldestKept = Math.min(...kept.map((s) => s["timestamp-ms"]));
  const log = [...latest.metadata["metadata-log"], { "metadata-file": fileUrl(ctx.store, latest.key), "timestamp-ms": latest.metadata["last-updated-ms"] }];
  const outcome = await commitMetadata(ctx, table, latest, {
    ...latest.metadata,
    "last-updated-ms": now,
    snapshots: kept,
    "snapshot-log": latest.metadata["snapshot-log"].filter((entry) => keptIds.has(entry["snapshot-id"])),
    "metadata-log": log.filter((entry) => entry["timestamp-ms"] >= oldestKept),
  });
  if (outcome.outcome === "conflict") return 0;
  // The expired snapshots' own files, unless a kept snapshot shares one (lakeswap's never do; another writer's might).
  const keptFiles = new Set<string>();
  for (const snapshot of kept) {
    keptFiles.add(snapshot["manifest-list"]);
    for (const manifest of await manifestPaths(ctx, snapshot["manifest-list"])) keptFiles.add(manifest);
  }
  const unused: string[] = log.filter((entry) => entry["timestamp-ms"] < oldestKept).flatMap((entry) => keyOfUrl(ctx.store, entry["metadata-file"]) ?? []);
  for (const snapshot of expired) {
    for (const url of [snapshot["manifest-list"], ...(await manifestPaths(ctx, snapshot["manifest-list"]))]) {
      const key = keyOfUrl(ctx.store, url);
      if (key !== undefined && !keptFiles.has(url)) unused.push(key);
    }
  }
  await ctx.store.delete(unused);
  return expired.length;
}

/** The manifests a manifest list names (none when the list is already gone). */
async function manifestPaths(ctx: IcebergContext, listUrl: string): Promise<string[]> {
  const key = keyOfUrl(ctx.store, listUrl);
  const stored = key === undefined ? undefined : await ctx.store.get(key);
  if (!stored) return [];
  return (await readContainerFile(stored.body)).records.map((record) => String(record.manifest_path));
}

/** The names lakeswap gives its Iceberg files (../layout.ts): metadata versions (hinted or catalog-named), manifest lists, manifests. */
const OWN_NAMES = [/^v[1-9][0-9]*\.metadata\.json$/, /^[0-9]{5,9}-[0-9a-f-]{36}\.metadata\.json$/, /^snap-[0-9]+-1-[0-9a-f-]{36}\.avro$/, /^[0-9a-f-]{36}-m0\.avro$/];

/**
 * Deletes the Iceberg files of a table that nothing references, under the table's lease (`lakeswap gc`): what a
 * commit killed before its pointer moved, or one that lost a race on Glue, left behind. Referenced: the current
 * metadata, the files its metadata log names, and every kept snapshot's manifest list and manifests. Only files of
 * lakeswap's own names are considered (another tool's files in the folder stay), and no commit of the table can run
 * meanwhile (each takes the lease), so a file unreferenced now is never referenced later. Returns how many it deleted.
 */
export async function removeUnreferencedMetadata(ctx: IcebergContext, table: TableDefinition): Promise<number> {
  if (!table.iceberg) return 0;
  const latest = await latestMetadata(ctx, table);
  if (!latest) return 0;
  const referenced = new Set<string>([latest.key]);
  const add = (url: string): void => {
    const key = keyOfUrl(ctx.store, url);
    if (key !== undefined) referenced.add(key);
  };
  for (const entry of latest.metadata["metadata-log"]) add(entry["metadata-file"]);
  for (const snapshot of latest.metadata.snapshots) {
    add(snapshot["manifest-list"]);
    for (const manifest of await manifestPaths(ctx, snapshot["manifest-list"])) add(manifest);
  }
  const prefix = icebergMetadataPrefix(table.name);
  const unused = (await ctx.store.list(prefix))
    .map((object) => object.key)
    .filter((key) => !referenced.has(key) && OWN_NAMES.some((name) => name.test(key.slice(prefix.length))));
  if (unused.length === 0) return 0;
  await ctx.leaseCheck(table.name);
  await ctx.store.delete(unused);
  return unused.length;
}
