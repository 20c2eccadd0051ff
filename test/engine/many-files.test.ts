import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { DuckDBInstance } from "@duckdb/node-api";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { landDelivery } from "../../src/landing/duckdb/land-delivery.js";
import { dropLanding } from "../../src/landing/duckdb/landing-relations.js";
import type { LandRequest } from "../../src/landing/landing.js";
import { quoteIdentifier } from "../../src/model/sql.js";
import { tempDir } from "../support/lake-fixture.js";

// A delivery of many small files (as Spark and Hive exports write them) lands within the landing's memory limit. A
// JSONL delivery of 5,000 files of 10 lines ran out of 1 GiB: DuckDB kept the streamed scan's insertion order, and
// with it the batches of every file.

const FILES = 1500;
const LINES = 10;

let workspace: ReturnType<typeof tempDir>;
beforeAll(() => {
  workspace = tempDir("lakeswap-many-files-");
});
afterAll(() => workspace.cleanup());

/** Writes FILES JSONL files of LINES events each into `folder`; `bad` names a file whose 7th line has no valid id. */
function deliveries(folder: string, bad?: number): string[] {
  mkdirSync(folder);
  return Array.from({ length: FILES }, (_, f) => {
    const file = path.join(folder, `part-${String(f).padStart(5, "0")}.jsonl`);
    const lines = Array.from({ length: LINES }, (_, i) => JSON.stringify({ id: f === bad && i === 6 ? "x" : f * LINES + i, day: `2026-11-${String(1 + (f % 20)).padStart(2, "0")}` }));
    writeFileSync(file, `${lines.join("\n")}\n`);
    return file;
  });
}

async function land(files: string[]) {
  const instance = await DuckDBInstance.create(":memory:", { memory_limit: "128MB" });
  const connection = await instance.connect();
  const tables = { landed: "landed", rejected: "rejected" };
  const request: LandRequest = {
    files, format: "jsonl", header: true, delimiter: ",", signatureColumns: ["id"],
    columns: [{ name: "id", type: "BIGINT", nullable: false }, { name: "day", type: "VARCHAR", nullable: false }],
    partition: [{ key: "p", expression: "day" }],
  };
  const count = (relation: string, keys: readonly string[]) =>
    `SELECT ${keys.map((k) => `${quoteIdentifier(k)}, `).join("")}count(*) AS n, 0 AS upper, 0 AS lower FROM ${relation} GROUP BY ALL`;
  try {
    await landDelivery(connection, request, tables, count);
    const [rows, partitions] = (await connection.runAndReadAll(`SELECT count(*), count(DISTINCT p) FROM landed`)).getRowsJS()[0]!.map(Number);
    const bad = (await connection.runAndReadAll(`SELECT file, line, reason FROM rejected`)).getRowsJS().map(([file, line, reason]) => [path.basename(String(file)), Number(line), reason]);
    return { rows, partitions, bad };
  } finally {
    await dropLanding(connection, tables);
    connection.closeSync();
    instance.closeSync();
  }
}

describe(`a JSONL delivery of ${FILES} files of ${LINES} lines, under a 128 MB memory limit`, () => {
  it("lands every event, streamed", async () => {
    expect(await land(deliveries(path.join(workspace.dir, "clean")))).toEqual({ rows: FILES * LINES, partitions: 20, bad: [] });
  }, 60_000);

  it("with a bad row, lands the rest and keeps the bad row with its file and line (read again in order)", async () => {
    const landed = await land(deliveries(path.join(workspace.dir, "bad"), 1234));
    expect(landed).toEqual({ rows: FILES * LINES - 1, partitions: 20, bad: [["part-01234.jsonl", 7, "column id: 'x' is not an integer"]] });
  }, 60_000);
});
