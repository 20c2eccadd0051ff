import { spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { awsCliEnv, startAwsServices } from "../support/lake-fixture.js";

/**
 * The CLI as `npx lakeswap` runs it: bin/lakeswap.js loading the bundle that
 * `npm ci` builds (dist/bundle/cli.cjs) with its V8 code cache.
 */
const root = fileURLToPath(new URL("../../", import.meta.url));
const bin = path.join(root, "bin", "lakeswap.js");
const bundle = path.join(root, "dist", "bundle", "cli.cjs");
const version = (JSON.parse(readFileSync(path.join(root, "package.json"), "utf8")) as { version: string }).version;

function run(entry: string, args: readonly string[], cwd: string, env: NodeJS.ProcessEnv = process.env) {
  return spawnSync(process.execPath, [entry, ...args], { cwd, encoding: "utf8", env: { ...env, LAKESWAP_CODE_CACHE: "" } });
}

describe("the published CLI (bin/lakeswap.js and its bundle)", () => {
  let work: string;
  beforeAll(() => {
    if (!existsSync(bundle)) throw new Error(`${bundle} is missing: run 'npm run build' (npm ci runs it)`);
    work = mkdtempSync(path.join(tmpdir(), "lakeswap-bundle-test-"));
  });
  afterAll(() => rmSync(work, { recursive: true, force: true }));

  it("syncs a delivery and resends it, building nothing the second time", () => {
    writeFileSync(path.join(work, "orders.csv"), "order_date,id,amount\n2026-11-01,1,2.5\n2026-11-01,2,3.5\n2026-11-02,3,4.0\n");
    writeFileSync(
      path.join(work, "lakeswap.yaml"),
      "datasets:\n  orders:\n    source: {format: csv, path: 'orders*.csv'}\n    columns:\n      order_date: {type: DATE, nullable: false}\n" +
        "      id: {type: BIGINT, nullable: false}\n      amount: {type: DOUBLE}\n    partition:\n      day: \"strftime(order_date, '%Y-%m-%d')\"\n",
    );
    const reports = [0, 1].map(() => {
      const result = run(bin, ["--lake", path.join(work, "lake"), "sync", "-c", path.join(work, "lakeswap.yaml"), "--json"], work);
      expect(result.status, result.stderr).toBe(0);
      return JSON.parse(result.stdout) as { partitions: { partition: string; action: string; rows?: number }[] };
    });
    expect(reports[0]?.partitions.map((p) => [p.partition, p.action])).toEqual([["day=2026-11-01", "build"], ["day=2026-11-02", "build"]]);
    expect(reports[1]?.partitions.map((p) => [p.partition, p.action])).toEqual([["day=2026-11-01", "skip"], ["day=2026-11-02", "skip"]]);
  });

  it("uses a code cache only for the exact bundle it was made from", () => {
    // A copy of the package's entry point and bundle, the cache made from the original, the bundle then changed in
    // place: the same length, which is all V8 itself checks of a cache's source.
    const copy = path.join(work, "package");
    mkdirSync(path.join(copy, "bin"), { recursive: true });
    mkdirSync(path.join(copy, "dist", "bundle"), { recursive: true });
    copyFileSync(bin, path.join(copy, "bin", "lakeswap.js"));
    const changed = readFileSync(bundle, "utf8").replace(`.version(${JSON.stringify(version)})`, '.version("9.9.9")');
    writeFileSync(path.join(copy, "dist", "bundle", "cli.cjs"), changed);
    const cache = path.join(copy, "dist", "bundle", "cli.cjs.cache");
    if (existsSync(`${bundle}.cache`)) copyFileSync(`${bundle}.cache`, cache);

    const first = run(path.join(copy, "bin", "lakeswap.js"), ["--version"], work);
    expect(first.status, first.stderr).toBe(0);
    expect(first.stdout.trim()).toBe("9.9.9");
    // The stale cache was not used, and was replaced by one made from (and stamped with) the changed bundle.
    const digest = createHash("sha256").update(changed).digest();
    expect(readFileSync(cache).subarray(0, 32).equals(digest)).toBe(true);
    const second = run(path.join(copy, "bin", "lakeswap.js"), ["--version"], work);
    expect(second.stdout).toBe(first.stdout);
  });

  it("runs on AWS (the SDK loaded from node_modules): the demo's counts 100, 120, then 100 after rollback", async () => {
    const services = await startAwsServices();
    try {
      const env = awsCliEnv(services, {
        DEMO_BUCKET: "lake",
        DEMO_PREFIX: "bundle-demo",
        DEMO_DATABASE: "bundle_demo",
        ATHENA_WORKGROUP: "primary",
        DEMO_RESULTS_BUCKET: "results",
      });
      // Asynchronous: the emulators answer from this process.
      const result = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
        const child = spawn(process.execPath, [bin, "demo", "--aws", "--json"], { cwd: work, env: { ...env, LAKESWAP_CODE_CACHE: "" } });
        let stdout = "";
        let stderr = "";
        child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
        child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
        child.on("close", (code) => resolve({ code, stdout, stderr }));
      });
      expect(result.code, result.stderr).toBe(0);
      // Node 20 runs it without the AWS SDK's notice that its releases after January 2027 need Node 22 (src/cli/main.ts).
      expect(result.stderr).not.toContain("NodeVersionSupportWarning");
      const report = JSON.parse(result.stdout) as { steps: { step: string; count?: number }[] };
      expect(report.steps.filter((s) => s.step === "count").map((s) => s.count)).toEqual([100, 120, 100]);
    } finally {
      await services.close();
    }
  });

  it("prints the package's version", () => {
    const result = run(bin, ["--version"], work);
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout.trim()).toBe(version);
  });
});
