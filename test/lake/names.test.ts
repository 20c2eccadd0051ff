import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Lake } from "../../src/lake/lake.js";
import { defineTable } from "../../src/model/table.js";
import { BACKEND_FACTORIES, selectedBackends, type CliResult, type TestBackend } from "../support/lake-fixture.js";
import { runMain } from "../support/main-cli.js";
import { replacePartition } from "../../src/lake/operations/replace.js";
import { readHistory } from "../../src/lake/operations/history.js";
import { rollbackPartition } from "../../src/lake/operations/rollback.js";
import { pinPartition } from "../../src/lake/operations/pin.js";
import { collectGarbage } from "../../src/lake/operations/gc.js";
import { dropTable } from "../../src/lake/operations/drop-table.js";

// Invariant 8: partition values and table names are validated before they reach a path, a store key or SQL.
// The docs (lake.md): partition values use letters, digits, '_', '-' and '.' (a '-' or '.' not first, no '..'), not null or __HIVE_DEFAULT_PARTITION__; table names are
// lowercase identifiers. Anything else is refused (InvalidInputError, exit 2) with a message naming the value.

const TABLE = "orders";
const select = (tag: string, rows: number) => `SELECT CAST(1 AS BIGINT) * ${rows} AS id, '${tag}' AS tag`;

describe.each(selectedBackends())("names on the %s backend", (backendName) => {
  let backend: TestBackend;
  let lake: Lake;
  let current: string;

  const cli = (args: readonly string[]): Promise<CliResult> => runMain([...backend.cliArgs, ...args], { ...backend.cliEnv });

  beforeEach(async () => {
    backend = await BACKEND_FACTORIES[backendName]!();
    lake = await backend.open({ leaseWaitMs: 0 });
    await lake.createTable(
      defineTable({ name: TABLE, columns: [{ name: "id", type: "BIGINT" }, { name: "tag", type: "VARCHAR" }], partitionKeys: ["day"] }),
    );
    current = (await replacePartition(lake, TABLE, "day=2026-11-01", { select: select("a", 1) })).runId;
  });

  afterEach(async () => {
    await lake.close();
    await backend.cleanup();
  });

  /** The lake as it was before: one table, one partition on its one run. */
  async function unchanged(): Promise<void> {
    expect((await lake.listTables()).map((t) => t.name)).toEqual([TABLE]);
    expect((await readHistory(lake, TABLE)).map((h) => [h.partition, h.currentRunId, h.runs.length])).toEqual([["day=2026-11-01", current, 1]]);
  }

  it("a partition value with '..' inside (a..b) is refused by every call and command; one '.' inside (a.b) is allowed and round-trips", async () => {
    const refused = /partition value 'a\.\.b' for key 'day' is not allowed: use letters, digits, '_', '-' and '\.' \(a '-' or '\.' not first, no '\.\.'\)/;
    await expect(replacePartition(lake, TABLE, "day=a..b", { select: select("x", 1) })).rejects.toThrow(refused);
    await expect(readHistory(lake, TABLE, "day=a..b")).rejects.toMatchObject({ code: "INVALID_INPUT" });
    await expect(rollbackPartition(lake, TABLE, "day=a..b")).rejects.toMatchObject({ code: "INVALID_INPUT" });
    await expect(pinPartition(lake, TABLE, "day=a..b")).rejects.toMatchObject({ code: "INVALID_INPUT" });
    await expect(lake.pointer(TABLE, "day=a..b")).rejects.toMatchObject({ code: "INVALID_INPUT" });
    // A partition built by hand (library callers) is checked like parsed text.
    await expect(replacePartition(lake, TABLE, { keys: ["day"], values: ["a..b"] }, { select: select("x", 1) })).rejects.toThrow(refused);
    await expect(replacePartition(lake, TABLE, { keys: ["day"], values: ["../../x"] }, { select: select("x", 1) })).rejects.toMatchObject({ code: "INVALID_INPUT" });
    for (const args of [
      ["replace", TABLE, "--partition", "day=a..b", "--sql", select("x", 1)],
      ["history", TABLE, "--partition", "day=a..b"],
    ]) {
      const result = await cli(args);
      expect(result.code, `lakeswap ${args.join(" ")}: ${result.stderr}`).toBe(2);
      expect(result.stderr).toMatch(refused);
    }
    await unchanged();

    const dotted = await replacePartition(lake, TABLE, "day=a.b", { select: select("dot", 3) });
    expect(dotted).toMatchObject({ partition: "day=a.b", rows: 1 });
    expect(await lake.pointer(TABLE, "day=a.b")).toMatchObject({ runId: dotted.runId });
    expect((await lake.query(`SELECT day, tag, id FROM ${TABLE} ORDER BY day`)).rows).toEqual([
      ["2026-11-01", "a", 1],
      ["a.b", "dot", 3],
    ]);
    expect((await readHistory(lake, TABLE)).map((h) => h.partition)).toEqual(["day=2026-11-01", "day=a.b"]);
    const history = await cli(["history", TABLE, "--partition", "day=a.b", "--json"]);
    expect(history.code, history.stderr).toBe(0);
    expect((JSON.parse(history.stdout) as { partition: string; currentRunId: string }[]).map((h) => [h.partition, h.currentRunId])).toEqual([
      ["day=a.b", dotted.runId],
    ]);
  });

  it("a partition value that readers read as NULL (null in any case, __HIVE_DEFAULT_PARTITION__) is refused by replace, as a call and a command", async () => {
    for (const value of ["null", "NULL", "Null", "__HIVE_DEFAULT_PARTITION__"]) {
      const refused = `partition value '${value}' for key 'day' is not allowed, which readers read as a NULL partition value, not as text`;
      await expect(replacePartition(lake, TABLE, `day=${value}`, { select: select("x", 1) }), value).rejects.toThrow(refused);
      await expect(replacePartition(lake, TABLE, { keys: ["day"], values: [value] }, { select: select("x", 1) }), value).rejects.toThrow(refused);
      const result = await cli(["replace", TABLE, "--partition", `day=${value}`, "--sql", select("x", 1)]);
      expect(result.code, result.stderr).toBe(2);
      expect(result.stderr).toContain(refused);
    }
    await unchanged();
  });

  it("a table name that is a path or SQL (t/../x, orders;drop) is refused by every call and command, before it touches anything", async () => {
    for (const name of ["t/../x", "orders;drop", "../orders", "orders/../orders"]) {
      const refused = { code: "INVALID_INPUT", message: expect.stringContaining(`table name '${name}' is not allowed`) };
      await expect(lake.table(name), name).rejects.toMatchObject(refused);
      await expect(readHistory(lake, name), name).rejects.toMatchObject(refused);
      await expect(pinPartition(lake, name, "day=2026-11-01"), name).rejects.toMatchObject(refused);
      await expect(rollbackPartition(lake, name, "day=2026-11-01"), name).rejects.toMatchObject(refused);
      await expect(replacePartition(lake, name, "day=2026-11-01", { select: select("x", 1) }), name).rejects.toMatchObject(refused);
      await expect(collectGarbage(lake, name, { graceMs: 0 }), name).rejects.toMatchObject(refused);
      await expect(dropTable(lake, name), name).rejects.toMatchObject(refused);
    }
    for (const args of [
      ["history", "t/../x"],
      ["pin", "t/../x", "--partition", "day=2026-11-01"],
      ["replace", "t/../x", "--partition", "day=2026-11-01", "--sql", select("x", 1)],
      ["rollback", "orders;drop", "--partition", "day=2026-11-01"],
      ["gc", "orders;drop"],
      ["drop-table", "orders;drop"],
    ]) {
      const result = await cli(args);
      expect(result.code, `lakeswap ${args.join(" ")}: ${result.stderr}`).toBe(2);
      expect(result.stderr).toContain(`table name '${args[1]}' is not allowed`);
    }
    await unchanged();
  });
});
