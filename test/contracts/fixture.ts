/**
 * What every contract suite shares: an adapter's fixture made fresh for each test and cleaned after it, and which
 * adapters the run selects (BACKENDS=local,aws, as the lake's other suites; default every one).
 */
import { randomBytes } from "node:crypto";
import { afterAll, afterEach, beforeEach } from "vitest";
import { sharedAwsServices, type AwsEndpoints } from "../support/lake-fixture.js";

/** A fresh adapter (and whatever the suite needs beside it), and how to remove what it made. */
export interface Fixture {
  cleanup(): Promise<void>;
}

/** Makes a fresh fixture: the one argument every contract suite takes. */
export type FixtureFactory<F extends Fixture> = () => Promise<F>;

/** Which backend an adapter belongs to, for BACKENDS: `local` (the embedded lake) or `aws`. */
export type BackendName = "local" | "aws";

/** Whether the run selects `backend` (BACKENDS, comma-separated; default every backend). */
export function backendSelected(backend: BackendName): boolean {
  const wanted = process.env.BACKENDS;
  return wanted === undefined || wanted.split(",").map((b) => b.trim()).includes(backend);
}

/** Registers hooks that make a fresh fixture before each test of the enclosing describe and clean it after; returns its getter. */
export function eachFixture<F extends Fixture>(factory: FixtureFactory<F>): () => F {
  let current: F | undefined;
  beforeEach(async () => {
    current = await factory();
  });
  afterEach(async () => {
    const done = current;
    current = undefined;
    await done?.cleanup();
  });
  return () => {
    if (!current) throw new Error("the contract's fixture is made in beforeEach; use it inside a test");
    return current;
  };
}

/**
 * The run's shared AWS emulators for a test file (test/support/shared-services.ts; a set of the file's own when run
 * without the global setup, stopped after the file): call at the top of the file, await the getter in a factory.
 * Each fixture takes a fresh S3 prefix and Glue database of its own on them.
 */
export function useSharedAws(): () => Promise<AwsEndpoints> {
  let services: Promise<AwsEndpoints & { close(): Promise<void> }> | undefined;
  afterAll(async () => {
    await (await services)?.close();
  });
  return () => (services ??= sharedAwsServices());
}

/** A name no other fixture of the run uses (both workers share the emulators): for S3 prefixes and Glue databases. */
export function uniqueName(prefix: string): string {
  return `${prefix}${randomBytes(6).toString("hex")}`;
}
