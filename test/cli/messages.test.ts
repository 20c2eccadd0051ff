// Issue 25, item 19: what the CLI says and which code it exits with when commander, Ctrl-C or a closed stderr is involved.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { spawnCli } from "../support/lake-fixture.js";
import { runMain } from "../support/main-cli.js";
import { PipelineWorkspace, orders } from "../support/pipeline-fixture.js";

describe("usage errors say what is wrong, never commander's internals", () => {
  it("lakeswap --json with no command: exit 2 and a JSON error naming the problem", async () => {
    const result = await runMain(["--json"]);
    expect(result.code).toBe(2);
    expect(JSON.parse(result.stdout)).toEqual({ error: { code: "INVALID_INPUT", message: expect.stringMatching(/^no command given: name one/) } });
    expect(result.stdout + result.stderr).not.toContain("(outputHelp)");
  });

  it("lakeswap with no command: the help and a message on stderr, exit 2", async () => {
    const result = await runMain([]);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/Usage: lakeswap \[options\] \[command\]/);
    expect(result.stderr).toMatch(/lakeswap: no command given: name one/);
    expect(result.stderr).not.toContain("(outputHelp)");
  });

  it.each([[["--bogus"]], [["--json", "--bogus"]], [["--lake", "x", "--bogus", "--json"]], [["query", "--bogus", "SELECT 1", "--json"]]])(
    "an unknown option %j names the option, exit 2",
    async (args) => {
      const result = await runMain(args);
      expect(result.code).toBe(2);
      expect(result.stderr).toContain("unknown option '--bogus'");
      expect(result.stdout + result.stderr).not.toContain("(outputHelp)");
      if (args.includes("--json")) expect(JSON.parse(result.stdout)).toEqual({ error: { code: "INVALID_INPUT", message: "unknown option '--bogus'" } });
    },
  );
});

async function finished(child: ReturnType<typeof spawnCli>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const code = await new Promise<number | null>((resolve) => child.on("close", (c) => resolve(c)));
  return { code, stdout, stderr };
}

describe("Ctrl-C and a closed stderr", () => {
  let workspace: PipelineWorkspace;
  beforeAll(() => {
    workspace = new PipelineWorkspace();
  });
  afterAll(() => workspace.cleanup());

  it("Ctrl-C while the CLI still loads: exit 130, the message on stderr and the JSON error on stdout", async () => {
    const result = await finished(spawnCli(["--lake", workspace.lakeDir, "tables", "--json"], { LAKESWAP_TEST_SIGINT_WHILE_LOADING: "1" }));
    expect(result.code).toBe(130);
    expect(result.stderr).toMatch(/lakeswap: interrupted \(Ctrl-C\): stopped/);
    expect(JSON.parse(result.stdout)).toEqual({ error: { code: "INTERRUPTED", message: expect.stringMatching(/^interrupted \(Ctrl-C\)/) } });
  }, 30_000);

  it("a sync that should exit 7 exits 7 when its stderr reader is gone (no EPIPE crash to exit 1)", async () => {
    workspace.writeSql("stage.sql", "SELECT order_id, customer_id, CASE WHEN day = '2026-11-02' THEN error('planted failure') ELSE amount END AS amount, order_ts FROM orders_raw WHERE day = {{ day }}\n");
    const child = spawnCli(["--lake", workspace.lakeDir, "sync", "-c", workspace.configFile, "--input", workspace.delivery(orders(3)), "--json"]);
    child.stderr?.destroy();
    const result = await finished(child);
    expect(result.code).toBe(7);
    expect(JSON.parse(result.stdout)).toMatchObject({ error: { code: "PARTIAL_FAILURE" } });
  }, 60_000);
});

describe("DuckDB running out of memory", () => {
  let workspace: PipelineWorkspace;
  beforeAll(() => {
    workspace = new PipelineWorkspace();
  });
  afterAll(() => workspace.cleanup());

  it("names LAKESWAP_MEMORY_LIMIT and its value, not DuckDB's SET statements a user cannot run; with room, the same sync then lands", async () => {
    const args = ["--lake", workspace.lakeDir, "sync", "-c", workspace.configFile, "--input", workspace.delivery(orders(3, 200)), "--json"];
    const result = await runMain(args, { LAKESWAP_MEMORY_LIMIT: "1MB" });
    expect(result.code).toBe(1);
    const message = /DuckDB ran out of memory \(.+\); lakeswap's landing works within LAKESWAP_MEMORY_LIMIT=1MB: raise LAKESWAP_MEMORY_LIMIT \(e\.g\. LAKESWAP_MEMORY_LIMIT=4GB\)/;
    expect(result.stderr).toMatch(message);
    expect(result.stderr).not.toMatch(/SET memory_limit|SET threads/);
    expect(JSON.parse(result.stdout)).toMatchObject({ error: { code: "INTERNAL", message: expect.stringMatching(message) } });
    // With room, the same delivery lands.
    const again = await runMain(args);
    expect(again.code, again.stderr).toBe(0);
  });
});
