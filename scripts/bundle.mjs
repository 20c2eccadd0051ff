// Bundles the compiled CLI (dist/cli/main.js) into one script, dist/bundle/cli.cjs, with esbuild, so that `lakeswap`
// starts by reading one file instead of several hundred modules, and makes V8's code cache of it (cli.cjs.cache, read
// by bin/lakeswap.js) by running a small sync twice: a first load and a resend. The AWS SDK and DuckDB's native
// binding stay outside, loaded from node_modules when a command first needs them; the modules lakeswap loads only on
// demand (DuckDB's API, AWS mode) are bundled but evaluated only when first used.
import { build } from "esbuild";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

/**
 * The AWS SDK is imported when a command first needs it (`await import(...)`); in a CommonJS bundle such an import
 * must become a require() when it is first reached, as esbuild makes of bundled modules: a script compiled from V8's
 * code cache cannot import(). Each such import is served by a small module that requires the package.
 */
const requireExternalsOnDemand = {
  name: "require-externals-on-demand",
  setup(build) {
    build.onResolve({ filter: /^@aws-sdk\// }, (args) =>
      args.kind === "dynamic-import" ? { path: args.path, namespace: "required-on-demand" } : { path: args.path, external: true },
    );
    build.onLoad({ filter: /.*/, namespace: "required-on-demand" }, (args) => ({
      contents: `module.exports = require(${JSON.stringify(args.path)});`,
      loader: "js",
    }));
  },
};

const root = fileURLToPath(new URL("../", import.meta.url));
const outdir = path.join(root, "dist", "bundle");
rmSync(outdir, { recursive: true, force: true });
await build({
  entryPoints: [path.join(root, "dist", "cli", "main.js")],
  outfile: path.join(outdir, "cli.cjs"),
  bundle: true,
  format: "cjs",
  platform: "node",
  target: "node20",
  external: ["@duckdb/node-bindings", "@aws-sdk/*"],
  // The modules find files next to the package root from their own URL: the bundle is as deep in the package as they are.
  define: { "import.meta.url": "__lakeswapModuleUrl" },
  banner: { js: 'const __lakeswapModuleUrl = require("node:url").pathToFileURL(__filename).href;' },
  plugins: [requireExternalsOnDemand],
  logLevel: "warning",
});

const bundled = readFileSync(path.join(outdir, "cli.cjs"), "utf8");
const dynamicImport = /\bimport\(\s*["'`]([^"'`]+)/.exec(bundled);
if (dynamicImport) throw new Error(`bundle: dist/bundle/cli.cjs imports ${dynamicImport[1]} dynamically; make it a require (see requireExternalsOnDemand)`);

const work = mkdtempSync(path.join(tmpdir(), "lakeswap-bundle-"));
try {
  writeFileSync(path.join(work, "events.csv"), "event_date,id,amount\n2026-11-01,1,2.5\n2026-11-02,2,4.0\n");
  writeFileSync(
    path.join(work, "lakeswap.yaml"),
    [
      "datasets:",
      "  events:",
      "    source: {format: csv, path: events.csv}",
      "    columns:",
      "      event_date: {type: DATE, nullable: false}",
      "      id: {type: BIGINT, nullable: false}",
      "      amount: {type: DOUBLE}",
      "    partition:",
      "      day: \"strftime(event_date, '%Y-%m-%d')\"",
      "",
    ].join("\n"),
  );
  const bin = path.join(root, "bin", "lakeswap.js");
  for (let round = 0; round < 2; round += 1) {
    const run = spawnSync(process.execPath, [bin, "--lake", path.join(work, "lake"), "sync", "-c", path.join(work, "lakeswap.yaml"), "--json"], {
      cwd: work,
      // The resend writes the cache: what a command always runs, not what a first load compiles once.
      env: { ...process.env, LAKESWAP_CODE_CACHE: round === 1 ? "write" : "skip" },
      encoding: "utf8",
    });
    if (run.status !== 0) {
      // Without DuckDB's native parts (npm ci --ignore-scripts) the first command run makes the cache instead.
      process.stderr.write(`bundle: no code cache made (a sync of a sample failed: ${(run.stderr || run.stdout).trim().split("\n").pop()})\n`);
      break;
    }
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}
