// Issue 9 (items 6, 10, 11, 16): names, flags and --json output of the CLI, as hostile and careless users tried them.
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { embeddedBackend, runCli, spawnCli, type TestBackend } from "../support/lake-fixture.js";
import { runMain } from "../support/main-cli.js";
import { PipelineWorkspace, orders } from "../support/pipeline-fixture.js";
import { treeState } from "../support/tree.js";

let backend: TestBackend & { lakeDir: string };
const cli = (...args: string[]) => runMain([...backend.cliArgs, ...args]);

beforeAll(async () => {
  backend = await embeddedBackend();
  expect((await cli("create-table", "orders", "--partition-keys", "day", "--columns", "id BIGINT")).code).toBe(0);
  const load = await cli("replace", "orders", "--partition", "day=2026-11-01", "--sql", "SELECT range AS id FROM range(10)");
  expect(load.code, load.stderr).toBe(0);
});
afterAll(async () => backend.cleanup());

describe("table names are identifiers before they touch a path (item 6)", () => {
  it("history ../../../evil/victim reads nothing outside the lake", async () => {
    // A JSON file where the old code read it: <lake>/_lakeswap/tables/../../../evil/victim.json
    const evil = path.join(backend.lakeDir, "..", "..", "evil");
    mkdirSync(evil, { recursive: true });
    writeFileSync(path.join(evil, "victim.json"), JSON.stringify({ name: "secret_table", columns: [{ name: "secret", type: "BIGINT" }], partitionKeys: ["day"] }));
    const result = await cli("history", "../../../evil/victim");
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/table name '..\/..\/..\/evil\/victim' is not allowed: use a lowercase letter first/);
    expect(result.stdout).not.toMatch(/secret/);
  });

  it.each([
    ["pin", "../tables/orders", ["--partition", "day=2026-11-01"]],
    ["unpin", "t/../x", ["--partition", "day=2026-11-01"]],
    ["replace", "orders;drop", ["--partition", "day=2026-11-01", "--sql", "SELECT 1 AS id"]],
    ["rollback", "../orders", ["--partition", "day=2026-11-01"]],
    ["gc", "t/../orders", []],
    ["drop-table", "../orders", []],
  ])("%s %j is refused with exit 2 and changes nothing", async (command, name, rest) => {
    const before = treeState(backend.lakeDir);
    const result = await cli(command, name, ...rest);
    expect(result.code, result.stderr).toBe(2);
    expect(result.stderr).toContain(`table name '${name}' is not allowed`);
    expect(treeState(backend.lakeDir)).toEqual(before);
  });
});

describe("flags (item 10)", () => {
  it("refuses syncs --limit abc", async () => {
    const result = await cli("syncs", "--limit", "abc");
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/--limit 'abc' is not a count: use a whole number from 1/);
  });

  it("names a missing --sql-file or --columns-file (exit 2, not a bare ENOENT)", async () => {
    const sql = await cli("replace", "orders", "--partition", "day=2026-11-01", "--sql-file", "no/such.sql");
    expect(sql.code).toBe(2);
    expect(sql.stderr).toMatch(/--sql-file 'no\/such.sql': no such file \(looked at .*no\/such.sql\)/);
    const columns = await cli("create-table", "t2", "--partition-keys", "day", "--columns-file", "nope.txt");
    expect(columns.code).toBe(2);
    expect(columns.stderr).toMatch(/--columns-file 'nope.txt': no such file/);
  });

  it("gives a conflicting create-table the conflict code 9, not 3 'not found'", async () => {
    const result = await cli("create-table", "orders", "--partition-keys", "day", "--columns", "id VARCHAR", "--json");
    expect(result.code).toBe(9);
    expect(JSON.parse(result.stdout)).toMatchObject({ error: { code: "CONFLICT", message: expect.stringContaining("cannot change in place: column id changes from BIGINT to VARCHAR") } });
  });
});

describe("--json prints exactly one JSON document (item 11)", () => {
  it("replace --json prints its result, also with --json before the command", async () => {
    for (const args of [["replace", "orders", "--partition", "day=2026-11-02", "--sql", "SELECT 1 AS id", "--json"], ["--json", "replace", "orders", "--partition", "day=2026-11-03", "--sql", "SELECT 1 AS id"]]) {
      const result = await cli(...args);
      expect(result.code, result.stderr).toBe(0);
      expect(JSON.parse(result.stdout)).toMatchObject({ table: "orders", rows: 1 });
    }
  });

  it("a usage error prints a JSON error", async () => {
    const result = await cli("replace", "orders", "--partition", "day=2026-11-01", "--sql", "SELECT 1 AS id", "--jsn", "--json");
    expect(result.code).toBe(2);
    expect(JSON.parse(result.stdout)).toEqual({ error: { code: "INVALID_INPUT", message: expect.stringContaining("unknown option '--jsn'") } });
  });

  it("piping into a reader that goes away prints no EPIPE stack trace", async () => {
    const child = spawnCli([...backend.cliArgs, "history", "orders"]);
    child.stdout?.destroy();
    let stderr = "";
    child.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.on("close", (c) => resolve(c)));
    expect(stderr).not.toMatch(/EPIPE|\n\s+at /);
    expect(code).toBe(0);
  });

  it("Ctrl-C exits 130 with a message, and a JSON error with --json", async () => {
    // Without --lake the command says which lake it opens: the query runs right after that line.
    const child = spawnCli(["query", "SELECT count(*) FROM range(100000000000) a", "--json"], { LAKESWAP_LAKE: backend.lakeDir });
    let stdout = "";
    let stderr = "";
    child.stdout?.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    const started = new Promise((resolve) => child.stderr?.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
      if (stderr.includes("embedded lake")) resolve(undefined);
    }));
    await started;
    await new Promise((resolve) => setTimeout(resolve, 1000));
    child.kill("SIGINT");
    const code = await new Promise<number | null>((resolve) => child.on("close", (c) => resolve(c)));
    expect(code).toBe(130);
    expect(stderr).toMatch(/lakeswap: interrupted \(Ctrl-C\)/);
    expect(JSON.parse(stdout)).toMatchObject({ error: { code: "INTERRUPTED" } });
  }, 30_000);
});

describe("which lake a command runs on (item 16)", () => {
  const awsEnv = { DATA_OUTPUT_S3_BUCKET: "bucket", SCHEMA_OUTPUT_GLUE_DATABASE_NAME: "db", DATA_OUTPUT_ATHENA_WORKGROUP_NAME: "primary" };

  it("refuses --lake together with an AWS target from the environment", async () => {
    const result = await runMain([...backend.cliArgs, "tables", "--json"], awsEnv);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/--lake '.*' names an embedded lake, but this command runs on AWS \(s3:\/\/bucket, Glue database db\) because DATA_OUTPUT_S3_BUCKET is set: unset DATA_OUTPUT_S3_BUCKET/);
    expect(JSON.parse(result.stdout)).toMatchObject({ error: { code: "INVALID_INPUT" } });
  });

  it("says on stderr which embedded lake runs when --lake does not name it", async () => {
    const result = await runMain(["tables"], { LAKESWAP_LAKE: backend.lakeDir });
    expect(result.code).toBe(0);
    expect(result.stderr).toBe(`lakeswap: embedded lake ${backend.lakeDir} (LAKESWAP_LAKE)\n`);
  });
});

describe("read-only commands leave pending pointer moves (item 16)", () => {
  it("tables reports a pending outbox entry instead of replaying it; the next write completes it", async () => {
    const killed = await runCli([...backend.cliArgs, "replace", "orders", "--partition", "day=2026-11-01", "--sql", "SELECT 7 AS id"], { LAKESWAP_FAULT: "after-outbox:kill" });
    expect(killed.code).not.toBe(0);
    const before = treeState(backend.lakeDir);
    const tables = await cli("tables", "--json");
    expect(tables.code, tables.stderr).toBe(0);
    expect(tables.stderr).toMatch(/lakeswap: 1 pointer move\(s\) recorded by an interrupted writer are pending \(orders\/day=2026-11-01 -> run \d{8}T\d{6}Z-\w+\): this command only reads/);
    expect(treeState(backend.lakeDir)).toEqual(before);
    const write = await cli("replace", "orders", "--partition", "day=2026-11-04", "--sql", "SELECT 1 AS id");
    expect(write.code, write.stderr).toBe(0);
    expect((await cli("tables")).stderr).toBe("");
  }, 60_000);
});

describe("pipeline commands (items 10, 11, 16)", () => {
  let workspace: PipelineWorkspace;
  beforeAll(() => {
    workspace = new PipelineWorkspace();
  });
  afterAll(() => workspace.cleanup());
  const args = () => ["--lake", workspace.lakeDir];

  it("sync --partition with a misspelled key exits 2 naming the known keys, and changes nothing", async () => {
    const result = await runMain([...args(), "sync", "-c", workspace.configFile, "--input", workspace.delivery(orders(2)), "--partition", "dya=2026-11-02"]);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/--partition 'dya=2026-11-02': 'dya' \(did you mean 'day'\?\) is not a partition key of any table of lakeswap.yaml; the keys are: day \(orders_raw, orders_stage\); month \(orders_monthly\)/);
    expect(treeState(workspace.lakeDir)).toEqual({});
  });

  it("a sync with failed partitions (exit 7) prints its report and the error as one JSON document", async () => {
    workspace.writeSql("stage.sql", "SELECT order_id, customer_id, CASE WHEN day = '2026-11-02' THEN error('planted failure') ELSE amount END AS amount, order_ts FROM orders_raw WHERE day = {{ day }}\n");
    const result = await runMain([...args(), "sync", "-c", workspace.configFile, "--input", workspace.delivery(orders(3)), "--json"]);
    expect(result.code, result.stderr).toBe(7);
    const document = JSON.parse(result.stdout) as { syncId: string; totals: { failed: number }; error: { code: string } };
    expect(document.totals.failed).toBeGreaterThan(0);
    expect(document.error.code).toBe("PARTIAL_FAILURE");
    expect(document.syncId).toMatch(/^\d{8}T\d{6}Z-/);
  }, 60_000);

  it("gc and history accept -c", async () => {
    const history = await runMain(["history", "orders_raw", "-c", workspace.configFile, "--json"], { LAKESWAP_LAKE: workspace.lakeDir });
    expect(history.code, history.stderr).toBe(0);
    expect(JSON.parse(history.stdout)).toEqual(expect.arrayContaining([expect.objectContaining({ partition: "day=2026-11-01" })]));
    const gc = await runMain(["gc", "-c", workspace.configFile, "--dry-run", "--json"], { LAKESWAP_LAKE: workspace.lakeDir });
    expect(gc.code, gc.stderr).toBe(0);
    expect(JSON.parse(gc.stdout)).toMatchObject({ dryRun: true });
  }, 30_000);
});
