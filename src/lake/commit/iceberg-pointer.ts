import { randomUUID } from "node:crypto";
import type { Catalog } from "../../catalog/catalog.js";
import type { IcebergHead } from "../../catalog/iceberg-catalog.js";
import { currentSchema, parseTableMetadata, type TableMetadata } from "../../catalog/iceberg/table-metadata.js";
import { InvalidInputError, LakeswapError } from "../../model/errors.js";
import type { TableDefinition } from "../../model/table.js";
import { faultPoint } from "../../shared/faults.js";
import type { ObjectStore } from "../../store/object-store.js";
import {
  icebergCatalogMetadataKey, icebergCatalogMetadataVersion, icebergMetadataKey, icebergMetadataPrefix, icebergMetadataVersion, icebergVersionHintKey,
} from "../layout.js";
import type { LakeContext } from "../runs.js";

/**
 * The pointer of an `iceberg: true` table's Iceberg view: which metadata file is current, and how a commit moves it.
 * Embedded, the store holds it: `vN.metadata.json` written create-exclusive, then `version-hint.text` replaced (the
 * layout DuckDB's and pyiceberg's file-system catalogs read). Where the catalog holds it (Glue: `Catalog.iceberg`), a
 * uniquely named metadata file, then one compare-and-swap of the catalog's entry; a lost race is "conflict".
 */

/** What a context must offer the pointer: the ports and the fence of the table's lease. */
export type IcebergPointerContext = Pick<LakeContext, "store" | "catalog" | "leaseCheck">;

/** The current metadata of a table's Iceberg view. */
export interface LatestMetadata {
  /** The store key of its file. */
  readonly key: string;
  /** Its number in the table's metadata log (N of `vN.metadata.json`, `0000N-<uuid>.metadata.json`). */
  readonly version: number;
  readonly metadata: TableMetadata;
  /** Embedded: the version `version-hint.text` names (behind `version` when a commit was killed before it moved the hint). */
  readonly hinted?: number;
  /** Where the catalog holds the pointer: its entry as read (a commit compares it). */
  readonly head?: IcebergHead;
}

/** Refuses `iceberg: true` where the lake cannot publish it (a store without local paths and a catalog without Iceberg tables), and a table whose columns the catalog's Iceberg tables cannot hold. */
export function assertIcebergSupported(ctx: { readonly store: ObjectStore; readonly catalog: Catalog }, table: TableDefinition): void {
  if (!table.iceberg) return;
  if (ctx.catalog.iceberg) {
    ctx.catalog.iceberg.assertPublishable(table);
    return;
  }
  if (!ctx.store.capabilities.localPaths) {
    throw new InvalidInputError(
      `table '${table.name}' declares iceberg: true, which lakeswap supports on the embedded lake (a local folder) and on AWS (S3 and Glue), not on ${ctx.store.description} ` +
        "with this catalog; leave out iceberg: true (or --iceberg) for this lake",
    );
  }
}

/** The absolute URI of a store key, as Iceberg metadata names files (a `file://` URL embedded, `s3://bucket/key` on S3). */
export function fileUrl(store: ObjectStore, key: string): string {
  return store.uri(key);
}

/** The store key of a file URI inside the lake, or undefined for a file elsewhere. */
export function keyOfUrl(store: ObjectStore, url: string): string | undefined {
  return store.keyOf(url);
}

/** Reads the current metadata of a table's Iceberg view, or undefined when none was ever committed. */
export async function latestMetadata(ctx: Pick<LakeContext, "store" | "catalog">, table: TableDefinition): Promise<LatestMetadata | undefined> {
  const iceberg = ctx.catalog.iceberg;
  if (!iceberg) return latestInStore(ctx.store, table);
  const head = await iceberg.head(table);
  if (!head) return undefined;
  const key = ctx.store.keyOf(head.metadataLocation);
  if (key === undefined) {
    throw new LakeswapError(
      "STORE_ERROR",
      `the Iceberg table ${iceberg.nameOf(table)} names metadata '${head.metadataLocation}', outside the lake (${ctx.store.description}); drop that table (lakeswap publishes the current runs again at its next command)`,
    );
  }
  const metadata = await readMetadata(ctx.store, table, key);
  return { key, version: icebergCatalogMetadataVersion(key) ?? metadata["metadata-log"].length + 1, metadata, head };
}

/** The newest metadata in the store: the highest `vN.metadata.json` (a commit killed before its hint moved is complete), and the hinted version. */
async function latestInStore(store: ObjectStore, table: TableDefinition): Promise<LatestMetadata | undefined> {
  const versions = (await store.list(icebergMetadataPrefix(table.name)))
    .map((object) => icebergMetadataVersion(table.name, object.key))
    .filter((v): v is number => v !== undefined);
  if (versions.length === 0) return undefined;
  const version = Math.max(...versions);
  const key = icebergMetadataKey(table.name, version);
  const metadata = await readMetadata(store, table, key);
  const hint = await store.get(icebergVersionHintKey(table.name));
  const hinted = hint ? Number.parseInt(Buffer.from(hint.body).toString("utf8"), 10) : undefined;
  return { key, version, metadata, hinted: Number.isInteger(hinted) ? hinted : undefined };
}

async function readMetadata(store: ObjectStore, table: TableDefinition, key: string): Promise<TableMetadata> {
  const stored = await store.get(key);
  const parsed = stored ? parseTableMetadata(stored.body) : "it is gone";
  if (typeof parsed === "string") {
    throw new LakeswapError("STORE_ERROR", `Iceberg metadata '${key}' of table '${table.name}' cannot be read (${parsed}); move it away and rerun: the next command commits a snapshot of the current runs again`);
  }
  return parsed;
}

/**
 * Commits `metadata` as the version after `latest`: writes its file create-exclusive, then moves the pointer (the
 * hint, or the catalog's entry from `latest.head`), fenced by the table's lease. "conflict" when the catalog's entry
 * moved since `latest` was read (another writer committed first): nothing was overwritten, and the caller derives
 * its commit again from a fresh read.
 */
export async function commitMetadata(
  ctx: IcebergPointerContext,
  table: TableDefinition,
  latest: LatestMetadata | undefined,
  metadata: TableMetadata,
): Promise<{ readonly outcome: "committed" | "conflict"; readonly bytes: number; readonly catalogCalls: number }> {
  const version = (latest?.version ?? 0) + 1;
  const iceberg = ctx.catalog.iceberg;
  const key = iceberg ? icebergCatalogMetadataKey(table.name, version, randomUUID()) : icebergMetadataKey(table.name, version);
  const body = `${JSON.stringify(metadata, null, 2)}\n`;
  await ctx.leaseCheck(table.name);
  if (!(await ctx.store.putIfAbsent(key, body))) {
    throw new LakeswapError("CONFLICT", `Iceberg metadata '${key}' of table '${table.name}' was written by another writer meanwhile; rerun the command (it commits from the current pointers)`, { retryable: true });
  }
  faultPoint("during-iceberg-commit");
  const bytes = Buffer.byteLength(body);
  if (iceberg) {
    // The Glue columns carry the field ids of the schema committed (kept across schema changes in place).
    const fields = currentSchema(metadata)?.fields;
    const outcome = await iceberg.commit(table, { metadataLocation: ctx.store.uri(key), location: metadata.location, expected: latest?.head, ...(fields ? { fields } : {}) }, () => ctx.leaseCheck(table.name));
    return { outcome, bytes, catalogCalls: 1 };
  }
  await moveHint(ctx, table, version);
  return { outcome: "committed", bytes, catalogCalls: 1 };
}

/** Moves a pointer a killed commit left behind to the newest metadata (embedded: the hint; a catalog's entry never lags its metadata). */
export async function repairPointer(ctx: IcebergPointerContext, table: TableDefinition, latest: LatestMetadata): Promise<void> {
  if (!ctx.catalog.iceberg && latest.hinted !== latest.version) await moveHint(ctx, table, latest.version);
}

async function moveHint(ctx: IcebergPointerContext, table: TableDefinition, version: number): Promise<void> {
  await ctx.leaseCheck(table.name);
  await ctx.store.put(icebergVersionHintKey(table.name), String(version));
}
