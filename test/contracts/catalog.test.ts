// The catalog contract (./catalog.contract.ts) against each adapter: the lake folder's catalog (symlink pointers),
// and Glue (the run's shared Glue emulator, a database of each test's own).
import { mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { GlueClient } from "@aws-sdk/client-glue";
import { GlueCatalog } from "../../src/catalog/glue-catalog.js";
import { LocalCatalog } from "../../src/catalog/local-catalog.js";
import { METADATA_FOLDERS, writeConsequence } from "../../src/lake/layout.js";
import { tempDir } from "../support/lake-fixture.js";
import { catalogContract } from "./catalog.contract.js";
import { backendSelected, uniqueName, useSharedAws } from "./fixture.js";

const aws = useSharedAws();

if (backendSelected("local")) {
  catalogContract("LocalCatalog", async () => {
    const { dir, cleanup } = tempDir();
    const root = path.join(dir, "lake");
    const catalog = new LocalCatalog(root, { folders: METADATA_FOLDERS, describeWrite: writeConsequence });
    await catalog.open();
    return {
      catalog,
      // The local catalog links a pointer to its run's folder, which must be there.
      async writeRun(location) {
        await mkdir(path.join(root, location), { recursive: true });
        await writeFile(path.join(root, location, "part-0.parquet"), "PAR1");
      },
      cleanup: async () => cleanup(),
    };
  });
}

if (backendSelected("aws")) {
  catalogContract("GlueCatalog", async () => {
    const client = new GlueClient((await aws()).glue.clientConfig);
    const prefix = uniqueName("contracts/catalog-");
    const catalog = new GlueCatalog(client, { database: uniqueName("contracts_"), uriOf: (key) => `s3://lake/${prefix}/${key}` });
    await catalog.open();
    return {
      catalog,
      // Glue holds a location; the run's files are the store's business.
      writeRun: async () => undefined,
      cleanup: async () => client.destroy(),
    };
  });
}
