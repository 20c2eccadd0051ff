import { promises as fs } from "node:fs";
import path from "node:path";
import { DuckDBInstance } from "@duckdb/node-api";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { countFooterRows } from "../../src/landing/parquet-footers.js";
import { METADATA_FOLDERS } from "../../src/lake/layout.js";
import { LocalStore } from "../../src/store/local-store.js";
import { tempDir } from "../support/lake-fixture.js";

// The audit counts a run's rows from its files' Parquet footers, read from the store (no engine): the counts must be
// DuckDB's own, for footers of any size, and a file that is not whole Parquet must fail naming it.

let workspace: ReturnType<typeof tempDir>;
let store: LocalStore;
const files: { key: string; size: number; rows: number }[] = [];

async function write(key: string, select: string): Promise<void> {
  const instance = await DuckDBInstance.create(":memory:");
  const connection = await instance.connect();
  try {
    const file = store.localPath(key);
    await fs.mkdir(path.dirname(file), { recursive: true });
    await connection.run(`COPY (${select}) TO '${file}' (FORMAT parquet, ROW_GROUP_SIZE 1000)`);
    const rows = Number((await connection.runAndReadAll(`SELECT count(*) FROM '${file}'`)).getRows()[0]?.[0]);
    files.push({ key, size: (await fs.stat(file)).size, rows });
  } finally {
    connection.closeSync();
    instance.closeSync();
  }
}

beforeAll(async () => {
  workspace = tempDir();
  store = new LocalStore(workspace.dir, { folders: METADATA_FOLDERS });
  await write("t/run=a/small.parquet", "SELECT range AS id FROM range(7)");
  await write("t/run=a/empty.parquet", "SELECT range AS id FROM range(0)");
  await write("t/run=a/groups.parquet", "SELECT range AS id, md5(range::VARCHAR) AS tag FROM range(25000)");
  // 1,500 columns of 3 row groups: a footer of several hundred kilobytes, more than the first read of a file's tail.
  await write("t/run=a/wide.parquet", `SELECT ${Array.from({ length: 1500 }, (_, i) => `range + ${i} AS c${i}`).join(", ")} FROM range(2500)`);
});
afterAll(() => workspace.cleanup());

describe("counting rows from Parquet footers", () => {
  it("gives DuckDB's row count for every file, small, empty, of many row groups, and with a footer larger than the first read", async () => {
    const wide = files.find((f) => f.key.endsWith("wide.parquet"))!;
    const bytes = await fs.readFile(store.localPath(wide.key));
    expect(bytes.readUInt32LE(bytes.length - 8), "the wide file's footer").toBeGreaterThan(64 * 1024);
    expect(await countFooterRows(store, files)).toEqual(files.map((f) => f.rows));
    expect(files.map((f) => f.rows)).toEqual([7, 0, 25000, 2500]);
  });

  it("fails naming a file that is truncated, not Parquet, or too short", async () => {
    const whole = files.find((f) => f.key.endsWith("groups.parquet"))!;
    const bytes = await fs.readFile(store.localPath(whole.key));
    await fs.mkdir(store.localPath("t/run=b"), { recursive: true });
    await fs.writeFile(store.localPath("t/run=b/cut.parquet"), bytes.subarray(0, bytes.length - 100));
    await fs.writeFile(store.localPath("t/run=b/text.parquet"), "order_id,amount\n1,2.50\n".repeat(20));
    await fs.writeFile(store.localPath("t/run=b/tiny.parquet"), "PAR1");
    // A footer length that claims more than the file holds.
    const lying = Buffer.from(bytes);
    lying.writeUInt32LE(bytes.length, bytes.length - 8);
    await fs.writeFile(store.localPath("t/run=b/lying.parquet"), lying);
    for (const [name, why] of [
      ["cut", /does not end in the Parquet magic bytes/],
      ["text", /does not end in the Parquet magic bytes/],
      ["tiny", /too short for a Parquet file/],
      ["lying", /more than the file holds/],
    ] as const) {
      const key = `t/run=b/${name}.parquet`;
      const size = (await fs.stat(store.localPath(key))).size;
      await expect(countFooterRows(store, [{ key, size }]), name).rejects.toThrow(new RegExp(`the run file ${key.replace(/[.=]/g, "\\$&")} is not readable Parquet \\(.*${why.source}`));
    }
  });
});
