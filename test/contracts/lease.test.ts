// The writer lease contract (./lease.contract.ts) over each object store: the local folder (with its kernel lock)
// and S3 (the run's shared s3rver behind the conditional-write proxy), each test in a fresh folder or prefix.
import { S3Client } from "@aws-sdk/client-s3";
import { LocalStore } from "../../src/store/local-store.js";
import { METADATA_FOLDERS } from "../../src/lake/layout.js";
import { S3Store } from "../../src/store/s3/s3-store.js";
import { tempDir } from "../support/lake-fixture.js";
import { backendSelected, uniqueName, useSharedAws } from "./fixture.js";
import { leaseContract } from "./lease.contract.js";

const aws = useSharedAws();

if (backendSelected("local")) {
  leaseContract("LocalStore", async () => {
    const { dir, cleanup } = tempDir();
    return { store: new LocalStore(dir, { folders: METADATA_FOLDERS }), cleanup: async () => cleanup() };
  });
}

if (backendSelected("aws")) {
  leaseContract("S3Store", async () => {
    const client = new S3Client((await aws()).s3.clientConfig);
    return { store: new S3Store(client, { bucket: "lake", prefix: uniqueName("contracts/lease-") }), cleanup: async () => client.destroy() };
  });
}
