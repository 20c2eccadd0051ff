import { deliveriesPrefix, icebergMetadataPrefix, ingestTalliesPrefix, layoutRecordsPrefix, leaseLockKey, manifestsPrefix, outboxPrefix, pinsPrefix, runsPrefix } from "../layout.js";
import { otherLayouts } from "./relayout.js";
import { removePointers } from "../commit/move.js";
import type { HasLakeParts } from "../parts.js";
import { storageName } from "../../model/table.js";

/** Removes a table under its lease: pointers first (readers stop seeing it; its Iceberg table too), then its runs and records, then its definition. */
export async function dropTable(lake: HasLakeParts, name: string): Promise<void> {
  const { store, catalog } = lake.parts;
  const table = await lake.parts.table(name);
  await lake.parts.withLease(table.name, `drop-table ${table.name}`, async () => {
    await removePointers(catalog, table, (await catalog.listPointers(table)).map((p) => p.partition), () => lake.parts.leaseCheck(table.name));
    // The layouts a change of partition keys left (./relayout.ts), which nobody reads: their runs and manifests go
    // below, their pointers with the table's catalog entries (Catalog.dropTable).
    const others = await otherLayouts(store, table);
    // The Iceberg view's catalog entry too (Glue's `<table>_iceberg`), before its metadata files go: readers stop seeing it first.
    if (table.iceberg && catalog.iceberg) {
      await lake.parts.leaseCheck(table.name);
      await catalog.iceberg.drop(table);
    }
    const objects = [
      ...(await store.list(table.ingest ? `${table.name}/` : runsPrefix(catalog, table))),
      ...(table.ingest ? await store.list(ingestTalliesPrefix(table.name)) : []),
      ...(await store.list(manifestsPrefix(table.name))),
      // A table whose partition keys changed keeps each layout's manifests under the layout's name, and the records of
      // its other layouts (the catalog drops its layouts' entries with it).
      ...(table.layout !== undefined ? await store.list(manifestsPrefix(storageName(table))) : []),
      ...(await Promise.all(others.map(async (layout) => [...(await store.list(runsPrefix(catalog, layout))), ...(await store.list(manifestsPrefix(storageName(layout))))]))).flat(),
      ...(await store.list(layoutRecordsPrefix(table.name))),
      ...(await store.list(pinsPrefix(table.name))),
      ...(await store.list(outboxPrefix(table.name))),
      ...(await store.list(deliveriesPrefix(table.name))),
      ...(table.iceberg ? await store.list(icebergMetadataPrefix(table.name)) : []),
    ];
    // On S3 the Iceberg folder lies under the table's runs prefix too: each key once.
    await store.delete([...new Set(objects.map((o) => o.key))]);
    // The catalog's entries of its layouts (Glue: a table each), which nobody reads; the table's own goes last, below.
    for (const layout of [table, ...others]) await catalog.dropLayout?.(layout);
    // Last, while this writer still holds its kernel lock: a table dropped leaves nothing behind.
    if (store.tryLock) await store.delete([leaseLockKey(table.name)]);
  }, { catalogFile: "remove" });
  await catalog.dropTable(table.name);
}
