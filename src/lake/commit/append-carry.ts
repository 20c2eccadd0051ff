import type { TableDefinition } from "../../model/table.js";
import { mapLimited } from "../../shared/map-limited.js";
import { ensureManifest, listRunFiles, runPrefix } from "../runs.js";
import type { Pointer } from "../../catalog/catalog.js";
import type { Partition } from "../../model/partition.js";
import type { LakeContext } from "../runs.js";

/** The new run an append carries the current run's files into. */
interface NewRun {
  readonly item: { readonly partition: Partition };
  readonly current?: Pointer;
  readonly runId: string;
  readonly prefix: string;
}

/** Copies made at once. */
const IO_CONCURRENCY = 16;

/**
 * Copies the current run's files into a new run (append): same names (each is
 * unique to the run that wrote it), within the store. Returns the rows carried,
 * from the current run's manifest, which the audit then checks against the files.
 */
export async function carryCurrentRun(ctx: LakeContext, table: TableDefinition, p: NewRun): Promise<number> {
  if (!p.current) return 0;
  const manifest = await ensureManifest(ctx, table, p.current);
  const prefix = runPrefix(ctx.catalog, table, p.item.partition, p.current.runId);
  const files = await listRunFiles(ctx.store, prefix);
  if (files.length + 1 > APPEND_MAX_FILES) {
    // Many appends make many small files, each copied by every later append and read by every query: past the
    // limit, the new run holds one file with the current run's rows and the delivery's, rewritten (rows unchanged).
    const written = await listRunFiles(ctx.store, p.prefix);
    await ctx.landing.compactFiles({ table, files: [...files, ...written].map((f) => f.key), targetKey: `${p.prefix}part-${p.runId}-compacted.parquet` });
    await ctx.store.delete(written.map((f) => f.key));
    return manifest.rows;
  }
  await mapLimited(files, IO_CONCURRENCY, (file) => ctx.store.copy(file.key, `${p.prefix}${file.key.slice(prefix.length)}`, file.size));
  return manifest.rows;
}

/**
 * The most files a run made by `write: append` holds; the append that would pass it compacts the run into one
 * file, named by its run id like every run file (a reader that listed the partition before a swap never opens
 * another run's bytes under a name it already read).
 */
export const APPEND_MAX_FILES = 32;
