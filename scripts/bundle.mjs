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
import { cliBundleOptions } from "./bundle-options.mjs";

const root = fileURLToPath(new URL("../", import.meta.url));
const outdir = path.join(root, "dist", "bundle");
rmSync(outdir, { recursive: true, force: true });
await build({
  ...cliBundleOptions(),
  entryPoints: [path.join(root, "dist", "cli", "main.js")],
  outfile: path.join(outdir, "cli.cjs"),
});

const bundled = readFileSync(path.join(outdir, "cli.cjs"), "utf8");
// bin/lakeswap.js decodes the bundle as Latin-1, which reads ASCII alone as UTF-8 would (esbuild escapes the rest).
const nonAscii = /[^\p{ASCII}]/u.exec(bundled);
if (nonAscii) throw new Error(`bundle: dist/bundle/cli.cjs holds a character outside ASCII at ${nonAscii.index}; bin/lakeswap.js reads it as Latin-1`);
const dynamicImport = /\bimport\(\s*["'`]([^"'`]+)/.exec(bundled);
if (dynamicImport) throw new Error(`bundle: dist/bundle/cli.cjs imports ${dynamicImport[1]} dynamically; make it a require (see scripts/bundle-options.mjs)`);

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
