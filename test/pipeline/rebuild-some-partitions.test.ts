import { writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { queryEmbeddedLake, tempDir } from "../support/lake-fixture.js";
import { runMain } from "../support/main-cli.js";

// A delivery whose rows changed in some of its partitions rebuilds those alone, from the one landing of it: a few of
// them are named in the write's query, many (more than fit in it) in a table of them. Either way each rebuilt
// partition holds exactly the delivery's rows of it, and the others keep their runs.

const cleanups: (() => void)[] = [];
afterAll(() => cleanups.forEach((cleanup) => cleanup()));

const PARTITIONS = 100;

describe("a sync that rebuilds some partitions of a delivery", () => {
  it("rebuilds 3, then 80 of 100 partitions, each with exactly its rows, and skips the rest", async () => {
    const { dir, cleanup } = tempDir("lakeswap-some-partitions-");
    cleanups.push(cleanup);
    const config = path.join(dir, "lakeswap.yaml");
    writeFileSync(
      config,
      "datasets:\n  items:\n    source: {format: csv, path: none}\n    columns: {id: BIGINT, k: BIGINT, v: VARCHAR}\n    partition: {p: \"lpad(CAST(k AS VARCHAR), 3, '0')\"}\n",
    );
    const lakeDir = path.join(dir, "lake");
    let n = 0;
    const deliver = async (changed: number) => {
      const lines = ["id,k,v"];
      for (let k = 0; k < PARTITIONS; k += 1) for (let i = 0; i < 3; i += 1) lines.push(`${k * 10 + i},${k},${k < changed ? `new${changed}` : "old"}`);
      const file = path.join(dir, `delivery-${n++}.csv`);
      writeFileSync(file, `${lines.join("\n")}\n`);
      const result = await runMain(["--lake", lakeDir, "sync", "-c", config, "--input", file, "--json"]);
      expect(result.code, result.stderr).toBe(0);
      const report = JSON.parse(result.stdout) as { partitions: { action: string }[] };
      return report.partitions.filter((p) => p.action === "build").length;
    };
    const content = () => queryEmbeddedLake(lakeDir, "SELECT p, count(*), string_agg(DISTINCT v, ',') FROM items_raw GROUP BY p ORDER BY p");
    const expected = (changed: number) => Array.from({ length: PARTITIONS }, (_, k) => [String(k).padStart(3, "0"), 3, k < changed ? `new${changed}` : "old"]);

    expect(await deliver(0)).toBe(PARTITIONS);
    expect(await content()).toEqual(expected(0));
    expect(await deliver(3)).toBe(3);
    expect(await content()).toEqual(expected(3));
    expect(await deliver(80)).toBe(80);
    expect(await content()).toEqual(expected(80));
  });
});
