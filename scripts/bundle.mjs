// Bundles the compiled CLI (dist/cli/main.js) into one script, dist/bundle/cli.cjs, with esbuild, so that `lakeswap`
// starts by reading one file instead of several hundred modules, and makes V8's code cache of it (cli.cjs.cache, read
// by bin/lakeswap.js) by running a small pipeline twice: a first load, then a delivery in new bytes with a day more.
// The AWS SDK and DuckDB's native binding stay outside, loaded from node_modules when a command first needs them; the
// modules lakeswap loads only on demand (DuckDB's API, AWS mode) are bundled but evaluated only when first used.
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
  // A sample of what a command runs every day: a delivery landed in new bytes (its rows checked, partitioned and
  // signed), the changed partitions of raw and of two layers built (one of them mapped by an expression), pointers
  // moved and the catalog file written. The first sync loads a first delivery; the second, whose run writes the cache,
  // lands a cumulative one with a day more (the same days again in other bytes, and a new one).
  const day = (d) => `2026-11-0${d}`;
  const rows = (days) => days.flatMap((d) => [`${day(d)}T10:00:00,${d}1,2.50,completed`, `${day(d)}T11:00:00,${d}2,4.00,open`]);
  writeFileSync(path.join(work, "first.csv"), ["ts,id,amount,status", ...rows([1, 2])].join("\n") + "\n");
  writeFileSync(path.join(work, "second.csv"), ["ts,id,amount,status", ...rows([2, 1, 3])].join("\n") + "\n");
  writeFileSync(path.join(work, "stage.sql"), "SELECT id, amount, ts FROM events_raw WHERE day = {{ day }} AND status = 'completed'\n");
  writeFileSync(path.join(work, "monthly.sql"), "SELECT day AS order_day, count(*) AS events, sum(amount) AS amount FROM events_stage WHERE substr(day, 1, 7) = {{ month }} GROUP BY day\n");
  writeFileSync(
    path.join(work, "lakeswap.yaml"),
    [
      "datasets:",
      "  events:",
      "    source: {format: csv, path: first.csv}",
      "    columns:",
      "      ts: {type: TIMESTAMP, nullable: false}",
      "      id: {type: BIGINT, nullable: false}",
      "      amount: DECIMAL(10,2)",
      "      status: VARCHAR",
      "    partition:",
      "      day: \"strftime(ts, '%Y-%m-%d')\"",
      "    layers:",
      "      - name: stage",
      "        sql: stage.sql",
      '        columns: {id: BIGINT, amount: "DECIMAL(10,2)", ts: TIMESTAMP}',
      "      - name: monthly",
      "        sql: monthly.sql",
      '        columns: {order_day: VARCHAR, events: BIGINT, amount: "DECIMAL(18,2)"}',
      "        inputs:",
      '          map: {month: "substr(day, 1, 7)"}',
      "",
    ].join("\n"),
  );
  const bin = path.join(root, "bin", "lakeswap.js");
  for (const [round, input] of ["first.csv", "second.csv"].entries()) {
    const run = spawnSync(process.execPath, [bin, "--lake", path.join(work, "lake"), "sync", "-c", path.join(work, "lakeswap.yaml"), "--input", path.join(work, input), "--json"], {
      cwd: work,
      // The second sync writes the cache: what a command always runs, not what a first load compiles once.
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
