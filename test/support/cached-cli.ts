// What tests start as `lakeswap` (the run's run-cli.cjs, test/support/build-bundles.ts): the bundle of the test entry
// (test/support/run-cli.ts, next to this file as run-cli-code.cjs) compiled with V8's code cache, as bin/lakeswap.js
// runs the published bundle, so that a child does not parse three megabytes of JavaScript each time it starts. The
// run's first command that ends normally makes the cache (run-cli-code.cjs.cache); a cache V8 rejects is made again.
// No digest of the bundle is stored with it (bin/lakeswap.js stores one): a run's folder never sees another bundle.
import { readFileSync, renameSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import vm from "node:vm";

const file = path.join(__dirname, "run-cli-code.cjs");
const cacheFile = `${file}.cache`;
const source = readFileSync(file, "utf8");

let cachedData: Buffer | undefined;
try {
  cachedData = readFileSync(cacheFile);
} catch {
  // No cache yet: compiled from source, and this run makes it.
}
const script = new vm.Script(`(function (exports, require, module, __filename, __dirname) {${source}\n})`, { filename: file, cachedData });
if (cachedData === undefined || script.cachedDataRejected) {
  // At exit, so that the cache holds the functions a command compiled, not only the top level; a killed child writes none.
  process.once("exit", () => {
    try {
      const temporary = `${cacheFile}.${process.pid}`;
      writeFileSync(temporary, script.createCachedData());
      renameSync(temporary, cacheFile);
    } catch {
      // Another child makes it.
    }
  });
}
const entry = { exports: {} };
(script.runInThisContext() as (...args: unknown[]) => void)(entry.exports, createRequire(file), entry, file, path.dirname(file));
