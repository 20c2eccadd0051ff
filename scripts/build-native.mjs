// Builds lakeswap's DuckDB extension (native/lakeswap_signature.c: signatures; native/lakeswap_lock.c: kernel locks) into
// build/native/lakeswap_signature.duckdb_extension, for the DuckDB that
// @duckdb/node-api runs on this machine.
//
// Run by `npm ci` and `npm install` (the install script, so also where lakeswap
// is installed as a dependency). Without a C compiler it says so and
// exits 0: lakeswap then computes signatures with its SQL form, same results,
// slower. `LAKESWAP_NATIVE=off` skips the build; CC picks the compiler;
// LAKESWAP_NATIVE_OUT builds into another folder (the tests use it).
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { DuckDBInstance } from "@duckdb/node-api";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
/** The signature aggregate and the kernel-lock functions (native/lakeswap_lock.c), one extension. */
const sources = ["lakeswap_signature.c", "lakeswap_lock.c"].map((file) => path.join(root, "native", file));
const outDir = process.env.LAKESWAP_NATIVE_OUT ? path.resolve(process.env.LAKESWAP_NATIVE_OUT) : path.join(root, "build", "native");
const library = path.join(outDir, "lakeswap_signature.so");
const extension = path.join(outDir, "lakeswap_signature.duckdb_extension");

/** The C extension API version the extension is written against (native/duckdb/README.md). */
const C_API_VERSION = "v1.2.0";
const EXTENSION_VERSION = "v3";

function say(message) {
  console.log(`build-native: ${message}`);
}

/** DuckDB's name for this platform (linux_amd64, osx_arm64, ...): the extension's footer must carry it. */
async function duckdbPlatform() {
  const instance = await DuckDBInstance.create(":memory:");
  try {
    const connection = await instance.connect();
    const reader = await connection.runAndReadAll("PRAGMA platform");
    connection.closeSync();
    return String(reader.getRowsJS()[0]?.[0] ?? "");
  } finally {
    instance.closeSync();
  }
}

/**
 * DuckDB's extension footer (512 bytes, after a 22-byte WebAssembly custom-section
 * header named duckdb_signature): eight 32-byte fields, last field first, then a
 * 256-byte signature, zero for an unsigned extension.
 */
function footer(platform) {
  const field = (text) => {
    const bytes = Buffer.alloc(32);
    bytes.write(text, "ascii");
    return bytes;
  };
  const header = Buffer.concat([Buffer.from([0x00, 0x93, 0x04, 0x10]), Buffer.from("duckdb_signature", "ascii"), Buffer.from([0x80, 0x04])]);
  const fields = ["", "", "", "C_STRUCT", EXTENSION_VERSION, C_API_VERSION, platform, "4"].map(field);
  return Buffer.concat([header, ...fields, Buffer.alloc(256)]);
}

async function main() {
  rmSync(extension, { force: true });
  if (process.env.LAKESWAP_NATIVE === "off") {
    say("skipped (LAKESWAP_NATIVE=off); signatures use the SQL form");
    return;
  }
  if (process.platform === "win32") {
    say("not built on Windows; signatures use the SQL form");
    return;
  }
  const compiler = process.env.CC || "cc";
  mkdirSync(outDir, { recursive: true });
  // No -Werror: a newer compiler's new warning must not cost users the fast path (the engine's load check guards correctness).
  const flags = ["-O3", "-std=c11", "-shared", "-fPIC", "-fvisibility=hidden", "-Wall", "-I", path.join(root, "native", "duckdb")];
  if (process.platform === "darwin") flags.push("-undefined", "dynamic_lookup");
  try {
    execFileSync(compiler, [...flags, "-o", library, ...sources], { stdio: ["ignore", "inherit", "inherit"] });
  } catch (error) {
    say(`${compiler} could not build ${sources.map((file) => path.relative(root, file)).join(" and ")} (${error.message.split("\n")[0]}); signatures use the SQL form`);
    return;
  }
  const platform = await duckdbPlatform();
  writeFileSync(extension, Buffer.concat([readFileSync(library), footer(platform)]));
  rmSync(library, { force: true });
  say(`built ${path.relative(root, extension) || extension} for ${platform}`);
}

// An install script must never fail the install: whatever goes wrong, lakeswap still works in the SQL form.
try {
  await main();
} catch (error) {
  rmSync(extension, { force: true });
  say(`not built (${error instanceof Error ? error.message.split("\n")[0] : String(error)}); signatures use the SQL form`);
}
