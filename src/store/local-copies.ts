import { promises as fs } from "node:fs";
import path from "node:path";
import { LakeswapError } from "../model/errors.js";
import { mapLimited } from "../shared/map-limited.js";
import { freshProcessFolder } from "../shared/process-folders.js";
import type { ObjectStore } from "./object-store.js";

/** Local paths of some of a store's objects, and how to give them up. */
export interface LocalCopies {
  readonly paths: string[];
  /** Removes the copies (nothing where the paths are the objects themselves). */
  release(): Promise<void>;
}

/** Where copies go, and what an object that is gone is. */
export interface CopyOptions {
  /** What the copies' folder is named after (`lakeswap-<kind>-…`). */
  readonly kind: string;
  /** A folder to make the copies' folder in; default a folder of this process's in the machine's temporary folder. */
  readonly under?: string;
  /** The error for an object that is gone; default a retryable STORE_ERROR naming it. */
  readonly missing?: (key: string) => Error;
}

/**
 * Local paths of the store objects `keys`, for a reader that reads files: where they lie (a store with local paths),
 * or copies in a folder made for them (S3), removed by `release` (a killed process's by the next lakeswap process that
 * makes such a folder: ../shared/process-folders.ts).
 */
export async function localCopies(store: ObjectStore, keys: readonly string[], options: CopyOptions): Promise<LocalCopies> {
  if (store.capabilities.localPaths) return { paths: keys.map((key) => store.localPath(key)), release: async () => undefined };
  const folder = options.under === undefined ? await freshProcessFolder(`lakeswap-${options.kind}-`) : await fs.mkdtemp(path.join(options.under, `${options.kind}-`));
  const release = () => fs.rm(folder, { recursive: true, force: true });
  const missing = options.missing ?? ((key: string) => new LakeswapError("STORE_ERROR", `${key} is gone from ${store.description}; rerun`, { retryable: true }));
  try {
    const paths = await mapLimited(keys, 8, async (key, index) => {
      const object = await store.get(key);
      if (!object) throw missing(key);
      const file = path.join(folder, `${index}${path.extname(key)}`);
      await fs.writeFile(file, object.body);
      return file;
    });
    return { paths, release };
  } catch (error) {
    await release();
    throw error;
  }
}
