/**
 * The emulated AWS services (S3 behind the conditional-write proxy, Glue,
 * Athena), started together. Both a test's own set and the run's shared set
 * (test/support/global-services.ts) are started here.
 */
import type { AthenaEmulator } from "./athena-emulator.js";
import { CREDENTIALS, type EmulatorClientConfig } from "./aws-json.js";
import type { GlueEmulator } from "./glue-emulator.js";
import type { S3Server } from "./s3-server.js";

/** Where the emulated services listen, and SDK client configurations for them: all a test needs that only talks to them. */
export interface AwsEndpoints {
  readonly s3: { readonly endpoint: string; readonly clientConfig: S3Server["clientConfig"] };
  readonly glue: { readonly endpoint: string; readonly clientConfig: EmulatorClientConfig };
  readonly athena: { readonly endpoint: string; readonly clientConfig: EmulatorClientConfig };
}

const REGION = "us-east-1";

/** The endpoints of services that listen at these addresses (the run's shared set). */
export function awsEndpoints(s3: string, glue: string, athena: string): AwsEndpoints {
  return {
    s3: { endpoint: s3, clientConfig: { endpoint: s3, region: REGION, forcePathStyle: true, credentials: CREDENTIALS } },
    glue: { endpoint: glue, clientConfig: { endpoint: glue, region: REGION, credentials: CREDENTIALS } },
    athena: { endpoint: athena, clientConfig: { endpoint: athena, region: REGION, credentials: CREDENTIALS } },
  };
}

/** A set of emulated services of its own: its request logs, catalog state and injected failures belong to one test. */
export interface AwsServices extends AwsEndpoints {
  readonly s3: S3Server;
  readonly glue: GlueEmulator;
  readonly athena: AthenaEmulator;
  close(): Promise<void>;
}

/** Starts S3, Glue and Athena emulators, with buckets `lake` and `results`. */
export async function startAwsServices(): Promise<AwsServices> {
  // Loaded here, not at the top: s3rver and the Athena emulator's SQL grammar take seconds to load, and most files
  // (and every child process) that import the fixtures never start them.
  const [{ startS3Server }, { startGlueEmulator }, { startAthenaEmulator }] = await Promise.all([
    import("./s3-server.js"),
    import("./glue-emulator.js"),
    import("./athena-emulator.js"),
  ]);
  const s3 = await startS3Server({ buckets: ["lake", "results"] });
  const glue = await startGlueEmulator();
  const athena = await startAthenaEmulator({ s3Endpoint: s3.endpoint, glueEndpoint: glue.endpoint });
  return {
    s3,
    glue,
    athena,
    close: async () => {
      await athena.close();
      await glue.close();
      await s3.close();
    },
  };
}
