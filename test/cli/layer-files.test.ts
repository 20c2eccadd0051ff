// Issue 25, item 10: a layer's SQL names tables, never files, so a changed input always rebuilds the layer.
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runMain } from "../support/main-cli.js";
import { PipelineWorkspace, STAGE_SQL, orders } from "../support/pipeline-fixture.js";

let workspace: PipelineWorkspace;
const cli = (...args: string[]) => runMain(["--lake", workspace.lakeDir, ...args]);

beforeAll(async () => {
  workspace = new PipelineWorkspace();
  const first = await cli("sync", "-c", workspace.configFile, "--input", workspace.delivery(orders(1)));
  expect(first.code, first.stderr).toBe(0);
});
afterAll(() => workspace.cleanup());

describe("a layer that reads a lake table's files by path is refused at plan time", () => {
  it("stage SQL with JOIN read_parquet('<lake>/orders_raw/…') exits 2 naming the function and the fix; nothing is built", async () => {
    const files = path.join(workspace.lakeDir, "orders_raw", "**", "*.parquet");
    workspace.writeSql("stage.sql", `SELECT s.order_id, s.customer_id, s.amount, s.order_ts FROM orders_raw s JOIN read_parquet('${files}') r USING (order_id) WHERE s.day = {{ day }}\n`);
    try {
      for (const command of [["plan"], ["sync", "--input", workspace.delivery(orders(2))]]) {
        const result = await cli(...command, "-c", workspace.configFile);
        expect(result.code, result.stderr).toBe(2);
        expect(result.stderr).toMatch(
          // The argument is shortened to 60 characters (with …) where the temporary folder's path is long.
          /datasets\.orders\.layers\.stage \(.*stage\.sql\): the SQL calls the table function read_parquet\('\/.*(orders_raw\/\*\*\/\*\.parquet|…)'\), which reads files or the engine's state: .*declare it in inputs\.tables/,
        );
      }
      const history = await cli("history", "orders_stage", "--json");
      expect((JSON.parse(history.stdout) as unknown[]).length).toBe(1);
    } finally {
      workspace.writeSql("stage.sql", STAGE_SQL);
    }
  });

  it("a replace --sql reading a file as a table (FROM '….parquet') exits 2", async () => {
    const result = await cli("replace", "orders_stage", "--partition", "day=2026-11-01", "--sql", "SELECT * FROM 'elsewhere/orders.parquet'");
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/the SQL reads the file 'elsewhere\/orders.parquet' as a table/);
  });
});
