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
  await assertNothingLeftOut(pattern, base, rest);
  return matched.map((file) => path.resolve(file)).sort();
}

/**
 * Refuses a glob that reaches what the matcher leaves out without a word: a symbolic link it matches whose target is
 * gone (or that loops), and a folder it would look in that cannot be listed. Either would drop files of the delivery
 * silently (a partition replaced from the rest would lose their rows), so nothing is loaded and the entry is named.
 * Walks the folders the pattern can reach below `base`: each segment's folders where the pattern names them one by
 * one, every folder not hidden where it has `**` (a hidden one only where the pattern names hidden folders); links to
 * folders are followed, as the matcher follows them, and each folder is walked once.
 */
async function assertNothingLeftOut(pattern: string, base: string, rest: string): Promise<void> {
  const { default: picomatch } = await import("picomatch");
  const matches = picomatch(rest, { dot: false });
  // Where a brace holds a '/' (`{a/b,c}/*.csv`), segments are not the pattern's folders: every folder is walked.
  const segments = /\{[^}]*\/[^}]*\}/.test(rest) ? ["**"] : rest.split("/");
  // Folders down to the first `**` are the pattern's segments'; below it, any folder may hold a match.
  const anyBelow = segments.findIndex((segment) => segment.includes("**"));
  const hiddenNamed = segments.some((segment) => segment.startsWith("."));
  const segmentMatchers = segments.map((segment) => picomatch(segment, { dot: false }));
  const enters = (name: string, depth: number): boolean => {
    if (anyBelow >= 0 && depth >= anyBelow) return hiddenNamed || !name.startsWith(".");
    return depth < segments.length - 1 && (segmentMatchers[depth]?.(name) ?? false);
  };
  const walk = async (dir: string, relative: string, depth: number): Promise<void> => {
    let entries;
    try {
      entries = await fs.readdir(dir, { withFileTypes: true });
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === "ENOENT" || code === "ENOTDIR") return;
      throw new InvalidInputError(
        `cannot list the folder '${dir}', which '${pattern}' reaches (${code ?? "unreadable"}): files in it would be left out of the delivery, so nothing of it was loaded. ` +
          "Give the user lakeswap runs read and execute access to the folder, or narrow the pattern so it does not reach it, then rerun",
      );
    }
    for (const entry of entries) {
      const name = relative === "" ? entry.name : `${relative}/${entry.name}`;
      const full = path.join(dir, entry.name);
      if (entry.isSymbolicLink() && matches(name)) await assertLinkResolves(full, pattern);
      else if ((entry.isDirectory() || (entry.isSymbolicLink() && (await isFolder(full)))) && enters(entry.name, depth) && (await firstVisit(full))) await walk(full, name, depth + 1);
    }
  };
  // Each folder once, by its real path: the matcher follows links to folders too, and a link may lead back up.
  const visited = new Set<string>();
  const firstVisit = async (dir: string): Promise<boolean> => {
    const real = await fs.realpath(dir).catch(() => dir);
    if (visited.has(real)) return false;
    visited.add(real);
    return true;
  };
  await firstVisit(base);
  await walk(base, "", 0);
}

/** Whether a path leads to a folder (a link is followed); false where it leads nowhere. */
async function isFolder(file: string): Promise<boolean> {
  return (await fs.stat(file).catch(() => undefined))?.isDirectory() ?? false;
}

/** Refuses a matched symbolic link that leads nowhere (its target is gone, or it loops), naming it and its target. */
async function assertLinkResolves(link: string, pattern: string): Promise<void> {
  const failure = await fs.stat(link).then(
    () => undefined,
    (error: NodeJS.ErrnoException) => error.code ?? "unreadable",
  );
  if (failure === undefined) return;
  const target = await fs.readlink(link).catch(() => "?");
  const why = failure === "ELOOP" ? "that loops" : failure === "ENOENT" ? `to '${target}', which does not exist` : `to '${target}', which cannot be reached (${failure})`;
  throw new InvalidInputError(
    `the source file '${link}', which '${pattern}' matches, is a symbolic link ${why}: the delivery would be loaded without it, so nothing of it was loaded. ` +
      "Restore the file the link points to, or remove the link, then rerun",
  );
}
