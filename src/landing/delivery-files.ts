import { constants, promises as fs } from "node:fs";
import path from "node:path";
import { InvalidInputError } from "../model/errors.js";

/** Characters that make a path a glob (`*`, `?`, `[...]`, `{a,b}`). */
const GLOB_CHARACTERS = /[*?[{]/;

/**
 * The files a delivery's paths and globs name: plain paths checked to exist,
 * globs expanded (`*`, `?`, `[...]`, `**` across folders, `{a,b}`), each
 * glob's matches sorted, duplicates dropped, in the order the patterns come.
 * Hidden files (`.name`, such as a writer's `.part` files) are not matched
 * by a glob, only by name. A pattern that is the path of a file names that file, though it holds glob
 * characters (`orders[1].csv`, as a browser or an export names a second copy). A pattern that matches nothing is an error naming
 * it. Expanded here rather than by DuckDB, so that naming a delivery (a
 * resend of a known one needs nothing else) does not load the engine.
 */
export async function deliveryFiles(patterns: readonly string[]): Promise<string[]> {
  const files: string[] = [];
  for (const pattern of patterns) {
    const literal = await existing(pattern);
    const matched = literal.length === 0 && GLOB_CHARACTERS.test(pattern) ? await expand(pattern) : literal;
    if (matched.length === 0) {
      throw new InvalidInputError(`no source file matches '${pattern}': check the dataset's source.path, or name the delivery with --input FILE`);
    }
    files.push(...matched);
  }
  const unique = [...new Set(files)];
  await assertReadable(unique);
  return unique;
}

/** Refuses a delivery with a file this process may not read, naming it and the fix, before anything of it is read. */
async function assertReadable(files: readonly string[]): Promise<void> {
  for (let start = 0; start < files.length; start += 256) {
    const checked = await Promise.all(files.slice(start, start + 256).map((file) => fs.access(file, constants.R_OK).then(() => undefined, (error: NodeJS.ErrnoException) => [file, error.code] as const)));
    const denied = checked.find((result) => result !== undefined);
    if (denied) {
      throw new InvalidInputError(
        `cannot read the source file '${denied[0]}' (${denied[1] ?? "unreadable"}); nothing of the delivery was loaded. ` +
          "Give the user lakeswap runs as read access to it, or move it out of the dataset's source.path, then rerun",
      );
    }
  }
}

async function existing(name: string): Promise<string[]> {
  const stat = await fs.stat(name).catch(() => undefined);
  return stat?.isFile() ? [path.resolve(name)] : [];
}

/** A glob, matched below its longest folder without glob characters. */
async function expand(pattern: string): Promise<string[]> {
  // Loaded with the first glob: a delivery named by its path (--input FILE) never loads the matcher.
  const { glob } = await import("tinyglobby");
  const segments = path.resolve(pattern).split(path.sep);
  const firstGlob = segments.findIndex((segment) => GLOB_CHARACTERS.test(segment));
  const base = segments.slice(0, firstGlob).join(path.sep) || path.sep;
  const rest = segments.slice(firstGlob).join("/");
  const stat = await fs.stat(base).catch(() => undefined);
  if (!stat?.isDirectory()) return [];
  const matched = await glob(rest, { cwd: base, absolute: true, onlyFiles: true, dot: false, expandDirectories: false, followSymbolicLinks: true });
  return matched.map((file) => path.resolve(file)).sort();
}
