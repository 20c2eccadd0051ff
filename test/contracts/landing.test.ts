// The landing contract (./landing.contract.ts) against DuckDB's landing, writing to each store: the lake folder, and
// S3 (the run's shared s3rver; a prefix of each test's own), with the run layout of the catalog each is paired with.
import path from "node:path";
import { GlueClient } from "@aws-sdk/client-glue";
import { S3Client } from "@aws-sdk/client-s3";
import { GlueCatalog } from "../../src/catalog/glue-catalog.js";
import { LocalCatalog } from "../../src/catalog/local-catalog.js";
import { DuckDbLanding } from "../../src/landing/duckdb/duckdb-landing.js";
import { METADATA_FOLDERS, TEMP_PREFIX } from "../../src/lake/layout.js";
import { LocalStore } from "../../src/store/local-store.js";
import { S3Store } from "../../src/store/s3/s3-store.js";
import { tempDir } from "../support/lake-fixture.js";
import { backendSelected, uniqueName, useSharedAws } from "./fixture.js";
import { landingContract } from "./landing.contract.js";

const aws = useSharedAws();

if (backendSelected("local")) {
  landingContract("DuckDbLanding on the lake folder", async () => {
    const { dir, cleanup } = tempDir();
    const root = path.join(dir, "lake");
    const store = new LocalStore(root, { folders: METADATA_FOLDERS });
    const landing = new DuckDbLanding(store, { stagingPrefix: TEMP_PREFIX });
    return {
      landing,
      store,
      catalog: new LocalCatalog(root, { folders: METADATA_FOLDERS }),
      cleanup: async () => {
        await landing.close();
        cleanup();
      },
    };
  });
}

if (backendSelected("aws")) {
  landingContract("DuckDbLanding on S3", async () => {
    const services = await aws();
    const s3 = new S3Client(services.s3.clientConfig);
    const glue = new GlueClient(services.glue.clientConfig);
    const store = new S3Store(s3, { bucket: "lake", prefix: uniqueName("contracts/landing-") });
    const landing = new DuckDbLanding(store, { stagingPrefix: TEMP_PREFIX });
    return {
      landing,
      store,
      // Only its layout is read: runs under the partitions' own paths, as Hive lays them out.
      catalog: new GlueCatalog(glue, { database: uniqueName("contracts_"), uriOf: (key) => store.uri(key) }),
      cleanup: async () => {
        await landing.close();
        s3.destroy();
        glue.destroy();
      },
    };
  });
}
