// The object store contract (./object-store.contract.ts) against each adapter: the local folder, and S3 (s3rver behind
// the conditional-write proxy, the run's shared emulators), each test in a fresh folder or prefix.
import { S3Client } from "@aws-sdk/client-s3";
import { LocalStore } from "../../src/store/local-store.js";
import { METADATA_FOLDERS } from "../../src/lake/layout.js";
import { S3Store } from "../../src/store/s3/s3-store.js";
import { tempDir } from "../support/lake-fixture.js";
import { backendSelected, uniqueName, useSharedAws } from "./fixture.js";
import { objectStoreContract } from "./object-store.contract.js";

const aws = useSharedAws();

if (backendSelected("local")) {
  objectStoreContract("LocalStore", async () => {
    const { dir, cleanup } = tempDir();
    return { store: new LocalStore(dir, { folders: METADATA_FOLDERS }), cleanup: async () => cleanup() };
  });
}

if (backendSelected("aws")) {
  objectStoreContract("S3Store", async () => {
    const client = new S3Client((await aws()).s3.clientConfig);
    return { store: new S3Store(client, { bucket: "lake", prefix: uniqueName("contracts/store-") }), cleanup: async () => client.destroy() };
  });
}
