import { execFileSync } from "node:child_process";
import { chmod, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
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
