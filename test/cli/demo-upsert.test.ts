import { existsSync, rmSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import { awsCliEnv, embeddedBackend, selectedBackends, startAwsServices, type AwsServices } from "../support/lake-fixture.js";
import { runMain } from "../support/main-cli.js";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface Report {
  lake: string;
  folder: string;
  kept: boolean;
  table: string;
  steps: {
    step: string;
    partitions?: { partition: string; action: string; reason: string; rows?: number }[];
    rollback?: { partition: string; fromRunId: string; toRunId: string };
    rows: { area: string; customer_id: number; name: string; updated: string }[];
  }[];
}

/** `area: id name, ...` of a step's rows, as a reader saw them. */
function byArea(rows: Report["steps"][number]["rows"]): string[] {
  const areas = [...new Set(rows.map((r) => r.area))];
  return areas.map((area) => `${area}: ${rows.filter((r) => r.area === area).map((r) => `${r.customer_id} ${r.name}`).join(", ")}`);
}

/** `partition action reason` of a sync step. */
function actions(step: Report["steps"][number] | undefined): string[] {
  return (step?.partitions ?? []).map((p) => `${p.partition} ${p.action} ${p.reason}`);
}

const MERGED = ["east: 7 Gil", "north: 1 Ada, 2 Bob, 3 Cy, 9 Ivy", "south: 5 Ed", "west: 6 Faye, 8 Hal"];

/** What a user relies on in the story, whichever lake it ran on. */
function expectStory(report: Report): void {
  expect(report.steps.map((s) => s.step)).toEqual(["first-delivery", "second-delivery", "rerun", "rollback", "redo"]);
  const [first, second, rerun, rollback, redo] = report.steps;
  expect(byArea(first!.rows)).toEqual(["east: 7 Gil", "north: 1 Ada, 2 Bo", "south: 3 Cy, 4 Di, 5 Ed", "west: 6 Fay"]);
  // Updated, moved, deleted, the later of two rows of one key, new keys; an area whose merge is what it holds is skipped.
  expect(actions(second)).toEqual([
    "area=east skip unchanged", "area=north build content changed", "area=south build content changed", "area=west build content changed",
  ]);
  expect(byArea(second!.rows)).toEqual(MERGED);
  expect(second!.rows.find((r) => r.customer_id === 6)?.updated).toBe("2026-11-04");
  // The same delivery again builds nothing.
  expect(actions(rerun)).toEqual(["area=east skip unchanged", "area=north skip unchanged", "area=south skip unchanged", "area=west skip unchanged"]);
  expect(byArea(rerun!.rows)).toEqual(MERGED);
  // One partition rolled back: it holds its first run's rows again (Cy, who moved into it, is in no area).
  const moved = rollback!.rollback!;
  expect(moved.partition).toBe("area=north");
  expect(moved.toRunId < moved.fromRunId, `back from ${moved.fromRunId} to an older run, ${moved.toRunId}`).toBe(true);
  expect(byArea(rollback!.rows)).toEqual(["east: 7 Gil", "north: 1 Ada, 2 Bo", "south: 5 Ed", "west: 6 Faye, 8 Hal"]);
  // The next sync redoes that partition only.
  expect(actions(redo)).toEqual(["area=east skip unchanged", "area=north build rolled back", "area=south skip unchanged", "area=west skip unchanged"]);
  expect(redo!.partitions?.find((p) => p.action === "build")?.rows).toBe(4);
  expect(byArea(redo!.rows)).toEqual(MERGED);
}

describe("lakeswap demo upsert", () => {
  // Without --lake and LAKESWAP_LAKE, as on a fresh clone.
  it.skipIf(process.env.LAKESWAP_LAKE !== undefined)("runs in a fresh temporary folder, prints one JSON document with --json, and leaves nothing behind", async () => {
    const result = await runMain(["demo", "upsert", "--json"]);
    expect(result.code, result.stderr).toBe(0);
    // The only word on stderr is which lake it runs on: the demo's own folder.
    expect(result.stderr).toMatch(/^lakeswap: embedded lake \S+lakeswap-upsert-\w+\/lake \(lake: in lakeswap\.yaml\)\n$/);
    const report = JSON.parse(result.stdout) as Report;
    expect(report.lake).toBe(`${report.folder}/lake`);
    expect(report.table).toBe("demo_customers_raw");
    expectStory(report);
    expect(existsSync(report.folder), `${report.folder} is removed`).toBe(false);
  });

  it("runs on a lake named by --lake, prints each step's builds, skips and rows, and drops its table at the end", async () => {
    const backend = await embeddedBackend();
    cleanups.push(() => backend.cleanup());
    const result = await runMain([...backend.cliArgs, "demo", "upsert"]);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    const out = result.stdout;
    expect(out).toContain(`embedded lake at ${backend.lakeDir}`);
    // The rerun's report: every partition skipped, unchanged.
    const rerun = out.slice(out.indexOf("3. "), out.indexOf("4. "));
    expect(rerun.match(/^ {3}skip +area=\w+ +unchanged$/gm)).toHaveLength(4);
    expect(rerun).not.toMatch(/^ {3}build/m);
    expect(out).toMatch(/^ {3}build +area=north +rolled back +4 rows$/m);
    expect(out).toMatch(/^ {5}north +1 Ada, 2 Bob, 3 Cy, 9 Ivy$/m);
    expect(out).toMatch(/teardown: dropped demo_customers_raw and removed \S+lakeswap-upsert-\w+\n$/);
    const tables = await runMain([...backend.cliArgs, "tables", "--json"]);
    expect(tables.stdout).not.toContain("demo_customers_raw");
  });

  it("keeps its folder and its table with --keep", async () => {
    const backend = await embeddedBackend();
    cleanups.push(() => backend.cleanup());
    const result = await runMain([...backend.cliArgs, "demo", "upsert", "--keep", "--json"]);
    expect(result.code, result.stderr).toBe(0);
    const report = JSON.parse(result.stdout) as Report;
    cleanups.push(() => rmSync(report.folder, { recursive: true, force: true }));
    expect(report).toMatchObject({ lake: backend.lakeDir, kept: true });
    expect(existsSync(`${report.folder}/lakeswap.yaml`)).toBe(true);
    const query = await runMain([...backend.cliArgs, "query", "SELECT count(*) AS customers FROM demo_customers_raw", "--json"]);
    expect(query.code, query.stderr).toBe(0);
    expect(query.stdout).toMatch(/"customers": 8/);
  });

  it.runIf(selectedBackends().includes("aws"))("runs on AWS with --aws (S3, Glue, Athena): the same story", async () => {
    const services: AwsServices = await startAwsServices();
    cleanups.push(() => services.close());
    const env = awsCliEnv(services, {
      DEMO_BUCKET: "lake",
      DEMO_PREFIX: "upsert-demo",
      DEMO_DATABASE: "upsert_demo",
      ATHENA_WORKGROUP: "primary",
      DEMO_RESULTS_BUCKET: "results",
    });
    const result = await runMain(["demo", "upsert", "--aws", "--json"], env);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    const report = JSON.parse(result.stdout) as Report;
    expectStory(report);
    expect(services.glue.state.databases().flatMap((d) => services.glue.state.tables(d.Name!).map((t) => t.Name))).not.toContain("demo_customers_raw");
  });
});
