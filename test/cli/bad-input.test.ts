import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { embeddedBackend, type TestBackend } from "../support/lake-fixture.js";
import { runMain } from "../support/main-cli.js";
import { treeState } from "../support/tree.js";

let backend: TestBackend & { lakeDir: string };
const cli = (...args: string[]) => runMain([...backend.cliArgs, ...args]);

beforeAll(async () => {
  backend = await embeddedBackend();
  const create = await cli("create-table", "orders", "--partition-keys", "day", "--columns", "id BIGINT, amount DOUBLE");
  expect(create.code).toBe(0);
  const load = await cli("replace", "orders", "--partition", "day=2026-11-01", "--sql", "SELECT range AS id, range * 1.5 AS amount FROM range(100)");
  expect(load.stderr).toBe("");
  expect(load.code).toBe(0);
});
afterAll(async () => backend.cleanup());

/** Runs a command that must fail, and checks it changed nothing in the lake. */
async function expectRefused(args: string[], exitCode: number, message: RegExp): Promise<void> {
  const before = treeState(backend.lakeDir);
  const result = await cli(...args);
  expect(result.code, result.stderr).toBe(exitCode);
  expect(result.stderr).toMatch(message);
  expect(result.stderr).not.toMatch(/\n\s+at /); // a message, not a stack trace
  expect(treeState(backend.lakeDir)).toEqual(before);
}

describe("bad input gets a clear error, a non-zero exit code, and changes nothing", () => {
  it.each([
    ["day=../../etc", /partition value '..\/..\/etc' for key 'day' is not allowed: use letters, digits/],
    ["day=2026-11-01/../x", /partition value '2026-11-01\/..\/x' for key 'day'/],
    ["day=x'); DROP TABLE orders; --", /partition value 'x'\); DROP TABLE orders; --' for key 'day'/],
    ['day=a"b', /partition value 'a"b' for key 'day'/],
    ["day=a\\b", /partition value 'a\\b' for key 'day'/],
  ])("replace --partition %j", async (spec, message) => {
    await expectRefused(["replace", "orders", "--partition", spec, "--sql", "SELECT 1 AS id, 1.0 AS amount"], 2, message);
  });

  it.each([
    ["a folder that does not exist", "/nonexistent/lakeswap-tmp", /temporary folder '\/nonexistent\/lakeswap-tmp' is not a folder \(ENOENT\): .*point TMPDIR at a writable folder/],
    ["a file", "/etc/hostname", /temporary folder '\/etc\/hostname' is not a folder \(ENOTDIR\): .*point TMPDIR at a writable folder/],
  ])("refuses a TMPDIR that is %s (exit 2, the folder and the fix), writing nothing", async (_what, tmp, message) => {
    const before = treeState(backend.lakeDir);
    const result = await runMain([...backend.cliArgs, "replace", "orders", "--partition", "day=2026-11-02", "--sql", "SELECT 1 AS id, 1.0 AS amount"], { TMPDIR: tmp });
    expect(result.code, result.stderr).toBe(2);
    expect(result.stderr).toMatch(message);
    expect(treeState(backend.lakeDir)).toEqual(before);
  });

  it("refuses an unknown table, naming the tables there are", async () => {
    await expectRefused(["replace", "ordrs", "--partition", "day=2026-11-01", "--sql", "SELECT 1"], 3, /table 'ordrs' does not exist .*tables here: orders/);
  });

  it("refuses a rollback with no older run", async () => {
    await expectRefused(["rollback", "orders", "--partition", "day=2026-11-01"], 3, /has no older run to roll back to/);
  });

  it("refuses a rollback to a run that does not exist", async () => {
    await expectRefused(
      ["rollback", "orders", "--partition", "day=2026-11-01", "--to", "20200101T000000Z-abcdef"],
      3,
      /run 20200101T000000Z-abcdef of orders\/day=2026-11-01 does not exist/,
    );
    await expectRefused(["rollback", "orders", "--partition", "day=2026-11-01", "--to", "../x"], 2, /'..\/x' is not a run id/);
  });

  it("refuses SQL that fails, keeping the old run", async () => {
    await expectRefused(
      ["replace", "orders", "--partition", "day=2026-11-01", "--sql", "SELECT id, amount FROM no_such_table"],
      6,
      /no_such_table/,
    );
    await expectRefused(
      ["replace", "orders", "--partition", "day=2026-11-01", "--sql", "SELECT 1 AS id; DROP TABLE orders"],
      2,
      /the SQL is 2 statements: lakeswap runs exactly one SELECT .*nothing was run/,
    );
  });

  it("refuses a SELECT whose columns do not match the table", async () => {
    await expectRefused(
      ["replace", "orders", "--partition", "day=2026-11-01", "--sql", "SELECT 1 AS id, 2.0 AS amout"],
      6,
      /lacks column amount; table 'orders' has no column amout/,
    );
  });

  it("refuses rows that belong to another partition", async () => {
    await expectRefused(
      ["replace", "orders", "--partition", "day=2026-11-01", "--sql", "SELECT 1 AS id, 2.0 AS amount, '2026-11-02' AS day"],
      6,
      /day=2026-11-02, which does not belong to partition day=2026-11-01/,
    );
  });

  it("refuses an empty build of a partition that has rows, unless --allow-empty", async () => {
    await expectRefused(
      ["replace", "orders", "--partition", "day=2026-11-01", "--sql", "SELECT id, amount FROM orders WHERE false"],
      5,
      /produced 0 rows, but the partition has 100 rows .*--allow-empty/,
    );
    const allowed = await cli("replace", "orders", "--partition", "day=2026-11-01", "--allow-empty", "--json", "--sql", "SELECT id, amount FROM orders WHERE false");
    expect(allowed.code, allowed.stderr).toBe(0);
    expect(JSON.parse(allowed.stdout)).toMatchObject({ rows: 0, previousRows: 100 });
    const back = await cli("rollback", "orders", "--partition", "day=2026-11-01", "--json");
    expect(JSON.parse(back.stdout)).toMatchObject({ rows: 100 });
  });

  it("refuses unsafe table definitions and prints the error as JSON with --json", async () => {
    await expectRefused(["create-table", "bad", "--partition-keys", "day", "--columns", "id BIGINT); DROP TABLE x; --"], 2, /column 'id' has type/);
    await expectRefused(["create-table", "../bad", "--partition-keys", "day", "--columns", "id BIGINT"], 2, /table name '..\/bad' is not allowed/);
    const result = await cli("history", "nope", "--json");
    expect(result.code).toBe(3);
    expect(JSON.parse(result.stdout)).toMatchObject({ error: { code: "NOT_FOUND", message: expect.stringContaining("'nope'") } });
  });
});
