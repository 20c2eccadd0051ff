// Vitest global setup: bundles the CLI and the helper scripts that tests start as child processes, once per run and
// always from the current sources (a test never runs a stale build), so a child starts in a fraction of what
// transpiling the sources through tsx costs. The bundles go to .vitest/run-<pid>/ (two folders below the repository,
// as dist/bundle/cli.cjs is, so they find the native extension as the published bundle does) and are removed after.
import { existsSync, mkdirSync, readdirSync, rmSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { build, type BuildOptions } from "esbuild";
import { BUNDLES_VARIABLE } from "./bundles.js";

const root = fileURLToPath(new URL("../../", import.meta.url));
const support = path.join(root, "test", "support");

/** Builds the bundles into a fresh folder; returns the teardown that removes it. */
export default async function buildBundles(): Promise<() => void> {
  const parent = path.join(root, ".vitest");
  removeAbandoned(parent);
  const dir = path.join(parent, `run-${process.pid}`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const { cliBundleOptions } = (await import(pathToFileURL(path.join(root, "scripts", "bundle-options.mjs")).href)) as { cliBundleOptions: () => BuildOptions };
  await Promise.all([
    // The CLI as it ships (scripts/bundle.mjs's options), from its sources, behind the test entry (test/support/run-cli.ts).
    build({ ...cliBundleOptions(), entryPoints: [path.join(support, "run-cli.ts")], outfile: path.join(dir, "run-cli-code.cjs") }),
    // What a test starts as the CLI: that bundle, compiled with V8's code cache (test/support/cached-cli.ts).
    build({ ...cliBundleOptions(), entryPoints: [path.join(support, "cached-cli.ts")], outfile: path.join(dir, "run-cli.cjs") }),
    // The helpers as the CLI, but with their packages loaded from node_modules (they are started a few times a run).
    build({
      ...cliBundleOptions(),
      entryPoints: ["crash-writer.ts", "lock-holder.ts", "reader-loop.ts", "catalog-reader-loop.ts"].map((script) => path.join(support, script)),
      outdir: dir,
      outExtension: { ".js": ".cjs" },
      packages: "external",
    }),
    // The run's shared AWS emulators' process (test/support/global-services.ts): dt-sql-parser is bundled in, as Node
    // cannot load its extensionless ESM imports; s3rver, DuckDB and the AWS SDK come from node_modules.
    build({ ...cliBundleOptions(), entryPoints: [path.join(support, "aws-services-server.ts")], outfile: path.join(dir, "aws-services-server.cjs") }),
  ]);
  // The test workers inherit it (they start after the global setup).
  process.env[BUNDLES_VARIABLE] = dir;
  return () => rmSync(dir, { recursive: true, force: true });
}

/** Removes the bundle folders of earlier runs whose process is gone (a run that was killed leaves its folder). */
function removeAbandoned(parent: string): void {
  if (!existsSync(parent)) return;
  for (const name of readdirSync(parent)) {
    const pid = Number(/^run-(\d+)$/.exec(name)?.[1]);
    if (Number.isInteger(pid) && !isAlive(pid)) rmSync(path.join(parent, name), { recursive: true, force: true });
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}
