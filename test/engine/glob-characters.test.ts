import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { DuckDBInstance } from "@duckdb/node-api";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deliveryFiles } from "../../src/landing/delivery-files.js";
import { landDelivery } from "../../src/landing/duckdb/land-delivery.js";
import { dropLanding } from "../../src/landing/duckdb/landing-relations.js";
import type { LandRequest } from "../../src/landing/landing.js";
import { quoteIdentifier } from "../../src/model/sql.js";
import { tempDir } from "../support/lake-fixture.js";
import { runMain } from "../support/main-cli.js";
import { PipelineWorkspace, orders, toCsv } from "../support/pipeline-fixture.js";

// DuckDB's readers take a path with `*`, `?` or `[` as a glob: a delivery file named `a[1].csv` was read as `a1.csv`
// (another file's rows, that file's twice), one named `b*.csv` as every `b…csv` of its folder, and a lake in a folder
// named `lake[1]` could not read its own runs. A file's path is its own name, whatever characters it holds.

let workspace: ReturnType<typeof tempDir>;
let folder: string;
let duck: DuckDBInstance;
beforeAll(async () => {
  workspace = tempDir("lakeswap-glob-characters-");
  // A plain folder: DuckDB takes a path whose folder reads as a glob matching nothing as it is, which would hide the defect.
  folder = path.join(workspace.dir, "input");
  mkdirSync(folder);
  duck = await DuckDBInstance.create(":memory:");
});
afterAll(() => {
  duck.closeSync();
  workspace.cleanup();
});

const columns = [
  { name: "id", type: "BIGINT", nullable: true },
  { name: "note", type: "VARCHAR", nullable: true },
  { name: "day", type: "VARCHAR", nullable: true },
];

/** Writes the delivery files `a[1]` and `b*` and their decoys `a1` and `bz` (which a glob of either name matches) in one format. */
function files(format: "csv" | "jsonl", text: (ids: readonly (number | string)[]) => string, withBadRow = true): string[] {
  const write = (name: string, ids: readonly (number | string)[]): string => {
    const file = path.join(folder, `${name}.${format}`);
    writeFileSync(file, text(ids));
    return file;
  };
  write("a1", [100, 101]);
  write("bz", [300]);
  return [write("a[1]", withBadRow ? [1, 2, "x3"] : [1, 2]), write("b*", [200])];
}

/** CSV of the ids; `quoted`: each note keeps a quote (`"n1""q"""`), which only the exact reader judges. */
const csv = (quoted = false) => (ids: readonly (number | string)[]) =>
  `id,note,day\n${ids.map((id) => `${id},${quoted ? `"n${id}""q"""` : `n${id}`},d`).join("\n")}\n`;
const jsonl = (ids: readonly (number | string)[]) => ids.map((id) => JSON.stringify({ id: String(id), note: `n${id}`, day: "d" })).join("\n") + "\n";

async function land(request: LandRequest, streamed: boolean) {
  const connection = await duck.connect();
  const tables = { landed: `landed_${Math.random().toString(36).slice(2)}`, rejected: `rejected_${Math.random().toString(36).slice(2)}` };
  const count = (relation: string, keys: readonly string[]) =>
    `SELECT ${keys.map((k) => `${quoteIdentifier(k)}, `).join("")}count(*) AS n, 0 AS upper, 0 AS lower FROM ${relation} GROUP BY ALL`;
  try {
    await landDelivery(connection, request, tables, streamed ? count : undefined);
    const good = (await connection.runAndReadAll(`SELECT id FROM ${tables.landed} ORDER BY id`)).getRowsJS().map(([id]) => Number(id));
    const bad = (await connection.runAndReadAll(`SELECT file, line FROM ${tables.rejected} ORDER BY file, line`)).getRowsJS().map(([file, line]) => [path.basename(String(file)), Number(line)]);
    return { good, bad };
  } finally {
    await dropLanding(connection, tables);
    connection.closeSync();
  }
}

describe("a path with glob characters names that one file", () => {
  const base = { header: true, delimiter: ",", columns, partition: [{ key: "p", expression: "day" }], signatureColumns: ["id"] } as const;

  it.each([
    ["csv, streamed", "csv", csv(), true, true],
    ["csv, a quote kept in a field (the exact reader)", "csv", csv(true), true, true],
    ["csv, read line by line", "csv", csv(), false, true],
    ["jsonl, clean (streamed)", "jsonl", jsonl, true, false],
    ["jsonl, with a bad row (read again line by line)", "jsonl", jsonl, true, true],
  ] as const)("%s: each file's own rows land, and a bad row names its file", async (_, format, text, streamed, withBadRow) => {
    const delivery = files(format, text, withBadRow);
    const { good, bad } = await land({ ...base, format, files: delivery }, streamed);
    expect(good).toEqual([1, 2, 200]);
    expect(bad).toEqual(withBadRow ? [[`a[1].${format}`, format === "csv" ? 4 : 3]] : []);
  });

  it("parquet", async () => {
    const pathOf = (name: string): string => path.join(folder, `${name}.parquet`);
    const connection = await duck.connect();
    try {
      for (const [name, ids] of [["a[1]", [1, 2]], ["a1", [100, 101]], ["b*", [200]], ["bz", [300]]] as const) {
        // DuckDB's COPY TO writes the path as it is (no glob on output).
        await connection.run(`COPY (SELECT unnest([${ids.join(", ")}])::BIGINT AS id, 'n' AS note, 'd' AS day) TO '${pathOf(name).replaceAll("'", "''")}' (FORMAT PARQUET)`);
      }
    } finally {
      connection.closeSync();
    }
    const { good } = await land({ ...base, format: "parquet", files: [pathOf("a[1]"), pathOf("b*")] }, true);
    expect(good).toEqual([1, 2, 200]);
  });

  it("a delivery named by a path that exists is that file, though the name reads as a glob", async () => {
    const [exact] = files("csv", csv());
    expect(await deliveryFiles([exact!])).toEqual([exact]);
    // A pattern that is no file's name is still a glob.
    expect((await deliveryFiles([path.join(folder, "a?.csv")])).map((f) => path.basename(f))).toEqual(["a1.csv"]);
  });
});

describe("a lake in a folder whose name holds glob characters", () => {
  it("syncs a pipeline of three layers, and reads it back", async () => {
    const ws = new PipelineWorkspace();
    try {
      const lake = path.join(workspace.dir, "lake[1]*");
      const rows = orders(3, 4);
      const input = path.join(folder, "orders[2].csv");
      writeFileSync(input, toCsv(rows));
      const sync = await runMain(["--lake", lake, "sync", "-c", ws.configFile, "--input", input, "--json"]);
      expect(sync.code, sync.stderr + sync.stdout.slice(0, 2000)).toBe(0);
      const query = await runMain(["--lake", lake, "query", "SELECT count(*) AS n FROM orders_raw", "--json"]);
      expect(query.code, query.stderr).toBe(0);
      expect(JSON.parse(query.stdout)).toEqual([{ n: rows.length }]);
      const monthly = await runMain(["--lake", lake, "query", "SELECT sum(orders) AS n FROM orders_monthly", "--json"]);
      expect(monthly.code, monthly.stderr).toBe(0);
      expect(JSON.parse(monthly.stdout)).toEqual([{ n: rows.filter((r) => r.status === "completed").length }]);
    } finally {
      ws.cleanup();
    }
  });
});
