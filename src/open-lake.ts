import { LocalCatalog } from "./catalog/local-catalog.js";
import { Lake, type LakeSettings } from "./core/lake.js";
import { DuckDbEngine } from "./engine/duckdb-engine.js";
import { LocalStore } from "./store/local-store.js";

/** Opens the embedded lake in `dir`: local folder store, symlink catalog, DuckDB engine. */
export async function openEmbeddedLake(dir: string, settings: LakeSettings = {}): Promise<Lake> {
  const store = new LocalStore(dir);
  return Lake.open({ store, catalog: new LocalCatalog(dir), engine: new DuckDbEngine(store) }, settings);
}
