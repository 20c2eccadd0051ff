// Issue 25, item 20: a full disk, a malformed table definition, a missing bucket and a corrupt sync record each get
// the exit code the README gives them, and a message that names the file (or bucket) and the fix.
import { mkdirSync, readdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { DuckDBInstance } from "@duckdb/node-api";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isNoSpace } from "../../src/model/errors.js";
import { awsCliEnv, sharedAwsServices, tempDir } from "../support/lake-fixture.js";
import { runMain } from "../support/main-cli.js";
import { PipelineWorkspace, orders } from "../support/pipeline-fixture.js";

let dir: string;
let cleanup: () => void;
const lakeDir = () => path.join(dir, "lake");
const cli = (...args: string[]) => runMain(["--lake", lakeDir(), ...args]);

beforeAll(async () => {
  ({ dir, cleanup } = tempDir("lakeswap-store-errors-"));
  expect((await cli("create-table", "orders", "--partition-keys", "day", "--columns", "id BIGINT")).code).toBe(0);
  expect((await cli("replace", "orders", "--partition", "day=2026-11-01", "--sql", "SELECT range AS id FROM range(3)")).code).toBe(0);
});
afterAll(() => cleanup());

describe("a full disk while DuckDB writes a data file is exit 10, not 6", () => {
  it("recognizes DuckDB's own disk-full error (a COPY to /dev/full)", async () => {
    const instance = await DuckDBInstance.create(":memory:");
    const connection = await instance.connect();
    const error = await connection.run("COPY (SELECT range FROM range(100000)) TO '/dev/full' (FORMAT PARQUET)").catch((e: unknown) => e);
    connection.closeSync();
    instance.closeSync();
    expect(String(error)).toMatch(/No space left on device/);
    expect(isNoSpace(error)).toBe(true);
    expect(isNoSpace(new Error("Binder Error: no such column"))).toBe(false);
  });

  it("replace whose run file write fills the disk: exit 10 naming the file, the pointer unchanged, no run left", async () => {
    const before = await cli("history", "orders", "--json");
    const result = await runMain(["--lake", lakeDir(), "replace", "orders", "--partition", "day=2026-11-01", "--sql", "SELECT 7 AS id", "--json"], { LAKESWAP_FAULT: "build-write:enospc" });
    expect(result.code, result.stderr).toBe(10);
    expect(JSON.parse(result.stdout)).toMatchObject({ error: { code: "NO_SPACE" } });
    expect(result.stderr).toMatch(/building orders\/day=2026-11-01 ran out of disk space writing '.*part-.*\.parquet' \(IO Error: .*No space left on device\): the run was removed and the pointer did not move/);
    expect((await cli("history", "orders", "--json")).stdout).toBe(before.stdout);
  });
});

describe("a sync whose builds fill the disk", () => {
  let workspace: PipelineWorkspace;
  beforeAll(() => {
    workspace = new PipelineWorkspace();
  });
  afterAll(() => workspace.cleanup());

  it("stops with NO_SPACE (exit 10) rather than reporting every partition failed (exit 7); no stage pointer moves", async () => {
    const result = await runMain(["--lake", workspace.lakeDir, "sync", "-c", workspace.configFile, "--input", workspace.delivery(orders(3)), "--json"], { LAKESWAP_FAULT: "build-write:enospc" });
    expect(result.code, result.stderr).toBe(10);
    expect(JSON.parse(result.stdout)).toMatchObject({ error: { code: "NO_SPACE", message: expect.stringMatching(/^building orders_stage\/day=2026-11-0\d ran out of disk space/) } });
    const stage = await runMain(["--lake", workspace.lakeDir, "history", "orders_stage", "--json"]);
    expect(stage.code, stage.stderr).toBe(0);
    expect((JSON.parse(stage.stdout) as { runs: unknown[] }[]).flatMap((p) => p.runs)).toEqual([]);
  });
});

describe("a table definition of the wrong shape stops only the commands that need that table (exit 8)", () => {
  const shapes: [string, string, RegExp][] = [
    ["{}", "empty", /it has no 'name'/],
    ["null", "null", /it holds null, not an object/],
    [JSON.stringify({ name: "broken", columns: [{ name: "a" }], partitionKeys: [] }), "column without type", /'columns' is not a list of \{name, type\}/],
    [JSON.stringify({ name: "other", columns: [{ name: "a", type: "BIGINT" }], partitionKeys: [] }), "another table's", /it names table 'other', not 'broken'/],
  ];
  it.each(shapes)("%s (%s): history and query of it exit 8 naming the file; SELECT 1 and the other table work", async (text, _label, why) => {
    const file = path.join(lakeDir(), "_lakeswap", "tables", "broken.json");
    writeFileSync(file, text);
    const message = new RegExp(`table definition '${file.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}' is not a lakeswap table definition: ${why.source}; restore it from a backup, or move it away`);
    for (const args of [["history", "broken"], ["query", "SELECT count(*) FROM broken"], ["tables"]]) {
      const result = await cli(...args, "--json");
      expect(result.code, `${args.join(" ")}: ${result.stderr}`).toBe(8);
      expect(result.stderr).toMatch(message);
      expect(JSON.parse(result.stdout)).toMatchObject({ error: { code: "STORE_ERROR" } });
    }
    expect(await cli("query", "SELECT 1 AS one", "--json")).toMatchObject({ code: 0, stdout: expect.stringContaining('"one": 1') });
    const other = await cli("query", "SELECT count(*) AS n FROM orders", "--json");
    expect(other.code, other.stderr).toBe(0);
    expect(JSON.parse(other.stdout)).toEqual([{ n: 3 }]);
    expect((await cli("history", "orders")).code).toBe(0);
  });
});

describe("a corrupt sync record", () => {
  let workspace: PipelineWorkspace;
  beforeAll(() => {
    workspace = new PipelineWorkspace();
  });
  afterAll(() => workspace.cleanup());

  it("syncs lists the readable records and names the unreadable file (exit 8, in --json too), with no Node warning", async () => {
    const sync = await runMain(["--lake", workspace.lakeDir, "sync", "-c", workspace.configFile, "--input", workspace.delivery(orders(1))]);
    expect(sync.code, sync.stderr).toBe(0);
    const folder = path.join(workspace.lakeDir, "_lakeswap", "syncs");
    const [good] = readdirSync(folder);
    mkdirSync(folder, { recursive: true });
    const corrupt = path.join(folder, "20261101T000000Z-aaaaaa.json");
    writeFileSync(corrupt, "{ not json");
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(warning.message);
    process.on("warning", onWarning);
    try {
      const text = await runMain(["--lake", workspace.lakeDir, "syncs"]);
      expect(text.code).toBe(8);
      expect(text.stdout).toContain(good!.replace(/\.json$/, ""));
      expect(text.stdout).not.toMatch(/no sync has been recorded/);
      expect(text.stderr).toMatch(/lakeswap: sync record '_lakeswap\/syncs\/20261101T000000Z-aaaaaa.json' is not valid JSON .*; move it away and rerun/);
      const json = await runMain(["--lake", workspace.lakeDir, "syncs", "--json"]);
      expect(json.code).toBe(8);
      expect(JSON.parse(json.stdout)).toMatchObject({
        result: [{ syncId: good!.replace(/\.json$/, "") }],
        error: { code: "STORE_ERROR", message: expect.stringContaining("20261101T000000Z-aaaaaa.json") },
      });
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings).toEqual([]);
    } finally {
      process.off("warning", onWarning);
    }
  });
});

describe("a missing S3 bucket", () => {
  let services: Awaited<ReturnType<typeof sharedAwsServices>>;
  beforeAll(async () => {
    services = await sharedAwsServices();
  });
  afterAll(async () => services.close());

  it("exits 8 naming the bucket and the fix, not 1 INTERNAL", async () => {
    const env = awsCliEnv(services, {
      DATA_OUTPUT_S3_BUCKET: "no-such-bucket",
      DATA_OUTPUT_S3_PREFIX: "lake",
      SCHEMA_OUTPUT_GLUE_DATABASE_NAME: "missing_bucket_db",
      DATA_OUTPUT_ATHENA_WORKGROUP_NAME: "primary",
      DATA_OUTPUT_ATHENA_RESULTS_S3_BUCKET: "results",
    });
    const result = await runMain(["tables", "--json"], env);
    expect(result.code, result.stderr).toBe(8);
    expect(result.stderr).toMatch(/the S3 bucket 'no-such-bucket' does not exist \(s3:\w+ on s3:\/\/no-such-bucket\/lake\/.*\): create it, or name the lake's bucket in DATA_OUTPUT_S3_BUCKET \(or data_sinks\)/);
    expect(JSON.parse(result.stdout)).toMatchObject({ error: { code: "STORE_ERROR" } });
  });
});
