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

/**
 * Local paths of the store objects `keys`, for a reader that reads files: where they lie (a store with local paths),
 * or copies in a folder of this process's (S3), removed by `release` (a killed process's by the next lakeswap process
 * that makes such a folder: ../shared/process-folders.ts).
 */
export async function localCopies(store: ObjectStore, keys: readonly string[]): Promise<LocalCopies> {
  if (store.capabilities.localPaths) return { paths: keys.map((key) => store.localPath(key)), release: async () => undefined };
  const folder = await freshProcessFolder("lakeswap-copies-");
  const release = () => fs.rm(folder, { recursive: true, force: true });
  try {
    const paths = await mapLimited(keys, 8, async (key, index) => {
      const object = await store.get(key);
      if (!object) throw new LakeswapError("STORE_ERROR", `${key} is gone from ${store.description}; rerun`, { retryable: true });
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
