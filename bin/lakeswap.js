#!/usr/bin/env node
// The published entry point runs the compiled CLI, bundled into one script (scripts/bundle.mjs; `npm ci` builds it).
// The script is compiled with V8's code cache made at build time (dist/bundle/cli.cjs.cache), so that a command starts
// without parsing two megabytes of JavaScript: Node 20 has no module compile cache of its own. The cache is used only
// for the exact bytes it was made from (a digest of them is stored with it) and V8 rejects one from another Node.
import { createHash } from "node:crypto";
import { readFileSync, renameSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import vm from "node:vm";

// Ctrl-C while the CLI still loads is marked here and acted on by main() as soon as it runs (a message, the JSON error
// with --json, exit 130: src/cli/main.ts, EARLY_INTERRUPT), rather than killing the process without a word.
const EARLY_INTERRUPT = Symbol.for("lakeswap.interruptedWhileLoading");
const onEarlyInterrupt = () => {
  globalThis[EARLY_INTERRUPT] = true;
};
process.once("SIGINT", onEarlyInterrupt);

const file = fileURLToPath(new URL("../dist/bundle/cli.cjs", import.meta.url));
const cacheFile = `${file}.cache`;
const DIGEST_BYTES = 32;

let bytes;
try {
  bytes = readFileSync(file);
} catch {
  process.stderr.write(`lakeswap: ${file} is missing: build the CLI with 'npm run build' (npm ci does it)\n`);
  process.exit(1);
}
// The digest of the bytes as read: a string would be encoded to UTF-8 again to be hashed.
const digest = createHash("sha256").update(bytes).digest();
// The bundle is ASCII (scripts/bundle.mjs checks it): decoded as Latin-1, the same string without UTF-8's validation.
const source = bytes.toString("latin1");
let cachedData;
try {
  const cache = readFileSync(cacheFile);
  if (cache.subarray(0, DIGEST_BYTES).equals(digest)) cachedData = cache.subarray(DIGEST_BYTES);
} catch {
  // No cache: compiled from source.
}
// The bundle never import()s (scripts/bundle.mjs makes sure): a script compiled from a code cache could not.
const script = new vm.Script(`(function (exports, require, module, __filename, __dirname) {${source}\n})`, { filename: file, cachedData });
const cli = { exports: {} };
script.runInThisContext()(cli.exports, createRequire(file), cli, file, path.dirname(file));
// main() installs its own Ctrl-C handler before it returns its promise; only then is this one removed: a signal
// that arrives in between is then still delivered (Node drops one whose event has no listener for a moment).
const running = cli.exports.main(process.argv);
process.off("SIGINT", onEarlyInterrupt);
process.exitCode = await running;

// The build makes the cache after a run (LAKESWAP_CODE_CACHE=write), so that it holds the functions a sync compiles;
// a cache that is missing or was rejected is made by the next run, where the package folder is writable.
const mode = process.env.LAKESWAP_CODE_CACHE;
if (mode === "write" || (mode !== "skip" && (cachedData === undefined || script.cachedDataRejected))) {
  try {
    const temporary = `${cacheFile}.${process.pid}`;
    writeFileSync(temporary, Buffer.concat([digest, script.createCachedData()]));
    renameSync(temporary, cacheFile);
  } catch {
    // A read-only install runs without the cache.
  }
}
