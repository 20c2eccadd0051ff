import { execFileSync } from "node:child_process";
import { chmod, mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { deliveryFiles } from "../../src/landing/delivery-files.js";

describe("the files a delivery's paths name", () => {
  let dir: string;

  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "lakeswap-files-"));
    for (const name of ["b.csv", "a.csv", ".a.csv.part", "notes.txt", "2026/11/x.csv", "2026/12/y.csv", "2026/12/.z.csv", "[odd] name.csv"]) {
      await mkdir(path.dirname(path.join(dir, name)), { recursive: true });
      await writeFile(path.join(dir, name), "k\n1\n");
    }
  });
  afterEach(() => rm(dir, { recursive: true, force: true }));

  const at = (...names: string[]) => names.map((name) => path.join(dir, name));

  it("expands a glob to its files, sorted, without hidden files (a writer's .part file is not a delivery)", async () => {
    expect(await deliveryFiles(at("*.csv"))).toEqual(at("[odd] name.csv", "a.csv", "b.csv"));
  });

  it("crosses folders with ** and keeps the patterns' order, each file once", async () => {
    expect(await deliveryFiles(at("2026/**/*.csv", "*.csv", "2026/11/x.csv"))).toEqual(
      at("2026/11/x.csv", "2026/12/y.csv", "[odd] name.csv", "a.csv", "b.csv"),
    );
    expect(await deliveryFiles(at("2026/1[2]/*.csv"))).toEqual(at("2026/12/y.csv"));
  });

  it("takes a plain name as it is, hidden or not, and names the pattern that matches nothing", async () => {
    expect(await deliveryFiles(at(".a.csv.part"))).toEqual(at(".a.csv.part"));
    await expect(deliveryFiles(at("*.parquet"))).rejects.toThrow(`no source file matches '${path.join(dir, "*.parquet")}'`);
    await expect(deliveryFiles(at("missing/*.csv"))).rejects.toThrow(/no source file matches .*missing/);
    await expect(deliveryFiles(at("missing.csv"))).rejects.toThrow(/no source file matches .*missing\.csv/);
    await expect(deliveryFiles(at("2026"))).rejects.toThrow(/no source file matches/);
  });
});

describe("a delivery file the process may not read", () => {
  it("is refused before anything is read, naming the file and the fix", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "lakeswap-unreadable-"));
    try {
      await chmod(dir, 0o755);
      for (const name of ["a.csv", "u.csv"]) await writeFile(path.join(dir, name), "k\n1\n", { mode: 0o644 });
      await chmod(path.join(dir, "u.csv"), 0o000);
      const pattern = path.join(dir, "*.csv");
      // Root reads any file: the check then runs as another user, as lakeswap runs in production.
      if (process.getuid?.() !== 0) {
        await expect(deliveryFiles([pattern])).rejects.toThrow(`cannot read the source file '${path.join(dir, "u.csv")}' (EACCES)`);
        return;
      }
      const script = `import("${path.resolve("src/landing/delivery-files.ts")}").then((m) => m.deliveryFiles([${JSON.stringify(pattern)}])).then(() => console.log("read"), (e) => console.log(e.message))`;
      const output = execFileSync("runuser", ["-u", "nobody", "--", process.execPath, "--import", "tsx", "-e", script], { encoding: "utf8", cwd: process.cwd() });
      expect(output).toContain(`cannot read the source file '${path.join(dir, "u.csv")}' (EACCES); nothing of the delivery was loaded`);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("what a glob would leave out without a word", () => {
  let dir: string;
  const at = (...names: string[]) => names.map((name) => path.join(dir, name));

  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "lakeswap-glob-gaps-"));
    for (const name of ["a.csv", "2026/11/x.csv", "archive/old.csv"]) {
      await mkdir(path.dirname(path.join(dir, name)), { recursive: true });
      await writeFile(path.join(dir, name), "k\n1\n");
    }
  });
  afterEach(() => rm(dir, { recursive: true, force: true }));

  it("refuses a matched symbolic link whose target is gone, naming the link and its target, at any depth", async () => {
    await symlink(path.join(dir, "gone.csv"), path.join(dir, "b.csv"));
    await expect(deliveryFiles(at("*.csv"))).rejects.toThrow(
      `the source file '${path.join(dir, "b.csv")}', which '${path.join(dir, "*.csv")}' matches, is a symbolic link to '${path.join(dir, "gone.csv")}', which does not exist`,
    );
    await rm(path.join(dir, "b.csv"));
    await symlink("../../nowhere.csv", path.join(dir, "2026/11/y.csv"));
    await expect(deliveryFiles(at("2026/**/*.csv"))).rejects.toThrow(/2026\/11\/y\.csv', which .* is a symbolic link to '\.\.\/\.\.\/nowhere\.csv', which does not exist: .*nothing of it was loaded\. Restore the file/);
    await expect(deliveryFiles(at("2026/*/y.csv"))).rejects.toThrow(/is a symbolic link to/);
  });

  it("refuses a matched link that loops, and lets links that resolve or that the glob does not match be", async () => {
    await symlink(path.join(dir, "a.csv"), path.join(dir, "c.csv"));
    await symlink(path.join(dir, "gone"), path.join(dir, "notes.txt"));
    await symlink(path.join(dir, "gone"), path.join(dir, ".hidden.csv"));
    await symlink(path.join(dir, "gone"), path.join(dir, "archive/lost.csv"));
    expect(await deliveryFiles(at("*.csv"))).toEqual(at("a.csv", "c.csv"));
    expect(await deliveryFiles(at("2026/**/*.csv"))).toEqual(at("2026/11/x.csv"));
    await symlink(path.join(dir, "loop.csv"), path.join(dir, "loop.csv"));
    await expect(deliveryFiles(at("*.csv"))).rejects.toThrow(`the source file '${path.join(dir, "loop.csv")}', which '${path.join(dir, "*.csv")}' matches, is a symbolic link that loops`);
  });

  it("follows links to folders as the matcher does (a broken link inside one is refused), and walks a link back up only once", async () => {
    await mkdir(path.join(dir, "elsewhere/2026-12"), { recursive: true });
    await writeFile(path.join(dir, "elsewhere/2026-12/z.csv"), "k\n1\n");
    await symlink(path.join(dir, "elsewhere/2026-12"), path.join(dir, "2026/12"));
    await symlink(dir, path.join(dir, "2026/up"));
    expect(await deliveryFiles(at("2026/**/*.csv"))).toContain(path.join(dir, "2026/12/z.csv"));
    await symlink(path.join(dir, "gone.csv"), path.join(dir, "elsewhere/2026-12/y.csv"));
    await expect(deliveryFiles(at("2026/**/*.csv"))).rejects.toThrow(`the source file '${path.join(dir, "2026/12/y.csv")}'`);
    await expect(deliveryFiles(at("2026/*/y.csv"))).rejects.toThrow(/is a symbolic link to .*gone\.csv', which does not exist/);
  });

  it("refuses a glob that reaches a folder it cannot list, and not one that reaches none", async () => {
    await chmod(dir, 0o755);
    for (const folder of ["2026", "2026/11", "archive"]) await chmod(path.join(dir, folder), 0o755);
    await chmod(path.join(dir, "a.csv"), 0o644);
    await chmod(path.join(dir, "2026/11/x.csv"), 0o644);
    await chmod(path.join(dir, "archive"), 0o700);
    const tries = [at("**/*.csv")[0]!, at("*/old.csv")[0]!, at("2026/**/*.csv")[0]!, at("*.csv")[0]!];
    const expected = [
      `cannot list the folder '${path.join(dir, "archive")}', which '${tries[0]}' reaches (EACCES): files in it would be left out of the delivery, so nothing of it was loaded`,
      `cannot list the folder '${path.join(dir, "archive")}', which '${tries[1]}' reaches (EACCES)`,
      JSON.stringify(at("2026/11/x.csv")),
      JSON.stringify(at("a.csv")),
    ];
    // Root lists any folder: the globs then run as another user, as lakeswap runs in production.
    const script = `import("${path.resolve("src/landing/delivery-files.ts")}").then(async (m) => { for (const p of ${JSON.stringify(tries)}) console.log(await m.deliveryFiles([p]).then((f) => JSON.stringify(f), (e) => e.message)); })`;
    const output = process.getuid?.() === 0 ? execFileSync("runuser", ["-u", "nobody", "--", process.execPath, "--import", "tsx", "-e", script], { encoding: "utf8", cwd: process.cwd() }) : "";
    if (process.getuid?.() !== 0) {
      for (const [i, pattern] of tries.entries()) expect(await deliveryFiles([pattern]).then((f) => JSON.stringify(f), (e: Error) => e.message)).toContain(expected[i]);
      return;
    }
    const lines = output.trim().split("\n");
    for (const [i, text] of expected.entries()) expect(lines[i]).toContain(text);
  });
});
