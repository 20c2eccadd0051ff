// The engine contract (./engine.contract.ts) against each adapter: DuckDB over the lake folder, and Athena (the run's
// shared Athena, Glue and S3 emulators; an S3 prefix and a Glue database of each test's own).
import path from "node:path";
import { AthenaClient } from "@aws-sdk/client-athena";
import { GlueClient } from "@aws-sdk/client-glue";
import { S3Client } from "@aws-sdk/client-s3";
import { GlueCatalog } from "../../src/catalog/glue-catalog.js";
import { LocalCatalog } from "../../src/catalog/local-catalog.js";
import { AthenaEngine } from "../../src/engine/athena-engine.js";
import { DuckDbEngine } from "../../src/engine/duckdb-engine.js";
import { METADATA_FOLDERS } from "../../src/lake/layout.js";
import { LocalStore } from "../../src/store/local-store.js";
import { S3Store } from "../../src/store/s3/s3-store.js";
import { tempDir } from "../support/lake-fixture.js";
import { engineContract } from "./engine.contract.js";
import { backendSelected, uniqueName, useSharedAws } from "./fixture.js";

const aws = useSharedAws();

if (backendSelected("local")) {
  engineContract("DuckDbEngine", async () => {
    const { dir, cleanup } = tempDir();
    const root = path.join(dir, "lake");
    const store = new LocalStore(root, { folders: METADATA_FOLDERS });
    const catalog = new LocalCatalog(root, { folders: METADATA_FOLDERS });
    await catalog.open();
    const engine = new DuckDbEngine(store);
    return {
      engine,
      store,
      catalog,
      fileName: (key) => store.localPath(key),
      cleanup: async () => {
        await engine.close();
        cleanup();
      },
    };
  });
}

if (backendSelected("aws")) {
  engineContract("AthenaEngine", async () => {
    const services = await aws();
    const s3 = new S3Client(services.s3.clientConfig);
    const glue = new GlueClient(services.glue.clientConfig);
    const athena = new AthenaClient(services.athena.clientConfig);
    const store = new S3Store(s3, { bucket: "lake", prefix: uniqueName("contracts/engine-") });
    const database = uniqueName("contracts_");
    const uriOf = (key: string): string => store.uri(key);
    const catalog = new GlueCatalog(glue, { database, uriOf });
    await catalog.open();
    const engine = new AthenaEngine(athena, { workgroup: "primary", database, outputLocation: `s3://results/${database}/`, pollMs: 20, uriOf, store });
    return {
      engine,
      store,
      catalog,
      fileName: uriOf,
      cleanup: async () => {
        await engine.close();
        for (const client of [s3, glue, athena]) client.destroy();
      },
    };
  });
}
