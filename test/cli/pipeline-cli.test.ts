import { existsSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { NATIVE_EXTENSION_PATH } from "../../src/duckdb/duckdb-open.js";
import { openEmbeddedLake } from "../../src/open/open-lake.js";
import { awsCliEnv, spawnCli, startAwsServices } from "../support/lake-fixture.js";
import { runMain } from "../support/main-cli.js";
import { PipelineWorkspace, orders } from "../support/pipeline-fixture.js";

let workspace: PipelineWorkspace | undefined;
afterEach(() => workspace?.cleanup());

describe("lakeswap plan and sync", () => {
  it("report every partition with table, layer, partition, action, reason, run, rows, seconds, and totals", async () => {
    workspace = new PipelineWorkspace();
    const file = workspace.delivery(orders(2));
    const args = ["--lake", workspace.lakeDir];
    const plan = await runMain([...args, "plan", "-c", workspace.configFile, "--input", file, "--json"]);
    expect(plan.code, plan.stderr).toBe(0);
    expect(JSON.parse(plan.stdout)).toMatchObject({ totals: { build: 5, skip: 0 } });
    // plan takes sync's --allow-duplicates (it changes only write: append datasets' plans, so nothing here).
    const planDuplicates = await runMain([...args, "plan", "-c", workspace.configFile, "--input", file, "--allow-duplicates", "--json"]);
    expect(planDuplicates.code, planDuplicates.stderr).toBe(0);
    expect(JSON.parse(planDuplicates.stdout)).toEqual(JSON.parse(plan.stdout));

    const sync = await runMain([...args, "sync", "-c", workspace.configFile, "--input", file, "--json"]);
    expect(sync.code, sync.stderr).toBe(0);
    const report = JSON.parse(sync.stdout);
    expect(report.partitions).toHaveLength(5);
    for (const p of report.partitions) {
      expect(p).toMatchObject({
        table: expect.any(String),
        layer: expect.stringMatching(/^(raw|stage|analytics)$/),
        partition: expect.any(String),
        action: "build",
        reason: "new",
        run: expect.stringMatching(/^\d{8}T\d{6}Z-[0-9a-f]{6}$/),
        rows: expect.any(Number),
        seconds: expect.any(Number),
      });
    }
    expect(report.totals).toMatchObject({ built: 5, skipped: 0, failed: 0, rows: 20 + 16 + 2 });
    expect(report.loads[0]).toMatchObject({ rowsRead: 20, rowsLoaded: 20, rowsDeadLettered: 0 });
    expect(report.loads[0].signing.form).toBe(existsSync(NATIVE_EXTENSION_PATH) ? "native" : "sql");

    // The same rows in another file (so it is read, not recognized), signed in the SQL form this time: the same
    // signatures, so nothing to build; the report says why it was slower.
    const copy = workspace.delivery(readFileSync(file, "utf8"));
    const again = await runMain([...args, "sync", "-c", workspace.configFile, "--input", copy], { LAKESWAP_NATIVE: "off" });
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(/raw\s+orders_raw\s+0\s+2\s+0/);
    expect(again.stdout).toContain("signatures computed in plain SQL, about 5x slower than with lakeswap's extension: LAKESWAP_NATIVE=off");
  });

  it("reads lakeswap.yaml from the working folder when -c is not given, and says where it looked when there is none", async () => {
    workspace = new PipelineWorkspace();
    const file = workspace.delivery(orders(2));
    const args = ["--lake", workspace.lakeDir];
    const sync = await runMain([...args, "sync", "--input", file, "--json"], {}, { cwd: workspace.dir });
    expect(sync.code, sync.stderr).toBe(0);
    expect(JSON.parse(sync.stdout).totals).toMatchObject({ built: 5, failed: 0 });
    const plan = await runMain([...args, "plan", "--input", file, "--json"], {}, { cwd: workspace.dir });
    expect(plan.code, plan.stderr).toBe(0);
    expect(JSON.parse(plan.stdout)).toMatchObject({ totals: { build: 0, skip: 5 } });

    const elsewhere = path.join(workspace.dir, "sql");
    const missing = await runMain([...args, "sync", "--input", file], {}, { cwd: elsewhere });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain(`config file 'lakeswap.yaml' does not exist (looked for ${path.join(elsewhere, "lakeswap.yaml")}); run lakeswap in the folder of lakeswap.yaml, or pass it with -c`);
  });

  it("lists syncs and undoes one with rollback --sync, text and --json", async () => {
    workspace = new PipelineWorkspace();
    const args = ["--lake", workspace.lakeDir];
    const rows = orders(2);
    const first = await runMain([...args, "sync", "-c", workspace.configFile, "--input", workspace.delivery(rows), "--json"]);
    const firstReport = JSON.parse(first.stdout);
    expect(firstReport.syncId).toMatch(/^\d{8}T\d{6}Z-[0-9a-f]{6}$/);
    const changed = rows.map((r) => (r.id === 104 ? { ...r, amount: "1.00" } : r));
    const second = await runMain([...args, "sync", "-c", workspace.configFile, "--input", workspace.delivery(changed)]);
    expect(second.code, second.stderr).toBe(0);
    const secondId = /^sync (\S+) \(undo with: lakeswap rollback --sync \1\)$/m.exec(second.stdout)?.[1];
    expect(secondId).toBeDefined();

    const listed = await runMain([...args, "syncs", "--json"]);
    expect(listed.code, listed.stderr).toBe(0);
    expect(JSON.parse(listed.stdout).map((r: any) => [r.syncId, r.moves.length])).toEqual([[secondId, 3], [firstReport.syncId, 5]]);
    expect((await runMain([...args, "syncs"])).stdout).toMatch(new RegExp(`${secondId}\\s+\\S+\\s+\\S+\\s+3\\s+orders_raw, orders_stage, orders_monthly`));

    const undone = await runMain([...args, "rollback", "--sync", "last"]);
    expect(undone.code, undone.stderr).toBe(0);
    expect(undone.stdout).toContain(`sync ${secondId}: 3 partition(s) rolled back, 0 removed (new in that sync), 0 skipped`);
    const lake = await openEmbeddedLake(workspace.lakeDir);
    try {
      // Back to the first delivery's amount, not the changed one (1.00).
      expect((await lake.query("SELECT amount FROM orders_raw WHERE order_id = 104")).rows).toEqual([["14.28"]]);
    } finally {
      await lake.close();
    }
    // Again: every partition moved since, so nothing is rolled back, and the exit code says so (3), the reasons listed.
    const again = await runMain([...args, "rollback", "--sync", secondId!, "--json"]);
    expect(again.code, again.stderr).toBe(3);
    expect(JSON.parse(again.stdout).partitions.map((p: any) => p.action)).toEqual(["skipped", "skipped", "skipped"]);
    expect(JSON.parse(again.stdout).error.message).toMatch(/nothing of sync \S+ was rolled back: every partition it moved was skipped/);

    const badId = await runMain([...args, "rollback", "--sync", "yesterday"]);
    expect(badId.code).toBe(2);
    expect(badId.stderr).toMatch(/'yesterday' is not a sync id .* or 'last'; lakeswap syncs lists them/);
    const mixed = await runMain([...args, "rollback", "orders_raw", "--sync", "last"]);
    expect(mixed.code).toBe(2);
    expect(mixed.stderr).toMatch(/--sync rolls back every partition of that sync: give it alone/);
    const nothing = await runMain([...args, "rollback"]);
    expect(nothing.code).toBe(2);
    expect(nothing.stderr).toMatch(/give a table and --partition .* or --sync ID/);
  });

  it("exits 7 when a partition failed, and 2 with the file and line for a bad row", async () => {
    workspace = new PipelineWorkspace();
    workspace.writeSql("monthly.sql", "SELECT day AS order_day, count(*) AS orders, sum(amount) AS revenue FROM orders_stage GROUP BY day HAVING error('analytics is broken')\n");
    const args = ["--lake", workspace.lakeDir];
    const failed = await runMain([...args, "sync", "-c", workspace.configFile, "--input", workspace.delivery(orders(1))]);
    expect(failed.code).toBe(7);
    expect(failed.stderr).toMatch(/1 partition\(s\) failed; rerun the same sync/);
    expect(failed.stdout).toMatch(/month=2026-11\s+failed\s+new.*analytics is broken/);

    const bad = workspace.delivery("order_id,customer_id,amount,status,order_ts,updated_at\n1,1,x,completed,2026-11-01 10:00:00,\n");
    const refused = await runMain([...args, "sync", "-c", workspace.configFile, "--input", bad]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain(`${bad}:2:`);
  });

  it("after a sync killed midway, a rerun leaves every layer correct", async () => {
    workspace = new PipelineWorkspace({ concurrency: 1 });
    const file = workspace.delivery(orders(6, 50));
    const reference = new PipelineWorkspace();
    try {
      // The same delivery synced without interruption, for comparison.
      const clean = await runMain(["--lake", reference.lakeDir, "sync", "-c", workspace.configFile, "--input", file]);
      expect(clean.code, clean.stderr).toBe(0);
      for (const fault of ["after-swap:kill", "during-build:kill"]) {
        const child = spawnCli(["--lake", workspace.lakeDir, "sync", "-c", workspace.configFile, "--input", file], { LAKESWAP_FAULT: fault });
        const signal = await new Promise((resolve) => child.on("close", (_code, s) => resolve(s)));
        expect(signal).toBe("SIGKILL");
      }
      const rerun = await runMain(["--lake", workspace.lakeDir, "sync", "-c", workspace.configFile, "--input", file, "--json"]);
      expect(rerun.code, rerun.stderr).toBe(0);
      expect(JSON.parse(rerun.stdout).totals.failed).toBe(0);
      const settled = await runMain(["--lake", workspace.lakeDir, "sync", "-c", workspace.configFile, "--input", file, "--json"]);
      expect(JSON.parse(settled.stdout).totals).toMatchObject({ built: 0, failed: 0 });

      const [killed, clean2] = [await openEmbeddedLake(workspace.lakeDir), await openEmbeddedLake(reference.lakeDir)];
      try {
        for (const [table, order] of [["orders_raw", "order_id"], ["orders_stage", "order_id"], ["orders_monthly", "order_day"]]) {
          const sql = `SELECT * FROM ${table} ORDER BY ${order}`;
          expect((await killed.query(sql)).rows, table).toEqual((await clean2.query(sql)).rows);
        }
      } finally {
        await killed.close();
        await clean2.close();
      }
    } finally {
      reference.cleanup();
    }
  });
});

describe("the same pipeline on AWS, with only config changed", () => {
  it("syncs through S3, Glue and Athena from a data_sinks Athena block", async () => {
    const services = await startAwsServices();
    workspace = new PipelineWorkspace();
    try {
      const yaml = readFileSync(workspace.configFile, "utf8");
      writeFileSync(
        workspace.configFile,
        `${yaml}data_sinks:\n  warehouse:\n    Athena:\n      s3_bucket: lake\n      s3_prefix: warehouse\n      glue_database_name: shop\n` +
          `      athena_workgroup_name: primary\n      athena_results_s3_bucket: results\n      region: us-east-1\n      endpoint: ${services.s3.endpoint}\n`,
      );
      const env = awsCliEnv(services);
      const file = workspace.delivery(orders(2));
      const first = await runMain(["sync", "-c", workspace.configFile, "--input", file, "--json"], env);
      expect(first.code, `${first.stderr}${first.stdout}`).toBe(0);
      expect(JSON.parse(first.stdout).totals).toMatchObject({ built: 5, failed: 0 });
      const second = await runMain(["sync", "-c", workspace.configFile, "--input", file, "--json"], env);
      expect(JSON.parse(second.stdout).totals).toMatchObject({ built: 0, skipped: 5 });
      // Pointers and signatures live in Glue partition Parameters; derived layers were UNLOADs.
      const stage = services.glue.state.partitions("shop", "orders_stage");
      expect(stage.map((p) => p.Parameters?.["lakeswap.signature"])).toEqual([expect.stringMatching(/^v3:/), expect.stringMatching(/^v3:/)]);
      expect(services.athena.executions.filter((e) => /^UNLOAD/.test(e.query))).toHaveLength(3);
      const rows = await runMain(["query", "SELECT count(*) AS n FROM orders_monthly", "--json"], { ...env, DATA_OUTPUT_S3_BUCKET: "lake", DATA_OUTPUT_S3_PREFIX: "warehouse", SCHEMA_OUTPUT_GLUE_DATABASE_NAME: "shop", DATA_OUTPUT_ATHENA_WORKGROUP_NAME: "primary", DATA_OUTPUT_ATHENA_RESULTS_S3_BUCKET: "results" });
      expect(rows.code, rows.stderr).toBe(0);
      expect(JSON.parse(rows.stdout)).toEqual([{ n: 2 }]);
    } finally {
      await services.close();
    }
  });
});
